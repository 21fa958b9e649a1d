//! A hard clean of the source (`KEEP_LATEST_COMMITS 1` with archival, after a new write) races
//! the creation of a clone of an older snapshot, many times, with the two tasks started in a
//! random order and after random delays on a multi-threaded runtime. Whatever the interleaving,
//! the clone is either refused (the clean came first: the snapshot can no longer be pinned
//! whole; nothing is left behind: no pin, no reservation) or it reads its snapshot fully (the
//! pin came first: the clean kept every file of it). Never a clone with a missing file.

use std::time::Duration;

use arbor_branching::clone::{clone_table, list_pins, CloneAt};
use arbor_branching::BranchingError;
use arbor_cleaner::{CleanOptions, CleanPolicy, CleanerError};
use arbor_storage::StorageExt;
use arbor_table::{Table, WriteOperation};
use arbor_testkit_tables::{batch, create, rows};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::CLONE_FILE;

use crate::clone_support::{loc, opener, read_at, request};

/// A small deterministic generator (the iteration's interleaving comes from it and the
/// scheduler).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_source_clean_racing_clone_creation_never_leaves_a_half_protected_clone() {
    let mut rng = Lcg(0x5eed_c10e);
    let (mut made, mut refused) = (0, 0);
    for i in 0..10u64 {
        let tt = if i % 2 == 0 {
            TableType::CopyOnWrite
        } else {
            TableType::MergeOnRead
        };
        let t = create(tt, true).await;
        t.write(WriteOperation::Upsert, &rows(0..20, 1, "a")).await;
        let w2 = t.write(WriteOperation::Upsert, &rows(0..20, 2, "b")).await;
        t.write(WriteOperation::Upsert, &rows(0..20, 3, "c")).await;
        if tt == TableType::MergeOnRead {
            t.table.compact().await.unwrap();
        }
        let snapshot = t.read(Some(&w2)).await;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("c");
        let req = request(&t.base, &target, CloneAt::Instant(w2.clone()));
        let (clone_delay, clean_delay) = (rng.next(900), rng.next(200));
        let base = t.base.clone();
        let cleaner = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(clean_delay)).await;
            let storage: std::sync::Arc<dyn arbor_storage::Storage> =
                std::sync::Arc::new(arbor_storage::ObjectStoreStorage::local(&base).unwrap());
            let table = Table::open(storage).await.unwrap();
            table
                .write(WriteOperation::Upsert, vec![batch(&rows(0..20, 4, "d"))])
                .await
                .unwrap();
            if tt == TableType::MergeOnRead {
                table.compact().await.unwrap();
            }
            let options = CleanOptions {
                policy: CleanPolicy::KeepLatestCommits(1),
                dry_run: false,
                archive: true,
                extra_sources: Vec::new(),
            };
            arbor_branching::clean(&table, options).await.unwrap();
        });
        let cloner = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(clone_delay)).await;
            clone_table(&opener(), &req).await
        });
        let result = cloner.await.unwrap();
        cleaner.await.unwrap();
        match result {
            Ok(out) => {
                made += 1;
                assert_eq!(out.instant, w2);
                assert_eq!(read_at(&target, None).await, snapshot, "iteration {i}");
                // And it keeps reading after the source is cleaned once more.
                arbor_branching::clean(
                    &t.table,
                    CleanOptions {
                        policy: CleanPolicy::KeepLatestFileVersions(1),
                        dry_run: false,
                        archive: true,
                        extra_sources: Vec::new(),
                    },
                )
                .await
                .unwrap();
                assert_eq!(read_at(&target, None).await, snapshot, "iteration {i}");
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        BranchingError::Refused { .. }
                            | BranchingError::Cleaner(CleanerError::Refused { .. })
                    ),
                    "iteration {i}: {e}"
                );
                refused += 1;
                assert!(list_pins(&opener(), &loc(&t.base))
                    .await
                    .unwrap()
                    .is_empty());
                let own = arbor_storage::ObjectStoreStorage::local(&target).unwrap();
                assert!(!own.exists(CLONE_FILE).await.unwrap(), "iteration {i}");
            }
        }
        t.assert_valid("source after the race").await;
    }
    eprintln!("clone/clean race: {made} clones made, {refused} refused");
}
