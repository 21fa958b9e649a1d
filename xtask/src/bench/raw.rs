//! The baselines: arrow-rs writing and reading plain parquet, with the settings arbor's base
//! files use (snappy pages, at most 1 Mi rows per row group), on one thread, no Hudi anywhere; a written
//! file is synced to disk with its directory entry, as arbor's local storage does.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// Rows per row group of arbor's base files (`arbor_format::base::BaseFileWriter`'s default).
pub const ROW_GROUP_ROWS: usize = 1024 * 1024;

/// Writes `batches` (one schema) to a new parquet file at `path`; returns its size in bytes.
pub fn write_parquet(batches: &[RecordBatch], path: &Path) -> Result<u64, String> {
    let shown = path.display();
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| format!("no batches to write to {shown}"))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    let file = File::create_new(path).map_err(|e| format!("creating {shown}: {e}"))?;
    let mut writer = ArrowWriter::try_new(BufWriter::new(file), schema, Some(props))
        .map_err(|e| format!("parquet writer for {shown}: {e}"))?;
    for b in batches {
        writer
            .write(b)
            .map_err(|e| format!("writing {shown}: {e}"))?;
    }
    // Durable as arbor's local storage makes every file it stores (the data synced, then the
    // directory entry), so the comparison is like with like.
    let file = writer
        .into_inner()
        .map_err(|e| format!("closing {shown}: {e}"))?
        .into_inner()
        .map_err(|e| format!("flushing {shown}: {}", e.error()))?;
    file.sync_all()
        .map_err(|e| format!("syncing {shown}: {e}"))?;
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| format!("syncing {}: {e}", dir.display()))?;
    }
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| format!("size of {shown}: {e}"))
}

/// `batches` with the five Hudi meta columns (`_hoodie_commit_time`, `_hoodie_commit_seqno`,
/// `_hoodie_record_key`, `_hoodie_partition_path`, `_hoodie_file_name`, strings shaped like
/// arbor's) prepended: the same bytes to encode as a base file, without any Hudi logic.
pub fn with_meta_columns(
    batches: &[RecordBatch],
    key: &str,
    partition: &str,
) -> Result<Vec<RecordBatch>, String> {
    let instant = "20260101000000000";
    let mut out = Vec::with_capacity(batches.len());
    let mut row = 0usize;
    for b in batches {
        let n = b.num_rows();
        let keys = b
            .column_by_name(key)
            .map(|c| c.as_string::<i32>().clone())
            .ok_or_else(|| format!("no string column {key}"))?;
        let parts = b
            .column_by_name(partition)
            .map(|c| c.as_string::<i32>().clone())
            .ok_or_else(|| format!("no string column {partition}"))?;
        let mut fields: Vec<Arc<Field>> = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        let mut add = |name: &str, values: StringArray| {
            fields.push(Arc::new(Field::new(name, DataType::Utf8, true)));
            columns.push(Arc::new(values));
        };
        add(
            "_hoodie_commit_time",
            StringArray::from_iter_values(std::iter::repeat_n(instant, n)),
        );
        add(
            "_hoodie_commit_seqno",
            StringArray::from_iter_values((row..row + n).map(|i| format!("{instant}_0_{i}"))),
        );
        add("_hoodie_record_key", keys);
        add("_hoodie_partition_path", parts.clone());
        add(
            "_hoodie_file_name",
            StringArray::from_iter_values(parts.iter().map(|p| {
                format!(
                    "{}-0000-0000-0000-000000000000-0_0-0-0_{instant}.parquet",
                    p.unwrap_or_default()
                )
            })),
        );
        fields.extend(b.schema().fields().iter().cloned());
        columns.extend(b.columns().iter().cloned());
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| format!("adding meta columns: {e}"))?;
        out.push(batch);
        row += n;
    }
    Ok(out)
}

/// Reads every row of every column of `files`, one after the other; returns the row count.
pub fn read_parquet(files: &[PathBuf]) -> Result<u64, String> {
    let mut rows = 0u64;
    for path in files {
        let shown = path.display();
        let file = File::open(path).map_err(|e| format!("opening {shown}: {e}"))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(|e| format!("parquet reader for {shown}: {e}"))?;
        for batch in reader {
            let batch = batch.map_err(|e| format!("reading {shown}: {e}"))?;
            rows += batch.num_rows() as u64;
        }
    }
    Ok(rows)
}

/// The files of a table directory outside `.hoodie` whose name `pick` accepts ([`is_base`],
/// [`is_log`]), sorted.
pub fn table_files(table: &Path, pick: fn(&str) -> bool) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![table.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("listing {}: {e}", dir.display()))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            let kind = entry
                .file_type()
                .map_err(|e| format!("type of {}: {e}", path.display()))?;
            if kind.is_dir() {
                if name != ".hoodie" {
                    stack.push(path);
                }
            } else if pick(&name) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A base file name (`<fileId>_<token>_<instant>.parquet`).
pub fn is_base(name: &str) -> bool {
    name.ends_with(".parquet")
}

/// A log file name (`.<fileId>_<instant>.log.<version>_<token>`).
pub fn is_log(name: &str) -> bool {
    name.starts_with('.') && name.contains(".log.")
}

/// The total size in bytes of `files`.
pub fn size_of(files: &[PathBuf]) -> Result<u64, String> {
    files.iter().try_fold(0u64, |acc, f| {
        std::fs::metadata(f)
            .map(|m| acc + m.len())
            .map_err(|e| format!("size of {}: {e}", f.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_write_parquet_then_read_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        let batches = crate::bench::data::inserts(1_000).unwrap();
        let size = write_parquet(&batches, &path).unwrap();
        assert!(size > 0);
        assert_eq!(read_parquet(std::slice::from_ref(&path)).unwrap(), 1_000);
        assert_eq!(table_files(dir.path(), is_base).unwrap(), vec![path]);
    }

    #[test]
    fn test_with_meta_columns_five_string_columns_first() {
        let batches = crate::bench::data::inserts(100).unwrap();
        let with = with_meta_columns(&batches, "id", "region").unwrap();
        assert_eq!(with[0].num_rows(), 100);
        assert_eq!(with[0].num_columns(), 15);
        assert_eq!(with[0].schema().field(2).name(), "_hoodie_record_key");
        assert_eq!(with[0].column(2).as_ref(), batches[0].column(0).as_ref());
        assert!(with_meta_columns(&batches, "nope", "region").is_err());
    }

    #[test]
    fn test_write_parquet_existing_file_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        std::fs::write(&path, b"x").unwrap();
        let batches = crate::bench::data::inserts(10).unwrap();
        assert!(write_parquet(&batches, &path).is_err());
    }

    #[test]
    fn test_table_files_skips_meta_dir_and_picks_logs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("region-1");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::create_dir_all(dir.path().join(".hoodie")).unwrap();
        std::fs::write(dir.path().join(".hoodie").join("x.parquet"), b"x").unwrap();
        std::fs::write(p.join("f1_0-0-0_001.parquet"), b"x").unwrap();
        std::fs::write(p.join(".f1_001.log.1_0-0-0"), b"xy").unwrap();
        std::fs::write(p.join(".hoodie_partition_metadata"), b"x").unwrap();
        assert_eq!(table_files(dir.path(), is_base).unwrap().len(), 1);
        let logs = table_files(dir.path(), is_log).unwrap();
        assert_eq!(logs.len(), 1);
        assert_eq!(size_of(&logs).unwrap(), 2);
    }
}
