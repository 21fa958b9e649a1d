//! What a clustering run does: [`ClusterOptions`], from arbor's defaults, the
//! `hoodie.clustering.*` and `hoodie.layout.optimize.*` keys of the table's configuration, and
//! the caller's own choices, in that order of precedence (last wins).

use std::fmt;
use std::str::FromStr;

use arbor_timeline::TableConfig;

use crate::error::{Result, TableError};

/// `hoodie.clustering.plan.strategy.sort.columns`: comma-separated sort columns.
pub const SORT_COLUMNS_KEY: &str = "hoodie.clustering.plan.strategy.sort.columns";
/// `hoodie.clustering.plan.strategy.target.file.max.bytes`: size of the files written.
pub const TARGET_FILE_SIZE_KEY: &str = "hoodie.clustering.plan.strategy.target.file.max.bytes";
/// `hoodie.clustering.plan.strategy.small.file.limit`: files below it are clustered.
pub const SMALL_FILE_LIMIT_KEY: &str = "hoodie.clustering.plan.strategy.small.file.limit";
/// `hoodie.clustering.plan.strategy.max.bytes.per.group`: input bytes of one group.
pub const MAX_BYTES_PER_GROUP_KEY: &str = "hoodie.clustering.plan.strategy.max.bytes.per.group";
/// `hoodie.clustering.plan.strategy.max.num.groups`: groups of one plan.
pub const MAX_GROUPS_KEY: &str = "hoodie.clustering.plan.strategy.max.num.groups";
/// `hoodie.layout.optimize.strategy`: `linear`, `z-order` or `hilbert`.
pub const LAYOUT_KEY: &str = "hoodie.layout.optimize.strategy";

const MIB: u64 = 1024 * 1024;

/// How rows are ordered within the files a clustering writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Lexicographic by the sort columns, in order (Hudi's `linear`).
    #[default]
    Linear,
    /// Along a Z-order curve over the sort columns (`z-order`): each column gets an equal share.
    ZOrder,
    /// Along a Hilbert curve over the sort columns (`hilbert`): as Z-order, with neighbouring
    /// rows always in neighbouring cells.
    Hilbert,
}

impl Layout {
    /// Hudi's name of the layout (`hoodie.layout.optimize.strategy`).
    pub fn name(self) -> &'static str {
        match self {
            Layout::Linear => "linear",
            Layout::ZOrder => "z-order",
            Layout::Hilbert => "hilbert",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Layout {
    type Err = TableError;

    /// `linear`, `z-order` (also `zorder`), `hilbert`, in any case.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "linear" => Ok(Layout::Linear),
            "z-order" | "zorder" | "z_order" => Ok(Layout::ZOrder),
            "hilbert" => Ok(Layout::Hilbert),
            other => Err(TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!("layout {other:?}: expected linear, z-order or hilbert"),
            }),
        }
    }
}

/// The options of a clustering run ([`crate::Table::cluster`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterOptions {
    /// Partitions to cluster (relative paths); empty: every partition.
    pub partitions: Vec<String>,
    /// Sort columns (top-level); empty: rows keep their order and small files are only packed.
    pub sort_by: Vec<String>,
    /// How rows are ordered by the sort columns.
    pub layout: Layout,
    /// Files are closed once they reach this many bytes (default 128 MiB).
    pub target_file_size: u64,
    /// Only file slices whose base file is smaller than this are clustered (default 100 MiB).
    pub small_file_limit: u64,
    /// Input bytes of one clustering group (default 2 GiB, Hudi's): a group's rows are sorted
    /// together.
    pub max_bytes_per_group: u64,
    /// Groups of one plan (default 30, Hudi's).
    pub max_groups: usize,
    /// Bytes of rows a group's sort holds in memory before spilling a sorted run to a
    /// temporary file (default 256 MiB).
    pub memory_budget: usize,
    /// The table's URI (e.g. `s3://bucket/trips`): the plan names its input files by
    /// `<base_uri>/<partition>/<file>`, as Java writes and reads them; `None` names them
    /// relative to the table.
    pub base_uri: Option<String>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            partitions: Vec::new(),
            sort_by: Vec::new(),
            layout: Layout::Linear,
            target_file_size: 128 * MIB,
            small_file_limit: 100 * MIB,
            max_bytes_per_group: 2048 * MIB,
            max_groups: 30,
            memory_budget: 256 * 1024 * 1024,
            base_uri: None,
        }
    }
}

impl ClusterOptions {
    /// arbor's defaults overridden by the `hoodie.clustering.plan.strategy.*` and
    /// `hoodie.layout.optimize.strategy` keys of `config`. A key with a value that does not
    /// parse is an error naming it.
    pub fn from_config(config: &TableConfig) -> Result<Self> {
        let mut o = ClusterOptions::default();
        o.apply(|k| config.get(k).map(str::to_string))?;
        Ok(o)
    }

    /// Overrides the options from the keys `get` returns (table config, plan parameters).
    pub fn apply(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        let number = |key: &str| -> Result<Option<u64>> {
            match get(key) {
                None => Ok(None),
                Some(v) => {
                    v.trim()
                        .parse::<u64>()
                        .map(Some)
                        .map_err(|_| TableError::InvalidInput {
                            column: None,
                            row: None,
                            reason: format!("{key}={v:?}: expected a number of bytes"),
                        })
                }
            }
        };
        if let Some(cols) = get(SORT_COLUMNS_KEY) {
            self.sort_by = split_columns(&cols);
        }
        if let Some(v) = number(TARGET_FILE_SIZE_KEY)? {
            self.target_file_size = v;
        }
        if let Some(v) = number(SMALL_FILE_LIMIT_KEY)? {
            self.small_file_limit = v;
        }
        if let Some(v) = number(MAX_BYTES_PER_GROUP_KEY)? {
            self.max_bytes_per_group = v;
        }
        if let Some(v) = number(MAX_GROUPS_KEY)? {
            self.max_groups = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = get(LAYOUT_KEY) {
            self.layout = v.parse()?;
        }
        Ok(())
    }

    /// Checks the options: sizes above zero, at least one group.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: &str| {
            Err(TableError::InvalidInput {
                column: None,
                row: None,
                reason: reason.to_string(),
            })
        };
        if self.target_file_size == 0 {
            return bad("the target file size must be above 0 bytes");
        }
        if self.max_bytes_per_group == 0 {
            return bad("the bytes of a clustering group must be above 0");
        }
        if self.max_groups == 0 {
            return bad("a clustering plan needs at least one group");
        }
        if self.layout != Layout::Linear && self.sort_by.is_empty() {
            return bad(&format!(
                "the {} layout orders rows by sort columns: give some (--sort-by)",
                self.layout
            ));
        }
        for c in &self.sort_by {
            if c.is_empty() {
                return bad("an empty sort column name");
            }
        }
        Ok(())
    }
}

/// Comma-separated column names, trimmed, empty entries dropped.
pub(crate) fn split_columns(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn test_layout_names_round_trip_and_refuse_others() {
        for l in [Layout::Linear, Layout::ZOrder, Layout::Hilbert] {
            assert_eq!(l.name().parse::<Layout>().unwrap(), l);
        }
        assert_eq!("ZORDER".parse::<Layout>().unwrap(), Layout::ZOrder);
        assert!("spiral"
            .parse::<Layout>()
            .unwrap_err()
            .to_string()
            .contains("spiral"));
    }

    #[test]
    fn test_config_keys_override_defaults_and_bad_values_are_named() {
        let keys = BTreeMap::from([
            (SORT_COLUMNS_KEY, "a, b,,"),
            (TARGET_FILE_SIZE_KEY, "1000"),
            (LAYOUT_KEY, "hilbert"),
        ]);
        let mut o = ClusterOptions::default();
        o.apply(|k| keys.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(o.sort_by, vec!["a", "b"]);
        assert_eq!((o.target_file_size, o.layout), (1000, Layout::Hilbert));
        assert_eq!(
            o.small_file_limit,
            ClusterOptions::default().small_file_limit
        );
        o.validate().unwrap();
        let bad = BTreeMap::from([(SMALL_FILE_LIMIT_KEY, "lots")]);
        let e = o.apply(|k| bad.get(k).map(|v| v.to_string())).unwrap_err();
        assert!(e.to_string().contains(SMALL_FILE_LIMIT_KEY), "{e}");
        let curve = ClusterOptions {
            layout: Layout::ZOrder,
            ..ClusterOptions::default()
        };
        assert!(curve
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--sort-by"));
    }
}
