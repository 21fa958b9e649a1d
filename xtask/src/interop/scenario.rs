//! The scenario matrix: {COW, MOR} × {hive-style partitioned, non-hive partitioned,
//! non-partitioned}, each written through `arbor_table::Table` with one fixed sequence of
//! operations while a [`Model`] follows every instant.
//!
//! The sequence: insert, upsert, delete, insert_overwrite, then delete_partition on partitioned
//! tables. A non-partitioned table has no partition to delete, so it runs
//! insert_overwrite_table in that place instead. Then a second upsert (it also recreates the
//! deleted partition, and gives a merge-on-read table fresh log files), and for merge-on-read a
//! compaction (scheduled and executed).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::write::compaction::{run_compaction, schedule_compaction};
use arbor_table::{BaseFormat, CommitResult, CreateOptions, Table, WriteOperation};
use arbor_timeline::config::{TableType, TableVersion};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{ActiveTimeline, InstantTimeGenerator, TableLayout};

use super::data::{self, hash, key, region, row, Row};
use super::model::Model;

/// Key numbers are below this.
const MAX_KEY: u64 = 600;
/// Rows of the first insert.
const INITIAL_ROWS: u64 = 200;
/// The partition (region) insert_overwrite replaces.
const OVERWRITTEN_REGION: &str = "asia";
/// The partition (region) delete_partition deletes.
const DELETED_REGION: &str = "europe";

/// How a scenario table is partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioning {
    /// By `region`, directories `region=<value>`.
    Hive,
    /// By `region`, directories `<value>`.
    Plain,
    /// Not partitioned.
    None,
}

/// One table of the matrix.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub table_type: TableType,
    pub partitioning: Partitioning,
    /// Upserts also carry late arrivals (see [`stale_updates`]); on in the default matrix.
    /// hudi-rs 0.5.0's incremental query on merge-on-read merges only the log files in the
    /// range, not the older base file, so a losing record in a log file would be returned;
    /// arbor's merge-on-read writer therefore drops records that lose to the stored record
    /// (`CommitResult::skipped_stale`) instead of writing them to a log file.
    pub late_arrivals: bool,
    /// The table is created with a metadata table (`CreateOptions::metadata_table`); on in the
    /// default matrix, off with `--no-metadata-table`.
    pub metadata_table: bool,
    /// The table version the table is created at: 9 by default, 8 with `--table-version 8`.
    pub table_version: TableVersion,
    /// The base file format: parquet, or Lance for the `lance/...` scenarios.
    pub base_format: BaseFormat,
}

/// One operation of the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Insert,
    /// Updates about a quarter of the keys to this row version and inserts new keys.
    Upsert {
        version: u64,
        new_keys: (u64, u64),
    },
    Delete,
    InsertOverwrite,
    DeletePartition,
    InsertOverwriteTable,
    Compaction,
}

impl Step {
    /// The step's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Step::Insert => "insert",
            Step::Upsert { .. } => "upsert",
            Step::Delete => "delete",
            Step::InsertOverwrite => "insert_overwrite",
            Step::DeletePartition => "delete_partition",
            Step::InsertOverwriteTable => "insert_overwrite_table",
            Step::Compaction => "compaction",
        }
    }
}

impl Scenario {
    /// Every scenario of the matrix.
    pub fn all(late_arrivals: bool, metadata_table: bool) -> Vec<Scenario> {
        let mut out = Vec::new();
        for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
            for partitioning in [Partitioning::Hive, Partitioning::Plain, Partitioning::None] {
                out.push(Scenario {
                    table_type,
                    partitioning,
                    late_arrivals,
                    metadata_table,
                    table_version: TableVersion::default(),
                    base_format: BaseFormat::Parquet,
                });
            }
        }
        // Lance base files (Hudi 1.2): copy-on-write partitioned (delete partition, insert
        // overwrite) and merge-on-read non-partitioned (compaction writes Lance files).
        for (table_type, partitioning) in [
            (TableType::CopyOnWrite, Partitioning::Hive),
            (TableType::MergeOnRead, Partitioning::None),
        ] {
            out.push(Scenario {
                table_type,
                partitioning,
                late_arrivals,
                metadata_table,
                table_version: TableVersion::default(),
                base_format: BaseFormat::Lance,
            });
        }
        out
    }

    /// `cow/hive`, `mor/nonpartitioned`, ...
    pub fn name(&self) -> String {
        let t = match self.table_type {
            TableType::CopyOnWrite => "cow",
            TableType::MergeOnRead => "mor",
        };
        let p = match self.partitioning {
            Partitioning::Hive => "hive",
            Partitioning::Plain => "plain",
            Partitioning::None => "nonpartitioned",
        };
        match self.base_format {
            BaseFormat::Lance => format!("lance/{t}/{p}"),
            _ => format!("{t}/{p}"),
        }
    }

    /// The operations, in order.
    pub fn steps(&self) -> Vec<Step> {
        let mut steps = vec![
            Step::Insert,
            Step::Upsert {
                version: 1,
                new_keys: (200, 240),
            },
            Step::Delete,
            Step::InsertOverwrite,
        ];
        steps.push(if self.partitioning == Partitioning::None {
            Step::InsertOverwriteTable
        } else {
            Step::DeletePartition
        });
        steps.push(Step::Upsert {
            version: 5,
            new_keys: (400, 430),
        });
        if self.table_type == TableType::MergeOnRead {
            // Updates only: log files for the compaction (an upsert with new keys rewrites a
            // base-only slice as a new base file instead, so it may leave nothing to compact).
            steps.push(Step::Upsert {
                version: 6,
                new_keys: (0, 0),
            });
            steps.push(Step::Compaction);
        }
        steps
    }

    fn partition_path(&self, region: &str) -> String {
        match self.partitioning {
            Partitioning::Hive => format!("{}={region}", data::PARTITION),
            Partitioning::Plain | Partitioning::None => region.to_string(),
        }
    }

    fn create_options(&self) -> CreateOptions {
        let partitioned = self.partitioning != Partitioning::None;
        CreateOptions {
            name: format!("interop_{}", self.name().replace('/', "_")),
            table_type: self.table_type,
            record_key_fields: vec![data::KEY.to_string()],
            partition_fields: if partitioned {
                vec![data::PARTITION.to_string()]
            } else {
                Vec::new()
            },
            hive_style_partitioning: self.partitioning == Partitioning::Hive,
            ordering_field: Some(data::ORDERING.to_string()),
            merge_mode: None,
            schema: data::schema(),
            metadata_table: self.metadata_table,
            table_version: self.table_version,
            base_format: self.base_format,
        }
    }
}

/// One completed instant of a scenario.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// 1-based position in the sequence.
    pub ordinal: usize,
    pub step: Step,
    /// Requested time.
    pub instant: String,
    pub completion: String,
    pub action: String,
    /// The expected table right after this instant.
    pub model: Model,
    /// A copy of the table directory right after this instant.
    pub copy: PathBuf,
}

/// What running a scenario produced.
#[derive(Debug)]
pub struct Outcome {
    pub scenario: Scenario,
    /// The table (its final state).
    pub table_dir: PathBuf,
    pub instants: Vec<Recorded>,
    /// The step that failed and why; later steps did not run.
    pub failure: Option<(usize, Step, String)>,
}

/// Runs every step of `scenario` on a new table under `dir`.
pub async fn run(scenario: Scenario, dir: &Path) -> Outcome {
    let table_dir = dir.join("table");
    let mut outcome = Outcome {
        scenario,
        table_dir: table_dir.clone(),
        instants: Vec::new(),
        failure: None,
    };
    let (table, storage) = match create(scenario, &table_dir).await {
        Ok(t) => t,
        Err(e) => {
            outcome.failure = Some((0, Step::Insert, format!("create: {e}")));
            return outcome;
        }
    };
    let mut model = Model::default();
    for (i, step) in scenario.steps().into_iter().enumerate() {
        let ordinal = i + 1;
        match apply(scenario, &table, &storage, step, &mut model).await {
            Ok(result) => {
                let copy = dir.join(format!("after-{ordinal}-{}", step.name()));
                if let Err(e) = copy_dir(&table_dir, &copy) {
                    outcome.failure = Some((ordinal, step, e));
                    return outcome;
                }
                outcome.instants.push(Recorded {
                    ordinal,
                    step,
                    instant: result.instant.to_string(),
                    completion: result.completion_time.to_string(),
                    action: result.action.to_string(),
                    model: model.clone(),
                    copy,
                });
            }
            Err(e) => {
                outcome.failure = Some((ordinal, step, e));
                return outcome;
            }
        }
    }
    outcome
}

async fn create(scenario: Scenario, table_dir: &Path) -> Result<(Table, Arc<dyn Storage>), String> {
    std::fs::create_dir_all(table_dir)
        .map_err(|e| format!("cannot create {}: {e}", table_dir.display()))?;
    let storage: Arc<dyn Storage> = Arc::new(
        ObjectStoreStorage::local(table_dir)
            .map_err(|e| format!("storage at {}: {e}", table_dir.display()))?,
    );
    let table = Table::create(storage.clone(), scenario.create_options())
        .await
        .map_err(|e| e.to_string())?;
    Ok((table, storage))
}

/// The rows of existing keys that `pick` selects, at row version `version`.
fn existing(model: &Model, version: u64, pick: impl Fn(u64) -> bool) -> Vec<Row> {
    (0..MAX_KEY)
        .filter(|n| model.get(&key(*n)).is_some() && pick(*n))
        .map(|n| row(n, version))
        .collect()
}

/// Updates of about one key in twelve (none of those the upsert of `version` updates) that
/// carry new values but an ordering value below the stored row's.
fn stale_updates(model: &Model, version: u64) -> Vec<Row> {
    (0..MAX_KEY)
        .filter(|n| hash(*n, 100 + version) % 4 != 0 && hash(*n, 200 + version) % 12 == 0)
        .filter_map(|n| {
            let current = model.get(&key(n))?;
            let mut r = row(n, version + 100);
            r.ts = current.ts - 1;
            Some(r)
        })
        .collect()
}

/// Performs `step` on `table`, then applies it to `model` with the instant's requested time.
async fn apply(
    scenario: Scenario,
    table: &Table,
    storage: &Arc<dyn Storage>,
    step: Step,
    model: &mut Model,
) -> Result<CommitResult, String> {
    let partitioned = scenario.partitioning != Partitioning::None;
    let write = |op: WriteOperation, rows: Vec<Row>| async move {
        let batch = data::to_batch(&rows)?;
        table
            .write(op, vec![batch])
            .await
            .map(|r| (r, rows))
            .map_err(|e| e.to_string())
    };
    match step {
        Step::Insert => {
            let rows = (0..INITIAL_ROWS).map(|n| row(n, 0)).collect();
            let (r, rows) = write(WriteOperation::Insert, rows).await?;
            model.upsert(&rows, r.instant.as_str());
            Ok(r)
        }
        Step::Upsert { version, new_keys } => {
            let mut rows = existing(model, version, |n| hash(n, 100 + version) % 4 == 0);
            rows.extend((new_keys.0..new_keys.1).map(|n| row(n, version)));
            // Late arrivals: other values with a smaller ordering value than the stored row.
            // Under event-time ordering the stored row wins, and keeps its commit time.
            let winners = rows.clone();
            if scenario.late_arrivals {
                rows.extend(stale_updates(model, version));
            }
            let (r, _) = write(WriteOperation::Upsert, rows).await?;
            model.upsert(&winners, r.instant.as_str());
            Ok(r)
        }
        Step::Delete => {
            let rows: Vec<Row> = model
                .keys()
                .iter()
                .enumerate()
                .filter(|(i, _)| hash(*i as u64, 77) % 7 == 0)
                .filter_map(|(_, k)| model.get(k).cloned())
                .collect();
            let (r, rows) = write(WriteOperation::Delete, rows).await?;
            model.delete(&rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>());
            Ok(r)
        }
        Step::InsertOverwrite => {
            // Partitioned: one partition, with new keys and some keys it held before.
            // Non-partitioned: the only partition, i.e. the whole table.
            let in_scope = |n: u64| !partitioned || region(n) == OVERWRITTEN_REGION;
            let mut rows = existing(model, 3, |n| in_scope(n) && hash(n, 55) % 5 == 0);
            rows.extend(
                (300..375)
                    .filter(|n| in_scope(*n))
                    .take(25)
                    .map(|n| row(n, 3)),
            );
            let (r, rows) = write(WriteOperation::InsertOverwrite, rows).await?;
            if partitioned {
                model.drop_region(OVERWRITTEN_REGION);
            } else {
                model.clear();
            }
            model.upsert(&rows, r.instant.as_str());
            Ok(r)
        }
        Step::InsertOverwriteTable => {
            let mut rows = existing(model, 4, |n| hash(n, 66) % 3 == 0);
            rows.extend((500..520).map(|n| row(n, 4)));
            let (r, rows) = write(WriteOperation::InsertOverwriteTable, rows).await?;
            model.clear();
            model.upsert(&rows, r.instant.as_str());
            Ok(r)
        }
        Step::DeletePartition => {
            let r = table
                .delete_partitions(&[scenario.partition_path(DELETED_REGION)])
                .await
                .map_err(|e| e.to_string())?;
            model.drop_region(DELETED_REGION);
            Ok(r)
        }
        Step::Compaction => compact(table, storage).await,
    }
}

/// Schedules and executes a compaction. A merge-on-read table that has just taken an upsert
/// has log files, so "nothing to compact" is a failure here. The interop run is the table's
/// only writer, so no table lock is taken around the two calls.
async fn compact(table: &Table, storage: &Arc<dyn Storage>) -> Result<CommitResult, String> {
    let layout = TableLayout::from_config(DEFAULT_META_DIR, table.config())
        .map_err(|e| format!("table layout: {e}"))?;
    let timeline = ActiveTimeline::load(storage.clone(), layout.clone())
        .await
        .map_err(|e| format!("loading the timeline: {e}"))?;
    let generator = InstantTimeGenerator::new();
    for i in timeline.instants() {
        generator.observe(&i.requested_time);
        if let Some(c) = &i.completion_time {
            generator.observe(c);
        }
    }
    let instant = schedule_compaction(storage, &layout, &generator)
        .await
        .map_err(|e| format!("schedule_compaction: {e}"))?
        .ok_or("schedule_compaction found nothing to compact after an upsert")?;
    run_compaction(storage, &layout, &instant, &generator)
        .await
        .map_err(|e| format!("run_compaction {instant}: {e}"))
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| format!("cannot list {}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", from.display()))?;
        let path = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
        if kind.is_dir() {
            copy_dir(&path, &target)?;
        } else {
            std::fs::copy(&path, &target).map_err(|e| {
                format!(
                    "cannot copy {} to {}: {e}",
                    path.display(),
                    target.display()
                )
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn test_steps_nonpartitioned_mor_overwrite_table_then_compaction() {
        let s = Scenario {
            table_type: TableType::MergeOnRead,
            partitioning: Partitioning::None,
            late_arrivals: false,
            metadata_table: true,
            table_version: Default::default(),
            base_format: BaseFormat::Parquet,
        };
        let names: Vec<&str> = s.steps().iter().map(|st| st.name()).collect();
        assert_eq!(
            names,
            [
                "insert",
                "upsert",
                "delete",
                "insert_overwrite",
                "insert_overwrite_table",
                "upsert",
                "upsert",
                "compaction"
            ]
        );
    }

    #[test]
    fn test_steps_partitioned_cow_delete_partition_no_compaction() {
        let s = Scenario {
            table_type: TableType::CopyOnWrite,
            partitioning: Partitioning::Hive,
            late_arrivals: false,
            metadata_table: true,
            table_version: Default::default(),
            base_format: BaseFormat::Parquet,
        };
        let steps = s.steps();
        assert!(steps.contains(&Step::DeletePartition));
        assert!(!steps.contains(&Step::Compaction));
        assert_eq!(s.partition_path("europe"), "region=europe");
    }

    #[test]
    fn test_all_eight_scenarios_distinct_names() {
        let mut names: Vec<String> = Scenario::all(false, true)
            .iter()
            .map(Scenario::name)
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 8);
        assert!(names.contains(&"lance/mor/nonpartitioned".to_string()));
    }

    #[test]
    fn test_stale_updates_lower_ordering_than_stored() {
        let mut m = Model::default();
        m.upsert(&(0..200).map(|n| row(n, 0)).collect::<Vec<_>>(), "t1");
        let stale = stale_updates(&m, 1);
        assert!(!stale.is_empty());
        for r in &stale {
            let stored = m.get(&r.id).unwrap();
            assert!(r.ts < stored.ts, "{}", r.id);
            assert_ne!(r, stored);
        }
    }

    #[test]
    fn test_copy_dir_nested_files_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("a");
        std::fs::create_dir_all(src.join("b/c")).unwrap();
        std::fs::write(src.join("b/c/f.txt"), b"x").unwrap();
        let dst = tmp.path().join("z");
        assert_eq!(copy_dir(&src, &dst), Ok(()));
        assert_eq!(std::fs::read(dst.join("b/c/f.txt")).unwrap(), b"x");
    }
}
