//! Columns renamed under Spark's schema on read: files written before the rename keep the old
//! column name, and the schema history (`.hoodie/.schema/*.schemacommit`) maps it by column id.
//! arbor reads such files with the latest names (never the old column as null), does not
//! prune by statistics of a renamed column (Java keeps older files' under the old name), and
//! refuses to write, naming the rename.

use std::sync::Arc;

use arbor_table::read::{PartitionFilter, ReadOptions};
use arbor_table::{Table, WriteOperation, WriteOptions};
use arbor_timeline::config::TableType;
use arrow::array::{Array, AsArray, Int64Array, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

use super::write_support::*;

/// A batch with `name` renamed to `label`, as Spark writes after `RENAME COLUMN name TO label`.
fn renamed_batch(rows: &[(&str, &str, i64, &str)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("label", DataType::Utf8, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
        ],
    )
    .unwrap()
}

/// Java's schema history: version 0 names column 4 `name`, version `renamed_at` `label`.
fn history(renamed_at: &str) -> String {
    let fields = |fourth: &str| {
        format!(
            r#"[{{"id":0,"name":"id","optional":false,"type":"string"}},
                {{"id":1,"name":"region","optional":true,"type":"string"}},
                {{"id":2,"name":"ts","optional":true,"type":"long"}},
                {{"id":3,"name":"{fourth}","optional":true,"type":"string"}}]"#
        )
    };
    format!(
        r#"{{"schemas":[{{"max_column_id":3,"version_id":{renamed_at},"type":"record","fields":{}}},
                        {{"max_column_id":3,"version_id":0,"type":"record","fields":{}}}]}}"#,
        fields("label"),
        fields("name")
    )
}

/// (id, label) of every row, sorted.
fn labels(batches: &[RecordBatch]) -> Vec<(String, Option<String>)> {
    let Some(first) = batches.first() else {
        return Vec::new();
    };
    let all = concat_batches(&first.schema(), batches).unwrap();
    let ids = all.column_by_name("id").unwrap().as_string::<i32>();
    let label = all.column_by_name("label").unwrap().as_string::<i32>();
    let mut out: Vec<(String, Option<String>)> = (0..all.num_rows())
        .map(|i| {
            (
                ids.value(i).to_string(),
                label.is_valid(i).then(|| label.value(i).to_string()),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn test_files_written_before_a_rename_read_with_the_new_name() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(table_type, Layout::Plain).await;
        // Before the rename: `name`. After: `label`: a new key in a new partition and (MOR,
        // whose update is a log block on the old base file) an update of k0001.
        t.write(WriteOperation::Insert, &rows(0..4, 1, "before"))
            .await;
        t.table.create_stats_indexes(true, true).await.unwrap();
        // Spark's write after the rename lacks `name` (dropped from the commit's schema).
        let dropping = Table::open(t.storage.clone())
            .await
            .unwrap()
            .with_write_options(WriteOptions {
                drop_columns: vec!["name".into()],
                ..WriteOptions::default()
            });
        let mor = table_type == TableType::MergeOnRead;
        let mut later = vec![("k0009", "ap", 2, "after")];
        if mor {
            later.push(("k0001", "eu", 2, "after"));
        }
        let after = dropping
            .write(WriteOperation::Upsert, vec![renamed_batch(&later)])
            .await
            .unwrap();
        let at = after.instant.to_string();
        t.storage
            .put(
                &format!(".hoodie/.schema/{at}_{at}.schemacommit"),
                Bytes::from(history(&at)),
            )
            .await
            .unwrap();

        let reader = t.reader().await;
        let got = labels(&reader.read(ReadOptions::new()).await.unwrap());
        let label = |v: &str| Some(v.to_string());
        let expected = vec![
            ("k0000".to_string(), label("before0")),
            (
                "k0001".to_string(),
                label(if mor { "after" } else { "before1" }),
            ),
            ("k0002".to_string(), label("before2")),
            ("k0003".to_string(), label("before3")),
            ("k0009".to_string(), label("after")),
        ];
        assert_eq!(
            got, expected,
            "{table_type:?}: rows of files written before the rename keep their values"
        );

        // A filter on the renamed column: every matching row, stats of the column unused.
        let options = ReadOptions::new().filter(PartitionFilter::parse("label < 'b~'").unwrap());
        let plan = reader.plan(&options).await.unwrap();
        assert!(
            plan.pruning()
                .notes
                .iter()
                .any(|n| n.contains("label was renamed")),
            "{table_type:?}: {:?}",
            plan.pruning().notes
        );
        let got = labels(&reader.read(options).await.unwrap());
        let before: Vec<_> = expected
            .iter()
            .filter(|(_, l)| l.as_deref().is_some_and(|l| l < "b~"))
            .cloned()
            .collect();
        assert_eq!(got, before, "{table_type:?}");

        // Writing is refused, naming the rename, and leaves the table as it was.
        let before_listing = t.listing().await;
        let err = t
            .table
            .write(
                WriteOperation::Upsert,
                vec![renamed_batch(&[("k0002", "us", 3, "x")])],
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("name -> label"), "{err}");
        assert_eq!(t.listing().await, before_listing);
    }
}
