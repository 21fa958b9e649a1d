//! [`PartitionPruner`]: every filter of a read, applied to partition paths and to rows.

use arbor_format::meta;
use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;
use arrow::array::{BooleanArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::compiled::paths_hold_values;
use super::compiled::Compiled;
use super::compiled::Source;
use super::spec::FilterOp;
use super::spec::PartitionFilter;
use super::value::Kind;
use crate::error::{Result, TableError};

/// Filters compiled against a table's partition fields and read schema; answers whether a
/// partition path may hold matching rows ([`PartitionPruner::matches`]) and which rows match
/// ([`PartitionPruner::filter_rows`]). Filters on columns that are not partition fields prune
/// no partition path (the scan plan prunes files for them by statistics and indexes).
#[derive(Debug, Clone)]
pub struct PartitionPruner {
    fields: Vec<String>,
    hive_style: bool,
    url_encoded: bool,
    filters: Vec<Compiled>,
}

impl PartitionPruner {
    /// Compiles `filters` for the table of `config` with read schema `schema`. A field is a
    /// column of `schema` (its whole name), else a dot path from a column down struct fields
    /// (`rider.rating`), a partition field or `_hoodie_partition_path`. A filter on a field
    /// that is none of these (an unknown column, or a path naming a missing struct field or
    /// going through a non-struct), comparing a field of a type filters cannot compare
    /// (binary, struct, list, ...; `IS [NOT] NULL` takes any type), with the wrong number of
    /// values for its operator, or with a value that does not convert exactly to the field's
    /// type (e.g. `1.005` for a decimal of scale 2) is [`TableError::InvalidInput`] naming
    /// the field and the value.
    pub fn new(
        config: &TableConfig,
        schema: &SchemaRef,
        filters: &[PartitionFilter],
    ) -> Result<Self> {
        let specs = config.partition_fields();
        let dropped_columns = config
            .get(keys::DROP_PARTITION_COLUMNS)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let fields: Vec<String> = specs
            .iter()
            .map(|f| f.split(':').next().unwrap_or_default().trim().to_string())
            .collect();
        let mut compiled = Vec::with_capacity(filters.len());
        for f in filters {
            let invalid = |reason: String| TableError::InvalidInput {
                column: Some(f.field.clone()),
                row: None,
                reason,
            };
            let partition_index = fields.iter().position(|x| x == &f.field);
            let located = locate(schema, &f.field).map_err(invalid)?;
            let null_test = matches!(f.op, FilterOp::IsNull | FilterOp::IsNotNull);
            // `IS [NOT] NULL` takes any type; its kind is never used to compare.
            let kind_of = |l: &Located<'_>| match Kind::of(l.leaf.data_type()) {
                Some(k) => Ok((k, true)),
                None if null_test => Ok((Kind::Str, false)),
                None => Err(invalid(format!(
                    "{} {:?} of type {} cannot be filtered by a comparison (comparisons \
                     take numbers, decimals, booleans, strings, dates and timestamps; \
                     IS [NOT] NULL takes any column)",
                    if l.path.is_empty() { "column" } else { "field" },
                    f.field,
                    l.leaf.data_type()
                ))),
            };
            let (source, kind, column, prunes, path, stats) = if f.field == meta::PARTITION_PATH {
                (
                    Source::PartitionPath,
                    Kind::Str,
                    None,
                    true,
                    Vec::new(),
                    true,
                )
            } else if let Some(index) = partition_index {
                let (kind, stats) = match &located {
                    Some(l) => kind_of(l)?,
                    None => (Kind::Str, true),
                };
                // With the partition columns dropped from the data files, the rows hold no
                // values to filter (the read fills nulls): paths alone decide.
                let located = located.filter(|_| !dropped_columns);
                let prunes = kind != Kind::Timestamp
                    && specs
                        .get(index)
                        .is_some_and(|spec| paths_hold_values(config, spec));
                if located.is_none() && !prunes {
                    return Err(invalid(format!(
                        "the partition paths do not hold the field's values (a key generator \
                         formats them) and the data files have no {:?} column",
                        f.field
                    )));
                }
                let (column, path) = match located {
                    Some(l) => (Some(l.column.name().clone()), l.path),
                    None => (None, Vec::new()),
                };
                (
                    Source::PartitionField(index),
                    kind,
                    column,
                    prunes,
                    path,
                    stats,
                )
            } else {
                let Some(l) = located else {
                    let known: Vec<&str> =
                        schema.fields().iter().map(|x| x.name().as_str()).collect();
                    return Err(invalid(format!(
                        "unknown column {:?} (columns: {})",
                        f.field,
                        known.join(", ")
                    )));
                };
                let (kind, stats) = kind_of(&l)?;
                (
                    Source::Column,
                    kind,
                    Some(l.column.name().clone()),
                    false,
                    l.path,
                    stats,
                )
            };
            let arity_ok = match f.op {
                FilterOp::In | FilterOp::NotIn => !f.values.is_empty(),
                FilterOp::IsNull | FilterOp::IsNotNull => f.values.is_empty(),
                _ => f.values.len() == 1,
            };
            if !arity_ok {
                return Err(invalid(format!(
                    "operator {} takes {} value(s), got {}",
                    f.op.symbol(),
                    match f.op {
                        FilterOp::In | FilterOp::NotIn => "one or more",
                        FilterOp::IsNull | FilterOp::IsNotNull => "no",
                        _ => "one",
                    },
                    f.values.len()
                )));
            }
            let values = f
                .values
                .iter()
                .map(|v| {
                    kind.parse(v).ok_or_else(|| {
                        invalid(format!(
                            "filter value {v:?} of column {:?} is not a {} like the column",
                            f.field,
                            kind.describe()
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            compiled.push(
                Compiled::new(source, f.field.clone(), kind, f.op, values, column, prunes)
                    .at(path, stats),
            );
        }
        Ok(PartitionPruner {
            fields,
            hive_style: config.hive_style_partitioning(),
            url_encoded: config.url_encode_partitioning(),
            filters: compiled,
        })
    }

    /// The compiled filters, in the order given.
    pub(crate) fn compiled(&self) -> &[Compiled] {
        &self.filters
    }

    /// True when there is no filter.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// The values of the partition fields encoded in `partition`, in field order. A path whose
    /// segments do not fit the fields is [`TableError::InvalidInput`] naming it.
    pub fn partition_values(&self, partition: &str) -> Result<Vec<String>> {
        self.split(partition)
            .ok_or_else(|| TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!(
                    "partition path {partition:?} has {} segment(s), the table has {} partition \
                 field(s) [{}], and the path does not say which segments belong to which field",
                    partition.split('/').count(),
                    self.fields.len(),
                    self.fields.join(", ")
                ),
            })
    }

    /// The values of `partition`, or `None` when the path cannot be split unambiguously.
    fn split(&self, partition: &str) -> Option<Vec<String>> {
        let segments: Vec<&str> = partition.split('/').collect();
        let raw: Vec<String> = if self.hive_style && self.fields.len() > 1 {
            self.split_hive(&segments)?
        } else if segments.len() == self.fields.len() {
            self.fields
                .iter()
                .zip(segments)
                .map(|(f, s)| {
                    let prefix = format!("{f}=");
                    match self.hive_style {
                        true => s.strip_prefix(&prefix).unwrap_or(s).to_string(),
                        false => s.to_string(),
                    }
                })
                .collect()
        } else if let [field] = self.fields.as_slice() {
            let prefix = format!("{field}=");
            match self.hive_style {
                true => vec![partition
                    .strip_prefix(&prefix)
                    .unwrap_or(partition)
                    .to_string()],
                false => vec![partition.to_string()],
            }
        } else {
            return None;
        };
        Some(
            raw.into_iter()
                .map(|v| {
                    if self.url_encoded {
                        percent_decode(&v)
                    } else {
                        v
                    }
                })
                .collect(),
        )
    }

    /// Hive-style segments grouped by field: field `i`'s value runs from the segment starting
    /// `name_i=` up to the one starting with the next field's `name=`.
    fn split_hive(&self, segments: &[&str]) -> Option<Vec<String>> {
        let mut values = Vec::with_capacity(self.fields.len());
        let mut rest = segments;
        for (i, field) in self.fields.iter().enumerate() {
            let (first, tail) = rest.split_first()?;
            let value = first.strip_prefix(&format!("{field}="))?;
            let next = self.fields.get(i + 1).map(|n| format!("{n}="));
            let take = match &next {
                Some(n) => tail.iter().position(|s| s.starts_with(n.as_str()))?,
                None => tail.len(),
            };
            let (more, after) = tail.split_at(take);
            let mut v = value.to_string();
            for m in more {
                v.push('/');
                v.push_str(m);
            }
            values.push(v);
            rest = after;
        }
        rest.is_empty().then_some(values)
    }

    /// True when `partition` may hold rows every filter holds for: every filter that prunes
    /// holds for the path's values. A path that cannot be split may match when every filter
    /// on a field is also applied to rows, else it is [`TableError::InvalidInput`].
    pub fn matches(&self, partition: &str) -> Result<bool> {
        if self.filters.is_empty() {
            return Ok(true);
        }
        let needs_values = self
            .filters
            .iter()
            .any(|f| matches!(f.source, Source::PartitionField(_)) && f.prunes);
        let values = if needs_values {
            match self.split(partition) {
                Some(v) => Some(v),
                None if self
                    .filters
                    .iter()
                    .all(|f| f.source == Source::PartitionPath || f.column.is_some()) =>
                {
                    None
                }
                // Not splittable and a filter has no column to fall back on: the error.
                None => Some(self.partition_values(partition)?),
            }
        } else {
            None
        };
        for f in &self.filters {
            let value = match (f.source, &values) {
                (Source::PartitionPath, _) => Some(partition),
                (Source::Column, _) => continue,
                (Source::PartitionField(_), _) if !f.prunes => continue,
                (Source::PartitionField(i), Some(values)) => values.get(i).map(String::as_str),
                (Source::PartitionField(_), None) => continue,
            };
            let Some(value) = value else {
                return Err(TableError::InvalidInput {
                    column: Some(f.name.clone()),
                    row: None,
                    reason: format!("partition path {partition:?} has no value for the field"),
                });
            };
            if !f.matches(value) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The columns [`PartitionPruner::filter_rows`] reads.
    pub fn row_columns(&self) -> Vec<&str> {
        self.filters
            .iter()
            .filter_map(|f| f.column.as_deref())
            .collect()
    }

    /// The rows of `batch` every filter on a column holds for (a filter whose column `batch`
    /// lacks is not applied: `batch` must hold [`PartitionPruner::row_columns`]).
    pub fn filter_rows(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let mut mask: Option<BooleanArray> = None;
        for f in &self.filters {
            let Some(column) = f.column.as_deref().and_then(|c| batch.column_by_name(c)) else {
                continue;
            };
            let m = f.row_mask(column)?;
            mask = Some(match mask {
                None => m,
                Some(prev) => {
                    arrow::compute::and(&prev, &m).map_err(|e| TableError::Unsupported {
                        reason: format!("combining filters: {e}"),
                    })?
                }
            });
        }
        match mask {
            None => Ok(batch),
            Some(m) => arrow::compute::filter_record_batch(&batch, &m).map_err(|e| {
                TableError::Unsupported {
                    reason: format!("applying filters to rows: {e}"),
                }
            }),
        }
    }
}

/// A filter's field in the read schema: its top-level column, the struct fields below it, and
/// the field itself.
struct Located<'a> {
    column: &'a Field,
    path: Vec<String>,
    leaf: &'a Field,
}

/// Where `name` is in `schema`: the column of that whole name, else the longest leading
/// dot-separated run of `name` that is a column, followed down struct fields by the other
/// parts. `Ok(None)` when no column starts `name`; a path that goes through a non-struct or
/// names a missing struct field is an error (the reason).
fn locate<'a>(schema: &'a Schema, name: &str) -> std::result::Result<Option<Located<'a>>, String> {
    if let Ok(column) = schema.field_with_name(name) {
        return Ok(Some(Located {
            column,
            path: Vec::new(),
            leaf: column,
        }));
    }
    let parts: Vec<&str> = name.split('.').collect();
    for split in (1..parts.len()).rev() {
        let (head, tail) = parts.split_at(split);
        let Ok(column) = schema.field_with_name(&head.join(".")) else {
            continue;
        };
        let mut leaf = column;
        let mut walked = head.join(".");
        for part in tail {
            let DataType::Struct(children) = leaf.data_type() else {
                return Err(format!(
                    "{walked:?} is of type {}, not a struct: it has no field {part:?} (dot \
                     paths reach fields of structs only)",
                    leaf.data_type()
                ));
            };
            let Some(child) = children.iter().find(|c| c.name() == part) else {
                let known: Vec<&str> = children.iter().map(|c| c.name().as_str()).collect();
                return Err(format!(
                    "struct {walked:?} has no field {part:?} (fields: {})",
                    known.join(", ")
                ));
            };
            leaf = child;
            walked = format!("{walked}.{part}");
        }
        return Ok(Some(Located {
            column,
            path: tail.iter().map(|p| (*p).to_string()).collect(),
            leaf,
        }));
    }
    Ok(None)
}

/// Decodes `%XX` escapes (invalid escapes stay as they are; invalid UTF-8 is replaced).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
