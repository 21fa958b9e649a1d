//! Branch and tag names are Unicode NFC: the precomposed and decomposed spellings of a name
//! (`é` as U+00E9, or `e` + U+0301) address one branch or tag, which is stored under the NFC
//! form; a branch or tag an older arbor stored under a name that is not NFC stays reachable by
//! either spelling.

use std::path::Path;

use arbor_branching::clone::{clone_table, CloneAt, CloneRequest};
use arbor_branching::{
    create_branch, create_tag, drop_branch, drop_tag, list_branches, list_tags, open_branch,
    tag_reader, BranchSource, BranchingError, TagFilter,
};
use arbor_table::WriteOperation;
use arbor_testkit_tables::{create, rows, rows_of, Model, TestTable};
use arbor_timeline::config::TableType;
use arbor_timeline::layout::PinRecord;

use crate::clone_detach_support::{loc, registry};

/// `café`, precomposed (NFC).
const NFC: &str = "caf\u{e9}";
/// `café`, decomposed (NFD).
const NFD: &str = "cafe\u{301}";

/// The names of the entries of directory `dir` (none when it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A table with one write on main; returns it and main's model.
async fn table() -> (TestTable, Model) {
    let t = create(TableType::MergeOnRead, true).await;
    let mut model = Model::default();
    let r = rows(0..10, 1, "m");
    t.write(WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    (t, model)
}

#[tokio::test]
async fn test_branch_spellings_address_one_branch_stored_nfc() {
    let (t, mut model) = table().await;
    let info = create_branch(&t.table, NFD, BranchSource::MainHead)
        .await
        .unwrap();
    assert_eq!(info.name, NFC, "stored under the NFC form");
    let branches = t.base.join(".hoodie/branches");
    assert_eq!(entries(&branches), vec![NFC.to_string()]);
    assert_eq!(
        entries(&t.base.join(".hoodie/metadata/.hoodie/branches")),
        vec![NFC.to_string()]
    );
    // The other spelling is the same branch: creating it again is refused.
    let err = create_branch(&t.table, NFC, BranchSource::MainHead)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BranchingError::Refused { reason, .. } if reason.contains("exists")),
        "{err}"
    );
    // Write with one spelling, read with the other.
    let b = open_branch(t.storage.clone(), NFC).await.unwrap();
    let r = rows(5..15, 2, "b");
    t.write_on(&b, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_eq!(t.read_branch(Some(NFD), None).await, model.sorted());
    assert_eq!(t.read_branch(Some(NFC), None).await, model.sorted());
    let listed = list_branches(&t.storage).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].info.name, NFC);
    // Drop with the first spelling.
    drop_branch(&t.table, NFD).await.unwrap();
    assert!(list_branches(&t.storage).await.unwrap().is_empty());
    assert!(entries(&branches).iter().all(|e| e != NFC && e != NFD));
}

#[tokio::test]
async fn test_tag_spellings_address_one_tag_stored_nfc() {
    let (t, model) = table().await;
    let tag = create_tag(&t.table, NFD, None, None).await.unwrap();
    assert_eq!(tag.name, NFC);
    assert_eq!(
        entries(&t.base.join(".hoodie/tags")),
        vec![format!("{NFC}.json")]
    );
    let err = create_tag(&t.table, NFC, None, None).await.unwrap_err();
    assert!(
        matches!(&err, BranchingError::Refused { reason, .. } if reason.contains("exists")),
        "{err}"
    );
    let listed = list_tags(&t.storage, None, TagFilter::All).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    for spelling in [NFC, NFD] {
        let (reader, at) = tag_reader(t.storage.clone(), None, spelling).await.unwrap();
        assert_eq!(
            rows_of(&reader.snapshot(Some(&at)).await.unwrap()),
            model.sorted()
        );
    }
    // A branch from the tag, named by the other spelling, records the stored name.
    let info = create_branch(&t.table, "from-tag", BranchSource::Tag(NFD))
        .await
        .unwrap();
    assert_eq!(info.from_tag.as_deref(), Some(NFC));
    drop_branch(&t.table, "from-tag").await.unwrap();
    assert!(drop_tag(&t.table, NFD, false, false).await.unwrap());
    assert!(list_tags(&t.storage, None, TagFilter::All)
        .await
        .unwrap()
        .is_empty());
    assert!(!drop_tag(&t.table, NFC, false, true).await.unwrap());
}

/// Renames branch `from`'s directories (both sides) to `to` and rewrites the name in its
/// `branch.json` files: the branch as an arbor that did not normalise names stored it.
fn restore_legacy_branch(base: &Path, from: &str, to: &str) {
    for side in [".hoodie/branches", ".hoodie/metadata/.hoodie/branches"] {
        let dir = base.join(side);
        std::fs::rename(dir.join(from), dir.join(to)).unwrap();
        let json = dir.join(to).join("branch.json");
        let text = std::fs::read_to_string(&json).unwrap();
        let old = format!("\"name\": \"{from}\"");
        assert!(text.contains(&old), "{text}");
        std::fs::write(&json, text.replace(&old, &format!("\"name\": \"{to}\""))).unwrap();
    }
}

#[tokio::test]
async fn test_a_legacy_branch_stored_decomposed_is_reachable_by_both_spellings() {
    let (t, mut model) = table().await;
    create_branch(&t.table, NFC, BranchSource::MainHead)
        .await
        .unwrap();
    restore_legacy_branch(&t.base, NFC, NFD);
    // Listed once, under its stored name.
    let listed = list_branches(&t.storage).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].info.name, NFD);
    // Either spelling reaches it.
    let b = open_branch(t.storage.clone(), NFC).await.unwrap();
    let r = rows(20..25, 2, "legacy");
    t.write_on(&b, WriteOperation::Upsert, &r).await;
    model.upsert(&r);
    assert_eq!(t.read_branch(Some(NFD), None).await, model.sorted());
    assert_eq!(t.read_branch(Some(NFC), None).await, model.sorted());
    // No second branch of the same name can be made beside it.
    let err = create_branch(&t.table, NFC, BranchSource::MainHead)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("stored as"), "{err}");
    // Dropped by the other spelling: its directories go.
    drop_branch(&t.table, NFC).await.unwrap();
    assert!(list_branches(&t.storage).await.unwrap().is_empty());
    assert!(!entries(&t.base.join(".hoodie/branches")).contains(&NFD.to_string()));
}

#[tokio::test]
async fn test_a_legacy_tag_stored_decomposed_is_reachable_by_both_spellings() {
    let (t, model) = table().await;
    create_tag(&t.table, NFC, None, None).await.unwrap();
    let tags = t.base.join(".hoodie/tags");
    let text = std::fs::read_to_string(tags.join(format!("{NFC}.json"))).unwrap();
    std::fs::remove_file(tags.join(format!("{NFC}.json"))).unwrap();
    std::fs::write(
        tags.join(format!("{NFD}.json")),
        text.replace(&format!("\"{NFC}\""), &format!("\"{NFD}\"")),
    )
    .unwrap();
    let listed = list_tags(&t.storage, None, TagFilter::All).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, NFD);
    for spelling in [NFC, NFD] {
        let (reader, at) = tag_reader(t.storage.clone(), None, spelling).await.unwrap();
        assert_eq!(
            rows_of(&reader.snapshot(Some(&at)).await.unwrap()),
            model.sorted()
        );
    }
    let err = create_tag(&t.table, NFC, None, None).await.unwrap_err();
    assert!(err.to_string().contains("stored as"), "{err}");
    assert!(drop_tag(&t.table, NFC, false, false).await.unwrap());
    assert!(entries(&tags).is_empty());
}

#[tokio::test]
async fn test_a_clone_of_a_branch_and_tag_records_their_stored_names() {
    let (t, _) = table().await;
    create_branch(&t.table, NFD, BranchSource::MainHead)
        .await
        .unwrap();
    create_tag(&t.table, NFD, None, None).await.unwrap();
    let opener = registry();
    let src = loc(&t.base);
    for (dir, at) in [
        ("clone-b", CloneAt::Branch(NFD.to_string())),
        ("clone-t", CloneAt::Tag(NFD.to_string())),
    ] {
        let target = loc(&t._tmp.path().join(dir));
        let req = CloneRequest {
            source: src.clone(),
            target,
            at,
            tag_branch: None,
            deep: false,
        };
        let out = clone_table(&opener, &req).await.unwrap();
        assert!(
            out.reference == format!("branch:{NFC}") || out.reference == format!("tag:{NFC}"),
            "{}",
            out.reference
        );
    }
    let pins = PinRecord::list(t.storage.as_ref()).await.unwrap();
    assert!(pins.iter().any(|p| p.root == NFC), "{pins:?}");
    // The pinned branch cannot be dropped, by either spelling.
    let err = drop_branch(&t.table, NFD).await.unwrap_err();
    assert!(matches!(err, BranchingError::PinHeld { .. }), "{err}");
}
