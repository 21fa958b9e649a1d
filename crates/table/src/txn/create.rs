//! Creating a table: validating [`CreateOptions`], writing `hoodie.properties` and, when asked,
//! the metadata table ([`crate::Table::create`]).

use std::sync::Arc;

use arbor_storage::Storage;
use arbor_timeline::config::{BaseFileFormat, RecordMergeMode, TableVersion};
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{InstantTimeGenerator, MetaRoot, TableConfig, TableLayout};

use super::context::{invalid, TableContext};
use crate::error::{Result, TableError};
use crate::keygen::KeyGenerator;
use crate::write::mdt_sync;
use crate::write::options::{BaseFormat, CreateOptions, WriteOptions};
use crate::write::schema::DataSchema;

/// Validates `options`, creates the table at `storage` (fails if one exists) and returns the
/// context of its main (the root metadata). See [`crate::Table::create`].
pub(crate) async fn create(
    storage: Arc<dyn Storage>,
    options: CreateOptions,
) -> Result<TableContext> {
    if options.name.is_empty() {
        return Err(invalid(None, "the table name is empty"));
    }
    if options.record_key_fields.is_empty() {
        return Err(invalid(None, "a table needs at least one record key field"));
    }
    let schema = DataSchema::for_new_table(&options.name, &options.schema)?;
    let has = |c: &str| schema.arrow.field_with_name(c).is_ok();
    for (what, cols) in [
        ("record key", &options.record_key_fields),
        ("partition", &options.partition_fields),
    ] {
        for c in cols {
            if !has(c) {
                return Err(invalid(
                    Some(c),
                    format!("the {what} column is not in the schema"),
                ));
            }
        }
    }
    if let Some(o) = &options.ordering_field {
        if !has(o) {
            return Err(invalid(Some(o), "the ordering column is not in the schema"));
        }
    }
    let mode = match options.merge_mode {
        Some(m) => m,
        None if options.ordering_field.is_some() => RecordMergeMode::EventTimeOrdering,
        None => RecordMergeMode::CommitTimeOrdering,
    };
    match mode {
        RecordMergeMode::Custom => {
            return Err(TableError::Unsupported {
                reason: "merge mode CUSTOM".into(),
            })
        }
        RecordMergeMode::EventTimeOrdering if options.ordering_field.is_none() => {
            return Err(invalid(None, "EVENT_TIME_ORDERING needs an ordering field"))
        }
        _ => {}
    }
    if !options.table_version.is_writable() {
        return Err(invalid(
            None,
            format!(
                "arbor creates tables of version 8 or 9, not {}",
                options.table_version
            ),
        ));
    }
    if options.base_format == BaseFormat::Lance {
        if !BaseFormat::Lance.supported() {
            return Err(TableError::Unsupported {
                reason: "Lance base files: this build of arbor left out the `lance` feature".into(),
            });
        }
        if let Some(column) = schema
            .arrow
            .fields()
            .iter()
            .find(|f| arbor_format::base::holds_map(f.data_type()))
        {
            return Err(invalid(
                Some(column.name()),
                "a Lance base file cannot hold a map column (Lance formats 2.0 and 2.1, which \
                 Hudi 1.2 writes and reads, have no map type); use parquet base files",
            ));
        }
        if options.table_version != TableVersion::Nine {
            return Err(invalid(
                None,
                format!(
                    "Lance base files need table version 9 (Hudi 1.2), not {}",
                    options.table_version
                ),
            ));
        }
    }
    let mut builder = TableConfig::builder(options.name.clone(), options.table_type)
        .table_version(options.table_version)
        .record_key_fields(options.record_key_fields.iter().cloned())
        .partition_fields(options.partition_fields.iter().cloned())
        .hive_style_partitioning(options.hive_style_partitioning)
        .merge_mode(mode)
        .create_schema(schema.avro_json.clone());
    if let Some(o) = &options.ordering_field {
        builder = builder.ordering_field(o.clone());
    }
    if options.base_format == BaseFormat::Lance {
        builder = builder.base_file_format(BaseFileFormat::Lance);
    }
    let config = builder.build()?;
    // Key generation must accept the config before the table exists.
    KeyGenerator::from_table_config(&config)?;
    TableConfig::create(storage.as_ref(), DEFAULT_META_DIR, &config).await?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    let generator = Arc::new(InstantTimeGenerator::new());
    generator.share_clock(storage.clone());
    let config = if options.metadata_table {
        mdt_sync::init(&storage, &layout, &generator).await?;
        TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?
    } else {
        config
    };
    Ok(TableContext {
        root_storage: storage.clone(),
        root: MetaRoot::Root,
        follows_main: true,
        storage,
        config,
        lock: None,
        options: WriteOptions::default(),
        generator,
        schema,
        layout,
    })
}
