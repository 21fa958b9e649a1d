//! What `arbor write` reports under event-time ordering: only records that replaced a stored
//! one count as updated (an older or null ordering value keeps the stored record), on
//! copy-on-write and merge-on-read.

use crate::create_write::{file, id_fares, ok, read_jsonl, s, trips_table};

#[test]
fn test_write_upsert_counts_only_replacements_with_null_and_older_ordering() {
    for kind in ["cow", "mor"] {
        let dir = tempfile::tempdir().unwrap();
        let table = trips_table(dir.path(), kind);
        // a: n=0 < 1 (kept); b: n=5 > 2 (replaces); c: n null (kept, a null never wins).
        let input = file(
            dir.path(),
            "up.csv",
            "id,city,fare,n\na,sf,9.0,0\nb,sf,8.0,5\nc,nyc,7.0,\n",
        );
        let out = ok(&["write", s(&table), s(&input), "--op", "upsert"]);
        assert!(
            out.contains("0 inserted, 1 updated, 0 deleted, 2 kept (stored record newer)"),
            "{kind}: {out}"
        );
        assert_eq!(
            id_fares(&read_jsonl(&table, &[])),
            [("a".into(), 1.5), ("b".into(), 8.0), ("c".into(), 3.5)],
            "{kind}"
        );
    }
}
