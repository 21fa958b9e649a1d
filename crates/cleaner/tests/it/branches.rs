//! `arbor_cleaner::clean` on its own is branch-safe: every clean discovers the table's other
//! live roots (working branches, main) and their tags from storage, and keeps what each of
//! them retains by its own clean policy, computed on its own timeline (so a branch that never
//! cleaned does not pin its whole inherited history).

use arbor_branching::BranchSource;
use arbor_branching::{create_branch, create_tag, open_branch, open_reader, tag_reader};
use arbor_cleaner::{clean, CleanOptions, CleanPolicy};
use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;

use arbor_testkit_tables::{batch, create, rows, rows_of, Row, TestTable};

fn keep(n: usize) -> CleanOptions {
    CleanOptions {
        policy: CleanPolicy::KeepLatestCommits(n),
        ..CleanOptions::default()
    }
}

async fn write_on(table: &Table, rows: &[Row]) {
    table
        .write(WriteOperation::Upsert, vec![batch(rows)])
        .await
        .unwrap();
}

async fn read_branch(t: &TestTable, branch: &str) -> Vec<Row> {
    let reader = open_reader(t.storage.clone(), Some(branch)).await.unwrap();
    rows_of(&reader.snapshot(None).await.unwrap())
}

async fn read_tag(t: &TestTable, branch: Option<&str>, tag: &str) -> Vec<Row> {
    let (reader, at) = tag_reader(t.storage.clone(), branch, tag).await.unwrap();
    rows_of(&reader.snapshot(Some(&at)).await.unwrap())
}

async fn assert_root_valid(t: &TestTable, branch: Option<&str>, step: &str) {
    let report = arbor_branching::validate(&t.storage, branch).await.unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{step} ({branch:?}): {:?}",
        report.discrepancies
    );
}

/// A branch created from main's second write, which then writes twice to one partition and
/// tags its first own write; main writes three times more. `arbor_cleaner::clean` of main keeping one commit (no
/// branching call involved) must keep every file the branch's latest snapshot and its tag read
/// (both are older versions of main's file groups), and a clean of the branch through the
/// cleaner alone keeps main's and main's tag's files.
#[tokio::test]
async fn test_cleaner_alone_keeps_every_file_a_branch_and_its_tags_read() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let c1 = t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
        create_tag(&t.table, "main-first", Some(&c1), None)
            .await
            .unwrap();
        t.write(WriteOperation::Upsert, &rows(0..10, 2, "b")).await;
        create_branch(&t.table, "b", BranchSource::MainHead)
            .await
            .unwrap();
        let b = open_branch(t.storage.clone(), "b").await.unwrap();
        // The branch rewrites only partition `us` (even ids): its snapshots keep reading main's
        // second version of partition `eu`.
        let us = |r: Vec<Row>| -> Vec<Row> { r.into_iter().filter(|r| r.1 == "us").collect() };
        write_on(&b, &us(rows(0..10, 3, "c"))).await;
        create_tag(&b, "b-first", None, None).await.unwrap();
        write_on(&b, &us(rows(0..5, 4, "d"))).await;
        for i in 5..8 {
            t.write(WriteOperation::Upsert, &rows(0..10, i, "m")).await;
        }
        let branch_before = read_branch(&t, "b").await;
        let branch_tag_before = read_tag(&t, Some("b"), "b-first").await;
        let main_tag_before = read_tag(&t, None, "main-first").await;
        let main_before = t.read(None).await;
        let files_before = t.data_files().await;

        let out = clean(&t.table, &keep(1)).await.unwrap();
        if tt == TableType::CopyOnWrite {
            assert!(
                out.deleted > 0,
                "main's own superseded versions are cleaned"
            );
        }
        assert_eq!(read_branch(&t, "b").await, branch_before, "{tt:?}");
        assert_eq!(read_tag(&t, Some("b"), "b-first").await, branch_tag_before);
        assert_eq!(read_tag(&t, None, "main-first").await, main_tag_before);
        assert_eq!(t.read(None).await, main_before);

        let b = open_branch(t.storage.clone(), "b").await.unwrap();
        clean(&b, &keep(1)).await.unwrap();
        assert_eq!(read_branch(&t, "b").await, branch_before, "{tt:?}");
        assert_eq!(read_tag(&t, Some("b"), "b-first").await, branch_tag_before);
        assert_eq!(read_tag(&t, None, "main-first").await, main_tag_before);
        assert_eq!(t.read(None).await, main_before);
        assert!(t.data_files().await.len() <= files_before.len());
        assert_root_valid(&t, None, "after both cleans").await;
        assert_root_valid(&t, Some("b"), "after both cleans").await;
    }
}

/// Per-root retention: main writes 12 versions of every file group, a branch is created at
/// main's head and never cleans (its own policy is Hudi's default, keep 10 commits), with a
/// tag. Main's clean keeping one commit frees the versions outside the branch's own window
/// (before: nothing, as the never-cleaned branch pinned its whole inherited history), and the
/// branch and its tag read exactly as before. Once the branch is dropped, main frees the rest.
#[tokio::test]
async fn test_main_clean_frees_files_while_a_never_cleaned_branch_is_alive() {
    let t = create(TableType::CopyOnWrite, true).await;
    for i in 1..=12 {
        t.write(WriteOperation::Upsert, &rows(0..6, i, "v")).await;
    }
    create_branch(&t.table, "b", BranchSource::MainHead)
        .await
        .unwrap();
    let b = open_branch(t.storage.clone(), "b").await.unwrap();
    create_tag(&b, "b-head", None, None).await.unwrap();
    let branch_before = read_branch(&t, "b").await;
    let tag_before = read_tag(&t, Some("b"), "b-head").await;
    let main_before = t.read(None).await;

    let dry = clean(
        &t.table,
        &CleanOptions {
            dry_run: true,
            ..keep(1)
        },
    )
    .await
    .unwrap();
    // 2 partitions, 12 versions each: the branch keeps the snapshots of its 10 latest writes,
    // main its latest: the 2 oldest versions of each partition's file group are free.
    assert_eq!(dry.planned(), 4, "{:?}", dry.plan);
    let out = clean(&t.table, &keep(1)).await.unwrap();
    assert_eq!(out.deleted, 4);
    assert_eq!(read_branch(&t, "b").await, branch_before);
    assert_eq!(read_tag(&t, Some("b"), "b-head").await, tag_before);
    assert_eq!(t.read(None).await, main_before);
    assert_root_valid(&t, None, "after main's clean").await;
    assert_root_valid(&t, Some("b"), "after main's clean").await;

    arbor_branching::drop_branch(&t.table, "b").await.unwrap();
    let out = clean(&t.table, &keep(1)).await.unwrap();
    assert_eq!(out.deleted, 18, "{:?}", out.plan);
    assert_eq!(t.read(None).await, main_before);
}

async fn own_retention_of(t: &TestTable, branch: &str) -> arbor_cleaner::roots::OwnRetention {
    use arbor_cleaner::protection::ProtectionContext;
    let root = arbor_timeline::MetaRoot::branch(branch).unwrap();
    let view = root.view(t.storage.clone());
    let reader = arbor_table::read::TableReader::open_view(view.clone())
        .await
        .unwrap();
    let ctx = ProtectionContext {
        storage: &view,
        view: reader.view(),
        now: chrono::Utc::now(),
    };
    arbor_cleaner::roots::own_retention(&ctx).await.unwrap()
}

/// A root's own policy is read back from its timeline: Hudi's default before any clean (a clean
/// that frees nothing records nothing), the count its last `KEEP_LATEST_COMMITS` clean used
/// (still 3 after more writes), and everything after a clean by file versions (whose count the
/// metadata does not record).
#[tokio::test]
async fn test_own_retention_is_the_roots_last_clean_policy_with_its_count() {
    use arbor_cleaner::roots::OwnRetention;
    let t = create(TableType::CopyOnWrite, true).await;
    for i in 1..=5 {
        t.write(WriteOperation::Upsert, &rows(0..4, i, "v")).await;
    }
    create_branch(&t.table, "b", BranchSource::MainHead)
        .await
        .unwrap();
    assert_eq!(
        own_retention_of(&t, "b").await,
        OwnRetention::Policy(CleanPolicy::KeepLatestCommits(10))
    );
    let b = open_branch(t.storage.clone(), "b").await.unwrap();
    // Four own writes: keeping 3 frees the branch's first own versions (main's are main's), so
    // the clean is recorded.
    for i in 6..=9 {
        write_on(&b, &rows(0..4, i, "w")).await;
    }
    assert!(clean(&b, &keep(3)).await.unwrap().deleted > 0);
    for i in 10..=11 {
        write_on(&b, &rows(0..4, i, "w")).await;
    }
    assert_eq!(
        own_retention_of(&t, "b").await,
        OwnRetention::Policy(CleanPolicy::KeepLatestCommits(3))
    );
    let versions = CleanOptions {
        policy: CleanPolicy::KeepLatestFileVersions(2),
        ..CleanOptions::default()
    };
    assert!(clean(&b, &versions).await.unwrap().deleted > 0);
    assert_eq!(own_retention_of(&t, "b").await, OwnRetention::Everything);
}

/// `arbor_cleaner::restore` on its own never rolls back an instant another live root also has
/// (nothing changes); once the branch is dropped the same restore succeeds.
#[tokio::test]
async fn test_cleaner_restore_alone_refuses_instants_a_branch_shares() {
    let t = create(TableType::CopyOnWrite, true).await;
    let c1 = t.write(WriteOperation::Upsert, &rows(0..4, 1, "a")).await;
    arbor_cleaner::create_savepoint(&t.table, Some(&c1), "before")
        .await
        .unwrap();
    let c2 = t.write(WriteOperation::Upsert, &rows(0..4, 2, "b")).await;
    create_branch(&t.table, "b", BranchSource::MainHead)
        .await
        .unwrap();
    let before = t.listing().await;
    let err = arbor_cleaner::restore(&t.table, &c1).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("refused") && text.contains("branch b") && text.contains(c2.as_str()),
        "{text}"
    );
    assert_eq!(
        t.listing().await,
        before,
        "a refused restore changes nothing"
    );
    arbor_branching::drop_branch(&t.table, "b").await.unwrap();
    arbor_cleaner::restore(&t.table, &c1).await.unwrap();
    let mut expected = rows(0..4, 1, "a");
    expected.sort();
    assert_eq!(t.read(None).await, expected);
}
