//! A Spark-written table (a version-9 merge-on-read fixture with a metadata table, copied to a
//! temporary directory) is tagged and cloned at the tag; the clone reads every row the source
//! reads. Skipped, visibly, when `../shared/fixtures` is absent.

use std::path::Path;

use arbor_branching::clone::{list_pins, CloneAt};
use arbor_branching::create_tag;
use arbor_table::read::TableReader;
use arbor_table::Table;
use arbor_testkit::{fixtures_root_or_skip, unzip_table};
use arrow::array::RecordBatch;
use arrow::util::display::array_value_to_string;

use crate::clone_support::{clone_ok, loc, opener, storage_at};

/// Every row of `batches` as one line (all columns, in order), sorted.
fn lines(batches: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for row in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| array_value_to_string(c, row).unwrap())
                .collect();
            out.push(cells.join("|"));
        }
    }
    out.sort();
    out
}

async fn read_lines(location: &Path) -> Vec<String> {
    let reader = TableReader::open(storage_at(location).await).await.unwrap();
    lines(&reader.snapshot(None).await.unwrap())
}

#[tokio::test]
async fn test_clone_of_a_tagged_spark_fixture_reads_equal_to_the_source() {
    let Some(root) = fixtures_root_or_skip("clone of a Spark fixture") else {
        return;
    };
    let zip = root.join("sample_table/mor/avro/v9_txns_simple_meta.zip");
    let (_tmp, base) = unzip_table(&zip);
    let source = storage_at(&base).await;
    let table = Table::open(source).await.unwrap();
    let tag = create_tag(&table, "fx", None, None).await.unwrap();
    let expected = read_lines(&base).await;
    assert!(!expected.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("clone");
    let out = clone_ok(&base, &target, CloneAt::Tag("fx".into())).await;
    assert_eq!(out.instant.as_str(), tag.instant);
    assert!(out.data_files > 0);
    assert_eq!(read_lines(&target).await, expected);
    let pins = list_pins(&opener(), &loc(&base)).await.unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(pins[0].reference, "tag:fx");
}
