//! Exact conversion of input values to a table column's type.
//!
//! A value written to a table must keep its value: [`cast_exact`] converts an input column to
//! the column type the table stores and fails, naming the column and the first row at fault,
//! whenever a value would change (`9.7` into an `int` column, a `double` into a `float` that
//! cannot hold it, a nanosecond timestamp into a microsecond column, a decimal that needs more
//! digits). Conversions between kinds of value (a number into a string column, a string into
//! a number column) are refused outright: the table's type says what the value is, and
//! reinterpreting one kind as another is not a lossless conversion. Dictionary-encoded input
//! (pandas categoricals) is decoded first, and nested columns (structs, lists, maps) convert
//! field by field, so a list with item field `item` becomes the table's list with item field
//! `element`.

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, ListArray, MapArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::compute::kernels::cmp::distinct;
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, FieldRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::error::{Result, TableError};

/// The broad kind of a scalar type: conversions stay within one kind (numbers convert among
/// themselves, strings among string encodings, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    String,
    Binary,
    FixedBinary(i32),
    Boolean,
    Date,
    Time,
    /// A timestamp; `true` when it has a time zone (an instant), `false` when naive.
    Timestamp(bool),
}

fn kind(dt: &DataType) -> Option<Kind> {
    use DataType::*;
    Some(match dt {
        Int8
        | Int16
        | Int32
        | Int64
        | UInt8
        | UInt16
        | UInt32
        | UInt64
        | Float16
        | Float32
        | Float64
        | Decimal32(_, _)
        | Decimal64(_, _)
        | Decimal128(_, _)
        | Decimal256(_, _) => Kind::Number,
        Utf8 | LargeUtf8 | Utf8View => Kind::String,
        Binary | LargeBinary | BinaryView => Kind::Binary,
        FixedSizeBinary(n) => Kind::FixedBinary(*n),
        Boolean => Kind::Boolean,
        Date32 | Date64 => Kind::Date,
        Time32(_) | Time64(_) => Kind::Time,
        Timestamp(_, tz) => Kind::Timestamp(tz.is_some()),
        _ => return None,
    })
}

fn invalid(column: &str, row: Option<usize>, reason: impl Into<String>) -> TableError {
    TableError::InvalidInput {
        column: Some(column.to_string()),
        row,
        reason: reason.into(),
    }
}

fn display_value(array: &dyn Array, i: usize) -> String {
    ArrayFormatter::try_new(array, &FormatOptions::default())
        .map(|f| f.value(i).to_string())
        .unwrap_or_else(|_| "?".to_string())
}

/// Where the values of an array sit in the input: the top-level column maps element `i` to
/// input row `first_row + i`; elements of a list have no row of their own.
#[derive(Debug, Clone, Copy)]
enum Rows {
    Top(usize),
    Nested,
}

impl Rows {
    fn row(self, i: usize) -> Option<usize> {
        match self {
            Rows::Top(first) => Some(first + i),
            Rows::Nested => None,
        }
    }
}

/// Converts `array` (the values of input column `column`, whose first element is input row
/// `first_row`) to `to` without changing any value.
///
/// Guarantees: the result has type `to` and the same length and nulls as `array`; every
/// non-null value converts back to exactly the input value. Fails with
/// [`TableError::InvalidInput`] naming the column (`a.b` inside structs, `a[]` inside lists)
/// and, for top-level values, the first row whose value does not fit, or when the two types
/// hold different kinds of value.
pub fn cast_exact(
    array: &ArrayRef,
    to: &DataType,
    column: &str,
    first_row: usize,
) -> Result<ArrayRef> {
    convert(array, to, column, Rows::Top(first_row))
}

fn convert(array: &ArrayRef, to: &DataType, path: &str, rows: Rows) -> Result<ArrayRef> {
    let from = array.data_type();
    if from == to {
        return Ok(array.clone());
    }
    match (from, to) {
        (DataType::Null, _) => Ok(new_null_array(to, array.len())),
        (DataType::Dictionary(_, values), _) => {
            let decoded = cast_with_options(array, values, &strict())
                .map_err(|e| invalid(path, None, format!("cannot decode the dictionary: {e}")))?;
            convert(&decoded, to, path, rows)
        }
        (DataType::Struct(_), DataType::Struct(to_fields)) => {
            let s = array.as_struct();
            let mut columns = Vec::with_capacity(to_fields.len());
            for f in to_fields {
                let child_path = format!("{path}.{}", f.name());
                match s.column_by_name(f.name()) {
                    Some(c) => columns.push(convert(c, f.data_type(), &child_path, rows)?),
                    None if f.is_nullable() => {
                        columns.push(new_null_array(f.data_type(), array.len()))
                    }
                    None => {
                        return Err(invalid(
                            &child_path,
                            None,
                            "the input lacks this non-nullable nested field",
                        ))
                    }
                }
            }
            if let Some(extra) = s
                .fields()
                .iter()
                .find(|f| !to_fields.iter().any(|t| t.name() == f.name()))
            {
                return Err(invalid(
                    &format!("{path}.{}", extra.name()),
                    None,
                    "the table's struct has no such field",
                ));
            }
            let out = StructArray::try_new(to_fields.clone(), columns, s.nulls().cloned())
                .map_err(|e| invalid(path, None, e.to_string()))?;
            check_required(&out, path, rows)?;
            Ok(Arc::new(out))
        }
        (
            DataType::List(_) | DataType::LargeList(_) | DataType::ListView(_),
            DataType::List(item),
        ) => {
            // Offsets to i32 first (arrow checks they fit), keeping the input's item type.
            let from_item = match from {
                DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) => f.clone(),
                _ => return Err(invalid(path, None, "not a list")),
            };
            let as_list = if matches!(from, DataType::List(_)) {
                array.clone()
            } else {
                cast_with_options(array, &DataType::List(from_item), &strict())
                    .map_err(|e| invalid(path, None, format!("cannot read the list: {e}")))?
            };
            let list = as_list.as_list::<i32>();
            let values = convert(
                list.values(),
                item.data_type(),
                &format!("{path}[]"),
                Rows::Nested,
            )?;
            check_item_nulls(item, &values, path)?;
            let out = ListArray::try_new(
                item.clone(),
                list.offsets().clone(),
                values,
                list.nulls().cloned(),
            )
            .map_err(|e| invalid(path, None, e.to_string()))?;
            Ok(Arc::new(out))
        }
        (DataType::Map(_, _), DataType::Map(entries, sorted)) => {
            let map = array.as_map();
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(invalid(
                    path,
                    None,
                    "the table's map entries are not a struct",
                ));
            };
            let (Some(key_field), Some(value_field)) = (kv.first(), kv.get(1)) else {
                return Err(invalid(path, None, "the table's map has no key and value"));
            };
            let keys = convert(
                map.keys(),
                key_field.data_type(),
                &format!("{path}.key"),
                Rows::Nested,
            )?;
            let values = convert(
                map.values(),
                value_field.data_type(),
                &format!("{path}.value"),
                Rows::Nested,
            )?;
            if keys.null_count() > 0 {
                return Err(invalid(path, rows.row(0), "a map key is null"));
            }
            check_item_nulls(value_field, &values, &format!("{path}.value"))?;
            let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)
                .map_err(|e| invalid(path, None, e.to_string()))?;
            let offsets: OffsetBuffer<i32> = map.offsets().clone();
            let out = MapArray::try_new(
                entries.clone(),
                offsets,
                entries_array,
                map.nulls().cloned(),
                *sorted,
            )
            .map_err(|e| invalid(path, None, e.to_string()))?;
            Ok(Arc::new(out))
        }
        _ => scalar(array, to, path, rows),
    }
}

fn strict() -> CastOptions<'static> {
    CastOptions {
        safe: false,
        ..CastOptions::default()
    }
}

fn check_item_nulls(item: &FieldRef, values: &ArrayRef, path: &str) -> Result<()> {
    if !item.is_nullable() && values.null_count() > 0 {
        return Err(invalid(
            &format!("{path}[]"),
            None,
            "a null element in a list whose elements the table declares non-nullable",
        ));
    }
    Ok(())
}

fn check_required(s: &StructArray, path: &str, rows: Rows) -> Result<()> {
    for (f, c) in s.fields().iter().zip(s.columns()) {
        if f.is_nullable() || c.null_count() == 0 {
            continue;
        }
        // A null child under a null parent is fine.
        if let Some(i) = (0..s.len()).find(|&i| s.is_valid(i) && c.is_null(i)) {
            return Err(invalid(
                &format!("{path}.{}", f.name()),
                rows.row(i),
                "null in a non-nullable nested field",
            ));
        }
    }
    Ok(())
}

fn describe(dt: &DataType) -> String {
    match dt {
        DataType::Timestamp(unit, None) => format!("Timestamp({unit:?}) without time zone"),
        DataType::Timestamp(unit, Some(tz)) => format!("Timestamp({unit:?}, {tz})"),
        other => other.to_string(),
    }
}

fn scalar(array: &ArrayRef, to: &DataType, path: &str, rows: Rows) -> Result<ArrayRef> {
    let from = array.data_type();
    let (Some(a), Some(b)) = (kind(from), kind(to)) else {
        return Err(invalid(
            path,
            None,
            format!(
                "type {} is not compatible with the table's {}",
                describe(from),
                describe(to)
            ),
        ));
    };
    if a != b {
        let hint = match (a, b) {
            (Kind::Timestamp(false), Kind::Timestamp(true)) => {
                " (a timestamp without time zone is not an instant: give the input a zone, \
                 e.g. UTC)"
            }
            (Kind::Timestamp(true), Kind::Timestamp(false)) => {
                " (the table's column holds timestamps without time zone)"
            }
            _ => "",
        };
        return Err(invalid(
            path,
            None,
            format!(
                "type {} is not compatible with the table's {}{hint}",
                describe(from),
                describe(to)
            ),
        ));
    }
    let out = match cast_with_options(array, to, &strict()) {
        Ok(out) => out,
        Err(e) => {
            let lenient = cast_with_options(array, to, &CastOptions::default()).ok();
            let i =
                lenient.and_then(|l| (0..array.len()).find(|&i| array.is_valid(i) && l.is_null(i)));
            return Err(invalid(
                path,
                i.and_then(|i| rows.row(i)),
                match i {
                    Some(i) => format!(
                        "value {} does not fit the table's {} ({e})",
                        display_value(array.as_ref(), i),
                        describe(to)
                    ),
                    None => format!("cannot convert {} to {}: {e}", describe(from), describe(to)),
                },
            ));
        }
    };
    if matches!(
        a,
        Kind::String | Kind::Binary | Kind::FixedBinary(_) | Kind::Boolean
    ) {
        // Re-encodings of the same bytes.
        return Ok(out);
    }
    // Every other conversion is checked value by value: converted back, it must equal the input.
    let back = cast_with_options(&out, from, &strict()).map_err(|e| {
        invalid(
            path,
            None,
            format!("cannot check the conversion to {}: {e}", describe(to)),
        )
    })?;
    let differs: BooleanArray = distinct(array, &back).map_err(|e| {
        invalid(
            path,
            None,
            format!("cannot check the conversion to {}: {e}", describe(to)),
        )
    })?;
    if let Some(i) = (0..differs.len()).find(|&i| differs.is_valid(i) && differs.value(i)) {
        return Err(invalid(
            path,
            rows.row(i),
            format!(
                "value {} does not fit the table's {} exactly (it would become {})",
                display_value(array.as_ref(), i),
                describe(to),
                display_value(out.as_ref(), i)
            ),
        ));
    }
    Ok(out)
}

/// Whether every value of `from` is exactly a value of `to` (so a column may be promoted from
/// `from` to `to` without changing a stored value), following the type promotions Hudi's
/// schema evolution on write allows that keep values: `int -> long`, `int -> double`,
/// `float -> double`, and a decimal to one with at least as many integer and fraction digits.
/// (`long -> double` and `long/int -> float`, which Hudi also allows, are refused: stored
/// values beyond 2^53 or 2^24 would read back changed.)
pub fn is_lossless_promotion(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    match (from, to) {
        (Int32, Int64) | (Int32, Float64) | (Float32, Float64) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            s2 >= s1 && (i16::from(*p2) - i16::from(*s2)) >= (i16::from(*p1) - i16::from(*s1))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use arrow::array::{
        DictionaryArray, Float32Array, Float64Array, Int32Array, Int64Array, StringArray,
        TimestampNanosecondArray,
    };
    use arrow::datatypes::{Field, Int8Type, TimeUnit};

    fn err_of(r: Result<ArrayRef>) -> (Option<String>, Option<usize>, String) {
        match r {
            Err(TableError::InvalidInput {
                column,
                row,
                reason,
            }) => (column, row, reason),
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn test_float_into_int_fraction_refused_with_row() {
        let a: ArrayRef = Arc::new(Float64Array::from(vec![Some(1.0), None, Some(9.7)]));
        let (c, row, reason) = err_of(cast_exact(&a, &DataType::Int32, "n", 10));
        assert_eq!(c.as_deref(), Some("n"));
        assert_eq!(row, Some(12));
        assert!(reason.contains("9.7"), "{reason}");
        let ok: ArrayRef = Arc::new(Float64Array::from(vec![Some(1.0), None, Some(9.0)]));
        let out = cast_exact(&ok, &DataType::Int32, "n", 0).unwrap();
        assert_eq!(
            out.as_primitive::<arrow::datatypes::Int32Type>().value(2),
            9
        );
        assert!(out.is_null(1));
    }

    #[test]
    fn test_double_into_float_loses_digits_refused() {
        let a: ArrayRef = Arc::new(Float64Array::from(vec![0.5, 0.1]));
        let (_, row, _) = err_of(cast_exact(&a, &DataType::Float32, "f", 0));
        assert_eq!(row, Some(1));
        let nan: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN, 0.25]));
        let out = cast_exact(&nan, &DataType::Float32, "f", 0).unwrap();
        assert!(out
            .as_primitive::<arrow::datatypes::Float32Type>()
            .value(0)
            .is_nan());
    }

    #[test]
    fn test_int_into_string_and_string_into_int_refused() {
        let a: ArrayRef = Arc::new(Int32Array::from(vec![7]));
        let (_, _, reason) = err_of(cast_exact(&a, &DataType::Utf8, "s", 0));
        assert!(reason.contains("not compatible"), "{reason}");
        let s: ArrayRef = Arc::new(StringArray::from(vec!["7"]));
        err_of(cast_exact(&s, &DataType::Int64, "s", 0));
    }

    #[test]
    fn test_long_overflowing_int_refused_and_fitting_long_accepted() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, i64::from(i32::MAX) + 1]));
        let (_, row, _) = err_of(cast_exact(&a, &DataType::Int32, "n", 0));
        assert_eq!(row, Some(1));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![1, -5]));
        assert_eq!(cast_exact(&b, &DataType::Int32, "n", 0).unwrap().len(), 2);
    }

    #[test]
    fn test_nanos_into_micros_only_when_whole() {
        let to = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let whole: ArrayRef =
            Arc::new(TimestampNanosecondArray::from(vec![1_000, 5_000]).with_timezone("UTC"));
        cast_exact(&whole, &to, "t", 0).unwrap();
        let cut: ArrayRef =
            Arc::new(TimestampNanosecondArray::from(vec![1_000, 5_001]).with_timezone("UTC"));
        let (_, row, _) = err_of(cast_exact(&cut, &to, "t", 0));
        assert_eq!(row, Some(1));
        let naive: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![1_000]));
        let (_, _, reason) = err_of(cast_exact(&naive, &to, "t", 0));
        assert!(reason.contains("without time zone"), "{reason}");
    }

    #[test]
    fn test_dictionary_decoded() {
        let d: DictionaryArray<Int8Type> = vec!["a", "b", "a"].into_iter().collect();
        let a: ArrayRef = Arc::new(d);
        let out = cast_exact(&a, &DataType::Utf8, "c", 0).unwrap();
        assert_eq!(out.as_string::<i32>().value(2), "a");
    }

    #[test]
    fn test_list_item_name_normalized_and_values_checked() {
        let item = Arc::new(Field::new("item", DataType::Int64, true));
        let list = ListArray::new(
            item,
            OffsetBuffer::from_lengths([2, 1]),
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            None,
        );
        let a: ArrayRef = Arc::new(list);
        let element = Arc::new(Field::new("element", DataType::Int32, true));
        let out = cast_exact(&a, &DataType::List(element.clone()), "l", 0).unwrap();
        assert_eq!(out.data_type(), &DataType::List(element));
        let f: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::Float32, true)),
            OffsetBuffer::from_lengths([1]),
            Arc::new(Float32Array::from(vec![1.5])),
            None,
        ));
        let to = DataType::List(Arc::new(Field::new("element", DataType::Int64, true)));
        let (c, _, _) = err_of(cast_exact(&f, &to, "l", 0));
        assert_eq!(c.as_deref(), Some("l[]"));
    }

    #[test]
    fn test_promotions() {
        use DataType::*;
        assert!(is_lossless_promotion(&Int32, &Int64));
        assert!(is_lossless_promotion(&Float32, &Float64));
        assert!(is_lossless_promotion(
            &Decimal128(10, 2),
            &Decimal128(12, 3)
        ));
        assert!(!is_lossless_promotion(
            &Decimal128(10, 2),
            &Decimal128(10, 3)
        ));
        assert!(!is_lossless_promotion(&Int64, &Float64));
        assert!(!is_lossless_promotion(&Int64, &Int32));
    }
}
