//! `arbor read <table> [--branch B] [--as-of T | --tag NAME | --incremental S [E]]
//! [--read-optimized] [--columns ...] [--where FIELD=VALUE ...] [--explain]
//! [--format table|jsonl|csv|parquet] [--output FILE] [--limit N] [--meta] [--wide]`.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use arbor_branching::tag_reader;
use arbor_format::meta;
use arbor_storage::StorageOptions;
use arbor_table::read::{PartitionFilter, PartitionPruner, ReadOptions, TableReader};
use arbor_timeline::config::TimelineTimezone;
use arbor_timeline::InstantTime;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use clap::{Args, ValueEnum};

use crate::commands::read_rows::SortedRows;
use crate::context::{branching_error, open_reader_at, open_table_storage, parse_time, selected};
use crate::error::{CliError, CliResult};
use crate::output::{fit_table, print_text, terminal_width, wide_table};

/// Rows the `table` format shows unless `--limit` says otherwise.
pub const DEFAULT_TABLE_LIMIT: usize = 50;

/// Arguments of `arbor read`.
///
/// Rows come sorted by partition path, then record key. The data columns are shown;
/// `--meta` adds Hudi's `_hoodie_*` meta columns, `--columns` picks any columns in any order.
#[derive(Debug, Args)]
#[command(
    after_help = "Rows come sorted by partition path, then record key. Without --columns \
    the data columns are output; --meta adds Hudi's _hoodie_* meta columns. The table format \
    shows 50 rows unless --limit says otherwise and fits the terminal (COLUMNS, else the \
    terminal's width, else 120): long values are cut with …, columns that do not fit are left \
    out (the last line says so); --wide prints every column and value whole. The other formats \
    output every row and value exactly (jsonl writes nulls as null).\n\n\
    --as-of takes an instant time (yyyyMMddHHmmss[SSS]) or an ISO date/time: 2026-12-01 \
    (midnight), 2026-12-01T10:00:00, 2026-12-01 10:00:00.123, optionally with Z or an offset \
    (+02:00). A time without zone is read on the clock of the table's instant times \
    (hoodie.table.timeline.timezone: UTC for tables arbor creates, else this machine's local \
    time, as Hudi's LOCAL); one with a zone is converted to it. Before the first commit is an \
    error.\n\n\
    --where takes any column: values are typed by the column (integers, floating-point and \
    decimal numbers, booleans, strings, dates, timestamps); a value that does not convert \
    exactly is an error. Nulls match no comparison (use IS NULL). On partition fields it works \
    on every partition layout: hive-style (a=1/b=x), plain, url-encoded values, values holding \
    '/', and partition paths a key generator formats (timestamp-based); partitions are pruned \
    where the path says the value. Files are skipped by the metadata table's record index \
    (key equality) and secondary indexes (equality on an indexed column); the filter is always \
    applied to the rows read. Dates and timestamps compare as such (ISO 8601; a zone-less time \
    is UTC for a column with a time zone). --explain prints what would be skipped and why.\n\n\
    Examples:\n  \
    arbor read ./trips --as-of 20250101120000000\n  \
    arbor read ./trips --as-of 2025-01-01T12:00:00Z\n  \
    arbor read ./trips --branch audit               # a working branch\n  \
    arbor read ./trips --tag v1                     # main as of its tag v1\n  \
    arbor read ./trips --incremental 20250101120000000 --columns _hoodie_commit_time,uuid,fare\n  \
    arbor read ./trips --where city=san_francisco --columns uuid,fare\n  \
    arbor read ./trips --where \"fare >= 20.5\" --where \"rider IS NOT NULL\" --explain\n  \
    arbor read ./trips --format parquet --output trips.parquet"
)]
pub struct ReadArgs {
    /// The table's base path or URL.
    pub table: String,
    /// The branch to read (a working branch, or main).
    #[arg(long, value_name = "B", default_value = crate::context::MAIN)]
    pub branch: String,
    /// Read the table as of this tag of the branch (time travel to the tag's instant; the
    /// tag keeps its files however far the cleaner has moved).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["as_of", "incremental"])]
    pub tag: Option<String>,
    /// Time travel: the table as of this instant (requested time, yyyyMMddHHmmss[SSS]) or ISO
    /// date/time (2026-12-01, 2026-12-01T10:00:00[.123][Z|+02:00]).
    #[arg(long, value_name = "T", conflicts_with = "incremental")]
    pub as_of: Option<String>,
    /// Incremental query: the records written by instants that completed after START and up
    /// to END (completion times, as instant times or ISO dates/times like --as-of; `-` for an
    /// open bound; END defaults to the latest).
    #[arg(long, num_args = 1..=2, value_names = ["START", "END"])]
    pub incremental: Option<Vec<String>>,
    /// Base files only (read-optimized query; for merge-on-read tables it skips log files).
    #[arg(long, conflicts_with = "incremental")]
    pub read_optimized: bool,
    /// The columns to output, comma separated, in this order (meta columns allowed).
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub columns: Vec<String>,
    /// Only rows where FIELD=VALUE (repeatable, all must hold; any column or partition field;
    /// also FIELD!=V, <, <=, >, >=, "FIELD IN A,B", "FIELD IS NULL", "FIELD IS NOT NULL").
    /// Partitions and files that cannot hold a matching row are not read.
    #[arg(long = "where", value_name = "FIELD=VALUE")]
    pub filters: Vec<String>,
    /// Print how many partitions and file slices the read would consider and skip, and why
    /// (partition values, partition stats, column stats, record index, secondary index),
    /// without reading any data file.
    #[arg(long)]
    pub explain: bool,
    /// Also output the `_hoodie_*` meta columns (ignored with --columns).
    #[arg(long)]
    pub meta: bool,
    /// Output format; parquet needs --output.
    #[arg(long, value_enum, default_value_t = ReadFormat::Table)]
    pub format: ReadFormat,
    /// Write to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Output at most N rows. Default: 50 for the table format, all rows for the others.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Table format: print every column and every value whole, however wide.
    #[arg(long)]
    pub wide: bool,
}

/// Output formats of `arbor read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReadFormat {
    /// A human table.
    Table,
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header row.
    Csv,
    /// A parquet file (needs --output).
    Parquet,
}

fn parse_bound(s: &str, zone: TimelineTimezone) -> CliResult<Option<InstantTime>> {
    if s == "-" {
        Ok(None)
    } else {
        parse_time("--incremental", s, zone).map(Some)
    }
}

/// The reader and read options the arguments select, and how many of the options' columns
/// are shown (the others are sort keys).
async fn prepare(
    args: &ReadArgs,
    options: &StorageOptions,
) -> CliResult<(TableReader, ReadOptions, usize)> {
    let storage = open_table_storage(&args.table, options).await?;
    let (reader, tag_instant) = match &args.tag {
        Some(tag) => {
            let (reader, instant) = tag_reader(storage, selected(&args.branch), tag)
                .await
                .map_err(|e| branching_error(&args.table, e))?;
            (reader, Some(instant))
        }
        None => (
            open_reader_at(&args.table, storage, &args.branch).await?,
            None,
        ),
    };
    let schema = reader.schema().clone();
    // The output columns, then the sort keys; only these are read.
    let mut columns: Vec<String> = projection(&schema, args)?
        .iter()
        .filter_map(|&i| schema.fields().get(i).map(|f| f.name().clone()))
        .collect();
    let shown_columns = columns.len();
    for key in [meta::PARTITION_PATH, meta::RECORD_KEY] {
        if schema.field_with_name(key).is_ok() && !columns.iter().any(|c| c == key) {
            columns.push(key.to_string());
        }
    }
    let mut read_options = ReadOptions::new()
        .columns(columns)
        .partition_filters(filters(&reader, args)?);
    let zone = reader.config().timeline_timezone();
    if let Some(bounds) = &args.incremental {
        let start = parse_bound(bounds.first().map(String::as_str).unwrap_or("-"), zone)?;
        let end = parse_bound(bounds.get(1).map(String::as_str).unwrap_or("-"), zone)?;
        read_options = read_options.incremental(start, end);
    } else {
        let as_of = match tag_instant {
            Some(t) => Some(t),
            None => match args.as_of.as_deref() {
                Some(t) => {
                    let instant = parse_time("--as-of", t, zone)?;
                    check_not_before_first(&reader, &args.table, t, &instant)?;
                    Some(instant)
                }
                None => None,
            },
        };
        read_options = read_options
            .as_of_opt(as_of)
            .read_optimized(args.read_optimized);
    }
    Ok((reader, read_options, shown_columns))
}

/// `--explain`: the plan's pruning report, one line per item; no data file is read.
pub async fn explain(args: &ReadArgs, options: &StorageOptions) -> CliResult<String> {
    let (reader, read_options, _) = prepare(args, options).await?;
    let plan = reader
        .plan(&read_options)
        .await
        .map_err(|e| CliError::at(&args.table, e))?;
    let r = plan.pruning();
    let mut out = format!(
        "partitions: {} considered, {} skipped by partition values, {} skipped by partition \
         stats, {} to read\nfile slices: {} considered, {} skipped by column stats, {} skipped \
         by record index, {} skipped by secondary index, {} to read",
        r.partitions_considered,
        r.partitions_skipped_by_values,
        r.partitions_skipped_by_stats,
        r.partitions_read(),
        r.files_considered,
        r.files_skipped_by_column_stats,
        r.files_skipped_by_record_index,
        r.files_skipped_by_secondary_index,
        r.files_read()
    );
    for note in &r.notes {
        out.push_str("\nnote: ");
        out.push_str(note);
    }
    Ok(out)
}

/// The rows the arguments select, sorted and projected, as they are read
/// ([`SortedRows`]: one partition of the scan in memory at a time).
pub async fn query(args: &ReadArgs, options: &StorageOptions) -> CliResult<SortedRows> {
    let at = |e: arbor_table::TableError| CliError::at(&args.table, e);
    let (reader, read_options, shown_columns) = prepare(args, options).await?;
    let plan = reader.plan(&read_options).await.map_err(at)?;
    Ok(SortedRows::new(
        plan,
        reader.storage().clone(),
        shown_columns,
        &args.table,
    ))
}

/// The first `limit` rows (all without a limit) and the number of rows in total.
async fn limited(
    rows: &mut SortedRows,
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
    rows: &mut SortedRows,
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

/// An `--as-of` before the first completed write of the table would read nothing: an error
/// naming the first commit (a table without any write reads empty at any time).
fn check_not_before_first(
    reader: &TableReader,
    table: &str,
    given: &str,
    instant: &InstantTime,
) -> CliResult<()> {
    let writes = reader.view().history().completed_writes();
    let Some(first) = writes.iter().map(|i| &i.requested_time).min() else {
        return Ok(());
    };
    if instant < first {
        return Err(CliError::at(
            table,
            CliError::Usage(format!(
                "--as-of {given} ({instant}) is before the table's first commit {first}; the \
                 table did not exist yet"
            )),
        ));
    }
    Ok(())
}

/// The `--where` filters, each checked against the table: an unknown column, a value that
/// does not convert to the column's type or a malformed filter is a usage error naming the
/// `--where` text, the column and the value.
fn filters(reader: &TableReader, args: &ReadArgs) -> CliResult<Vec<PartitionFilter>> {
    args.filters
        .iter()
        .map(|w| {
            let usage = |e: arbor_table::TableError| {
                CliError::at(&args.table, CliError::Usage(format!("--where {w:?}: {e}")))
            };
            let f = PartitionFilter::parse(w).map_err(usage)?;
            PartitionPruner::new(reader.config(), reader.schema(), std::slice::from_ref(&f))
                .map_err(usage)?;
            Ok(f)
        })
        .collect()
}

/// The indices of the output columns.
fn projection(schema: &SchemaRef, args: &ReadArgs) -> CliResult<Vec<usize>> {
    if args.columns.is_empty() {
        return Ok(schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| args.meta || !meta::is_meta_column(f.name()))
            .map(|(i, _)| i)
            .collect());
    }
    args.columns
        .iter()
        .map(|c| {
            schema.index_of(c.trim()).map_err(|_| {
                let known: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                CliError::at(
                    &args.table,
                    CliError::Usage(format!(
                        "unknown column {c:?} (columns: {})",
                        known.join(", ")
                    )),
                )
            })
        })
        .collect()
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
        line.push_str(&format!(
            "; {} (--wide shows everything, --columns picks columns, --format jsonl is exact)",
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

/// CSV (with a header) or JSON lines (nulls written as `null`) written batch by batch.
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
                schema: schema.clone(),
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
            TextSink::Csv { writer, wrote, .. } => {
                *wrote = true;
                writer.write(batch)
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
    rows: &mut SortedRows,
    mut left: Option<usize>,
) -> CliResult<Result<(), ArrowError>> {
    let schema = rows.schema()?;
    let mut sink = TextSink::new(format, out, &schema);
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

/// Runs the command.
pub async fn run(args: ReadArgs, options: &StorageOptions) -> CliResult<()> {
    if args.format == ReadFormat::Parquet && args.output.is_none() {
        return Err(CliError::Usage(
            "--format parquet needs --output FILE".into(),
        ));
    }
    if args.explain {
        let text = explain(&args, options).await?;
        return print_text(&text);
    }
    let mut rows = query(&args, options).await?;
    let schema = rows.schema()?;
    let limit = args.limit.or(match args.format {
        ReadFormat::Table => Some(DEFAULT_TABLE_LIMIT),
        _ => None,
    });
    let create = |p: &PathBuf| {
        File::create(p).map_err(|e| CliError::Output(format!("{}: {e}", p.display())))
    };
    match (args.format, &args.output) {
        (ReadFormat::Table, None) => {
            let (batches, total) = limited(&mut rows, limit).await?;
            print_rows(&schema, &batches, total, (!args.wide).then(terminal_width))
        }
        (ReadFormat::Table, Some(p)) => {
            // A file gets every column and value whole.
            let (batches, _) = limited(&mut rows, limit).await?;
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
            while let Some(b) = next_within(&mut rows, &mut left).await? {
                w.write(&b).map_err(out)?;
            }
            w.close().map(|_| ()).map_err(out)
        }
        (format, Some(p)) => {
            let mut f = std::io::BufWriter::new(create(p)?);
            write_text_rows(format, &mut f, &mut rows, limit)
                .await?
                .map_err(|e| CliError::Output(format!("{}: {e}", p.display())))
        }
        (format, None) => {
            let mut out = std::io::BufWriter::new(PipeOut {
                inner: std::io::stdout().lock(),
                broken: false,
            });
            let result = write_text_rows(format, &mut out, &mut rows, limit).await?;
            let broken = out.get_ref().broken;
            match result {
                Err(_) if broken => Ok(()),
                Err(e) => Err(CliError::Output(e.to_string())),
                Ok(()) => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_parse_bound_dash_is_open() {
        let utc = TimelineTimezone::Utc;
        assert!(parse_bound("-", utc).unwrap().is_none());
        assert!(parse_bound("20240101000000000", utc).unwrap().is_some());
        assert!(parse_bound("yesterday", utc).is_err());
    }

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
