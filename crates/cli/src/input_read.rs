//! The raw readers of `arbor write`'s input files, a batch at a time, before
//! [`crate::input`] conforms each batch to the table: parquet as typed, CSV with the table's
//! columns as text, JSON lines with the numbers of the table's numeric columns as their
//! original text. Reading a batch at a time is what lets a streamed write take a file larger
//! than memory; [`crate::input::read_for_schema`] collects the same batches. A leaf: nothing
//! here uses `input.rs`.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use crate::error::{CliError, CliResult};

/// Rows per record batch when reading inputs: a streamed write spreads each batch over the
/// partitions it touches, and chunks of a few rows per partition cost 1.5x the CPU of
/// 65,536-row batches (2M rows over 60 partitions, 8,192-row batches: 3.89 s against 2.51 s).
pub(crate) const BATCH_ROWS: usize = 65_536;

/// An input's batches as read, all of `schema`.
pub(crate) struct Raw {
    /// The schema of every batch (a parquet file's includes its meta columns).
    pub(crate) schema: SchemaRef,
    /// The batches, in file order.
    pub(crate) batches: Box<dyn Iterator<Item = CliResult<RecordBatch>> + Send>,
}

pub(crate) fn input_error(path: &Path, reason: impl Into<String>) -> CliError {
    CliError::Input {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

pub(crate) fn open(path: &Path) -> CliResult<File> {
    File::open(path).map_err(|e| input_error(path, format!("cannot open: {e}")))
}

pub(crate) fn rewind<R: Seek>(path: &Path, file: &mut R) -> CliResult<()> {
    file.rewind()
        .map(|_| ())
        .map_err(|e| input_error(path, format!("cannot re-read: {e}")))
}

/// The type a text input's inferred column gets: timestamps without an offset in CSV or
/// JSON text are read as UTC instants (as Spark reads them with session time zone UTC), so
/// a table made from text has Hudi's ordinary `timestamp` columns.
pub(crate) fn text_zone(dt: &DataType) -> DataType {
    match dt {
        DataType::Timestamp(unit, None) => DataType::Timestamp(*unit, Some("UTC".into())),
        other => other.clone(),
    }
}

/// Column names must be non-empty and unique.
pub(crate) fn check_names(path: &Path, schema: &Schema) -> CliResult<()> {
    let mut seen = std::collections::BTreeSet::new();
    for f in schema.fields() {
        let n = f.name();
        if n.trim().is_empty() {
            return Err(input_error(path, "the input has a column without a name"));
        }
        if !seen.insert(n.as_str()) {
            return Err(input_error(
                path,
                format!("column {n:?} appears twice in the input"),
            ));
        }
    }
    Ok(())
}

/// The column names of a CSV header row; empty or duplicate names are errors.
fn csv_header(path: &Path, line: &str) -> CliResult<Vec<String>> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() {
        return Err(input_error(path, "empty input: no header row"));
    }
    let (schema, _) = arrow::csv::reader::Format::default()
        .with_header(true)
        .infer_schema(std::io::Cursor::new(format!("{line}\n")), Some(0))
        .map_err(|e| input_error(path, format!("cannot read the header row: {e}")))?;
    check_names(path, &schema)?;
    Ok(schema.fields().iter().map(|f| f.name().clone()).collect())
}

/// The file schema and a reader of `batch_rows`-row batches of the parquet file at `path`.
fn parquet_reader(
    path: &Path,
    batch_rows: usize,
) -> CliResult<(SchemaRef, ParquetRecordBatchReader)> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(open(path)?)
        .map_err(|e| input_error(path, format!("not a readable parquet file: {e}")))?;
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(batch_rows)
        .build()
        .map_err(|e| input_error(path, format!("not a readable parquet file: {e}")))?;
    Ok((schema, reader))
}

/// The `batch_rows`-row batches of a parquet file as its schema types them.
pub(crate) fn parquet(path: &Path, batch_rows: usize) -> CliResult<Raw> {
    let (schema, reader) = parquet_reader(path, batch_rows)?;
    let owned = path.to_path_buf();
    Ok(Raw {
        schema,
        batches: Box::new(reader.map(move |b| {
            b.map_err(|e| input_error(&owned, format!("not a readable parquet file: {e}")))
        })),
    })
}

/// The batches of a CSV file for a table whose data schema is `target`: the table's columns
/// as text (to be parsed into its types), new columns as arrow-csv infers them over the whole
/// file.
pub(crate) fn csv_for_schema(path: &Path, target: &SchemaRef, batch_rows: usize) -> CliResult<Raw> {
    let mut file = BufReader::new(open(path)?);
    let (inferred, _) = arrow::csv::reader::Format::default()
        .with_header(true)
        .infer_schema(&mut file, None)
        .map_err(|e| input_error(path, format!("not readable as CSV: {e}")))?;
    rewind(path, &mut file)?;
    let mut header = String::new();
    file.read_line(&mut header)
        .map_err(|e| input_error(path, format!("cannot read the header row: {e}")))?;
    rewind(path, &mut file)?;
    let names = csv_header(path, &header)?;
    let fields: Vec<Field> = names
        .iter()
        .map(|n| {
            let ty = match (target.field_with_name(n), inferred.field_with_name(n)) {
                (Err(_), Ok(f)) if f.data_type() != &DataType::Null => text_zone(f.data_type()),
                _ => DataType::Utf8,
            };
            Field::new(n.as_str(), ty, true)
        })
        .collect();
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    if schema.fields().is_empty() {
        return Err(input_error(path, "empty input: no header row"));
    }
    let reader = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_header(true)
        .with_batch_size(batch_rows)
        .build(file)
        .map_err(|e| input_error(path, format!("not readable as CSV: {e}")))?;
    let owned = path.to_path_buf();
    Ok(Raw {
        schema,
        batches: Box::new(
            reader.map(move |b| {
                b.map_err(|e| input_error(&owned, format!("not readable as CSV: {e}")))
            }),
        ),
    })
}

/// The schema a JSON-lines input is decoded with: a column the table has with a nested type
/// (struct, list, map) is decoded straight into the table's type by arrow-json (a JSON object
/// into a map, as `arbor read --format jsonl` writes maps), since inference alone cannot tell
/// a map from a struct; every other column keeps its inferred type, to be parsed or converted
/// exactly.
fn nested_as_table(inferred: &Schema, target: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = inferred
        .fields()
        .iter()
        .map(|f| match target.field_with_name(f.name()) {
            Ok(t) if t.data_type().is_nested() => Field::new(f.name(), t.data_type().clone(), true),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Whether a table column of type `dt` takes JSON numbers as their text, to parse exactly.
fn takes_number_text(dt: &DataType) -> bool {
    dt.is_numeric() && arbor_table::parses_text_into(dt)
}

type JsonReader = arrow::json::reader::Reader<BufReader<File>>;

/// The batches of a JSON-lines file for a table whose data schema is `target`: a column of
/// JSON numbers (inferred `Int64` or `Float64`) that the table holds as a number is read as
/// the numbers' original text (arrow-json would round `1.005`, read `1e400` as infinity and
/// fail on `9223372036854775808` without naming it), every other column as
/// [`nested_as_table`] says. The two kinds are decoded by two readers of the file in
/// lockstep, batch by batch (the same lines make the same batches).
pub(crate) fn json_for_schema(
    path: &Path,
    target: &SchemaRef,
    batch_rows: usize,
) -> CliResult<Raw> {
    let mut file = BufReader::new(open(path)?);
    let (inferred, _) = arrow::json::reader::infer_json_schema_from_seekable(&mut file, None)
        .map_err(|e| input_error(path, format!("not readable as JSON lines: {e}")))?;
    rewind(path, &mut file)?;
    let decoded = nested_as_table(&inferred, target);
    if decoded.fields().is_empty() {
        return Err(input_error(path, "empty input: no JSON objects"));
    }
    let is_number_text = |f: &Field| {
        matches!(f.data_type(), DataType::Int64 | DataType::Float64)
            && target
                .field_with_name(f.name())
                .is_ok_and(|t| takes_number_text(t.data_type()))
    };
    let mut fields = Vec::with_capacity(decoded.fields().len());
    let (mut texts, mut typed) = (Vec::new(), Vec::new());
    for f in decoded.fields() {
        if is_number_text(f) {
            let text = Field::new(f.name(), DataType::Utf8, true);
            texts.push(text.clone());
            fields.push(text);
        } else {
            typed.push(f.as_ref().clone());
            fields.push(f.as_ref().clone());
        }
    }
    let reader = |file: BufReader<File>, fields: Vec<Field>, coerce: bool| {
        arrow::json::ReaderBuilder::new(Arc::new(Schema::new(fields)))
            .with_batch_size(batch_rows)
            .with_coerce_primitive(coerce)
            .build(file)
            .map_err(|e| input_error(path, format!("not readable as JSON lines: {e}")))
    };
    let texts_reader = if texts.is_empty() {
        None
    } else {
        Some(reader(BufReader::new(open(path)?), texts, true)?)
    };
    let typed_reader = if typed.is_empty() {
        None
    } else {
        Some(reader(file, typed, false)?)
    };
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    Ok(Raw {
        schema: schema.clone(),
        batches: Box::new(JsonLockstep {
            path: path.to_path_buf(),
            schema,
            texts: texts_reader,
            typed: typed_reader,
            done: false,
        }),
    })
}

/// Two readers of one JSON-lines file whose batches are zipped into batches of `schema`.
struct JsonLockstep {
    path: PathBuf,
    schema: SchemaRef,
    texts: Option<JsonReader>,
    typed: Option<JsonReader>,
    done: bool,
}

impl JsonLockstep {
    fn next_of(path: &Path, reader: Option<&mut JsonReader>) -> CliResult<Option<RecordBatch>> {
        match reader.map(Iterator::next) {
            None | Some(None) => Ok(None),
            Some(Some(b)) => b
                .map(Some)
                .map_err(|e| input_error(path, format!("not readable as JSON lines: {e}"))),
        }
    }

    fn merge(&mut self) -> CliResult<Option<RecordBatch>> {
        let texts = Self::next_of(&self.path, self.texts.as_mut())?;
        let typed = Self::next_of(&self.path, self.typed.as_mut())?;
        let rows = match (&texts, &typed) {
            (None, None) => return Ok(None),
            (Some(a), Some(b)) if a.num_rows() != b.num_rows() => None,
            (Some(_), None) if self.typed.is_some() => None,
            (None, Some(_)) if self.texts.is_some() => None,
            (Some(a), _) => Some(a.num_rows()),
            (None, Some(b)) => Some(b.num_rows()),
        };
        let Some(rows) = rows else {
            return Err(input_error(
                &self.path,
                "not readable as JSON lines: two reads of the file disagree on its rows",
            ));
        };
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for f in self.schema.fields() {
            let column = texts
                .as_ref()
                .and_then(|t| t.column_by_name(f.name()))
                .or_else(|| typed.as_ref().and_then(|t| t.column_by_name(f.name())))
                .cloned()
                .ok_or_else(|| {
                    input_error(&self.path, format!("column {:?} vanished", f.name()))
                })?;
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)
            .map(Some)
            .map_err(|e| input_error(&self.path, e.to_string()))
    }
}

impl Iterator for JsonLockstep {
    type Item = CliResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let merged = self.merge().transpose();
        if !matches!(merged, Some(Ok(_))) {
            self.done = true;
        }
        merged
    }
}
