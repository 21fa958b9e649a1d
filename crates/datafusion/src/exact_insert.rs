//! [`ExactInsertCasts`]: `INSERT INTO` an arbor table converts values exactly or fails.
//!
//! DataFusion plans an INSERT by casting the source's columns (and `VALUES` literals) to the
//! table's types with its own casts, which round (`12.345` into `decimal(12,2)` becomes
//! `12.35`), truncate (nanoseconds into microseconds, a time into a date) and read text loosely
//! (`'yes'` as a boolean). arbor never alters a value silently: this analyzer rule replaces
//! those planner casts (the top projection under the INSERT and the `VALUES` rows beneath it)
//! with `arbor_exact_cast`, which converts with `arbor_table::cast_exact` and fails naming the
//! column and row of a value that does not fit. Casts the user wrote elsewhere in the source
//! query (a filter, a join) are left as they are.

use std::collections::HashMap;
use std::sync::Arc;

use arbor_table::cast_exact;
use arrow::array::{ArrayRef, AsArray};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::logical_plan::dml::WriteOp;
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, LogicalPlan, Projection, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Values, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::insert_rule::RULE_NAME;
use crate::provider::ArborTableProvider;

/// Makes the casts DataFusion plans for `INSERT INTO` an arbor table exact (see the module
/// doc). Registered by [`crate::arbor_session`] and [`crate::register_arbor`]; an INSERT in a
/// session without it is refused by the provider.
#[derive(Debug, Default)]
pub struct ExactInsertCasts;

impl AnalyzerRule for ExactInsertCasts {
    fn name(&self) -> &str {
        RULE_NAME
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up(|node| {
            let LogicalPlan::Dml(dml) = node else {
                return Ok(Transformed::no(node));
            };
            let is_arbor = matches!(dml.op, WriteOp::Insert(_))
                && source_as_provider(&dml.target)
                    .ok()
                    .is_some_and(|p| p.as_ref().downcast_ref::<ArborTableProvider>().is_some());
            if !is_arbor {
                return Ok(Transformed::no(LogicalPlan::Dml(dml)));
            }
            let mut dml = dml;
            let input = Arc::unwrap_or_clone(dml.input);
            dml.input = Arc::new(exact_source(input, &HashMap::new())?);
            Ok(Transformed::yes(LogicalPlan::Dml(dml)))
        })
        .data()
    }
}

/// The INSERT's source with its planner casts made exact: the top-level cast of each column
/// of the projection DataFusion puts under the INSERT, and of each value of a `VALUES` list
/// right beneath it (`names` maps a `VALUES` column to the table column it is stored in, for
/// messages). Nothing deeper is touched: casts the user wrote keep DataFusion's meaning.
fn exact_source(plan: LogicalPlan, names: &HashMap<String, String>) -> Result<LogicalPlan> {
    match plan {
        LogicalPlan::Projection(p) => {
            let schema = p.schema.clone();
            let renames: HashMap<String, String> = p
                .expr
                .iter()
                .zip(schema.fields())
                .filter_map(|(e, f)| {
                    let mut inner = e;
                    loop {
                        match inner {
                            Expr::Alias(a) => inner = a.expr.as_ref(),
                            Expr::Cast(c) => inner = c.expr.as_ref(),
                            Expr::Column(c) => return Some((c.name.clone(), f.name().clone())),
                            _ => return None,
                        }
                    }
                })
                .collect();
            let exprs = p
                .expr
                .into_iter()
                .zip(schema.fields())
                .map(|(e, f)| exact_top_cast(e, f.name()))
                .collect::<Vec<_>>();
            let input = match Arc::unwrap_or_clone(p.input) {
                values @ LogicalPlan::Values(_) => exact_source(values, &renames)?,
                other => other,
            };
            Ok(LogicalPlan::Projection(Projection::try_new_with_schema(
                exprs,
                Arc::new(input),
                schema,
            )?))
        }
        LogicalPlan::Values(v) => {
            let names: Vec<String> = v
                .schema
                .fields()
                .iter()
                .map(|f| names.get(f.name()).unwrap_or(f.name()).clone())
                .collect();
            let values = v
                .values
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .zip(&names)
                        .map(|(e, n)| exact_top_cast(e, n))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>();
            Ok(LogicalPlan::Values(Values {
                schema: v.schema,
                values,
            }))
        }
        other => Ok(other),
    }
}

/// `expr` (under its alias) with its top-level cast of a non-null value replaced by
/// `arbor_exact_cast` (`column` names the target column in errors).
fn exact_top_cast(expr: Expr, column: &str) -> Expr {
    match expr {
        Expr::Alias(mut a) => {
            let inner = std::mem::replace(a.expr.as_mut(), Expr::Literal(ScalarValue::Null, None));
            *a.expr = exact_top_cast(inner, column);
            Expr::Alias(a)
        }
        Expr::Cast(Cast { expr, field }) if !matches!(expr.as_ref(), Expr::Literal(v, _) if v.is_null()) =>
        {
            let udf = ScalarUDF::new_from_impl(ExactCast::new(field.data_type().clone(), column));
            Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), vec![*expr]))
        }
        other => other,
    }
}

/// `arbor_exact_cast(value)`: `value` converted to `target` without changing it, or an error
/// naming `column` and the row.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ExactCast {
    target: DataType,
    column: String,
    signature: Signature,
}

impl ExactCast {
    fn new(target: DataType, column: &str) -> Self {
        ExactCast {
            target,
            column: column.to_string(),
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ExactCast {
    /// `array` as the target type, exactly. Text read as a date must be a date alone
    /// (`yyyy-MM-dd`: a time would be dropped); text read as a timestamp is parsed to
    /// nanoseconds, then converted exactly (digits finer than the column keeps are an error).
    fn convert(&self, array: &ArrayRef) -> Result<ArrayRef> {
        let external = |e: arbor_table::TableError| DataFusionError::External(Box::new(e));
        let strict = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let text = matches!(
            array.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        match (&self.target, text) {
            (DataType::Date32, true) => {
                let strings = cast_with_options(array, &DataType::Utf8, &strict)?;
                let strings = strings.as_string::<i32>();
                for (row, v) in strings.iter().enumerate() {
                    let Some(v) = v else { continue };
                    let date_only =
                        v.len() == 10 && chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d").is_ok();
                    if !date_only {
                        return Err(DataFusionError::Execution(format!(
                            "invalid input in column {:?} at row {row}: {v:?} is not a date \
                             (yyyy-MM-dd) and would not be stored exactly",
                            self.column
                        )));
                    }
                }
                Ok(cast_with_options(array, &self.target, &strict)?)
            }
            (DataType::Timestamp(_, tz), true) => {
                let nanos = DataType::Timestamp(TimeUnit::Nanosecond, tz.clone());
                let parsed = cast_with_options(array, &nanos, &strict)?;
                cast_exact(&parsed, &self.target, &self.column, 0).map_err(external)
            }
            // SQL's `TIMESTAMP '...'` is zone-less, on UTC (DataFusion converts a written zone
            // to UTC): into a zoned column it is that UTC instant.
            (DataType::Timestamp(_, Some(_)), false)
                if matches!(array.data_type(), DataType::Timestamp(_, None)) =>
            {
                let DataType::Timestamp(unit, None) = array.data_type() else {
                    return cast_exact(array, &self.target, &self.column, 0).map_err(external);
                };
                let utc = DataType::Timestamp(*unit, Some("UTC".into()));
                let instants = cast_with_options(array, &utc, &strict)?;
                cast_exact(&instants, &self.target, &self.column, 0).map_err(external)
            }
            _ => cast_exact(array, &self.target, &self.column, 0).map_err(external),
        }
    }
}

impl ScalarUDFImpl for ExactCast {
    fn name(&self) -> &str {
        "arbor_exact_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.target.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Some(value) = args.args.first() else {
            return Err(DataFusionError::Internal(
                "arbor_exact_cast takes one argument".to_string(),
            ));
        };
        let scalar = matches!(value, ColumnarValue::Scalar(_));
        let array = value.to_array(args.number_rows)?;
        let converted = self.convert(&array)?;
        if converted.is_empty() {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from(&self.target)?));
        }
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &converted, 0,
            )?))
        } else {
            Ok(ColumnarValue::Array(converted))
        }
    }
}
