//! The write path encodes base files on several threads (`WriteOptions::parallelism`): the
//! files, their names, their rows and the commit metadata are the same whatever the degree.

use std::num::NonZeroUsize;

use arbor_table::{WriteOperation, WriteOptions};
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::config::TableType;
use arrow::array::Array;
use arrow::util::display::array_value_to_string;

use super::write_support::*;

/// Replaces the random and clock-made parts of names (instants, file ids) by their order of
/// appearance, so that two tables written alike compare equal.
#[derive(Default)]
struct Names {
    instants: Vec<String>,
    file_ids: Vec<String>,
}

impl Names {
    fn instant(&mut self, i: &str) {
        if !self.instants.iter().any(|x| x == i) {
            self.instants.push(i.to_string());
        }
    }

    fn file_id(&mut self, f: &str) {
        if !self.file_ids.iter().any(|x| x == f) {
            self.file_ids.push(f.to_string());
        }
    }

    fn normalize(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (n, i) in self.instants.iter().enumerate() {
            out = out.replace(i.as_str(), &format!("<I{n}>"));
        }
        for (n, f) in self.file_ids.iter().enumerate() {
            out = out.replace(f.as_str(), &format!("<F{n}>"));
        }
        out
    }

    /// [`normalize`](Self::normalize), and the task numbers of the second write's files
    /// (in base and log file write tokens and in sequence numbers) masked: its existing groups are planned in
    /// file-id order, and file ids are random, so which group is task 0 differs from table
    /// to table whatever the parallelism.
    fn normalize_second(&self, s: &str) -> String {
        let mut out = self.normalize(s);
        for task in 0..64 {
            out = out
                .replace(&format!("_{task}-0-{task}_<I1>"), "_<T>_<I1>")
                .replace(&format!("<I1>.log.1_{task}-0-{task}"), "<I1>.log.1_<T>")
                .replace(&format!("<I1>_{task}_"), "<I1>_<T>_");
        }
        out
    }
}

/// Writes a bulk insert into many file groups, then an upsert rewriting several of them,
/// with `parallelism`; returns every commit's write stats (sizes left out: file names are
/// random, so the compressed bytes may differ by a few; the bulk insert's in plan order, the
/// upsert's sorted) and every row of the snapshot with its meta columns, names normalized.
async fn written(table_type: TableType, parallelism: usize) -> (Vec<String>, Vec<String>) {
    let t = create(table_type, Layout::Hive).await;
    let options = WriteOptions {
        // Several file groups per partition (8 in all), more than 4 threads take at once.
        max_file_size: 2_000,
        small_file_limit: 0,
        parallelism: NonZeroUsize::new(parallelism).unwrap(),
        ..WriteOptions::default()
    };
    let table = t.table.clone().with_write_options(options);
    let first = table
        .write(
            WriteOperation::BulkInsert,
            vec![batch(&rows(0..400, 1, "a"))],
        )
        .await
        .unwrap();
    let mut upsert = rows(0..400, 2, "b");
    upsert.retain(|r| r.0.ends_with('3') || r.0.ends_with('7'));
    upsert.extend(rows(400..420, 2, "c"));
    let second = table
        .write(WriteOperation::Upsert, vec![batch(&upsert)])
        .await
        .unwrap();
    assert!(first.files_written >= 8, "{first:?}");
    assert!(second.files_written >= 4, "{second:?}");

    let mut names = Names::default();
    let mut stats: Vec<Vec<String>> = Vec::new();
    let tl = t.timeline().await;
    for inst in tl.completed_writes() {
        stats.push(Vec::new());
        names.instant(&inst.requested_time.to_string());
        let bytes = tl.read(&inst).await.unwrap();
        let InstantContent::Commit(meta) = decode_instant(&inst, &bytes, "x", false).unwrap()
        else {
            panic!("not commit metadata");
        };
        for (p, s) in meta.write_stats() {
            names.file_id(s.file_id.as_deref().unwrap());
            stats.last_mut().unwrap().push(format!(
                "{} {p} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                inst.requested_time,
                s.file_id,
                s.path,
                s.prev_commit,
                s.num_writes,
                s.num_inserts,
                s.num_update_writes,
                s.num_deletes,
            ));
        }
    }
    assert_eq!(stats.len(), 2);
    // The bulk insert's new groups are planned in creation order: compared as written.
    let mut out: Vec<String> = stats[0].iter().map(|s| names.normalize(s)).collect();
    let mut second: Vec<String> = stats[1].iter().map(|s| names.normalize_second(s)).collect();
    second.sort();
    out.extend(second);
    let mut snapshot = Vec::new();
    for b in t.reader().await.snapshot(None).await.unwrap() {
        for row in 0..b.num_rows() {
            let values: Vec<String> = b
                .columns()
                .iter()
                .map(|c| {
                    if c.is_null(row) {
                        "null".to_string()
                    } else {
                        array_value_to_string(c, row).unwrap()
                    }
                })
                .collect();
            snapshot.push(names.normalize_second(&values.join("|")));
        }
    }
    snapshot.sort();
    (out, snapshot)
}

#[tokio::test]
async fn test_write_parallelism_one_and_four_same_files_rows_and_metadata() {
    for table_type in [TableType::CopyOnWrite, TableType::MergeOnRead] {
        let (stats_1, rows_1) = written(table_type, 1).await;
        let (stats_4, rows_4) = written(table_type, 4).await;
        assert_eq!(rows_1.len(), 420, "{table_type:?}");
        assert_eq!(stats_1, stats_4, "{table_type:?}: commit metadata");
        assert_eq!(rows_1, rows_4, "{table_type:?}: rows and meta columns");
    }
}
