//! Schemas evolve per branch: a column added on a branch is the branch's alone until the branch
//! is published, and the publication carries the branch's schema to main.

use std::sync::Arc;

use arbor_branching::{create_branch, publish, BranchSource};
use arbor_table::read::TableReader;
use arbor_table::WriteOperation;
use arbor_timeline::config::TableType;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema};

use arbor_testkit_tables::{batch, create, rows};

/// `rows` with a `note` column (one value for every row).
fn with_note(rows: &[arbor_testkit_tables::Row], note: &str) -> RecordBatch {
    let b = batch(rows);
    let mut fields: Vec<Field> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("note", DataType::Utf8, true));
    let mut columns: Vec<ArrayRef> = b.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec![note; rows.len()])));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// `note` of every row of `reader`'s snapshot, by id; `None` when the schema has no `note`.
async fn notes(reader: &TableReader) -> Option<Vec<(String, Option<String>)>> {
    reader.schema().field_with_name("note").ok()?;
    let all = reader.snapshot(None).await.unwrap();
    let b = concat_batches(reader.schema(), &all).unwrap();
    let ids = b.column_by_name("id").unwrap().as_string::<i32>().clone();
    let n = b.column_by_name("note").unwrap().as_string::<i32>().clone();
    let mut out: Vec<(String, Option<String>)> = (0..b.num_rows())
        .map(|i| {
            (
                ids.value(i).to_string(),
                n.is_valid(i).then(|| n.value(i).to_string()),
            )
        })
        .collect();
    out.sort();
    Some(out)
}

#[tokio::test]
async fn test_branch_schema_evolves_alone_and_publication_carries_it_to_main() {
    for tt in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let t = create(tt, true).await;
        t.write(WriteOperation::Upsert, &rows(0..4, 1, "a")).await;
        create_branch(&t.table, "wide", BranchSource::MainHead)
            .await
            .unwrap();
        let b = t.branch("wide").await;
        let r = b
            .write(
                WriteOperation::Upsert,
                vec![with_note(&rows(2..6, 2, "b"), "hi")],
            )
            .await
            .unwrap();
        assert_eq!(r.schema_changes.len(), 1, "{tt:?}");
        // Main's schema and rows are as before; main keeps writing without the column.
        let main = TableReader::open(t.storage.clone()).await.unwrap();
        assert!(
            notes(&main).await.is_none(),
            "{tt:?}: main sees the branch's column"
        );
        t.assert_peer_agrees("branching peer check", "main while the branch evolved")
            .await;
        let branch = arbor_branching::open_reader(t.storage.clone(), Some("wide"))
            .await
            .unwrap();
        let expected: Vec<(String, Option<String>)> = (0..6)
            .map(|i| (format!("k{i:04}"), (i >= 2).then(|| "hi".to_string())))
            .collect();
        assert_eq!(notes(&branch).await.unwrap(), expected, "{tt:?}");
        publish(&b).await.unwrap();
        let main = TableReader::open(t.storage.clone()).await.unwrap();
        assert_eq!(
            notes(&main).await.unwrap(),
            expected,
            "{tt:?}: main after publication"
        );
        // Main now writes with the branch's schema: a write without the column is refused.
        let main_table = arbor_table::Table::open(t.storage.clone()).await.unwrap();
        assert!(main_table.schema().field_with_name("note").is_ok());
        let err = main_table
            .write(WriteOperation::Upsert, vec![batch(&rows(0..1, 3, "c"))])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("note"), "{err}");
        main_table
            .write(
                WriteOperation::Upsert,
                vec![with_note(&rows(0..1, 3, "c"), "m")],
            )
            .await
            .unwrap();
    }
}
