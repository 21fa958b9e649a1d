//! Casting a column to the type a schema asks, without losing a value silently.

use arrow::compute::{cast_with_options, CastOptions};
use arrow::error::ArrowError;
use arrow_array::ArrayRef;
use arrow_schema::DataType;

/// `array` cast to `to`, failing where arrow's default (safe) cast would turn a value it
/// cannot represent (an int out of the narrower type's range, text that does not parse) into
/// a null.
pub(crate) fn exact_cast(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(array, to, &options)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int16Array, Int32Array};

    use super::*;

    #[test]
    fn test_exact_cast_refuses_a_value_out_of_range_and_keeps_nulls() {
        let wide: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None, Some(-7)]));
        let narrow = exact_cast(&wide, &DataType::Int16).unwrap();
        let narrow = narrow.as_any().downcast_ref::<Int16Array>().unwrap();
        assert_eq!(
            narrow.iter().collect::<Vec<_>>(),
            vec![Some(1), None, Some(-7)]
        );
        let big: ArrayRef = Arc::new(Int32Array::from(vec![1, 40_000]));
        let err = exact_cast(&big, &DataType::Int16).unwrap_err().to_string();
        assert!(err.contains("40000"), "{err}");
    }
}
