//! `detach_clone`: a detached clone reads the same rows from its own location alone (arbor on
//! its directory without sources, hudi-rs at its path), its pins are gone, and the source's next
//! hard clean reclaims the files only the clone held; a clone of a clone survives the detach of
//! the middle one, and detaches itself afterwards; detaching twice only finishes leftovers.

use arbor_branching::clone::{detach_clone, CloneAt};
use arbor_branching::{clean, BranchingError};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_table::{Table, WriteOperation};
use arbor_testkit_tables::{create, rows, Model};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::LocationOpener;

use crate::clone_detach_support::*;

fn hard() -> CleanOptions {
    CleanOptions {
        policy: CleanPolicy::KeepLatestCommits(1),
        ..CleanOptions::default()
    }
}

#[tokio::test]
async fn test_detach_makes_the_clone_self_contained_and_frees_the_source() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let opener = registry();
        let src = loc(&t.base);
        let target_dir = t._tmp.path().join("clone");
        let target = loc(&target_dir);
        let mut model = Model::default();
        for (i, ids) in [(1, 0..20), (2, 10..30)] {
            let r = rows(ids, i, "s");
            t.write(WriteOperation::Upsert, &r).await;
            model.upsert(&r);
        }
        let made = shallow(&opener, &src, &target, CloneAt::Main).await;
        assert_eq!(pins(&opener, &src).await.len(), 1, "{tt:?}");
        // The clone writes; the source moves on and cleans hard: the pin keeps the snapshot.
        let mine = rows(0..5, 3, "c");
        write(&opener, &target, WriteOperation::Upsert, &mine).await;
        model.upsert(&mine);
        // (An overwrite replaces every file group, so the clone's snapshot is superseded in
        // both table types: MOR upserts alone would only append to the same slices.)
        let source_model = {
            let mut m = Model::default();
            let r = rows(0..30, 4, "s2");
            t.write(WriteOperation::InsertOverwriteTable, &r).await;
            m.upsert(&r);
            for i in 5..7 {
                let r = rows(0..30, i, "s2");
                t.write(WriteOperation::Upsert, &r).await;
                m.upsert(&r);
            }
            m
        };
        clean(&t.table, hard()).await.unwrap();
        let pinned = data_files(&t.base).len();
        assert_eq!(read(&opener, &target).await, model.sorted(), "{tt:?}");

        let out = detach_clone(&opener, &target).await.unwrap();
        assert_eq!(out.id, made.id);
        assert!(!out.already_detached);
        assert!(out.files_copied > 0, "{tt:?}: {out:?}");
        assert!(out.bytes_copied > 0);
        assert!(out.server_side_copy, "two local directories share a root");
        assert_eq!(out.pins_removed.len(), 1, "{out:?}");
        assert!(pins(&opener, &src).await.is_empty());
        assert_self_contained(&opener, &target, &model.sorted(), "after detach").await;
        assert_eq!(read(&opener, &target).await, model.sorted());
        assert_peer_reads(opener.open(&target).unwrap(), &target_dir, "detached clone").await;

        // The source's next hard clean reclaims what only the clone held.
        let main = Table::open(t.storage.clone()).await.unwrap();
        clean(&main, hard()).await.unwrap();
        let after = data_files(&t.base).len();
        assert!(
            after < pinned,
            "{tt:?}: {after} files after, {pinned} before"
        );
        assert_eq!(t.read(None).await, source_model.sorted());
        assert_eq!(read(&opener, &target).await, model.sorted(), "{tt:?}");
        assert_self_contained(
            &opener,
            &target,
            &model.sorted(),
            "after the source's clean",
        )
        .await;

        // Again: only leftovers (none).
        let again = detach_clone(&opener, &target).await.unwrap();
        assert!(again.already_detached);
        assert_eq!(again.files_copied, 0);
        assert!(again.pins_removed.is_empty());
        // The detached clone is a table of its own: it writes and reads.
        let more = rows(40..45, 9, "c");
        write(&opener, &target, WriteOperation::Upsert, &more).await;
        model.upsert(&more);
        assert_eq!(read(&opener, &target).await, model.sorted());
    }
}

#[tokio::test]
async fn test_detach_of_the_middle_clone_leaves_the_last_reading_then_the_last_detaches() {
    let t = create(TableType::MergeOnRead, true).await;
    let opener = registry();
    let src = loc(&t.base);
    let (c1_dir, c2_dir) = (t._tmp.path().join("c1"), t._tmp.path().join("c2"));
    let (c1, c2) = (loc(&c1_dir), loc(&c2_dir));
    let mut model = Model::default();
    let r = rows(0..20, 1, "s");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    shallow(&opener, &src, &c1, CloneAt::Main).await;
    let r = rows(5..25, 2, "c1");
    write(&opener, &c1, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    let c2_made = shallow(&opener, &c1, &c2, CloneAt::Main).await;
    assert_eq!(c2_made.pins.len(), 2, "a clone of a clone pins both tables");
    let mut m2 = model.clone();
    let r = rows(0..3, 3, "c2");
    write(&opener, &c2, WriteOperation::Upsert, &r).await;
    m2.upsert(&r);
    // c1 moves on after c2 was made.
    let r = rows(0..30, 4, "c1b");
    write(&opener, &c1, WriteOperation::Upsert, &r).await;
    model.upsert(&r);

    let out = detach_clone(&opener, &c1).await.unwrap();
    assert_eq!(out.pins_removed.len(), 1, "only c1's pin on the source");
    assert_self_contained(&opener, &c1, &model.sorted(), "c1 detached").await;
    assert_eq!(
        read(&opener, &c2).await,
        m2.sorted(),
        "c2 after c1's detach"
    );
    // The source keeps c2's pin; c1 keeps c2's pin too.
    assert_eq!(pins(&opener, &src).await.len(), 1);
    assert_eq!(pins(&opener, &c1).await.len(), 1);
    let c1_table = table(&opener, &c1).await;
    clean(&c1_table, hard()).await.unwrap();
    clean(&t.table, hard()).await.unwrap();
    assert_eq!(
        read(&opener, &c2).await,
        m2.sorted(),
        "c2 after both cleans"
    );

    let out = detach_clone(&opener, &c2).await.unwrap();
    assert_eq!(out.pins_removed.len(), 2, "{out:?}");
    assert!(pins(&opener, &src).await.is_empty());
    assert!(pins(&opener, &c1).await.is_empty());
    assert_self_contained(&opener, &c2, &m2.sorted(), "c2 detached").await;
    assert_peer_reads(opener.open(&c2).unwrap(), &c2_dir, "c2 detached").await;
    assert_peer_reads(opener.open(&c1).unwrap(), &c1_dir, "c1 detached").await;
    assert_eq!(read(&opener, &c1).await, model.sorted());
}

#[tokio::test]
async fn test_detach_refuses_a_location_that_is_not_a_clone() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Insert, &rows(0..3, 1, "s")).await;
    let opener = registry();
    let err = detach_clone(&opener, &loc(&t.base)).await.unwrap_err();
    assert!(
        matches!(err, BranchingError::Refused { ref reason, .. } if reason.contains("not a clone")),
        "{err}"
    );
}

#[tokio::test]
async fn test_detach_of_a_hand_made_clone_copies_through_the_process_without_a_shared_root() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let mut model = Model::default();
        for i in 1..3 {
            let r = rows(0..20, i, "s");
            t.write(WriteOperation::Upsert, &r).await;
            model.upsert(&r);
        }
        let target_dir = t._tmp.path().join("clone");
        let (src, target) = (loc(&t.base), loc(&target_dir));
        let opener = MapOpener(vec![
            (src.clone(), local(&t.base)),
            (target.clone(), local(&target_dir)),
        ]);
        let id = hand_clone(&opener, &src, &target, false).await;
        assert_eq!(read(&opener, &target).await, model.sorted(), "{tt:?}");
        let r = rows(0..5, 5, "c");
        write(&opener, &target, WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        let before = data_files(&target_dir).len();
        let out = detach_clone(&opener, &target).await.unwrap();
        assert_eq!(out.id, id);
        assert!(out.files_copied > 0 && !out.server_side_copy, "{out:?}");
        assert!(data_files(&target_dir).len() > before);
        assert_self_contained(&opener, &target, &model.sorted(), "hand clone").await;
        assert_peer_reads(opener.open(&target).unwrap(), &target_dir, "hand clone").await;
    }
}
