//! The checks [`super::context::TableContext::open_at`] runs before any state change, so that
//! arbor never writes a table it would change the meaning of:
//!
//! - the table version must be one arbor writes (8 or 9); a version 6 table is read-only and
//!   the error names the conversion (`arbor upgrade`). Every state change keeps the table at
//!   its version: nothing here or elsewhere rewrites `hoodie.table.version`;
//! - the merge settings must be ones arbor applies: a version 9 partial update mode other than
//!   `NONE`, or merge properties (`hoodie.record.merge.property.*`, which carry e.g. the delete
//!   marker of a migrated payload), would make arbor's merge differ from Hudi's, so writes
//!   are refused naming the key; so are several ordering fields (version 9's
//!   `hoodie.table.ordering.fields` is a list; arbor orders by one field);
//! - data writes and compactions of a table that records change data
//!   ([`refuse_change_data_capture`], checked by those operations, not at open).

use arbor_timeline::config::keys;
use arbor_timeline::TableConfig;

use crate::error::{Result, TableError};

/// `Err(`[`TableError::ReadOnlyVersion`]`)` for a table of a version arbor reads but does not
/// write (6): "table version 6 (Hudi 0.x) is read-only in arbor; run `arbor upgrade <path>` to
/// convert it to version 9". Versions 8 and 9 pass.
pub(crate) fn refuse_unwritable_version(config: &TableConfig) -> Result<()> {
    let version = config.version();
    if version.is_writable() {
        return Ok(());
    }
    Err(TableError::ReadOnlyVersion {
        version: version.code(),
        release: version.hudi_release(),
    })
}

/// `Err(Unsupported)` naming the key when the table's merge settings are ones arbor's writers
/// do not apply: `hoodie.table.partial.update.mode` other than `NONE`, any
/// `hoodie.record.merge.property.*` key, or more than one ordering field.
pub(crate) fn refuse_unsupported_merge_config(config: &TableConfig) -> Result<()> {
    let ordering = config.ordering_fields();
    if ordering.len() > 1 {
        return Err(TableError::Unsupported {
            reason: format!(
                "writing tables with several ordering fields ({}); arbor orders by one",
                ordering.join(",")
            ),
        });
    }
    if let Some(mode) = config.get(keys::PARTIAL_UPDATE_MODE) {
        if !mode.trim().eq_ignore_ascii_case("NONE") && !mode.trim().is_empty() {
            return Err(TableError::Unsupported {
                reason: format!(
                    "writing tables with {}={}",
                    keys::PARTIAL_UPDATE_MODE,
                    mode.trim()
                ),
            });
        }
    }
    if let Some((key, value)) = config
        .properties()
        .iter()
        .find(|(k, _)| k.starts_with(keys::MERGE_PROPERTY_PREFIX))
    {
        return Err(TableError::Unsupported {
            reason: format!("writing tables with merge property {key}={value}"),
        });
    }
    Ok(())
}

/// `Err(Unsupported)` for a table whose writers record change data (`hoodie.table.cdc.enabled`
/// true): Java writes `.cdc` log files with every data write (and, on merge-on-read, with every
/// compaction) that Spark's CDC queries read; arbor writes none, so its writes would be missing
/// from the change stream. `what` names the refused operation. Reads, cleaning, TTL, tags,
/// branches and clones go on.
pub(crate) fn refuse_change_data_capture(config: &TableConfig, what: &str) -> Result<()> {
    let enabled = config
        .get(keys::CDC_ENABLED)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !enabled {
        return Ok(());
    }
    Err(TableError::Unsupported {
        reason: format!(
            "{what} on a table with {}=true: arbor writes no change-data-capture (.cdc) log \
             files, so Spark's CDC queries would miss the change; write with Spark. Nothing \
             was written",
            keys::CDC_ENABLED
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use arbor_timeline::config::{TableType, TableVersion};

    use super::*;

    fn config(version: TableVersion) -> TableConfig {
        TableConfig::builder("t", TableType::CopyOnWrite)
            .table_version(version)
            .build()
            .unwrap()
    }

    #[test]
    fn test_versions_8_and_9_are_writable() {
        for v in [TableVersion::Eight, TableVersion::Nine] {
            refuse_unwritable_version(&config(v)).unwrap();
        }
    }

    #[test]
    fn test_version_6_is_refused_naming_upgrade() {
        let c = TableConfig::parse(
            b"hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\n",
            "hoodie.properties",
        )
        .unwrap();
        let e = refuse_unwritable_version(&c).unwrap_err();
        assert_eq!(
            e.to_string(),
            "table version 6 (Hudi 0.x) is read-only in arbor; run `arbor upgrade <path>` \
             to convert it to version 9"
        );
    }

    #[test]
    fn test_partial_update_mode_and_merge_properties_are_refused_naming_the_key() {
        let mut c = config(TableVersion::Nine);
        c.set(keys::PARTIAL_UPDATE_MODE, "NONE").unwrap();
        refuse_unsupported_merge_config(&c).unwrap();
        c.set(keys::PARTIAL_UPDATE_MODE, "IGNORE_DEFAULTS").unwrap();
        let e = refuse_unsupported_merge_config(&c).unwrap_err().to_string();
        assert!(
            e.contains("hoodie.table.partial.update.mode=IGNORE_DEFAULTS"),
            "{e}"
        );
        let mut c = config(TableVersion::Nine);
        c.set(
            "hoodie.record.merge.property.hoodie.payload.delete.field",
            "Op",
        )
        .unwrap();
        let e = refuse_unsupported_merge_config(&c).unwrap_err().to_string();
        assert!(
            e.contains("hoodie.record.merge.property.hoodie.payload.delete.field"),
            "{e}"
        );
    }

    #[test]
    fn test_change_data_capture_tables_refuse_writes_naming_the_property() {
        let mut c = config(TableVersion::Nine);
        refuse_change_data_capture(&c, "upsert").unwrap();
        c.set(keys::CDC_ENABLED, "false").unwrap();
        refuse_change_data_capture(&c, "upsert").unwrap();
        c.set(keys::CDC_ENABLED, "true").unwrap();
        let e = refuse_change_data_capture(&c, "upsert")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("upsert on a table with hoodie.table.cdc.enabled=true"),
            "{e}"
        );
    }

    #[test]
    fn test_several_ordering_fields_are_refused_one_is_not() {
        let mut c = config(TableVersion::Nine);
        c.set(keys::ORDERING_FIELDS, "ts").unwrap();
        refuse_unsupported_merge_config(&c).unwrap();
        c.set(keys::ORDERING_FIELDS, "_event_bin_file,_event_pos")
            .unwrap();
        let e = refuse_unsupported_merge_config(&c).unwrap_err().to_string();
        assert!(e.contains("_event_bin_file,_event_pos"), "{e}");
    }
}
