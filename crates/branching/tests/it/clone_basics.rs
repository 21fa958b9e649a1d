//! Shallow clones read exactly the source at their reference (tag, main head, branch head,
//! instant), on copy-on-write and merge-on-read tables; writes on either side never reach the
//! other; the source lists one pin per clone.

use arbor_branching::clone::{clone_table, list_pins, CloneAt};
use arbor_branching::{create_branch, create_tag, BranchSource, BranchingError};
use arbor_storage::StorageExt;
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, Model};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::{normalize_location, CloneDescriptor, CloneState, CLONE_FILE};

use crate::clone_support::{clone_ok, loc, opener, read_at, request, storage_at, write_at};

#[tokio::test]
async fn test_clone_reads_the_source_at_tag_head_branch_and_instant_and_stays_isolated() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        let dir = tempfile::tempdir().unwrap();
        let w1 = t.write(WriteOperation::Upsert, &rows(0..20, 1, "a")).await;
        let w2 = t.write(WriteOperation::Upsert, &rows(10..30, 2, "b")).await;
        create_tag(&t.table, "v1", Some(&w2), None).await.unwrap();
        t.write(WriteOperation::Upsert, &rows(0..5, 3, "c")).await;
        t.write(WriteOperation::Delete, &rows(25..28, 4, "")).await;
        create_branch(&t.table, "dev", BranchSource::MainHead)
            .await
            .unwrap();
        let dev = t.branch("dev").await;
        t.write_on(&dev, WriteOperation::Upsert, &rows(40..45, 5, "dev"))
            .await;

        let cases = [
            ("tag", CloneAt::Tag("v1".into()), t.read(Some(&w2)).await),
            ("head", CloneAt::Main, t.read(None).await),
            (
                "branch",
                CloneAt::Branch("dev".into()),
                t.read_branch(Some("dev"), None).await,
            ),
            (
                "instant",
                CloneAt::Instant(w1.clone()),
                t.read(Some(&w1)).await,
            ),
        ];
        let main_before = t.read(None).await;
        let dev_before = t.read_branch(Some("dev"), None).await;
        let mut ids = Vec::new();
        for (name, at, expected) in &cases {
            let target = dir.path().join(name);
            let out = clone_ok(&t.base, &target, at.clone()).await;
            assert!(!out.resumed);
            assert_eq!(out.pins.len(), 1, "{tt:?} {name}");
            assert!(out.data_files > 0);
            assert_eq!(&read_at(&target, None).await, expected, "{tt:?} {name}");
            let own = arbor_storage::ObjectStoreStorage::local(&target).unwrap();
            let (d, _) = CloneDescriptor::load(&own).await.unwrap().unwrap();
            assert_eq!(d.state, CloneState::Active);
            assert_eq!(d.id, out.id);
            // No data file was copied: the clone's own location holds metadata only.
            let data: Vec<String> = own
                .list_all("")
                .await
                .unwrap()
                .into_iter()
                .map(|m| m.key)
                .filter(|k| !k.starts_with(".hoodie"))
                .collect();
            assert!(data.is_empty(), "{tt:?} {name}: {data:?}");
            ids.push((out.id.clone(), target, expected.clone()));
        }

        // Writes on a clone never change what the source reads (arbor and hudi-rs).
        let (_, tag_clone, tag_rows) = &ids[0];
        let extra = rows(0..8, 9, "clone");
        write_at(tag_clone, WriteOperation::Upsert, &extra).await;
        let mut model = Model::default();
        model.upsert(tag_rows);
        model.upsert(&extra);
        assert_eq!(read_at(tag_clone, None).await, model.sorted(), "{tt:?}");
        assert_eq!(t.read(None).await, main_before, "{tt:?}");
        assert_eq!(t.read_branch(Some("dev"), None).await, dev_before);
        t.assert_valid("source after clone writes").await;
        t.assert_peer_agrees("clone peer check", "source after clone writes")
            .await;

        // The source's later writes never change a clone.
        t.write(WriteOperation::Upsert, &rows(0..30, 10, "later"))
            .await;
        for (_, target, expected) in &ids[1..] {
            assert_eq!(&read_at(target, None).await, expected, "{tt:?}");
        }

        // One pin per clone, with its fields.
        let pins = list_pins(&opener(), &loc(&t.base)).await.unwrap();
        assert_eq!(pins.len(), 4);
        for ((id, target, _), (_, at, _)) in ids.iter().zip(&cases) {
            let p = pins.iter().find(|p| &p.clone_id == id).unwrap();
            assert_eq!(p.location, normalize_location(&loc(target)).unwrap());
            assert!(!p.created.is_empty());
            let (root, reference) = match at {
                CloneAt::Tag(_) => ("main", "tag:v1".to_string()),
                CloneAt::Main => ("main", "main".to_string()),
                CloneAt::Branch(_) => ("dev", "branch:dev".to_string()),
                CloneAt::Instant(i) => ("main", format!("instant:{i}")),
            };
            assert_eq!((p.root.as_str(), p.reference.clone()), (root, reference));
        }
        assert_eq!(
            pins.iter()
                .find(|p| p.reference == "tag:v1")
                .unwrap()
                .instant,
            w2.to_string()
        );
    }
}

#[tokio::test]
async fn test_clone_into_a_table_or_another_clone_is_refused_and_changes_nothing() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    let other = create(TableType::CopyOnWrite, true).await;
    let before = other.listing().await;
    let err = clone_table(&opener(), &request(&t.base, &other.base, CloneAt::Main))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BranchingError::CloneTargetNotEmpty { .. }),
        "{err}"
    );
    assert_eq!(other.listing().await, before);
    assert!(list_pins(&opener(), &loc(&t.base))
        .await
        .unwrap()
        .is_empty());
    // Onto itself.
    let err = clone_table(&opener(), &request(&t.base, &t.base, CloneAt::Main))
        .await
        .unwrap_err();
    assert!(
        matches!(err, BranchingError::CloneTargetNotEmpty { .. }),
        "{err}"
    );
    // Over an existing clone (a different one).
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("c");
    clone_ok(&t.base, &target, CloneAt::Main).await;
    let err = clone_table(
        &opener(),
        &request(&t.base, &target, CloneAt::Tag("none".into())),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("holds clone"), "{err}");
    // A missing tag refuses before anything is written.
    let fresh = dir.path().join("fresh");
    let err = clone_table(
        &opener(),
        &request(&t.base, &fresh, CloneAt::Tag("none".into())),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, BranchingError::TagNotFound { .. }), "{err}");
    let own = arbor_storage::ObjectStoreStorage::local(&fresh).unwrap();
    assert!(!own.exists(CLONE_FILE).await.unwrap());
    assert_eq!(list_pins(&opener(), &loc(&t.base)).await.unwrap().len(), 1);
    // A table without the metadata table is refused, naming `arbor mdt init`.
    let plain = create(TableType::CopyOnWrite, false).await;
    plain
        .write(WriteOperation::Upsert, &rows(0..3, 1, "a"))
        .await;
    let err = clone_table(
        &opener(),
        &request(&plain.base, &dir.path().join("p"), CloneAt::Main),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("arbor mdt init"), "{err}");
    let _ = storage_at(&target).await;
}

#[tokio::test]
async fn test_clone_of_a_branch_tag_issues_instants_only_after_its_clone_point() {
    let t = create(TableType::CopyOnWrite, true).await;
    t.write(WriteOperation::Upsert, &rows(0..10, 1, "a")).await;
    create_branch(&t.table, "dev", BranchSource::MainHead)
        .await
        .unwrap();
    let dev = t.branch("dev").await;
    let d1 = t
        .write_on(&dev, WriteOperation::Upsert, &rows(5..15, 2, "dev"))
        .await;
    create_tag(&dev, "d1", Some(&d1), None).await.unwrap();
    t.write_on(&dev, WriteOperation::Upsert, &rows(0..3, 3, "dev2"))
        .await;
    let expected = t.read_branch(Some("dev"), Some(&d1)).await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("c");
    let mut req = request(&t.base, &target, CloneAt::Tag("d1".into()));
    req.tag_branch = Some("dev".into());
    let out = clone_table(&opener(), &req).await.unwrap();
    assert_eq!(
        (out.root.as_str(), out.instant.clone()),
        ("dev", d1.clone())
    );
    assert_eq!(out.pins[0].reference, "tag:d1");
    assert_eq!(read_at(&target, None).await, expected);
    // A tag or instant named for main while the clone names a branch head is refused.
    let mut bad = request(&t.base, &dir.path().join("x"), CloneAt::Main);
    bad.tag_branch = Some("dev".into());
    assert!(clone_table(&opener(), &bad).await.is_err());
    // The clone's own instants all come after its clone point, even on a clock behind it (a
    // year behind: beyond the default bound of how far the table's clock may run ahead of the
    // writer's, which this writer widens).
    let past = chrono::Utc::now() - chrono::Duration::days(365);
    let generator = std::sync::Arc::new(arbor_timeline::InstantTimeGenerator::with_clock(
        std::sync::Arc::new(arbor_timeline::generator::ManualClock::new(past)),
    ));
    let clone = crate::clone_support::table_at(&target)
        .await
        .with_write_options(arbor_table::WriteOptions {
            max_clock_ahead: std::time::Duration::from_secs(400 * 24 * 3600),
            ..arbor_table::WriteOptions::default()
        })
        .with_generator(generator);
    let w = clone
        .write(
            WriteOperation::Upsert,
            vec![arbor_testkit_tables::batch(&rows(50..52, 1, "c"))],
        )
        .await
        .unwrap()
        .instant;
    assert!(w > out.instant, "{w} <= {}", out.instant);
    assert_eq!(read_at(&target, None).await.len(), expected.len() + 2);
}
