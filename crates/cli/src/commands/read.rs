//! `arbor read <table> [--branch B] [--as-of T | --tag NAME | --incremental S [E]]
//! [--read-optimized] [--columns ...] [--where PREDICATE ...] [--explain]
//! [--format table|jsonl|csv|parquet] [--output FILE] [--limit N] [--meta] [--wide]`.

use std::path::PathBuf;

use arbor_branching::tag_reader;
use arbor_format::meta;
use arbor_storage::StorageOptions;
use arbor_table::read::{PartitionFilter, PartitionPruner, ReadOptions, TableReader};
use arbor_timeline::config::TimelineTimezone;
use arbor_timeline::InstantTime;
use arrow::datatypes::SchemaRef;
use clap::Args;

use crate::commands::read_rows::SortedRows;
use crate::context::{branching_error, open_reader_at, open_table_storage, parse_time, selected};
pub use crate::emit::ReadFormat;
use crate::emit::{emit, EmitOptions};
use crate::error::{CliError, CliResult};
use crate::output::print_text;

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
    error, and so is a time after now (unless the table has a commit after it).\n\n\
    --where takes one predicate: FIELD OP VALUE (OP: = == != <> < <= > >=), \
    FIELD [NOT] IN (V1, V2, ...) or FIELD IS [NOT] NULL, keywords in any case. FIELD is a \
    column, a partition field or a field inside struct columns by dot path (rider.rating), \
    optionally \"double-quoted\" or `backquoted`; VALUE is 'single-quoted' or \"double-quoted\" \
    (a doubled quote stands for one: 'O''Brien') or bare (the rest of the text: city=san \
    francisco; quote a value holding the word AND or OR: two predicates take two --where). A \
    malformed predicate is an error giving the character position. Values are \
    typed by the column (integers, floating-point and decimal numbers, booleans, strings, \
    dates, timestamps); a value that does not convert exactly, or an unknown column or field, \
    is an error. Nulls match no comparison (use IS NULL; IS [NOT] NULL takes any column, \
    structs and lists included). On partition fields it works \
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
    arbor read ./trips --where \"city IN ('sf', 'nyc')\" --where \"rider.rating > 4\"\n  \
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
    /// open bound; END defaults to the latest). A bound equal to the requested time of a
    /// completed write (the INSTANT of `arbor timeline`, a branch's base) stands for that
    /// write's completion time: `--incremental <base>` reads the writes after the base (a note
    /// on stderr says so; Spark and the library take completion times only).
    #[arg(long, num_args = 1..=2, value_names = ["START", "END"])]
    pub incremental: Option<Vec<String>>,
    /// Base files only (read-optimized query; for merge-on-read tables it skips log files).
    #[arg(long, conflicts_with = "incremental")]
    pub read_optimized: bool,
    /// The columns to output, comma separated, in this order (meta columns allowed).
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub columns: Vec<String>,
    /// Only rows where PREDICATE holds (repeatable, all must hold): FIELD OP VALUE with OP one
    /// of = == != <> < <= > >=, "FIELD [NOT] IN ('a','b')", "FIELD IS [NOT] NULL". FIELD is
    /// any column, partition field or struct field by dot path (rider.rating); VALUE may be
    /// quoted ('san francisco', 'O''Brien'). Partitions and files that cannot hold a matching
    /// row are not read.
    #[arg(long = "where", value_name = "PREDICATE")]
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
    // Partitions come in path order, so the rows of each are sorted by record key alone.
    let key = meta::RECORD_KEY;
    if schema.field_with_name(key).is_ok() && !columns.iter().any(|c| c == key) {
        columns.push(key.to_string());
    }
    let mut read_options = ReadOptions::new()
        .columns(columns)
        .partition_filters(filters(&reader, args)?);
    let zone = reader.config().timeline_timezone();
    if let Some(bounds) = &args.incremental {
        let start = parse_bound(bounds.first().map(String::as_str).unwrap_or("-"), zone)?;
        let end = parse_bound(bounds.get(1).map(String::as_str).unwrap_or("-"), zone)?;
        // A requested time (what `branch list` and `timeline` show first) stands for its
        // write's completion time; the library, like Java Hudi, takes completion times only.
        let alias = |t: Option<InstantTime>, which: &str| -> Option<InstantTime> {
            let t = t?;
            let bound = reader.view().completion_bound(&t).clone();
            if bound != t {
                errln!(
                    "note: --incremental {which} {t} is the requested time of a write that \
                     completed at {bound}: reading as if {bound} was given (writes completed \
                     after it). Spark's hoodie.datasource.read.begin.instanttime takes \
                     completion times only."
                );
            }
            Some(bound)
        };
        let (start, end) = (alias(start, "start"), alias(end, "end"));
        read_options = read_options.incremental(start, end);
    } else {
        let as_of = match tag_instant {
            Some(t) => Some(t),
            None => match args.as_of.as_deref() {
                Some(t) => {
                    let instant = parse_time("--as-of", t, zone)?;
                    check_as_of(&reader, &args.table, t, &instant)?;
                    if let Some(note) = reader.as_of_clock_note(&instant) {
                        errln!("warning: --as-of {t}: {note}");
                    }
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

/// An `--as-of` before the first completed write of the table would read nothing, one in the
/// future the latest state: a usage error naming the first commit, or the current time and
/// the latest commit ([`TableReader::check_as_of`]; a table without any write reads empty at
/// any time up to now).
fn check_as_of(
    reader: &TableReader,
    table: &str,
    given: &str,
    instant: &InstantTime,
) -> CliResult<()> {
    reader
        .check_as_of(instant)
        .map_err(|e| CliError::at(table, CliError::Usage(format!("--as-of {given}: {e}"))))
}

/// The `--where` filters, each checked against the table: a malformed filter is a usage error
/// quoting the text and giving the position of the offending character; an unknown column or
/// struct field, or a value that does not convert to the column's type, is a usage error naming
/// the `--where` text, the column and the value.
fn filters(reader: &TableReader, args: &ReadArgs) -> CliResult<Vec<PartitionFilter>> {
    args.filters
        .iter()
        .map(|w| {
            let usage = |e: arbor_table::TableError| {
                CliError::at(&args.table, CliError::Usage(format!("--where {w:?}: {e}")))
            };
            // The parse error quotes the text and gives the position; its caret lines are
            // left out of the one-line message.
            let f = PartitionFilter::parse(w).map_err(|e| {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                CliError::at(&args.table, CliError::Usage(format!("--where: {first}")))
            })?;
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
    emit(
        &mut rows,
        &schema,
        &EmitOptions {
            format: args.format,
            output: args.output.clone(),
            limit: args.limit,
            wide: args.wide,
            columns_flag: true,
        },
    )
    .await
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
}
