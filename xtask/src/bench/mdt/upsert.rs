//! The upsert section of `cargo xtask bench mdt`: upserting a batch of rows into tables of
//! growing size, locating keys through the record index against the simple index.
//!
//! For each table size (`--upsert-rows`, default 100k, 1M and 5M rows of the bench's ten-column
//! table, ten partitions) a merge-on-read table with the metadata table is bulk-inserted locally
//! in one commit, then copied; the copy gets a record index (`Table::create_record_index`). In
//! the same run, `--runs` times each, interleaved:
//! - **R**, record index: `Table::write(Upsert)` of `--upsert-batch` rows (default 10k) on the
//!   copy with the record index;
//! - **S**, simple index: the same upsert on the table without it (the simple index reads the
//!   record keys of every latest slice of the touched partitions);
//! - **R′** and **S′**: the key lookup alone (`RecordIndex::locate_global`; the simple index's
//!   `locate` for each partition), without writing anything.
//!
//! Two key patterns: **recent** (the batch updates the last `--upsert-batch` keys, contiguous in
//! key order, the common "update what just arrived" workload) and **spread** (every
//! `rows / batch`-th key across the whole table). Each run writes a new version of the rows.
//! Point lookups: `--lookups` single-key record-index lookups of spread keys, one after another,
//! reported as lookups per second. Every upsert is checked: it updates exactly the batch's rows
//! and inserts none.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use arbor_mdt::record_index::lookup_record_index;
use arbor_mdt::MetadataTable;
use arbor_storage::Storage;
use arbor_table::read::TableReader;
use arbor_table::write::{Index, RecordIndex, SimpleIndex};
use arbor_table::{CreateOptions, Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::record_batch::RecordBatch;

use super::super::data;
use super::super::report::median;
use super::super::{copy_dir, local};
use super::Context;

/// What one table size measured (medians of seconds).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpsertResult {
    /// Rows in the table.
    pub rows: u64,
    /// Rows per upsert.
    pub batch: u64,
    /// Seconds to bulk-insert the table (once).
    pub build: f64,
    /// Seconds to create the record index (once).
    pub create_index: f64,
    /// Recent keys: upsert with the record index, with the simple index.
    pub recent: (f64, f64),
    /// Spread keys: upsert with the record index, with the simple index.
    pub spread: (f64, f64),
    /// Recent keys: lookup alone, record index and simple index.
    pub recent_lookup: (f64, f64),
    /// Spread keys: lookup alone.
    pub spread_lookup: (f64, f64),
    /// Single-key record-index lookups per second.
    pub lookups_per_second: f64,
}

fn options() -> CreateOptions {
    CreateOptions {
        name: "bench_upsert".to_string(),
        table_type: TableType::MergeOnRead,
        record_key_fields: vec![data::KEY.to_string()],
        partition_fields: vec![data::PARTITION.to_string()],
        hive_style_partitioning: false,
        ordering_field: Some(data::ORDERING.to_string()),
        merge_mode: None,
        schema: data::schema(),
        metadata_table: true,
        table_version: Default::default(),
        base_format: Default::default(),
    }
}

/// The key numbers of a batch: `recent` = the last `batch` keys, else every `rows/batch`-th.
fn keys_of(rows: u64, batch: u64, recent: bool) -> Vec<u64> {
    if recent {
        (rows.saturating_sub(batch)..rows).collect()
    } else {
        let step = (rows / batch.max(1)).max(1);
        (0..batch).map(|i| (i * step) % rows.max(1)).collect()
    }
}

fn batches(keys: &[u64], version: u64) -> Result<Vec<RecordBatch>, String> {
    keys.chunks(data::BATCH_ROWS as usize)
        .map(|c| data::batch(c, version))
        .collect()
}

async fn upsert(storage: &Arc<dyn Storage>, keys: &[u64], version: u64) -> Result<f64, String> {
    let table = Table::open(storage.clone())
        .await
        .map_err(|e| format!("open: {e}"))?
        .with_write_options(WriteOptions {
            small_file_limit: 0,
            ..WriteOptions::default()
        });
    let input = batches(keys, version)?;
    let started = Instant::now();
    let r = table
        .write(WriteOperation::Upsert, input)
        .await
        .map_err(|e| format!("upsert: {e}"))?;
    let secs = started.elapsed().as_secs_f64();
    if r.updated != keys.len() as u64 || r.inserted != 0 {
        return Err(format!(
            "upsert of {} existing keys updated {} and inserted {}",
            keys.len(),
            r.updated,
            r.inserted
        ));
    }
    Ok(secs)
}

async fn lookup_rli(storage: &Arc<dyn Storage>, keys: &[u64]) -> Result<f64, String> {
    let reader = Arc::new(
        TableReader::open(storage.clone())
            .await
            .map_err(|e| format!("open: {e}"))?,
    );
    let index = RecordIndex::open(storage.clone(), reader)
        .await
        .map_err(|e| format!("record index: {e}"))?
        .ok_or("the table has no record index")?;
    let names: Vec<String> = keys.iter().map(|&n| data::key(n)).collect();
    let started = Instant::now();
    let found = index
        .locate_global(&names)
        .await
        .map_err(|e| format!("lookup: {e}"))?;
    let secs = started.elapsed().as_secs_f64();
    if found.len() != names.len() {
        return Err(format!(
            "record index found {} of {} keys",
            found.len(),
            names.len()
        ));
    }
    Ok(secs)
}

async fn lookup_simple(storage: &Arc<dyn Storage>, keys: &[u64]) -> Result<f64, String> {
    let reader = Arc::new(
        TableReader::open(storage.clone())
            .await
            .map_err(|e| format!("open: {e}"))?,
    );
    let index = SimpleIndex::new(storage.clone(), reader);
    let mut by_partition: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for &n in keys {
        by_partition
            .entry(data::region(n))
            .or_default()
            .push(data::key(n));
    }
    let started = Instant::now();
    let mut found = 0usize;
    for (partition, names) in &by_partition {
        found += index
            .locate(partition, names)
            .await
            .map_err(|e| format!("lookup: {e}"))?
            .len();
    }
    let secs = started.elapsed().as_secs_f64();
    if found != keys.len() {
        return Err(format!("simple index found {found} of {} keys", keys.len()));
    }
    Ok(secs)
}

async fn point_lookups(storage: &Arc<dyn Storage>, rows: u64, count: u64) -> Result<f64, String> {
    let mdt = MetadataTable::open(storage.clone())
        .await
        .map_err(|e| format!("mdt: {e}"))?
        .ok_or("no metadata table")?;
    let keys = keys_of(rows, count, false);
    let started = Instant::now();
    for &n in &keys {
        let k = data::key(n);
        let found = lookup_record_index(storage.as_ref(), &mdt, &[k.as_str()])
            .await
            .map_err(|e| format!("lookup: {e}"))?;
        if found.len() != 1 {
            return Err(format!("point lookup of {k} found {}", found.len()));
        }
    }
    Ok(keys.len() as f64 / started.elapsed().as_secs_f64().max(1e-9))
}

/// Runs the section for `sizes` (rows) with `batch` rows per upsert and `lookups` point lookups.
pub fn run(ctx: &Context, sizes: &[u64], batch: u64, lookups: u64) -> Result<String, String> {
    let mut results = Vec::new();
    for &rows in sizes {
        let dir = ctx.work.join(format!("upsert-{rows}"));
        let plain_dir = dir.join("simple");
        let indexed_dir = dir.join("rli");
        std::fs::create_dir_all(&plain_dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        eprintln!("bench mdt upsert: building {rows} rows");
        let plain = local(&plain_dir)?;
        let (build, create_index) = ctx.rt.block_on(async {
            let table = Table::create(plain.clone(), options())
                .await
                .map_err(|e| format!("create: {e}"))?;
            let input = data::inserts(rows)?;
            let started = Instant::now();
            table
                .write(WriteOperation::BulkInsert, input)
                .await
                .map_err(|e| format!("bulk insert: {e}"))?;
            let build = started.elapsed().as_secs_f64();
            copy_dir(&plain_dir, &indexed_dir)?;
            let indexed = Table::open(local(&indexed_dir)?)
                .await
                .map_err(|e| format!("open: {e}"))?;
            let started = Instant::now();
            let n = indexed
                .create_record_index()
                .await
                .map_err(|e| format!("create_record_index: {e}"))?;
            if n as u64 != rows {
                return Err(format!("the record index holds {n} keys, not {rows}"));
            }
            Ok::<_, String>((build, started.elapsed().as_secs_f64()))
        })?;
        let indexed = local(&indexed_dir)?;
        let mut r = UpsertResult {
            rows,
            batch,
            build,
            create_index,
            ..UpsertResult::default()
        };
        // Per key pattern (recent, spread): R upsert, S upsert, R lookup, S lookup.
        let mut samples: Vec<[Vec<f64>; 4]> = vec![Default::default(), Default::default()];
        for run in 0..ctx.runs {
            eprintln!(
                "bench mdt upsert: {rows} rows, run {}/{}",
                run + 1,
                ctx.runs
            );
            let version = 1 + run as u64;
            ctx.rt.block_on(async {
                for (recent, s) in [true, false].into_iter().zip(samples.iter_mut()) {
                    let keys = keys_of(rows, batch, recent);
                    let [ru, su, rl, sl] = s;
                    ru.push(upsert(&indexed, &keys, version).await?);
                    su.push(upsert(&plain, &keys, version).await?);
                    rl.push(lookup_rli(&indexed, &keys).await?);
                    sl.push(lookup_simple(&plain, &keys).await?);
                }
                Ok::<_, String>(())
            })?;
        }
        let m = |v: &Vec<f64>| median(v).unwrap_or(0.0);
        if let [[ru, su, rl, sl], [ru2, su2, rl2, sl2]] = samples.as_slice() {
            r.recent = (m(ru), m(su));
            r.recent_lookup = (m(rl), m(sl));
            r.spread = (m(ru2), m(su2));
            r.spread_lookup = (m(rl2), m(sl2));
        }
        r.lookups_per_second = ctx.rt.block_on(point_lookups(&indexed, rows, lookups))?;
        results.push(r);
        // The tables are large; keep the disk free for the next size.
        if ctx.keep_tables {
            continue;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(report(&results))
}

fn report(results: &[UpsertResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n### Upsert: record index (R) against simple index (S), merge-on-read, local FS\n"
    );
    let _ = writeln!(
        out,
        "| rows | batch | keys | R upsert s | S upsert s | S/R | R lookup s | S lookup s | S/R |"
    );
    let _ = writeln!(out, "|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    for r in results {
        for (name, (ru, su), (rl, sl)) in [
            ("recent", r.recent, r.recent_lookup),
            ("spread", r.spread, r.spread_lookup),
        ] {
            let _ = writeln!(
                out,
                "| {} | {} | {name} | {ru:.3} | {su:.3} | {:.1}× | {rl:.3} | {sl:.3} | {:.1}× |",
                r.rows,
                r.batch,
                su / ru.max(1e-9),
                sl / rl.max(1e-9)
            );
        }
    }
    let _ = writeln!(
        out,
        "\n| rows | bulk insert s | create record index s | point lookups/s |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.0} |",
            r.rows, r.build, r.create_index, r.lookups_per_second
        );
    }
    if let (Some(first), Some(last)) = (results.first(), results.last()) {
        if last.rows > first.rows {
            let g = |a: f64, b: f64| a / b.max(1e-9);
            let _ = writeln!(
                out,
                "\nGrowth {}→{} rows ({:.0}×): record-index upsert recent {:.2}×, spread {:.2}×; \
                 simple-index upsert recent {:.2}×, spread {:.2}×; record-index lookup recent \
                 {:.2}×, spread {:.2}×.",
                first.rows,
                last.rows,
                last.rows as f64 / first.rows as f64,
                g(last.recent.0, first.recent.0),
                g(last.spread.0, first.spread.0),
                g(last.recent.1, first.recent.1),
                g(last.spread.1, first.spread.1),
                g(last.recent_lookup.0, first.recent_lookup.0),
                g(last.spread_lookup.0, first.spread_lookup.0),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_keys_of_recent_is_last_batch_and_spread_covers_table() {
        assert_eq!(keys_of(100, 5, true), vec![95, 96, 97, 98, 99]);
        assert_eq!(keys_of(100, 5, false), vec![0, 20, 40, 60, 80]);
        assert_eq!(keys_of(3, 5, true), vec![0, 1, 2]);
    }
}
