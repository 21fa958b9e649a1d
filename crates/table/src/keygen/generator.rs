//! [`KeyGenerator`]: the record key and partition path of every row of a batch.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use arbor_timeline::TableConfig;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};

use super::config::KeyGenConfig;
use super::config::KeyGeneratorType;
use super::config::DEFAULT_PARTITION_PATH;
use super::config::EMPTY_RECORD_KEY_PLACEHOLDER;
use super::config::NULL_RECORD_KEY_PLACEHOLDER;
use super::value::borrowed_str;
use super::value::escape_partition_value;
use super::value::push_escaped_partition_value;
use super::value::value_string;
use crate::error::{Result, TableError};

/// The key of one record: its record key and its partition path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HoodieKey {
    /// The record key (`_hoodie_record_key`).
    pub record_key: String,
    /// The relative partition path (`_hoodie_partition_path`, `""` when non-partitioned),
    /// shared by every key of the same partition computed by one call of
    /// [`KeyGenerator::keys_at`] (an input has few partitions and many rows; keys computed on
    /// several threads share one allocation per thread).
    pub partition_path: Arc<str>,
}

/// Computes record keys and partition paths of Arrow rows.
///
/// Guarantees: a validated config (at least one record key field; SIMPLE has exactly one and at
/// most one partition field); every returned record key is non-empty; one key per input row, in
/// order. Errors are [`TableError::InvalidInput`] naming the column and, for bad values, the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGenerator {
    config: KeyGenConfig,
}

impl KeyGenerator {
    /// Validates `config`.
    pub fn new(config: KeyGenConfig) -> Result<KeyGenerator> {
        if config.record_key_fields.is_empty() {
            return Err(TableError::Unsupported {
                reason: "tables without record key fields (auto-generated keys) are not supported"
                    .into(),
            });
        }
        if config.kind == KeyGeneratorType::Timestamp {
            if config.record_key_fields.len() != 1 || config.partition_fields.len() != 1 {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "the TIMESTAMP key generator takes one record key field and one \
                         partition field, not {:?} and {:?}",
                        config.record_key_fields, config.partition_fields
                    ),
                });
            }
            if config.timestamp.is_none() {
                return Err(TableError::Unsupported {
                    reason: "the TIMESTAMP key generator needs its hoodie.keygen.timebased.* \
                             settings"
                        .into(),
                });
            }
        }
        if config.kind == KeyGeneratorType::Simple {
            if config.record_key_fields.len() != 1 {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "the SIMPLE key generator takes one record key field, not {:?}",
                        config.record_key_fields
                    ),
                });
            }
            if config.partition_fields.len() > 1 {
                return Err(TableError::Unsupported {
                    reason: format!(
                        "the SIMPLE key generator takes at most one partition field, not {:?}",
                        config.partition_fields
                    ),
                });
            }
        }
        Ok(KeyGenerator { config })
    }

    /// Shortcut for [`KeyGenConfig::from_table_config`] then [`KeyGenerator::new`].
    pub fn from_table_config(config: &TableConfig) -> Result<KeyGenerator> {
        KeyGenerator::new(KeyGenConfig::from_table_config(config)?)
    }

    /// The configuration.
    pub fn config(&self) -> &KeyGenConfig {
        &self.config
    }

    /// Whether partition paths come from data (false for NON_PARTITION or no partition fields).
    pub fn is_partitioned(&self) -> bool {
        self.config.kind != KeyGeneratorType::NonPartition
            && !self.config.partition_fields.is_empty()
    }

    /// The top-level `Utf8` column of `schema` whose value is every row's record key, when
    /// there is one: the single record key field of a SIMPLE, TIMESTAMP or one-field
    /// NON_PARTITION generator, naming a string column of `schema` (those keys are the
    /// column's values as they are). A writer can then take the keys from the column rather
    /// than copy them. `None` for COMPLEX keys (`field:value`), nested fields and other types.
    pub fn record_key_column<'a>(&'a self, schema: &arrow::datatypes::Schema) -> Option<&'a str> {
        let plain = match self.config.kind {
            KeyGeneratorType::Simple | KeyGeneratorType::Timestamp => true,
            KeyGeneratorType::NonPartition => self.config.record_key_fields.len() == 1,
            KeyGeneratorType::Complex => false,
        };
        let field = self.config.record_key_fields.first().filter(|_| plain)?;
        let column = schema.field_with_name(field).ok()?;
        (column.data_type() == &arrow::datatypes::DataType::Utf8).then_some(field.as_str())
    }

    /// Keys of every row of `batch`; rows in errors are counted from 0.
    pub fn keys(&self, batch: &RecordBatch) -> Result<Vec<HoodieKey>> {
        self.keys_at(batch, 0)
    }

    /// Keys of every row of `batch`, whose first row is row `first_row` of the input (used in
    /// errors).
    pub fn keys_at(&self, batch: &RecordBatch, first_row: usize) -> Result<Vec<HoodieKey>> {
        let record_keys = self.record_keys_at(batch, first_row)?;
        let partition_paths = self.partition_paths_at(batch, first_row)?;
        Ok(record_keys
            .into_iter()
            .zip(partition_paths)
            .map(|(record_key, partition_path)| HoodieKey {
                record_key,
                partition_path,
            })
            .collect())
    }

    /// Keys of every row of `batches` (one input, rows counted from 0 across them), computed
    /// on up to `threads` threads over consecutive runs of rows; the same keys, in the same
    /// order, as [`KeyGenerator::keys`] of the concatenated batches, and on bad input the
    /// error of the first bad row.
    pub fn keys_in_parallel(
        &self,
        batches: &[RecordBatch],
        threads: usize,
    ) -> Result<Vec<HoodieKey>> {
        let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let threads = threads.max(1);
        let per_thread = total.div_ceil(threads).max(1);
        // Runs of rows of about `per_thread`, each a list of zero-copy slices with the input
        // row of its first row.
        let mut runs: Vec<Vec<(usize, RecordBatch)>> = vec![Vec::new()];
        let mut in_run = 0usize;
        let mut first_row = 0usize;
        for batch in batches {
            let mut offset = 0usize;
            while offset < batch.num_rows() {
                if in_run == per_thread {
                    runs.push(Vec::new());
                    in_run = 0;
                }
                let len = (batch.num_rows() - offset).min(per_thread - in_run);
                if let Some(run) = runs.last_mut() {
                    run.push((first_row + offset, batch.slice(offset, len)));
                }
                in_run += len;
                offset += len;
            }
            first_row += batch.num_rows();
        }
        let keys_of_run = |run: &[(usize, RecordBatch)]| -> Result<Vec<HoodieKey>> {
            let mut out = Vec::with_capacity(run.iter().map(|(_, b)| b.num_rows()).sum());
            for (first, b) in run {
                out.extend(self.keys_at(b, *first)?);
            }
            Ok(out)
        };
        if runs.len() <= 1 {
            return runs.first().map_or(Ok(Vec::new()), |r| keys_of_run(r));
        }
        let parts: Vec<Result<Vec<HoodieKey>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .iter()
                .map(|run| scope.spawn(|| keys_of_run(run)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(TableError::Unsupported {
                            reason: "computing record keys stopped unexpectedly (its thread \
                                     panicked)"
                                .into(),
                        })
                    })
                })
                .collect()
        });
        let mut out = Vec::with_capacity(total);
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// Record keys of every row of `batch` (first row numbered `first_row` in errors).
    pub fn record_keys_at(&self, batch: &RecordBatch, first_row: usize) -> Result<Vec<String>> {
        let fields = &self.config.record_key_fields;
        let columns = fields
            .iter()
            .map(|f| resolve_column(batch, f))
            .collect::<Result<Vec<_>>>()?;
        let plain = match self.config.kind {
            KeyGeneratorType::Simple | KeyGeneratorType::Timestamp => true,
            KeyGeneratorType::NonPartition => fields.len() == 1,
            KeyGeneratorType::Complex => false,
        };
        let mut out = Vec::with_capacity(batch.num_rows());
        for row in 0..batch.num_rows() {
            let input_row = first_row + row;
            if plain {
                let (field, column) = match (fields.first(), columns.first()) {
                    (Some(f), Some(c)) => (f, c),
                    _ => return Err(invalid(None, None, "no record key field")),
                };
                match self.value(field, column, row, input_row)? {
                    Some(v) if !v.is_empty() => out.push(v.into_owned()),
                    Some(_) => {
                        return Err(invalid(
                            Some(field),
                            Some(input_row),
                            "record key is an empty string",
                        ))
                    }
                    None => {
                        return Err(invalid(Some(field), Some(input_row), "record key is null"))
                    }
                }
                continue;
            }
            let mut key = String::new();
            let mut any_value = false;
            for (i, (field, column)) in fields.iter().zip(&columns).enumerate() {
                if i > 0 {
                    key.push(',');
                }
                key.push_str(field);
                key.push(':');
                match self.value(field, column, row, input_row)? {
                    None => key.push_str(NULL_RECORD_KEY_PLACEHOLDER),
                    Some(v) if v.is_empty() => key.push_str(EMPTY_RECORD_KEY_PLACEHOLDER),
                    Some(v) => {
                        any_value = true;
                        key.push_str(&v);
                    }
                }
            }
            if !any_value {
                return Err(invalid(
                    fields.first().map(String::as_str),
                    Some(input_row),
                    &format!("all record key fields {fields:?} are null or empty"),
                ));
            }
            out.push(key);
        }
        Ok(out)
    }

    /// Partition paths of every row of `batch` (first row numbered `first_row` in errors); rows
    /// of one partition share one allocation.
    pub fn partition_paths_at(
        &self,
        batch: &RecordBatch,
        first_row: usize,
    ) -> Result<Vec<Arc<str>>> {
        if !self.is_partitioned() {
            let empty: Arc<str> = Arc::from("");
            return Ok(vec![empty; batch.num_rows()]);
        }
        let mut interned = Interner::default();
        let fields = &self.config.partition_fields;
        let columns = fields
            .iter()
            .map(|f| resolve_column(batch, f))
            .collect::<Result<Vec<_>>>()?;
        if let (Some(ts), Some(field), Some(column)) = (
            self.config.timestamp.as_ref(),
            fields.first(),
            columns.first(),
        ) {
            return (0..batch.num_rows())
                .map(|row| {
                    let v = ts
                        .format_value(column.as_ref(), row)
                        .map_err(|reason| invalid(Some(field), Some(first_row + row), &reason))?;
                    let v = if self.config.url_encode {
                        escape_partition_value(&v)
                    } else {
                        v
                    };
                    Ok(if self.config.hive_style {
                        interned.get(&format!("{field}={v}"))
                    } else {
                        interned.get(&v)
                    })
                })
                .collect();
        }
        let mut out = Vec::with_capacity(batch.num_rows());
        let mut path = String::new();
        for row in 0..batch.num_rows() {
            path.clear();
            for (i, (field, column)) in fields.iter().zip(&columns).enumerate() {
                if i > 0 {
                    path.push('/');
                }
                if self.config.hive_style {
                    path.push_str(field);
                    path.push('=');
                }
                match self.value(field, column, row, first_row + row)? {
                    Some(v) if !v.is_empty() => {
                        if self.config.url_encode {
                            push_escaped_partition_value(&mut path, &v);
                        } else {
                            path.push_str(&v);
                        }
                    }
                    _ => path.push_str(DEFAULT_PARTITION_PATH),
                }
            }
            out.push(interned.get(&path));
        }
        Ok(out)
    }

    /// The key string of `column`'s value at `row` (`None` for null): borrowed from a string
    /// column, formatted as Java does for other types.
    fn value<'a>(
        &self,
        field: &str,
        column: &'a ArrayRef,
        row: usize,
        input_row: usize,
    ) -> Result<Option<Cow<'a, str>>> {
        if let Some(v) = borrowed_str(column.as_ref(), row) {
            return Ok(v.map(Cow::Borrowed));
        }
        value_string(column.as_ref(), row, self.config.timestamp_format)
            .map(|v| v.map(Cow::Owned))
            .map_err(|reason| invalid(Some(field), Some(input_row), &reason))
    }
}

fn invalid(column: Option<&str>, row: Option<usize>, reason: &str) -> TableError {
    TableError::InvalidInput {
        column: column.map(str::to_string),
        row,
        reason: reason.to_string(),
    }
}

/// Finds a column by name, or by a dotted path into struct columns. Null struct parents make
/// the leaf null.
fn resolve_column(batch: &RecordBatch, field: &str) -> Result<ArrayRef> {
    if let Some(column) = batch.column_by_name(field) {
        return Ok(std::sync::Arc::clone(column));
    }
    let missing = || invalid(Some(field), None, "no such column in the input");
    let mut parts = field.split('.');
    let first = parts.next().ok_or_else(missing)?;
    let mut current = std::sync::Arc::clone(batch.column_by_name(first).ok_or_else(missing)?);
    for part in parts {
        let parent: &StructArray = current.as_struct_opt().ok_or_else(missing)?;
        let child = parent.column_by_name(part).ok_or_else(missing)?;
        current = match parent.nulls() {
            None => std::sync::Arc::clone(child),
            Some(nulls) => {
                let merged = arrow::buffer::NullBuffer::union(Some(nulls), child.nulls());
                let data = child
                    .to_data()
                    .into_builder()
                    .nulls(merged)
                    .build()
                    .map_err(|e| invalid(Some(field), None, &e.to_string()))?;
                arrow_array::make_array(data)
            }
        };
    }
    Ok(current)
}

/// One shared `Arc<str>` per distinct partition path of an input.
#[derive(Default)]
struct Interner {
    paths: HashMap<String, Arc<str>>,
}

impl Interner {
    /// The shared copy of `path`, made on its first use.
    fn get(&mut self, path: &str) -> Arc<str> {
        if let Some(p) = self.paths.get(path) {
            return p.clone();
        }
        let shared: Arc<str> = Arc::from(path);
        self.paths.insert(path.to_string(), shared.clone());
        shared
    }
}
