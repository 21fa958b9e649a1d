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
//!
//! Text values (string literals, and number literals kept as their text by
//! [`exact_number_literals`]) are parsed by arbor's one exact parser per type
//! (`arbor_table::cast_text_exact`), the parser of CSV and JSON-lines input: `1.005` into
//! `decimal(10,2)`, `1e400` into a double, `300` into a `tinyint` and a timestamp with
//! nanoseconds into a microsecond column are refused naming the column, the row and the value.
//! DataFusion itself types a number literal with a fraction or an exponent as a double (`1e400`
//! becomes infinity, `0.1000000000000000001` becomes `0.1`), so a statement planned without
//! [`exact_number_literals`] has only the double: it is used when its shortest text has at most
//! 15 significant digits (every such number survives a double unchanged), an infinite double is
//! refused as out of range, and a longer one is refused for decimal and integer columns.

use std::collections::HashMap;
use std::sync::Arc;

use arbor_table::{cast_exact, cast_text_exact, parses_text_into};
use arrow::array::{Array, ArrayRef, StringArray};
use arrow::compute::{cast_with_options, CastOptions};
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
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, SetExpr, Statement as SqlStatement, UnaryOperator, Value as SqlValue,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

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
                .map(|(e, f)| exact_top_cast(e, f.name(), Some(f.data_type())))
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
            let names: Vec<(String, DataType)> = v
                .schema
                .fields()
                .iter()
                .map(|f| {
                    (
                        names.get(f.name()).unwrap_or(f.name()).clone(),
                        f.data_type().clone(),
                    )
                })
                .collect();
            let values = v
                .values
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .zip(&names)
                        .map(|(e, (n, t))| exact_top_cast(e, n, Some(t)))
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

/// The name of the marker function [`exact_number_literals`] wraps number literals in.
const NUMBER_TEXT_FN: &str = "arbor_number";

/// The text of a number literal kept by [`exact_number_literals`] (`arbor_number('1.005')`).
fn number_text_arg(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::ScalarFunction(f) if f.name() == NUMBER_TEXT_FN => match f.args.as_slice() {
            [arg @ Expr::Literal(ScalarValue::Utf8(Some(_)), _)] => Some(arg),
            _ => None,
        },
        _ => None,
    }
}

fn is_number_literal(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Literal(
            ScalarValue::Int8(Some(_))
                | ScalarValue::Int16(Some(_))
                | ScalarValue::Int32(Some(_))
                | ScalarValue::Int64(Some(_))
                | ScalarValue::UInt8(Some(_))
                | ScalarValue::UInt16(Some(_))
                | ScalarValue::UInt32(Some(_))
                | ScalarValue::UInt64(Some(_))
                | ScalarValue::Float32(Some(_))
                | ScalarValue::Float64(Some(_)),
            _
        )
    )
}

fn exact_call(target: &DataType, column: &str, source: Source, arg: Expr) -> Expr {
    let udf = ScalarUDF::new_from_impl(ExactCast::new(target.clone(), column, source));
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), vec![arg]))
}

/// `expr` (under its alias) with its top-level cast of a non-null value replaced by
/// `arbor_exact_cast` (`column` names the target column in errors, `target` is its type when
/// known): a number literal kept as text and a double literal are checked even where no cast
/// was planned.
fn exact_top_cast(expr: Expr, column: &str, target: Option<&DataType>) -> Expr {
    match expr {
        Expr::Alias(mut a) => {
            let inner = std::mem::replace(a.expr.as_mut(), Expr::Literal(ScalarValue::Null, None));
            *a.expr = exact_top_cast(inner, column, target);
            Expr::Alias(a)
        }
        Expr::Cast(Cast { expr, field }) if !matches!(expr.as_ref(), Expr::Literal(v, _) if v.is_null()) =>
        {
            let (source, arg) = match number_text_arg(&expr) {
                Some(text) => (Source::NumberText, text.clone()),
                None if is_number_literal(&expr) => (Source::NumberLiteral, *expr),
                None => (Source::Other, *expr),
            };
            exact_call(field.data_type(), column, source, arg)
        }
        other => match target {
            Some(t) => {
                if let Some(text) = number_text_arg(&other) {
                    let text = text.clone();
                    exact_call(t, column, Source::NumberText, text)
                } else if matches!(
                    other,
                    Expr::Literal(
                        ScalarValue::Float64(Some(_)) | ScalarValue::Float32(Some(_)),
                        _
                    )
                ) {
                    exact_call(t, column, Source::NumberLiteral, other)
                } else {
                    other
                }
            }
            None => other,
        },
    }
}

/// Where a value given to `arbor_exact_cast` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Source {
    /// A number literal's text, kept by [`exact_number_literals`].
    NumberText,
    /// A number literal as DataFusion typed it (an integer, or a double).
    NumberLiteral,
    /// Anything else: a string literal, a typed literal, a column of the source query.
    Other,
}

/// Rewrites the number literals of an `INSERT ... VALUES` statement (`1.005`, `-1e400`,
/// `9223372036854775808`) into calls of the marker function `arbor_number('<text>')`, so that
/// [`ExactInsertCasts`] parses each literal's own text into its column's type exactly instead
/// of the double DataFusion would make of it. Other statements, and numbers anywhere but as a
/// whole value of a `VALUES` row, are left as they are. The marker is registered by
/// [`crate::arbor_session`] and [`crate::register_arbor`] (elsewhere it returns its text).
pub fn exact_number_literals(statement: &mut DFStatement) {
    let DFStatement::Statement(statement) = statement else {
        return;
    };
    let SqlStatement::Insert(insert) = statement.as_mut() else {
        return;
    };
    if let Some(query) = insert.source.as_mut() {
        rewrite_set_expr(query.body.as_mut());
    }
}

fn rewrite_set_expr(body: &mut SetExpr) {
    match body {
        SetExpr::Values(values) => {
            for row in &mut values.rows {
                for value in &mut row.content {
                    rewrite_value(value);
                }
            }
        }
        SetExpr::Query(query) => rewrite_set_expr(query.body.as_mut()),
        _ => {}
    }
}

fn rewrite_value(value: &mut SqlExpr) {
    let text = match value {
        SqlExpr::Value(v) => match &v.value {
            SqlValue::Number(n, false) => n.replace('_', ""),
            _ => return,
        },
        SqlExpr::UnaryOp { op, expr } => match (&*op, expr.as_ref()) {
            (UnaryOperator::Minus | UnaryOperator::Plus, SqlExpr::Value(v)) => match &v.value {
                SqlValue::Number(n, false) => {
                    let sign = if matches!(op, UnaryOperator::Minus) {
                        "-"
                    } else {
                        ""
                    };
                    format!("{sign}{}", n.replace('_', ""))
                }
                _ => return,
            },
            _ => return,
        },
        SqlExpr::Nested(inner) => return rewrite_value(inner.as_mut()),
        _ => return,
    };
    // A number's text is digits, signs, a point and an exponent: nothing to quote.
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return;
    }
    let marker = Parser::new(&GenericDialect)
        .try_with_sql(&format!("{NUMBER_TEXT_FN}('{text}')"))
        .and_then(|mut p| p.parse_expr());
    if let Ok(marker) = marker {
        *value = marker;
    }
}

/// `arbor_number(text)`: the marker [`exact_number_literals`] wraps a number literal's text in;
/// it returns its argument (the text).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct NumberText {
    signature: Signature,
}

impl NumberText {
    /// The marker function.
    pub(crate) fn udf() -> ScalarUDF {
        ScalarUDF::new_from_impl(NumberText {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for NumberText {
    fn name(&self) -> &str {
        NUMBER_TEXT_FN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        args.args.into_iter().next().ok_or_else(|| {
            DataFusionError::Internal(format!("{NUMBER_TEXT_FN} takes one argument"))
        })
    }
}

/// `arbor_exact_cast(value)`: `value` converted to `target` without changing it, or an error
/// naming `column` and the row.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ExactCast {
    target: DataType,
    column: String,
    source: Source,
    signature: Signature,
}

impl ExactCast {
    fn new(target: DataType, column: &str, source: Source) -> Self {
        ExactCast {
            target,
            column: column.to_string(),
            source,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// Significant digits of a number's text (`1.2345e-7` has 5).
fn significant_digits(text: &str) -> usize {
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    digits.trim_start_matches('0').trim_end_matches('0').len()
}

impl ExactCast {
    /// `array` as the target type, exactly: text (a string, or a number literal's own text) is
    /// parsed by `arbor_table::cast_text_exact`, a number literal DataFusion typed goes through
    /// its text as the module doc says, anything else converts by `arbor_table::cast_exact`.
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
        let parses = parses_text_into(&self.target);
        match self.source {
            Source::NumberText if parses => {
                cast_text_exact(array, &self.target, &self.column, 0).map_err(external)
            }
            Source::NumberText => Err(external(arbor_table::TableError::InvalidInput {
                column: Some(self.column.clone()),
                row: Some(0),
                reason: format!(
                    "a number is not compatible with the table's {}",
                    self.target
                ),
            })),
            Source::NumberLiteral if parses => {
                let texts = self.literal_texts(array)?;
                cast_text_exact(&texts, &self.target, &self.column, 0).map_err(external)
            }
            Source::Other if text && parses => {
                cast_text_exact(array, &self.target, &self.column, 0).map_err(external)
            }
            // SQL's `TIMESTAMP '...'` is zone-less, on UTC (DataFusion converts a written zone
            // to UTC): into a zoned column it is that UTC instant.
            _ if matches!(
                (&self.target, array.data_type()),
                (
                    DataType::Timestamp(_, Some(_)),
                    DataType::Timestamp(_, None)
                )
            ) =>
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

    /// The texts of number literals DataFusion typed: an integer's digits, a double's shortest
    /// text. An infinite double (a literal beyond the double range, such as `1e400`) is an
    /// error, and so is a double of more than 15 significant digits for a column that is not a
    /// float (the literal's own digits are lost).
    fn literal_texts(&self, array: &ArrayRef) -> Result<ArrayRef> {
        let refuse = |reason: String| {
            DataFusionError::External(Box::new(arbor_table::TableError::InvalidInput {
                column: Some(self.column.clone()),
                row: Some(0),
                reason,
            }))
        };
        let float_target = matches!(self.target, DataType::Float32 | DataType::Float64);
        let mut texts: Vec<Option<String>> = Vec::with_capacity(array.len());
        for i in 0..array.len() {
            let value = ScalarValue::try_from_array(array, i)?;
            let text = match value {
                v if v.is_null() => None,
                ScalarValue::Float64(Some(f)) => {
                    Some(self.double_text(f, float_target, &refuse)?)
                }
                ScalarValue::Float32(Some(f)) => {
                    Some(self.double_text(f64::from(f), float_target, &refuse)?)
                }
                other => Some(other.to_string()),
            };
            texts.push(text);
        }
        Ok(Arc::new(StringArray::from(texts)))
    }

    fn double_text(
        &self,
        f: f64,
        float_target: bool,
        refuse: &dyn Fn(String) -> DataFusionError,
    ) -> Result<String> {
        if !f.is_finite() {
            return Err(refuse(format!(
                "a number literal beyond the range of a double ({f}) does not fit the table's {}",
                self.target
            )));
        }
        let text = format!("{f:?}");
        if !float_target && significant_digits(&text) > 15 {
            return Err(refuse(format!(
                "value {text} (a double literal: its own digits are lost) cannot be stored in \
                 the table's {} exactly; run the statement through `arbor sql` or \
                 `arbor_datafusion::exact_number_literals`, or write the number as a string",
                self.target
            )));
        }
        Ok(text)
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
