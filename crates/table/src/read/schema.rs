//! The read schema of a table.

use std::sync::Arc;

use arbor_format::avro_arrow::{avro_schema_to_arrow, parse_avro_schema};
use arbor_format::base::base_file_schema;
use arbor_format::meta;
use arbor_fsview::FileSystemView;
use arbor_storage::Storage;
use arbor_timeline::avro::{decode_instant, InstantContent};
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::TableConfig;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::{Result, TableError};

/// The schema readers return: the latest completed write's `extraMetadata.schema` (else the
/// first written file's schema, else `hoodie.table.create.schema`), as Arrow, with the five
/// meta columns first when the table populates them.
pub(crate) async fn resolve_read_schema(
    storage: &Arc<dyn Storage>,
    config: &TableConfig,
    view: &FileSystemView,
) -> Result<SchemaRef> {
    let history = view.history();
    let layout = view.layout();
    let legacy = layout.layout == LayoutVersion::V1;
    let mut data_schema: Option<SchemaRef> = None;
    let mut first_file: Option<String> = None;
    for instant in history.completed_writes().iter().rev() {
        let bytes = history
            .read_completed_content(&instant.requested_time, instant.action)
            .await?;
        let key = layout.instant_key(instant)?;
        let content = decode_instant(
            instant,
            &bytes,
            &key,
            legacy || instant.completion_time.is_none(),
        )?;
        let (schema, files) = match &content {
            InstantContent::Commit(m) => (
                m.schema().map(str::to_string),
                m.write_stats()
                    .filter_map(|(_, s)| s.path.clone())
                    .collect::<Vec<_>>(),
            ),
            InstantContent::ReplaceCommit(m) => (
                m.schema().map(str::to_string),
                m.write_stats()
                    .filter_map(|(_, s)| s.path.clone())
                    .collect::<Vec<_>>(),
            ),
            _ => (None, Vec::new()),
        };
        if let Some(json) = schema.filter(|s| !s.trim().is_empty()) {
            let avro = parse_avro_schema(&json)?;
            data_schema = Some(avro_schema_to_arrow(&avro)?);
            break;
        }
        if first_file.is_none() {
            first_file = files
                .into_iter()
                .find(|p| p.ends_with(".parquet") || p.ends_with(".lance"));
        }
    }
    if data_schema.is_none() {
        if let Some(path) = first_file {
            data_schema = Some(base_file_schema(storage.clone(), &path).await?);
        }
    }
    if data_schema.is_none() {
        if let Some(json) = config.get("hoodie.table.create.schema") {
            let avro = parse_avro_schema(json)?;
            data_schema = Some(avro_schema_to_arrow(&avro)?);
        }
    }
    let data_schema = data_schema.ok_or_else(|| TableError::Unsupported {
        reason: "the table has no schema: no commit records one and hoodie.table.create.schema \
                 is absent"
            .into(),
    })?;
    let mut fields: Vec<Arc<Field>> = Vec::new();
    if config.populate_meta_fields() {
        for name in meta::META_COLUMNS {
            fields.push(Arc::new(Field::new(name, DataType::Utf8, true)));
        }
    }
    for f in data_schema.fields() {
        if !meta::META_COLUMNS.contains(&f.name().as_str()) || !config.populate_meta_fields() {
            fields.push(f.clone());
        }
    }
    Ok(Arc::new(Schema::new(fields)))
}
