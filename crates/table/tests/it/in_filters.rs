//! `IN` filters with long lists: a read returns exactly the rows a model of the table computes
//! (values absent from the table, null rows, strings compared exactly, a partition column, an
//! integer column), with statistics, the record index and a secondary index in play, and the
//! same rows without data skipping.

use std::collections::BTreeSet;
use std::sync::Arc;

use arbor_table::read::{FilterOp, PartitionFilter, PruningReport, ReadOptions, TableReader};
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};

use super::write_support::{create, schema, Layout};

/// One model row: id, region (`None`: null), ts, name (`None`: null).
#[derive(Debug, Clone)]
struct ModelRow {
    id: String,
    region: Option<String>,
    ts: i64,
    name: Option<String>,
}

/// Rows `ids` of the model: regions us/eu with every fifth null, every seventh name null and
/// every eleventh name with a trailing blank (so `"n11"` and `"n11 "` differ).
fn model_rows(ids: std::ops::Range<i64>, tag: &str) -> Vec<ModelRow> {
    ids.map(|i| ModelRow {
        id: format!("k{i:04}"),
        region: match i % 5 {
            4 => None,
            r if r % 2 == 0 => Some("us".into()),
            _ => Some("eu".into()),
        },
        ts: i,
        name: match (i % 7, i % 11) {
            (0, _) => None,
            (_, 0) => Some(format!("{tag}{i} ")),
            _ => Some(format!("{tag}{i}")),
        },
    })
    .collect()
}

fn batch(rows: &[ModelRow]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.id))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.region.as_deref()),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.ts))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.name.as_deref()),
        )),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

/// The ids of the model rows `field IN values` holds for (a null never matches).
fn model_ids(model: &[ModelRow], field: &str, values: &[String]) -> Vec<String> {
    let set: BTreeSet<&str> = values.iter().map(String::as_str).collect();
    let ints: BTreeSet<i64> = values
        .iter()
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    let mut ids: Vec<String> = model
        .iter()
        .filter(|r| match field {
            "id" => set.contains(r.id.as_str()),
            "region" => r.region.as_deref().is_some_and(|v| set.contains(v)),
            "name" => r.name.as_deref().is_some_and(|v| set.contains(v)),
            "ts" => ints.contains(&r.ts),
            other => panic!("no model of {other}"),
        })
        .map(|r| r.id.clone())
        .collect();
    ids.sort();
    ids
}

/// The sorted ids a read returns.
fn ids_of(batches: &[RecordBatch]) -> Vec<String> {
    let mut ids: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let c = b.column_by_name("id").unwrap().as_string::<i32>();
            (0..c.len())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    ids.sort();
    ids
}

/// Reads `field IN values` with and without data skipping; both must be the model's rows.
async fn check(
    reader: &TableReader,
    model: &[ModelRow],
    field: &str,
    values: &[String],
    label: &str,
) -> PruningReport {
    let f = PartitionFilter::is_in(field, values.iter().cloned());
    let want = model_ids(model, field, values);
    let options = ReadOptions::new().filter(f.clone());
    let report = reader.plan(&options).await.unwrap().pruning().clone();
    let got = ids_of(&reader.read(options).await.unwrap());
    assert_eq!(
        got,
        want,
        "{label}: {field} IN ({} values): {report}",
        values.len()
    );
    let plain = reader
        .read(ReadOptions::new().filter(f).data_skipping(false))
        .await
        .unwrap();
    assert_eq!(ids_of(&plain), want, "{label}: {field} without skipping");
    report
}

async fn run(table_type: TableType) {
    let label = format!("{table_type:?}");
    let t = create(table_type, Layout::Hive).await;
    let mut model = model_rows(0..400, "a");
    t.table
        .write(WriteOperation::Insert, vec![batch(&model)])
        .await
        .unwrap();
    t.table.create_stats_indexes(true, true).await.unwrap();
    t.table.create_record_index().await.unwrap();
    t.table
        .create_secondary_index("by_name", "name")
        .await
        .unwrap();
    // Upserts of existing and new keys: keys stay unique, so the indexes are trusted.
    let update = model_rows(300..600, "b");
    t.table
        .write(WriteOperation::Upsert, vec![batch(&update)])
        .await
        .unwrap();
    model.retain(|r| r.ts < 300);
    model.extend(update);
    let reader = t.reader().await;
    assert_eq!(
        ids_of(&reader.read(ReadOptions::new()).await.unwrap()).len(),
        model.len()
    );

    // Record keys: every third key of 0..700 (100 of them absent), and a key no table has.
    let mut keys: Vec<String> = (0..700).step_by(3).map(|i| format!("k{i:04}")).collect();
    keys.push("nope".into());
    check(&reader, &model, "id", &keys, &label).await;

    // More keys than the record index looks up: it says so, and the rows are the same.
    let many: Vec<String> = (0..5000).rev().map(|i| format!("k{i:04}")).collect();
    let r = check(&reader, &model, "id", &many, &label).await;
    assert!(
        r.notes.iter().any(|n| n.contains("record index not used")),
        "{label}: {r}"
    );
    // Absent keys only: column stats (k1000.. is above every file's maximum) read nothing.
    let absent: Vec<String> = (1000..3000).map(|i| format!("k{i:04}")).collect();
    let r = check(&reader, &model, "id", &absent, &label).await;
    assert_eq!(r.files_read(), 0, "{label}: {r}");

    // Names of rows in region us, and names no row has (null names as "a7", other cases,
    // blanks): a few go through the secondary index, which skips the other regions' files;
    // more values than it looks up one by one are filtered without it.
    let short = ["b300", "b305", "b310", "a7", "B300", "b300 ", "zzz"].map(String::from);
    let r = check(&reader, &model, "name", &short, &label).await;
    assert!(r.files_skipped_by_secondary_index >= 2, "{label}: {r}");
    let mut names: Vec<String> = (300..600)
        .filter(|i| i % 5 == 0)
        .map(|i| format!("b{i}"))
        .collect();
    names.extend(["a7", "B300", "b300 ", " b300", "", "zzz"].map(String::from));
    let r = check(&reader, &model, "name", &names, &label).await;
    assert!(
        r.notes.iter().any(|n| n.contains("values to look up")),
        "{label}: {r}"
    );
    // Strings compare exactly: "a11 ", "a22 " and "b319 " hold a trailing blank; "a11", "a22"
    // and "b319" match nothing.
    let exact = ["a11 ", "a11", "b319", "b319 ", "a22"].map(String::from);
    assert_eq!(model_ids(&model, "name", &exact), ["k0011", "k0319"]);
    check(&reader, &model, "name", &exact, &label).await;

    // The partition column: values prune partitions; a null region (the default partition)
    // matches no value, not even the default partition's name.
    let regions = ["us", "mars", "__HIVE_DEFAULT_PARTITION__"].map(String::from);
    let r = check(&reader, &model, "region", &regions, &label).await;
    assert!(r.partitions_skipped_by_values >= 1, "{label}: {r}");
    let regions: Vec<String> = (0..3000)
        .map(|i| format!("r{i}"))
        .chain(["eu".to_string()])
        .collect();
    let r = check(&reader, &model, "region", &regions, &label).await;
    assert_eq!(r.partitions_skipped_by_values, 2, "{label}: {r}");

    // An integer column: typed values (" 7" is 7), absent and negative ones.
    let ts: Vec<String> = (-50..2000)
        .step_by(7)
        .map(|i| i.to_string())
        .chain([" 8".to_string()])
        .collect();
    check(&reader, &model, "ts", &ts, &label).await;

    // The same filter given as `--where` text parses to the same list.
    let text = format!("id IN ({})", keys.join(","));
    let parsed = PartitionFilter::parse(&text).unwrap();
    assert_eq!(parsed.op, FilterOp::In);
    assert_eq!(parsed.values, keys);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_in_with_many_values_cow_returns_the_model_rows() {
    run(TableType::CopyOnWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_in_with_many_values_mor_returns_the_model_rows() {
    run(TableType::MergeOnRead).await;
}
