//! Avro schemas and values <-> Arrow schemas and arrays.
//!
//! Hudi log blocks carry records as Avro (Spark writes them with the table's Avro schema, meta
//! fields first), base files carry them as parquet. Readers merge both into one Arrow batch, so
//! the Arrow types produced here are the ones parquet-rs yields when it reads a Spark-written
//! base file of the same table:
//!
//! | Avro | Arrow |
//! |---|---|
//! | `["null", T]`, `[T, "null"]` | `T`, nullable |
//! | `boolean`, `int`, `long`, `float`, `double` | `Boolean`, `Int32`, `Int64`, `Float32`, `Float64` |
//! | `string`, `enum`, `uuid` (string) | `Utf8` |
//! | `bytes` | `Binary` |
//! | `fixed(n)`, `uuid` (fixed) | `FixedSizeBinary(n)` |
//! | `decimal(p, s)` (bytes or fixed) | `Decimal128(p, s)` |
//! | `date` | `Date32` |
//! | `time-millis`, `time-micros` | `Time32(ms)`, `Time64(us)` |
//! | `timestamp-millis/micros/nanos` | `Timestamp(unit, "UTC")` (parquet-rs's zone for `isAdjustedToUTC`) |
//! | `local-timestamp-*` | `Timestamp(unit, None)` |
//! | `record` | `Struct` |
//! | `array<T>` | `List` with item field `element` |
//! | `map<T>` | `Map` with entries `key_value { key: Utf8 (non-null), value }` |
//!
//! Other unions, `duration` and big decimals are refused with [`FormatError::Schema`] naming
//! the field. Spark narrows some types that Avro cannot express (a Spark `BYTE` or `SHORT`
//! column is an Avro `int` but a parquet `INT(8)`/`INT(16)`), so [`avro_records_to_batch`]
//! takes the Arrow schema to produce and casts where the natural type differs.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use apache_avro::schema::{
    DecimalSchema, InnerDecimalSchema, RecordSchema, Schema as AvroSchema, UnionSchema, UuidSchema,
};
use apache_avro::types::Value;
use apache_avro::Decimal;
use arrow::compute::cast;
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    Time32MillisecondBuilder, Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time32MillisecondType, Time64MicrosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType,
};
use arrow_array::{
    new_null_array, Array, ArrayRef, ListArray, MapArray, RecordBatch, RecordBatchOptions,
    StringArray, StructArray,
};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema as ArrowSchema, SchemaRef, TimeUnit};

use crate::{meta, FormatError, Result};

/// The time zone parquet-rs gives `TIMESTAMP(isAdjustedToUTC=true)` columns, and so the zone of
/// every Avro `timestamp-*` column here.
pub const UTC: &str = "UTC";

/// Name of the item field of every Arrow `List` produced here (parquet's 3-level list).
pub const LIST_ITEM_NAME: &str = "element";

/// Name of the entries field of every Arrow `Map` produced here (parquet's `key_value`).
pub const MAP_ENTRIES_NAME: &str = "key_value";

/// Largest precision a `Decimal128` holds.
const MAX_DECIMAL128_PRECISION: usize = 38;

fn schema_err(field: &str, reason: impl Into<String>) -> FormatError {
    FormatError::Schema {
        field: if field.is_empty() {
            None
        } else {
            Some(field.to_string())
        },
        reason: reason.into(),
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Parses an Avro schema from its JSON text (a log block `SCHEMA` header, commit metadata's
/// `extraMetadata.schema`, ...).
pub fn parse_avro_schema(json: &str) -> Result<AvroSchema> {
    AvroSchema::parse_str(json).map_err(|e| schema_err("", format!("invalid Avro schema: {e}")))
}

/// Named types of a schema, so that references (`Schema::Ref`) can be followed.
struct Names<'a> {
    by_name: HashMap<String, &'a AvroSchema>,
}

impl<'a> Names<'a> {
    fn new(root: &'a AvroSchema) -> Self {
        let mut by_name = HashMap::new();
        collect_names(root, &mut by_name);
        Self { by_name }
    }

    /// [`Names::new`], refusing recursive schemas (a record that contains itself has no Arrow
    /// counterpart, and following it would never end).
    fn checked(root: &'a AvroSchema) -> Result<Self> {
        let names = Self::new(root);
        names.check_acyclic(root, "", &mut Vec::new(), &mut HashSet::new())?;
        Ok(names)
    }

    /// Depth-first walk that fails on a record reached again while it is being visited.
    /// `visiting` holds the records on the current path, `done` those fully checked.
    fn check_acyclic(
        &self,
        schema: &'a AvroSchema,
        path: &str,
        visiting: &mut Vec<String>,
        done: &mut HashSet<String>,
    ) -> Result<()> {
        let recursive = |name: &str| {
            schema_err(
                path,
                format!("recursive type {name} is not supported (it has no Arrow counterpart)"),
            )
        };
        match schema {
            AvroSchema::Ref { name } => {
                let full = name.fullname(None);
                if visiting.contains(&full) {
                    return Err(recursive(&full));
                }
                match self.by_name.get(&full) {
                    Some(target) if !done.contains(&full) => {
                        self.check_acyclic(target, path, visiting, done)
                    }
                    // Unknown references are reported when they are resolved.
                    _ => Ok(()),
                }
            }
            AvroSchema::Record(record) => {
                let full = record.name.fullname(None);
                if visiting.contains(&full) {
                    return Err(recursive(&full));
                }
                if done.contains(&full) {
                    return Ok(());
                }
                visiting.push(full);
                for f in &record.fields {
                    self.check_acyclic(&f.schema, &join(path, &f.name), visiting, done)?;
                }
                if let Some(full) = visiting.pop() {
                    done.insert(full);
                }
                Ok(())
            }
            AvroSchema::Array(a) => self.check_acyclic(&a.items, path, visiting, done),
            AvroSchema::Map(m) => self.check_acyclic(&m.types, path, visiting, done),
            AvroSchema::Union(u) => u
                .variants()
                .iter()
                .try_for_each(|v| self.check_acyclic(v, path, visiting, done)),
            _ => Ok(()),
        }
    }

    /// Follows references until a non-reference schema.
    fn resolve(&self, mut schema: &'a AvroSchema, field: &str) -> Result<&'a AvroSchema> {
        // A chain of references longer than the number of names is a cycle.
        for _ in 0..=self.by_name.len() {
            match schema {
                AvroSchema::Ref { name } => {
                    schema = self
                        .by_name
                        .get(&name.fullname(None))
                        .copied()
                        .ok_or_else(|| {
                            schema_err(field, format!("unknown type reference {name}"))
                        })?;
                }
                other => return Ok(other),
            }
        }
        Err(schema_err(field, "cyclic type reference"))
    }

    /// Splits a nullable union: returns the non-null schema, and for unions the branch indexes
    /// of null and of the value.
    fn nullable(&self, schema: &'a AvroSchema, field: &str) -> Result<Nullable<'a>> {
        let schema = self.resolve(schema, field)?;
        match schema {
            AvroSchema::Union(union) => split_union(union, field).and_then(|(inner, branches)| {
                Ok(Nullable {
                    inner: self.resolve(inner, field)?,
                    branches,
                })
            }),
            other => Ok(Nullable {
                inner: other,
                branches: None,
            }),
        }
    }
}

fn collect_names<'a>(schema: &'a AvroSchema, out: &mut HashMap<String, &'a AvroSchema>) {
    match schema {
        AvroSchema::Record(record) => {
            out.insert(record.name.fullname(None), schema);
            for field in &record.fields {
                collect_names(&field.schema, out);
            }
        }
        AvroSchema::Enum(e) => {
            out.insert(e.name.fullname(None), schema);
        }
        AvroSchema::Fixed(f) | AvroSchema::Duration(f) => {
            out.insert(f.name.fullname(None), schema);
        }
        AvroSchema::Decimal(DecimalSchema {
            inner: InnerDecimalSchema::Fixed(f),
            ..
        }) => {
            out.insert(f.name.fullname(None), schema);
        }
        AvroSchema::Uuid(UuidSchema::Fixed(f)) => {
            out.insert(f.name.fullname(None), schema);
        }
        AvroSchema::Array(a) => collect_names(&a.items, out),
        AvroSchema::Map(m) => collect_names(&m.types, out),
        AvroSchema::Union(u) => {
            for v in u.variants() {
                collect_names(v, out);
            }
        }
        _ => {}
    }
}

/// A schema with its optional null union split off.
struct Nullable<'a> {
    inner: &'a AvroSchema,
    /// `(null branch, value branch)` when the schema was a union.
    branches: Option<(u32, u32)>,
}

impl Nullable<'_> {
    fn is_nullable(&self) -> bool {
        matches!(self.branches, Some((n, v)) if n != v)
    }
}

type UnionSplit<'a> = (&'a AvroSchema, Option<(u32, u32)>);

fn split_union<'a>(union: &'a UnionSchema, field: &str) -> Result<UnionSplit<'a>> {
    let variants = union.variants();
    match variants {
        [single] if !matches!(single, AvroSchema::Null) => Ok((single, Some((0, 0)))),
        [AvroSchema::Null, other] => Ok((other, Some((0, 1)))),
        [other, AvroSchema::Null] => Ok((other, Some((1, 0)))),
        _ => Err(schema_err(
            field,
            format!(
                "only unions of null and one other type are supported, found {} branches",
                variants.len()
            ),
        )),
    }
}

/// Converts a top-level Avro record schema to an Arrow schema (see the module doc for the type
/// mapping). Field order and names are kept; nullability follows the null unions.
pub fn avro_schema_to_arrow(schema: &AvroSchema) -> Result<SchemaRef> {
    let names = Names::checked(schema)?;
    let root = names.resolve(schema, "")?;
    let AvroSchema::Record(record) = root else {
        return Err(schema_err("", "top-level Avro schema must be a record"));
    };
    let fields = record_fields(&names, record, "")?;
    Ok(Arc::new(ArrowSchema::new(fields)))
}

fn record_fields(names: &Names<'_>, record: &RecordSchema, path: &str) -> Result<Fields> {
    record
        .fields
        .iter()
        .map(|f| {
            let p = join(path, &f.name);
            arrow_field(names, &f.name, &f.schema, &p)
        })
        .collect::<Result<Vec<_>>>()
        .map(Fields::from)
}

fn arrow_field(names: &Names<'_>, name: &str, schema: &AvroSchema, path: &str) -> Result<FieldRef> {
    let n = names.nullable(schema, path)?;
    let dt = arrow_type(names, n.inner, path)?;
    Ok(Arc::new(Field::new(name, dt, n.is_nullable())))
}

fn arrow_type(names: &Names<'_>, schema: &AvroSchema, path: &str) -> Result<DataType> {
    let dt = match schema {
        AvroSchema::Null => DataType::Null,
        AvroSchema::Boolean => DataType::Boolean,
        AvroSchema::Int => DataType::Int32,
        AvroSchema::Long => DataType::Int64,
        AvroSchema::Float => DataType::Float32,
        AvroSchema::Double => DataType::Float64,
        AvroSchema::Bytes | AvroSchema::Uuid(UuidSchema::Bytes) => DataType::Binary,
        AvroSchema::String | AvroSchema::Enum(_) | AvroSchema::Uuid(UuidSchema::String) => {
            DataType::Utf8
        }
        AvroSchema::Fixed(f) | AvroSchema::Uuid(UuidSchema::Fixed(f)) => {
            let size = i32::try_from(f.size)
                .map_err(|_| schema_err(path, format!("fixed size {} too large", f.size)))?;
            DataType::FixedSizeBinary(size)
        }
        AvroSchema::Decimal(d) => {
            let (p, s) = decimal_precision_scale(d, path)?;
            DataType::Decimal128(p, s)
        }
        AvroSchema::Date => DataType::Date32,
        AvroSchema::TimeMillis => DataType::Time32(TimeUnit::Millisecond),
        AvroSchema::TimeMicros => DataType::Time64(TimeUnit::Microsecond),
        AvroSchema::TimestampMillis => DataType::Timestamp(TimeUnit::Millisecond, Some(UTC.into())),
        AvroSchema::TimestampMicros => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
        AvroSchema::TimestampNanos => DataType::Timestamp(TimeUnit::Nanosecond, Some(UTC.into())),
        AvroSchema::LocalTimestampMillis => DataType::Timestamp(TimeUnit::Millisecond, None),
        AvroSchema::LocalTimestampMicros => DataType::Timestamp(TimeUnit::Microsecond, None),
        AvroSchema::LocalTimestampNanos => DataType::Timestamp(TimeUnit::Nanosecond, None),
        AvroSchema::Record(r) => DataType::Struct(record_fields(names, r, path)?),
        AvroSchema::Array(a) => DataType::List(arrow_field(names, LIST_ITEM_NAME, &a.items, path)?),
        AvroSchema::Map(m) => DataType::Map(map_entries_field(names, &m.types, path)?, false),
        AvroSchema::Union(u) => {
            // A union nested directly in a union is invalid Avro; a union as an array item or map
            // value is handled by `arrow_field`.
            let (inner, _) = split_union(u, path)?;
            arrow_type(names, names.resolve(inner, path)?, path)?
        }
        AvroSchema::Ref { .. } => arrow_type(names, names.resolve(schema, path)?, path)?,
        AvroSchema::BigDecimal => {
            return Err(schema_err(
                path,
                "big-decimal has no fixed precision and scale",
            ))
        }
        AvroSchema::Duration(_) => return Err(schema_err(path, "duration is not supported")),
    };
    Ok(dt)
}

fn map_entries_field(names: &Names<'_>, values: &AvroSchema, path: &str) -> Result<FieldRef> {
    let key = Arc::new(Field::new("key", DataType::Utf8, false));
    let value = arrow_field(names, "value", values, path)?;
    Ok(Arc::new(Field::new(
        MAP_ENTRIES_NAME,
        DataType::Struct(Fields::from(vec![key, value])),
        false,
    )))
}

fn decimal_precision_scale(d: &DecimalSchema, path: &str) -> Result<(u8, i8)> {
    if d.precision == 0 || d.precision > MAX_DECIMAL128_PRECISION {
        return Err(schema_err(
            path,
            format!("decimal precision {} outside 1..=38", d.precision),
        ));
    }
    if d.scale > d.precision {
        return Err(schema_err(
            path,
            format!("decimal scale {} above precision {}", d.scale, d.precision),
        ));
    }
    let p = u8::try_from(d.precision).map_err(|_| schema_err(path, "decimal precision"))?;
    let s = i8::try_from(d.scale).map_err(|_| schema_err(path, "decimal scale"))?;
    Ok((p, s))
}

// ---------------------------------------------------------------------------------------------
// Avro values -> Arrow arrays
// ---------------------------------------------------------------------------------------------

/// Converts Avro record values (as decoded with `schema`) to a batch with the given Arrow
/// schema. Columns are matched by name: a column of `target` that `schema` lacks is all null
/// (an error if it is not nullable), Avro fields `target` does not name are dropped, and a
/// column whose natural type (see the module doc) differs from the target type is cast to it.
pub fn avro_records_to_batch(
    schema: &AvroSchema,
    records: &[Value],
    target: &SchemaRef,
) -> Result<RecordBatch> {
    let names = Names::checked(schema)?;
    let root = names.resolve(schema, "")?;
    let AvroSchema::Record(record) = root else {
        return Err(schema_err("", "top-level Avro schema must be a record"));
    };
    let rows: Vec<Option<&Value>> = records.iter().map(Some).collect();
    let rows = unwrap_records(&rows, "")?;
    let mut columns = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let name = field.name();
        let column = match record.lookup.get(name.as_str()) {
            Some(&idx) => {
                let avro_field = record.fields.get(idx).ok_or_else(|| {
                    schema_err(name, "record lookup table points past the fields")
                })?;
                let values = field_values(&rows, idx, name);
                let array = build_array(&names, &values, &avro_field.schema, name)?;
                cast_to(array, field.data_type(), name)?
            }
            None if field.is_nullable() => new_null_array(field.data_type(), records.len()),
            None => {
                return Err(schema_err(
                    name,
                    "column is not nullable but the Avro schema has no such field",
                ))
            }
        };
        columns.push(column);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(records.len()));
    RecordBatch::try_new_with_options(target.clone(), columns, &options).map_err(|e| {
        FormatError::Arrow {
            path: "avro records".to_string(),
            reason: e.to_string(),
        }
    })
}

/// Fails with [`FormatError::Schema`], naming the field, when `schema` is recursive (a record
/// that contains itself through its fields): such schemas have no Arrow counterpart and are
/// refused before any data is decoded with them.
pub(crate) fn check_not_recursive(schema: &AvroSchema) -> Result<()> {
    Names::checked(schema).map(|_| ())
}

fn cast_to(array: ArrayRef, to: &DataType, path: &str) -> Result<ArrayRef> {
    if array.data_type() == to {
        return Ok(array);
    }
    cast(&array, to).map_err(|e| {
        schema_err(
            path,
            format!("cannot cast {} to {to}: {e}", array.data_type()),
        )
    })
}

/// Strips union wrappers; `None` stands for null.
fn unwrap_value(v: Option<&Value>) -> Option<&Value> {
    let mut v = v?;
    while let Value::Union(_, inner) = v {
        v = inner;
    }
    match v {
        Value::Null => None,
        other => Some(other),
    }
}

/// The `(name, value)` pairs of an Avro record value.
type RecordFields<'v> = &'v [(String, Value)];

/// Checks that every non-null value is a record; returns their field lists.
fn unwrap_records<'v>(
    values: &[Option<&'v Value>],
    path: &str,
) -> Result<Vec<Option<RecordFields<'v>>>> {
    values
        .iter()
        .map(|v| match unwrap_value(*v) {
            None => Ok(None),
            Some(Value::Record(fields)) => Ok(Some(fields.as_slice())),
            Some(other) => Err(value_err(path, "record", other)),
        })
        .collect()
}

fn field_values<'v>(
    rows: &[Option<RecordFields<'v>>],
    idx: usize,
    name: &str,
) -> Vec<Option<&'v Value>> {
    rows.iter()
        .map(|row| {
            let fields = (*row)?;
            match fields.get(idx) {
                Some((n, v)) if n == name => Some(v),
                _ => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            }
        })
        .collect()
}

fn value_err(path: &str, expected: &str, found: &Value) -> FormatError {
    let mut shown = format!("{found:?}");
    if shown.len() > 80 {
        let mut cut = 80;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    schema_err(
        path,
        format!("expected an Avro {expected} value, found {shown}"),
    )
}

fn arrow_build_err(path: &str, e: impl std::fmt::Display) -> FormatError {
    FormatError::Arrow {
        path: path.to_string(),
        reason: e.to_string(),
    }
}

macro_rules! build_primitive {
    ($values:expr, $path:expr, $builder:expr, $expected:literal, $($pat:pat => $out:expr),+ $(,)?) => {{
        let mut builder = $builder;
        for v in $values {
            match unwrap_value(*v) {
                None => builder.append_null(),
                $(Some($pat) => builder.append_value($out),)+
                Some(other) => return Err(value_err($path, $expected, other)),
            }
        }
        Arc::new(builder.finish()) as ArrayRef
    }};
}

fn build_array(
    names: &Names<'_>,
    values: &[Option<&Value>],
    schema: &AvroSchema,
    path: &str,
) -> Result<ArrayRef> {
    let n = names.nullable(schema, path)?;
    let len = values.len();
    let array: ArrayRef = match n.inner {
        AvroSchema::Null => new_null_array(&DataType::Null, len),
        AvroSchema::Boolean => {
            build_primitive!(values, path, BooleanBuilder::with_capacity(len), "boolean",
            Value::Boolean(b) => *b)
        }
        AvroSchema::Int => build_primitive!(values, path, Int32Builder::with_capacity(len), "int",
            Value::Int(i) => *i),
        AvroSchema::Long => {
            build_primitive!(values, path, Int64Builder::with_capacity(len), "long",
            Value::Long(i) => *i, Value::Int(i) => i64::from(*i))
        }
        AvroSchema::Float => {
            build_primitive!(values, path, Float32Builder::with_capacity(len), "float",
            Value::Float(f) => *f)
        }
        AvroSchema::Double => {
            build_primitive!(values, path, Float64Builder::with_capacity(len), "double",
            Value::Double(f) => *f, Value::Float(f) => f64::from(*f))
        }
        AvroSchema::Bytes => build_primitive!(values, path, BinaryBuilder::new(), "bytes",
            Value::Bytes(b) => b),
        AvroSchema::Uuid(UuidSchema::Bytes) => {
            build_primitive!(values, path, BinaryBuilder::new(), "uuid",
            Value::Bytes(b) => b, Value::Uuid(u) => u.as_bytes())
        }
        AvroSchema::String | AvroSchema::Enum(_) | AvroSchema::Uuid(UuidSchema::String) => {
            build_primitive!(values, path, StringBuilder::new(), "string",
                Value::String(s) => s, Value::Enum(_, s) => s, Value::Uuid(u) => u.to_string())
        }
        AvroSchema::Fixed(f) | AvroSchema::Uuid(UuidSchema::Fixed(f)) => {
            let size =
                i32::try_from(f.size).map_err(|_| schema_err(path, "fixed size too large"))?;
            let mut builder = FixedSizeBinaryBuilder::with_capacity(len, size);
            for v in values {
                match unwrap_value(*v) {
                    None => builder.append_null(),
                    Some(Value::Fixed(_, b)) | Some(Value::Bytes(b)) => builder
                        .append_value(b)
                        .map_err(|e| arrow_build_err(path, e))?,
                    Some(Value::Uuid(u)) => builder
                        .append_value(u.as_bytes())
                        .map_err(|e| arrow_build_err(path, e))?,
                    Some(other) => return Err(value_err(path, "fixed", other)),
                }
            }
            Arc::new(builder.finish())
        }
        AvroSchema::Decimal(d) => {
            let (p, s) = decimal_precision_scale(d, path)?;
            let mut builder = Decimal128Builder::with_capacity(len);
            for v in values {
                match unwrap_value(*v) {
                    None => builder.append_null(),
                    Some(Value::Decimal(dec)) => {
                        let bytes = Vec::<u8>::try_from(dec)
                            .map_err(|e| schema_err(path, format!("decimal bytes: {e}")))?;
                        builder.append_value(i128_from_be(&bytes, path)?)
                    }
                    Some(Value::Bytes(b)) | Some(Value::Fixed(_, b)) => {
                        builder.append_value(i128_from_be(b, path)?)
                    }
                    Some(other) => return Err(value_err(path, "decimal", other)),
                }
            }
            Arc::new(
                builder
                    .finish()
                    .with_precision_and_scale(p, s)
                    .map_err(|e| arrow_build_err(path, e))?,
            )
        }
        AvroSchema::Date => {
            build_primitive!(values, path, Date32Builder::with_capacity(len), "date",
            Value::Date(d) => *d, Value::Int(d) => *d)
        }
        AvroSchema::TimeMillis => {
            build_primitive!(values, path, Time32MillisecondBuilder::with_capacity(len), "time-millis",
            Value::TimeMillis(t) => *t, Value::Int(t) => *t)
        }
        AvroSchema::TimeMicros => {
            build_primitive!(values, path, Time64MicrosecondBuilder::with_capacity(len), "time-micros",
            Value::TimeMicros(t) => *t, Value::Long(t) => *t)
        }
        AvroSchema::TimestampMillis | AvroSchema::LocalTimestampMillis => {
            let tz = matches!(n.inner, AvroSchema::TimestampMillis).then(|| Arc::from(UTC));
            let a = build_primitive!(values, path, TimestampMillisecondBuilder::with_capacity(len).with_timezone_opt(tz), "timestamp-millis",
                Value::TimestampMillis(t) => *t, Value::LocalTimestampMillis(t) => *t, Value::Long(t) => *t);
            a
        }
        AvroSchema::TimestampMicros | AvroSchema::LocalTimestampMicros => {
            let tz = matches!(n.inner, AvroSchema::TimestampMicros).then(|| Arc::from(UTC));
            let a = build_primitive!(values, path, TimestampMicrosecondBuilder::with_capacity(len).with_timezone_opt(tz), "timestamp-micros",
                Value::TimestampMicros(t) => *t, Value::LocalTimestampMicros(t) => *t, Value::Long(t) => *t);
            a
        }
        AvroSchema::TimestampNanos | AvroSchema::LocalTimestampNanos => {
            let tz = matches!(n.inner, AvroSchema::TimestampNanos).then(|| Arc::from(UTC));
            let a = build_primitive!(values, path, TimestampNanosecondBuilder::with_capacity(len).with_timezone_opt(tz), "timestamp-nanos",
                Value::TimestampNanos(t) => *t, Value::LocalTimestampNanos(t) => *t, Value::Long(t) => *t);
            a
        }
        AvroSchema::Record(record) => {
            let rows = unwrap_records(values, path)?;
            let fields = record_fields(names, record, path)?;
            let mut children = Vec::with_capacity(record.fields.len());
            for (idx, f) in record.fields.iter().enumerate() {
                let child_path = join(path, &f.name);
                let child_values = field_values(&rows, idx, &f.name);
                children.push(build_array(names, &child_values, &f.schema, &child_path)?);
            }
            let nulls = rows.iter().map(Option::is_some).collect::<Vec<_>>();
            let nulls = nulls.contains(&false).then(|| nulls.into());
            if fields.is_empty() {
                Arc::new(StructArray::new_empty_fields(len, nulls))
            } else {
                Arc::new(
                    StructArray::try_new(fields, children, nulls)
                        .map_err(|e| arrow_build_err(path, e))?,
                )
            }
        }
        AvroSchema::Array(a) => {
            let item_field = arrow_field(names, LIST_ITEM_NAME, &a.items, path)?;
            let mut offsets = Vec::with_capacity(len + 1);
            let mut valid = Vec::with_capacity(len);
            let mut items: Vec<Option<&Value>> = Vec::new();
            offsets.push(0i32);
            for v in values {
                match unwrap_value(*v) {
                    None => valid.push(false),
                    Some(Value::Array(elems)) => {
                        items.extend(elems.iter().map(Some));
                        valid.push(true);
                    }
                    Some(other) => return Err(value_err(path, "array", other)),
                }
                offsets.push(offset_i32(items.len(), path)?);
            }
            let child = build_array(names, &items, &a.items, path)?;
            let nulls = valid.contains(&false).then(|| valid.into());
            Arc::new(
                ListArray::try_new(
                    item_field,
                    arrow::buffer::OffsetBuffer::new(offsets.into()),
                    child,
                    nulls,
                )
                .map_err(|e| arrow_build_err(path, e))?,
            )
        }
        AvroSchema::Map(m) => {
            let entries_field = map_entries_field(names, &m.types, path)?;
            let mut offsets = Vec::with_capacity(len + 1);
            let mut valid = Vec::with_capacity(len);
            let mut keys: Vec<&str> = Vec::new();
            let mut vals: Vec<Option<&Value>> = Vec::new();
            offsets.push(0i32);
            for v in values {
                match unwrap_value(*v) {
                    None => valid.push(false),
                    Some(Value::Map(entries)) => {
                        // Avro maps are unordered; sort by key so the output is deterministic.
                        let mut sorted: Vec<_> = entries.iter().collect();
                        sorted.sort_by(|a, b| a.0.cmp(b.0));
                        for (k, v) in sorted {
                            keys.push(k);
                            vals.push(Some(v));
                        }
                        valid.push(true);
                    }
                    Some(other) => return Err(value_err(path, "map", other)),
                }
                offsets.push(offset_i32(keys.len(), path)?);
            }
            let DataType::Struct(entry_fields) = entries_field.data_type() else {
                return Err(schema_err(path, "map entries are not a struct"));
            };
            let key_array: ArrayRef = Arc::new(StringArray::from(keys));
            let value_array = build_array(names, &vals, &m.types, path)?;
            let entries =
                StructArray::try_new(entry_fields.clone(), vec![key_array, value_array], None)
                    .map_err(|e| arrow_build_err(path, e))?;
            let nulls = valid.contains(&false).then(|| valid.into());
            Arc::new(
                MapArray::try_new(
                    entries_field,
                    arrow::buffer::OffsetBuffer::new(offsets.into()),
                    entries,
                    nulls,
                    false,
                )
                .map_err(|e| arrow_build_err(path, e))?,
            )
        }
        AvroSchema::Union(_) | AvroSchema::Ref { .. } => {
            return Err(schema_err(path, "nested union or unresolved reference"))
        }
        AvroSchema::BigDecimal => {
            return Err(schema_err(
                path,
                "big-decimal has no fixed precision and scale",
            ))
        }
        AvroSchema::Duration(_) => return Err(schema_err(path, "duration is not supported")),
    };
    Ok(array)
}

fn offset_i32(n: usize, path: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| schema_err(path, "more than i32::MAX list or map items"))
}

/// Big-endian two's complement (any length up to 16 bytes, or longer if sign-extended) to i128.
pub(crate) fn i128_from_be(bytes: &[u8], path: &str) -> Result<i128> {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let fill = if negative { 0xFF } else { 0x00 };
    let mut out = [fill; 16];
    if bytes.len() > 16 {
        let (extra, rest) = bytes.split_at(bytes.len() - 16);
        if extra.iter().any(|b| *b != fill)
            || rest.first().is_some_and(|b| (b & 0x80 != 0) != negative)
        {
            return Err(schema_err(path, "decimal value does not fit in 128 bits"));
        }
        out.copy_from_slice(rest);
    } else {
        let start = 16 - bytes.len();
        if let Some(dst) = out.get_mut(start..) {
            dst.copy_from_slice(bytes);
        }
    }
    Ok(i128::from_be_bytes(out))
}

/// i128 to big-endian two's complement of exactly `size` bytes (a `fixed` decimal), or of the
/// fewest bytes that hold it (`size` = None, a `bytes` decimal).
pub(crate) fn i128_to_be(value: i128, size: Option<usize>, path: &str) -> Result<Vec<u8>> {
    let full = value.to_be_bytes();
    let fill = if value < 0 { 0xFF } else { 0x00 };
    let minimal = {
        let mut start = 0;
        while start < 15 {
            let (Some(b), Some(next)) = (full.get(start), full.get(start + 1)) else {
                break;
            };
            if *b == fill && (next & 0x80 != 0) == (value < 0) {
                start += 1;
            } else {
                break;
            }
        }
        full.get(start..).map(<[u8]>::to_vec).unwrap_or_default()
    };
    match size {
        None => Ok(minimal),
        Some(size) if size >= minimal.len() => {
            let mut out = vec![fill; size - minimal.len()];
            out.extend_from_slice(&minimal);
            Ok(out)
        }
        Some(size) => Err(schema_err(
            path,
            format!("decimal value {value} does not fit in fixed({size})"),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Arrow arrays -> Avro values
// ---------------------------------------------------------------------------------------------

/// Converts every row of `batch` to an Avro record value of `schema` (a record schema), ready
/// for `apache_avro::to_avro_datum`. Columns are matched to fields by name; a field without a
/// column is written as null (an error if the field is not nullable). Columns whose type differs
/// from the field's natural Arrow type (e.g. `Int16` for an Avro `int`, `Utf8View` for a
/// `string`) are cast first.
pub fn batch_to_avro_records(batch: &RecordBatch, schema: &AvroSchema) -> Result<Vec<Value>> {
    let names = Names::checked(schema)?;
    let root = names.resolve(schema, "")?;
    let AvroSchema::Record(record) = root else {
        return Err(schema_err("", "top-level Avro schema must be a record"));
    };
    let columns: Vec<(&str, ArrayRef)> = batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| (f.name().as_str(), c.clone()))
        .collect();
    let rows = struct_to_values(&names, record, &columns, batch.num_rows(), None, "")?;
    Ok(rows.into_iter().map(|r| r.unwrap_or(Value::Null)).collect())
}

/// Builds record values from named columns; `None` rows are null structs.
fn struct_to_values(
    names: &Names<'_>,
    record: &RecordSchema,
    columns: &[(&str, ArrayRef)],
    len: usize,
    valid: Option<&arrow::buffer::NullBuffer>,
    path: &str,
) -> Result<Vec<Option<Value>>> {
    let mut per_field: Vec<std::vec::IntoIter<Value>> = Vec::with_capacity(record.fields.len());
    for f in &record.fields {
        let p = join(path, &f.name);
        let values = match columns.iter().find(|(n, _)| *n == f.name) {
            Some((_, array)) => array_to_values(names, array, &f.schema, &p)?,
            None => {
                let n = names.nullable(&f.schema, &p)?;
                match n.branches {
                    Some((null_idx, v)) if null_idx != v => {
                        vec![Value::Union(null_idx, Box::new(Value::Null)); len]
                    }
                    _ => {
                        return Err(schema_err(
                            &p,
                            "field is not nullable and the batch has no such column",
                        ))
                    }
                }
            }
        };
        per_field.push(values.into_iter());
    }
    let mut out = Vec::with_capacity(len);
    for row in 0..len {
        let mut fields = Vec::with_capacity(record.fields.len());
        for (f, it) in record.fields.iter().zip(per_field.iter_mut()) {
            let v = it
                .next()
                .ok_or_else(|| schema_err(&join(path, &f.name), "column shorter than batch"))?;
            fields.push((f.name.clone(), v));
        }
        let is_valid = valid.is_none_or(|n| n.is_valid(row));
        out.push(is_valid.then_some(Value::Record(fields)));
    }
    Ok(out)
}

fn downcast_err(path: &str, expected: &str, found: &DataType) -> FormatError {
    schema_err(
        path,
        format!("expected an Arrow {expected} column, found {found}"),
    )
}

/// Converts a column to Avro values of `schema` (wrapping in the null union where there is one).
fn array_to_values(
    names: &Names<'_>,
    array: &ArrayRef,
    schema: &AvroSchema,
    path: &str,
) -> Result<Vec<Value>> {
    let n = names.nullable(schema, path)?;
    let natural = arrow_type(names, n.inner, path)?;
    let array = match (&natural, array.data_type()) {
        // Nested types are converted child by child (names of nested fields may differ).
        (DataType::Struct(_), DataType::Struct(_))
        | (DataType::List(_), DataType::List(_) | DataType::LargeList(_))
        | (DataType::Map(_, _), DataType::Map(_, _)) => array.clone(),
        _ => cast_to(array.clone(), &natural, path)?,
    };
    let inner = inner_values(names, &array, n.inner, path)?;
    inner
        .into_iter()
        .map(|v| match (v, n.branches) {
            (None, Some((null_idx, value_idx))) if null_idx != value_idx => {
                Ok(Value::Union(null_idx, Box::new(Value::Null)))
            }
            (None, _) => Err(schema_err(path, "null value in a non-nullable field")),
            (Some(v), Some((_, value_idx))) => Ok(Value::Union(value_idx, Box::new(v))),
            (Some(v), None) => Ok(v),
        })
        .collect()
}

macro_rules! primitive_values {
    ($array:expr, $path:expr, $t:ty, $name:literal, $wrap:expr) => {{
        let a = $array
            .as_primitive_opt::<$t>()
            .ok_or_else(|| downcast_err($path, $name, $array.data_type()))?;
        a.iter()
            .map(|v| v.map($wrap))
            .collect::<Vec<Option<Value>>>()
    }};
}

fn inner_values(
    names: &Names<'_>,
    array: &ArrayRef,
    schema: &AvroSchema,
    path: &str,
) -> Result<Vec<Option<Value>>> {
    let values = match schema {
        AvroSchema::Null => vec![None; array.len()],
        AvroSchema::Boolean => {
            let a = array
                .as_boolean_opt()
                .ok_or_else(|| downcast_err(path, "boolean", array.data_type()))?;
            a.iter().map(|v| v.map(Value::Boolean)).collect()
        }
        AvroSchema::Int => primitive_values!(array, path, Int32Type, "int32", Value::Int),
        AvroSchema::Long => primitive_values!(array, path, Int64Type, "int64", Value::Long),
        AvroSchema::Float => primitive_values!(array, path, Float32Type, "float32", Value::Float),
        AvroSchema::Double => primitive_values!(array, path, Float64Type, "float64", Value::Double),
        AvroSchema::Date => primitive_values!(array, path, Date32Type, "date32", Value::Date),
        AvroSchema::TimeMillis => {
            primitive_values!(
                array,
                path,
                Time32MillisecondType,
                "time32(ms)",
                Value::TimeMillis
            )
        }
        AvroSchema::TimeMicros => {
            primitive_values!(
                array,
                path,
                Time64MicrosecondType,
                "time64(us)",
                Value::TimeMicros
            )
        }
        AvroSchema::TimestampMillis => primitive_values!(
            array,
            path,
            TimestampMillisecondType,
            "timestamp(ms)",
            Value::TimestampMillis
        ),
        AvroSchema::TimestampMicros => primitive_values!(
            array,
            path,
            TimestampMicrosecondType,
            "timestamp(us)",
            Value::TimestampMicros
        ),
        AvroSchema::TimestampNanos => primitive_values!(
            array,
            path,
            TimestampNanosecondType,
            "timestamp(ns)",
            Value::TimestampNanos
        ),
        AvroSchema::LocalTimestampMillis => primitive_values!(
            array,
            path,
            TimestampMillisecondType,
            "timestamp(ms)",
            Value::LocalTimestampMillis
        ),
        AvroSchema::LocalTimestampMicros => primitive_values!(
            array,
            path,
            TimestampMicrosecondType,
            "timestamp(us)",
            Value::LocalTimestampMicros
        ),
        AvroSchema::LocalTimestampNanos => primitive_values!(
            array,
            path,
            TimestampNanosecondType,
            "timestamp(ns)",
            Value::LocalTimestampNanos
        ),
        AvroSchema::String | AvroSchema::Uuid(UuidSchema::String) => {
            let a = array
                .as_string_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "utf8", array.data_type()))?;
            a.iter()
                .map(|v| v.map(|s| Value::String(s.to_string())))
                .collect()
        }
        AvroSchema::Enum(e) => {
            let a = array
                .as_string_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "utf8", array.data_type()))?;
            a.iter()
                .map(|v| {
                    v.map(|s| {
                        let idx = e
                            .symbols
                            .iter()
                            .position(|sym| sym == s)
                            .and_then(|i| u32::try_from(i).ok())
                            .ok_or_else(|| {
                                schema_err(
                                    path,
                                    format!("{s:?} is not a symbol of enum {}", e.name),
                                )
                            })?;
                        Ok(Value::Enum(idx, s.to_string()))
                    })
                    .transpose()
                })
                .collect::<Result<Vec<_>>>()?
        }
        AvroSchema::Bytes | AvroSchema::Uuid(UuidSchema::Bytes) => {
            let a = array
                .as_binary_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "binary", array.data_type()))?;
            a.iter()
                .map(|v| v.map(|b| Value::Bytes(b.to_vec())))
                .collect()
        }
        AvroSchema::Fixed(f) | AvroSchema::Uuid(UuidSchema::Fixed(f)) => {
            let a = array
                .as_fixed_size_binary_opt()
                .ok_or_else(|| downcast_err(path, "fixed-size binary", array.data_type()))?;
            a.iter()
                .map(|v| v.map(|b| Value::Fixed(f.size, b.to_vec())))
                .collect()
        }
        AvroSchema::Decimal(d) => {
            let a = array
                .as_primitive_opt::<Decimal128Type>()
                .ok_or_else(|| downcast_err(path, "decimal128", array.data_type()))?;
            let size = match &d.inner {
                InnerDecimalSchema::Fixed(f) => Some(f.size),
                InnerDecimalSchema::Bytes => None,
            };
            a.iter()
                .map(|v| {
                    v.map(|x| i128_to_be(x, size, path).map(|b| Value::Decimal(Decimal::from(b))))
                        .transpose()
                })
                .collect::<Result<Vec<_>>>()?
        }
        AvroSchema::Record(record) => {
            let s = array
                .as_struct_opt()
                .ok_or_else(|| downcast_err(path, "struct", array.data_type()))?;
            let columns: Vec<(&str, ArrayRef)> = s
                .fields()
                .iter()
                .zip(s.columns())
                .map(|(f, c)| (f.name().as_str(), c.clone()))
                .collect();
            struct_to_values(names, record, &columns, s.len(), s.nulls(), path)?
        }
        AvroSchema::Array(items) => {
            if let Some(l) = array.as_list_opt::<i32>() {
                let offsets: Vec<usize> = l.value_offsets().iter().map(|o| *o as usize).collect();
                list_values(names, l.values(), &offsets, l.nulls(), &items.items, path)?
            } else if let Some(l) = array.as_list_opt::<i64>() {
                let offsets: Vec<usize> = l.value_offsets().iter().map(|o| *o as usize).collect();
                list_values(names, l.values(), &offsets, l.nulls(), &items.items, path)?
            } else {
                return Err(downcast_err(path, "list", array.data_type()));
            }
        }
        AvroSchema::Map(m) => {
            let map = array
                .as_map_opt()
                .ok_or_else(|| downcast_err(path, "map", array.data_type()))?;
            let keys = cast_to(map.keys().clone(), &DataType::Utf8, path)?;
            let keys = keys
                .as_string_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "utf8 map key", keys.data_type()))?;
            let values = array_to_values(names, map.values(), &m.types, path)?;
            let offsets: Vec<usize> = map.value_offsets().iter().map(|o| *o as usize).collect();
            let mut out = Vec::with_capacity(map.len());
            for (row, w) in offsets.windows(2).enumerate() {
                let (Some(&start), Some(&end)) = (w.first(), w.get(1)) else {
                    continue;
                };
                if map.is_null(row) {
                    out.push(None);
                    continue;
                }
                let mut entries = HashMap::with_capacity(end.saturating_sub(start));
                for i in start..end {
                    if keys.is_null(i) {
                        return Err(schema_err(path, "null map key"));
                    }
                    let v = values
                        .get(i)
                        .cloned()
                        .ok_or_else(|| schema_err(path, "map offsets past the values"))?;
                    entries.insert(keys.value(i).to_string(), v);
                }
                out.push(Some(Value::Map(entries)));
            }
            out
        }
        AvroSchema::Union(_) | AvroSchema::Ref { .. } => {
            return Err(schema_err(path, "nested union or unresolved reference"))
        }
        AvroSchema::BigDecimal => {
            return Err(schema_err(
                path,
                "big-decimal has no fixed precision and scale",
            ))
        }
        AvroSchema::Duration(_) => return Err(schema_err(path, "duration is not supported")),
    };
    Ok(values)
}

fn list_values(
    names: &Names<'_>,
    child: &ArrayRef,
    offsets: &[usize],
    nulls: Option<&arrow::buffer::NullBuffer>,
    items: &AvroSchema,
    path: &str,
) -> Result<Vec<Option<Value>>> {
    let child_values = array_to_values(names, child, items, path)?;
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for (row, w) in offsets.windows(2).enumerate() {
        let (Some(&start), Some(&end)) = (w.first(), w.get(1)) else {
            continue;
        };
        if nulls.is_some_and(|n| n.is_null(row)) {
            out.push(None);
            continue;
        }
        let elems = child_values
            .get(start..end)
            .ok_or_else(|| schema_err(path, "list offsets past the values"))?;
        out.push(Some(Value::Array(elems.to_vec())));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Arrow schema -> Avro schema (Spark-like)
// ---------------------------------------------------------------------------------------------

/// A JSON value with ordered object keys, so schemas come out byte-for-byte as Spark writes them.
enum Json {
    Null,
    Num(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    fn str(s: impl Into<String>) -> Self {
        Json::Str(s.into())
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Num(n) => {
                let _ = write!(out, "{n}");
            }
            Json::Str(s) => {
                out.push_str(&serde_json::Value::String(s.clone()).to_string());
            }
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Obj(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String((*k).to_string()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Writes the Avro schema JSON Spark (Hudi's `AvroConversionUtils`) derives from a struct type:
/// a record `name` in `namespace`; nullable fields as `["null", T]` with `"default": null`;
/// meta fields with `"doc": ""`; nested records named after their field in namespace
/// `<namespace>.<record name>`; decimals as `fixed` named `fixed` in namespace
/// `<namespace>.<record name>.<field>` of the minimal size for the precision; timestamps with a
/// zone as `timestamp-*`, without as `local-timestamp-*`.
pub fn arrow_schema_to_avro_json(
    schema: &ArrowSchema,
    name: &str,
    namespace: &str,
) -> Result<String> {
    let json = record_json(schema.fields(), name, namespace, "")?;
    let mut out = String::new();
    json.write(&mut out);
    Ok(out)
}

/// [`arrow_schema_to_avro_json`], parsed.
pub fn arrow_schema_to_avro(schema: &SchemaRef, name: &str, namespace: &str) -> Result<AvroSchema> {
    parse_avro_schema(&arrow_schema_to_avro_json(schema, name, namespace)?)
}

fn record_json(fields: &Fields, name: &str, namespace: &str, path: &str) -> Result<Json> {
    let child_ns = if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}.{name}")
    };
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let p = join(path, f.name());
        let ty = field_type_json(f, &child_ns, &p)?;
        let mut entry = vec![("name", Json::str(f.name().as_str())), ("type", ty)];
        if path.is_empty() && meta::is_meta_column(f.name()) {
            entry.push(("doc", Json::str("")));
        }
        if f.is_nullable() {
            entry.push(("default", Json::Null));
        }
        out.push(Json::Obj(entry));
    }
    let mut obj = vec![("type", Json::str("record")), ("name", Json::str(name))];
    if !namespace.is_empty() {
        obj.push(("namespace", Json::str(namespace)));
    }
    obj.push(("fields", Json::Arr(out)));
    Ok(Json::Obj(obj))
}

/// The type of a field; `namespace` is that of the enclosing record's children.
fn field_type_json(field: &Field, namespace: &str, path: &str) -> Result<Json> {
    let ty = type_json(field.data_type(), field.name(), namespace, path)?;
    Ok(if field.is_nullable() {
        Json::Arr(vec![Json::str("null"), ty])
    } else {
        ty
    })
}

fn logical(base: &str, logical: &str) -> Json {
    Json::Obj(vec![
        ("type", Json::str(base)),
        ("logicalType", Json::str(logical)),
    ])
}

/// Minimal bytes of a two's complement integer holding every `precision`-digit number (Spark's
/// `minBytesForPrecision`).
fn min_bytes_for_precision(precision: u8) -> i64 {
    let mut n: i32 = 1;
    while 2f64.powi(8 * n - 1) < 10f64.powi(i32::from(precision)) {
        n += 1;
    }
    i64::from(n)
}

fn type_json(dt: &DataType, field_name: &str, namespace: &str, path: &str) -> Result<Json> {
    let json = match dt {
        DataType::Boolean => Json::str("boolean"),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            Json::str("int")
        }
        DataType::Int64 | DataType::UInt32 => Json::str("long"),
        DataType::Float32 => Json::str("float"),
        DataType::Float64 => Json::str("double"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Json::str("string"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Json::str("bytes"),
        DataType::FixedSizeBinary(n) => Json::Obj(vec![
            ("type", Json::str("fixed")),
            ("name", Json::str("fixed")),
            ("namespace", Json::str(format!("{namespace}.{field_name}"))),
            ("size", Json::Num(i64::from(*n))),
        ]),
        DataType::Decimal128(p, s) => {
            if *s < 0 {
                return Err(schema_err(path, format!("negative decimal scale {s}")));
            }
            Json::Obj(vec![
                ("type", Json::str("fixed")),
                ("name", Json::str("fixed")),
                ("namespace", Json::str(format!("{namespace}.{field_name}"))),
                ("size", Json::Num(min_bytes_for_precision(*p))),
                ("logicalType", Json::str("decimal")),
                ("precision", Json::Num(i64::from(*p))),
                ("scale", Json::Num(i64::from(*s))),
            ])
        }
        DataType::Date32 => logical("int", "date"),
        DataType::Time32(TimeUnit::Millisecond) => logical("int", "time-millis"),
        DataType::Time64(TimeUnit::Microsecond) => logical("long", "time-micros"),
        DataType::Timestamp(unit, tz) => {
            let base = match unit {
                TimeUnit::Millisecond => "timestamp-millis",
                TimeUnit::Microsecond => "timestamp-micros",
                TimeUnit::Nanosecond => "timestamp-nanos",
                TimeUnit::Second => {
                    return Err(schema_err(path, "timestamps in seconds have no Avro type"))
                }
            };
            if tz.is_some() {
                logical("long", base)
            } else {
                logical("long", &format!("local-{base}"))
            }
        }
        // Spark names a nested record after its field, in the children's namespace.
        DataType::Struct(fields) => record_json(fields, field_name, namespace, path)?,
        DataType::List(item) | DataType::LargeList(item) | DataType::ListView(item) => {
            let items = if item.is_nullable() {
                Json::Arr(vec![
                    Json::str("null"),
                    type_json(item.data_type(), field_name, namespace, path)?,
                ])
            } else {
                type_json(item.data_type(), field_name, namespace, path)?
            };
            Json::Obj(vec![("type", Json::str("array")), ("items", items)])
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(schema_err(path, "map entries are not a struct"));
            };
            let (Some(key), Some(value)) = (kv.first(), kv.get(1)) else {
                return Err(schema_err(path, "map entries need a key and a value field"));
            };
            if !matches!(
                key.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                return Err(schema_err(
                    path,
                    format!("Avro map keys are strings, found {}", key.data_type()),
                ));
            }
            let values = if value.is_nullable() {
                Json::Arr(vec![
                    Json::str("null"),
                    type_json(value.data_type(), field_name, namespace, path)?,
                ])
            } else {
                type_json(value.data_type(), field_name, namespace, path)?
            };
            Json::Obj(vec![("type", Json::str("map")), ("values", values)])
        }
        other => {
            return Err(schema_err(
                path,
                format!("Arrow type {other} has no Avro counterpart"),
            ))
        }
    };
    Ok(json)
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )]

    use super::*;

    #[test]
    fn test_i128_be_roundtrip_various_sizes_equal() {
        for v in [
            0i128,
            1,
            -1,
            127,
            128,
            -128,
            -129,
            123_456_789,
            -987_654_321_012,
        ] {
            let b = i128_to_be(v, None, "x").unwrap();
            assert_eq!(i128_from_be(&b, "x").unwrap(), v, "minimal {v}");
            let b = i128_to_be(v, Some(9), "x").unwrap();
            assert_eq!(b.len(), 9);
            assert_eq!(i128_from_be(&b, "x").unwrap(), v, "fixed {v}");
        }
    }

    #[test]
    fn test_i128_to_be_too_small_fixed_errors() {
        assert!(i128_to_be(1 << 20, Some(2), "x").is_err());
    }

    #[test]
    fn test_min_bytes_for_precision_spark_values_match() {
        assert_eq!(min_bytes_for_precision(10), 5);
        assert_eq!(min_bytes_for_precision(15), 7);
        assert_eq!(min_bytes_for_precision(38), 16);
        assert_eq!(min_bytes_for_precision(1), 1);
    }
}
