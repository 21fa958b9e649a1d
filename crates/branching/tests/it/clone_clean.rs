//! A clone survives its source's hardest cleaning: the tag it was made from dropped, several
//! writes, cleans keeping one commit and one file version, archival, a TTL run deleting a
//! partition; the clone's own clean never deletes a source file. Clones of clones pin every
//! table they read files of and cannot reach before their source's clone point.

use std::collections::BTreeSet;

use arbor_branching::clone::{clone_table, list_pins, CloneAt};
use arbor_branching::{create_tag, drop_tag};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_table::ttl::{PolicyScope, Retention, TtlPolicy, TtlRunOptions, TtlStrategy};
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, Model};
use arbor_timeline::config::TableType;

use crate::clone_support::{clone_ok, loc, opener, read_at, request, table_at, write_at};

fn hard(policy: CleanPolicy) -> CleanOptions {
    CleanOptions {
        policy,
        dry_run: false,
        archive: true,
        extra_sources: Vec::new(),
    }
}

#[tokio::test]
async fn test_clone_reads_after_the_tag_is_dropped_and_the_source_is_cleaned_hard_and_ttl_runs() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        t.write(WriteOperation::Upsert, &rows(0..20, 1, "a")).await;
        let w2 = t.write(WriteOperation::Upsert, &rows(10..30, 2, "b")).await;
        create_tag(&t.table, "v1", Some(&w2), None).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("c");
        clone_ok(&t.base, &target, CloneAt::Tag("v1".into())).await;
        let expected = t.read(Some(&w2)).await;
        drop_tag(&t.table, "v1", false, false).await.unwrap();
        let mut seen: BTreeSet<String> = t.data_files().await.into_iter().collect();
        for i in 0..4 {
            t.write(WriteOperation::Upsert, &rows(0..30, 10 + i, "later"))
                .await;
            if tt == TableType::MergeOnRead {
                t.table.compact().await.unwrap();
            }
            seen.extend(t.data_files().await);
            arbor_branching::clean(&t.table, hard(CleanPolicy::KeepLatestCommits(1)))
                .await
                .unwrap();
        }
        arbor_branching::clean(&t.table, hard(CleanPolicy::KeepLatestFileVersions(1)))
            .await
            .unwrap();
        let after: BTreeSet<String> = t.data_files().await.into_iter().collect();
        // The clean did work (older versions of the source's own later writes went), and the
        // clone still reads its snapshot exactly.
        assert!(
            seen.difference(&after).next().is_some(),
            "{tt:?}: the cleans deleted nothing"
        );
        assert_eq!(read_at(&target, None).await, expected, "{tt:?}");

        // TTL on the source deletes a partition the clone reads; cleaning then reclaims only
        // what the pin does not hold.
        t.table
            .set_ttl_policy(TtlPolicy {
                strategy: TtlStrategy::Count,
                retain: Retention::Count(1),
                scope: PolicyScope::Default { fields: vec![] },
                time_field: None,
                format: None,
            })
            .await
            .unwrap();
        let run = t.table.run_ttl(&TtlRunOptions::default()).await.unwrap();
        assert!(run.commit.is_some(), "{tt:?}: TTL deleted nothing");
        arbor_branching::clean(&t.table, hard(CleanPolicy::KeepLatestCommits(1)))
            .await
            .unwrap();
        assert!(
            t.read(None).await.len() < expected.len(),
            "{tt:?}: TTL kept every row"
        );
        assert_eq!(read_at(&target, None).await, expected, "{tt:?}");
        t.assert_valid("source after TTL and clean").await;

        // The clone's own writes and hard cleans delete nothing of the source.
        let source_files: BTreeSet<String> = t.data_files().await.into_iter().collect();
        let mut model = Model::default();
        model.upsert(&expected);
        for i in 0..3 {
            let r = rows(0..30, 100 + i, "clone");
            write_at(&target, WriteOperation::Upsert, &r).await;
            model.upsert(&r);
        }
        let clone = table_at(&target).await;
        arbor_branching::clean(&clone, hard(CleanPolicy::KeepLatestFileVersions(1)))
            .await
            .unwrap();
        assert_eq!(read_at(&target, None).await, model.sorted(), "{tt:?}");
        let now: BTreeSet<String> = t.data_files().await.into_iter().collect();
        assert_eq!(
            now, source_files,
            "{tt:?}: the clone's clean reached the source"
        );
    }
}

#[tokio::test]
async fn test_clone_of_a_clone_pins_both_tables_and_refuses_before_the_middle_clone_point() {
    let a = create(TableType::MergeOnRead, true).await;
    let w1 = a.write(WriteOperation::Upsert, &rows(0..20, 1, "a")).await;
    let w2 = a.write(WriteOperation::Upsert, &rows(10..30, 2, "b")).await;
    let dir = tempfile::tempdir().unwrap();
    let (b, c) = (dir.path().join("b"), dir.path().join("c"));
    let cb = clone_ok(&a.base, &b, CloneAt::Main).await;
    assert_eq!(cb.instant, w2);
    let mut model = Model::default();
    model.upsert(&a.read(None).await);
    let r = rows(25..35, 3, "on b");
    write_at(&b, WriteOperation::Upsert, &r).await;
    model.upsert(&r);

    // Before b's clone point: refused, naming the farther source.
    let err = clone_table(
        &opener(),
        &request(&b, &dir.path().join("early"), CloneAt::Instant(w1.clone())),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("clone point"), "{err}");
    assert!(err.to_string().contains(&loc(&a.base)), "{err}");

    let cc = clone_ok(&b, &c, CloneAt::Main).await;
    assert_eq!(cc.pins.len(), 2);
    assert_eq!(read_at(&c, None).await, model.sorted());
    let on_a: Vec<String> = list_pins(&opener(), &loc(&a.base))
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.clone_id)
        .collect();
    assert!(on_a.contains(&cb.id) && on_a.contains(&cc.id), "{on_a:?}");
    let on_b = list_pins(&opener(), &loc(&b)).await.unwrap();
    assert_eq!(on_b.len(), 1);
    assert_eq!(on_b[0].clone_id, cc.id);

    // Hard cleans on a and on b keep c reading.
    for i in 0..3 {
        a.write(WriteOperation::Upsert, &rows(0..35, 10 + i, "a later"))
            .await;
        write_at(&b, WriteOperation::Upsert, &rows(0..35, 10 + i, "b later")).await;
    }
    arbor_branching::clean(&a.table, hard(CleanPolicy::KeepLatestFileVersions(1)))
        .await
        .unwrap();
    let tb = table_at(&b).await;
    arbor_branching::clean(&tb, hard(CleanPolicy::KeepLatestFileVersions(1)))
        .await
        .unwrap();
    assert_eq!(read_at(&c, None).await, model.sorted());
    // And c's own writes leave b and a alone.
    let b_rows = read_at(&b, None).await;
    let a_rows = a.read(None).await;
    write_at(&c, WriteOperation::Delete, &rows(0..5, 50, "")).await;
    assert_eq!(read_at(&b, None).await, b_rows);
    assert_eq!(a.read(None).await, a_rows);
}
