//! The data schema of a table on the write side: how a new table's Arrow schema becomes the Avro
//! schema Hudi records (`hoodie.table.create.schema`, `extraMetadata.schema`), and how input
//! batches are checked and shaped against it.

use std::collections::HashSet;
use std::sync::Arc;

use arbor_format::avro_arrow::{
    arrow_schema_to_avro_json, avro_schema_to_arrow, parse_avro_schema,
};
use arbor_format::meta;
use arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

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
    /// schema, a `_hoodie_*` column, a duplicate name or a type Avro cannot express.
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
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect();
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

    /// Checks `batches` against the schema and returns them shaped to it (columns in schema
    /// order, compatible types cast). With `allow_missing` (deletes) columns the schema has but
    /// the input lacks are filled with nulls; otherwise a missing column is `InvalidInput` naming
    /// it. A column the schema lacks, or of an incompatible type, is `InvalidInput` naming it.
    pub fn conform(
        &self,
        batches: &[RecordBatch],
        allow_missing: bool,
    ) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::with_capacity(batches.len());
        let mut first_row = 0usize;
        for batch in batches {
            let input = batch.schema();
            for f in input.fields() {
                if self.arrow.field_with_name(f.name()).is_err() {
                    return Err(invalid(
                        Some(f.name()),
                        None,
                        "the table has no such column",
                    ));
                }
            }
            let rows = batch.num_rows();
            let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.arrow.fields().len());
            for field in self.arrow.fields() {
                let column = match batch.column_by_name(field.name()) {
                    Some(c) if c.data_type() == field.data_type() => c.clone(),
                    Some(c) => {
                        if !compatible(c.data_type(), field.data_type()) {
                            return Err(invalid(
                                Some(field.name()),
                                None,
                                format!(
                                    "type {} is not compatible with the table's {}",
                                    c.data_type(),
                                    field.data_type()
                                ),
                            ));
                        }
                        arrow::compute::cast(c, field.data_type()).map_err(|e| {
                            invalid(Some(field.name()), None, format!("cannot convert: {e}"))
                        })?
                    }
                    None if allow_missing => new_null_array(field.data_type(), rows),
                    None => {
                        return Err(invalid(
                            Some(field.name()),
                            None,
                            "the input lacks this column of the table",
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
            let shaped = RecordBatch::try_new_with_options(self.arrow.clone(), columns, &options)
                .map_err(|e| invalid(None, None, e.to_string()))?;
            out.push(shaped);
            first_row += rows;
        }
        Ok(out)
    }
}

/// True if a column of type `from` may be written to a table column of type `to` without loss:
/// integer widening, float widening, string and binary encodings, timestamps of the same unit.
fn compatible(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to {
        return true;
    }
    let int_width = |t: &DataType| match t {
        Int8 => Some(8),
        Int16 => Some(16),
        Int32 => Some(32),
        Int64 => Some(64),
        _ => None,
    };
    match (from, to) {
        (Null, _) => true,
        (a, b) if int_width(a).is_some() && int_width(b).is_some() => int_width(a) <= int_width(b),
        (UInt8, Int16 | Int32 | Int64) | (UInt16, Int32 | Int64) | (UInt32, Int64) => true,
        (Float16, Float32 | Float64) | (Float32, Float64) => true,
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (Timestamp(a, _), Timestamp(b, _)) => a == b,
        (Dictionary(_, v), t) => compatible(v, t),
        _ => false,
    }
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
        let out = s.conform(&[input], false).unwrap();
        assert_eq!(out[0].schema(), s.arrow);
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
        let err = s.conform(&[input], false).unwrap_err();
        assert!(matches!(err, TableError::InvalidInput { column: Some(c), .. } if c == "v"));
    }
}
