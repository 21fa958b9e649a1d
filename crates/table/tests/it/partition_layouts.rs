//! Partition layouts no fixture has. URL encoding
//! (`hoodie.datasource.write.partitionpath.urlencode=true`): partition values are escaped as
//! Java's `PartitionPathEncodeUtils.escapePathName` does, in hive style and not, and insert,
//! upsert and delete keep arbor's and hudi-rs's rows equal. Dropped partition columns
//! (`hoodie.datasource.write.drop.partition.columns=true`): writes are refused by name and
//! change nothing.

use arbor_table::{Table, WriteOperation};
use arbor_timeline::config::TableType;

use super::write_support::{assert_peer_agrees, assert_snapshot, create, Layout, Model, Query};

fn set_property(base: &std::path::Path, key: &str, value: &str) {
    let path = base.join(".hoodie/hoodie.properties");
    let text: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(&format!("{key}=")))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, format!("{text}{key}={value}\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_url_encoded_partition_paths_insert_upsert_delete() {
    for layout in [Layout::Hive, Layout::Plain] {
        let mut t = create(TableType::CopyOnWrite, layout).await;
        set_property(
            &t.base,
            "hoodie.datasource.write.partitionpath.urlencode",
            "true",
        );
        t.table = Table::open(t.storage.clone()).await.unwrap();
        let row = |id: &str, region: &str, ts: i64, name: &str| {
            (id.to_string(), region.to_string(), ts, name.to_string())
        };
        let first = vec![
            row("a", "us/east", 1, "a1"),
            row("b", "x:y=1", 1, "b1"),
            row("c", "plain", 1, "c1"),
            row("d", "100%", 1, "d1"),
        ];
        let mut model = Model::default();
        t.write(WriteOperation::Insert, &first).await;
        model.upsert(&first);
        let listing = t.listing().await;
        let prefix = if layout == Layout::Hive {
            "region="
        } else {
            ""
        };
        for escaped in ["us%2Feast", "x%3Ay%3D1", "plain", "100%25"] {
            let dir = format!("{prefix}{escaped}/");
            assert!(
                listing
                    .iter()
                    .any(|k| k.starts_with(&dir) && k.ends_with(".parquet")),
                "{layout:?}: no base file under {dir}: {listing:?}"
            );
        }
        assert!(
            !listing
                .iter()
                .any(|k| k.starts_with("us/") || k.starts_with("region=us/")),
            "{layout:?}: an unescaped '/' split a partition: {listing:?}"
        );
        let second = vec![row("a", "us/east", 2, "a2"), row("e", "x:y=1", 2, "e2")];
        let r = t.write(WriteOperation::Upsert, &second).await;
        assert_eq!((r.inserted, r.updated), (1, 1), "{layout:?}");
        model.upsert(&second);
        let gone = vec![row("b", "x:y=1", 3, ""), row("d", "100%", 3, "")];
        let r = t.write(WriteOperation::Delete, &gone).await;
        assert_eq!(r.deleted, 2, "{layout:?}");
        model.delete(&gone);
        assert_snapshot(&t, &model, &format!("{layout:?}")).await;
        assert_peer_agrees(&t, &[Query::Snapshot], &format!("url-encoded {layout:?}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_dropped_partition_columns_writes_refused_by_name() {
    let mut t = create(TableType::CopyOnWrite, Layout::Hive).await;
    let rows = super::write_support::rows(0..4, 1, "v");
    t.write(WriteOperation::Insert, &rows).await;
    set_property(
        &t.base,
        "hoodie.datasource.write.drop.partition.columns",
        "true",
    );
    t.table = Table::open(t.storage.clone()).await.unwrap();
    let before = t.listing().await;
    for op in [
        WriteOperation::Insert,
        WriteOperation::Upsert,
        WriteOperation::Delete,
    ] {
        let err = t
            .table
            .write(op, vec![super::write_support::batch(&rows)])
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("hoodie.datasource.write.drop.partition.columns=true"),
            "{op:?}: {err}"
        );
    }
    assert_eq!(
        t.listing().await,
        before,
        "a refused write changed the table"
    );
}
