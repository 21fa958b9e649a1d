//! The retention window's one-pass planning against a brute-force reference: on random
//! histories (copy-on-write and merge-on-read; inserts, upserts, deletes, insert-overwrites,
//! compactions, a compaction left pending), `FileSystemView::latest_file_slices_union` of any
//! set of instants is exactly the union of `latest_file_slices_within` as of each of them and
//! of the latest snapshot, and `RetentionProtection` protects exactly those slices' files.

use std::collections::BTreeSet;

use arbor_cleaner::protection::{slice_keys, ProtectionSource};
use arbor_cleaner::{CleanPolicy, ProtectionContext, RetentionProtection};
use arbor_fsview::{FileSlice, Horizon};
use arbor_table::read::TableReader;
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arbor_timeline::InstantTime;
use proptest::prelude::*;

use arbor_testkit_tables::{create, Row};

#[derive(Debug, Clone)]
enum Op {
    Upsert(u16),
    Insert(u16),
    Delete(u16),
    Overwrite(u16),
    Compact,
    ScheduleCompaction,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u16>().prop_map(Op::Upsert),
        2 => any::<u16>().prop_map(Op::Insert),
        1 => any::<u16>().prop_map(Op::Delete),
        1 => any::<u16>().prop_map(Op::Overwrite),
        1 => Just(Op::Compact),
        1 => Just(Op::ScheduleCompaction),
    ]
}

fn rows(mask: u16, step: usize) -> Vec<Row> {
    (0..12u32)
        .filter(|i| mask & (1 << i) != 0)
        .map(|i| {
            let region = if i % 2 == 0 { "us" } else { "eu" };
            (
                format!("k{i:04}"),
                region.to_string(),
                step as i64,
                format!("s{step}"),
            )
        })
        .collect()
}

fn brute_force_keys(slices: &[FileSlice]) -> BTreeSet<String> {
    slices.iter().flat_map(slice_keys).collect()
}

async fn check(table_type: TableType, ops: Vec<Op>, picks: Vec<usize>) {
    let t = create(table_type, true).await;
    let mut pending = false;
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Upsert(m) | Op::Insert(m) | Op::Delete(m) | Op::Overwrite(m) if m & 0xfff == 0 => {}
            Op::Upsert(m) => {
                t.write(WriteOperation::Upsert, &rows(m, step)).await;
            }
            Op::Insert(m) => {
                t.write(WriteOperation::BulkInsert, &rows(m, step)).await;
            }
            Op::Delete(m) => {
                t.write(WriteOperation::Delete, &rows(m, step)).await;
            }
            Op::Overwrite(m) if !pending => {
                t.write(WriteOperation::InsertOverwrite, &rows(m, step))
                    .await;
            }
            Op::Overwrite(_) => {}
            Op::Compact if table_type == TableType::MergeOnRead => {
                t.table.compact().await.unwrap();
                pending = false;
            }
            Op::ScheduleCompaction if table_type == TableType::MergeOnRead && !pending => {
                let (storage, layout, generator) = (
                    t.table.view_storage(),
                    t.table.layout(),
                    t.table.generator(),
                );
                pending = t
                    .table
                    .with_table_lock(async {
                        arbor_table::write::compaction::schedule_compaction(
                            storage, layout, generator,
                        )
                        .await
                    })
                    .await
                    .unwrap()
                    .is_some();
            }
            Op::Compact | Op::ScheduleCompaction => {}
        }
    }
    let reader = TableReader::open(t.storage.clone()).await.unwrap();
    let view = reader.view();
    let writes: Vec<InstantTime> = view
        .history()
        .completed_writes()
        .iter()
        .map(|i| i.requested_time.clone())
        .collect();
    // Some written instants, and instants between and around them.
    let mut chosen: Vec<InstantTime> = Vec::new();
    for p in &picks {
        if let Some(w) = writes.get(p % (writes.len() + 1)) {
            chosen.push(w.clone());
        }
    }
    chosen.push(InstantTime::parse("19700101000000000").unwrap());
    let union = view.latest_file_slices_union(&chosen).await.unwrap();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for h in chosen
        .iter()
        .map(|t| Horizon::AsOf(t.clone()))
        .chain([Horizon::Latest])
    {
        for s in view.latest_file_slices_within(None, &h).await.unwrap() {
            expected.insert(format!("{s:?}"));
        }
    }
    let got: BTreeSet<String> = union.iter().map(|s| format!("{s:?}")).collect();
    assert_eq!(got.len(), union.len(), "each slice once");
    assert_eq!(got, expected);
    let mut sorted = union.clone();
    sorted.sort_by(|a, b| {
        (&a.partition, &a.file_id, &a.base_instant).cmp(&(
            &b.partition,
            &b.file_id,
            &b.base_instant,
        ))
    });
    assert_eq!(sorted, union, "ordered by partition, file id, base instant");

    // The retention source protects exactly the files of the retained snapshots.
    let ctx = ProtectionContext {
        storage: &t.storage,
        view,
        now: chrono::Utc::now(),
    };
    for n in [1usize, 2, 3, 10] {
        let source = RetentionProtection {
            policy: CleanPolicy::KeepLatestCommits(n),
        };
        let mut slices = view.latest_file_slices(None, None).await.unwrap();
        for t in source.retained_instants(&ctx) {
            slices.extend(view.latest_file_slices(None, Some(&t)).await.unwrap());
        }
        assert_eq!(
            source.protected(&ctx).await.unwrap(),
            brute_force_keys(&slices),
            "KEEP_LATEST_COMMITS {n}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    #[test]
    fn test_retention_union_equals_brute_force_on_random_histories(
        mor in any::<bool>(),
        ops in prop::collection::vec(op(), 1..10),
        picks in prop::collection::vec(any::<usize>(), 0..5),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let table_type = if mor { TableType::MergeOnRead } else { TableType::CopyOnWrite };
        rt.block_on(check(table_type, ops, picks));
    }
}
