//! The sort key of each row a clustering writes: bytes that order rows linearly by the sort
//! columns, or along a Z-order or Hilbert curve over them ([`super::curve`]).
//!
//! Values are compared as Arrow's row format orders them (nulls first, then ascending; every
//! type the row format supports, nested ones included). For a curve, each column's values are
//! first ranked against boundaries taken from a sample of the rows (the first rows of a group,
//! up to the sort's memory budget), so that every column gets an equal share of the curve
//! whatever its type and spread; ties in the curve are ordered linearly.

use std::sync::Arc;

use arrow::array::{ArrayRef, BinaryArray, BinaryBuilder, RecordBatch};
use arrow::datatypes::Schema;
use arrow::row::{RowConverter, Rows, SortField};

use super::curve;
use super::options::Layout;
use crate::error::{Result, TableError};

/// Most boundaries kept per column (ranks are scaled to [`curve::BITS`] bits): 4,095 cells
/// per column are finer than any file layout needs.
const MAX_BOUNDARIES: usize = 4095;

/// Most sample values per column the boundaries are taken from (an even stride over the
/// sample rows).
const MAX_SAMPLE: usize = 64 * 1024;

/// Computes the sort key of rows of one schema.
pub(crate) struct SortKeys {
    columns: Vec<usize>,
    layout: Layout,
    linear: RowConverter,
    dims: Vec<RowConverter>,
    /// Per column, the sorted distinct boundary values (row format), once calibrated.
    boundaries: Option<Vec<Vec<Vec<u8>>>>,
}

impl std::fmt::Debug for SortKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortKeys")
            .field("columns", &self.columns)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

fn unsupported(reason: String) -> TableError {
    TableError::Unsupported { reason }
}

impl SortKeys {
    /// Keys over `columns` of `schema` (top-level column names), in `layout`. `None` when
    /// there are no sort columns (rows keep their input order). Errors name a missing column
    /// or one whose type cannot be ordered.
    pub(crate) fn new(schema: &Schema, columns: &[String], layout: Layout) -> Result<Option<Self>> {
        if columns.is_empty() {
            return Ok(None);
        }
        let mut idx = Vec::with_capacity(columns.len());
        let mut fields = Vec::with_capacity(columns.len());
        for c in columns {
            let i = schema.index_of(c).map_err(|_| TableError::InvalidInput {
                column: Some(c.clone()),
                row: None,
                reason: format!(
                    "sort column {c:?} is not a column of the table (columns: {})",
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .filter(|n| !arbor_format::meta::is_meta_column(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
            let field = SortField::new(schema.field(i).data_type().clone());
            if !RowConverter::supports_fields(std::slice::from_ref(&field)) {
                return Err(unsupported(format!(
                    "sort column {c:?} of type {} cannot be ordered",
                    schema.field(i).data_type()
                )));
            }
            idx.push(i);
            fields.push(field);
        }
        let converter = |f: Vec<SortField>| {
            RowConverter::new(f).map_err(|e| unsupported(format!("sort columns: {e}")))
        };
        // A curve over one column is that column's order (Java builds no curve for one
        // column either).
        let layout = if idx.len() == 1 {
            Layout::Linear
        } else {
            layout
        };
        let dims = match layout {
            Layout::Linear => Vec::new(),
            Layout::ZOrder | Layout::Hilbert => fields
                .iter()
                .map(|f| converter(vec![f.clone()]))
                .collect::<Result<_>>()?,
        };
        Ok(Some(SortKeys {
            columns: idx,
            layout,
            linear: converter(fields)?,
            dims,
            boundaries: None,
        }))
    }

    /// True when the keys need [`calibrate`](Self::calibrate) before [`keys`](Self::keys).
    pub(crate) fn needs_calibration(&self) -> bool {
        self.layout != Layout::Linear && self.boundaries.is_none()
    }

    /// Takes each column's rank boundaries from `sample` (a curve layout; a no-op for linear).
    pub(crate) fn calibrate(&mut self, sample: &[RecordBatch]) -> Result<()> {
        if self.layout == Layout::Linear {
            return Ok(());
        }
        let mut all = Vec::with_capacity(self.dims.len());
        for (d, conv) in self.dims.iter().enumerate() {
            let col = *self
                .columns
                .get(d)
                .ok_or_else(|| unsupported("sort column".into()))?;
            let total: usize = sample.iter().map(RecordBatch::num_rows).sum();
            let stride = total.div_ceil(MAX_SAMPLE).max(1);
            let mut values: Vec<Vec<u8>> = Vec::new();
            let mut at = 0usize;
            for b in sample {
                let rows = convert(conv, b, &[col])?;
                for (i, r) in rows.iter().enumerate() {
                    if (at + i) % stride == 0 {
                        values.push(r.as_ref().to_vec());
                    }
                }
                at += rows.num_rows();
            }
            values.sort_unstable();
            values.dedup();
            let boundaries = if values.len() <= MAX_BOUNDARIES {
                values
            } else {
                let n = values.len();
                (1..=MAX_BOUNDARIES)
                    .filter_map(|i| values.get(i * n / (MAX_BOUNDARIES + 1)).cloned())
                    .collect()
            };
            all.push(boundaries);
        }
        self.boundaries = Some(all);
        Ok(())
    }

    /// The key of each row of `batch`.
    pub(crate) fn keys(&self, batch: &RecordBatch) -> Result<BinaryArray> {
        let linear = convert(&self.linear, batch, &self.columns)?;
        let n = batch.num_rows();
        let mut out = BinaryBuilder::with_capacity(n, linear.size());
        match (&self.layout, &self.boundaries) {
            (Layout::Linear, _) => {
                for r in linear.iter() {
                    out.append_value(r.as_ref());
                }
            }
            (_, None) => {
                return Err(unsupported(
                    "internal: curve sort keys computed before calibration".into(),
                ))
            }
            (layout, Some(boundaries)) => {
                let mut dims = Vec::with_capacity(self.dims.len());
                for (d, conv) in self.dims.iter().enumerate() {
                    let col = *self
                        .columns
                        .get(d)
                        .ok_or_else(|| unsupported("sort column".into()))?;
                    dims.push(convert(conv, batch, &[col])?);
                }
                let mut point = vec![0u32; dims.len()];
                let mut key = Vec::new();
                for (i, lin) in linear.iter().enumerate() {
                    for ((p, rows), b) in point.iter_mut().zip(&dims).zip(boundaries) {
                        *p = rank(b, rows.row(i).as_ref());
                    }
                    key.clear();
                    key.extend(match layout {
                        Layout::Hilbert => curve::hilbert(&point),
                        _ => curve::z_order(&point),
                    });
                    key.extend_from_slice(lin.as_ref());
                    out.append_value(&key);
                }
            }
        }
        Ok(out.finish())
    }
}

/// The rank of `value` among `boundaries`, scaled to the curve's coordinate range.
fn rank(boundaries: &[Vec<u8>], value: &[u8]) -> u32 {
    let len = boundaries.len().max(1) as u64;
    let r = boundaries.partition_point(|b| b.as_slice() <= value) as u64;
    let max = u64::from((1u32 << curve::BITS) - 1);
    u32::try_from(r.min(len) * max / len).unwrap_or(u32::MAX)
}

fn convert(conv: &RowConverter, batch: &RecordBatch, columns: &[usize]) -> Result<Rows> {
    let arrays: Vec<ArrayRef> = columns
        .iter()
        .filter_map(|&c| batch.columns().get(c).map(Arc::clone))
        .collect();
    if arrays.len() != columns.len() {
        return Err(unsupported(
            "internal: a sort column is missing from a batch".into(),
        ));
    }
    conv.convert_columns(&arrays)
        .map_err(|e| unsupported(format!("sort columns: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};

    fn batch(xs: &[i64], ys: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::Int64, true),
            Field::new("y", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(xs.to_vec())),
                Arc::new(StringArray::from(ys.to_vec())),
            ],
        )
        .unwrap()
    }

    fn order(keys: &BinaryArray) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        idx.sort_by_key(|&i| keys.value(i).to_vec());
        idx
    }

    #[test]
    fn test_linear_keys_order_by_the_columns_in_turn() {
        let b = batch(&[3, -1, 3, 0], &["b", "z", "a", "m"]);
        let cols = ["x".to_string(), "y".to_string()];
        let k = SortKeys::new(&b.schema(), &cols, Layout::Linear)
            .unwrap()
            .unwrap();
        assert!(!k.needs_calibration());
        assert_eq!(order(&k.keys(&b).unwrap()), vec![1, 3, 2, 0]);
    }

    #[test]
    fn test_curves_of_one_column_order_as_linear() {
        let xs: Vec<i64> = (0..200).map(|i| (i * 7919) % 200 - 100).collect();
        let ys: Vec<&str> = xs.iter().map(|_| "s").collect();
        let b = batch(&xs, &ys);
        let cols = ["x".to_string()];
        for layout in [Layout::ZOrder, Layout::Hilbert] {
            let mut k = SortKeys::new(&b.schema(), &cols, layout).unwrap().unwrap();
            // One column: no curve, nothing to calibrate.
            assert!(!k.needs_calibration());
            k.calibrate(std::slice::from_ref(&b)).unwrap();
            let o = order(&k.keys(&b).unwrap());
            let sorted: Vec<i64> = o.iter().map(|&i| xs[i]).collect();
            let mut expected = xs.clone();
            expected.sort();
            assert_eq!(sorted, expected, "{layout:?}");
        }
    }

    #[test]
    fn test_z_order_keeps_both_columns_local() {
        // A 16 x 16 grid in random order: after a Z-order sort, each quarter of the rows
        // covers one quadrant (half of each column's range).
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        let names: Vec<String> = (0..16).map(|i| format!("v{i:02}")).collect();
        for i in 0..256usize {
            let j = (i * 97) % 256;
            xs.push((j / 16) as i64);
            ys.push(names[j % 16].as_str());
        }
        let b = batch(&xs, &ys);
        let cols = ["x".to_string(), "y".to_string()];
        let mut k = SortKeys::new(&b.schema(), &cols, Layout::ZOrder)
            .unwrap()
            .unwrap();
        assert!(k.needs_calibration());
        assert!(k.keys(&b).is_err(), "keys before calibration");
        k.calibrate(std::slice::from_ref(&b)).unwrap();
        let o = order(&k.keys(&b).unwrap());
        for quarter in o.chunks(64) {
            let xr: std::collections::BTreeSet<i64> = quarter.iter().map(|&i| xs[i] / 8).collect();
            let yr: std::collections::BTreeSet<&str> = quarter
                .iter()
                .map(|&i| if ys[i] < "v08" { "lo" } else { "hi" })
                .collect();
            assert_eq!((xr.len(), yr.len()), (1, 1));
        }
    }

    #[test]
    fn test_unknown_sort_column_is_named() {
        let b = batch(&[1], &["a"]);
        let e = SortKeys::new(&b.schema(), &["nope".to_string()], Layout::Linear).unwrap_err();
        assert!(e.to_string().contains("\"nope\""), "{e}");
        assert!(SortKeys::new(&b.schema(), &[], Layout::Linear)
            .unwrap()
            .is_none());
    }
}
