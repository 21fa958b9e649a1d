//! Input files of `arbor write` and `arbor create --schema-from`: `.parquet`, `.csv` (with a
//! header row) and `.jsonl` (one JSON object per line), read into Arrow record batches.
//!
//! Two modes: [`read_inferred`] infers the column types (arrow-csv / arrow-json inference, the
//! parquet file's own schema) for a new table; [`read_for_schema`] reads an input for an
//! existing table and converts every column, by name, to the table's type. Text inputs are
//! read as strings (JSON numbers as their original text) and parsed straight into the table's
//! types by the one exact parser per type that SQL literals use too
//! ([`arbor_table::cast_text_exact`]): `"007"` stays `"007"` in a string column, and a value
//! the type cannot hold exactly (`1.005` into `decimal(10,2)`, `1e400` into a double, `300`
//! into a byte, nanoseconds into a microsecond column) is refused like the same value in a
//! parquet input. Hudi's `_hoodie_*` meta columns in an input (for example an
//! `arbor read --meta` export) are ignored: the writer sets them.
//!
//! Errors name the file and, where one is at fault, the column and the row (counted from 0
//! over the data rows, in input order, like the table's own errors).

use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use arbor_format::meta::is_meta_column;
use arrow::array::{Array, ArrayRef};
use arrow::compute::{cast_with_options, concat_batches, CastOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{CliError, CliResult};
use crate::input_read::{self, check_names, input_error, open, text_zone};

/// The file formats `arbor write` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// Apache Parquet (`.parquet`, `.pq`).
    Parquet,
    /// Comma-separated values with a header row (`.csv`).
    Csv,
    /// One JSON object per line (`.jsonl`, `.ndjson`).
    Jsonl,
}

impl InputFormat {
    /// The format named by the file's extension (case-insensitive); an error names the
    /// extensions that are understood.
    pub fn from_path(path: &Path) -> CliResult<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        match ext.as_str() {
            "parquet" | "pq" => Ok(InputFormat::Parquet),
            "csv" => Ok(InputFormat::Csv),
            "jsonl" | "ndjson" => Ok(InputFormat::Jsonl),
            _ => Err(input_error(
                path,
                "unknown input format: expected a .parquet, .csv or .jsonl file",
            )),
        }
    }
}

/// An input file read into memory.
#[derive(Debug, Clone)]
pub struct Input {
    /// The schema of `batches` (data columns only: meta columns are dropped).
    pub schema: SchemaRef,
    /// The rows, in file order.
    pub batches: Vec<RecordBatch>,
}

impl Input {
    /// The number of rows.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// The schema of an input file, inferred as [`read_inferred`] does, without keeping the rows
/// of a parquet file.
pub fn infer_schema(path: &Path) -> CliResult<SchemaRef> {
    match InputFormat::from_path(path)? {
        InputFormat::Parquet => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(open(path)?)
                .map_err(|e| input_error(path, format!("not a readable parquet file: {e}")))?;
            check_inferred(path, data_only(builder.schema()))
        }
        InputFormat::Csv | InputFormat::Jsonl => Ok(read_inferred(path)?.schema),
    }
}

/// Reads an input file, inferring its column types: the parquet schema, or arrow-csv /
/// arrow-json inference over the whole file, the text then parsed into the inferred types
/// exactly as [`read_for_schema`] parses it. A column whose type cannot be inferred (only
/// nulls) is an error naming it.
pub fn read_inferred(path: &Path) -> CliResult<Input> {
    let input = match InputFormat::from_path(path)? {
        InputFormat::Parquet => read_parquet(path)?,
        InputFormat::Csv => {
            let mut file = BufReader::new(open(path)?);
            let format = arrow::csv::reader::Format::default().with_header(true);
            let (schema, _) = format
                .infer_schema(&mut file, None)
                .map_err(|e| input_error(path, format!("not readable as CSV: {e}")))?;
            // Text has no types: timestamps without an offset are UTC instants (`text_zone`).
            let fields: Vec<Field> = schema
                .fields()
                .iter()
                .map(|f| Field::new(f.name(), text_zone(f.data_type()), f.is_nullable()))
                .collect();
            // The values are parsed into the inferred types exactly, as for a table's types.
            let inferred = check_inferred(path, data_only(&Schema::new(fields)))?;
            read_for_schema(path, &inferred)?
        }
        InputFormat::Jsonl => {
            let mut file = BufReader::new(open(path)?);
            let (schema, _) = arrow::json::reader::infer_json_schema_from_seekable(&mut file, None)
                .map_err(|e| input_error(path, format!("not readable as JSON lines: {e}")))?;
            let inferred = check_inferred(path, data_only(&schema))?;
            read_for_schema(path, &inferred)?
        }
    };
    let schema = check_inferred(path, data_only(&input.schema))?;
    let batches = input
        .batches
        .iter()
        .map(|b| project_by_name(path, b, &schema))
        .collect::<CliResult<Vec<_>>>()?;
    Ok(Input { schema, batches })
}

/// Reads an input file for a table whose data schema is `target`.
///
/// Text inputs (CSV, JSON lines) carry values, not types: a column of the table is parsed or
/// converted into the table's type and a value that does not fit it exactly is an error
/// naming the column and row (`9.7` into an int column, `7` into a string column). A column
/// the table lacks keeps the inferred type (the table's schema evolution adds it). Parquet
/// inputs are typed and pass through as they are, for the table to convert exactly or to
/// widen its column ([`arbor_table::Table::validate`]). Missing table columns are left for
/// the table to report (a delete needs only the key and partition columns).
pub fn read_for_schema(path: &Path, target: &SchemaRef) -> CliResult<Input> {
    let (raw, text) = raw_for_schema(path, target, input_read::BATCH_ROWS)?;
    let batches = raw.batches.collect::<CliResult<Vec<_>>>()?;
    let input = Input {
        schema: raw.schema,
        batches,
    };
    conform(path, &input, target, text)
}

/// [`read_for_schema`] a batch at a time: each batch of the file is read and conformed to
/// `target` as the whole file would be (errors count rows across the file), so a streamed
/// write never holds the file in memory.
pub fn stream_for_schema(
    path: &Path,
    target: &SchemaRef,
) -> CliResult<impl Iterator<Item = CliResult<RecordBatch>>> {
    stream_in(path, target, input_read::BATCH_ROWS)
}

/// [`stream_for_schema`] in batches of `batch_rows` rows.
fn stream_in(
    path: &Path,
    target: &SchemaRef,
    batch_rows: usize,
) -> CliResult<impl Iterator<Item = CliResult<RecordBatch>>> {
    let (raw, text) = raw_for_schema(path, target, batch_rows)?;
    let (schema, target, owned) = (raw.schema, target.clone(), path.to_path_buf());
    let mut first_row = 0usize;
    Ok(raw.batches.map(move |batch| {
        let batch = batch?;
        let rows = batch.num_rows();
        let one = Input {
            schema: schema.clone(),
            batches: vec![batch],
        };
        let conformed = conform_from(&owned, &one, &target, text, first_row)?;
        first_row += rows;
        Ok(conformed
            .batches
            .into_iter()
            .next()
            .unwrap_or_else(|| RecordBatch::new_empty(conformed.schema.clone())))
    }))
}

/// The raw batches of an input for a table of `target` ([`input_read`]), and whether they
/// are text to parse.
fn raw_for_schema(
    path: &Path,
    target: &SchemaRef,
    rows: usize,
) -> CliResult<(input_read::Raw, bool)> {
    Ok(match InputFormat::from_path(path)? {
        InputFormat::Parquet => (input_read::parquet(path, rows)?, false),
        InputFormat::Csv => (input_read::csv_for_schema(path, target, rows)?, true),
        InputFormat::Jsonl => (input_read::json_for_schema(path, target, rows)?, true),
    })
}

/// Every batch of a parquet file, as its schema types them.
fn read_parquet(path: &Path) -> CliResult<Input> {
    let raw = input_read::parquet(path, input_read::BATCH_ROWS)?;
    let batches = raw.batches.collect::<CliResult<Vec<_>>>()?;
    Ok(Input {
        schema: raw.schema,
        batches,
    })
}

/// Converts the columns of `input` that the table has to the table's types (see
/// [`read_for_schema`]); `text` says the input is text (CSV, JSON lines), whose values are
/// parsed or converted exactly, not typed data the table may widen its columns for.
pub fn conform(path: &Path, input: &Input, target: &SchemaRef, text: bool) -> CliResult<Input> {
    conform_from(path, input, target, text, 0)
}

/// [`conform`] of rows numbered from `first_row` in errors (a batch of a streamed input).
fn conform_from(
    path: &Path,
    input: &Input,
    target: &SchemaRef,
    text: bool,
    first_row: usize,
) -> CliResult<Input> {
    check_names(path, &input.schema)?;
    let data = data_only(&input.schema);
    let fields: Vec<Arc<Field>> = data
        .fields()
        .iter()
        .map(|f| match target.field_with_name(f.name()) {
            Ok(t) if text => Arc::new(t.clone()),
            _ => Arc::new(Field::new(
                f.name(),
                if text {
                    text_zone(f.data_type())
                } else {
                    f.data_type().clone()
                },
                true,
            )),
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let mut batches = Vec::with_capacity(input.batches.len());
    let mut offset = first_row;
    for batch in &input.batches {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let column = batch
                .column_by_name(f.name())
                .ok_or_else(|| input_error(path, format!("column {:?} vanished", f.name())))?;
            columns.push(convert_column(path, f, column, offset)?);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        let converted = RecordBatch::try_new_with_options(schema.clone(), columns, &options)
            .map_err(|e| input_error(path, e.to_string()))?;
        offset += batch.num_rows();
        batches.push(converted);
    }
    Ok(Input { schema, batches })
}

fn is_text(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// Converts one column to `field`'s type: text is parsed (a value that does not parse is an
/// error naming the column and row), typed values convert exactly
/// ([`arbor_table::cast_exact`]), and a null in a column the table declares non-nullable is
/// an error naming the first such row.
fn convert_column(
    path: &Path,
    field: &Field,
    column: &ArrayRef,
    offset: usize,
) -> CliResult<ArrayRef> {
    let strict = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let converted = if column.data_type() == field.data_type() {
        column.clone()
    } else if is_text(column.data_type()) && crate::input_hex::is_binary(field.data_type()) {
        crate::input_hex::decode_hex_column(path, field, column, offset)?
    } else if is_text(column.data_type()) && arbor_table::parses_text_into(field.data_type()) {
        // Numbers, dates and times: one exact parser per type, shared with SQL literals.
        arbor_table::cast_text_exact(column, field.data_type(), field.name(), offset)
            .map_err(|e| input_error(path, e.to_string()))?
    } else if !is_text(column.data_type()) || is_text(field.data_type()) {
        arbor_table::cast_exact(column, field.data_type(), field.name(), offset)
            .map_err(|e| input_error(path, e.to_string()))?
    } else {
        match cast_with_options(column, field.data_type(), &strict) {
            Ok(c) => c,
            Err(e) => {
                // Find the first value the lenient cast turns into a null.
                let lenient = cast_with_options(column, field.data_type(), &CastOptions::default());
                let row = lenient
                    .ok()
                    .and_then(|l| (0..column.len()).find(|&i| column.is_valid(i) && l.is_null(i)));
                let at = row
                    .map(|r| {
                        let value = arrow::util::display::ArrayFormatter::try_new(
                            column.as_ref(),
                            &arrow::util::display::FormatOptions::default(),
                        )
                        .map(|f| f.value(r).to_string())
                        .unwrap_or_default();
                        format!(" at row {}: value {value:?}", offset + r)
                    })
                    .unwrap_or_default();
                return Err(input_error(
                    path,
                    format!(
                        "column {:?} cannot be read as {} (the table's type){at} ({e})",
                        field.name(),
                        field.data_type()
                    ),
                ));
            }
        }
    };
    if !field.is_nullable() && converted.null_count() > 0 {
        let row = (0..converted.len())
            .find(|&i| converted.is_null(i))
            .unwrap_or(0);
        return Err(input_error(
            path,
            format!(
                "column {:?} is null at row {}, but the table does not allow nulls in it",
                field.name(),
                offset + row
            ),
        ));
    }
    Ok(converted)
}

/// `schema` without Hudi's meta columns and without schema metadata.
fn data_only(schema: &Schema) -> SchemaRef {
    let fields: Vec<Arc<Field>> = schema
        .fields()
        .iter()
        .filter(|f| !is_meta_column(f.name()))
        .cloned()
        .collect();
    Arc::new(Schema::new(fields))
}

fn check_inferred(path: &Path, schema: SchemaRef) -> CliResult<SchemaRef> {
    if schema.fields().is_empty() {
        return Err(input_error(path, "the input has no data columns"));
    }
    check_names(path, &schema)?;
    if let Some(f) = schema
        .fields()
        .iter()
        .find(|f| f.data_type() == &DataType::Null)
    {
        return Err(input_error(
            path,
            format!(
                "column {:?} holds only nulls, so its type cannot be inferred; \
                 create the table from a parquet file or give the column a value",
                f.name()
            ),
        ));
    }
    Ok(schema)
}

fn project_by_name(path: &Path, batch: &RecordBatch, schema: &SchemaRef) -> CliResult<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            batch
                .column_by_name(f.name())
                .cloned()
                .ok_or_else(|| input_error(path, format!("column {:?} vanished", f.name())))
        })
        .collect::<CliResult<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(|e| input_error(path, e.to_string()))
}

/// All rows of `batches` in one batch of `schema` (an empty batch when there are none).
pub fn concat(schema: &SchemaRef, batches: &[RecordBatch]) -> CliResult<RecordBatch> {
    concat_batches(schema, batches).map_err(|e| CliError::Output(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use arrow::array::{AsArray, Int64Array, StringArray};
    use arrow::datatypes::Int64Type;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn target() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    fn decimal_target() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
            Field::new("amount", DataType::Decimal128(10, 2), true),
            Field::new("tag", DataType::Utf8, true),
        ]))
    }

    /// 20,000 rows (three batches): `id` with leading zeros, `n` a number or null, `amount`
    /// a decimal, `tag` text; row `bad` (when given) has an amount the table cannot hold.
    fn rows_text(csv: bool, bad: Option<usize>) -> String {
        let mut text = String::from(if csv { "id,n,amount,tag\n" } else { "" });
        for i in 0..20_000usize {
            let amount = if Some(i) == bad {
                "1.005".to_string()
            } else {
                format!("{}.{:02}", i / 100, i % 100)
            };
            let n = if i % 7 == 0 {
                String::new()
            } else {
                (i * 3).to_string()
            };
            if csv {
                text.push_str(&format!("{i:06},{n},{amount},t{}\n", i % 5));
            } else {
                let n = if n.is_empty() { "null".to_string() } else { n };
                text.push_str(&format!(
                    "{{\"id\":\"{i:06}\",\"n\":{n},\"amount\":{amount},\"tag\":\"t{}\"}}\n",
                    i % 5
                ));
            }
        }
        text
    }

    #[test]
    fn test_stream_for_schema_reads_what_read_for_schema_reads_batch_by_batch() {
        let dir = tempfile::tempdir().unwrap();
        for (name, csv) in [("a.csv", true), ("a.jsonl", false)] {
            let p = write(dir.path(), name, &rows_text(csv, None));
            let whole = read_for_schema(&p, &decimal_target()).unwrap();
            let batches = stream_in(&p, &decimal_target(), 8192)
                .unwrap()
                .collect::<CliResult<Vec<_>>>()
                .unwrap();
            assert!(batches.len() >= 3, "{name}: {} batches", batches.len());
            let streamed = concat(&whole.schema, &batches).unwrap();
            let expected = concat(&whole.schema, &whole.batches).unwrap();
            assert_eq!(streamed, expected, "{name}");
            assert_eq!(streamed.num_rows(), 20_000, "{name}");
            let amount = streamed
                .column_by_name("amount")
                .unwrap()
                .as_primitive::<arrow::datatypes::Decimal128Type>();
            assert_eq!(amount.value(12_345), 12_345, "{name}: 123.45 exactly");
        }
    }

    #[test]
    fn test_stream_for_schema_names_the_row_of_a_bad_value_across_batches() {
        let dir = tempfile::tempdir().unwrap();
        for (name, csv) in [("a.csv", true), ("a.jsonl", false)] {
            let p = write(dir.path(), name, &rows_text(csv, Some(17_001)));
            let err = stream_in(&p, &decimal_target(), 8192)
                .unwrap()
                .collect::<CliResult<Vec<_>>>()
                .unwrap_err()
                .to_string();
            assert!(err.contains("17001"), "{name}: {err}");
            assert!(err.contains("amount"), "{name}: {err}");
            let whole = read_for_schema(&p, &decimal_target())
                .unwrap_err()
                .to_string();
            assert_eq!(err, whole, "{name}");
        }
    }

    #[test]
    fn test_from_path_unknown_extension_errors() {
        let err = InputFormat::from_path(Path::new("x.txt")).unwrap_err();
        assert!(err.to_string().contains("unknown input format"), "{err}");
        assert_eq!(
            InputFormat::from_path(Path::new("a.JSONL")).unwrap(),
            InputFormat::Jsonl
        );
    }

    #[test]
    fn test_read_inferred_csv_infers_types_and_drops_meta() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.csv",
            "_hoodie_commit_time,id,n\n1,a,1\n2,b,2\n",
        );
        let input = read_inferred(&p).unwrap();
        assert_eq!(input.num_rows(), 2);
        let names: Vec<&str> = input
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["id", "n"]);
        assert_eq!(input.schema.field(1).data_type(), &DataType::Int64);
    }

    #[test]
    fn test_read_for_schema_csv_keeps_leading_zeros_in_strings() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.csv", "n,id\n5,007\n,008\n");
        let input = read_for_schema(&p, &target()).unwrap();
        let b = &input.batches[0];
        let ids: &StringArray = b.column_by_name("id").unwrap().as_string::<i32>();
        assert_eq!(ids.value(0), "007");
        let n: &Int64Array = b.column_by_name("n").unwrap().as_primitive::<Int64Type>();
        assert_eq!(n.value(0), 5);
        assert!(n.is_null(1));
    }

    #[test]
    fn test_read_for_schema_new_column_keeps_inferred_type() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.jsonl",
            "{\"id\":\"a\",\"n\":1,\"extra\":2.5}\n",
        );
        let input = read_for_schema(&p, &target()).unwrap();
        let extra = input.schema.field_with_name("extra").unwrap();
        assert_eq!(extra.data_type(), &DataType::Float64);
    }

    #[test]
    fn test_read_for_schema_missing_column_left_for_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.jsonl", "{\"id\":\"a\"}\n");
        let ok = read_for_schema(&p, &target()).unwrap();
        let names: Vec<&str> = ok
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["id"]);
    }

    #[test]
    fn test_read_for_schema_json_fraction_into_int_names_row() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.jsonl",
            "{\"id\":\"a\",\"n\":1}\n{\"id\":\"b\",\"n\":9.7}\n",
        );
        let err = read_for_schema(&p, &target()).unwrap_err().to_string();
        assert!(err.contains("\"n\" at row 1"), "{err}");
        assert!(err.contains("9.7"), "{err}");
        let p = write(dir.path(), "b.jsonl", "{\"id\":7,\"n\":1}\n");
        let err = read_for_schema(&p, &target()).unwrap_err().to_string();
        assert!(err.contains("not compatible"), "{err}");
    }

    #[test]
    fn test_read_inferred_csv_timestamps_without_fraction_are_utc() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.csv", "id,at\na,2024-01-01 10:00:00\n");
        let input = read_inferred(&p).unwrap();
        let at = input.schema.field_with_name("at").unwrap();
        assert!(
            matches!(at.data_type(), DataType::Timestamp(_, Some(z)) if z.as_ref() == "UTC"),
            "{at:?}"
        );
    }

    #[test]
    fn test_read_for_schema_bad_value_names_column_and_row() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.csv", "id,n\na,1\nb,x\n");
        let err = read_for_schema(&p, &target()).unwrap_err().to_string();
        assert!(err.contains("column \"n\""), "{err}");
        assert!(err.contains("at row 1"), "{err}");
        assert!(err.contains("\"x\""), "{err}");
    }

    #[test]
    fn test_read_for_schema_null_in_required_column_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.csv", "id,n\na,1\n,2\n");
        let err = read_for_schema(&p, &target()).unwrap_err().to_string();
        assert!(err.contains("\"id\" is null at row 1"), "{err}");
    }

    #[test]
    fn test_read_inferred_only_nulls_column_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.jsonl", "{\"id\":\"a\",\"z\":null}\n");
        let err = read_inferred(&p).unwrap_err().to_string();
        assert!(err.contains("\"z\" holds only nulls"), "{err}");
    }

    #[test]
    fn test_read_inferred_duplicate_csv_header_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.csv", "id,id\na,b\n");
        let err = read_for_schema(&p, &target()).unwrap_err().to_string();
        assert!(err.contains("appears twice"), "{err}");
    }

    #[test]
    fn test_conform_duplicate_input_column_names_it() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int64Array::from(vec![2])),
            ],
        )
        .unwrap();
        let input = Input {
            schema,
            batches: vec![batch],
        };
        let err = conform(Path::new("in.parquet"), &input, &target(), false).unwrap_err();
        assert!(err.to_string().contains("\"v\" appears twice"), "{err}");
    }

    #[test]
    fn test_read_inferred_missing_file_errors() {
        let err = read_inferred(Path::new("/nonexistent/x.csv"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/nonexistent/x.csv: cannot open"), "{err}");
    }
}
