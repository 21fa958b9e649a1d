//! The five branch scenarios ({COW, MOR} x {without, with the record index}, and MOR with the
//! record index on Lance base files) and the names and sizes they share.

use arbor_table::{BaseFormat, CreateOptions};
use arbor_timeline::config::{TableType, TableVersion};

use crate::interop::data::{self};

/// The working branch every scenario writes.
pub const BRANCH: &str = "audit";
/// The partition value only the branch writes.
pub(super) const NEW_REGION: &str = "africa";
/// Rows of main's first insert.
pub(super) const MAIN_ROWS: u64 = 150;

/// One table of the branch checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchScenario {
    pub table_type: TableType,
    /// The record index is created on main right after the first insert.
    pub record_index: bool,
    /// The table version the table is created at (9 by default; `--table-version`).
    pub table_version: TableVersion,
    /// The base file format (Lance for `branch/lance-mor-rli`).
    pub base_format: BaseFormat,
}

impl BranchScenario {
    /// {COW, MOR} × {without, with the record index}, all with the metadata table.
    pub fn all() -> Vec<BranchScenario> {
        let mut out = Vec::new();
        for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
            for record_index in [false, true] {
                out.push(BranchScenario {
                    table_type,
                    record_index,
                    table_version: TableVersion::default(),
                    base_format: BaseFormat::Parquet,
                });
            }
        }
        out.push(BranchScenario {
            table_type: TableType::MergeOnRead,
            record_index: true,
            table_version: TableVersion::default(),
            base_format: BaseFormat::Lance,
        });
        out
    }

    /// `branch/cow`, `branch/mor-rli`, ...
    pub fn name(&self) -> String {
        let t = match self.table_type {
            TableType::CopyOnWrite => "cow",
            TableType::MergeOnRead => "mor",
        };
        let rli = if self.record_index { "-rli" } else { "" };
        let lance = if self.base_format == BaseFormat::Lance {
            "lance-"
        } else {
            ""
        };
        format!("branch/{lance}{t}{rli}")
    }

    pub(super) fn create_options(&self) -> CreateOptions {
        CreateOptions {
            name: format!("interop_{}", self.name().replace(['/', '-'], "_")),
            table_type: self.table_type,
            record_key_fields: vec![data::KEY.to_string()],
            partition_fields: vec![data::PARTITION.to_string()],
            hive_style_partitioning: true,
            ordering_field: Some(data::ORDERING.to_string()),
            merge_mode: None,
            schema: data::schema(),
            metadata_table: true,
            table_version: self.table_version,
            base_format: self.base_format,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn test_all_five_combinations_named() {
        let all = BranchScenario::all();
        let names: Vec<String> = all.iter().map(BranchScenario::name).collect();
        assert_eq!(
            names,
            [
                "branch/cow",
                "branch/cow-rli",
                "branch/mor",
                "branch/mor-rli",
                "branch/lance-mor-rli"
            ]
        );
    }
}
