//! Branch life cycle on one table: create, isolated writes, tags, publication, drop.

use arbor_branching::{
    create_branch, create_tag, drop_branch, drop_tag, list_branches, list_tags, publish,
    tag_reader, BranchSource, BranchingError, TagFilter,
};
use arbor_storage::StorageExt;
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arbor_timeline::{resolve_main, MetaRoot};

use arbor_testkit_tables::{create, rows, rows_of, Model};

#[tokio::test]
async fn test_branch_writes_leave_main_unchanged_then_publish_fast_forwards_main() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let mut main_model = Model::default();
        let r1 = rows(0..20, 1, "a");
        let c1 = t.write(WriteOperation::Upsert, &r1).await;
        main_model.upsert(&r1);
        let info = create_branch(&t.table, "audit", BranchSource::MainHead)
            .await
            .unwrap();
        assert_eq!(info.base_instant.as_deref(), Some(c1.as_str()));
        let b = t.branch("audit").await;
        let mut branch_model = main_model.clone();
        let r2 = rows(10..30, 2, "b");
        t.write_on(&b, WriteOperation::Upsert, &r2).await;
        branch_model.upsert(&r2);
        let d = rows(0..3, 3, "");
        t.write_on(&b, WriteOperation::Delete, &d).await;
        branch_model.delete(&d);
        // Main is exactly as before, for arbor and for hudi-rs.
        assert_eq!(t.read(None).await, main_model.sorted(), "{tt:?}");
        t.assert_peer_agrees("branching peer check", "main after branch writes")
            .await;
        t.assert_valid("main after branch writes").await;
        assert_eq!(
            t.read_branch(Some("audit"), None).await,
            branch_model.sorted()
        );
        t.assert_branch_valid("audit", "branch").await;
        let status = list_branches(&t.storage).await.unwrap();
        assert_eq!(status.len(), 1);
        assert_eq!(status[0].info.name, "audit");

        let out = publish(&b).await.unwrap();
        assert_eq!(out.publication, 1);
        assert_eq!(
            resolve_main(t.storage.as_ref()).await.unwrap(),
            MetaRoot::Publication(1)
        );
        assert_eq!(t.read(None).await, branch_model.sorted(), "{tt:?}");
        t.assert_valid("main after publication").await;
        // A stale main handle cannot write into the replaced metadata.
        let err = t
            .table
            .write(
                WriteOperation::Upsert,
                vec![arbor_testkit_tables::batch(&rows(50..51, 9, "x"))],
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("main moved"), "{err}");
        // Main keeps working after publication, and the branch can publish again only while it
        // has main's writes.
        let main = arbor_table::Table::open(t.storage.clone()).await.unwrap();
        let r3 = rows(40..45, 4, "m");
        t.write_on(&main, WriteOperation::Upsert, &r3).await;
        branch_model.upsert(&r3);
        assert_eq!(t.read(None).await, branch_model.sorted());
        let err = publish(&b).await.unwrap_err();
        assert!(matches!(err, BranchingError::Divergent { .. }), "{err}");
    }
}

#[tokio::test]
async fn test_divergent_branch_rejected_naming_mains_missing_instant() {
    // The proposal's review case: main c1 -> c3, branch c1 -> c2 -> c5.
    let t = create(TableType::CopyOnWrite, true).await;
    let _c1 = t.write(WriteOperation::Upsert, &rows(0..5, 1, "a")).await;
    create_branch(&t.table, "b1", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("b1").await;
    let c2 = t
        .write_on(&b, WriteOperation::Upsert, &rows(5..6, 2, "b"))
        .await;
    let c3 = t.write(WriteOperation::Upsert, &rows(6..7, 3, "m")).await;
    let c5 = t
        .write_on(&b, WriteOperation::Upsert, &rows(7..8, 5, "b"))
        .await;
    let before = t.read(None).await;
    match publish(&b).await.unwrap_err() {
        BranchingError::Divergent {
            missing_on_branch,
            branch_only,
            ..
        } => {
            assert_eq!(missing_on_branch, vec![c3.to_string()]);
            assert_eq!(branch_only, vec![c2.to_string(), c5.to_string()]);
        }
        other => panic!("{other}"),
    }
    assert_eq!(t.read(None).await, before);
    assert_eq!(
        resolve_main(t.storage.as_ref()).await.unwrap(),
        MetaRoot::Root
    );
}

#[tokio::test]
async fn test_tags_read_as_of_instant_and_branch_from_tag_excludes_later_writes() {
    let t = create(TableType::MergeOnRead, true).await;
    let r1 = rows(0..10, 1, "a");
    let c1 = t.write(WriteOperation::Upsert, &r1).await;
    let mut at_c1 = Model::default();
    at_c1.upsert(&r1);
    let tag = create_tag(&t.table, "v1", None, None).await.unwrap();
    assert_eq!(tag.instant, c1.as_str());
    // A duplicate name is refused (several tags on one instant: see
    // `test_several_tags_on_one_instant_share_one_savepoint_pair_released_by_the_last`).
    assert!(create_tag(&t.table, "v1", None, None).await.is_err());
    t.write(WriteOperation::Upsert, &rows(5..15, 2, "b")).await;
    let (reader, instant) = tag_reader(t.storage.clone(), None, "v1").await.unwrap();
    assert_eq!(instant, c1);
    assert_eq!(
        rows_of(&reader.snapshot(Some(&instant)).await.unwrap()),
        at_c1.sorted()
    );
    // The savepoint cannot be deleted while the tag names it.
    assert!(arbor_cleaner::delete_savepoint(&t.table, &c1)
        .await
        .is_err());

    create_branch(&t.table, "fix", BranchSource::Tag("v1"))
        .await
        .unwrap();
    assert_eq!(t.read_branch(Some("fix"), None).await, at_c1.sorted());
    let tags = list_tags(&t.storage, Some("fix"), TagFilter::All)
        .await
        .unwrap();
    assert_eq!(tags.len(), 1);
    t.assert_branch_valid("fix", "branch from tag").await;

    // An expiry in the past is refused; an expired tag serves no reads, is not listed, keeps
    // its name and instant reserved, and `expire_tags` removes it with its savepoints.
    let past = chrono::Utc::now() - chrono::Duration::seconds(1);
    let c2 = t.write(WriteOperation::Upsert, &rows(0..1, 3, "c")).await;
    create_tag(&t.table, "old", Some(&c2), Some(past))
        .await
        .unwrap_err();
    let soon = chrono::Utc::now() + chrono::Duration::days(1);
    create_tag(&t.table, "old", Some(&c2), Some(soon))
        .await
        .unwrap();
    assert!(tag_reader(t.storage.clone(), None, "old").await.is_ok());
    // Let the day pass: rewrite the definition with an expiry in the past.
    let key = ".hoodie/tags/old.json";
    let (bytes, _) = arbor_storage::StorageExt::get_opt(t.storage.as_ref(), key)
        .await
        .unwrap()
        .unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    doc["expiresAt"] = serde_json::json!(past.to_rfc3339());
    t.storage
        .put(key, serde_json::to_vec(&doc).unwrap().into())
        .await
        .unwrap();
    assert!(tag_reader(t.storage.clone(), None, "old").await.is_err());
    let shown = list_tags(&t.storage, None, TagFilter::Unexpired)
        .await
        .unwrap();
    assert_eq!(
        shown.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        vec!["v1"]
    );
    assert!(arbor_cleaner::delete_savepoint(&t.table, &c2)
        .await
        .is_err());
    assert_eq!(
        arbor_branching::expire_tags(&t.table).await.unwrap(),
        vec!["old"]
    );
    let sps = arbor_cleaner::list_savepoints(&t.storage, t.table.layout())
        .await
        .unwrap();
    assert_eq!(
        sps.iter().map(|s| s.instant.clone()).collect::<Vec<_>>(),
        vec![c1.clone()]
    );
    drop_tag(&t.table, "v1", false, false).await.unwrap();
    assert!(tag_reader(t.storage.clone(), None, "v1").await.is_err());
    assert!(!drop_tag(&t.table, "v1", false, true).await.unwrap());
}

#[tokio::test]
async fn test_drop_branch_refuses_main_and_unknown_names_and_frees_the_name() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..5, 1, "a")).await;
    for bad in ["../x", "main", "publications", ".hidden"] {
        assert!(
            create_branch(&t.table, bad, BranchSource::MainHead)
                .await
                .is_err(),
            "{bad}"
        );
    }
    let first = create_branch(&t.table, "tmp", BranchSource::MainHead)
        .await
        .unwrap();
    assert!(create_branch(&t.table, "tmp", BranchSource::MainHead)
        .await
        .is_err());
    drop_branch(&t.table, "tmp").await.unwrap();
    assert!(matches!(
        drop_branch(&t.table, "tmp").await.unwrap_err(),
        BranchingError::BranchNotFound { .. }
    ));
    assert!(list_branches(&t.storage).await.unwrap().is_empty());
    let second = create_branch(&t.table, "tmp", BranchSource::MainHead)
        .await
        .unwrap();
    assert_ne!(first.branch_id, second.branch_id);
}

#[tokio::test]
async fn test_clean_of_a_branch_keeps_mains_history_and_main_clean_keeps_branch_state() {
    use arbor_branching::clean;
    use arbor_cleaner::{CleanOptions, CleanPolicy};
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let r1 = rows(0..10, 1, "a");
        let c1 = t.write(WriteOperation::Upsert, &r1).await;
        let mut at_c1 = Model::default();
        at_c1.upsert(&r1);
        let r2 = rows(0..10, 2, "b");
        t.write(WriteOperation::Upsert, &r2).await;
        let mut main_model = at_c1.clone();
        main_model.upsert(&r2);
        create_branch(&t.table, "b", BranchSource::MainHead)
            .await
            .unwrap();
        let b = t.branch("b").await;
        let mut branch_model = main_model.clone();
        for i in 3..6 {
            let r = rows(0..10, i, "c");
            t.write_on(&b, WriteOperation::Upsert, &r).await;
            branch_model.upsert(&r);
        }
        let options = || CleanOptions {
            policy: CleanPolicy::KeepLatestCommits(1),
            ..CleanOptions::default()
        };
        let out = clean(&b, options()).await.unwrap();
        if tt == TableType::CopyOnWrite {
            // (MOR upserts went to log files of the latest slices: nothing to clean there.)
            assert!(out.deleted > 0, "the branch's own old files are cleaned");
        }
        // Main never cleaned: its whole history still reads.
        assert_eq!(t.read(Some(&c1)).await, at_c1.sorted(), "{tt:?}");
        assert_eq!(t.read(None).await, main_model.sorted());
        assert_eq!(t.read_branch(Some("b"), None).await, branch_model.sorted());
        t.assert_valid("main after branch clean").await;
        t.assert_branch_valid("b", "branch after its clean").await;
        // Main's clean keeps what the branch still reads.
        let main = arbor_table::Table::open(t.storage.clone()).await.unwrap();
        clean(&main, options()).await.unwrap();
        assert_eq!(t.read(None).await, main_model.sorted());
        assert_eq!(t.read_branch(Some("b"), None).await, branch_model.sorted());
        let v = arbor_branching::validate(&t.storage, Some("b"))
            .await
            .unwrap();
        assert!(v.discrepancies.is_empty(), "{:?}", v.discrepancies);
        let v = arbor_branching::validate(&t.storage, None).await.unwrap();
        assert!(v.discrepancies.is_empty(), "{:?}", v.discrepancies);
    }
}

/// Main's metadata table compacts and archives past a branch's MDT instants (the branch's MDT
/// log files and base files live in the same shared directories): main and the branch still read
/// only their own state, for arbor and for hudi-rs.
#[tokio::test]
async fn test_main_mdt_archival_past_branch_instants_keeps_both_isolated() {
    use arbor_timeline::{ActiveTimeline, TableConfig, TableLayout};
    let t = create(TableType::MergeOnRead, true).await;
    let mut main_model = Model::default();
    let r = rows(0..8, 1, "a");
    t.write(WriteOperation::Upsert, &r).await;
    main_model.upsert(&r);
    create_branch(&t.table, "b", BranchSource::MainHead)
        .await
        .unwrap();
    // A branch made by an arbor before base pins (a pinned base keeps main's timelines from
    // archiving past it, as any savepoint does): remove the pin's savepoint files.
    let base = list_branches(&t.storage).await.unwrap()[0]
        .info
        .base_instant
        .clone()
        .unwrap();
    for o in t.storage.list_all(".hoodie").await.unwrap() {
        let name = o.key.rsplit('/').next().unwrap_or_default();
        if o.key.contains("/timeline/") && name.starts_with(&base) && name.contains(".savepoint") {
            t.storage.delete(&o.key).await.unwrap();
        }
    }
    let b = t.branch("b").await;
    let mut branch_model = main_model.clone();
    let mut branch_instants = Vec::new();
    for i in 0..12 {
        let r = rows(8..12, 100 + i, "b");
        branch_instants.push(t.write_on(&b, WriteOperation::Upsert, &r).await);
        branch_model.upsert(&r);
    }
    b.compact().await.unwrap();
    for i in 0..40 {
        let r = rows(0..4, 2 + i, "m");
        t.write(WriteOperation::Upsert, &r).await;
        main_model.upsert(&r);
        if i == 35 {
            t.table.compact().await.unwrap();
            arbor_cleaner::archive(&t.table).await.unwrap();
        }
    }
    // Main's MDT active timeline now starts after every branch instant.
    let mdt_dir = arbor_mdt::MDT_META_DIR;
    let config = TableConfig::load(t.storage.as_ref(), mdt_dir)
        .await
        .unwrap();
    let tl = ActiveTimeline::load(
        t.storage.clone(),
        TableLayout::from_config(mdt_dir, &config).unwrap(),
    )
    .await
    .unwrap();
    let first = tl.instants().first().unwrap().requested_time.clone();
    assert!(
        branch_instants.iter().all(|b| *b < first),
        "main's MDT was not archived past the branch: first active {first}"
    );
    assert_eq!(t.read(None).await, main_model.sorted());
    t.assert_peer_agrees(
        "branching peer check",
        "main after its MDT archived past the branch",
    )
    .await;
    t.assert_valid("main").await;
    assert_eq!(t.read_branch(Some("b"), None).await, branch_model.sorted());
    t.assert_branch_valid("b", "branch").await;
    let r = rows(12..14, 500, "b");
    t.write_on(&b, WriteOperation::Upsert, &r).await;
    branch_model.upsert(&r);
    assert_eq!(t.read_branch(Some("b"), None).await, branch_model.sorted());
    assert_eq!(t.read(None).await, main_model.sorted());
}

/// Found by the model test: main cleans after a tag, deleting files only snapshots before the
/// tag read; a branch from the tag (whose metadata table, as of the tag, still lists them)
/// starts at the tag and validates clean.
#[tokio::test]
async fn test_branch_from_tag_after_main_cleaned_older_files_starts_at_the_tag() {
    use arbor_cleaner::{CleanOptions, CleanPolicy};
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..8, 1, "a")).await;
    let r2 = rows(0..8, 2, "b");
    t.write(WriteOperation::Upsert, &r2).await;
    let mut at_tag = Model::default();
    at_tag.upsert(&r2);
    create_tag(&t.table, "v0", None, None).await.unwrap();
    t.write(WriteOperation::Delete, &rows(0..3, 3, "")).await;
    let out = arbor_branching::clean(
        &t.table,
        CleanOptions {
            policy: CleanPolicy::KeepLatestFileVersions(1),
            ..CleanOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(out.deleted > 0);
    create_branch(&t.table, "b", BranchSource::Tag("v0"))
        .await
        .unwrap();
    assert_eq!(t.read_branch(Some("b"), None).await, at_tag.sorted());
    t.assert_branch_valid("b", "branch from tag").await;
    t.assert_valid("main").await;
    // And after publishing it (main made no logical write after the tag... it did: refused).
    let b = t.branch("b").await;
    assert!(matches!(
        publish(&b).await.unwrap_err(),
        BranchingError::Divergent { .. }
    ));
}

/// Found by the model test: main's last clean was by file versions (which records no earliest
/// retained instant); a branch's clean must then keep every file main still lists, exactly as
/// `validate` requires of main.
#[tokio::test]
async fn test_branch_clean_after_main_cleaned_by_file_versions_keeps_what_main_lists() {
    use arbor_cleaner::{CleanOptions, CleanPolicy};
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..8, 1, "a")).await;
    t.write(WriteOperation::Upsert, &rows(0..4, 2, "b")).await;
    create_tag(&t.table, "v0", None, None).await.unwrap();
    t.write(WriteOperation::Upsert, &rows(0..2, 3, "c")).await;
    let versions = || CleanOptions {
        policy: CleanPolicy::KeepLatestFileVersions(1),
        ..CleanOptions::default()
    };
    arbor_branching::clean(&t.table, versions()).await.unwrap();
    drop_tag(&t.table, "v0", false, false).await.unwrap();
    create_branch(&t.table, "b1", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("b1").await;
    arbor_branching::clean(&b, versions()).await.unwrap();
    t.assert_valid("main after the branch's clean").await;
    t.assert_branch_valid("b1", "branch after its clean").await;
}

/// The completed savepoints of main (resolved) as `data <time>` / `mdt <time>`.
async fn main_savepoints(t: &arbor_testkit_tables::TestTable) -> Vec<String> {
    use arbor_timeline::{Action, ActiveTimeline, State, TableConfig, TableLayout};
    let view = resolve_main(t.storage.as_ref())
        .await
        .unwrap()
        .view(t.storage.clone());
    let mut out = Vec::new();
    for (side, dir) in [("data", ".hoodie"), ("mdt", ".hoodie/metadata/.hoodie")] {
        let config = TableConfig::load(view.as_ref(), dir).await.unwrap();
        let layout = TableLayout::from_config(dir, &config).unwrap();
        let tl = ActiveTimeline::load(view.clone(), layout).await.unwrap();
        out.extend(
            tl.filter(&[Action::Savepoint], &[State::Completed])
                .iter()
                .map(|i| format!("{side} {}", i.requested_time)),
        );
    }
    out.sort();
    out
}

fn names(tags: &[arbor_branching::TagInfo]) -> Vec<(String, String)> {
    tags.iter()
        .map(|t| (t.name.clone(), t.instant.clone()))
        .collect()
}

#[tokio::test]
async fn test_several_tags_on_one_instant_share_one_savepoint_pair_released_by_the_last() {
    let t = create(TableType::CopyOnWrite, true).await;
    let r1 = rows(0..10, 1, "a");
    let c1 = t.write(WriteOperation::Upsert, &r1).await;
    t.write(WriteOperation::Upsert, &rows(5..15, 2, "b")).await;
    create_tag(&t.table, "a", Some(&c1), None).await.unwrap();
    create_tag(&t.table, "b", Some(&c1), None).await.unwrap();
    let pair = vec![format!("data {c1}"), format!("mdt {c1}")];
    assert_eq!(main_savepoints(&t).await, pair);
    // Dropping one keeps the pair for the other, which still reads as of c1.
    assert!(drop_tag(&t.table, "a", false, false).await.unwrap());
    assert_eq!(main_savepoints(&t).await, pair);
    let (reader, at) = tag_reader(t.storage.clone(), None, "b").await.unwrap();
    assert_eq!(at, c1);
    let mut m = Model::default();
    m.upsert(&r1);
    assert_eq!(
        rows_of(&reader.snapshot(Some(&at)).await.unwrap()),
        m.sorted()
    );
    assert!(arbor_cleaner::delete_savepoint(&t.table, &c1)
        .await
        .is_err());
    // The last one releases it on both timelines.
    assert!(drop_tag(&t.table, "b", false, false).await.unwrap());
    assert_eq!(main_savepoints(&t).await, Vec::<String>::new());
    t.assert_valid("after the last tag").await;
}

#[tokio::test]
async fn test_publish_carries_mains_tags_in_branch_history_and_refuses_one_outside_it() {
    let t = create(TableType::MergeOnRead, true).await;
    let r1 = rows(0..10, 1, "a");
    let c1 = t.write(WriteOperation::Upsert, &r1).await;
    // Updates only: a log file, which main's compaction below compacts (new keys would have
    // rewritten the base-only slice instead).
    let r2 = rows(5..10, 2, "b");
    let c2 = t.write(WriteOperation::Upsert, &r2).await;
    let mut at_c2 = Model::default();
    at_c2.upsert(&r1);
    at_c2.upsert(&r2);
    create_tag(&t.table, "v1", Some(&c1), None).await.unwrap();
    create_branch(&t.table, "audit", BranchSource::MainHead)
        .await
        .unwrap();
    let b = t.branch("audit").await;
    let r3 = rows(0..4, 3, "c");
    t.write_on(&b, WriteOperation::Upsert, &r3).await;
    let mut branch_model = at_c2.clone();
    branch_model.upsert(&r3);
    // Tags made on main after the branch was cut, at instants the branch has: a second tag on
    // c1 and one on the base c2.
    create_tag(&t.table, "also1", Some(&c1), None)
        .await
        .unwrap();
    create_tag(&t.table, "late", Some(&c2), None).await.unwrap();
    // A compaction on main (not a logical write: no divergence) and a tag on it, which is
    // outside the branch's history.
    let k = t.table.compact().await.unwrap();
    assert!(!k.is_empty(), "main's compaction compacted nothing");
    let k = k[0].instant.clone();
    create_tag(&t.table, "svc", Some(&k), None).await.unwrap();
    let err = publish(&b).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, BranchingError::Refused { .. })
            && msg.contains("main's tag svc")
            && msg.contains(k.as_str())
            && msg.contains("not in branch audit's history"),
        "{msg}"
    );
    assert_eq!(
        resolve_main(t.storage.as_ref()).await.unwrap(),
        MetaRoot::Root
    );
    drop_tag(&t.table, "svc", false, false).await.unwrap();

    let out = publish(&b).await.unwrap();
    assert_eq!(
        resolve_main(t.storage.as_ref()).await.unwrap(),
        MetaRoot::Publication(out.publication)
    );
    assert_eq!(t.read(None).await, branch_model.sorted());
    // Main's tags are all there with their savepoints (carried ones included).
    let tags = list_tags(&t.storage, None, TagFilter::All).await.unwrap();
    assert_eq!(
        names(&tags),
        vec![
            ("also1".to_string(), c1.to_string()),
            ("late".to_string(), c2.to_string()),
            ("v1".to_string(), c1.to_string()),
        ]
    );
    assert_eq!(
        main_savepoints(&t).await,
        vec![
            format!("data {c1}"),
            format!("data {c2}"),
            format!("mdt {c1}"),
            format!("mdt {c2}"),
        ]
    );
    let (reader, at) = tag_reader(t.storage.clone(), None, "late").await.unwrap();
    assert_eq!(at, c2);
    assert_eq!(
        rows_of(&reader.snapshot(Some(&at)).await.unwrap()),
        at_c2.sorted()
    );
    t.assert_valid("main after carrying tags").await;
    // Dropping the carried tags on the new main releases the savepoints as usual.
    let main = arbor_table::Table::open(t.storage.clone()).await.unwrap();
    drop_tag(&main, "late", false, false).await.unwrap();
    drop_tag(&main, "v1", false, false).await.unwrap();
    // c2 stays: it is also the base of branch audit, which still stands (published, not
    // dropped) and pins it.
    assert_eq!(
        main_savepoints(&t).await,
        vec![
            format!("data {c1}"),
            format!("data {c2}"),
            format!("mdt {c1}"),
            format!("mdt {c2}")
        ]
    );
    drop_tag(&main, "also1", false, false).await.unwrap();
    drop_branch(&main, "audit").await.unwrap();
    assert_eq!(main_savepoints(&t).await, Vec::<String>::new());
}

#[tokio::test]
async fn test_publication_moves_main_for_a_reader_whose_main_was_cached() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let mut model = Model::default();
        let r1 = rows(0..10, 1, "a");
        t.write(WriteOperation::Upsert, &r1).await;
        model.upsert(&r1);
        create_branch(&t.table, "cached", BranchSource::MainHead)
            .await
            .unwrap();
        let b = t.branch("cached").await;
        let r2 = rows(5..15, 2, "b");
        t.write_on(&b, WriteOperation::Upsert, &r2).await;
        let main_before = model.sorted();
        model.upsert(&r2);
        // Another handle of the process caches main, and reads it from the cache.
        let handle: std::sync::Arc<dyn arbor_storage::Storage> =
            std::sync::Arc::new(arbor_storage::ObjectStoreStorage::local(&t.base).unwrap());
        let open = || arbor_table::read::TableReader::open(handle.clone());
        let first = open().await.unwrap();
        assert_eq!(rows_of(&first.snapshot(None).await.unwrap()), main_before);
        let cached = open().await.unwrap();
        assert!(cached.is_from_cache(), "{tt:?}");
        publish(&b).await.unwrap();
        // Main moved to the publication: the handle sees the branch's write.
        let after = open().await.unwrap();
        assert!(!after.is_from_cache(), "{tt:?}");
        assert_eq!(
            rows_of(&after.snapshot(None).await.unwrap()),
            model.sorted(),
            "{tt:?}"
        );
        // And a write on the new main is seen too.
        let main = arbor_table::Table::open(handle.clone()).await.unwrap();
        let r3 = rows(0..2, 3, "c");
        main.write(
            WriteOperation::Upsert,
            vec![arbor_testkit_tables::batch(&r3)],
        )
        .await
        .unwrap();
        model.upsert(&r3);
        assert_eq!(
            rows_of(&open().await.unwrap().snapshot(None).await.unwrap()),
            model.sorted(),
            "{tt:?}"
        );
    }
}
