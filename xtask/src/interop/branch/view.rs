//! Peer views: a directory that shows one metadata root of a table to a reader that knows only
//! `.hoodie/`.

use std::path::Path;

use arbor_timeline::MetaRoot;

/// Builds at `view` a table directory that shows metadata root `root` of the table at `base`
/// to a reader that knows only `.hoodie/`: `.hoodie/hoodie.properties` and `.hoodie/timeline`
/// link to the root's data-side ones, `.hoodie/metadata/<partition>` to every real
/// metadata-table partition, `.hoodie/metadata/.hoodie` to the root's MDT-side meta directory,
/// and every other entry of `base` (the data partitions) is linked as is.
pub fn peer_view(base: &Path, root: &MetaRoot, view: &Path) -> Result<(), String> {
    let meta = view.join(".hoodie");
    let mdt = meta.join("metadata");
    std::fs::create_dir_all(&mdt).map_err(|e| format!("cannot create {}: {e}", mdt.display()))?;
    let data_meta = base.join(root.data_meta_dir());
    for name in ["hoodie.properties", "timeline"] {
        link(&data_meta.join(name), &meta.join(name))?;
    }
    link(&base.join(root.mdt_meta_dir()), &mdt.join(".hoodie"))?;
    for (from, to) in [
        (base.join(".hoodie/metadata"), mdt),
        (base.to_path_buf(), view.to_path_buf()),
    ] {
        let entries =
            std::fs::read_dir(&from).map_err(|e| format!("cannot list {}: {e}", from.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", from.display()))?;
            let name = entry.file_name();
            if name != ".hoodie" {
                link(&entry.path(), &to.join(&name))?;
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) -> Result<(), String> {
    if !target.exists() {
        return Err(format!("{} does not exist", target.display()));
    }
    std::os::unix::fs::symlink(target, at)
        .map_err(|e| format!("cannot link {} to {}: {e}", at.display(), target.display()))
}

#[cfg(not(unix))]
fn link(target: &Path, at: &Path) -> Result<(), String> {
    if target.is_dir() {
        copy_dir(target, at)
    } else {
        std::fs::copy(target, at)
            .map(|_| ())
            .map_err(|e| format!("cannot copy {} to {}: {e}", target.display(), at.display()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn test_peer_view_links_root_metadata_and_partitions() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("t");
        let root = MetaRoot::Publication(2);
        let data_meta = base.join(root.data_meta_dir());
        let mdt_meta = base.join(root.mdt_meta_dir());
        for d in [
            data_meta.join("timeline"),
            mdt_meta.join("timeline"),
            base.join(".hoodie/timeline"),
            base.join(".hoodie/metadata/files"),
            base.join("region=asia"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(data_meta.join("hoodie.properties"), "p2").unwrap();
        std::fs::write(data_meta.join("timeline/1_2.commit"), "c").unwrap();
        std::fs::write(mdt_meta.join("hoodie.properties"), "mdt p2").unwrap();
        std::fs::write(base.join(".hoodie/hoodie.properties"), "root").unwrap();
        std::fs::write(base.join("region=asia/f.parquet"), "d").unwrap();
        let view = tmp.path().join("view");
        assert_eq!(peer_view(&base, &root, &view), Ok(()));
        let read = |p: &str| std::fs::read_to_string(view.join(p)).unwrap();
        assert_eq!(read(".hoodie/hoodie.properties"), "p2");
        assert_eq!(read(".hoodie/timeline/1_2.commit"), "c");
        assert_eq!(read(".hoodie/metadata/.hoodie/hoodie.properties"), "mdt p2");
        assert!(view.join(".hoodie/metadata/files").is_dir());
        assert_eq!(read("region=asia/f.parquet"), "d");
        assert!(!view.join(".hoodie/branches").exists());
        // A root without metadata cannot be viewed.
        let e = peer_view(&base, &MetaRoot::Publication(3), &tmp.path().join("v3")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
    }
}
