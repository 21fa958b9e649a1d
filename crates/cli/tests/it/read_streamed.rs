//! `arbor read` writes its output partition by partition as the scan arrives: the rows are
//! still sorted by partition path then record key across partitions, file groups and log files
//! (copy-on-write and merge-on-read, several commits), every format agrees, and `--limit` is
//! the head of the full output.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::create_write::{file, ok, read_jsonl, s};

/// 8 cities x 40 keys over three bulk inserts, then upserts (log files on MOR) and deletes.
fn many_partitions_table(dir: &Path, kind: &str) -> PathBuf {
    let table = dir.join("t");
    let cities = ["sf", "la", "nyc", "chi", "sea", "bos", "aus", "den"];
    let line =
        |i: usize, fare: f64| format!("k{:03},{},{fare},{i}\n", (i * 37) % 320, cities[i % 8]);
    for part in 0..3 {
        let mut csv = String::from("id,city,fare,n\n");
        for i in (part * 107)..((part + 1) * 107).min(320) {
            csv.push_str(&line(i, 1.0));
        }
        let input = file(dir, &format!("in{part}.csv"), &csv);
        let mut args = vec!["write", s(&table), s(&input), "--op", "bulk-insert"];
        if part == 0 {
            args.extend([
                "--type",
                kind,
                "--key",
                "id",
                "--partition-by",
                "city",
                "--ordering",
                "n",
            ]);
        }
        ok(&args);
    }
    let mut csv = String::from("id,city,fare,n\n");
    for i in (0..320).step_by(7) {
        csv.push_str(&line(i, 2.0));
    }
    let input = file(dir, "up.csv", &csv);
    ok(&["write", s(&table), s(&input), "--op", "upsert"]);
    table
}

fn key(r: &Value) -> (String, String) {
    (
        r["_hoodie_partition_path"].as_str().unwrap().to_string(),
        r["_hoodie_record_key"].as_str().unwrap().to_string(),
    )
}

#[test]
fn test_read_streamed_output_sorted_across_partitions_in_every_format() {
    for kind in ["cow", "mor"] {
        let dir = tempfile::tempdir().unwrap();
        let table = many_partitions_table(dir.path(), kind);
        let rows = read_jsonl(&table, &["--meta"]);
        assert_eq!(rows.len(), 320, "{kind}");
        let keys: Vec<(String, String)> = rows.iter().map(key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "{kind}: sorted by partition path then key");
        let partitions: std::collections::BTreeSet<&str> =
            keys.iter().map(|k| k.0.as_str()).collect();
        assert_eq!(partitions.len(), 8, "{kind}");
        let updated = rows
            .iter()
            .filter(|r| r["fare"].as_f64() == Some(2.0))
            .count();
        assert_eq!(updated, 46, "{kind}: the upserted rows are merged");

        // --limit is the head of the whole output.
        let head = read_jsonl(&table, &["--meta", "--limit", "45"]);
        assert_eq!(head, rows[..45].to_vec(), "{kind}");

        // CSV and parquet hold the same rows in the same order.
        let csv = ok(&["read", s(&table), "--format", "csv", "--columns", "id,fare"]);
        let csv_ids: Vec<&str> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap())
            .collect();
        let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(csv_ids, ids, "{kind}");
        let out = dir.path().join("out.parquet");
        ok(&[
            "read",
            s(&table),
            "--format",
            "parquet",
            "--output",
            s(&out),
        ]);
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            fs::File::open(&out).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let mut parquet_ids = Vec::new();
        for b in reader {
            let b = b.unwrap();
            let col = b.column_by_name("id").unwrap();
            let col = arrow::compute::cast(col, &arrow::datatypes::DataType::Utf8).unwrap();
            use arrow::array::AsArray;
            parquet_ids.extend(
                col.as_string::<i32>()
                    .iter()
                    .map(|v| v.unwrap().to_string()),
            );
        }
        assert_eq!(parquet_ids, ids, "{kind}");

        // The table format counts every row while showing the first ones.
        let text = ok(&["read", s(&table), "--limit", "3"]);
        assert!(text.contains("3 of 320 rows shown"), "{kind}: {text}");
    }
}
