//! Where a table's metadata lives: the meta directory, the active timeline and its history.

use crate::config::TableConfig;
use crate::error::{Result, TimelineError};
use crate::instant::Instant;
use crate::naming::{instant_file_name, LayoutVersion};

pub use super::paths::DEFAULT_META_DIR;

/// Keys (relative to the table base) of one timeline: the meta directory holding
/// `hoodie.properties`, the directory of active instant files and the archived history.
///
/// For table versions 8 and 9 (layout 2): `<meta>/timeline/` and `<meta>/timeline/history/`
/// (or the directories named by `hoodie.timeline.path` / `hoodie.timeline.history.path`).
/// For version 6 (layout 1): instants directly in `<meta>/`; v6's archived log files in
/// `<meta>/archived/` are not read by arbor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLayout {
    /// The meta directory, e.g. `.hoodie` (or a branch's `.hoodie/branches/<b>`).
    pub meta_dir: String,
    /// The directory of active instant files.
    pub timeline_dir: String,
    /// The directory of the archived (LSM) timeline; `None` for layout 1.
    pub history_dir: Option<String>,
    /// The timeline layout.
    pub layout: LayoutVersion,
}

impl TableLayout {
    /// Layout 2 with the default `timeline` / `history` directory names.
    pub fn v2(meta_dir: &str) -> Self {
        Self::v2_with_paths_unchecked(meta_dir, "timeline", "history")
    }

    /// Layout 2 with the directories named by `hoodie.timeline.path` (relative to the meta
    /// directory) and `hoodie.timeline.history.path` (relative to the timeline directory).
    ///
    /// Each must be a relative path of one or more plain segments separated by `/` (ASCII
    /// letters, digits, `_`, `-`, `.`; no empty, `.` or `..` segment, no leading `/`, no `\`),
    /// so the directories always stay below the meta directory. A multi-segment timeline path
    /// is what the root `hoodie.properties` of a published table holds
    /// (`branches/publications/p<N>/timeline`, see [`crate::legacy`]).
    pub fn v2_with_paths(meta_dir: &str, timeline: &str, history: &str) -> Result<Self> {
        for (key, v) in [
            ("hoodie.timeline.path", timeline),
            ("hoodie.timeline.history.path", history),
        ] {
            if !is_plain_relative_path(v) {
                return Err(TimelineError::InvalidConfig {
                    path: format!("{meta_dir}/hoodie.properties"),
                    key: Some(key.to_string()),
                    reason: format!(
                        "{v:?} is not a relative path of plain directory names below the meta \
                         directory"
                    ),
                });
            }
        }
        Ok(Self::v2_with_paths_unchecked(meta_dir, timeline, history))
    }

    fn v2_with_paths_unchecked(meta_dir: &str, timeline: &str, history: &str) -> Self {
        let timeline_dir = format!("{meta_dir}/{timeline}");
        TableLayout {
            meta_dir: meta_dir.to_string(),
            history_dir: Some(format!("{timeline_dir}/{history}")),
            timeline_dir,
            layout: LayoutVersion::V2,
        }
    }

    /// Layout 1 (table version 6): instants directly in the meta directory.
    pub fn v1(meta_dir: &str) -> Self {
        TableLayout {
            meta_dir: meta_dir.to_string(),
            timeline_dir: meta_dir.to_string(),
            history_dir: None,
            layout: LayoutVersion::V1,
        }
    }

    /// The layout a table version uses: 6 -> layout 1, 8 and 9 -> layout 2.
    pub fn for_table_version(
        meta_dir: &str,
        table_version: u32,
        timeline: &str,
        history: &str,
    ) -> Result<Self> {
        match table_version {
            6 => Ok(Self::v1(meta_dir)),
            8 | 9 => Self::v2_with_paths(meta_dir, timeline, history),
            v => Err(TimelineError::UnsupportedVersion {
                path: format!("{meta_dir}/hoodie.properties"),
                version: v.to_string(),
            }),
        }
    }

    /// The layout a loaded table config describes (version, `hoodie.timeline.path`,
    /// `hoodie.timeline.history.path`).
    pub fn from_config(meta_dir: &str, config: &TableConfig) -> Result<Self> {
        Self::for_table_version(
            meta_dir,
            config.version().code(),
            config.timeline_path(),
            config.history_path(),
        )
    }

    /// Key of `hoodie.properties`.
    pub fn properties_key(&self) -> String {
        super::paths::properties_key(&self.meta_dir)
    }

    /// Key of an instant's file.
    pub fn instant_key(&self, instant: &Instant) -> Result<String> {
        Ok(format!(
            "{}/{}",
            self.timeline_dir,
            instant_file_name(instant, self.layout)?
        ))
    }
}

/// True for a relative path of plain segments (see [`TableLayout::v2_with_paths`]).
fn is_plain_relative_path(v: &str) -> bool {
    !v.is_empty()
        && v.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_v2_with_paths_rejects_traversal() {
        assert!(TableLayout::v2_with_paths(".hoodie", "../x", "history").is_err());
        for bad in [
            "../x", "a/../b", "/abs", "a//b", "a/", "./a", "", "a\\b", "a b", "..",
        ] {
            assert!(
                TableLayout::v2_with_paths(".hoodie", bad, "history").is_err(),
                "{bad:?}"
            );
            assert!(
                TableLayout::v2_with_paths(".hoodie", "timeline", bad).is_err(),
                "{bad:?}"
            );
        }
        let p =
            TableLayout::v2_with_paths(".hoodie", "branches/publications/p1/timeline", "history")
                .unwrap();
        assert_eq!(p.timeline_dir, ".hoodie/branches/publications/p1/timeline");
        assert_eq!(
            p.history_dir.as_deref(),
            Some(".hoodie/branches/publications/p1/timeline/history")
        );
        let l = TableLayout::v2(".hoodie");
        assert_eq!(l.timeline_dir, ".hoodie/timeline");
        assert_eq!(l.history_dir.as_deref(), Some(".hoodie/timeline/history"));
    }
}
