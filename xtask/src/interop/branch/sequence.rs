//! One scenario's steps: main writes, the branch and its clean, the publications, later main
//! writes, each step's readings and checks.

use std::path::Path;
use std::sync::Arc;

use arbor_branching::{create_branch, open_branch, open_reader, publish, BranchSource};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::{resolve_main, InstantTime, MetaRoot};

use super::cases::BranchScenario;
use super::cases::BRANCH;
use super::cases::MAIN_ROWS;
use super::cases::NEW_REGION;
use super::record::hudi;
use super::record::Pending;
use super::record::PendingCheck;
use super::record::Reading;
use super::record::Recorder;
use super::view::peer_view;
use crate::interop::data::{self, hash, key, row, Row};
use crate::interop::model::Model;
use crate::interop::scenario::copy_dir;

/// Runs one scenario under `dir`; a step that fails ends it with a failed check at its position.
pub(super) async fn run_scenario(s: BranchScenario, dir: &Path) -> Vec<PendingCheck> {
    let files = dir.join("digests");
    let mut rec = Recorder {
        dir: files.clone(),
        next: 0,
        position: "1:main".to_string(),
        instant: String::new(),
        checks: Vec::new(),
    };
    let outcome = match std::fs::create_dir_all(&files) {
        Ok(()) => scenario(s, dir, &mut rec).await,
        Err(e) => Err(format!("cannot create {}: {e}", files.display())),
    };
    if let Err(e) = outcome {
        rec.push(
            "steps",
            Pending::Done(Err(format!("later steps not run: {e}"))),
        );
    }
    rec.checks
}

fn local_storage(dir: &Path) -> Result<Arc<dyn Storage>, String> {
    Ok(Arc::new(ObjectStoreStorage::local(dir).map_err(|e| {
        format!("storage at {}: {e}", dir.display())
    })?))
}

/// Writes `rows` on `table`; returns the instant.
async fn write(
    table: &Table,
    op: WriteOperation,
    rows: &[Row],
    what: &str,
) -> Result<InstantTime, String> {
    let batch = data::to_batch(rows)?;
    table
        .write(op, vec![batch])
        .await
        .map(|r| r.instant)
        .map_err(|e| format!("{what}: {e}"))
}

/// The current rows of the keys `pick` selects, at row version `version`.
fn updates(model: &Model, version: u64, pick: impl Fn(u64) -> bool) -> Vec<Row> {
    (0..1000)
        .filter(|n| model.get(&key(*n)).is_some() && pick(*n))
        .map(|n| {
            let mut r = row(n, version);
            if let Some(stored) = model.get(&key(n)) {
                r.region = stored.region;
            }
            r
        })
        .collect()
}

/// The stored rows of the keys `pick` selects (what a delete is given).
fn stored(model: &Model, pick: impl Fn(u64) -> bool) -> Vec<Row> {
    (0..1000)
        .filter(|n| pick(*n))
        .filter_map(|n| model.get(&key(n)).cloned())
        .collect()
}

fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter().map(|r| r.id.clone()).collect()
}

/// The validation of `branch` (main for `None`) by `arbor_branching::validate`.
async fn validate(storage: &Arc<dyn Storage>, branch: Option<&str>) -> Result<(), String> {
    let report = arbor_branching::validate(storage, branch)
        .await
        .map_err(|e| format!("validate: {e}"))?;
    if !report.has_metadata_table {
        return Err("no metadata table".to_string());
    }
    if report.discrepancies.is_empty() {
        Ok(())
    } else {
        let shown: Vec<String> = report
            .discrepancies
            .iter()
            .take(5)
            .map(ToString::to_string)
            .collect();
        Err(format!(
            "{} discrepancies: {}",
            report.discrepancies.len(),
            shown.join("; ")
        ))
    }
}

async fn scenario(s: BranchScenario, dir: &Path, rec: &mut Recorder) -> Result<(), String> {
    let base = dir.join("table");
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let base = base
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", base.display()))?;
    let storage = local_storage(&base)?;
    let table = Table::create(storage.clone(), s.create_options())
        .await
        .map_err(|e| format!("create: {e}"))?;

    // 1. Main: insert, (record index), upsert, delete.
    let mut main = Model::default();
    let rows: Vec<Row> = (0..MAIN_ROWS).map(|n| row(n, 0)).collect();
    let t = write(&table, WriteOperation::Insert, &rows, "insert on main").await?;
    main.upsert(&rows, t.as_str());
    if s.record_index {
        table
            .create_record_index()
            .await
            .map_err(|e| format!("create_record_index: {e}"))?;
    }
    let mut rows = updates(&main, 1, |n| hash(n, 101) % 4 == 0);
    rows.extend((MAIN_ROWS..MAIN_ROWS + 30).map(|n| row(n, 1)));
    let t = write(&table, WriteOperation::Upsert, &rows, "upsert on main").await?;
    main.upsert(&rows, t.as_str());
    let rows = stored(&main, |n| hash(n, 77) % 7 == 0);
    let t = write(&table, WriteOperation::Delete, &rows, "delete on main").await?;
    main.delete(&keys(&rows));
    rec.at("1:main", &t);
    let before = dir.join("main-before-branch");
    copy_dir(&base, &before)?;
    let arbor_main_before = rec.arbor(TableReader::open(storage.clone()).await).await;
    let main_model = rec.model(&main);
    rec.push(
        "main",
        Pending::Same(vec![
            Reading::table("hudi-rs main", hudi(&before)),
            Reading::table("arbor main", arbor_main_before.clone()),
            Reading::model("model main", main_model.clone()),
        ]),
    );

    // 2. Branch `audit`: upserts, a delete, a new partition, (compaction), clean, upsert.
    rec.position = "2:branch".to_string();
    create_branch(&table, BRANCH, BranchSource::MainHead)
        .await
        .map_err(|e| format!("create_branch {BRANCH}: {e}"))?;
    let b = open_branch(storage.clone(), BRANCH)
        .await
        .map_err(|e| format!("open_branch {BRANCH}: {e}"))?;
    let mut branch = main.clone();
    let mut rows = updates(&branch, 2, |n| hash(n, 102) % 3 == 0);
    rows.extend((MAIN_ROWS + 30..MAIN_ROWS + 50).map(|n| row(n, 2)));
    let t = write(&b, WriteOperation::Upsert, &rows, "upsert on the branch").await?;
    branch.upsert(&rows, t.as_str());
    let rows = stored(&branch, |n| hash(n, 78) % 9 == 0);
    write(&b, WriteOperation::Delete, &rows, "delete on the branch").await?;
    branch.delete(&keys(&rows));
    let rows: Vec<Row> = (600..630)
        .map(|n| {
            let mut r = row(n, 2);
            r.region = NEW_REGION;
            r
        })
        .collect();
    let t = write(
        &b,
        WriteOperation::Upsert,
        &rows,
        "upsert into a new partition on the branch",
    )
    .await?;
    branch.upsert(&rows, t.as_str());
    let rows = updates(&branch, 3, |n| hash(n, 103) % 3 == 0);
    let t = write(
        &b,
        WriteOperation::Upsert,
        &rows,
        "second upsert on the branch",
    )
    .await?;
    branch.upsert(&rows, t.as_str());
    rec.at("2:branch", &t);
    // Decided now, reported after the last upsert (whose instant heads the report line).
    let mut services = Vec::new();
    if s.table_type == TableType::MergeOnRead {
        let done = b
            .compact()
            .await
            .map_err(|e| format!("compaction on the branch: {e}"))?;
        services.push((
            "compaction",
            if done.is_empty() {
                Err("compaction on the branch compacted nothing after upserts".to_string())
            } else {
                Ok(())
            },
        ));
    }
    let cleaned = arbor_branching::clean(
        &b,
        CleanOptions {
            policy: CleanPolicy::KeepLatestCommits(1),
            ..CleanOptions::default()
        },
    )
    .await
    .map_err(|e| format!("clean on the branch: {e}"))?;
    services.push((
        "clean",
        if cleaned.deleted > 0 {
            Ok(())
        } else {
            Err(format!(
                "clean on the branch (keep the latest commit) deleted no file; plan {:?}",
                cleaned.plan
            ))
        },
    ));
    let rows = updates(&branch, 4, |n| hash(n, 104) % 5 == 0);
    let last = write(
        &b,
        WriteOperation::Upsert,
        &rows,
        "last upsert on the branch",
    )
    .await?;
    branch.upsert(&rows, last.as_str());
    let t = last;
    rec.at("2:branch", &t);
    for (query, result) in services {
        rec.push(query, Pending::Done(result));
    }

    let arbor_main_after = rec.arbor(TableReader::open(storage.clone()).await).await;
    let arbor_branch = rec
        .arbor(open_reader(storage.clone(), Some(BRANCH)).await)
        .await;
    let branch_model = rec.model(&branch);
    // hudi-rs reads copies taken now: later steps change the table.
    let at_branch = dir.join("main-after-branch-writes");
    copy_dir(&base, &at_branch)?;
    let branch_view = dir.join(format!("view-{BRANCH}"));
    let branch_view_side = peer_view(
        &at_branch,
        &MetaRoot::Branch(BRANCH.to_string()),
        &branch_view,
    )
    .map(|()| branch_view);
    rec.push(
        "peer_main_kept",
        Pending::Same(vec![
            Reading::table("hudi-rs main after branch writes", hudi(&at_branch)),
            Reading::table("hudi-rs main before branch writes", hudi(&before)),
        ]),
    );
    rec.push(
        "peer_main_arbor",
        Pending::Same(vec![
            Reading::table("hudi-rs main after branch writes", hudi(&at_branch)),
            Reading::table("arbor main after branch writes", arbor_main_after),
            Reading::table("arbor main before branch writes", arbor_main_before),
            Reading::model("model main", main_model),
        ]),
    );
    rec.push(
        "arbor_branch",
        Pending::Same(vec![
            Reading::table("arbor branch", arbor_branch.clone()),
            Reading::model("model branch", branch_model.clone()),
        ]),
    );
    rec.push(
        "peer_branch_view",
        Pending::Same(vec![
            Reading::table(
                "hudi-rs branch view",
                branch_view_side.and_then(|d| hudi(&d)),
            ),
            Reading::table("arbor branch", arbor_branch.clone()),
        ]),
    );
    rec.push(
        "validate_branch",
        Pending::Done(validate(&storage, Some(BRANCH)).await),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );

    // 3. Publication.
    let published = publish(&b)
        .await
        .map_err(|e| format!("publish {BRANCH}: {e}"))?;
    let n = published.publication;
    rec.at(&format!("3:published p{n}"), &t);
    let resolved = resolve_main(storage.as_ref())
        .await
        .map_err(|e| format!("resolve_main after publish: {e}"));
    rec.push(
        "publish",
        Pending::Done(match resolved {
            Ok(MetaRoot::Publication(m)) if m == n && published.head.as_ref() == Some(&t) => Ok(()),
            Ok(other) => Err(format!(
                "after publication p{n} (head {:?}, branch head {t}) main resolves to {other}",
                published.head.as_ref().map(ToString::to_string)
            )),
            Err(e) => Err(e),
        }),
    );
    let arbor_main_published = rec.arbor(TableReader::open(storage.clone()).await).await;
    let at_publish = dir.join(format!("main-after-p{n}"));
    copy_dir(&base, &at_publish)?;
    let pub_view = dir.join(format!("view-p{n}"));
    let pub_view_side =
        peer_view(&at_publish, &MetaRoot::Publication(n), &pub_view).map(|()| pub_view);
    rec.push(
        "arbor_main_published",
        Pending::Same(vec![
            Reading::table("arbor main after publication", arbor_main_published),
            Reading::table("arbor branch before publication", arbor_branch.clone()),
            Reading::model("model branch", branch_model),
        ]),
    );
    rec.push(
        "peer_publication_view",
        Pending::Same(vec![
            Reading::table(
                &format!("hudi-rs publication view p{n}"),
                pub_view_side.and_then(|d| hudi(&d)),
            ),
            Reading::table("arbor branch before publication", arbor_branch),
        ]),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );
    // hudi-rs at the table path itself follows the publication (the root hoodie.properties
    // point at p<N>'s timelines): it reads exactly arbor's main.
    let arbor_main_at_publish = rec.arbor(TableReader::open(storage.clone()).await).await;
    let branch_model_again = rec.model(&branch);
    rec.push(
        "peer_main_published",
        Pending::Same(vec![
            Reading::table(&format!("hudi-rs main after p{n}"), hudi(&at_publish)),
            Reading::table(&format!("arbor main after p{n}"), arbor_main_at_publish),
            Reading::model("model branch", branch_model_again),
        ]),
    );

    // 4. Three further writes on main (they land in p<N>'s timeline), then a clean of main.
    let main_table = Table::open(storage.clone())
        .await
        .map_err(|e| format!("open main after publication: {e}"))?;
    let mut model = branch.clone();
    let rows = updates(&model, 5, |n| hash(n, 105) % 4 == 0);
    let t = write(
        &main_table,
        WriteOperation::Upsert,
        &rows,
        "upsert on main after p1",
    )
    .await?;
    model.upsert(&rows, t.as_str());
    let rows = stored(&model, |n| hash(n, 79) % 11 == 0);
    write(
        &main_table,
        WriteOperation::Delete,
        &rows,
        "delete on main after p1",
    )
    .await?;
    model.delete(&keys(&rows));
    let rows: Vec<Row> = (700..720).map(|n| row(n, 6)).collect();
    let t = write(
        &main_table,
        WriteOperation::Upsert,
        &rows,
        "insert on main after p1",
    )
    .await?;
    model.upsert(&rows, t.as_str());
    arbor_branching::clean(
        &main_table,
        CleanOptions {
            policy: CleanPolicy::KeepLatestCommits(1),
            ..CleanOptions::default()
        },
    )
    .await
    .map_err(|e| format!("clean of main after p{n}: {e}"))?;
    rec.at(&format!("4:main writes after p{n}"), &t);
    let after_writes = dir.join(format!("main-writes-after-p{n}"));
    copy_dir(&base, &after_writes)?;
    let arbor_later = rec.arbor(TableReader::open(storage.clone()).await).await;
    let model_later = rec.model(&model);
    rec.push(
        "peer_main_later_writes",
        Pending::Same(vec![
            Reading::table("hudi-rs main after writes and a clean", hudi(&after_writes)),
            Reading::table("arbor main after writes and a clean", arbor_later),
            Reading::model("model main", model_later),
        ]),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );

    // 5. A second publication: branch `audit2` from main's head, one upsert, published.
    create_branch(&main_table, "audit2", BranchSource::MainHead)
        .await
        .map_err(|e| format!("create_branch audit2: {e}"))?;
    let b2 = open_branch(storage.clone(), "audit2")
        .await
        .map_err(|e| format!("open_branch audit2: {e}"))?;
    let rows = updates(&model, 7, |n| hash(n, 107) % 3 == 0);
    let t = write(&b2, WriteOperation::Upsert, &rows, "upsert on audit2").await?;
    model.upsert(&rows, t.as_str());
    let second = publish(&b2)
        .await
        .map_err(|e| format!("publish audit2: {e}"))?;
    let m = second.publication;
    rec.at(&format!("5:published p{m}"), &t);
    rec.push(
        "publish_again",
        Pending::Done(if m > n && second.legacy_root && published.legacy_root {
            Ok(())
        } else {
            Err(format!(
                "second publication p{m} after p{n} (root repointed: {}, {})",
                published.legacy_root, second.legacy_root
            ))
        }),
    );
    let at_second = dir.join(format!("main-after-p{m}"));
    copy_dir(&base, &at_second)?;
    let arbor_second = rec.arbor(TableReader::open(storage.clone()).await).await;
    let model_second = rec.model(&model);
    rec.push(
        "peer_main_published_again",
        Pending::Same(vec![
            Reading::table(&format!("hudi-rs main after p{m}"), hudi(&at_second)),
            Reading::table(&format!("arbor main after p{m}"), arbor_second),
            Reading::model("model main", model_second),
        ]),
    );
    rec.push(
        "validate_main",
        Pending::Done(validate(&storage, None).await),
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// The whole sequence on copy-on-write without the peer: every check decided without
    /// digests passes, and every reading arbor makes has a request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn test_run_scenario_cow_local_checks_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let s = BranchScenario::all()[0];
        let checks = run_scenario(s, tmp.path()).await;
        let queries: Vec<&str> = checks.iter().map(|c| c.query.as_str()).collect();
        assert!(queries.contains(&"peer_publication_view"), "{queries:?}");
        for c in &checks {
            match &c.pending {
                Pending::Done(r) => assert_eq!(r, &Ok(()), "{} {}", c.position, c.query),
                Pending::Same(readings) => {
                    for r in readings {
                        assert!(
                            r.request.is_ok(),
                            "{} {}: {:?}",
                            c.query,
                            r.label,
                            r.request
                        );
                    }
                }
            }
        }
    }
}
