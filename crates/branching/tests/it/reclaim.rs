//! Reclaiming what nothing references: a write-audit-publish branch that is rejected (dropped)
//! frees its files at the next clean, so the table's bytes on disk come back to exactly what
//! main, its tags and its clones need; `clean --orphans` removes planted files and nothing else.
//!
//! The branch writes `ARBOR_TEST_DROP_BRANCH_MB` megabytes (default 6; the run used 100)
//! of incompressible rows, in its own new partition and as updates of main's file groups (log
//! files on merge-on-read).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use arbor_branching::clone::CloneAt;
use arbor_branching::{clean, create_branch, create_tag, drop_branch, BranchSource};
use arbor_cleaner::reclaim::{clean_orphans, references, DROPPED_DIR};
use arbor_cleaner::CleanOptions;
use arbor_storage::StorageExt;
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, Model, Row, TestTable};
use arbor_timeline::config::TableType;

use crate::clone_support::{clone_ok, read_at};

/// Every file outside `.hoodie/` with its size.
fn walk(base: &Path) -> BTreeMap<String, u64> {
    arbor_testkit::data_walk(base)
}

fn bytes(files: &BTreeMap<String, u64>) -> u64 {
    files.values().sum()
}

/// `n` rows with ids from `start`, in `region`, with 96 hex characters of noise each.
fn noisy_rows(start: u32, n: u32, region: &str, ts: i64) -> Vec<Row> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(start);
    (start..start + n)
        .map(|i| {
            let mut name = String::with_capacity(96);
            for _ in 0..6 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                name.push_str(&format!("{x:016x}"));
            }
            (format!("k{i:07}"), region.to_string(), ts, name)
        })
        .collect()
}

fn branch_megabytes() -> u32 {
    std::env::var("ARBOR_TEST_DROP_BRANCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(6)
}

async fn dropped_branch_is_reclaimed(tt: TableType) {
    let t: TestTable = create(tt, true).await;
    let mut model = Model::default();
    let main_rows = noisy_rows(0, 2_000, "us", 1);
    t.write(WriteOperation::Upsert, &main_rows).await;
    model.upsert(&main_rows);
    let more = rows(0..50, 2, "m");
    t.write(WriteOperation::Upsert, &more).await;
    model.upsert(&more);
    create_tag(&t.table, "v1", None, None).await.unwrap();
    let clone_dir = tempfile::tempdir().unwrap();
    let clone = clone_dir.path().join("c");
    clone_ok(&t.base, &clone, CloneAt::Main).await;
    let before = walk(&t.base);

    // The audit branch: updates of main's rows, and a big insert into its own partition.
    create_branch(&t.table, "audit", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("audit").await;
    t.write_on(&b, WriteOperation::Upsert, &noisy_rows(0, 1_000, "us", 5))
        .await;
    // About 110 bytes of parquet per noisy row.
    let total = branch_megabytes() * 1_000_000 / 110;
    let chunk = 20_000;
    let mut start = 100_000;
    while start < 100_000 + total {
        let n = chunk.min(100_000 + total - start);
        t.write_on(&b, WriteOperation::Insert, &noisy_rows(start, n, "apac", 5))
            .await;
        start += n;
    }
    let with_branch = walk(&t.base);
    let branch_bytes = bytes(&with_branch) - bytes(&before);
    assert!(
        branch_bytes > u64::from(branch_megabytes()) * 700_000,
        "{tt:?}: the branch wrote only {branch_bytes} bytes"
    );

    drop_branch(&t.table, "audit").await.unwrap();
    assert_eq!(
        t.storage.list_all(DROPPED_DIR).await.unwrap().len(),
        1,
        "{tt:?}: the drop records the branch's files"
    );
    // Dropping alone frees nothing yet (as before); the next clean does.
    assert_eq!(walk(&t.base), with_branch, "{tt:?}");
    let out = clean(&t.table, CleanOptions::default()).await.unwrap();
    let after = walk(&t.base);
    let freed_data: u64 = with_branch
        .iter()
        .filter(|(k, _)| !after.contains_key(*k) && !k.contains(".hoodie_partition_metadata"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        out.reclaimed.bytes(),
        freed_data,
        "{tt:?}: the clean reports the data files it freed"
    );
    assert_eq!(
        after, before,
        "{tt:?}: after the clean the table holds exactly what main, its tag and its clone need"
    );
    assert!(t.storage.list_all(DROPPED_DIR).await.unwrap().is_empty());
    // Every data file left is referenced, and main, the tag and the clone read as before.
    let refs = references(&t.storage).await.unwrap();
    for key in after
        .keys()
        .filter(|k| k.ends_with(".parquet") || k.contains(".log."))
    {
        assert!(refs.references(key), "{tt:?}: {key} is unreferenced");
    }
    assert_eq!(t.read(None).await, model.sorted(), "{tt:?}");
    assert_eq!(read_at(&clone, None).await, model.sorted(), "{tt:?}");
    t.assert_valid("after the reclaim").await;
    t.assert_peer_agrees("reclaim peer check", "after the reclaim")
        .await;
    eprintln!(
        "{tt:?}: branch wrote {branch_bytes} bytes in {} files; the clean freed {} bytes in {} files",
        with_branch.len() - before.len(),
        out.reclaimed.bytes(),
        out.reclaimed.files.len()
    );
}

#[tokio::test]
async fn test_dropped_branch_files_are_freed_by_the_next_clean_cow() {
    dropped_branch_is_reclaimed(TableType::CopyOnWrite).await;
}

#[tokio::test]
async fn test_dropped_branch_files_are_freed_by_the_next_clean_mor() {
    dropped_branch_is_reclaimed(TableType::MergeOnRead).await;
}

#[tokio::test]
async fn test_published_then_dropped_branch_frees_nothing_main_reads() {
    let t = create(TableType::MergeOnRead, true).await;
    let r1 = rows(0..40, 1, "a");
    t.write(WriteOperation::Upsert, &r1).await;
    create_branch(&t.table, "wap", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("wap").await;
    let r2 = rows(20..60, 2, "b");
    t.write_on(&b, WriteOperation::Upsert, &r2).await;
    // Publication drops the branch it published: its files are now main's.
    arbor_branching::publish(&b).await.unwrap();
    let mut model = Model::default();
    model.upsert(&r1);
    model.upsert(&r2);
    let before = walk(&t.base);
    let main = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    let out = clean(&main, CleanOptions::default()).await.unwrap();
    assert!(out.reclaimed.files.is_empty(), "{:?}", out.reclaimed);
    assert_eq!(walk(&t.base), before);
    assert_eq!(t.read(None).await, model.sorted());
}

#[tokio::test]
async fn test_clean_orphans_removes_planted_files_and_nothing_else() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let r1 = rows(0..40, 1, "a");
        t.write(WriteOperation::Upsert, &r1).await;
        let r2 = rows(0..10, 2, "b");
        t.write(WriteOperation::Upsert, &r2).await;
        create_branch(&t.table, "dev", BranchSource::MainHead)
            .await
            .unwrap();
        let b = t.branch("dev").await;
        t.write_on(&b, WriteOperation::Upsert, &rows(5..15, 3, "c"))
            .await;
        let mut model = Model::default();
        model.upsert(&r1);
        model.upsert(&r2);
        let clean_state = walk(&t.base);
        // Planted: data files of instants no timeline knows, in a known partition, a new one
        // and the base; plus files that are not data files (never touched).
        let planted = [
            "region=us/aaaaaaaa-0000-4000-8000-000000000001-0_0-1-0_20200101000000000.parquet",
            "region=zz/bbbbbbbb-0000-4000-8000-000000000002-0_0-1-0_20200101000000001.parquet",
            ".cccccccc-0000-4000-8000-000000000003-0_20200101000000002.log.1_0-1-0",
        ];
        let kept = ["region=us/notes.txt", "README.parquet"];
        for k in planted.iter().chain(kept.iter()) {
            let p = t.base.join(k);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"planted").unwrap();
        }
        // Too young for the default minimum age: nothing is deleted.
        let young = clean_orphans(&t.table, Duration::from_secs(3600), false)
            .await
            .unwrap();
        assert!(young.files.is_empty(), "{tt:?}: {young:?}");
        assert_eq!(young.too_young, planted.len(), "{tt:?}");
        let dry = clean_orphans(&t.table, Duration::ZERO, true).await.unwrap();
        let mut listed: Vec<&str> = dry.files.iter().map(|f| f.key.as_str()).collect();
        listed.sort_unstable();
        let mut want: Vec<&str> = planted.to_vec();
        want.sort_unstable();
        assert_eq!(
            listed, want,
            "{tt:?}: the dry run lists exactly the planted files"
        );
        assert_eq!(dry.bytes(), 7 * planted.len() as u64);
        assert!(t.base.join(planted[0]).exists(), "a dry run deleted");
        let done = clean_orphans(&t.table, Duration::ZERO, false)
            .await
            .unwrap();
        assert_eq!(done.files.len(), planted.len());
        let mut expected = clean_state.clone();
        for k in kept {
            expected.insert(k.to_string(), 7);
        }
        assert_eq!(
            walk(&t.base),
            expected,
            "{tt:?}: only the planted files went"
        );
        assert_eq!(t.read(None).await, model.sorted(), "{tt:?}");
        t.assert_branch_valid("dev", "after orphans").await;
        t.assert_valid("after orphans").await;
    }
}

/// Every object outside `.hoodie/` with its size (the S3 "directory walk").
async fn walk_storage(
    storage: &std::sync::Arc<dyn arbor_storage::Storage>,
) -> BTreeMap<String, u64> {
    storage
        .list_all("")
        .await
        .unwrap()
        .into_iter()
        .filter(|m| !m.key.starts_with(".hoodie/"))
        .map(|m| (m.key, m.size))
        .collect()
}

#[tokio::test]
async fn test_dropped_branch_files_are_freed_by_the_next_clean_on_s3() {
    let Some((opener, bucket)) = crate::clone_s3::s3() else {
        return;
    };
    use arbor_timeline::layout::LocationOpener;
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let location = format!(
            "s3://{bucket}/{}",
            crate::clone_s3::prefix(&format!("reclaim-{tt:?}"))
        );
        let storage = opener.open(&location).unwrap();
        let table = crate::clone_s3::create_in(storage.clone(), tt).await;
        let main_rows = noisy_rows(0, 1_000, "us", 1);
        table
            .write(
                WriteOperation::Upsert,
                vec![arbor_testkit_tables::batch(&main_rows)],
            )
            .await
            .unwrap();
        create_tag(&table, "v1", None, None).await.unwrap();
        let before = walk_storage(&storage).await;
        create_branch(&table, "audit", BranchSource::MainHead)
            .await
            .unwrap();
        let b = arbor_branching::open_branch(storage.clone(), "audit")
            .await
            .unwrap();
        for batch in [
            noisy_rows(0, 500, "us", 5),
            noisy_rows(100_000, 10_000, "apac", 5),
        ] {
            b.write(
                WriteOperation::Upsert,
                vec![arbor_testkit_tables::batch(&batch)],
            )
            .await
            .unwrap();
        }
        let with_branch = walk_storage(&storage).await;
        assert!(with_branch.len() > before.len(), "{tt:?}");
        drop_branch(&table, "audit").await.unwrap();
        let out = clean(&table, CleanOptions::default()).await.unwrap();
        assert!(!out.reclaimed.files.is_empty(), "{tt:?}");
        assert_eq!(
            walk_storage(&storage).await,
            before,
            "{tt:?}: on S3 too the clean frees exactly the dropped branch's files"
        );
        let mut model = Model::default();
        model.upsert(&main_rows);
        let reader = arbor_table::read::TableReader::open(storage.clone())
            .await
            .unwrap();
        assert_eq!(
            arbor_testkit_tables::rows_of(&reader.snapshot(None).await.unwrap()),
            model.sorted(),
            "{tt:?}"
        );
    }
}
