//! Avro binary datums of a top-level record decoded straight into Arrow column builders,
//! for the columns asked only.
//!
//! The generic path ([`super::avro_records_to_batch`]) first decodes every field of every
//! record to an `apache_avro` value, allocating per field, then converts. This decoder walks
//! the writer schema once per record: fields the target schema does not name are skipped
//! (a string or bytes by its length, an array or map block by its byte size when the writer
//! recorded it), the others are appended to a builder of their natural Arrow type (the
//! mapping of [`super`]), and [`DirectDecoder::finish`] casts to the target type exactly as
//! the generic path does. It takes only target columns of primitive and logical types
//! (nullable or not); a target naming a record, array, map, uuid or a union of more than
//! null and one type is left to the generic path ([`DirectDecoder::try_new`] gives `None`),
//! while any of those may be skipped.

use std::sync::Arc;

use apache_avro::schema::{DecimalSchema, InnerDecimalSchema, Schema as AvroSchema};
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    Time32MillisecondBuilder, Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, SchemaRef};

use super::decimal::i128_from_be;
use super::schema::{decimal_precision_scale, Names};
use super::to_arrow::cast_to;
use super::UTC;
use crate::{FormatError, Result};

/// How to step over a value of one Avro type without decoding it.
#[derive(Debug, Clone)]
enum Skip {
    /// `null`: no bytes.
    Nothing,
    /// `boolean`, `float`, `double`, `fixed(n)`, `duration`: a fixed number of bytes.
    Bytes(usize),
    /// `int`, `long`, `enum` and their logical types: one variable-length integer.
    Varint,
    /// `string`, `bytes`: a length, then that many bytes.
    Sized,
    /// A union: the branch index, then a value of that branch.
    Union(Vec<Skip>),
    /// An array: blocks of items.
    Array(Box<Skip>),
    /// A map: blocks of string keys and values.
    Map(Box<Skip>),
    /// A record: its fields in order.
    Record(Vec<Skip>),
}

/// A builder of a column's natural Arrow type.
enum Builder {
    Null(usize),
    Boolean(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Bytes(BinaryBuilder),
    String(StringBuilder),
    Enum(StringBuilder, Vec<String>),
    Fixed(FixedSizeBinaryBuilder, usize),
    /// Precision, scale and, for a `fixed` decimal, its size.
    Decimal(Decimal128Builder, u8, i8, Option<usize>),
    Date(Date32Builder),
    TimeMillis(Time32MillisecondBuilder),
    TimeMicros(Time64MicrosecondBuilder),
    TimestampMillis(TimestampMillisecondBuilder),
    TimestampMicros(TimestampMicrosecondBuilder),
    TimestampNanos(TimestampNanosecondBuilder),
}

/// One target column read from the writer's record.
struct Column {
    name: String,
    /// `(null branch, value branch)` when the writer's field is a union.
    branches: Option<(i64, i64)>,
    builder: Builder,
}

/// What to do with one field of the writer's record.
enum Step {
    Skip(Skip),
    /// Append to `columns[i]`.
    Read(usize),
}

/// Decodes datums of one writer schema into a batch of a target schema; see the module doc.
pub(crate) struct DirectDecoder {
    target: SchemaRef,
    steps: Vec<Step>,
    columns: Vec<Column>,
    /// For each target field, the index in `columns` of its builder, or `None` when the writer
    /// has no such field (a null column, or an error if the field is not nullable).
    sources: Vec<Option<usize>>,
    rows: usize,
}

impl DirectDecoder {
    /// A decoder of datums written with `writer` (a record schema) into `target`, or `None`
    /// when the schema or a target column is outside what this decoder takes (the generic
    /// path then decodes the block and reports any error in the schema).
    pub(crate) fn try_new(writer: &AvroSchema, target: &SchemaRef) -> Option<Self> {
        let names = Names::checked(writer).ok()?;
        let AvroSchema::Record(record) = names.resolve(writer, "").ok()? else {
            return None;
        };
        let mut steps = Vec::with_capacity(record.fields.len());
        let mut columns = Vec::new();
        let mut sources = vec![None; target.fields().len()];
        for field in &record.fields {
            match target.index_of(&field.name) {
                Ok(t) if sources.get(t).is_some_and(Option::is_none) => {
                    let n = names.nullable(&field.schema, &field.name).ok()?;
                    let branches = n.branches.map(|(a, b)| (i64::from(a), i64::from(b)));
                    let builder = builder_for(n.inner, &field.name)?;
                    if let Some(slot) = sources.get_mut(t) {
                        *slot = Some(columns.len());
                    }
                    steps.push(Step::Read(columns.len()));
                    columns.push(Column {
                        name: field.name.clone(),
                        branches,
                        builder,
                    });
                }
                _ => steps.push(Step::Skip(skip_for(&names, &field.schema, 0)?)),
            }
        }
        Some(Self {
            target: target.clone(),
            steps,
            columns,
            sources,
            rows: 0,
        })
    }

    /// Rows appended since the last [`DirectDecoder::finish`].
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Decodes one datum (the binary encoding of one record) and appends its target fields.
    /// The error names the field; after an error the decoder must not be used again.
    pub(crate) fn push(&mut self, datum: &[u8]) -> std::result::Result<(), String> {
        let mut at = Cursor { rest: datum };
        for step in &self.steps {
            match step {
                Step::Skip(s) => skip(&mut at, s)?,
                Step::Read(i) => {
                    let column = self
                        .columns
                        .get_mut(*i)
                        .ok_or("decoder step points past its columns")?;
                    read_column(&mut at, column)
                        .map_err(|e| format!("field {}: {e}", column.name))?
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The rows appended since the last call, as a batch of the target schema; the decoder is
    /// then empty and takes further datums.
    pub(crate) fn finish(&mut self) -> Result<RecordBatch> {
        let rows = std::mem::take(&mut self.rows);
        let mut arrays = Vec::with_capacity(self.columns.len());
        for column in &mut self.columns {
            arrays.push(Some(finish_builder(&mut column.builder, &column.name)?));
        }
        let mut out = Vec::with_capacity(self.target.fields().len());
        for (field, source) in self.target.fields().iter().zip(&self.sources) {
            let array = match source
                .and_then(|i| arrays.get_mut(i))
                .and_then(Option::take)
            {
                Some(array) => cast_to(array, field.data_type(), field.name())?,
                None if field.is_nullable() => new_null_array(field.data_type(), rows),
                None => {
                    return Err(FormatError::Schema {
                        field: Some(field.name().clone()),
                        reason: "column is not nullable but the Avro schema has no such field"
                            .into(),
                    })
                }
            };
            out.push(array);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.target.clone(), out, &options).map_err(|e| {
            FormatError::Arrow {
                path: "avro records".to_string(),
                reason: e.to_string(),
            }
        })
    }
}

/// Deepest nesting of a skipped schema (unions, arrays, maps, records) taken; deeper schemas go
/// to the generic path.
const MAX_DEPTH: usize = 64;

fn skip_for(names: &Names<'_>, schema: &AvroSchema, depth: usize) -> Option<Skip> {
    if depth > MAX_DEPTH {
        return None;
    }
    let deeper = |s: &AvroSchema| skip_for(names, s, depth + 1);
    Some(match names.resolve(schema, "").ok()? {
        AvroSchema::Null => Skip::Nothing,
        AvroSchema::Boolean => Skip::Bytes(1),
        AvroSchema::Float => Skip::Bytes(4),
        AvroSchema::Double => Skip::Bytes(8),
        AvroSchema::Int
        | AvroSchema::Long
        | AvroSchema::Enum(_)
        | AvroSchema::Date
        | AvroSchema::TimeMillis
        | AvroSchema::TimeMicros
        | AvroSchema::TimestampMillis
        | AvroSchema::TimestampMicros
        | AvroSchema::TimestampNanos
        | AvroSchema::LocalTimestampMillis
        | AvroSchema::LocalTimestampMicros
        | AvroSchema::LocalTimestampNanos => Skip::Varint,
        AvroSchema::String | AvroSchema::Bytes | AvroSchema::BigDecimal => Skip::Sized,
        AvroSchema::Fixed(f) | AvroSchema::Duration(f) => Skip::Bytes(f.size),
        AvroSchema::Decimal(DecimalSchema { inner, .. }) => match inner {
            InnerDecimalSchema::Bytes => Skip::Sized,
            InnerDecimalSchema::Fixed(f) => Skip::Bytes(f.size),
        },
        AvroSchema::Uuid(u) => match u {
            apache_avro::schema::UuidSchema::Bytes | apache_avro::schema::UuidSchema::String => {
                Skip::Sized
            }
            apache_avro::schema::UuidSchema::Fixed(f) => Skip::Bytes(f.size),
        },
        AvroSchema::Union(u) => {
            Skip::Union(u.variants().iter().map(deeper).collect::<Option<_>>()?)
        }
        AvroSchema::Array(a) => Skip::Array(Box::new(deeper(&a.items)?)),
        AvroSchema::Map(m) => Skip::Map(Box::new(deeper(&m.types)?)),
        AvroSchema::Record(r) => Skip::Record(
            r.fields
                .iter()
                .map(|f| deeper(&f.schema))
                .collect::<Option<_>>()?,
        ),
        AvroSchema::Ref { .. } => return None,
    })
}

fn builder_for(schema: &AvroSchema, field: &str) -> Option<Builder> {
    let tz = |zoned: bool| zoned.then(|| Arc::<str>::from(UTC));
    Some(match schema {
        AvroSchema::Null => Builder::Null(0),
        AvroSchema::Boolean => Builder::Boolean(BooleanBuilder::new()),
        AvroSchema::Int => Builder::Int(Int32Builder::new()),
        AvroSchema::Long => Builder::Long(Int64Builder::new()),
        AvroSchema::Float => Builder::Float(Float32Builder::new()),
        AvroSchema::Double => Builder::Double(Float64Builder::new()),
        AvroSchema::Bytes => Builder::Bytes(BinaryBuilder::new()),
        AvroSchema::String => Builder::String(StringBuilder::new()),
        AvroSchema::Enum(e) => Builder::Enum(StringBuilder::new(), e.symbols.clone()),
        AvroSchema::Fixed(f) => {
            let size = i32::try_from(f.size).ok()?;
            Builder::Fixed(FixedSizeBinaryBuilder::new(size), f.size)
        }
        AvroSchema::Decimal(d) => {
            let (p, s) = decimal_precision_scale(d, field).ok()?;
            let size = match &d.inner {
                InnerDecimalSchema::Bytes => None,
                InnerDecimalSchema::Fixed(f) => Some(f.size),
            };
            Builder::Decimal(Decimal128Builder::new(), p, s, size)
        }
        AvroSchema::Date => Builder::Date(Date32Builder::new()),
        AvroSchema::TimeMillis => Builder::TimeMillis(Time32MillisecondBuilder::new()),
        AvroSchema::TimeMicros => Builder::TimeMicros(Time64MicrosecondBuilder::new()),
        AvroSchema::TimestampMillis | AvroSchema::LocalTimestampMillis => Builder::TimestampMillis(
            TimestampMillisecondBuilder::new()
                .with_timezone_opt(tz(matches!(schema, AvroSchema::TimestampMillis))),
        ),
        AvroSchema::TimestampMicros | AvroSchema::LocalTimestampMicros => Builder::TimestampMicros(
            TimestampMicrosecondBuilder::new()
                .with_timezone_opt(tz(matches!(schema, AvroSchema::TimestampMicros))),
        ),
        AvroSchema::TimestampNanos | AvroSchema::LocalTimestampNanos => Builder::TimestampNanos(
            TimestampNanosecondBuilder::new()
                .with_timezone_opt(tz(matches!(schema, AvroSchema::TimestampNanos))),
        ),
        // Records, arrays, maps, uuids, nested unions, references, big decimals and durations
        // go to the generic path.
        _ => return None,
    })
}

fn finish_builder(builder: &mut Builder, field: &str) -> Result<ArrayRef> {
    Ok(match builder {
        Builder::Null(n) => new_null_array(&DataType::Null, std::mem::take(n)),
        Builder::Boolean(b) => Arc::new(b.finish()),
        Builder::Int(b) => Arc::new(b.finish()),
        Builder::Long(b) => Arc::new(b.finish()),
        Builder::Float(b) => Arc::new(b.finish()),
        Builder::Double(b) => Arc::new(b.finish()),
        Builder::Bytes(b) => Arc::new(b.finish()),
        Builder::String(b) | Builder::Enum(b, _) => Arc::new(b.finish()),
        Builder::Fixed(b, _) => Arc::new(b.finish()),
        Builder::Decimal(b, p, s, _) => {
            Arc::new(b.finish().with_precision_and_scale(*p, *s).map_err(|e| {
                FormatError::Arrow {
                    path: field.to_string(),
                    reason: e.to_string(),
                }
            })?)
        }
        Builder::Date(b) => Arc::new(b.finish()),
        Builder::TimeMillis(b) => Arc::new(b.finish()),
        Builder::TimeMicros(b) => Arc::new(b.finish()),
        Builder::TimestampMillis(b) => Arc::new(b.finish()),
        Builder::TimestampMicros(b) => Arc::new(b.finish()),
        Builder::TimestampNanos(b) => Arc::new(b.finish()),
    })
}

/// The unread rest of a datum.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if n > self.rest.len() {
            return Err(format!(
                "the datum ends {} bytes before a value of {n} bytes ends",
                n - self.rest.len()
            ));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// A zig-zag variable-length `long`.
    fn long(&mut self) -> std::result::Result<i64, String> {
        let mut value: u64 = 0;
        for (i, shift) in (0..64).step_by(7).enumerate() {
            let (&byte, tail) = self
                .rest
                .split_first()
                .ok_or("the datum ends inside a variable-length integer")?;
            self.rest = tail;
            if i == 9 && byte > 1 {
                return Err("variable-length integer overflows 64 bits".into());
            }
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err("variable-length integer longer than 10 bytes".into())
    }

    fn int(&mut self) -> std::result::Result<i32, String> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("int value {v} out of the int range"))
    }

    /// A length (of bytes, a string, or an item count) that must not be negative.
    fn len(&mut self) -> std::result::Result<usize, String> {
        let v = self.long()?;
        usize::try_from(v).map_err(|_| format!("negative length {v}"))
    }

    fn sized(&mut self) -> std::result::Result<&'a [u8], String> {
        let n = self.len()?;
        self.take(n)
    }
}

fn skip(at: &mut Cursor<'_>, s: &Skip) -> std::result::Result<(), String> {
    match s {
        Skip::Nothing => {}
        Skip::Bytes(n) => {
            at.take(*n)?;
        }
        Skip::Varint => {
            at.long()?;
        }
        Skip::Sized => {
            at.sized()?;
        }
        Skip::Union(branches) => {
            let i = at.long()?;
            let branch = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| format!("union branch {i} of {}", branches.len()))?;
            skip(at, branch)?;
        }
        Skip::Array(item) => skip_blocks(at, |at| skip(at, item))?,
        Skip::Map(value) => skip_blocks(at, |at| {
            at.sized()?;
            skip(at, value)
        })?,
        Skip::Record(fields) => {
            for f in fields {
                skip(at, f)?;
            }
        }
    }
    Ok(())
}

/// Steps over the blocks of an array or map: a count, negative when the block's byte size
/// follows (then the block is stepped over whole), zero at the end.
fn skip_blocks(
    at: &mut Cursor<'_>,
    mut item: impl FnMut(&mut Cursor<'_>) -> std::result::Result<(), String>,
) -> std::result::Result<(), String> {
    loop {
        let count = at.long()?;
        if count == 0 {
            return Ok(());
        }
        if count < 0 {
            let size = at.len()?;
            at.take(size)?;
            continue;
        }
        for _ in 0..count {
            item(at)?;
        }
    }
}

fn read_column(at: &mut Cursor<'_>, column: &mut Column) -> std::result::Result<(), String> {
    if let Some((null, value)) = column.branches {
        let branch = at.long()?;
        if branch == null && null != value {
            append_null(&mut column.builder);
            return Ok(());
        }
        if branch != value {
            return Err(format!("union branch {branch} out of range"));
        }
    }
    read_value(at, &mut column.builder)
}

fn append_null(builder: &mut Builder) {
    match builder {
        Builder::Null(n) => *n += 1,
        Builder::Boolean(b) => b.append_null(),
        Builder::Int(b) => b.append_null(),
        Builder::Long(b) => b.append_null(),
        Builder::Float(b) => b.append_null(),
        Builder::Double(b) => b.append_null(),
        Builder::Bytes(b) => b.append_null(),
        Builder::String(b) | Builder::Enum(b, _) => b.append_null(),
        Builder::Fixed(b, _) => b.append_null(),
        Builder::Decimal(b, ..) => b.append_null(),
        Builder::Date(b) => b.append_null(),
        Builder::TimeMillis(b) => b.append_null(),
        Builder::TimeMicros(b) => b.append_null(),
        Builder::TimestampMillis(b) => b.append_null(),
        Builder::TimestampMicros(b) => b.append_null(),
        Builder::TimestampNanos(b) => b.append_null(),
    }
}

fn array<const N: usize>(at: &mut Cursor<'_>) -> std::result::Result<[u8; N], String> {
    let bytes = at.take(N)?;
    <[u8; N]>::try_from(bytes).map_err(|_| "short read".to_string())
}

fn read_value(at: &mut Cursor<'_>, builder: &mut Builder) -> std::result::Result<(), String> {
    match builder {
        Builder::Null(n) => *n += 1,
        Builder::Boolean(b) => match array::<1>(at)? {
            [0] => b.append_value(false),
            [1] => b.append_value(true),
            [other] => return Err(format!("boolean byte {other} is neither 0 nor 1")),
        },
        Builder::Int(b) => b.append_value(at.int()?),
        Builder::Long(b) => b.append_value(at.long()?),
        Builder::Float(b) => b.append_value(f32::from_le_bytes(array(at)?)),
        Builder::Double(b) => b.append_value(f64::from_le_bytes(array(at)?)),
        Builder::Bytes(b) => b.append_value(at.sized()?),
        Builder::String(b) => {
            let s = std::str::from_utf8(at.sized()?).map_err(|e| format!("string: {e}"))?;
            b.append_value(s)
        }
        Builder::Enum(b, symbols) => {
            let i = at.long()?;
            let symbol = usize::try_from(i)
                .ok()
                .and_then(|i| symbols.get(i))
                .ok_or_else(|| format!("enum index {i} of {} symbols", symbols.len()))?;
            b.append_value(symbol)
        }
        Builder::Fixed(b, size) => b.append_value(at.take(*size)?).map_err(|e| e.to_string())?,
        Builder::Decimal(b, _, _, size) => {
            let bytes = match size {
                Some(n) => at.take(*n)?,
                None => at.sized()?,
            };
            b.append_value(i128_from_be(bytes, "").map_err(|e| e.to_string())?)
        }
        Builder::Date(b) => b.append_value(at.int()?),
        Builder::TimeMillis(b) => b.append_value(at.int()?),
        Builder::TimeMicros(b) => b.append_value(at.long()?),
        Builder::TimestampMillis(b) => b.append_value(at.long()?),
        Builder::TimestampMicros(b) => b.append_value(at.long()?),
        Builder::TimestampNanos(b) => b.append_value(at.long()?),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use apache_avro::reader::datum::GenericDatumReader;
    use apache_avro::types::Value;
    use apache_avro::writer::datum::GenericDatumWriter;
    use arrow_schema::{Field, Schema, TimeUnit};
    use proptest::prelude::*;

    use super::*;
    use crate::avro_arrow::{avro_records_to_batch, avro_schema_to_arrow, parse_avro_schema};

    const SCHEMA: &str = r#"{"type": "record", "name": "r", "fields": [
        {"name": "s", "type": "string"},
        {"name": "ns", "type": ["null", "string"]},
        {"name": "i", "type": "int"},
        {"name": "ni", "type": ["int", "null"]},
        {"name": "l", "type": "long"},
        {"name": "nl", "type": ["null", "long"]},
        {"name": "f", "type": "float"},
        {"name": "d", "type": ["null", "double"]},
        {"name": "b", "type": "boolean"},
        {"name": "by", "type": ["null", "bytes"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "F3", "size": 3}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "decf", "type": ["null", {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4}]},
        {"name": "date", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "nested", "type": ["null", {"type": "record", "name": "N", "fields": [
            {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "string"]}]}]},
        {"name": "arr", "type": {"type": "array", "items": "string"}},
        {"name": "mp", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "u3", "type": ["null", "int", "string"]},
        {"name": "again", "type": ["null", "N"]},
        {"name": "last", "type": "long"}
    ]}"#;

    /// A deterministic record of [`SCHEMA`] from `seed`.
    fn record(seed: u64) -> Value {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut null = |v: Value, branch: u32, null_branch: u32| {
            if next() % 4 == 0 {
                Value::Union(null_branch, Box::new(Value::Null))
            } else {
                Value::Union(branch, Box::new(v))
            }
        };
        let n = seed as i64;
        let text = format!("k{}-é{}", n, "x".repeat((seed % 7) as usize));
        let nested = Value::Record(vec![
            ("x".into(), Value::Int(seed as i32)),
            (
                "y".into(),
                Value::Union(1, Box::new(Value::String(text.clone()))),
            ),
        ]);
        let fields = vec![
            ("s", Value::String(text.clone())),
            ("ns", null(Value::String(text.clone()), 1, 0)),
            ("i", Value::Int((seed as i32).wrapping_mul(7919))),
            ("ni", null(Value::Int(-(seed as i32)), 0, 1)),
            ("l", Value::Long(n.wrapping_mul(-1_000_003))),
            ("nl", null(Value::Long(n << 20), 1, 0)),
            ("f", Value::Float(seed as f32 / 3.0)),
            ("d", null(Value::Double(-(seed as f64) / 7.0), 1, 0)),
            ("b", Value::Boolean(seed % 3 == 0)),
            ("by", null(Value::Bytes(text.as_bytes().to_vec()), 1, 0)),
            (
                "e",
                Value::Enum(
                    (seed % 3) as u32,
                    ["A", "B", "C"][(seed % 3) as usize].into(),
                ),
            ),
            ("fx", Value::Fixed(3, vec![seed as u8, 0xFF, 7])),
            (
                "dec",
                Value::Decimal(((n % 1_000_000) - 500_000).to_be_bytes().to_vec().into()),
            ),
            (
                "decf",
                null(
                    Value::Decimal(n.wrapping_neg().to_be_bytes().to_vec().into()),
                    1,
                    0,
                ),
            ),
            ("date", null(Value::Date(seed as i32 % 40_000), 1, 0)),
            ("tm", Value::TimeMillis((seed % 86_400_000) as i32)),
            ("tu", Value::TimeMicros((seed % 86_400_000) as i64 * 1000)),
            ("tsm", Value::TimestampMillis(n)),
            (
                "tsu",
                null(Value::TimestampMicros(n.wrapping_mul(1000)), 1, 0),
            ),
            ("ltu", Value::LocalTimestampMicros(n.wrapping_neg())),
            ("nested", null(nested.clone(), 1, 0)),
            (
                "arr",
                Value::Array(
                    (0..seed % 4)
                        .map(|i| Value::String(format!("{i}")))
                        .collect(),
                ),
            ),
            (
                "mp",
                Value::Map(
                    (0..seed % 3)
                        .map(|i| {
                            (
                                format!("m{i}"),
                                Value::Union(1, Box::new(Value::Long(i as i64))),
                            )
                        })
                        .collect(),
                ),
            ),
            (
                "u3",
                match seed % 3 {
                    0 => Value::Union(0, Box::new(Value::Null)),
                    1 => Value::Union(1, Box::new(Value::Int(5))),
                    _ => Value::Union(2, Box::new(Value::String(text))),
                },
            ),
            ("again", null(nested, 1, 0)),
            ("last", Value::Long(n)),
        ];
        Value::Record(
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    fn datums(schema: &AvroSchema, seeds: &[u64]) -> Vec<Vec<u8>> {
        let writer = GenericDatumWriter::builder(schema).build().unwrap();
        seeds
            .iter()
            .map(|s| {
                let mut out = Vec::new();
                writer.write_value_ref(&mut out, &record(*s)).unwrap();
                out
            })
            .collect()
    }

    /// What the generic path makes of the datums.
    fn generic(schema: &AvroSchema, datums: &[Vec<u8>], target: &SchemaRef) -> RecordBatch {
        let reader = GenericDatumReader::builder(schema).build().unwrap();
        let values: Vec<Value> = datums
            .iter()
            .map(|d| reader.read_value(&mut d.as_slice()).unwrap())
            .collect();
        avro_records_to_batch(schema, &values, target).unwrap()
    }

    fn direct(schema: &AvroSchema, datums: &[Vec<u8>], target: &SchemaRef) -> RecordBatch {
        let mut decoder = DirectDecoder::try_new(schema, target).expect("a direct target");
        for d in datums {
            decoder.push(d).unwrap();
        }
        assert_eq!(decoder.rows(), datums.len());
        let batch = decoder.finish().unwrap();
        assert_eq!(decoder.rows(), 0);
        batch
    }

    /// The natural Arrow mapping of [`SCHEMA`] without its three-branch union (which has
    /// none).
    fn mapped() -> SchemaRef {
        let json = SCHEMA.replace(r#"{"name": "u3", "type": ["null", "int", "string"]},"#, "");
        avro_schema_to_arrow(&parse_avro_schema(&json).unwrap()).unwrap()
    }

    /// The columns of the natural mapping that the direct decoder takes.
    fn simple_target(_schema: &AvroSchema) -> SchemaRef {
        let all = mapped();
        let simple = ["nested", "arr", "mp", "u3", "again"];
        Arc::new(Schema::new(
            all.fields()
                .iter()
                .filter(|f| !simple.contains(&f.name().as_str()))
                .cloned()
                .collect::<Vec<_>>(),
        ))
    }

    fn subset_target() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("last", DataType::Int64, false),
            Field::new("ns", DataType::Utf8, true),
            Field::new("i", DataType::Int64, false),
            Field::new("absent", DataType::Utf8, true),
            Field::new(
                "tsu",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
                true,
            ),
            Field::new("e", DataType::LargeUtf8, false),
        ]))
    }

    proptest! {
        #[test]
        fn test_direct_decoding_equals_the_generic_path(
            seeds in proptest::collection::vec(any::<u64>(), 0..40)
        ) {
            let schema = parse_avro_schema(SCHEMA).unwrap();
            let datums = datums(&schema, &seeds);
            for target in [simple_target(&schema), subset_target()] {
                prop_assert_eq!(
                    direct(&schema, &datums, &target),
                    generic(&schema, &datums, &target)
                );
            }
        }
    }

    #[test]
    fn test_direct_decoder_takes_batches_one_after_another() {
        let schema = parse_avro_schema(SCHEMA).unwrap();
        let target = simple_target(&schema);
        let all = datums(&schema, &(0..30).collect::<Vec<_>>());
        let mut decoder = DirectDecoder::try_new(&schema, &target).unwrap();
        let mut batches = Vec::new();
        for chunk in all.chunks(7) {
            for d in chunk {
                decoder.push(d).unwrap();
            }
            batches.push(decoder.finish().unwrap());
        }
        let joined = arrow::compute::concat_batches(&target, &batches).unwrap();
        assert_eq!(joined, generic(&schema, &all, &target));
    }

    #[test]
    fn test_targets_naming_nested_columns_are_left_to_the_generic_path() {
        let schema = parse_avro_schema(SCHEMA).unwrap();
        let all = mapped();
        for name in ["nested", "arr", "mp", "u3", "again"] {
            let field = match all.field_with_name(name) {
                Ok(f) => f.clone(),
                Err(_) => Field::new(name, DataType::Utf8, true),
            };
            let target = Arc::new(Schema::new(vec![field]));
            assert!(DirectDecoder::try_new(&schema, &target).is_none(), "{name}");
        }
    }

    #[test]
    fn test_a_missing_non_nullable_column_and_bad_bytes_are_errors_naming_the_field() {
        let schema = parse_avro_schema(SCHEMA).unwrap();
        let target = Arc::new(Schema::new(vec![Field::new(
            "gone",
            DataType::Int64,
            false,
        )]));
        let mut decoder = DirectDecoder::try_new(&schema, &target).unwrap();
        let err = decoder.finish().unwrap_err().to_string();
        assert!(
            err.contains("gone") && err.contains("not nullable"),
            "{err}"
        );

        let datum = datums(&schema, &[3]).remove(0);
        let target = simple_target(&schema);
        for cut in [1, datum.len() / 2, datum.len() - 1] {
            let mut decoder = DirectDecoder::try_new(&schema, &target).unwrap();
            let err = decoder.push(datum.get(..cut).unwrap()).unwrap_err();
            assert!(err.contains("ends"), "{err}");
        }
        // An int out of its range, a boolean that is neither 0 nor 1, a bad union branch.
        let one = |json: &str, bytes: &[u8]| {
            let schema = parse_avro_schema(json).unwrap();
            let target = avro_schema_to_arrow(&schema).unwrap();
            let mut decoder = DirectDecoder::try_new(&schema, &target).unwrap();
            decoder.push(bytes).unwrap_err()
        };
        let rec = |t: &str| {
            format!(r#"{{"type":"record","name":"r","fields":[{{"name":"v","type":{t}}}]}}"#)
        };
        let err = one(&rec(r#""int""#), &[0xFF, 0xFF, 0xFF, 0xFF, 0x7F]);
        assert!(
            err.contains("field v") && err.contains("int range"),
            "{err}"
        );
        let err = one(&rec(r#""boolean""#), &[2]);
        assert!(err.contains("field v") && err.contains("boolean"), "{err}");
        let err = one(&rec(r#"["null","long"]"#), &[4, 2]);
        assert!(err.contains("field v") && err.contains("branch 2"), "{err}");
        let err = one(&rec(r#""string""#), &[4, 0xC3, 0x28]);
        assert!(err.contains("field v") && err.contains("utf-8"), "{err}");
    }

    #[test]
    fn test_a_value_the_target_type_cannot_hold_is_an_error_on_both_paths() {
        let schema = parse_avro_schema(SCHEMA).unwrap();
        let target = Arc::new(Schema::new(vec![Field::new("i", DataType::Int16, false)]));
        // Seed 9 makes i = 71,271, beyond Int16.
        let datums = datums(&schema, &[9]);
        let mut decoder = DirectDecoder::try_new(&schema, &target).unwrap();
        decoder.push(datums.first().unwrap()).unwrap();
        let err = decoder.finish().unwrap_err().to_string();
        assert!(err.contains("i") && err.contains("71271"), "{err}");
        let reader = GenericDatumReader::builder(&schema).build().unwrap();
        let value = reader
            .read_value(&mut datums.first().unwrap().as_slice())
            .unwrap();
        let err = avro_records_to_batch(&schema, &[value], &target)
            .unwrap_err()
            .to_string();
        assert!(err.contains("71271"), "{err}");
    }

    #[test]
    fn test_array_and_map_blocks_with_byte_sizes_are_skipped_whole() {
        let json = r#"{"type":"record","name":"r","fields":[
            {"name":"a","type":{"type":"array","items":"long"}},
            {"name":"m","type":{"type":"map","values":"string"}},
            {"name":"v","type":"long"}]}"#;
        let schema = parse_avro_schema(json).unwrap();
        let target = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        // a: one block of -2 items in 2 bytes (1, 2), then a plain block of 1 item (3), end;
        // m: one block of -1 entry in 4 bytes ("k" -> "x"), end; v = -3.
        let datum = [3, 4, 2, 4, 2, 6, 0, 1, 8, 2, b'k', 2, b'x', 0, 5];
        let mut decoder = DirectDecoder::try_new(&schema, &target).unwrap();
        decoder.push(&datum).unwrap();
        let batch = decoder.finish().unwrap();
        let v = batch
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap();
        assert_eq!(v.values().to_vec(), vec![-3]);
        // The generic reader agrees on the same bytes.
        let reader = GenericDatumReader::builder(&schema).build().unwrap();
        let value = reader.read_value(&mut datum.as_slice()).unwrap();
        assert_eq!(
            avro_records_to_batch(&schema, &[value], &target).unwrap(),
            batch
        );
    }
}
