//! The metadata table's own clean (`arbor_mdt::clean`) never deletes an MDT file another holder
//! needs: a branch's MDT timeline (which reads main's MDT slices from its base on), a tag's
//! MDT savepoint (a restore to the tag reads the MDT slice of its instant), a clone pin (the
//! clone reads its source's MDT files); and a clone never deletes its source's MDT files.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_branching::clone::CloneAt;
use arbor_branching::{create_branch, create_tag, BranchSource};
use arbor_fsview::parse_data_file_name;
use arbor_mdt::{MDT_BASE, MDT_META_DIR};
use arbor_storage::{Storage, StorageExt};
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, Model};
use arbor_timeline::avro::{decode, HoodieSavepointMetadata};
use arbor_timeline::config::TableType;
use arbor_timeline::{Action, ActiveTimeline, MetaRoot, State, TableConfig, TableLayout};

use super::clone_support::{clone_ok, read_at, storage_at, write_at};

/// The MDT's base and log files (keys), from a listing of the table's own storage.
async fn mdt_files(storage: &Arc<dyn Storage>) -> BTreeSet<String> {
    storage
        .list_all(MDT_BASE)
        .await
        .unwrap()
        .into_iter()
        .filter(|o| !o.key.contains("/.hoodie/"))
        .filter(|o| {
            let name = o.key.rsplit('/').next().unwrap_or("");
            matches!(parse_data_file_name(name, o.size), Ok(Some(_)))
        })
        .map(|o| o.key)
        .collect()
}

/// The MDT timeline of the table as `view` shows it.
async fn mdt_timeline(view: &Arc<dyn Storage>) -> ActiveTimeline {
    let config = TableConfig::load(view.as_ref(), MDT_META_DIR)
        .await
        .unwrap();
    let layout = TableLayout::from_config(MDT_META_DIR, &config).unwrap();
    ActiveTimeline::load(view.clone(), layout).await.unwrap()
}

async fn completed_mdt_cleans(view: &Arc<dyn Storage>) -> usize {
    mdt_timeline(view)
        .await
        .filter(&[Action::Clean], &[State::Completed])
        .len()
}

/// Writes `n` upserts on main starting at key `from`, applying them to `model`.
async fn main_writes(t: &arbor_testkit_tables::TestTable, model: &mut Model, from: u32, n: u32) {
    for i in from..from + n {
        let r = rows(i..i + 2, i64::from(i), "m");
        t.write(WriteOperation::Upsert, &r).await;
        model.upsert(&r);
    }
}

#[tokio::test]
async fn test_branch_made_before_main_mdt_cleans_still_reads_and_writes() {
    let t = create(TableType::MergeOnRead, true).await;
    let mut main_model = Model::default();
    main_writes(&t, &mut main_model, 0, 4).await;
    create_branch(&t.table, "b", BranchSource::MainHead)
        .await
        .unwrap();
    let branch = t.branch("b").await;
    let mut branch_model = main_model.clone();
    let r = rows(500..503, 1, "b");
    t.write_on(&branch, WriteOperation::Upsert, &r).await;
    branch_model.upsert(&r);
    let before = mdt_files(&t.storage).await;

    // Main compacts its MDT several times and cleans it.
    main_writes(&t, &mut main_model, 10, 15).await;
    let middle = mdt_files(&t.storage).await;
    main_writes(&t, &mut main_model, 30, 35).await;
    let main_view = MetaRoot::Root.view(t.storage.clone());
    assert!(completed_mdt_cleans(&main_view).await >= 1);
    let after = mdt_files(&t.storage).await;
    // Main's later superseded slices went; the slice the branch still reads stayed.
    assert!(
        middle
            .iter()
            .any(|k| !before.contains(k) && !after.contains(k)),
        "main's MDT clean deleted nothing"
    );
    let lost: Vec<&String> = before.iter().filter(|k| !after.contains(*k)).collect();
    assert!(lost.is_empty(), "the branch's MDT slice lost {lost:?}");
    // The branch's MDT still reads from main's first slices.
    assert_eq!(t.read_branch(Some("b"), None).await, branch_model.sorted());
    t.assert_branch_valid("b", "after main's MDT cleans").await;
    for i in 0..3u32 {
        let r = rows(600 + i..602 + i, 100 + i64::from(i), "b2");
        t.write_on(&branch, WriteOperation::Upsert, &r).await;
        branch_model.upsert(&r);
    }
    assert_eq!(t.read_branch(Some("b"), None).await, branch_model.sorted());
    t.assert_branch_valid("b", "after branch writes").await;
    assert_eq!(t.read(None).await, main_model.sorted());
    t.assert_valid("main after its MDT cleans").await;
}

#[tokio::test]
async fn test_tag_keeps_its_mdt_savepoint_through_mdt_cleans() {
    let t = create(TableType::CopyOnWrite, true).await;
    let mut model = Model::default();
    main_writes(&t, &mut model, 0, 4).await;
    let tagged = model.clone();
    let info = create_tag(&t.table, "v1", None, None).await.unwrap();
    let at: arbor_timeline::InstantTime = info.instant.parse().unwrap();
    main_writes(&t, &mut model, 10, 45).await;
    assert!(completed_mdt_cleans(&t.storage).await >= 1);
    // Every file the tag's MDT savepoint names is still there.
    let tl = mdt_timeline(&t.storage).await;
    let sp = tl
        .filter(&[Action::Savepoint], &[State::Completed])
        .into_iter()
        .find(|s| s.requested_time == at)
        .expect("the tag's MDT savepoint");
    let key = tl.key_of(&sp).unwrap();
    let meta: HoodieSavepointMetadata = decode(&tl.read(&sp).await.unwrap(), &key).unwrap();
    let mut named = 0;
    for (partition, file) in meta.files() {
        let name = file.rsplit('/').next().unwrap();
        let k = format!("{MDT_BASE}/{partition}/{name}");
        assert!(
            t.storage.exists(&k).await.unwrap(),
            "{k} of the tag is gone"
        );
        named += 1;
    }
    assert!(named > 0);
    // A restore to the tag reads the MDT slice of its instant.
    arbor_branching::restore(&t.table, &at).await.unwrap();
    assert_eq!(t.read(None).await, tagged.sorted());
    t.assert_valid("after the restore to the tag").await;
    let r = rows(900..902, 900, "r");
    t.write(WriteOperation::Upsert, &r).await;
    let mut restored = tagged.clone();
    restored.upsert(&r);
    assert_eq!(t.read(None).await, restored.sorted());
    t.assert_valid("after a write on the restored table").await;
}

#[tokio::test]
async fn test_clone_pin_keeps_the_mdt_slices_the_clone_reads() {
    let src = create(TableType::MergeOnRead, true).await;
    let mut model = Model::default();
    main_writes(&src, &mut model, 0, 4).await;
    let at_clone = model.clone();
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("clone");
    clone_ok(&src.base, &target, CloneAt::Main).await;
    // The source compacts and cleans its MDT many times over.
    main_writes(&src, &mut model, 10, 45).await;
    assert!(completed_mdt_cleans(&src.storage).await >= 1);
    assert_eq!(read_at(&target, None).await, at_clone.sorted());
    let clone_storage = storage_at(&target).await;
    let report = arbor_mdt::validate::validate_table(clone_storage.clone())
        .await
        .unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{:?}",
        report.discrepancies
    );

    // The clone writes enough to compact and clean its own MDT: the source's files stay.
    let source_files = mdt_files(&src.storage).await;
    let mut clone_model = at_clone.clone();
    for i in 0..40u32 {
        let r = rows(700 + i..702 + i, 700 + i64::from(i), "c");
        write_at(&target, WriteOperation::Upsert, &r).await;
        clone_model.upsert(&r);
    }
    assert_eq!(read_at(&target, None).await, clone_model.sorted());
    let report = arbor_mdt::validate::validate_table(clone_storage.clone())
        .await
        .unwrap();
    assert!(
        report.discrepancies.is_empty(),
        "{:?}",
        report.discrepancies
    );
    assert_eq!(mdt_files(&src.storage).await, source_files);
    // The clone cleaned its own files, once per compaction at most (the source's files it no
    // longer reads are never planned again and again).
    let cleans = completed_mdt_cleans(&clone_storage).await;
    let compactions = mdt_timeline(&clone_storage)
        .await
        .filter(&[Action::Commit], &[State::Completed])
        .into_iter()
        .filter(|c| !c.requested_time.as_str().starts_with("00000000000000"))
        .count();
    assert!(
        cleans >= 1 && cleans <= compactions,
        "{cleans} cleans, {compactions} compactions"
    );
    assert_eq!(src.read(None).await, model.sorted());
    src.assert_valid("source after the clone's writes").await;
}
