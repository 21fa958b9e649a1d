//! Hudi readers that know nothing of clones (hudi-rs through the repo's peer reader) on a
//! shallow clone: an active clone makes them fail, naming it, instead of reading 0 rows (its
//! root `hoodie.properties` carries the legacy-reader guard, which arbor never sees, also after
//! the clone writes, branches, tags and cleans); after `detach` the guard is gone and hudi-rs
//! reads exactly what arbor reads.

use std::path::Path;
use std::process::Command;

use arbor_branching::clone::{detach_clone, CloneAt};
use arbor_branching::{clean, create_branch, create_tag, open_reader, BranchSource};
use arbor_cleaner::{CleanOptions, CleanPolicy};
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, rows_of, Model};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::clone_guard::is_guarded;
use arbor_timeline::layout::{LocationOpener, GUARDED_TABLE_TYPE};

use crate::clone_detach_support::*;

/// The root `hoodie.properties` of `dir` as stored, guarded or not.
fn root_config_guarded(dir: &Path) -> bool {
    is_guarded(&std::fs::read(dir.join(".hoodie/hoodie.properties")).unwrap())
}

/// `scripts/peer_reader.py` on `dir`: its exit status and stderr.
fn peer_attempt(python: &Path, dir: &Path) -> (bool, String) {
    let out = Command::new(python)
        .arg(arbor_testkit::repo_root().join("scripts/peer_reader.py"))
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// hudi-rs refuses the active clone at `dir`, naming the guard.
fn assert_peer_refuses(python: Option<&Path>, dir: &Path, step: &str) {
    assert!(root_config_guarded(dir), "{step}: the clone is not guarded");
    let Some(python) = python else {
        return;
    };
    let (ok, stderr) = peer_attempt(python, dir);
    assert!(!ok, "{step}: hudi-rs read an active shallow clone");
    assert!(
        stderr.contains(&GUARDED_TABLE_TYPE.to_ascii_lowercase()),
        "{step}: hudi-rs failed, but not on the guard: {stderr}"
    );
}

#[tokio::test]
async fn test_hudi_rs_on_active_clone_fails_then_reads_after_detach() {
    let python = arbor_testkit::peer_python_or_skip("hudi-rs on an active shallow clone");
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
        // The source itself stays readable by every reader.
        assert!(!root_config_guarded(&t.base));
        shallow(&opener, &src, &target, CloneAt::Main).await;
        // Right after creation, hudi-rs used to read 0 rows here without an error.
        assert_eq!(read(&opener, &target).await, model.sorted(), "{tt:?}");
        assert_peer_refuses(python.as_deref(), &target_dir, "created");

        // The clone writes, branches, tags and cleans (config rewrites, copies of the root
        // config into a branch): arbor reads on, the guard stays.
        let mine = rows(0..5, 3, "c");
        write(&opener, &target, WriteOperation::Upsert, &mine).await;
        model.upsert(&mine);
        let main = table(&opener, &target).await;
        create_branch(&main, "exp", BranchSource::MainHead)
            .await
            .unwrap();
        create_tag(&main, "mine", None, None).await.unwrap();
        let hard = CleanOptions {
            policy: CleanPolicy::KeepLatestCommits(1),
            ..CleanOptions::default()
        };
        clean(&main, hard).await.unwrap();
        assert_eq!(read(&opener, &target).await, model.sorted(), "{tt:?}");
        let branch = open_reader(open(&opener, &target).await, Some("exp"))
            .await
            .unwrap();
        assert_eq!(
            rows_of(&branch.snapshot(None).await.unwrap()),
            model.sorted(),
            "{tt:?}: the clone's branch"
        );
        assert_peer_refuses(python.as_deref(), &target_dir, "written");

        // Detach removes the guard: hudi-rs reads what arbor reads.
        detach_clone(&opener, &target).await.unwrap();
        assert!(!root_config_guarded(&target_dir), "{tt:?}: still guarded");
        assert_eq!(read(&opener, &target).await, model.sorted(), "{tt:?}");
        assert_peer_reads(opener.open(&target).unwrap(), &target_dir, "detached clone").await;
    }
}

#[tokio::test]
async fn test_a_guard_left_on_a_detached_clone_is_removed_when_arbor_opens_it() {
    let t = create(TableType::CopyOnWrite, true).await;
    let opener = registry();
    let src = loc(&t.base);
    let target_dir = t._tmp.path().join("clone");
    let target = loc(&target_dir);
    let r = rows(0..10, 1, "s");
    t.write(WriteOperation::Upsert, &r).await;
    shallow(&opener, &src, &target, CloneAt::Main).await;
    let guarded = std::fs::read(target_dir.join(".hoodie/hoodie.properties")).unwrap();
    detach_clone(&opener, &target).await.unwrap();
    // A writer holding the clone's `ClonedStorage` across the detach stored the guard again.
    std::fs::write(target_dir.join(".hoodie/hoodie.properties"), guarded).unwrap();
    let mut model = Model::default();
    model.upsert(&r);
    assert_eq!(read(&opener, &target).await, model.sorted());
    assert!(!root_config_guarded(&target_dir));
}
