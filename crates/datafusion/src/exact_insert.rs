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
use arrow::datatypes::DataType;
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

/// The INSERT's source with its planner casts made exact; `names` maps a `VALUES` column to
/// the table column the projection above stores it in (for messages).
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
                .map(|(e, f)| exact_casts(e, f.name()))
                .collect::<Result<Vec<_>>>()?;
            let input = exact_source(Arc::unwrap_or_clone(p.input), &renames)?;
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
                        .map(|(e, n)| exact_casts(e, n))
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(LogicalPlan::Values(Values {
                schema: v.schema,
                values,
            }))
        }
        other => Ok(other),
    }
}

/// `expr` with every cast of a non-null value replaced by `arbor_exact_cast` (`column` names
/// the target column in errors).
fn exact_casts(expr: Expr, column: &str) -> Result<Expr> {
    expr.transform_up(|e| match e {
        Expr::Cast(Cast { expr, field })
            if !matches!(expr.as_ref(), Expr::Literal(v, _) if v.is_null()) =>
        {
            let udf = ScalarUDF::new_from_impl(ExactCast::new(field.data_type().clone(), column));
            Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(udf),
                vec![*expr],
            ))))
        }
        other => Ok(Transformed::no(other)),
    })
    .data()
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
        let converted = cast_exact(&array, &self.target, &self.column, 0)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &converted, 0,
            )?))
        } else {
            Ok(ColumnarValue::Array(converted))
        }
    }
}
