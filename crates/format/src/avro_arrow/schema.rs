//! Avro schemas -> Arrow schemas: named types, nullable unions, the type table of the module doc.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use apache_avro::schema::{
    DecimalSchema, InnerDecimalSchema, RecordSchema, Schema as AvroSchema, UnionSchema, UuidSchema,
};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema as ArrowSchema, SchemaRef, TimeUnit};

use super::{LIST_ITEM_NAME, MAP_ENTRIES_NAME, MAX_DECIMAL128_PRECISION, UTC};
use crate::{FormatError, Result};

pub(super) fn schema_err(field: &str, reason: impl Into<String>) -> FormatError {
    FormatError::Schema {
        field: if field.is_empty() {
            None
        } else {
            Some(field.to_string())
        },
        reason: reason.into(),
    }
}

pub(super) fn join(path: &str, name: &str) -> String {
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
pub(super) struct Names<'a> {
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
    pub(super) fn checked(root: &'a AvroSchema) -> Result<Self> {
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
    pub(super) fn resolve(
        &self,
        mut schema: &'a AvroSchema,
        field: &str,
    ) -> Result<&'a AvroSchema> {
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
    pub(super) fn nullable(&self, schema: &'a AvroSchema, field: &str) -> Result<Nullable<'a>> {
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
pub(super) struct Nullable<'a> {
    pub(super) inner: &'a AvroSchema,
    /// `(null branch, value branch)` when the schema was a union.
    pub(super) branches: Option<(u32, u32)>,
}

impl Nullable<'_> {
    pub(super) fn is_nullable(&self) -> bool {
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

pub(super) fn record_fields(
    names: &Names<'_>,
    record: &RecordSchema,
    path: &str,
) -> Result<Fields> {
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

pub(super) fn arrow_field(
    names: &Names<'_>,
    name: &str,
    schema: &AvroSchema,
    path: &str,
) -> Result<FieldRef> {
    let n = names.nullable(schema, path)?;
    let dt = arrow_type(names, n.inner, path)?;
    Ok(Arc::new(Field::new(name, dt, n.is_nullable())))
}

pub(super) fn arrow_type(names: &Names<'_>, schema: &AvroSchema, path: &str) -> Result<DataType> {
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

pub(super) fn map_entries_field(
    names: &Names<'_>,
    values: &AvroSchema,
    path: &str,
) -> Result<FieldRef> {
    let key = Arc::new(Field::new("key", DataType::Utf8, false));
    let value = arrow_field(names, "value", values, path)?;
    Ok(Arc::new(Field::new(
        MAP_ENTRIES_NAME,
        DataType::Struct(Fields::from(vec![key, value])),
        false,
    )))
}

pub(super) fn decimal_precision_scale(d: &DecimalSchema, path: &str) -> Result<(u8, i8)> {
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
