//! The `_hoodie_*` meta columns (spec 4.2).

/// Instant that wrote the record.
pub const COMMIT_TIME: &str = "_hoodie_commit_time";
/// `<instant>_<task>_<index>`, unique per record write.
pub const COMMIT_SEQNO: &str = "_hoodie_commit_seqno";
/// The record key.
pub const RECORD_KEY: &str = "_hoodie_record_key";
/// The relative partition path (`""` when non-partitioned).
pub const PARTITION_PATH: &str = "_hoodie_partition_path";
/// The base file name (the file id in log records).
pub const FILE_NAME: &str = "_hoodie_file_name";
/// Optional operation column.
pub const OPERATION: &str = "_hoodie_operation";
/// Optional soft-delete marker column.
pub const IS_DELETED: &str = "_hoodie_is_deleted";

/// The five meta columns, in file order.
pub const META_COLUMNS: [&str; 5] = [
    COMMIT_TIME,
    COMMIT_SEQNO,
    RECORD_KEY,
    PARTITION_PATH,
    FILE_NAME,
];

/// True for one of the five meta columns (or the optional operation column).
pub fn is_meta_column(name: &str) -> bool {
    META_COLUMNS.contains(&name) || name == OPERATION
}
