//! The listing section of `cargo xtask bench mdt`: the cost of finding every file of a table
//! with many partitions, through the metadata table's FILES partition and without it.
//!
//! For each table shape (`PARTITIONS × FILES`, default 100 × 20 and 1,000 × 20) a copy-on-write
//! table with the metadata table is written locally: FILES commits, each inserting one row into
//! every partition with small-file packing off (`small_file_limit: 0`), so every commit adds one
//! new file group (one base file) per partition. On S3 the same table is used: copied from the
//! local directory object by object (default), or written through arbor on S3 with
//! `--s3-build write`. Then, in the same run, `--runs` times each, interleaved:
//! - **A**, FILES: `TableReader::open_with(storage, ListingSource::MetadataTable)`, then the
//!   latest file slice of every file group of every partition
//!   (`view().latest_file_slices(None, None)`, what a full snapshot plans with);
//! - **A′**, the MDT read alone: `MetadataTable::open` + `files_listing()` (timelines, FILES
//!   base file and log blocks, merged);
//! - **B**, directory listing: as A with `ListingSource::Storage`;
//! - **C**, the baseline: one raw recursive listing of the whole table (`list_all("")`, pages of
//!   1,000 keys).
//!
//! Every storage call goes through a pass-through [`FaultInjectingStorage`], which counts them
//! by kind: LIST calls are `list_page` and `list_dir` calls (a `list_dir` of more than 1,000
//! entries is more than one S3 request, so on S3 the request count can be slightly higher).
//! Every measurement is checked: A and B find exactly `PARTITIONS × FILES` slices, A′ and C
//! exactly as many parquet files.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use arbor_mdt::MetadataTable;
use arbor_storage::{FaultInjectingStorage, OpKind, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, ListingSource, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tokio::runtime::Runtime;

use super::super::local;
use super::super::report::median;
use super::{s3, Context, S3Build, Shape};

/// One measured way of listing: medians over the runs, counts from the last run (they do not
/// vary between runs).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measured {
    /// Median seconds.
    pub seconds: f64,
    /// `list_page` + `list_dir` calls.
    pub lists: usize,
    /// `get` + `get_range` + `head` calls.
    pub reads: usize,
    /// File slices (A, B) or parquet files (A′, C) found.
    pub found: usize,
}

/// What one table on one storage measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ListingResult {
    /// `local` or `S3`.
    pub storage: &'static str,
    /// The table's shape.
    pub shape: Shape,
    /// Every object of the table (data files, partition markers, timeline, MDT).
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
    /// How the table was made and how long it took.
    pub built: String,
    /// A: reader through FILES + every latest slice.
    pub mdt: Measured,
    /// A′: the MDT read alone.
    pub mdt_read: Measured,
    /// B: reader through directory listing + every latest slice.
    pub dirs: Measured,
    /// C: raw recursive listing.
    pub raw: Measured,
}

const KEY: &str = "id";
const ORDERING: &str = "ts";
const PARTITION: &str = "part";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::Utf8, false),
        Field::new(ORDERING, DataType::Int64, false),
        Field::new(PARTITION, DataType::Utf8, false),
    ]))
}

/// Commit `commit`'s rows: one per partition.
fn commit_batch(shape: Shape, commit: u32) -> Result<RecordBatch, String> {
    let parts = 0..shape.partitions;
    let keys = StringArray::from_iter_values(parts.clone().map(|p| format!("k{p:05}-{commit:04}")));
    let ts = Int64Array::from_iter_values(parts.clone().map(|_| i64::from(commit)));
    let part = StringArray::from_iter_values(parts.map(|p| format!("p{p:05}")));
    RecordBatch::try_new(schema(), vec![Arc::new(keys), Arc::new(ts), Arc::new(part)])
        .map_err(|e| format!("bench: building a batch: {e}"))
}

/// Writes the bench table into `storage` (which must be empty): `shape.files` commits of one
/// row per partition, every commit a new base file in every partition. Returns the seconds.
fn build(rt: &Runtime, storage: Arc<dyn Storage>, shape: Shape, what: &str) -> Result<f64, String> {
    let start = Instant::now();
    let options = CreateOptions {
        name: "mdt_listing".to_string(),
        table_type: TableType::CopyOnWrite,
        record_key_fields: vec![KEY.to_string()],
        partition_fields: vec![PARTITION.to_string()],
        hive_style_partitioning: false,
        ordering_field: Some(ORDERING.to_string()),
        merge_mode: None,
        schema: schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    };
    let table = rt
        .block_on(Table::create(storage.clone(), options))
        .map_err(|e| format!("bench: creating the table in {storage}: {e}"))?
        .with_write_options(WriteOptions {
            small_file_limit: 0,
            ..WriteOptions::default()
        });
    for commit in 0..shape.files {
        let batch = commit_batch(shape, commit)?;
        let r = rt
            .block_on(table.write(WriteOperation::Insert, vec![batch]))
            .map_err(|e| format!("bench: commit {commit} into {storage}: {e}"))?;
        let parts = shape.partitions as usize;
        if r.inserted != u64::from(shape.partitions) || r.files_written != parts {
            return Err(format!(
                "bench: commit {commit} into {storage} inserted {} rows in {} files, expected {parts} in {parts}",
                r.inserted, r.files_written
            ));
        }
        eprintln!(
            "bench mdt: {what} {shape}: commit {}/{} ({:.1} s)",
            commit + 1,
            shape.files,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Counts of the calls `counter` saw: (LIST calls, GET/HEAD calls).
fn counts(counter: &FaultInjectingStorage) -> (usize, usize) {
    let ops = counter.ops();
    let lists = ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::List | OpKind::ListDir))
        .count();
    let reads = ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Get | OpKind::GetRange | OpKind::Head))
        .count();
    (lists, reads)
}

fn is_data_file(key: &str) -> bool {
    !key.starts_with(".hoodie/") && key.ends_with(".parquet")
}

/// One timed listing over `counter` (reset first): returns (seconds, what was found).
fn once(
    rt: &Runtime,
    counter: &Arc<FaultInjectingStorage>,
    how: How,
) -> Result<(f64, usize), String> {
    counter.reset();
    let storage: Arc<dyn Storage> = counter.clone();
    let start = Instant::now();
    let found = rt.block_on(async {
        match how {
            How::Mdt | How::Dirs => {
                let source = if how == How::Mdt {
                    ListingSource::MetadataTable
                } else {
                    ListingSource::Storage
                };
                let reader = TableReader::open_with(storage, source)
                    .await
                    .map_err(|e| e.to_string())?;
                let slices = reader
                    .view()
                    .latest_file_slices(None, None)
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(s) = slices.iter().find(|s| s.base_file_path().is_none()) {
                    return Err(format!(
                        "slice {}/{} has no base file",
                        s.partition, s.file_id
                    ));
                }
                Ok(slices.len())
            }
            How::MdtRead => {
                let mdt = MetadataTable::open(storage)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| "the table has no metadata table".to_string())?;
                let listing = mdt.files_listing().await.map_err(|e| e.to_string())?;
                Ok(listing
                    .values()
                    .flat_map(|files| files.keys())
                    .filter(|name| name.ends_with(".parquet"))
                    .count())
            }
            How::Raw => {
                let all = storage.list_all("").await.map_err(|e| e.to_string())?;
                Ok(all.iter().filter(|o| is_data_file(&o.key)).count())
            }
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let found = found.map_err(|e| format!("bench: {} of {}: {e}", how.name(), counter.inner()))?;
    Ok((seconds, found))
}

/// The four ways of listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Mdt,
    MdtRead,
    Dirs,
    Raw,
}

impl How {
    const ALL: [How; 4] = [How::Mdt, How::MdtRead, How::Dirs, How::Raw];

    fn name(self) -> &'static str {
        match self {
            How::Mdt => "A (FILES)",
            How::MdtRead => "A' (MDT read)",
            How::Dirs => "B (directory listing)",
            How::Raw => "C (raw listing)",
        }
    }
}

/// Measures the table at the root of `inner`.
fn measure(
    rt: &Runtime,
    inner: Arc<dyn Storage>,
    storage_name: &'static str,
    shape: Shape,
    runs: usize,
    built: String,
) -> Result<ListingResult, String> {
    let counter = Arc::new(FaultInjectingStorage::new(inner.clone()));
    let mut times: [Vec<f64>; 4] = Default::default();
    let mut last = [Measured::default(); 4];
    for run in 0..runs {
        for (i, how) in How::ALL.into_iter().enumerate() {
            let (seconds, found) = once(rt, &counter, how)?;
            let expected = shape.data_files();
            if found != expected {
                return Err(format!(
                    "bench: {} of the {shape} table on {storage_name} found {found}, expected {expected}",
                    how.name()
                ));
            }
            let (lists, reads) = counts(&counter);
            if let (Some(t), Some(m)) = (times.get_mut(i), last.get_mut(i)) {
                t.push(seconds);
                *m = Measured {
                    seconds: 0.0,
                    lists,
                    reads,
                    found,
                };
            }
        }
        eprintln!(
            "bench mdt: {storage_name} {shape}: run {}/{runs}: {}",
            run + 1,
            How::ALL
                .iter()
                .zip(&times)
                .map(|(h, t)| format!("{} {:.3} s", h.name(), t.last().copied().unwrap_or(0.0)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for (m, t) in last.iter_mut().zip(&times) {
        m.seconds = median(t).ok_or_else(|| "bench: no timing".to_string())?;
    }
    let all = rt
        .block_on(inner.list_all(""))
        .map_err(|e| format!("bench: listing {inner}: {e}"))?;
    let [mdt, mdt_read, dirs, raw] = last;
    Ok(ListingResult {
        storage: storage_name,
        shape,
        objects: all.len(),
        bytes: all.iter().map(|o| o.size).sum(),
        built,
        mdt,
        mdt_read,
        dirs,
        raw,
    })
}

/// Runs the listing section for every size and returns its Markdown.
pub fn run(ctx: &Context) -> Result<String, String> {
    let mut results = Vec::new();
    for &shape in &ctx.sizes {
        let dir = ctx
            .work
            .join(format!("listing-{}x{}", shape.partitions, shape.files));
        eprintln!("bench mdt: building the {shape} table in {}", dir.display());
        let seconds = build(&ctx.rt, local(&dir)?, shape, "local")?;
        let built = format!("written, {seconds:.1} s");
        results.push(measure(
            &ctx.rt,
            local(&dir)?,
            "local",
            shape,
            ctx.runs,
            built,
        )?);
        if let Some(env) = &ctx.s3 {
            let prefix = format!(
                "mdt-listing-{}x{}-{}-{}",
                shape.partitions,
                shape.files,
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis())
            );
            let storage = env.storage(&prefix)?;
            let start = Instant::now();
            let built = match ctx.s3_build {
                S3Build::Upload => {
                    eprintln!("bench mdt: copying the {shape} table to {storage}");
                    let n = s3::upload(&ctx.rt, &dir, &storage)?;
                    format!(
                        "copied from local ({n} puts, 16 at a time), {:.1} s",
                        start.elapsed().as_secs_f64()
                    )
                }
                S3Build::Write => {
                    let s = build(&ctx.rt, storage.clone(), shape, "S3")?;
                    format!("written, {s:.1} s")
                }
            };
            let r = measure(&ctx.rt, storage.clone(), "S3", shape, ctx.runs, built);
            eprintln!("bench mdt: removing {storage}");
            let removed = s3::remove_all(&ctx.rt, &storage);
            results.push(r?);
            removed?;
        }
    }
    Ok(tables(&results))
}

/// `a / b` with two decimals, or four below 0.1 (so that a 200× gap does not print as 0.00).
fn ratio(a: f64, b: f64) -> String {
    match a / b {
        r if !(b > 0.0 && r.is_finite()) => "-".to_string(),
        r if r < 0.1 => format!("{r:.4}"),
        r => format!("{r:.2}"),
    }
}

/// The section's two Markdown tables: the tables measured, and one line per (storage, table,
/// listing) with its median time, calls and ratios to B and C.
pub fn tables(results: &[ListingResult]) -> String {
    let mut out = String::new();
    out.push_str(
        "\n### Listing: FILES (metadata table) against directory listing\n\n\
         | storage | partitions × files | data files | objects in the table | MiB | built |\n\
         |---|---:|---:|---:|---:|---|\n",
    );
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} | {} |",
            r.storage,
            r.shape,
            r.shape.data_files(),
            r.objects,
            r.bytes as f64 / (1u64 << 20) as f64,
            r.built
        );
    }
    out.push_str(
        "\n| storage | partitions × files | listing | median (s) | µs per data file | LIST calls | GET/HEAD calls | ÷ B | ÷ C |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let files = r.shape.data_files() as f64;
        let rows = [
            (
                "A: reader through FILES + latest slices of all partitions",
                r.mdt,
                Some(r.dirs),
                Some(r.raw),
            ),
            (
                "A′: MDT read alone (open + FILES listing)",
                r.mdt_read,
                Some(r.dirs),
                Some(r.raw),
            ),
            (
                "B: reader through directory listing + latest slices of all partitions",
                r.dirs,
                None,
                Some(r.raw),
            ),
            ("C: raw recursive listing (`list_all`)", r.raw, None, None),
        ];
        for (label, m, vs_b, vs_c) in rows {
            let vs =
                |o: Option<Measured>| o.map_or("-".to_string(), |b| ratio(m.seconds, b.seconds));
            let _ = writeln!(
                out,
                "| {} | {} | {label} | {:.3} | {:.1} | {} | {} | {} | {} |",
                r.storage,
                r.shape,
                m.seconds,
                m.seconds * 1e6 / files,
                m.lists,
                m.reads,
                vs(vs_b),
                vs(vs_c),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_measure_small_table_every_listing_finds_every_file() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let shape = Shape {
            partitions: 12,
            files: 3,
        };
        build(&rt, local(dir.path()).unwrap(), shape, "test").unwrap();
        let r = measure(
            &rt,
            local(dir.path()).unwrap(),
            "local",
            shape,
            2,
            "x".into(),
        )
        .unwrap();
        for m in [r.mdt, r.mdt_read, r.dirs, r.raw] {
            assert_eq!(m.found, 36);
            assert!(m.seconds > 0.0);
        }
        // Directory listing lists every partition (twice: leaf check, then files); FILES lists
        // none of them.
        assert!(r.dirs.lists >= 2 * 12, "{r:?}");
        assert!(r.mdt.lists < 12, "{r:?}");
        assert_eq!(r.raw.lists, 1, "{r:?}");
        assert!(r.objects > 36 && r.bytes > 0);
        let t = tables(&[r]);
        assert!(t.contains("| local | 12 × 3 | 36 |"), "{t}");
        assert!(
            t.contains("| local | 12 × 3 | C: raw recursive listing (`list_all`) |"),
            "{t}"
        );
    }

    #[test]
    fn test_ratio_small_values_keep_four_decimals() {
        assert_eq!(ratio(1.0, 4.0), "0.25");
        assert_eq!(ratio(0.256, 56.244), "0.0046");
        assert_eq!(ratio(1.0, 0.0), "-");
    }

    #[test]
    fn test_commit_batch_one_row_per_partition() {
        let b = commit_batch(
            Shape {
                partitions: 7,
                files: 2,
            },
            1,
        )
        .unwrap();
        assert_eq!(b.num_rows(), 7);
        let parts = b
            .column_by_name(PARTITION)
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let distinct: std::collections::BTreeSet<&str> = parts.iter().flatten().collect();
        assert_eq!(distinct.len(), 7);
    }
}
