//! Deep clones (`clone_table` with `deep: true`): the snapshot's files are copied with the
//! metadata and the clone ends detached, so no pin (and no savepoint) remains on the source,
//! the clone reads from its own location alone (arbor without sources, hudi-rs at its path),
//! and nothing the source does afterwards, its hardest clean included, changes it.

use arbor_branching::clean;
use arbor_branching::clone::{clone_table, list_pins, CloneAt, CloneRequest};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_table::{Table, WriteOperation};
use arbor_testkit_tables::{create, rows, Model};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::{CloneState, LocationOpener};

use crate::clone_detach_support::*;

#[tokio::test]
async fn test_deep_clone_is_self_contained_unpinned_and_immune_to_the_source() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let opener = registry();
        let src = loc(&t.base);
        let target_dir = t._tmp.path().join("deep");
        let target = loc(&target_dir);
        let mut model = Model::default();
        for (i, ids) in [(1, 0..20), (2, 10..30)] {
            let r = rows(ids, i, "s");
            t.write(WriteOperation::Upsert, &r).await;
            model.upsert(&r);
        }
        let req = CloneRequest {
            source: src.clone(),
            target: target.clone(),
            at: CloneAt::Main,
            tag_branch: None,
            deep: true,
        };
        let out = clone_table(&opener, &req).await.unwrap();
        assert!(out.deep && !out.resumed, "{out:?}");
        assert!(out.pins.is_empty(), "{out:?}");
        assert!(
            out.files_copied >= out.data_files && out.data_files > 0,
            "{out:?}"
        );
        assert!(out.bytes_copied > 0 && out.server_side_copy, "{out:?}");
        let d = descriptor(&opener, &target).await;
        assert!(d.deep && d.state == CloneState::Detached, "{d:?}");
        assert!(list_pins(&opener, &src).await.unwrap().is_empty());
        assert!(
            savepoint_files(t.storage.as_ref()).await.is_empty(),
            "{tt:?}"
        );
        assert_self_contained(&opener, &target, &model.sorted(), "deep clone").await;
        assert_peer_reads(opener.open(&target).unwrap(), &target_dir, "deep clone").await;

        // The same request again: already complete, nothing copied.
        let again = clone_table(&opener, &req).await.unwrap();
        assert!(again.resumed && again.files_copied == 0, "{again:?}");
        assert_eq!(again.id, out.id);

        // The source overwrites everything and cleans as hard as it can.
        t.write(WriteOperation::InsertOverwriteTable, &rows(0..5, 3, "o"))
            .await;
        t.write(WriteOperation::Upsert, &rows(0..5, 4, "o")).await;
        let before = data_files(&t.base).len();
        let main = Table::open(t.storage.clone()).await.unwrap();
        clean(
            &main,
            CleanOptions {
                policy: CleanPolicy::KeepLatestCommits(1),
                ..CleanOptions::default()
            },
        )
        .await
        .unwrap();
        assert!(
            data_files(&t.base).len() < before,
            "{tt:?}: the source reclaimed the snapshot"
        );
        assert_eq!(read(&opener, &target).await, model.sorted(), "{tt:?}");
        assert_self_contained(
            &opener,
            &target,
            &model.sorted(),
            "after the source's clean",
        )
        .await;

        // The deep clone is a table of its own.
        let r = rows(50..55, 9, "d");
        write(&opener, &target, WriteOperation::Upsert, &r).await;
        model.upsert(&r);
        assert_eq!(read(&opener, &target).await, model.sorted());
        assert_peer_reads(
            opener.open(&target).unwrap(),
            &target_dir,
            "deep clone written",
        )
        .await;
    }
}
