//! Choosing what a clustering rewrites, as Hudi's size-based plan strategy
//! (`SparkSizeBasedClusteringPlanStrategy`) does: per partition, the latest file slices whose
//! base file is below the small-file limit (and slices of log files only), largest first,
//! packed into groups of at most `max_bytes_per_group` input bytes, each written as
//! `ceil(bytes / target_file_size)` file groups; at most `max_groups` groups in all. File
//! groups under a pending compaction or clustering are left alone. A group of one slice
//! without log files is only rewritten when rows are sorted (packing it alone gains nothing).
//!
//! The plan is stored as Java stores it (`HoodieClusteringPlan` in the requested replace
//! metadata of `<t>.clustering.requested`), so Java's services and readers see which file
//! groups are being clustered, and a plan another writer scheduled runs from it.

use std::collections::{BTreeMap, BTreeSet};

use arbor_fsview::FileSlice;
use arbor_timeline::avro::{
    HoodieClusteringGroup, HoodieClusteringPlan, HoodieClusteringStrategy,
    HoodieRequestedReplaceMetadata, HoodieSliceInfo, WriteOperationType,
};

use super::options::{ClusterOptions, LAYOUT_KEY, SORT_COLUMNS_KEY, TARGET_FILE_SIZE_KEY};

/// The plan strategy class Java records for a size-based plan.
pub const PLAN_STRATEGY_CLASS: &str =
    "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy";
/// The execution strategy Java runs for it (sort, then write files of the target size).
pub const EXECUTION_STRATEGY_CLASS: &str =
    "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy";
/// The clustering plan version Java 1.x writes (`CLUSTERING_PLAN_VERSION_1`).
pub const CLUSTERING_PLAN_VERSION: i32 = 1;

/// One group of a plan: slices of one partition rewritten together.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedGroup {
    pub(crate) partition: String,
    pub(crate) slices: Vec<FileSlice>,
}

impl PlannedGroup {
    /// Input bytes: base and log files.
    pub(crate) fn bytes(&self) -> u64 {
        self.slices.iter().map(slice_bytes).sum()
    }
}

fn slice_bytes(s: &FileSlice) -> u64 {
    s.base_file.as_ref().map_or(0, |b| b.size) + s.log_files.iter().map(|l| l.size).sum::<u64>()
}

/// The groups of a plan over `slices` (the latest slices of the partitions to consider, by
/// partition), leaving out the file groups in `busy` (pending compaction or clustering).
pub(crate) fn plan_groups(
    slices: &BTreeMap<String, Vec<FileSlice>>,
    busy: &BTreeSet<(String, String)>,
    options: &ClusterOptions,
) -> Vec<PlannedGroup> {
    let mut groups = Vec::new();
    for (partition, slices) in slices {
        let mut eligible: Vec<&FileSlice> = slices
            .iter()
            .filter(|s| !busy.contains(&(partition.clone(), s.file_id.clone())))
            .filter(|s| {
                s.base_file.as_ref().map_or(!s.log_files.is_empty(), |b| {
                    b.size < options.small_file_limit
                })
            })
            .collect();
        // Largest first (Java's order), file id for a stable plan.
        eligible.sort_by(|a, b| {
            slice_bytes(b)
                .cmp(&slice_bytes(a))
                .then_with(|| a.file_id.cmp(&b.file_id))
        });
        let mut current: Vec<FileSlice> = Vec::new();
        let mut bytes = 0u64;
        let close = |current: &mut Vec<FileSlice>, groups: &mut Vec<PlannedGroup>| {
            let worth = current.len() > 1
                || !options.sort_by.is_empty()
                || current.iter().any(|s| !s.log_files.is_empty());
            if !current.is_empty() && worth {
                groups.push(PlannedGroup {
                    partition: partition.clone(),
                    slices: std::mem::take(current),
                });
            }
            current.clear();
        };
        for s in eligible {
            let b = slice_bytes(s);
            if !current.is_empty() && bytes.saturating_add(b) > options.max_bytes_per_group {
                close(&mut current, &mut groups);
                bytes = 0;
            }
            current.push(s.clone());
            bytes = bytes.saturating_add(b);
        }
        close(&mut current, &mut groups);
    }
    groups.truncate(options.max_groups);
    groups
}

/// The requested replace metadata of a plan of `groups` (operation `CLUSTER`), its slices
/// named by `base_uri/partition/file` (Java reads them as paths; relative when `base_uri` is
/// `None`).
pub(crate) fn requested_metadata(
    groups: &[PlannedGroup],
    options: &ClusterOptions,
    base_uri: Option<&str>,
) -> HoodieRequestedReplaceMetadata {
    let path = |partition: &str, name: &str| {
        let rel = if partition.is_empty() {
            name.to_string()
        } else {
            format!("{partition}/{name}")
        };
        match base_uri {
            Some(b) => format!("{}/{rel}", b.trim_end_matches('/')),
            None => rel,
        }
    };
    let input_groups = groups
        .iter()
        .map(|g| {
            let bytes = g.bytes();
            let outputs = bytes.div_ceil(options.target_file_size.max(1)).max(1);
            let slices = g
                .slices
                .iter()
                .map(|s| HoodieSliceInfo {
                    data_file_path: Some(
                        s.base_file
                            .as_ref()
                            .map(|b| path(&g.partition, &b.file_name()))
                            .unwrap_or_default(),
                    ),
                    delta_file_paths: Some(
                        s.log_files
                            .iter()
                            .map(|l| path(&g.partition, &l.file_name()))
                            .collect(),
                    ),
                    file_id: Some(s.file_id.clone()),
                    partition_path: Some(g.partition.clone()),
                    bootstrap_file_path: Some(String::new()),
                    version: Some(1),
                })
                .collect();
            let logs: usize = g.slices.iter().map(|s| s.log_files.len()).sum();
            let log_bytes: u64 = g
                .slices
                .iter()
                .flat_map(|s| s.log_files.iter().map(|l| l.size))
                .sum();
            HoodieClusteringGroup {
                slices: Some(slices),
                metrics: Some(BTreeMap::from([
                    (
                        "TOTAL_IO_MB".to_string(),
                        2.0 * bytes as f64 / (1024.0 * 1024.0),
                    ),
                    ("TOTAL_LOG_FILES".to_string(), logs as f64),
                    ("TOTAL_LOG_FILES_SIZE".to_string(), log_bytes as f64),
                    (
                        "TOTAL_IO_READ_MB".to_string(),
                        bytes as f64 / (1024.0 * 1024.0),
                    ),
                    (
                        "TOTAL_IO_WRITE_MB".to_string(),
                        bytes as f64 / (1024.0 * 1024.0),
                    ),
                ])),
                num_output_file_groups: Some(i32::try_from(outputs).unwrap_or(i32::MAX)),
                extra_metadata: None,
                version: Some(1),
            }
        })
        .collect();
    // Java's planner records the sort columns only; the layout and target size are arbor's
    // (Java's executor ignores keys it does not read, and takes those from its write config).
    let mut params = BTreeMap::new();
    if !options.sort_by.is_empty() {
        params.insert(SORT_COLUMNS_KEY.to_string(), options.sort_by.join(","));
    }
    params.insert(LAYOUT_KEY.to_string(), options.layout.name().to_string());
    params.insert(
        TARGET_FILE_SIZE_KEY.to_string(),
        options.target_file_size.to_string(),
    );
    HoodieRequestedReplaceMetadata {
        operation_type: Some(WriteOperationType::Cluster.name().to_string()),
        clustering_plan: Some(HoodieClusteringPlan {
            input_groups: Some(input_groups),
            strategy: Some(HoodieClusteringStrategy {
                strategy_class_name: Some(EXECUTION_STRATEGY_CLASS.to_string()),
                strategy_params: Some(params),
                version: Some(1),
            }),
            extra_metadata: Some(BTreeMap::new()),
            version: Some(CLUSTERING_PLAN_VERSION),
            preserve_hoodie_metadata: Some(true),
            missing_schedule_partitions: Some(Vec::new()),
        }),
        extra_metadata: Some(BTreeMap::new()),
        version: Some(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_fsview::{BaseFile, LogFile};
    use arbor_timeline::InstantTime;

    fn slice(id: &str, base: Option<u64>, logs: usize) -> FileSlice {
        let t = InstantTime::parse("20250101000000000").unwrap();
        let mut s = FileSlice::new("p", id, t);
        if let Some(size) = base {
            let name = format!("{id}_0-0-0_20250101000000000.parquet");
            s.base_file = Some(BaseFile::parse(&name, size).unwrap());
        }
        for n in 0..logs {
            let name = format!(".{id}_20250101000000000.log.{}_0-0-0", n + 1);
            s.log_files.push(LogFile::parse(&name, 10).unwrap());
        }
        s
    }

    fn ids(g: &PlannedGroup) -> Vec<&str> {
        g.slices.iter().map(|s| s.file_id.as_str()).collect()
    }

    #[test]
    fn test_small_slices_are_packed_largest_first_up_to_the_group_size() {
        let o = ClusterOptions {
            small_file_limit: 100,
            max_bytes_per_group: 150,
            ..ClusterOptions::default()
        };
        let slices = BTreeMap::from([(
            "p".to_string(),
            vec![
                slice("a", Some(50), 0),
                slice("b", Some(100), 0), // not small
                slice("c", Some(80), 0),
                slice("d", Some(60), 0),
                slice("e", None, 1), // logs only
            ],
        )]);
        let g = plan_groups(&slices, &BTreeSet::new(), &o);
        // c(80)+d(60)=140; a(50)+e(10).
        assert_eq!(
            g.iter().map(ids).collect::<Vec<_>>(),
            vec![vec!["c", "d"], vec!["a", "e"]]
        );
        let busy = BTreeSet::from([("p".to_string(), "c".to_string())]);
        let g = plan_groups(&slices, &busy, &o);
        assert_eq!(
            g.iter().map(ids).collect::<Vec<_>>(),
            vec![vec!["d", "a", "e"]]
        );
    }

    #[test]
    fn test_a_lone_unsorted_slice_is_left_alone_and_groups_are_capped() {
        let slices = BTreeMap::from([("p".to_string(), vec![slice("a", Some(5), 0)])]);
        assert!(plan_groups(&slices, &BTreeSet::new(), &ClusterOptions::default()).is_empty());
        let sorted = ClusterOptions {
            sort_by: vec!["x".into()],
            ..ClusterOptions::default()
        };
        assert_eq!(plan_groups(&slices, &BTreeSet::new(), &sorted).len(), 1);
        let many = BTreeMap::from([(
            "p".to_string(),
            (0..10)
                .map(|i| slice(&format!("f{i}"), Some(10), 0))
                .collect(),
        )]);
        let capped = ClusterOptions {
            max_bytes_per_group: 20,
            max_groups: 3,
            ..ClusterOptions::default()
        };
        assert_eq!(plan_groups(&many, &BTreeSet::new(), &capped).len(), 3);
    }

    #[test]
    fn test_requested_metadata_names_slices_and_the_strategy() {
        let o = ClusterOptions {
            sort_by: vec!["x".into(), "y".into()],
            target_file_size: 40,
            ..ClusterOptions::default()
        };
        let g = vec![PlannedGroup {
            partition: "p".into(),
            slices: vec![slice("a", Some(50), 1), slice("b", Some(20), 0)],
        }];
        let m = requested_metadata(&g, &o, Some("file:///t/"));
        assert_eq!(m.operation_type.as_deref(), Some("CLUSTER"));
        let plan = m.clustering_plan.unwrap();
        let group = &plan.input_groups.as_ref().unwrap()[0];
        assert_eq!(group.num_output_file_groups, Some(2));
        let first = &group.slices.as_ref().unwrap()[0];
        assert_eq!(
            first.data_file_path.as_deref(),
            Some("file:///t/p/a_0-0-0_20250101000000000.parquet")
        );
        assert_eq!(first.delta_file_paths.as_ref().unwrap().len(), 1);
        let params = plan.strategy.unwrap().strategy_params.unwrap();
        assert_eq!(
            params.get(SORT_COLUMNS_KEY).map(String::as_str),
            Some("x,y")
        );
        assert_eq!(plan.preserve_hoodie_metadata, Some(true));
    }
}
