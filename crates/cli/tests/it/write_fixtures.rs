//! `arbor write` on copies of Spark-written fixture tables whose keys are not in meta columns
//! or whose key generator is not the default one.

use crate::create_write::{file, ok, read_jsonl, s};

/// Regression: on `v8_simplekeygen_hivestyle_no_metafields` (`hoodie.populate.meta.fields=
/// false`) a delete of three of its four rows once printed "0 deleted", committed, and kept all
/// four rows.
#[test]
fn test_write_delete_on_table_without_meta_fields_deletes_the_rows() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("delete on a table without meta fields")
    else {
        return;
    };
    let zip = root.join("sample_table/cow/v8_simplekeygen_hivestyle_no_metafields.zip");
    let (tmp, table) = arbor_testkit::unzip_table(&zip);
    let rows = file(
        tmp.path(),
        "del.jsonl",
        "{\"id\":1,\"byteField\":10}\n{\"id\":2,\"byteField\":20}\n{\"id\":3,\"byteField\":10}\n",
    );
    let out = ok(&["write", s(&table), s(&rows), "--op", "delete"]);
    assert!(out.contains("0 inserted, 0 updated, 3 deleted"), "{out}");
    let left = read_jsonl(&table, &["--columns", "id,name"]);
    assert_eq!(left, [serde_json::json!({"id": 4, "name": "Diana"})]);

    // An upsert of a stored key updates it (no duplicate); a delete of an absent key deletes
    // nothing and says so in its counts.
    let up = file(
        tmp.path(),
        "up.jsonl",
        "{\"id\":4,\"byteField\":30,\"name\":\"Diane\",\"longField\":987654322}\n",
    );
    let out = ok(&["write", s(&table), s(&up), "--op", "upsert", "--partial"]);
    assert!(out.contains("0 inserted, 1 updated, 0 deleted"), "{out}");
    let absent = file(tmp.path(), "absent.jsonl", "{\"id\":99,\"byteField\":30}\n");
    let out = ok(&["write", s(&table), s(&absent), "--op", "delete"]);
    assert!(out.contains("0 inserted, 0 updated, 0 deleted"), "{out}");
    let left = read_jsonl(&table, &["--columns", "id,name"]);
    assert_eq!(left, [serde_json::json!({"id": 4, "name": "Diane"})]);
}
