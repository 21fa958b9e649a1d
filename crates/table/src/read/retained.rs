//! Whether a time-travel snapshot is still whole: a snapshot computed from today's files
//! silently falls back to an older version (or to nothing) for a file group whose file of that
//! snapshot a clean has deleted. Time travel is refused then
//! ([`TableError::SnapshotNotRetained`]), as savepoint creation refuses such an instant.
//!
//! Rule: only cleans completed after the instant `t` can have deleted a file `t`'s snapshot
//! reads (an earlier clean deleted only files superseded before it). A file such a clean
//! deleted, named by instant `i <= t` in file group `g`, is read by `t`'s snapshot unless a
//! base file of `g` with an instant in `(i, t]` supersedes it (known from the current listing
//! or from files the cleans deleted), or `g` was replaced by a replacecommit at or before `t`.

use std::collections::{BTreeMap, BTreeSet};

use arbor_fsview::{parse_data_file_name, DataFile, FileSystemView};
use arbor_timeline::avro::{decode, HoodieCleanMetadata};
use arbor_timeline::{Action, InstantTime, State};

use crate::error::{Result, TableError};

/// One file a clean deleted, as the rule needs it.
struct Deleted {
    partition: String,
    name: String,
    file_id: String,
    instant: InstantTime,
    clean: InstantTime,
}

/// Refuses a read as of `t` when a clean has deleted a file `t`'s snapshot reads.
pub(crate) async fn check_retained(view: &FileSystemView, t: &InstantTime) -> Result<()> {
    let active = view.history().active();
    let mut deleted = Vec::new();
    for clean in active.filter(&[Action::Clean], &[State::Completed]) {
        if clean.requested_time <= *t {
            continue;
        }
        let key = active.key_of(&clean)?;
        let meta: HoodieCleanMetadata = decode(&active.read(&clean).await?, &key)?;
        for (partition, p) in &meta.partition_metadata {
            for path in &p.success_delete_files {
                let name = path.rsplit('/').next().unwrap_or(path);
                let Ok(Some(file)) = parse_data_file_name(name, 0) else {
                    continue;
                };
                // Change-data-capture files (`.cdc`) are read by CDC queries, never by a
                // snapshot.
                if matches!(&file, DataFile::Log(l) if l.cdc) {
                    continue;
                }
                let instant = file.instant_time().clone();
                if instant <= *t {
                    deleted.push(Deleted {
                        partition: partition.clone(),
                        name: name.to_string(),
                        file_id: file.file_id().to_string(),
                        instant,
                        clean: clean.requested_time.clone(),
                    });
                }
            }
        }
    }
    if deleted.is_empty() {
        return Ok(());
    }
    // Base-file instants per (partition, file group): listed now, or deleted by those cleans.
    let mut bases: BTreeMap<(String, String), BTreeSet<InstantTime>> = BTreeMap::new();
    let partitions: BTreeSet<&str> = deleted.iter().map(|d| d.partition.as_str()).collect();
    for p in partitions {
        // A partition removed since has no listing: its deleted files decide alone.
        let Ok(files) = view.partition_files(p).await else {
            continue;
        };
        for f in files.iter() {
            if let Ok(Some(DataFile::Base(b))) = parse_data_file_name(&f.name, f.size) {
                bases
                    .entry((p.to_string(), b.file_id.clone()))
                    .or_default()
                    .insert(b.instant_time.clone());
            }
        }
    }
    for d in &deleted {
        if let Ok(Some(DataFile::Base(b))) = parse_data_file_name(&d.name, 0) {
            bases
                .entry((d.partition.clone(), b.file_id.clone()))
                .or_default()
                .insert(b.instant_time.clone());
        }
    }
    let replaced: BTreeSet<(&str, &str)> = view
        .replaced_file_groups()
        .iter()
        .filter(|r| r.instant <= *t)
        .map(|r| (r.partition.as_str(), r.file_id.as_str()))
        .collect();
    for d in &deleted {
        if replaced.contains(&(d.partition.as_str(), d.file_id.as_str())) {
            continue;
        }
        let superseded = bases
            .get(&(d.partition.clone(), d.file_id.clone()))
            .is_some_and(|s| s.iter().any(|b| *b > d.instant && *b <= *t));
        if !superseded {
            let file = if d.partition.is_empty() {
                d.name.clone()
            } else {
                format!("{}/{}", d.partition, d.name)
            };
            return Err(TableError::SnapshotNotRetained {
                instant: t.to_string(),
                clean: d.clean.to_string(),
                file,
            });
        }
    }
    Ok(())
}
