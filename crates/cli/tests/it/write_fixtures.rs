//! `arbor write` on copies of Spark-written fixture tables whose keys are not in meta columns
//! or whose key generator is not the default one.

use crate::create_write::{fails, file, ok, read_jsonl, s, tree};

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

/// A key generator arbor does not implement (a custom class, the CUSTOM type) is refused by
/// name for writes, before anything is written; reads keep working.
#[test]
fn test_write_refuses_unsupported_key_generator_by_name_reads_still_work() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("unsupported key generators") else {
        return;
    };
    let zip = root.join("sample_table/cow/v8_complexkeygen_hivestyle.zip");
    for (key, value) in [
        ("hoodie.table.keygenerator.class", "com.acme.MyKeyGen"),
        ("hoodie.table.keygenerator.type", "CUSTOM"),
    ] {
        let (tmp, table) = arbor_testkit::unzip_table(&zip);
        let props = table.join(".hoodie/hoodie.properties");
        let text: String = std::fs::read_to_string(&props)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("hoodie.table.keygenerator."))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&props, format!("{text}{key}={value}\n")).unwrap();
        let rows = file(
            tmp.path(),
            "rows.jsonl",
            "{\"id\":1,\"name\":\"Alice\",\"byteField\":10,\"shortField\":300}\n",
        );
        let before = tree(&table);
        for op in ["delete", "upsert", "insert"] {
            let err = fails(&["write", s(&table), s(&rows), "--op", op]);
            assert!(err.contains(value), "{op}: {err}");
            assert!(err.contains("not supported"), "{op}: {err}");
        }
        assert!(
            tree(&table) == before,
            "{value}: a refused write changed the table"
        );
        assert_eq!(read_jsonl(&table, &["--columns", "id"]).len(), 4, "{value}");
    }
}

/// On a table without meta fields the record index and a secondary index are built from the
/// key columns, kept in step by upserts and deletes, and agree with storage.
#[test]
fn test_indexes_on_table_without_meta_fields_follow_upsert_and_delete() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("indexes without meta fields") else {
        return;
    };
    let zip = root.join("sample_table/cow/v8_simplekeygen_hivestyle_no_metafields.zip");
    let (tmp, table) = arbor_testkit::unzip_table(&zip);
    ok(&["mdt", "init", s(&table)]);
    let out = ok(&["index", "create", s(&table), "--record-index"]);
    assert!(out.contains("4 entr"), "{out}");
    let out = ok(&["index", "create", s(&table), "--secondary", "name"]);
    assert!(out.contains("4 entr"), "{out}");
    let up = file(
        tmp.path(),
        "up.jsonl",
        "{\"id\":1,\"byteField\":10,\"name\":\"Alicia\",\"longField\":1234567891}\n",
    );
    let out = ok(&["write", s(&table), s(&up), "--op", "upsert", "--partial"]);
    assert!(out.contains("0 inserted, 1 updated"), "{out}");
    let lookup = |v: &str| ok(&["index", "lookup", s(&table), "--index", "name", v]);
    assert!(
        lookup("Alicia").starts_with("1\tbyteField=10/"),
        "{}",
        lookup("Alicia")
    );
    assert_eq!(lookup("Alice").trim(), "");
    let del = file(
        tmp.path(),
        "del.jsonl",
        "{\"id\":1,\"byteField\":10}\n{\"id\":2,\"byteField\":20}\n",
    );
    let out = ok(&["write", s(&table), s(&del), "--op", "delete"]);
    assert!(out.contains("2 deleted"), "{out}");
    assert_eq!(lookup("Alicia").trim(), "");
    assert!(lookup("Diana").starts_with("4\tbyteField=30/"));
    let out = ok(&["validate", s(&table)]);
    assert!(out.contains("record_index: 2 entr"), "{out}");
    assert!(out.contains("metadata table agrees with storage"), "{out}");
}

/// What `arbor read --format jsonl` prints can be written back: a row read from a Spark table
/// with a map, an array of structs and nested structs, changed in one scalar and upserted as
/// JSON lines, keeps every nested value (JSON objects decode into the table's map column, not
/// into a struct the table then refuses) and its binary value (printed and read back as hex,
/// not stored as the bytes of the hex text).
#[test]
fn test_write_jsonl_read_output_round_trips_nested_columns() {
    let Some(root) = arbor_testkit::fixtures_root_or_skip("jsonl round trip of nested columns")
    else {
        return;
    };
    let zip = root.join("sample_table/cow/v8_simplekeygen_hivestyle_no_metafields.zip");
    let (tmp, table) = arbor_testkit::unzip_table(&zip);
    let before = read_jsonl(
        &table,
        &[
            "--columns",
            "id,name,byteField,binaryField,arrayField,mapField,structField",
        ],
    );
    let mut row = before
        .iter()
        .find(|r| r["id"] == 1)
        .cloned()
        .expect("row 1");
    assert!(row["mapField"].is_object(), "{row}");
    row["name"] = serde_json::json!("Alice2");
    let up = file(tmp.path(), "up.jsonl", &format!("{row}\n"));
    let out = ok(&["write", s(&table), s(&up), "--op", "upsert", "--partial"]);
    assert!(out.contains("0 inserted, 1 updated, 0 deleted"), "{out}");
    let after = read_jsonl(
        &table,
        &[
            "--columns",
            "id,name,byteField,binaryField,arrayField,mapField,structField",
        ],
    );
    let got = after.iter().find(|r| r["id"] == 1).expect("row 1 after");
    assert_eq!(got, &row);
    assert_eq!(after.len(), before.len());
}
