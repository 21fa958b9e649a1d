//! [`PartitionFilter`]: a predicate on a column or partition field as a reader is given it
//! (`FIELD OP VALUE`, `FIELD [NOT] IN VALUES`, `FIELD IS [NOT] NULL`); the text form is parsed
//! by [`PartitionFilter::parse`] (grammar in `grammar.rs`).

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
    /// `NOT IN (v1, v2, ...)` (a null matches neither `IN` nor `NOT IN`)
    NotIn,
    /// `IS NULL` (no value)
    IsNull,
    /// `IS NOT NULL` (no value)
    IsNotNull,
}

impl FilterOp {
    /// The operator's symbol (`=`, `!=`, `<`, `<=`, `>`, `>=`, `IN`, `NOT IN`, `IS NULL`,
    /// `IS NOT NULL`).
    pub fn symbol(self) -> &'static str {
        match self {
            FilterOp::Eq => "=",
            FilterOp::Ne => "!=",
            FilterOp::Lt => "<",
            FilterOp::Le => "<=",
            FilterOp::Gt => ">",
            FilterOp::Ge => ">=",
            FilterOp::In => "IN",
            FilterOp::NotIn => "NOT IN",
            FilterOp::IsNull => "IS NULL",
            FilterOp::IsNotNull => "IS NOT NULL",
        }
    }
}

/// A predicate on one field: `field op value`, `field [NOT] IN (values)` or
/// `field IS [NOT] NULL`. The field is any column of the read schema (meta columns included),
/// a dot path to a field inside struct columns (`rider.rating`), a partition field (a name of
/// `hoodie.table.partition.fields`, also when the data files drop it), or
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

    /// `field NOT IN (values)`.
    pub fn is_not_in<I, S>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PartitionFilter {
            field: field.into(),
            op: FilterOp::NotIn,
            values: values.into_iter().map(Into::into).collect(),
        }
    }
}
