//! arbor reads every Spark-written fixture with rows identical to what hudi-rs read
//! (`expected/<table>/{snapshot,asof_first,asof_prev,incremental}.json`: `row_count` and
//! `data_sha256`, computed by the repo's canonicaliser `scripts/canonical_rows.py`).

use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_testkit::{
    batches_digest, expected_dir, expected_json, fixture_name, fixture_zips, fixtures_root_or_skip,
    peer_python_or_skip, unzip_table,
};
use arbor_timeline::InstantTime;
use serde_json::Value;

fn t(v: &Value) -> Option<InstantTime> {
    v.as_str().map(|s| InstantTime::parse(s).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_read_every_fixture_matches_peer_reader() {
    let Some(root) = fixtures_root_or_skip("fixture read tests") else {
        return;
    };
    let Some(python) = peer_python_or_skip("fixture read tests need python with pyarrow") else {
        return;
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (_tmp, base) = unzip_table(&zip);
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let reader = match TableReader::open(storage).await {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{name}: open: {e}"));
                continue;
            }
        };
        for query in ["snapshot", "asof_first", "asof_prev", "incremental"] {
            let Some(expected) =
                expected_json(&expected_dir(&root, &zip), &format!("{query}.json"))
            else {
                continue;
            };
            let q = &expected["query"];
            let result = if q["type"] == "incremental" {
                reader
                    .incremental(t(&q["start"]).as_ref(), t(&q["end"]).as_ref())
                    .await
            } else {
                reader.snapshot(t(&q["as_of"]).as_ref()).await
            };
            match result {
                Err(e) => failures.push(format!("{name}/{query}: {e}")),
                Ok(batches) => {
                    let (rows, sha) = batches_digest(&python, reader.schema(), &batches);
                    let want_rows = expected["row_count"].as_u64().unwrap();
                    let want_sha = expected["data_sha256"].as_str().unwrap();
                    if rows != want_rows || sha != want_sha {
                        failures.push(format!(
                            "{name}/{query}: rows {rows} (want {want_rows}), data_sha256 {} (want {})",
                            &sha[..12],
                            &want_sha[..12]
                        ));
                    } else {
                        checked += 1;
                    }
                }
            }
        }
    }
    eprintln!("checked {checked} fixture queries");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
