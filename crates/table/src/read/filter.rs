//! Partition filters: predicates on the values encoded in partition paths, evaluated before
//! any file of a partition is listed or read (partition pruning).
//!
//! A partition path is split on `/` into one segment per partition field (hive style segments
//! are `field=value`); with the table's URL-encoding flag each value is percent-decoded. A
//! table with one partition field whose path has more segments (e.g. `2024/01/31` from a
//! timestamp key generator) takes the whole path as the value. The pseudo field
//! `_hoodie_partition_path` is the raw partition path.
//!
//! Values compare as strings, or typed when the field's column in the read schema is an
//! integer, floating-point, decimal or date column. A partition value that does not parse as
//! the field's type (e.g. `__HIVE_DEFAULT_PARTITION__` for an integer field) matches no filter
//! (SQL's comparison with null).

use std::cmp::Ordering;

use arbor_format::meta;
use arbor_timeline::TableConfig;
use arrow::datatypes::{DataType, SchemaRef};

use crate::error::{Result, TableError};

/// A comparison of a [`PartitionFilter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `IN (v1, v2, ...)`
    In,
}

impl FilterOp {
    /// The operator's symbol (`=`, `!=`, `<`, `<=`, `>`, `>=`, `IN`).
    pub fn symbol(self) -> &'static str {
        match self {
            FilterOp::Eq => "=",
            FilterOp::Ne => "!=",
            FilterOp::Lt => "<",
            FilterOp::Le => "<=",
            FilterOp::Gt => ">",
            FilterOp::Ge => ">=",
            FilterOp::In => "IN",
        }
    }
}

/// A predicate on one partition field: `field op value`, or `field IN (values)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionFilter {
    /// The partition field (a name of `hoodie.table.partition.fields`, or
    /// `_hoodie_partition_path`).
    pub field: String,
    /// The comparison.
    pub op: FilterOp,
    /// The value compared with (one for every operator but `IN`, which takes any number).
    pub values: Vec<String>,
}

impl PartitionFilter {
    /// `field op value`.
    pub fn new(field: impl Into<String>, op: FilterOp, value: impl Into<String>) -> Self {
        PartitionFilter {
            field: field.into(),
            op,
            values: vec![value.into()],
        }
    }

    /// `field = value`.
    pub fn eq(field: impl Into<String>, value: impl Into<String>) -> Self {
        Self::new(field, FilterOp::Eq, value)
    }

    /// `field IN (values)`.
    pub fn is_in<I, S>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PartitionFilter {
            field: field.into(),
            op: FilterOp::In,
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// Parses `FIELD<op>VALUE` with op one of `!=`, `<=`, `>=`, `=`, `<`, `>`, or
    /// `FIELD IN V1,V2,...`. A text without an operator, field or value is
    /// [`TableError::InvalidInput`] quoting it.
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = || TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!(
                "partition filter {text:?} is not FIELD=VALUE (or !=, <, <=, >, >=, FIELD IN A,B)"
            ),
        };
        if let Some((field, values)) = split_in(text) {
            let values: Vec<String> = values
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            if field.is_empty() || values.is_empty() {
                return Err(invalid());
            }
            return Ok(Self::is_in(field, values));
        }
        for (symbol, op) in [
            ("!=", FilterOp::Ne),
            ("<=", FilterOp::Le),
            (">=", FilterOp::Ge),
            ("=", FilterOp::Eq),
            ("<", FilterOp::Lt),
            (">", FilterOp::Gt),
        ] {
            if let Some((field, value)) = text.split_once(symbol) {
                let field = field.trim();
                if field.is_empty() {
                    return Err(invalid());
                }
                return Ok(Self::new(field, op, value.trim()));
            }
        }
        Err(invalid())
    }
}

/// `FIELD IN VALUES` (case-insensitive `IN`, surrounded by spaces; parentheses optional).
fn split_in(text: &str) -> Option<(&str, &str)> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find(" in ")?;
    let field = text.get(..at)?.trim();
    let rest = text.get(at + 4..)?.trim();
    let rest = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or(rest);
    Some((field, rest))
}

/// A typed value of a partition field.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i128),
    Float(f64),
    Date(i32, u32, u32),
    Str(String),
}

impl Value {
    fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
            (Value::Date(a, b, c), Value::Date(x, y, z)) => Some((a, b, c).cmp(&(x, y, z))),
            (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

/// How a field's values are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Date,
    Str,
}

impl Kind {
    fn of(data_type: &DataType) -> Kind {
        match data_type {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => Kind::Int,
            DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _) => Kind::Float,
            DataType::Date32 | DataType::Date64 => Kind::Date,
            _ => Kind::Str,
        }
    }

    fn parse(self, s: &str) -> Option<Value> {
        let s = s.trim();
        match self {
            Kind::Int => s.parse::<i128>().ok().map(Value::Int),
            Kind::Float => s.parse::<f64>().ok().map(Value::Float),
            Kind::Date => {
                let mut parts = s.splitn(3, '-');
                let y = parts.next()?.parse::<i32>().ok()?;
                let m = parts.next()?.parse::<u32>().ok()?;
                let d = parts.next()?.parse::<u32>().ok()?;
                Some(Value::Date(y, m, d))
            }
            Kind::Str => Some(Value::Str(s.to_string())),
        }
    }
}

/// One filter, resolved against the table.
#[derive(Debug, Clone)]
struct Compiled {
    /// Index of the field among the partition fields; `None` for `_hoodie_partition_path`.
    field: Option<usize>,
    name: String,
    kind: Kind,
    op: FilterOp,
    values: Vec<Value>,
}

impl Compiled {
    fn matches(&self, value: &str) -> bool {
        let Some(v) = self.kind.parse(value) else {
            return false;
        };
        let cmp = |x: &Value| v.compare(x);
        match self.op {
            FilterOp::In => self.values.iter().any(|x| cmp(x) == Some(Ordering::Equal)),
            op => self.values.first().and_then(cmp).is_some_and(|o| match op {
                FilterOp::Eq => o == Ordering::Equal,
                FilterOp::Ne => o != Ordering::Equal,
                FilterOp::Lt => o == Ordering::Less,
                FilterOp::Le => o != Ordering::Greater,
                FilterOp::Gt => o == Ordering::Greater,
                FilterOp::Ge => o != Ordering::Less,
                FilterOp::In => false,
            }),
        }
    }
}

/// Partition filters compiled against a table's partition fields and read schema; answers
/// whether a partition path may hold matching rows.
#[derive(Debug, Clone)]
pub struct PartitionPruner {
    fields: Vec<String>,
    hive_style: bool,
    url_encoded: bool,
    filters: Vec<Compiled>,
}

impl PartitionPruner {
    /// Compiles `filters` for the table of `config` with read schema `schema`. A filter on a
    /// field that is not a partition field, a filter without value (or with several values for
    /// an operator other than `IN`), and a value that does not parse as the field's type are
    /// [`TableError::InvalidInput`] naming the field.
    pub fn new(
        config: &TableConfig,
        schema: &SchemaRef,
        filters: &[PartitionFilter],
    ) -> Result<Self> {
        let fields: Vec<String> = config
            .partition_fields()
            .into_iter()
            .map(|f| f.split(':').next().unwrap_or_default().trim().to_string())
            .collect();
        let mut compiled = Vec::with_capacity(filters.len());
        for f in filters {
            let invalid = |reason: String| TableError::InvalidInput {
                column: Some(f.field.clone()),
                row: None,
                reason,
            };
            let (field, kind) = if f.field == meta::PARTITION_PATH {
                (None, Kind::Str)
            } else {
                let index = fields.iter().position(|x| x == &f.field).ok_or_else(|| {
                    invalid(format!(
                        "{:?} is not a partition field (partition fields: [{}])",
                        f.field,
                        fields.join(", ")
                    ))
                })?;
                let kind = schema
                    .field_with_name(&f.field)
                    .map_or(Kind::Str, |x| Kind::of(x.data_type()));
                (Some(index), kind)
            };
            let arity_ok = match f.op {
                FilterOp::In => !f.values.is_empty(),
                _ => f.values.len() == 1,
            };
            if !arity_ok {
                return Err(invalid(format!(
                    "operator {} takes {} value(s), got {}",
                    f.op.symbol(),
                    if f.op == FilterOp::In {
                        "one or more"
                    } else {
                        "one"
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
                            "filter value {v:?} is not a {kind:?} like the field"
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            compiled.push(Compiled {
                field,
                name: f.field.clone(),
                kind,
                op: f.op,
                values,
            });
        }
        Ok(PartitionPruner {
            fields,
            hive_style: config.hive_style_partitioning(),
            url_encoded: config.url_encode_partitioning(),
            filters: compiled,
        })
    }

    /// True when there is no filter.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// The values of the partition fields encoded in `partition`, in field order. A path whose
    /// segments do not fit the fields is [`TableError::InvalidInput`] naming it.
    pub fn partition_values(&self, partition: &str) -> Result<Vec<String>> {
        let segments: Vec<&str> = partition.split('/').collect();
        let raw: Vec<(String, &str)> = if segments.len() == self.fields.len() {
            self.fields
                .iter()
                .zip(segments)
                .map(|(f, s)| (f.clone(), s))
                .collect()
        } else if let [field] = self.fields.as_slice() {
            vec![(field.clone(), partition)]
        } else {
            return Err(TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!(
                    "partition path {partition:?} has {} segment(s), the table has {} partition \
                     field(s) [{}]",
                    partition.split('/').count(),
                    self.fields.len(),
                    self.fields.join(", ")
                ),
            });
        };
        raw.into_iter()
            .map(|(field, segment)| {
                let value = if self.hive_style {
                    let prefix = format!("{field}=");
                    segment.strip_prefix(&prefix).unwrap_or(segment)
                } else {
                    segment
                };
                Ok(if self.url_encoded {
                    percent_decode(value)
                } else {
                    value.to_string()
                })
            })
            .collect()
    }

    /// True when every filter holds for the values of `partition`.
    pub fn matches(&self, partition: &str) -> Result<bool> {
        if self.filters.is_empty() {
            return Ok(true);
        }
        let needs_values = self.filters.iter().any(|f| f.field.is_some());
        let values = if needs_values {
            self.partition_values(partition)?
        } else {
            Vec::new()
        };
        for f in &self.filters {
            let value = match f.field {
                None => Some(partition),
                Some(i) => values.get(i).map(String::as_str),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use arbor_timeline::config::TableType;
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn config(fields: &[&str], hive: bool, urlencode: bool) -> TableConfig {
        TableConfig::builder_v8("t", TableType::CopyOnWrite)
            .record_key_fields(["id"])
            .partition_fields(fields.iter().copied())
            .hive_style_partitioning(hive)
            .url_encode_partitioning(urlencode)
            .build()
            .unwrap()
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("year", DataType::Int32, true),
            Field::new("city", DataType::Utf8, true),
            Field::new("day", DataType::Date32, true),
        ]))
    }

    #[test]
    fn test_parse_operators_and_in() {
        assert_eq!(
            PartitionFilter::parse("year>=2024").unwrap(),
            PartitionFilter::new("year", FilterOp::Ge, "2024")
        );
        assert_eq!(
            PartitionFilter::parse("city!=a b").unwrap(),
            PartitionFilter::new("city", FilterOp::Ne, "a b")
        );
        assert_eq!(
            PartitionFilter::parse("city IN (a, b)").unwrap(),
            PartitionFilter::is_in("city", ["a", "b"])
        );
        assert!(PartitionFilter::parse("nothing").is_err());
        assert!(PartitionFilter::parse("=x").is_err());
    }

    #[test]
    fn test_matches_hive_typed_numeric_compares_numbers() {
        let c = config(&["year", "city"], true, false);
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::new("year", FilterOp::Lt, "10")],
        )
        .unwrap();
        // As strings "9" > "10"; typed, 9 < 10.
        assert!(p.matches("year=9/city=x").unwrap());
        assert!(!p.matches("year=10/city=x").unwrap());
        assert!(!p.matches("year=__HIVE_DEFAULT_PARTITION__/city=x").unwrap());
    }

    #[test]
    fn test_matches_plain_segments_and_in() {
        let c = config(&["year", "city"], false, false);
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::is_in("city", ["sf", "nyc"])],
        )
        .unwrap();
        assert!(p.matches("2024/sf").unwrap());
        assert!(!p.matches("2024/la").unwrap());
        assert!(p.matches("a/b/c").is_err());
    }

    #[test]
    fn test_matches_url_encoded_value_is_decoded() {
        let c = config(&["city"], true, true);
        let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "a/b")]).unwrap();
        assert!(p.matches("city=a%2Fb").unwrap());
        assert!(!p.matches("city=a").unwrap());
    }

    #[test]
    fn test_matches_date_and_single_field_multi_segment_path() {
        let c = config(&["day"], false, false);
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::new("day", FilterOp::Gt, "2024-01-05")],
        )
        .unwrap();
        assert!(p.matches("2024-01-10").unwrap());
        assert!(!p.matches("2024-01-05").unwrap());
        let c = config(&["city"], false, false);
        let p = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "2024/01/31")])
            .unwrap();
        assert!(p.matches("2024/01/31").unwrap());
    }

    #[test]
    fn test_new_unknown_field_or_bad_value_names_field() {
        let c = config(&["year"], true, false);
        let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("city", "x")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("city"), "{err}");
        let err = PartitionPruner::new(&c, &schema(), &[PartitionFilter::eq("year", "abc")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("year"), "{err}");
        let p = PartitionPruner::new(
            &c,
            &schema(),
            &[PartitionFilter::eq("_hoodie_partition_path", "year=1")],
        )
        .unwrap();
        assert!(p.matches("year=1").unwrap());
        assert!(!p.matches("year=2").unwrap());
    }
}
