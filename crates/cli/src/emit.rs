//! Rows written out as the user asked (`--format table|jsonl|csv|parquet`, `--output FILE`,
//! `--limit N`, `--wide`), shared by `arbor read` and `arbor sql`: the table format fits the
//! terminal, the others are exact; a closed pipe (`| head`) ends the output quietly.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use async_trait::async_trait;
use clap::ValueEnum;

use crate::error::{CliError, CliResult};
use crate::output::{fit_table, print_text, terminal_width, wide_table};

/// Rows the `table` format shows unless `--limit` says otherwise.
pub const DEFAULT_TABLE_LIMIT: usize = 50;

/// Where rows come from, batch by batch.
#[async_trait]
pub trait RowSource: Send {
    /// The next batch, `None` at the end.
    async fn next(&mut self) -> CliResult<Option<RecordBatch>>;

    /// Counts the rows not read yet (reading them), for "N of M rows shown".
    async fn count_rest(&mut self) -> CliResult<usize> {
        let mut n = 0;
        while let Some(b) = self.next().await? {
            n += b.num_rows();
        }
        Ok(n)
    }
}

/// How [`emit`] writes rows.
#[derive(Debug, Clone)]
pub struct EmitOptions {
    /// The format.
    pub format: ReadFormat,
    /// A file to write instead of stdout (needed by parquet).
    pub output: Option<PathBuf>,
    /// Most rows written (`None`: 50 for the table format, all for the others).
    pub limit: Option<usize>,
    /// Table format: every column and value whole.
    pub wide: bool,
    /// Whether the command takes `--columns` (the table format's footer suggests it).
    pub columns_flag: bool,
}

/// Writes the rows of `rows` (whose batches have `schema`) as `options` say.
pub async fn emit(
    rows: &mut dyn RowSource,
    schema: &SchemaRef,
    options: &EmitOptions,
) -> CliResult<()> {
    if options.format == ReadFormat::Parquet && options.output.is_none() {
        return Err(CliError::Usage(
            "--format parquet needs --output FILE".into(),
        ));
    }
    let limit = options.limit.or(match options.format {
        ReadFormat::Table => Some(DEFAULT_TABLE_LIMIT),
        _ => None,
    });
    let create = |p: &PathBuf| {
        File::create(p).map_err(|e| CliError::Output(format!("{}: {e}", p.display())))
    };
    match (options.format, &options.output) {
        (ReadFormat::Table, None) => {
            let (batches, total) = limited(rows, limit).await?;
            print_rows(
                schema,
                &batches,
                total,
                (!options.wide).then(terminal_width),
                options.columns_flag,
            )
        }
        (ReadFormat::Table, Some(p)) => {
            // A file gets every column and value whole.
            let (batches, _) = limited(rows, limit).await?;
            let header: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            let table = wide_table(&header, cells(&batches)?);
            let mut f = create(p)?;
            writeln!(f, "{table}").map_err(|e| CliError::Output(format!("{}: {e}", p.display())))
        }
        (ReadFormat::Parquet, Some(p)) => {
            let out = |e: parquet::errors::ParquetError| {
                CliError::Output(format!("{}: {e}", p.display()))
            };
            let f = create(p)?;
            let mut w =
                parquet::arrow::ArrowWriter::try_new(f, schema.clone(), None).map_err(out)?;
            let mut left = limit;
            while let Some(b) = next_within(rows, &mut left).await? {
                w.write(&b).map_err(out)?;
            }
            w.close().map(|_| ()).map_err(out)
        }
        (format, Some(p)) => {
            let mut f = std::io::BufWriter::new(create(p)?);
            write_text_rows(format, &mut f, schema, rows, limit)
                .await?
                .map_err(|e| CliError::Output(format!("{}: {e}", p.display())))
        }
        (format, None) => {
            crate::stdio::mark_stdout_written();
            let mut out = std::io::BufWriter::new(PipeOut {
                inner: std::io::stdout().lock(),
                broken: false,
            });
            let result = write_text_rows(format, &mut out, schema, rows, limit).await?;
            let broken = out.get_ref().broken;
            match result {
                Err(_) if broken => Ok(()),
                Err(e) => Err(CliError::Output(e.to_string())),
                Ok(()) => Ok(()),
            }
        }
    }
}

/// Output formats of `arbor read` and `arbor sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReadFormat {
    /// A human table.
    Table,
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header row; a nested value (struct, list, map) is its JSON text in one cell.
    Csv,
    /// A parquet file (needs --output).
    Parquet,
}

/// The first `limit` rows (all without a limit) and the number of rows in total.
async fn limited(
    rows: &mut dyn RowSource,
    limit: Option<usize>,
) -> CliResult<(Vec<RecordBatch>, usize)> {
    let mut out = Vec::new();
    let mut total = 0;
    while let Some(b) = rows.next().await? {
        let n = b.num_rows();
        let left = limit.map_or(n, |l| l.saturating_sub(total));
        if left > 0 {
            out.push(if left < n { b.slice(0, left) } else { b });
        }
        total += n;
        if limit.is_some_and(|l| total >= l) {
            total += rows.count_rest().await?;
            break;
        }
    }
    Ok((out, total))
}

/// The next batch within the limit (`left`: rows still to output, `None` for no limit).
async fn next_within(
    rows: &mut dyn RowSource,
    left: &mut Option<usize>,
) -> CliResult<Option<RecordBatch>> {
    if *left == Some(0) {
        return Ok(None);
    }
    let Some(b) = rows.next().await? else {
        return Ok(None);
    };
    Ok(Some(match left {
        Some(l) => {
            let n = b.num_rows().min(*l);
            *l -= n;
            b.slice(0, n)
        }
        None => b,
    }))
}

/// The cells of `batches` as text (nulls as `null`).
pub fn cells(batches: &[RecordBatch]) -> CliResult<Vec<Vec<String>>> {
    let options = FormatOptions::default().with_null("null");
    let mut rows = Vec::new();
    for b in batches {
        let formatters = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CliError::Output(e.to_string()))?;
        for r in 0..b.num_rows() {
            rows.push(formatters.iter().map(|f| f.value(r).to_string()).collect());
        }
    }
    Ok(rows)
}

/// Prints `batches` as a human table followed by a line counting the rows: fitted to `width`
/// (see [`fit_table`]; the last line says which columns were left out and whether values were
/// cut), or with every column and value whole when `width` is `None` (`--wide`).
pub fn print_rows(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    total: usize,
    width: Option<usize>,
    columns_flag: bool,
) -> CliResult<()> {
    let shown: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if schema.fields().is_empty() || shown == 0 {
        return print_text(&format!("(no rows; {total} in total)"));
    }
    let header: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let rows = cells(batches)?;
    let (text, fit) = match width {
        Some(w) => fit_table(&header, &rows, w),
        None => (wide_table(&header, rows), Default::default()),
    };
    print_text(&text)?;
    let mut line = if shown < total {
        format!("{shown} of {total} rows shown (--limit N to see more)")
    } else {
        format!("{total} rows")
    };
    let mut notes = Vec::new();
    if fit.shown_columns < fit.total_columns {
        let left: Vec<&str> = header.iter().skip(fit.shown_columns).copied().collect();
        notes.push(format!(
            "{} of {} columns shown, not shown: {}",
            fit.shown_columns,
            fit.total_columns,
            left.join(", ")
        ));
    }
    if fit.cut_cells > 0 {
        notes.push(format!("{} long values cut (…)", fit.cut_cells));
    }
    if !notes.is_empty() {
        let columns = if columns_flag {
            ", --columns picks columns"
        } else {
            ""
        };
        line.push_str(&format!(
            "; {} (--wide shows everything{columns}, --format jsonl is exact)",
            notes.join("; ")
        ));
    }
    print_text(&line)
}

/// Stdout that remembers whether the reader went away (`arbor read ... | head`), so that a
/// closed pipe is told apart from a real output error whatever error type the writer wraps it in.
struct PipeOut<W: Write> {
    inner: W,
    broken: bool,
}

impl<W: Write> Write for PipeOut<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        if matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            self.broken = true;
        }
        r
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        if matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            self.broken = true;
        }
        r
    }
}

/// True for the types CSV has no cell syntax for: structs, lists, maps, unions.
fn is_nested(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Struct(_)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
            | DataType::Map(..)
            | DataType::Union(..)
    )
}

/// `schema` as CSV writes it: every nested column a text column (of JSON).
fn csv_schema(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            if is_nested(f.data_type()) {
                Field::new(f.name(), DataType::Utf8, true)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The values of nested column `array` as JSON text, one per row, as `--format jsonl` writes
/// them (a null stays null: an empty cell).
fn json_cells(array: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let field = Field::new("v", array.data_type().clone(), true);
    let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![array.clone()])?;
    let mut buf = Vec::new();
    {
        let mut w = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow::json::writer::LineDelimited>(&mut buf);
        w.write(&batch)?;
        w.finish()?;
    }
    let text = String::from_utf8(buf).map_err(|e| ArrowError::JsonError(e.to_string()))?;
    // Each line is `{"v":<value>}`: the value's text is kept as written (key order, numbers).
    let mut cells: Vec<Option<String>> = Vec::with_capacity(array.len());
    for line in text.lines() {
        let value = line
            .strip_prefix("{\"v\":")
            .and_then(|rest| rest.strip_suffix('}'))
            .ok_or_else(|| ArrowError::JsonError(format!("unexpected JSON line {line:?}")))?;
        cells.push((value != "null").then(|| value.to_string()));
    }
    if cells.len() != array.len() {
        return Err(ArrowError::JsonError(format!(
            "{} JSON cells for {} rows",
            cells.len(),
            array.len()
        )));
    }
    Ok(Arc::new(StringArray::from(cells)))
}

/// `batch` with every nested column as JSON text (`schema`: [`csv_schema`] of its schema).
fn csv_batch(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .map(|c| {
            if is_nested(c.data_type()) {
                json_cells(c)
            } else {
                Ok(c.clone())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

/// CSV (with a header; nested values as JSON text in their cells) or JSON lines (nulls written
/// as `null`) written batch by batch.
enum TextSink<'a> {
    Csv {
        writer: Box<arrow::csv::Writer<&'a mut dyn Write>>,
        schema: SchemaRef,
        wrote: bool,
    },
    Jsonl(arrow::json::Writer<&'a mut dyn Write, arrow::json::writer::LineDelimited>),
}

impl<'a> TextSink<'a> {
    fn new(format: ReadFormat, out: &'a mut dyn Write, schema: &SchemaRef) -> Self {
        match format {
            ReadFormat::Csv => TextSink::Csv {
                writer: Box::new(
                    arrow::csv::WriterBuilder::new()
                        .with_header(true)
                        .build(out),
                ),
                schema: csv_schema(schema),
                wrote: false,
            },
            // Nulls as explicit `null` fields: every line has every column.
            _ => TextSink::Jsonl(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::LineDelimited>(out),
            ),
        }
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        match self {
            TextSink::Csv {
                writer,
                schema,
                wrote,
            } => {
                *wrote = true;
                writer.write(&csv_batch(batch, schema)?)
            }
            TextSink::Jsonl(w) => w.write(batch),
        }
    }

    /// Ends the output (a CSV without rows still has its header) and flushes it.
    fn finish(self) -> Result<(), ArrowError> {
        match self {
            TextSink::Csv {
                mut writer,
                schema,
                wrote,
            } => {
                if !wrote {
                    writer.write(&RecordBatch::new_empty(schema))?;
                }
                (*writer).into_inner().flush()?;
            }
            TextSink::Jsonl(mut w) => {
                w.finish()?;
                w.into_inner().flush()?;
            }
        }
        Ok(())
    }
}

/// Writes `rows` (within `limit`) as CSV or JSON lines to `out`.
async fn write_text_rows(
    format: ReadFormat,
    out: &mut dyn Write,
    schema: &SchemaRef,
    rows: &mut dyn RowSource,
    mut left: Option<usize>,
) -> CliResult<Result<(), ArrowError>> {
    let mut sink = TextSink::new(format, out, schema);
    while let Some(b) = next_within(rows, &mut left).await? {
        if let Err(e) = sink.write(&b) {
            return Ok(Err(e));
        }
    }
    Ok(sink.finish())
}

#[cfg(test)]
fn write_text(
    format: ReadFormat,
    out: &mut dyn Write,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), ArrowError> {
    let mut sink = TextSink::new(format, out, schema);
    for b in batches {
        sink.write(b)?;
    }
    sink.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_jsonl_writes_explicit_nulls_and_full_nanoseconds() {
        use arrow::array::{Int64Array, TimestampNanosecondArray};
        use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
        use std::sync::Arc;
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new(
                "t",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("America/New_York".into())),
                true,
            ),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![None, Some(1)])),
                Arc::new(
                    TimestampNanosecondArray::from(vec![Some(1_700_000_000_123_456_789), None])
                        .with_timezone("America/New_York"),
                ),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        write_text(
            ReadFormat::Jsonl,
            &mut out,
            &schema,
            std::slice::from_ref(&batch),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"n":null,"t":"2023-11-14T17:13:20.123456789-05:00"}"#,
                r#"{"n":1,"t":null}"#
            ]
        );
        let mut out = Vec::new();
        write_text(
            ReadFormat::Csv,
            &mut out,
            &schema,
            std::slice::from_ref(&batch),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("2023-11-14T17:13:20.123456789-05:00"),
            "{text}"
        );
        let cells = cells(&[batch]).unwrap();
        assert_eq!(cells[0][1], "2023-11-14T17:13:20.123456789-05:00");
    }
}
