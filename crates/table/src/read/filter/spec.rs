//! [`PartitionFilter`]: a predicate on a partition field as a reader is given it (`FIELD OP
//! VALUE`, `FIELD IN VALUES`).

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
