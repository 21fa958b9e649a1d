//! SQL predicates to arbor filters: which `WHERE` conjuncts the scan can use to prune
//! partitions and skip file slices ([`to_partition_filters`]), and which it applies exactly.
//!
//! A conjunct is translated only when arbor evaluates it exactly as SQL does: a column compared
//! with a non-null literal of the column's own type (integers, decimals of the column's scale,
//! booleans, dates, timestamps, strings without surrounding blanks), `IN` lists of such
//! literals, `BETWEEN`, `IS [NOT] NULL`, and `AND` of those. Floating-point columns are left to
//! DataFusion (NaN orders differently), and so is everything else (casts, functions, `OR`,
//! `NOT IN`); DataFusion applies whatever is not claimed exact itself.

use arbor_table::read::{FilterOp, PartitionFilter};
use arrow::datatypes::{DataType, Schema};
use chrono::{DateTime, Datelike, NaiveDate};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};

/// The arbor filters equivalent to `expr`, or `None` when it cannot be translated exactly.
pub fn to_partition_filters(expr: &Expr, schema: &Schema) -> Option<Vec<PartitionFilter>> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => {
                let mut out = to_partition_filters(left, schema)?;
                out.extend(to_partition_filters(right, schema)?);
                Some(out)
            }
            // `c = a OR c = b` (how DataFusion rewrites a short `IN` list) is `c IN (a, b)`.
            Operator::Or => {
                let (name, values) = equalities(expr, schema)?;
                Some(vec![PartitionFilter::is_in(name, values)])
            }
            _ => comparison(left, *op, right, schema).map(|f| vec![f]),
        },
        Expr::IsNull(inner) => {
            column_of(inner, schema).map(|(name, _)| vec![PartitionFilter::is_null(name)])
        }
        Expr::IsNotNull(inner) => {
            column_of(inner, schema).map(|(name, _)| vec![PartitionFilter::is_not_null(name)])
        }
        Expr::InList(list) if !list.negated && !list.list.is_empty() => {
            let (name, data_type) = column_of(&list.expr, schema)?;
            let values = list
                .list
                .iter()
                .map(|v| literal_text(v, data_type))
                .collect::<Option<Vec<String>>>()?;
            Some(vec![PartitionFilter::is_in(name, values)])
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let (name, data_type) = column_of(expr, schema)?;
            let low = literal_text(low, data_type)?;
            let high = literal_text(high, data_type)?;
            Some(vec![
                PartitionFilter::new(name.clone(), FilterOp::Ge, low),
                PartitionFilter::new(name, FilterOp::Le, high),
            ])
        }
        _ => None,
    }
}

/// `c = v1 OR c = v2 OR ...` (also `IN` lists inside) on one column: the column and the values.
fn equalities(expr: &Expr, schema: &Schema) -> Option<(String, Vec<String>)> {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            let (name, mut values) = equalities(left, schema)?;
            let (other, more) = equalities(right, schema)?;
            if name != other {
                return None;
            }
            values.extend(more);
            Some((name, values))
        }
        _ => match to_partition_filters(expr, schema)?.as_slice() {
            [f] if matches!(f.op, FilterOp::Eq | FilterOp::In) => {
                Some((f.field.clone(), f.values.clone()))
            }
            _ => None,
        },
    }
}

fn comparison(left: &Expr, op: Operator, right: &Expr, schema: &Schema) -> Option<PartitionFilter> {
    let op = match op {
        Operator::Eq => FilterOp::Eq,
        Operator::NotEq => FilterOp::Ne,
        Operator::Lt => FilterOp::Lt,
        Operator::LtEq => FilterOp::Le,
        Operator::Gt => FilterOp::Gt,
        Operator::GtEq => FilterOp::Ge,
        _ => return None,
    };
    if let Some((name, data_type)) = column_of(left, schema) {
        let value = literal_text(right, data_type)?;
        return Some(PartitionFilter::new(name, op, value));
    }
    let (name, data_type) = column_of(right, schema)?;
    let value = literal_text(left, data_type)?;
    // `5 < c` is `c > 5`.
    let flipped = match op {
        FilterOp::Lt => FilterOp::Gt,
        FilterOp::Le => FilterOp::Ge,
        FilterOp::Gt => FilterOp::Lt,
        FilterOp::Ge => FilterOp::Le,
        other => other,
    };
    Some(PartitionFilter::new(name, flipped, value))
}

/// A plain column of `schema` whose type arbor compares as SQL does.
fn column_of<'a>(expr: &Expr, schema: &'a Schema) -> Option<(String, &'a DataType)> {
    let Expr::Column(c) = expr else {
        return None;
    };
    let field = schema.field_with_name(&c.name).ok()?;
    (comparable(field.data_type()) || comparable_decimal(field.data_type()))
        .then(|| (c.name.clone(), field.data_type()))
}

fn comparable(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Boolean
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

/// Decimals of scale 7 or more are left to DataFusion: Hudi writes such partition values in
/// Java's exponent form (`1E-7`), which arbor's partition pruning does not read.
fn comparable_decimal(t: &DataType) -> bool {
    matches!(t, DataType::Decimal128(_, scale) if (0..=6).contains(scale))
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// The text arbor parses back to exactly the literal's value, for a column of `column_type`.
fn literal_text(expr: &Expr, column_type: &DataType) -> Option<String> {
    let Expr::Literal(value, _) = expr else {
        return None;
    };
    if value.is_null() {
        return None;
    }
    let value_type = value.data_type();
    let same_type =
        &value_type == column_type || (is_string(&value_type) && is_string(column_type));
    if !same_type {
        return None;
    }
    match value {
        ScalarValue::Int8(Some(v)) => Some(v.to_string()),
        ScalarValue::Int16(Some(v)) => Some(v.to_string()),
        ScalarValue::Int32(Some(v)) => Some(v.to_string()),
        ScalarValue::Int64(Some(v)) => Some(v.to_string()),
        ScalarValue::UInt8(Some(v)) => Some(v.to_string()),
        ScalarValue::UInt16(Some(v)) => Some(v.to_string()),
        ScalarValue::UInt32(Some(v)) => Some(v.to_string()),
        ScalarValue::UInt64(Some(v)) => Some(v.to_string()),
        ScalarValue::Boolean(Some(v)) => Some(v.to_string()),
        ScalarValue::Decimal128(Some(v), _, scale) => decimal_text(*v, *scale),
        ScalarValue::Date32(Some(days)) => {
            let d = NaiveDate::from_num_days_from_ce_opt(719_163_i32.checked_add(*days)?)?;
            (1..=9999)
                .contains(&d.year())
                .then(|| d.format("%Y-%m-%d").to_string())
        }
        ScalarValue::TimestampSecond(Some(v), tz) => {
            timestamp_text(i128::from(*v) * 1_000_000_000, tz.is_some())
        }
        ScalarValue::TimestampMillisecond(Some(v), tz) => {
            timestamp_text(i128::from(*v) * 1_000_000, tz.is_some())
        }
        ScalarValue::TimestampMicrosecond(Some(v), tz) => {
            timestamp_text(i128::from(*v) * 1_000, tz.is_some())
        }
        ScalarValue::TimestampNanosecond(Some(v), tz) => {
            timestamp_text(i128::from(*v), tz.is_some())
        }
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => {
            // arbor compares strings exactly, blanks included.
            Some(s.clone())
        }
        _ => None,
    }
}

/// `v` unscaled at `scale` as a decimal number (`-12.50`).
fn decimal_text(v: i128, scale: i8) -> Option<String> {
    let scale = u32::try_from(scale).ok()?;
    let divisor = 10_i128.checked_pow(scale)?;
    let whole = (v / divisor).unsigned_abs();
    let frac = (v % divisor).unsigned_abs();
    let sign = if v < 0 { "-" } else { "" };
    Some(if scale == 0 {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{frac:0width$}", width = scale as usize)
    })
}

/// Nanoseconds since the epoch as ISO 8601 with nine fractional digits, `Z` for a zoned column
/// (the value is UTC) and none for a naive one (the value is the wall clock).
fn timestamp_text(nanos: i128, zoned: bool) -> Option<String> {
    let secs = i64::try_from(nanos.div_euclid(1_000_000_000)).ok()?;
    let sub = u32::try_from(nanos.rem_euclid(1_000_000_000)).ok()?;
    let t = DateTime::from_timestamp(secs, sub)?.naive_utc();
    if !(1..=9999).contains(&t.year()) {
        return None;
    }
    let text = t.format("%Y-%m-%dT%H:%M:%S%.9f").to_string();
    Some(if zoned { format!("{text}Z") } else { text })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use arrow::datatypes::{Field, TimeUnit};
    use datafusion::logical_expr::{col, lit};
    use std::sync::Arc;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("city", DataType::Utf8, true),
            Field::new("fare", DataType::Float64, true),
            Field::new("amount", DataType::Decimal128(12, 2), true),
            Field::new("day", DataType::Date32, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC"))),
                true,
            ),
            Field::new(
                "naive",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
        ])
    }

    fn one(expr: Expr) -> Option<Vec<String>> {
        to_partition_filters(&expr, &schema()).map(|fs| {
            fs.iter()
                .map(|f| format!("{} {} {}", f.field, f.op.symbol(), f.values.join(",")))
                .collect()
        })
    }

    #[test]
    fn test_comparisons_of_a_column_with_its_own_type_translate() {
        assert_eq!(one(col("id").eq(lit(5_i64))).unwrap(), ["id = 5"]);
        assert_eq!(one(lit(5_i64).lt(col("id"))).unwrap(), ["id > 5"]);
        assert_eq!(one(col("city").eq(lit("sf"))).unwrap(), ["city = sf"]);
        assert_eq!(
            one(col("city").in_list(vec![lit("a"), lit("b, c")], false)).unwrap(),
            ["city IN a,b, c"]
        );
        assert_eq!(
            one(col("id").eq(lit(1_i64)).or(col("id").eq(lit(2_i64)))).unwrap(),
            ["id IN 1,2"]
        );
        assert_eq!(
            one(col("id").between(lit(1_i64), lit(9_i64))).unwrap(),
            ["id >= 1", "id <= 9"]
        );
        assert_eq!(
            one(col("id").gt(lit(1_i64)).and(col("city").is_null())).unwrap(),
            ["id > 1", "city IS NULL "]
        );
        let dec = Expr::Literal(ScalarValue::Decimal128(Some(-1250), 12, 2), None);
        assert_eq!(one(col("amount").lt_eq(dec)).unwrap(), ["amount <= -12.50"]);
        let day = Expr::Literal(ScalarValue::Date32(Some(19_000)), None);
        assert_eq!(one(col("day").eq(day)).unwrap(), ["day = 2022-01-08"]);
        let ts = Expr::Literal(
            ScalarValue::TimestampMicrosecond(Some(1_500_000), Some(Arc::from("UTC"))),
            None,
        );
        assert_eq!(
            one(col("ts").gt_eq(ts)).unwrap(),
            ["ts >= 1970-01-01T00:00:01.500000000Z"]
        );
        let naive = Expr::Literal(ScalarValue::TimestampMicrosecond(Some(-1), None), None);
        assert_eq!(
            one(col("naive").lt(naive)).unwrap(),
            ["naive < 1969-12-31T23:59:59.999999000"]
        );
    }

    #[test]
    fn test_what_arbor_would_not_evaluate_as_sql_stays_with_datafusion() {
        // Floats (NaN orders differently), other types, nulls; blanks are kept.
        assert!(one(col("fare").gt(lit(1.5_f64))).is_none());
        assert!(one(col("id").eq(lit(5_i32))).is_none());
        assert_eq!(one(col("city").eq(lit(" sf"))).unwrap(), ["city =  sf"]);
        assert!(one(col("city").eq(Expr::Literal(ScalarValue::Utf8(None), None))).is_none());
        assert!(one(col("city").in_list(vec![lit("a")], true)).is_none());
        assert!(one(col("id").eq(lit(1_i64)).or(col("city").eq(lit("a")))).is_none());
        assert!(one(col("id").eq(lit(1_i64)).or(col("id").gt(lit(2_i64)))).is_none());
        assert!(one(col("id").eq(lit(1_i64)).and(col("fare").gt(lit(1.0_f64)))).is_none());
        assert!(one(col("missing").eq(lit(1_i64))).is_none());
        let dec = Expr::Literal(ScalarValue::Decimal128(Some(1), 12, 3), None);
        assert!(one(col("amount").eq(dec)).is_none());
    }

    #[test]
    fn test_decimal_and_timestamp_texts() {
        assert_eq!(decimal_text(5, 2).unwrap(), "0.05");
        assert_eq!(decimal_text(-5, 2).unwrap(), "-0.05");
        assert_eq!(decimal_text(123, 0).unwrap(), "123");
        assert!(timestamp_text(i128::from(i64::MAX) * 1000, true).is_none());
    }
}
