//! Whether a `column_stats` / `partition_stats` record proves that no row of its file (or
//! partition) satisfies a filter.
//!
//! A record proves it only when its values convert exactly to the column's kind: the value
//! type (`valueType`, Hudi 1.1) or the wrapper says the unit (timestamps: millis, micros or
//! nanos; decimals: the scale), else nothing is proven. Bounds need not be tight
//! (`isTightBound` false for file stats): any range holding every value is used as such.
//! Strings compare in code-point order, which equals Java's UTF-16 order except between
//! supplementary characters and `U+E000..U+FFFF`: a bound or value holding a character at or
//! above `U+D800` proves nothing. Floating-point bounds that are NaN prove nothing.

use std::cmp::Ordering;

use arbor_format::hfile::mdt_column_stats::value_type;
use arbor_format::hfile::mdt_column_stats::ColumnStatsRecord;
use arbor_mdt::column_stats::{StatValue, ValueTypeInfo};

use crate::read::filter::compiled::Compiled;
use crate::read::filter::value::{Kind, Value};
use crate::read::filter::FilterOp;

/// True when the rows `record` describes may hold a value `f` holds for; `false` only when
/// the record proves none does. A missing record proves nothing.
pub(crate) fn may_match(record: Option<&ColumnStatsRecord>, f: &Compiled) -> bool {
    let Some(r) = record else {
        return true;
    };
    if r.is_deleted {
        return true;
    }
    if r.value_count == Some(0) {
        return false;
    }
    let all_null = matches!((r.value_count, r.null_count), (Some(v), Some(n)) if v == n);
    match f.op {
        FilterOp::IsNull => return r.null_count != Some(0),
        FilterOp::IsNotNull => return !all_null,
        _ => {}
    }
    if all_null {
        // A comparison with null is never true.
        return false;
    }
    let vt = r.value_type.as_ref();
    let (Some(min), Some(max)) = (
        r.min_value
            .as_ref()
            .and_then(|v| bound(v, vt, f.kind, Side::Min)),
        r.max_value
            .as_ref()
            .and_then(|v| bound(v, vt, f.kind, Side::Max)),
    ) else {
        return true;
    };
    let values_order_like_java = match f.in_set() {
        Some(set) => set.orders_like_java(),
        None => f.values().iter().all(Value::orders_like_java),
    };
    if !values_order_like_java || !min.orders_like_java() || !max.orders_like_java() {
        return true;
    }
    // Each test is false only when the ordering is known and rules the value out.
    let may = |a: &Value, b: &Value, ok: fn(Ordering) -> bool| a.compare(b).is_none_or(ok);
    let within = |v: &Value| {
        may(&min, v, |o| o != Ordering::Greater) && may(&max, v, |o| o != Ordering::Less)
    };
    let Some(first) = f.values().first() else {
        return true;
    };
    match f.op {
        FilterOp::Eq => within(first),
        // A binary search in the sorted list, not a pass over it per file.
        FilterOp::In => match f.in_set() {
            Some(set) => set.any_within(&min, &max),
            None => f.values().iter().any(within),
        },
        FilterOp::Ne => {
            !(min.compare(first) == Some(Ordering::Equal)
                && max.compare(first) == Some(Ordering::Equal))
        }
        FilterOp::Lt => may(&min, first, |o| o == Ordering::Less),
        FilterOp::Le => may(&min, first, |o| o != Ordering::Greater),
        FilterOp::Gt => may(&max, first, |o| o == Ordering::Greater),
        FilterOp::Ge => may(&max, first, |o| o != Ordering::Less),
        // Conservative: bounds rarely prove every value listed.
        FilterOp::NotIn | FilterOp::IsNull | FilterOp::IsNotNull => true,
    }
}

/// Which bound a value is: a decimal bound of a finer scale is rounded outwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Min,
    Max,
}

/// The stats value `v` as a value of `kind`, `None` when it does not convert exactly.
pub(crate) fn bound(
    v: &StatValue,
    vt: Option<&ValueTypeInfo>,
    kind: Kind,
    side: Side,
) -> Option<Value> {
    let ordinal = vt.map(|t| t.type_ordinal);
    match (kind, v) {
        (Kind::Int, StatValue::Int(i)) => Some(Value::Int(i128::from(*i))),
        (Kind::Int, StatValue::Long(i)) => Some(Value::Int(i128::from(*i))),
        (Kind::Float, StatValue::Float(x)) => Some(Value::Float(f64::from(*x))),
        (Kind::Float, StatValue::Double(x)) => Some(Value::Float(*x)),
        (Kind::Bool, StatValue::Boolean(b)) => Some(Value::Bool(*b)),
        (Kind::Str, StatValue::String(s)) => Some(Value::Str(s.clone())),
        (Kind::Date, StatValue::Date(d) | StatValue::LocalDate(d)) => {
            Some(Value::Date(i64::from(*d)))
        }
        (Kind::Date, StatValue::Int(d)) if ordinal == Some(value_type::DATE) => {
            Some(Value::Date(i64::from(*d)))
        }
        (Kind::Timestamp, StatValue::TimestampMicros(us)) => {
            Some(Value::Timestamp(i128::from(*us) * 1_000))
        }
        (Kind::Timestamp, StatValue::Long(t)) => {
            let per = match ordinal? {
                value_type::TIMESTAMP_MILLIS | value_type::LOCAL_TIMESTAMP_MILLIS => 1_000_000,
                value_type::TIMESTAMP_MICROS | value_type::LOCAL_TIMESTAMP_MICROS => 1_000,
                value_type::TIMESTAMP_NANOS | value_type::LOCAL_TIMESTAMP_NANOS => 1,
                _ => return None,
            };
            Some(Value::Timestamp(i128::from(*t) * per))
        }
        (Kind::Decimal(scale), StatValue::Decimal { unscaled, scale: s }) => {
            let s = i8::try_from(*s).ok()?;
            rescale(signed_be(unscaled)?, s, scale, side).map(Value::Decimal)
        }
        (Kind::Decimal(scale), StatValue::Bytes(bytes)) if ordinal == Some(value_type::DECIMAL) => {
            let s = vt?
                .additional_info
                .as_deref()?
                .split(',')
                .nth(1)?
                .trim()
                .parse::<i8>()
                .ok()?;
            rescale(signed_be(bytes)?, s, scale, side).map(Value::Decimal)
        }
        _ => None,
    }
}

/// A big-endian two's-complement integer of at most 16 bytes.
fn signed_be(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut full = [if negative { 0xFF } else { 0 }; 16];
    let start = 16 - bytes.len();
    full.get_mut(start..)?.copy_from_slice(bytes);
    Some(i128::from_be_bytes(full))
}

/// `unscaled` at scale `from` as an unscaled value at scale `to`; a finer value is rounded
/// outwards (down for a minimum, up for a maximum), so the bound still holds.
fn rescale(unscaled: i128, from: i8, to: i8, side: Side) -> Option<i128> {
    let diff = i32::from(to) - i32::from(from);
    if diff >= 0 {
        let factor = 10i128.checked_pow(u32::try_from(diff).ok()?)?;
        return unscaled.checked_mul(factor);
    }
    let factor = 10i128.checked_pow(u32::try_from(-diff).ok()?)?;
    let q = unscaled.div_euclid(factor);
    let exact = unscaled.rem_euclid(factor) == 0;
    Some(match side {
        Side::Min => q,
        Side::Max if exact => q,
        Side::Max => q.checked_add(1)?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::read::filter::compiled::Source;

    fn rec(min: StatValue, max: StatValue, count: i64, nulls: i64) -> ColumnStatsRecord {
        ColumnStatsRecord {
            file_name: Some("f.parquet".into()),
            column_name: Some("c".into()),
            min_value: Some(min),
            max_value: Some(max),
            value_count: Some(count),
            null_count: Some(nulls),
            total_size: None,
            total_uncompressed_size: None,
            is_deleted: false,
            is_tight_bound: false,
            value_type: None,
        }
    }

    fn filter(kind: Kind, op: FilterOp, values: &[&str]) -> Compiled {
        Compiled::new(
            Source::Column,
            "c".into(),
            kind,
            op,
            values.iter().map(|v| kind.parse(v).unwrap()).collect(),
            Some("c".into()),
            false,
        )
    }

    #[test]
    fn test_ranges_prove_no_match_only_outside() {
        let r = rec(StatValue::Long(10), StatValue::Long(20), 5, 1);
        let yes = |op, v: &str| may_match(Some(&r), &filter(Kind::Int, op, &[v]));
        assert!(yes(FilterOp::Eq, "10") && yes(FilterOp::Eq, "20") && !yes(FilterOp::Eq, "21"));
        assert!(!yes(FilterOp::Lt, "10") && yes(FilterOp::Lt, "11") && yes(FilterOp::Le, "10"));
        assert!(!yes(FilterOp::Gt, "20") && yes(FilterOp::Ge, "20") && !yes(FilterOp::Ge, "21"));
        assert!(yes(FilterOp::Ne, "10"));
        let same = rec(StatValue::Int(7), StatValue::Int(7), 3, 0);
        assert!(!may_match(
            Some(&same),
            &filter(Kind::Int, FilterOp::Ne, &["7"])
        ));
        assert!(!may_match(
            Some(&same),
            &filter(Kind::Int, FilterOp::IsNull, &[])
        ));
        assert!(may_match(
            Some(&r),
            &filter(Kind::Int, FilterOp::IsNull, &[])
        ));
        // NOT IN is never pruned by bounds (conservative), not even when they pin the value.
        assert!(may_match(
            Some(&same),
            &filter(Kind::Int, FilterOp::NotIn, &["7"])
        ));
        assert!(may_match(
            Some(&r),
            &filter(Kind::Int, FilterOp::NotIn, &["10", "15", "20"])
        ));
        assert!(
            may_match(None, &filter(Kind::Int, FilterOp::Eq, &["99"])),
            "no stats"
        );
        let all_null = ColumnStatsRecord {
            min_value: None,
            max_value: None,
            ..rec(StatValue::Int(0), StatValue::Int(0), 4, 4)
        };
        assert!(!may_match(
            Some(&all_null),
            &filter(Kind::Int, FilterOp::Eq, &["0"])
        ));
        assert!(!may_match(
            Some(&all_null),
            &filter(Kind::Int, FilterOp::IsNotNull, &[])
        ));
        assert!(may_match(
            Some(&all_null),
            &filter(Kind::Int, FilterOp::IsNull, &[])
        ));
        let in_list = filter(Kind::Int, FilterOp::In, &["1", "15"]);
        assert!(may_match(Some(&r), &in_list));
        assert!(!may_match(
            Some(&r),
            &filter(Kind::Int, FilterOp::In, &["1", "25"])
        ));
    }

    #[test]
    fn test_long_in_lists_rule_out_by_range_like_a_pass_over_them() {
        let texts: Vec<String> = (0..5000).map(|i| (i * 10).to_string()).collect();
        let list: Vec<&str> = texts.iter().map(String::as_str).collect();
        let f = filter(Kind::Int, FilterOp::In, &list);
        for (min, max) in [
            (1, 9),
            (1, 10),
            (49_990, 60_000),
            (49_991, 60_000),
            (-5, -1),
        ] {
            let r = rec(StatValue::Long(min), StatValue::Long(max), 5, 0);
            let linear = (0..5000).any(|i| (min..=max).contains(&(i * 10)));
            assert_eq!(may_match(Some(&r), &f), linear, "[{min}, {max}]");
        }
        let words: Vec<String> = (0..3000).map(|i| format!("w{i:05}")).collect();
        let mut list: Vec<&str> = words.iter().map(String::as_str).collect();
        let s = rec(
            StatValue::String("a".into()),
            StatValue::String("c".into()),
            2,
            0,
        );
        assert!(!may_match(
            Some(&s),
            &filter(Kind::Str, FilterOp::In, &list)
        ));
        // One value Java orders differently: nothing is proven.
        list.push("\u{E000}");
        assert!(may_match(Some(&s), &filter(Kind::Str, FilterOp::In, &list)));
    }

    #[test]
    fn test_units_scales_and_unsafe_strings() {
        let ts = ColumnStatsRecord {
            value_type: Some(ValueTypeInfo {
                type_ordinal: value_type::TIMESTAMP_MILLIS,
                additional_info: None,
            }),
            ..rec(StatValue::Long(1_000), StatValue::Long(2_000), 2, 0)
        };
        let f = filter(Kind::Timestamp, FilterOp::Gt, &["1970-01-01T00:00:02Z"]);
        assert!(!may_match(Some(&ts), &f));
        let untyped = ColumnStatsRecord {
            value_type: None,
            ..ts.clone()
        };
        assert!(
            may_match(Some(&untyped), &f),
            "a Long of unknown unit proves nothing"
        );
        // 12.345 at scale 3 as a scale-2 maximum is 12.35; as a minimum 12.34.
        assert_eq!(rescale(12_345, 3, 2, Side::Max), Some(1_235));
        assert_eq!(rescale(12_345, 3, 2, Side::Min), Some(1_234));
        assert_eq!(rescale(-12_345, 3, 2, Side::Min), Some(-1_235));
        assert_eq!(rescale(12, 0, 2, Side::Min), Some(1_200));
        let dec = ColumnStatsRecord {
            value_type: Some(ValueTypeInfo {
                type_ordinal: value_type::DECIMAL,
                additional_info: Some("15,2".into()),
            }),
            ..rec(
                StatValue::Bytes(vec![1, 232, 72]),
                StatValue::Bytes(vec![1, 232, 72]),
                1,
                0,
            )
        };
        assert!(may_match(
            Some(&dec),
            &filter(Kind::Decimal(2), FilterOp::Eq, &["1250"])
        ));
        assert!(!may_match(
            Some(&dec),
            &filter(Kind::Decimal(2), FilterOp::Gt, &["1250"])
        ));
        let s = rec(
            StatValue::String("a".into()),
            StatValue::String("b".into()),
            2,
            0,
        );
        assert!(!may_match(
            Some(&s),
            &filter(Kind::Str, FilterOp::Eq, &["c"])
        ));
        assert!(may_match(
            Some(&s),
            &filter(Kind::Str, FilterOp::Eq, &["\u{E000}"])
        ));
    }
}
