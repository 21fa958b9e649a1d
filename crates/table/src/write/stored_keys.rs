//! [`StoredKeys`]: the record keys of rows already stored in a table, from the
//! `_hoodie_record_key` meta column, or — for a table without meta fields
//! (`hoodie.populate.meta.fields=false`, whose files hold that column all null) — from the data
//! columns through the table's key generator, as Java Hudi's virtual keys do.

use arbor_format::meta;
use arbor_timeline::TableConfig;
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;

use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;

/// Where the record keys of stored rows come from.
///
/// Guarantee: [`StoredKeys::keys`] returns one entry per row of the batch; a stored row whose
/// key cannot be found (no meta column, a null meta value in a table that populates meta
/// fields aside, a key column missing or null in a table without meta fields) is an error
/// naming the file or slice, never a silently skipped row.
#[derive(Debug, Clone)]
pub enum StoredKeys {
    /// The table populates meta fields: keys are `_hoodie_record_key`.
    Meta,
    /// The table has no meta fields: keys come from the data columns.
    Generated(Box<KeyGenerator>),
}

impl StoredKeys {
    /// The key source of a table with `config`. A table without meta fields needs a key
    /// generator arbor implements ([`KeyGenerator::from_table_config`]'s errors otherwise).
    pub fn for_table(config: &TableConfig) -> Result<StoredKeys> {
        if config.populate_meta_fields() {
            Ok(StoredKeys::Meta)
        } else {
            Ok(StoredKeys::Generated(Box::new(
                KeyGenerator::from_table_config(config)?,
            )))
        }
    }

    /// The top-level columns a base file must be read with to find its keys.
    pub fn columns(&self) -> Vec<String> {
        match self {
            StoredKeys::Meta => vec![meta::RECORD_KEY.to_string()],
            StoredKeys::Generated(g) => {
                let mut out: Vec<String> = Vec::new();
                for f in &g.config().record_key_fields {
                    let top = f.split('.').next().unwrap_or(f).to_string();
                    if !out.contains(&top) {
                        out.push(top);
                    }
                }
                out
            }
        }
    }

    /// The record key of every row of `batch`, in order. With meta fields a null
    /// `_hoodie_record_key` is `None` (a row Java never wrote a key for, which callers skip as
    /// they always have); without meta fields every row has a key or the call fails.
    /// `context` names the file or slice in errors.
    pub fn keys(&self, batch: &RecordBatch, context: &str) -> Result<Vec<Option<String>>> {
        match self {
            StoredKeys::Meta => {
                let col = batch.column_by_name(meta::RECORD_KEY).ok_or_else(|| {
                    TableError::Unsupported {
                        reason: format!("{context} has no {} column", meta::RECORD_KEY),
                    }
                })?;
                let col = arrow::compute::cast(col, &DataType::Utf8).map_err(|e| {
                    TableError::Unsupported {
                        reason: format!("record keys of {context}: {e}"),
                    }
                })?;
                let strings = col.as_string::<i32>();
                Ok((0..strings.len())
                    .map(|i| strings.is_valid(i).then(|| strings.value(i).to_string()))
                    .collect())
            }
            StoredKeys::Generated(g) => {
                let keys = g
                    .record_keys_at(batch, 0)
                    .map_err(|e| TableError::Unsupported {
                        reason: format!(
                            "record keys of {context} (a table without meta fields: keys \
                             come from the data columns): {e}"
                        ),
                    })?;
                Ok(keys.into_iter().map(Some).collect())
            }
        }
    }
}
