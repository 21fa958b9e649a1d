//! The data schema of a table on the write side: how a new table's Arrow schema becomes the Avro
//! schema Hudi records (`hoodie.table.create.schema`, `extraMetadata.schema`), and how input
//! batches are checked and shaped against it.

use std::collections::HashSet;
use std::sync::Arc;

use arbor_format::avro_arrow::{
    arrow_schema_to_avro_json, avro_schema_to_arrow, parse_avro_schema, LIST_ITEM_NAME,
    MAP_ENTRIES_NAME,
};
use arbor_format::meta;
use arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};

use super::convert::{cast_exact, is_lossless_promotion};

use crate::error::{Result, TableError};

/// The data schema of a table in both forms writers need.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSchema {
    /// The Arrow data schema (no meta columns), exactly as readers resolve it from `avro_json`.
    pub arrow: SchemaRef,
    /// The Avro record schema JSON of the data columns (what `extraMetadata.schema` holds).
    pub avro_json: String,
}

/// Spark's record name and namespace for table `name`: `<name>_record` in `hoodie.<name>`.
pub fn avro_names(table_name: &str) -> (String, String) {
    (
        format!("{table_name}_record"),
        format!("hoodie.{table_name}"),
    )
}

fn invalid(column: Option<&str>, row: Option<usize>, reason: impl Into<String>) -> TableError {
    TableError::InvalidInput {
        column: column.map(str::to_string),
        row,
        reason: reason.into(),
    }
}

impl DataSchema {
    /// The schema of a new table named `table_name` from the caller's Arrow schema: every
    /// top-level column becomes nullable (as Spark writes them; base files store every data
    /// column as optional), field metadata is dropped, and the result is round-tripped through
    /// Avro so that it equals what readers resolve later. Fails with `InvalidInput` for an empty
    /// schema, a `_hoodie_*` column, a duplicate name or a type Hudi cannot store; each type
    /// becomes the type the table stores ([`storage_type`]).
    pub fn for_new_table(table_name: &str, schema: &Schema) -> Result<DataSchema> {
        if schema.fields().is_empty() {
            return Err(invalid(None, None, "the table schema has no columns"));
        }
        let mut seen = HashSet::new();
        for f in schema.fields() {
            if meta::is_meta_column(f.name()) || f.name().starts_with("_hoodie_") {
                return Err(invalid(
                    Some(f.name()),
                    None,
                    "data columns must not be Hudi meta columns (_hoodie_*)",
                ));
            }
            if !seen.insert(f.name().clone()) {
                return Err(invalid(Some(f.name()), None, "duplicate column name"));
            }
        }
        let nullable: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| {
                Ok(Field::new(
                    f.name(),
                    storage_type(f.data_type(), f.name())?,
                    true,
                ))
            })
            .collect::<Result<_>>()?;
        let (name, namespace) = avro_names(table_name);
        let avro_json = arrow_schema_to_avro_json(&Schema::new(nullable), &name, &namespace)
            .map_err(|e| invalid(None, None, format!("the schema has no Avro form: {e}")))?;
        Self::from_avro_json(&avro_json)
    }

    /// The schema recorded as Avro JSON (from a commit or `hoodie.table.create.schema`).
    pub fn from_avro_json(avro_json: &str) -> Result<DataSchema> {
        let avro = parse_avro_schema(avro_json)?;
        let arrow = avro_schema_to_arrow(&avro)?;
        let fields: Vec<Arc<Field>> = arrow
            .fields()
            .iter()
            .filter(|f| !meta::is_meta_column(f.name()))
            .cloned()
            .collect();
        Ok(DataSchema {
            arrow: Arc::new(Schema::new(fields)),
            avro_json: avro_json.to_string(),
        })
    }

    /// The schema of an existing table from its read schema (meta columns dropped); the Avro
    /// form is derived with Spark's names for `table_name`.
    pub fn from_read_schema(table_name: &str, read_schema: &Schema) -> Result<DataSchema> {
        let fields: Vec<Arc<Field>> = read_schema
            .fields()
            .iter()
            .filter(|f| !meta::is_meta_column(f.name()))
            .cloned()
            .collect();
        let arrow = Arc::new(Schema::new(fields));
        let (name, namespace) = avro_names(table_name);
        let avro_json = arrow_schema_to_avro_json(&arrow, &name, &namespace)?;
        Ok(DataSchema { arrow, avro_json })
    }

    /// Checks `batches` against the schema and returns them shaped to the schema this write
    /// records (see [`Conformed`]).
    ///
    /// Per input column: a column of the table's type is taken as it is; a column of a type
    /// the table's column may be promoted to without changing a stored value
    /// ([`is_lossless_promotion`]: `int -> long`, `int -> double`, `float -> double`, wider
    /// decimals) widens the table's column when `options.evolve`; any other type (and, without
    /// `options.evolve`, every type) converts
    /// value by value ([`cast_exact`]), and a value that would change is `InvalidInput` naming
    /// the column and row. A column the table lacks is added (nullable, after the existing
    /// columns, so older rows read null) when `options.evolve`, else `InvalidInput`. A table
    /// column the input lacks is null-filled with `options.allow_missing` (deletes), else
    /// `InvalidInput` naming it.
    pub fn conform(&self, batches: &[RecordBatch], options: ConformOptions) -> Result<Conformed> {
        let (schema, changes) = self.evolve(batches, options)?;
        let mut out = Vec::with_capacity(batches.len());
        let mut first_row = 0usize;
        for batch in batches {
            let rows = batch.num_rows();
            let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.arrow.fields().len());
            for field in schema.arrow.fields() {
                let column = match batch.column_by_name(field.name()) {
                    Some(c) => cast_exact(c, field.data_type(), field.name(), first_row)?,
                    None if options.allow_missing => new_null_array(field.data_type(), rows),
                    None => {
                        return Err(invalid(
                            Some(field.name()),
                            None,
                            "the input lacks this column of the table (a write carries every \
                             column, columns are never dropped; to keep the stored values of \
                             missing columns, upsert as a partial update: arbor write --partial)",
                        ))
                    }
                };
                if !field.is_nullable() && column.null_count() > 0 {
                    let row = (0..rows)
                        .find(|&r| column.is_null(r))
                        .map(|r| r + first_row);
                    return Err(invalid(
                        Some(field.name()),
                        row,
                        "null in a non-nullable column",
                    ));
                }
                columns.push(column);
            }
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            let shaped = RecordBatch::try_new_with_options(schema.arrow.clone(), columns, &options)
                .map_err(|e| invalid(None, None, e.to_string()))?;
            out.push(shaped);
            first_row += rows;
        }
        Ok(Conformed {
            schema,
            batches: out,
            changes,
        })
    }

    /// The schema a write of `batches` records: this one, with columns added or promoted as
    /// the input requires (see [`DataSchema::conform`]).
    fn evolve(
        &self,
        batches: &[RecordBatch],
        options: ConformOptions,
    ) -> Result<(DataSchema, Vec<SchemaChange>)> {
        let Some(first) = batches.first() else {
            return Ok((self.clone(), Vec::new()));
        };
        let input = first.schema();
        for (i, b) in batches.iter().enumerate() {
            if b.schema().fields() != input.fields() {
                return Err(invalid(
                    None,
                    None,
                    format!("input batch {i} has a different schema than batch 0"),
                ));
            }
        }
        let mut seen = HashSet::new();
        let mut changes = Vec::new();
        let mut promoted: Vec<(String, DataType)> = Vec::new();
        let mut added: Vec<Field> = Vec::new();
        for f in input.fields() {
            if !seen.insert(f.name().clone()) {
                return Err(invalid(
                    Some(f.name()),
                    None,
                    "the input has this column twice",
                ));
            }
            match self.arrow.field_with_name(f.name()) {
                Ok(existing) => {
                    // Without evolution the values must fit the column as it is; an input
                    // type the table could not store (UInt64) may still fit it.
                    let wanted = storage_type(f.data_type(), f.name()).ok();
                    if let Some(wanted) = wanted.filter(|w| {
                        options.evolve
                            && w != existing.data_type()
                            && is_lossless_promotion(existing.data_type(), w)
                    }) {
                        changes.push(SchemaChange::Promoted {
                            column: f.name().clone(),
                            from: existing.data_type().clone(),
                            to: wanted.clone(),
                        });
                        promoted.push((f.name().clone(), wanted));
                    }
                }
                Err(_) => {
                    if meta::is_meta_column(f.name()) || f.name().starts_with("_hoodie_") {
                        return Err(invalid(
                            Some(f.name()),
                            None,
                            "data columns must not be Hudi meta columns (_hoodie_*)",
                        ));
                    }
                    if !options.evolve || options.allow_missing {
                        return Err(invalid(
                            Some(f.name()),
                            None,
                            "the table has no such column",
                        ));
                    }
                    let data_type = storage_type(f.data_type(), f.name())?;
                    changes.push(SchemaChange::Added {
                        column: f.name().clone(),
                        data_type: data_type.clone(),
                    });
                    added.push(Field::new(f.name(), data_type, true));
                }
            }
        }
        if changes.is_empty() {
            return Ok((self.clone(), changes));
        }
        let avro_json = self.evolved_avro_json(&promoted, &added)?;
        Ok((Self::from_avro_json(&avro_json)?, changes))
    }

    /// This schema without the top-level columns `drop` (their Avro fields removed, every other
    /// field kept byte for byte), with the changes that records. Fails with `InvalidInput`
    /// naming the column when one is not a column of the schema, is a Hudi meta column, or
    /// when no column would be left. An empty `drop` returns the schema as it is.
    pub fn without(&self, drop: &[String]) -> Result<(DataSchema, Vec<SchemaChange>)> {
        if drop.is_empty() {
            return Ok((self.clone(), Vec::new()));
        }
        for c in drop {
            if meta::is_meta_column(c) || c.starts_with("_hoodie_") {
                return Err(invalid(
                    Some(c),
                    None,
                    "Hudi meta columns cannot be dropped",
                ));
            }
            if self.arrow.field_with_name(c).is_err() {
                return Err(invalid(
                    Some(c),
                    None,
                    "the table has no such column to drop",
                ));
            }
        }
        if self
            .arrow
            .fields()
            .iter()
            .all(|f| drop.iter().any(|d| d == f.name()))
        {
            return Err(invalid(
                None,
                None,
                "dropping every column leaves no schema",
            ));
        }
        let corrupt =
            |reason: &str| invalid(None, None, format!("the table's Avro schema {reason}"));
        let mut root: serde_json::Value = serde_json::from_str(&self.avro_json)
            .map_err(|e| corrupt(&format!("is not JSON: {e}")))?;
        let fields = root
            .get_mut("fields")
            .and_then(|f| f.as_array_mut())
            .ok_or_else(|| corrupt("has no fields"))?;
        fields.retain(|f| {
            f.get("name")
                .and_then(|v| v.as_str())
                .is_none_or(|n| !drop.iter().any(|d| d == n))
        });
        let avro_json =
            serde_json::to_string(&root).map_err(|e| invalid(None, None, e.to_string()))?;
        let changes = drop
            .iter()
            .map(|c| SchemaChange::Dropped { column: c.clone() })
            .collect();
        Ok((Self::from_avro_json(&avro_json)?, changes))
    }

    /// This schema's Avro JSON with the types of `promoted` columns replaced and `added`
    /// columns (nullable, default null) appended; every other field is kept byte for byte, so
    /// a Spark-written schema keeps its names, docs and defaults.
    fn evolved_avro_json(
        &self,
        promoted: &[(String, DataType)],
        added: &[Field],
    ) -> Result<String> {
        let corrupt =
            |reason: &str| invalid(None, None, format!("the table's Avro schema {reason}"));
        let mut root: serde_json::Value = serde_json::from_str(&self.avro_json)
            .map_err(|e| corrupt(&format!("is not JSON: {e}")))?;
        let name = root
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| corrupt("has no record name"))?
            .to_string();
        let namespace = root
            .get("namespace")
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_string();
        // The Avro form of the changed columns, generated as for a new table.
        let mut changed: Vec<Field> = promoted
            .iter()
            .map(|(n, t)| Field::new(n, t.clone(), true))
            .collect();
        changed.extend(added.iter().cloned());
        let generated = arrow_schema_to_avro_json(&Schema::new(changed), &name, &namespace)?;
        let generated: serde_json::Value = serde_json::from_str(&generated)
            .map_err(|e| invalid(None, None, format!("generated Avro schema: {e}")))?;
        let generated_fields = generated
            .get("fields")
            .and_then(|f| f.as_array())
            .cloned()
            .unwrap_or_default();
        let field_named = |n: &str| {
            generated_fields
                .iter()
                .find(|f| f.get("name").and_then(|v| v.as_str()) == Some(n))
                .cloned()
        };
        let fields = root
            .get_mut("fields")
            .and_then(|f| f.as_array_mut())
            .ok_or_else(|| corrupt("has no fields"))?;
        for (n, _) in promoted {
            let new = field_named(n).ok_or_else(|| corrupt("lost a promoted column"))?;
            let slot = fields
                .iter_mut()
                .find(|f| f.get("name").and_then(|v| v.as_str()) == Some(n.as_str()))
                .ok_or_else(|| corrupt(&format!("has no field {n:?}")))?;
            if let (Some(obj), Some(ty)) = (slot.as_object_mut(), new.get("type")) {
                obj.insert("type".to_string(), ty.clone());
                obj.insert("default".to_string(), serde_json::Value::Null);
            }
        }
        for f in added {
            fields.push(field_named(f.name()).ok_or_else(|| corrupt("lost an added column"))?);
        }
        serde_json::to_string(&root).map_err(|e| invalid(None, None, e.to_string()))
    }
}

/// How the write path, conforming input to the table schema (`DataSchema::conform`), treats
/// columns that differ from the table's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConformOptions {
    /// Table columns the input lacks are null-filled (deletes name only keys).
    pub allow_missing: bool,
    /// New input columns are added and wider types promote the table's column (Hudi's schema
    /// evolution on write).
    pub evolve: bool,
}

/// A schema change a write makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChange {
    /// A new nullable column, after the existing ones; older rows read null.
    Added {
        /// The column.
        column: String,
        /// Its type as the table stores it.
        data_type: DataType,
    },
    /// A column removed from the schema the write records (an explicit drop): readers no
    /// longer show it; files written before keep its values, unread.
    Dropped {
        /// The column.
        column: String,
    },
    /// A column's type widened without changing any stored value.
    Promoted {
        /// The column.
        column: String,
        /// The type before.
        from: DataType,
        /// The type after.
        to: DataType,
    },
}

impl std::fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaChange::Added { column, data_type } => {
                write!(f, "added column {column:?} ({data_type}, nullable)")
            }
            SchemaChange::Dropped { column } => write!(f, "dropped column {column:?}"),
            SchemaChange::Promoted { column, from, to } => {
                write!(f, "widened column {column:?} from {from} to {to}")
            }
        }
    }
}

/// Input rows shaped to the schema a write records.
#[derive(Debug, Clone)]
pub struct Conformed {
    /// The schema the write records: the table's, or the table's evolved by `changes`.
    pub schema: DataSchema,
    /// The rows, shaped to `schema`.
    pub batches: Vec<RecordBatch>,
    /// What the write changes in the schema (empty when nothing).
    pub changes: Vec<SchemaChange>,
}

/// A note about how a column of a new table's schema is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageNote {
    /// The column (`a.b` inside structs).
    pub column: String,
    /// What happens to it.
    pub note: String,
}

/// The type a table stores for input type `dt`: the Arrow type of the Avro (and Spark) type
/// Java Hudi writes for it, so that arbor, hudi-rs and Spark read the same values back.
///
/// | input | stored |
/// |---|---|
/// | `Int8`, `Int16`, `UInt8`, `UInt16` | `Int32` (Avro `int`) |
/// | `UInt32` | `Int64` (Avro `long`) |
/// | `Float16` | `Float32` |
/// | `Decimal32/64/128/256(p, s)`, `p <= 38` | `Decimal128(p, s)` |
/// | `Timestamp(s \| us, tz)` | `Timestamp(us, tz)` (Spark's precision) |
/// | `Timestamp(ms, tz)` | `Timestamp(ms, tz)` (Avro `timestamp-millis`) |
/// | `Timestamp(ns, tz)` | `Timestamp(us, tz)`: values must be whole microseconds |
/// | a time zone | `UTC` (the same instants; Hudi stores instants, not zones) |
/// | `Date64` | `Date32`: values must be whole days |
/// | `Time32(s)`, `Time64(ns)` | `Time32(ms)`, `Time64(us)` |
/// | `LargeUtf8`, `Utf8View` / `LargeBinary`, `BinaryView` | `Utf8` / `Binary` |
/// | `Dictionary(k, v)` | the stored type of `v` (decoded) |
/// | lists (any offsets) / maps / structs | `List` (`element`) / `Map` (`key_value`) / `Struct` of stored types |
///
/// Refused with `InvalidInput` naming the column: `UInt64` (no Spark type holds every value;
/// cast to `Int64` or `Decimal128(20, 0)`), decimals above 38 digits, intervals, durations,
/// unions, `Null` columns and map keys other than strings.
pub fn storage_type(dt: &DataType, column: &str) -> Result<DataType> {
    use arrow::datatypes::TimeUnit;
    use DataType::*;
    let refuse = |reason: String| Err(invalid(Some(column), None, reason));
    let item = |f: &Field, name: &str, path: &str| -> Result<Arc<Field>> {
        Ok(Arc::new(Field::new(
            name,
            storage_type(f.data_type(), path)?,
            f.is_nullable(),
        )))
    };
    Ok(match dt {
        Boolean | Int32 | Int64 | Float32 | Float64 | Utf8 | Binary | Date32 => dt.clone(),
        FixedSizeBinary(_) => dt.clone(),
        Int8 | Int16 | UInt8 | UInt16 => Int32,
        UInt32 => Int64,
        UInt64 => {
            return refuse(
                "UInt64 has no Hudi (Spark) type that holds every value; cast it to Int64 or \
                 Decimal128(20, 0)"
                    .into(),
            )
        }
        Float16 => Float32,
        Decimal32(p, s) | Decimal64(p, s) | Decimal128(p, s) | Decimal256(p, s) => {
            if *p > 38 {
                return refuse(format!(
                    "decimal precision {p} is above 38, the most Hudi (Spark) stores"
                ));
            }
            if *s < 0 {
                return refuse(format!("negative decimal scale {s}"));
            }
            Decimal128(*p, *s)
        }
        Timestamp(unit, tz) => {
            let unit = match unit {
                TimeUnit::Millisecond => TimeUnit::Millisecond,
                _ => TimeUnit::Microsecond,
            };
            Timestamp(
                unit,
                tz.as_ref()
                    .map(|_| Arc::from(arbor_format::avro_arrow::UTC)),
            )
        }
        Date64 => Date32,
        Time32(_) => Time32(TimeUnit::Millisecond),
        Time64(_) => Time64(TimeUnit::Microsecond),
        LargeUtf8 | Utf8View => Utf8,
        LargeBinary | BinaryView => Binary,
        Dictionary(_, v) => storage_type(v, column)?,
        List(f) | LargeList(f) | ListView(f) | LargeListView(f) | FixedSizeList(f, _) => {
            List(item(f, LIST_ITEM_NAME, &format!("{column}[]"))?)
        }
        Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return refuse("map entries are not a struct".into());
            };
            let (Some(k), Some(v)) = (kv.first(), kv.get(1)) else {
                return refuse("a map needs a key and a value field".into());
            };
            let key = storage_type(k.data_type(), &format!("{column}.key"))?;
            if key != Utf8 {
                return refuse(format!(
                    "map keys must be strings (Avro maps have string keys), found {}",
                    k.data_type()
                ));
            }
            let value = item(v, "value", &format!("{column}.value"))?;
            let entries = Field::new(
                MAP_ENTRIES_NAME,
                Struct(Fields::from(vec![
                    Arc::new(Field::new("key", Utf8, false)),
                    value,
                ])),
                false,
            );
            Map(Arc::new(entries), false)
        }
        Struct(fields) => Struct(
            fields
                .iter()
                .map(|f| item(f, f.name(), &format!("{column}.{}", f.name())))
                .collect::<Result<Vec<_>>>()?
                .into(),
        ),
        Null => {
            return refuse(
                "the column holds only nulls, so it has no type; give it a typed schema".into(),
            )
        }
        other => return refuse(format!("type {other} has no Hudi (Avro) counterpart")),
    })
}

/// Notes on columns whose values are stored in a form other than the input's (see
/// [`storage_type`]): nanosecond timestamps stored as microseconds (sub-microsecond values
/// refused), non-UTC zones stored as UTC instants, naive timestamps (`TIMESTAMP_NTZ`).
pub fn storage_notes(schema: &Schema) -> Vec<StorageNote> {
    fn walk(dt: &DataType, path: &str, out: &mut Vec<StorageNote>) {
        use arrow::datatypes::TimeUnit;
        match dt {
            DataType::Timestamp(unit, tz) => {
                if *unit == TimeUnit::Nanosecond {
                    out.push(StorageNote {
                        column: path.to_string(),
                        note: "nanosecond timestamps are stored as microseconds (Hudi's and \
                               Spark's precision); values with sub-microsecond digits are \
                               refused"
                            .into(),
                    });
                }
                match tz {
                    Some(z) if z.as_ref() != arbor_format::avro_arrow::UTC => {
                        out.push(StorageNote {
                            column: path.to_string(),
                            note: format!(
                                "time zone {z} is stored as UTC (the same instants; Hudi \
                                 stores instants, not zones)"
                            ),
                        })
                    }
                    None => out.push(StorageNote {
                        column: path.to_string(),
                        note: "timestamps without time zone are stored as Spark's \
                               TIMESTAMP_NTZ (Avro local-timestamp, parquet \
                               isAdjustedToUTC=false)"
                            .into(),
                    }),
                    _ => {}
                }
            }
            DataType::Dictionary(_, v) => walk(v, path, out),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::FixedSizeList(f, _) => walk(f.data_type(), &format!("{path}[]"), out),
            DataType::Map(e, _) => walk(e.data_type(), path, out),
            DataType::Struct(fields) => {
                for f in fields {
                    walk(f.data_type(), &format!("{path}.{}", f.name()), out)
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for f in schema.fields() {
        walk(f.data_type(), f.name(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("v", DataType::Int64, true),
        ])
    }

    #[test]
    fn test_for_new_table_nullable_and_named_like_spark() {
        let s = DataSchema::for_new_table("t", &schema()).unwrap();
        assert!(s.arrow.fields().iter().all(|f| f.is_nullable()));
        assert!(s.avro_json.contains("\"t_record\""));
        assert!(s.avro_json.contains("hoodie.t"));
    }

    #[test]
    fn test_for_new_table_meta_column_rejected() {
        let bad = Schema::new(vec![Field::new("_hoodie_record_key", DataType::Utf8, true)]);
        let err = DataSchema::for_new_table("t", &bad).unwrap_err();
        assert!(
            matches!(err, TableError::InvalidInput { column: Some(c), .. } if c == "_hoodie_record_key")
        );
    }

    #[test]
    fn test_conform_widens_int_and_reorders() {
        let s = DataSchema::for_new_table("t", &schema()).unwrap();
        let input = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("v", DataType::Int32, true),
                Field::new("id", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int32Array::from(vec![1])),
                Arc::new(StringArray::from(vec!["a"])),
            ],
        )
        .unwrap();
        let out = s.conform(&[input], ConformOptions::default()).unwrap();
        assert_eq!(out.batches[0].schema(), s.arrow);
    }

    #[test]
    fn test_without_drops_fields_and_refuses_unknown_meta_and_all() {
        let s = DataSchema::for_new_table("t", &schema()).unwrap();
        let names: Vec<String> = s.arrow.fields().iter().map(|f| f.name().clone()).collect();
        let (dropped, changes) = s.without(&names[1..2]).unwrap();
        assert_eq!(dropped.arrow.fields().len(), names.len() - 1);
        assert!(dropped.arrow.field_with_name(&names[1]).is_err());
        assert!(!dropped.avro_json.contains(&format!("\"{}\"", names[1])));
        assert_eq!(
            changes,
            [SchemaChange::Dropped {
                column: names[1].clone()
            }]
        );
        assert!(s.without(&["nope".to_string()]).is_err());
        assert!(s.without(&["_hoodie_record_key".to_string()]).is_err());
        assert!(s.without(&names).is_err());
        assert_eq!(s.without(&[]).unwrap().0, s);
    }

    #[test]
    fn test_conform_incompatible_type_names_column() {
        let s = DataSchema::for_new_table("t", &schema()).unwrap();
        let input = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, true),
                Field::new("v", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(StringArray::from(vec!["x"])),
            ],
        )
        .unwrap();
        let err = s.conform(&[input], ConformOptions::default()).unwrap_err();
        assert!(matches!(err, TableError::InvalidInput { column: Some(c), .. } if c == "v"));
    }
}
