//! [`PartitionFilter`]: a predicate on a column or partition field as a reader is given it
//! (`FIELD OP VALUE`, `FIELD IN VALUES`, `FIELD IS [NOT] NULL`).

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
    /// `IS NULL` (no value)
    IsNull,
    /// `IS NOT NULL` (no value)
    IsNotNull,
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
            FilterOp::IsNull => "IS NULL",
            FilterOp::IsNotNull => "IS NOT NULL",
        }
    }
}

/// A predicate on one field: `field op value`, `field IN (values)` or `field IS [NOT] NULL`.
/// The field is any column of the read schema (meta columns included), a partition field
/// (a name of `hoodie.table.partition.fields`, also when the data files drop it), or
/// `_hoodie_partition_path`. The name is kept from its use as a partition filter only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionFilter {
    /// The field filtered.
    pub field: String,
    /// The comparison.
    pub op: FilterOp,
    /// The value compared with (one for the comparisons, one or more for `IN`, none for
    /// `IS NULL` and `IS NOT NULL`).
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

    /// `field IS NULL`.
    pub fn is_null(field: impl Into<String>) -> Self {
        PartitionFilter {
            field: field.into(),
            op: FilterOp::IsNull,
            values: Vec::new(),
        }
    }

    /// `field IS NOT NULL`.
    pub fn is_not_null(field: impl Into<String>) -> Self {
        PartitionFilter {
            field: field.into(),
            op: FilterOp::IsNotNull,
            values: Vec::new(),
        }
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

    /// Parses `FIELD<op>VALUE` with op one of `!=`, `<=`, `>=`, `=`, `<`, `>`,
    /// `FIELD IN V1,V2,...` (parentheses optional) or `FIELD IS [NOT] NULL` (keywords in any
    /// case). A text without an operator, field or value is [`TableError::InvalidInput`]
    /// quoting it.
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = || TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!(
                "filter {text:?} is not FIELD=VALUE (or !=, <, <=, >, >=, \"FIELD IN A,B\", \
                 \"FIELD IS NULL\", \"FIELD IS NOT NULL\")"
            ),
        };
        if let Some((field, op)) = split_is_null(text) {
            if field.is_empty() {
                return Err(invalid());
            }
            return Ok(PartitionFilter {
                field: field.to_string(),
                op,
                values: Vec::new(),
            });
        }
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

/// `FIELD IS NULL` / `FIELD IS NOT NULL` (case-insensitive keywords, any spacing).
fn split_is_null(text: &str) -> Option<(&str, FilterOp)> {
    let trimmed = text.trim_end();
    let lower = trimmed.to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let op = match words.as_slice() {
        [.., "is", "not", "null"] => FilterOp::IsNotNull,
        [.., "is", "null"] => FilterOp::IsNull,
        _ => return None,
    };
    let at = lower.rfind(" is ")?;
    let field = trimmed.get(..at)?.trim();
    // `city=is null` compares with the text "is null".
    if field.contains(['=', '<', '>', '!']) {
        return None;
    }
    Some((field, op))
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
