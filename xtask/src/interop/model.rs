//! The in-memory model of a table: the rows it must hold after each instant, and which instant
//! last wrote each row (what `_hoodie_commit_time` must say, which incremental queries filter on).

use std::collections::BTreeMap;

use super::data::Row;

/// Expected rows by record key (keys never change partition, so the key alone identifies a
/// record), each with the requested time of the instant that last wrote it.
#[derive(Debug, Clone, Default)]
pub struct Model {
    rows: BTreeMap<String, (Row, String)>,
}

impl Model {
    /// Insert or update `rows`, written by `instant`.
    pub fn upsert(&mut self, rows: &[Row], instant: &str) {
        for r in rows {
            self.rows
                .insert(r.id.clone(), (r.clone(), instant.to_string()));
        }
    }

    /// Remove the records with these keys.
    pub fn delete(&mut self, keys: &[String]) {
        for k in keys {
            self.rows.remove(k);
        }
    }

    /// Remove every record of the region (partition value).
    pub fn drop_region(&mut self, region: &str) {
        self.rows.retain(|_, (r, _)| r.region != region);
    }

    /// Remove every record.
    pub fn clear(&mut self) {
        self.rows.clear();
    }

    /// The current row of key `k`.
    pub fn get(&self, k: &str) -> Option<&Row> {
        self.rows.get(k).map(|(r, _)| r)
    }

    /// Every row, by key.
    pub fn rows(&self) -> Vec<Row> {
        self.rows.values().map(|(r, _)| r.clone()).collect()
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.rows.keys().cloned().collect()
    }

    /// The rows last written by one of `instants`: what an incremental query over those
    /// instants returns when read as of the last of them.
    pub fn written_by(&self, instants: &[String]) -> Vec<Row> {
        self.rows
            .values()
            .filter(|(_, w)| instants.contains(w))
            .map(|(r, _)| r.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::data::row;
    use super::*;

    #[test]
    fn test_written_by_after_update_only_latest_writer() {
        let mut m = Model::default();
        m.upsert(&[row(1, 0), row(2, 0)], "t1");
        m.upsert(&[row(2, 1)], "t2");
        assert_eq!(m.written_by(&["t1".into()]), vec![row(1, 0)]);
        assert_eq!(m.written_by(&["t2".into()]), vec![row(2, 1)]);
        m.delete(&[row(2, 1).id]);
        assert!(m.written_by(&["t2".into()]).is_empty());
        assert_eq!(m.rows().len(), 1);
    }

    #[test]
    fn test_drop_region_removes_only_that_region() {
        let mut m = Model::default();
        m.upsert(&(0..9).map(|n| row(n, 0)).collect::<Vec<_>>(), "t1");
        m.drop_region("asia");
        assert_eq!(m.rows().len(), 6);
        assert!(m.rows().iter().all(|r| r.region != "asia"));
    }
}
