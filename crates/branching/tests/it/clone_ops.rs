//! Operations on a shallow clone, opened as every caller opens a table location
//! (`arbor_timeline::layout::open_location`): writes (upsert, delete, insert), merge-on-read
//! compaction, cleans with the hardest policies, a TTL run and the clean that reclaims its
//! partition, branch + tag + publish, restore, and validation. After each, the clone reads its
//! model, the source reads as before, **the source's object list is unchanged** (nothing a clone
//! does deletes or writes a file in the source's location), every file the clone's writes
//! created is in the clone's own location, and `arbor_branching::validate` /
//! `arbor_mdt::validate::validate_table` report no discrepancy on the clone.
//!
//! The clones here are made by [`clone_of`] (`arbor_branching::clone::clone_table` of the
//! source's main head; local source and clone directories through the registry opener).

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_branching::clone::{clone_table, CloneAt, CloneRequest};
use arbor_branching::{create_branch, create_tag, open_branch, publish, BranchSource};
use arbor_cleaner::{create_savepoint, CleanOptions, CleanPolicy};
use arbor_storage::{Storage, StorageExt, StorageOptions};
use arbor_table::read::TableReader;
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::clone_rule::file_name_instant;
use arbor_timeline::layout::{
    normalize_location, open_location, CloneDescriptor, CloneState, LocationOpener, RegistryOpener,
};
use arbor_timeline::{InstantTime, MetaRoot};

use arbor_testkit_tables::{batch, create, rows, rows_of, Model, Row, TestTable};

/// A source table (local, in a temporary directory) and a shallow clone of its main head in
/// another temporary directory.
pub(crate) struct Pair {
    /// The source.
    pub src: TestTable,
    /// Holds the clone's directory.
    pub _dir: tempfile::TempDir,
    /// The clone's location, normalized.
    pub clone_loc: String,
    /// Opens locations through the registry.
    pub opener: RegistryOpener,
    /// The clone point.
    pub at: InstantTime,
}

impl Pair {
    /// The clone as every caller opens it (`open_location`).
    pub async fn clone_storage(&self) -> Arc<dyn Storage> {
        open_location(&self.clone_loc, &self.opener).await.unwrap()
    }

    /// A main handle of the clone.
    pub async fn clone_table(&self) -> Table {
        Table::open(self.clone_storage().await).await.unwrap()
    }

    /// The clone's own location, raw.
    pub fn clone_own(&self) -> Arc<dyn Storage> {
        self.opener.open(&self.clone_loc).unwrap()
    }

    /// The clone's main rows (latest snapshot).
    pub async fn clone_rows(&self) -> Vec<Row> {
        let reader = TableReader::open(self.clone_storage().await).await.unwrap();
        rows_of(&reader.snapshot(None).await.unwrap())
    }

    /// Asserts both validations of the clone's root `branch` (main for `None`) report nothing.
    pub async fn assert_clone_valid(&self, branch: Option<&str>, step: &str) {
        let storage = self.clone_storage().await;
        let report = arbor_branching::validate(&storage, branch).await.unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{step}: branching validate: {:?}",
            report.discrepancies
        );
        let root = arbor_branching::select_root(&storage, branch)
            .await
            .unwrap();
        let report = arbor_mdt::validate::validate_table(root.view(storage.clone()))
            .await
            .unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{step}: mdt validate: {:?}",
            report.discrepancies
        );
        assert!(report.mdt_files > 0, "{step}: nothing validated");
        assert_eq!(
            report.mdt_files, report.storage_files,
            "{step}: every listed file found"
        );
    }

    /// Every data file in the clone's own location carries an instant after the clone point
    /// (a file of the source's never lands there).
    pub async fn assert_own_files_are_the_clones(&self, step: &str) {
        for o in self.clone_own().list_all("").await.unwrap() {
            if o.key.starts_with(".hoodie") {
                continue;
            }
            let name = o.key.rsplit('/').next().unwrap_or(&o.key);
            if let Some(i) = file_name_instant(name) {
                assert!(
                    i > self.at.as_str(),
                    "{step}: {} in the clone is not the clone's",
                    o.key
                );
            }
        }
    }
}

/// Makes a shallow clone of `src`'s main head (its latest write `at`) in a new directory with
/// `clone_table`, and checks what it reports: the clone point, the pin on the source, no data
/// file copied.
pub(crate) async fn clone_of(src: TestTable, at: InstantTime) -> Pair {
    let opener = RegistryOpener::new(StorageOptions::default());
    let src_loc = normalize_location(src.base.to_str().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("clone");
    std::fs::create_dir_all(&target).unwrap();
    let clone_loc = normalize_location(target.to_str().unwrap()).unwrap();
    let out = clone_table(
        &opener,
        &CloneRequest {
            source: src_loc.clone(),
            target: clone_loc.clone(),
            at: CloneAt::Main,
            tag_branch: None,
            deep: false,
        },
    )
    .await
    .unwrap();
    assert_eq!(out.instant, at);
    assert_eq!(out.location, clone_loc);
    assert_eq!((out.files_copied, out.bytes_copied), (0, 0));
    assert_eq!(out.pins.len(), 1);
    let own = opener.open(&clone_loc).unwrap();
    let (d, _) = CloneDescriptor::load(own.as_ref()).await.unwrap().unwrap();
    assert_eq!(d.state, CloneState::Active);
    assert_eq!(d.clone_point().unwrap(), Some(at.clone()));
    Pair {
        src,
        _dir: dir,
        clone_loc,
        opener,
        at,
    }
}

/// A source of `tt` with two writes (every key, then an update of some), cloned at its head.
async fn pair(tt: TableType) -> (Pair, Model) {
    let src = create(tt, true).await;
    let mut model = Model::default();
    let mut at = None;
    for r in [rows(0..10, 1, "a"), rows(0..4, 2, "b")] {
        at = Some(src.write(WriteOperation::Upsert, &r).await);
        model.upsert(&r);
    }
    (clone_of(src, at.unwrap()).await, model)
}

/// Writes on the clone's handle `t`.
async fn write(t: &Table, op: WriteOperation, r: &[Row]) -> InstantTime {
    t.write(op, vec![batch(r)]).await.unwrap().instant
}

fn keep_versions(n: usize, archive: bool) -> CleanOptions {
    CleanOptions {
        policy: CleanPolicy::KeepLatestFileVersions(n),
        archive,
        ..CleanOptions::default()
    }
}

fn keep_commits(n: usize, archive: bool) -> CleanOptions {
    CleanOptions {
        policy: CleanPolicy::KeepLatestCommits(n),
        archive,
        ..CleanOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_clone_ops_writes_on_a_clone_never_touch_the_source_and_read_as_the_model() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let (p, src_model) = pair(tt).await;
        let before = p.src.listing().await;
        assert_eq!(
            p.clone_rows().await,
            src_model.sorted(),
            "{tt:?}: fresh clone"
        );
        p.assert_clone_valid(None, "fresh clone").await;

        let c = p.clone_table().await;
        let mut model = src_model.clone();
        let up = rows(0..6, 3, "c");
        let t1 = write(&c, WriteOperation::Upsert, &up).await;
        model.upsert(&up);
        assert!(
            t1 > p.at,
            "{tt:?}: the clone's clock issued {t1} <= {}",
            p.at
        );
        let del = rows(6..8, 3, "c");
        write(&c, WriteOperation::Delete, &del).await;
        model.delete(&del);
        let ins = rows(20..23, 3, "c");
        write(&c, WriteOperation::Insert, &ins).await;
        model.upsert(&ins);
        assert_eq!(p.clone_rows().await, model.sorted(), "{tt:?}: clone");
        assert_eq!(p.src.read(None).await, src_model.sorted(), "{tt:?}: source");
        assert_eq!(
            p.src.listing().await,
            before,
            "{tt:?}: source objects changed"
        );
        p.assert_own_files_are_the_clones("writes").await;
        p.assert_clone_valid(None, "after writes").await;

        // The source's writes never change the clone.
        let more = rows(0..10, 9, "s");
        p.src.write(WriteOperation::Upsert, &more).await;
        assert_eq!(
            p.clone_rows().await,
            model.sorted(),
            "{tt:?}: clone after source write"
        );
        p.assert_clone_valid(None, "after a source write").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_clone_ops_mor_compaction_on_a_clone_reads_the_same_and_writes_only_its_own() {
    let (p, mut model) = pair(TableType::MergeOnRead).await;
    let before = p.src.listing().await;
    let c = p.clone_table().await;
    for (ts, tag) in [(3, "c"), (4, "d")] {
        let r = rows(0..5, ts, tag);
        write(&c, WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
    let done = c.compact().await.unwrap();
    assert!(!done.is_empty(), "nothing compacted");
    assert!(done.iter().all(|d| d.instant > p.at));
    assert_eq!(p.clone_rows().await, model.sorted());
    assert_eq!(p.src.listing().await, before, "source objects changed");
    p.assert_own_files_are_the_clones("compaction").await;
    p.assert_clone_valid(None, "after compaction").await;
    // A write after the compaction reads on it.
    let r = rows(2..4, 5, "e");
    write(&p.clone_table().await, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_eq!(p.clone_rows().await, model.sorted());
    p.assert_clone_valid(None, "write after compaction").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_clone_ops_hard_cleans_on_a_clone_never_delete_a_source_file() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let (p, mut model) = pair(tt).await;
        let before = p.src.listing().await;
        let c = p.clone_table().await;
        for ts in 3..6 {
            // Every key: every inherited file group gets a newer slice in the clone.
            let r = rows(0..10, ts, "c");
            write(&c, WriteOperation::Upsert, &r).await;
            model.upsert(&r);
        }
        if tt == TableType::MergeOnRead {
            c.compact().await.unwrap();
        }
        let own_before = own_data_files(&p).await;
        for options in [keep_versions(1, true), keep_commits(1, true)] {
            let out = arbor_branching::clean(&p.clone_table().await, options)
                .await
                .unwrap();
            assert_eq!(
                p.src.listing().await,
                before,
                "{tt:?}: source objects changed"
            );
            assert_eq!(
                p.clone_rows().await,
                model.sorted(),
                "{tt:?}: clone after clean"
            );
            let _ = out;
        }
        let own_after = own_data_files(&p).await;
        assert!(
            own_after < own_before,
            "{tt:?}: the clone's own superseded files were not cleaned ({own_before} -> {own_after})"
        );
        p.assert_clone_valid(None, "after hard cleans").await;
        // The source still reads everything it had.
        assert_eq!(p.src.listing().await, before);
        p.src.assert_valid("source after the clone's cleans").await;
    }
}

/// `region=eu` expires on the clone (count policy keeping the greatest partition, `us`).
fn keep_one_partition() -> TtlPolicy {
    TtlPolicy {
        strategy: TtlStrategy::Count,
        retain: Retention::Count(1),
        scope: PolicyScope::Default { fields: vec![] },
        time_field: None,
        format: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_clone_ops_ttl_run_and_clean_on_a_clone_reclaim_only_the_clones_files() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let (p, src_model) = pair(tt).await;
        let before = p.src.listing().await;
        let c = p.clone_table().await;
        let mut model = src_model.clone();
        // Own files in both partitions (eu: odd ids).
        let r = rows(0..6, 3, "c");
        write(&c, WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        c.set_ttl_policy(keep_one_partition()).await.unwrap();
        let c = p.clone_table().await;
        let out = c.run_ttl(&TtlRunOptions::default()).await.unwrap();
        assert_eq!(out.plan.expired_partitions(), vec!["region=eu"], "{tt:?}");
        model.rows.retain(|_, row| row.1 != "eu");
        assert_eq!(p.clone_rows().await, model.sorted(), "{tt:?}: after TTL");
        let cleaned = arbor_branching::clean(&p.clone_table().await, keep_commits(1, false))
            .await
            .unwrap();
        assert_eq!(p.clone_rows().await, model.sorted(), "{tt:?}: after clean");
        assert_eq!(
            p.src.listing().await,
            before,
            "{tt:?}: source objects changed"
        );
        let own_eu: Vec<String> = p
            .clone_own()
            .list_all("region=eu")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        assert!(
            own_eu.is_empty(),
            "{tt:?}: the clone still holds {own_eu:?} (clean {cleaned:?})"
        );
        // The source's eu files are all still there, and the source reads as before.
        assert!(before.iter().any(|k| k.starts_with("region=eu/")));
        assert_eq!(p.src.read(None).await, src_model.sorted(), "{tt:?}: source");
        p.assert_clone_valid(None, "after TTL and clean").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_clone_ops_branch_tag_and_publish_on_a_clone() {
    let (p, mut model) = pair(TableType::MergeOnRead).await;
    let before = p.src.listing().await;
    let c = p.clone_table().await;
    let r = rows(0..3, 3, "c");
    let t = write(&c, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    let tagged = model.clone();
    create_tag(&c, "exp", None, None).await.unwrap();
    create_branch(&c, "try", BranchSource::MainHead)
        .await
        .unwrap();
    let storage = p.clone_storage().await;
    let b = open_branch(storage.clone(), "try").await.unwrap();
    let mut branch_model = model.clone();
    let r = rows(4..8, 4, "b");
    write(&b, WriteOperation::Upsert, &r).await;
    branch_model.upsert(&r);
    p.assert_clone_valid(Some("try"), "branch write").await;
    // A branch from the clone's tag reads the tag.
    create_branch(&c, "fromtag", BranchSource::Tag("exp"))
        .await
        .unwrap();
    let reader = arbor_branching::open_reader(storage.clone(), Some("fromtag"))
        .await
        .unwrap();
    assert_eq!(
        rows_of(&reader.snapshot(None).await.unwrap()),
        tagged.sorted()
    );
    let out = publish(&b).await.unwrap();
    assert_eq!(out.publication, 1);
    let main = arbor_timeline::resolve_main(storage.as_ref())
        .await
        .unwrap();
    assert_eq!(main, MetaRoot::Publication(1));
    assert_eq!(
        p.clone_rows().await,
        branch_model.sorted(),
        "main after publish"
    );
    let (tag, at) = arbor_branching::tag_reader(storage.clone(), None, "exp")
        .await
        .unwrap();
    assert_eq!(at, t);
    assert_eq!(
        rows_of(&tag.snapshot(Some(&at)).await.unwrap()),
        tagged.sorted()
    );
    p.assert_clone_valid(None, "after publish").await;
    p.assert_own_files_are_the_clones("branch and publish")
        .await;
    // A clean of the clone's new main keeps the tag's and the other branch's files.
    arbor_branching::clean(&p.clone_table().await, keep_versions(1, false))
        .await
        .unwrap();
    let (tag, at) = arbor_branching::tag_reader(storage.clone(), None, "exp")
        .await
        .unwrap();
    assert_eq!(
        rows_of(&tag.snapshot(Some(&at)).await.unwrap()),
        tagged.sorted()
    );
    assert_eq!(p.src.listing().await, before, "source objects changed");
    p.assert_clone_valid(None, "after clean").await;
    p.assert_clone_valid(Some("fromtag"), "other branch after clean")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_clone_ops_restore_after_the_clone_point_works_and_before_it_is_refused() {
    let src = create(TableType::CopyOnWrite, true).await;
    let mut src_model = Model::default();
    let first = rows(0..10, 1, "a");
    let w1 = src.write(WriteOperation::Upsert, &first).await;
    src_model.upsert(&first);
    let second = rows(0..4, 2, "b");
    let w2 = src.write(WriteOperation::Upsert, &second).await;
    src_model.upsert(&second);
    let p = clone_of(src, w2).await;
    let before = p.src.listing().await;
    let c = p.clone_table().await;
    let mut model = src_model.clone();
    let r = rows(0..2, 3, "c");
    let s = write(&c, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    let at_s = model.clone();
    create_savepoint(&c, Some(&s), "after the clone point")
        .await
        .unwrap();
    let r = rows(0..10, 4, "d");
    write(&c, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_eq!(p.clone_rows().await, model.sorted());

    let out = arbor_branching::restore(&p.clone_table().await, &s)
        .await
        .unwrap();
    assert_eq!(out.rolled_back.len(), 1);
    assert_eq!(p.clone_rows().await, at_s.sorted(), "restored");
    assert_eq!(p.src.listing().await, before, "source objects changed");
    p.assert_clone_valid(None, "after restore").await;

    // A restore before the clone point is refused and changes nothing: the clone keeps no
    // history before it (its creation recorded that, so a savepoint there is refused too), and
    // the restore names the clone point whatever savepoints exist.
    let clone_table_now = p.clone_table().await;
    let err = create_savepoint(&clone_table_now, Some(&w1), "before the clone point")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cleaned"), "{err}");
    let own_before = own_objects(&p).await;
    let err = arbor_branching::restore(&p.clone_table().await, &w1)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("clone point"), "{text}");
    assert!(text.contains(p.at.as_str()), "{text}");
    assert_eq!(
        own_objects(&p).await,
        own_before,
        "a refused restore changed the clone"
    );
    assert_eq!(p.clone_rows().await, at_s.sorted());

    // A restore to the clone point itself rolls back only the clone's own instants.
    arbor_cleaner::delete_savepoint(&p.clone_table().await, &s)
        .await
        .unwrap();
    create_savepoint(&p.clone_table().await, Some(&p.at), "the clone point")
        .await
        .unwrap();
    let out = arbor_branching::restore(&p.clone_table().await, &p.at)
        .await
        .unwrap();
    assert!(out.rolled_back.iter().all(|t| *t > p.at), "{out:?}");
    assert_eq!(
        p.clone_rows().await,
        src_model.sorted(),
        "restored to the clone point"
    );
    p.assert_clone_valid(None, "after restore to the clone point")
        .await;
    assert_eq!(p.src.listing().await, before, "source objects changed");
}

/// Every object in the clone's own location except locks and heartbeats.
async fn own_objects(p: &Pair) -> BTreeSet<String> {
    p.clone_own()
        .list_all("")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .filter(|k| !k.starts_with(".hoodie/.locks") && !k.starts_with(".hoodie/.heartbeat"))
        .collect()
}

/// The data files (outside `.hoodie/`) stored in the clone's own location.
async fn own_data_files(p: &Pair) -> usize {
    p.clone_own()
        .list_all("")
        .await
        .unwrap()
        .into_iter()
        .filter(|o| {
            let name = o.key.rsplit('/').next().unwrap_or(&o.key);
            !o.key.starts_with(".hoodie") && file_name_instant(name).is_some()
        })
        .count()
}
