//! `hoodie.properties` of an upgraded table, as Java Hudi's upgrade handlers change it
//! (`SevenToEightUpgradeHandler` for 6 -> 8, `EightToNineUpgradeHandler` for 8 -> 9; version
//! 7 adds nothing to the table config).

use crate::config::{keys, Properties, TableConfig, TableType};
use crate::error::{Result, TimelineError};

/// Hudi's payload classes (`org.apache.hudi.common.model.*`).
const DEFAULT_PAYLOAD: &str = "org.apache.hudi.common.model.DefaultHoodieRecordPayload";
const OVERWRITE_WITH_LATEST_PAYLOAD: &str =
    "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload";
const EVENT_TIME_PAYLOAD: &str = "org.apache.hudi.common.model.EventTimeAvroPayload";
const AWS_DMS_PAYLOAD: &str = "org.apache.hudi.common.model.AWSDmsAvroPayload";
const OVERWRITE_NON_DEFAULTS_PAYLOAD: &str =
    "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload";
const PARTIAL_UPDATE_PAYLOAD: &str = "org.apache.hudi.common.model.PartialUpdateAvroPayload";
const MYSQL_DEBEZIUM_PAYLOAD: &str =
    "org.apache.hudi.common.model.debezium.MySqlDebeziumAvroPayload";
const POSTGRES_DEBEZIUM_PAYLOAD: &str =
    "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload";

/// Hudi's built-in merge strategy ids (`HoodieRecordMerger`).
const COMMIT_TIME_STRATEGY: &str = "ce9acb64-bde0-424c-9b91-f6ebba25356d";
const EVENT_TIME_STRATEGY: &str = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5";
const PAYLOAD_STRATEGY: &str = "00000000-0000-0000-0000-000000000000";
const CUSTOM_STRATEGY: &str = "1897ef5f-18bc-4557-939c-9d6a8afd1519";

/// Version 9 keys Java's 8 -> 9 upgrade writes.
const LEGACY_PAYLOAD_CLASS: &str = "hoodie.table.legacy.payload.class";
/// The 0.x spelling of `hoodie.record.merge.strategy.id` (Java reads it as an alternative).
const LEGACY_MERGE_STRATEGY_KEY: &str = "hoodie.compaction.record.merger.strategy";
const PARTIAL_UPDATE_MODE: &str = "hoodie.table.partial.update.mode";
const MERGE_PROPERTY_PREFIX: &str = "hoodie.record.merge.property.";
/// Bootstrap index keys (0.x class, 1.x type).
const BOOTSTRAP_INDEX_CLASS: &str = "hoodie.bootstrap.index.class";
const BOOTSTRAP_INDEX_TYPE: &str = "hoodie.bootstrap.index.type";
const BOOTSTRAP_INDEX_ENABLE: &str = "hoodie.bootstrap.index.enable";

/// Java's `KeyGeneratorType` by class name (`KeyGeneratorType.fromClassName`); any other class
/// is `USER_PROVIDED`.
const KEY_GENERATOR_TYPES: &[(&str, &str)] = &[
    ("org.apache.hudi.keygen.SimpleKeyGenerator", "SIMPLE"),
    (
        "org.apache.hudi.keygen.SimpleAvroKeyGenerator",
        "SIMPLE_AVRO",
    ),
    ("org.apache.hudi.keygen.ComplexKeyGenerator", "COMPLEX"),
    (
        "org.apache.hudi.keygen.ComplexAvroKeyGenerator",
        "COMPLEX_AVRO",
    ),
    (
        "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "TIMESTAMP",
    ),
    (
        "org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator",
        "TIMESTAMP_AVRO",
    ),
    ("org.apache.hudi.keygen.CustomKeyGenerator", "CUSTOM"),
    (
        "org.apache.hudi.keygen.CustomAvroKeyGenerator",
        "CUSTOM_AVRO",
    ),
    (
        "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        "NON_PARTITION",
    ),
    (
        "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator",
        "NON_PARTITION_AVRO",
    ),
    (
        "org.apache.hudi.keygen.GlobalDeleteKeyGenerator",
        "GLOBAL_DELETE",
    ),
    (
        "org.apache.hudi.keygen.GlobalAvroDeleteKeyGenerator",
        "GLOBAL_DELETE_AVRO",
    ),
];

/// The `hoodie.properties` of `config` (a table at version `from`) upgraded to version `to`:
/// 6 -> 8 (Java's 6 -> 7 -> 8), 8 -> 9, or 6 -> 9 (both). Pure: no I/O.
///
/// 6 -> 8 sets `hoodie.table.version=8`, `hoodie.timeline.layout.version=2`,
/// `hoodie.timeline.path=timeline`, `hoodie.table.initial.version=6`, the record merge mode,
/// strategy id and payload class Java derives from the payload class, table type and ordering
/// field, `hoodie.table.keygenerator.type` from the key generator class, and the bootstrap
/// index type from its class. 8 -> 9 sets `hoodie.table.version=9`, moves the ordering field
/// to `hoodie.table.ordering.fields`, and applies Java's merge mode, partial update mode and
/// merge property reconciliation for the payloads RFC-97 deprecates, moving such a payload
/// class to `hoodie.table.legacy.payload.class`. Every other key is kept.
///
/// Errors ([`TimelineError::Upgrade`]): `from` is not 6 or 8, `to` is not 8 or 9, or
/// `to <= from` (a downgrade or no change); a bootstrap index class Java does not know.
pub fn upgraded_config(config: &TableConfig, from: u32, to: u32) -> Result<TableConfig> {
    let refuse = |reason: String| TimelineError::Upgrade {
        path: ".hoodie/hoodie.properties".to_string(),
        reason,
    };
    if !matches!((from, to), (6, 8) | (6, 9) | (8, 9)) {
        return Err(refuse(if to <= from {
            format!("the table is version {from}; arbor upgrades only to a later version (8 or 9)")
        } else {
            format!("arbor upgrades table versions 6 and 8 to 8 or 9, not {from} to {to}")
        }));
    }
    let mut props = config.properties().clone();
    let table_type = config.table_type();
    if from == 6 {
        six_to_eight(&mut props, table_type).map_err(|e| match e {
            TimelineError::Upgrade { reason, .. } => refuse(reason),
            other => other,
        })?;
    }
    if to == 9 {
        eight_to_nine(&mut props);
    }
    TableConfig::from_properties(props)
}

/// Java's `SevenToEightUpgradeHandler` table properties.
fn six_to_eight(c: &mut Properties, table_type: TableType) -> Result<()> {
    c.set(keys::VERSION, "8");
    c.set(keys::TIMELINE_LAYOUT_VERSION, "2");
    c.set(keys::TIMELINE_PATH, "timeline");
    // setInitialVersion: the version the file holds (6), else 6.
    c.set(keys::INITIAL_VERSION, "6");
    // upgradeMergeMode
    let payload = c.get(keys::PAYLOAD_CLASS).map(str::to_string);
    let payload = payload.as_deref().filter(|p| !p.trim().is_empty());
    let has_ordering = c
        .get(keys::PRECOMBINE_FIELD)
        .is_some_and(|f| !f.trim().is_empty());
    let (class, mode, strategy) = match payload {
        Some(p) if is_custom_payload(p) => (p.to_string(), "CUSTOM", PAYLOAD_STRATEGY),
        _ if table_type == TableType::MergeOnRead && has_ordering => (
            DEFAULT_PAYLOAD.to_string(),
            "EVENT_TIME_ORDERING",
            EVENT_TIME_STRATEGY,
        ),
        Some(DEFAULT_PAYLOAD) => (
            DEFAULT_PAYLOAD.to_string(),
            "EVENT_TIME_ORDERING",
            EVENT_TIME_STRATEGY,
        ),
        _ => (
            OVERWRITE_WITH_LATEST_PAYLOAD.to_string(),
            "COMMIT_TIME_ORDERING",
            COMMIT_TIME_STRATEGY,
        ),
    };
    c.set(keys::PAYLOAD_CLASS, class);
    c.set(keys::RECORD_MERGE_MODE, mode);
    c.set(keys::RECORD_MERGE_STRATEGY_ID, strategy);
    // upgradeKeyGeneratorType
    if let Some(class) = c
        .get(keys::KEY_GENERATOR_CLASS)
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
    {
        let ty = KEY_GENERATOR_TYPES
            .iter()
            .find(|(k, _)| *k == class)
            .map_or("USER_PROVIDED", |(_, t)| t);
        c.set(keys::KEY_GENERATOR_TYPE, ty);
    }
    // upgradeBootstrapIndexType
    if c.get(BOOTSTRAP_INDEX_CLASS).is_some() || c.get(BOOTSTRAP_INDEX_TYPE).is_some() {
        let enabled = c
            .get(BOOTSTRAP_INDEX_ENABLE)
            .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"));
        let class = match c.get(BOOTSTRAP_INDEX_CLASS).map(str::trim) {
            _ if !enabled => None,
            Some(cls) if !cls.is_empty() => Some(cls.to_string()),
            _ => match c.get(BOOTSTRAP_INDEX_TYPE).map(str::trim) {
                Some("NO_OP") => {
                    Some("org.apache.hudi.common.bootstrap.index.NoOpBootstrapIndex".into())
                }
                _ => {
                    Some("org.apache.hudi.common.bootstrap.index.hfile.HFileBootstrapIndex".into())
                }
            },
        };
        if let Some(class) = class {
            let ty = match class.rsplit('.').next() {
                Some("HFileBootstrapIndex") => "HFILE",
                Some("NoOpBootstrapIndex") => "NO_OP",
                _ => {
                    return Err(TimelineError::Upgrade {
                        path: String::new(),
                        reason: format!("unknown bootstrap index class {class:?}"),
                    })
                }
            };
            c.set(BOOTSTRAP_INDEX_CLASS, class);
            c.set(BOOTSTRAP_INDEX_TYPE, ty);
        }
    }
    Ok(())
}

/// A payload class other than Hudi's default, event-time and overwrite-with-latest ones
/// (Java's `isCustomPayloadClass`).
fn is_custom_payload(p: &str) -> bool {
    ![
        DEFAULT_PAYLOAD,
        EVENT_TIME_PAYLOAD,
        OVERWRITE_WITH_LATEST_PAYLOAD,
    ]
    .contains(&p)
}

/// Java's `EightToNineUpgradeHandler` table properties (Hudi 1.1): merge mode, partial
/// update mode and merge properties of the payloads RFC-97 deprecates, the payload class moved
/// to `hoodie.table.legacy.payload.class`, and the ordering field moved from
/// `hoodie.table.precombine.field` to `hoodie.table.ordering.fields`.
fn eight_to_nine(c: &mut Properties) {
    c.set(keys::VERSION, "9");
    let payload = c
        .get(keys::PAYLOAD_CLASS)
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    let strategy = c
        .get(keys::RECORD_MERGE_STRATEGY_ID)
        .or_else(|| c.get(LEGACY_MERGE_STRATEGY_KEY))
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    let builtin = [
        COMMIT_TIME_STRATEGY,
        CUSTOM_STRATEGY,
        EVENT_TIME_STRATEGY,
        PAYLOAD_STRATEGY,
    ]
    .contains(&strategy.as_str());
    // reconcileOrderingFieldsConfig (for every payload)
    let ordering = if payload.as_deref() == Some(MYSQL_DEBEZIUM_PAYLOAD) {
        Some("_event_bin_file,_event_pos".to_string())
    } else {
        c.get(keys::ORDERING_FIELDS)
            .or_else(|| c.get(keys::PRECOMBINE_FIELD))
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_string)
    };
    if let Some(fields) = ordering {
        c.set(keys::ORDERING_FIELDS, fields);
        c.remove(keys::PRECOMBINE_FIELD);
    }
    let Some(payload) = payload.filter(|_| builtin) else {
        return;
    };
    let p = payload.as_str();
    // reconcileMergeModeConfig
    if [AWS_DMS_PAYLOAD, OVERWRITE_NON_DEFAULTS_PAYLOAD].contains(&p) {
        c.set(keys::RECORD_MERGE_MODE, "COMMIT_TIME_ORDERING");
        c.set(keys::RECORD_MERGE_STRATEGY_ID, COMMIT_TIME_STRATEGY);
    } else if [
        EVENT_TIME_PAYLOAD,
        MYSQL_DEBEZIUM_PAYLOAD,
        PARTIAL_UPDATE_PAYLOAD,
        POSTGRES_DEBEZIUM_PAYLOAD,
    ]
    .contains(&p)
    {
        c.set(keys::RECORD_MERGE_MODE, "EVENT_TIME_ORDERING");
        c.set(keys::RECORD_MERGE_STRATEGY_ID, EVENT_TIME_STRATEGY);
    }
    // reconcilePartialUpdateModeConfig
    if p == OVERWRITE_NON_DEFAULTS_PAYLOAD || p == PARTIAL_UPDATE_PAYLOAD {
        c.set(PARTIAL_UPDATE_MODE, "IGNORE_DEFAULTS");
    } else if p == POSTGRES_DEBEZIUM_PAYLOAD {
        c.set(PARTIAL_UPDATE_MODE, "FILL_UNAVAILABLE");
    }
    // reconcileMergePropertiesConfig
    if p == AWS_DMS_PAYLOAD {
        c.set(
            format!("{MERGE_PROPERTY_PREFIX}hoodie.payload.delete.field"),
            "Op",
        );
        c.set(
            format!("{MERGE_PROPERTY_PREFIX}hoodie.payload.delete.marker"),
            "D",
        );
    } else if p == POSTGRES_DEBEZIUM_PAYLOAD {
        c.set(
            format!("{MERGE_PROPERTY_PREFIX}partial.update.unavailable.value"),
            "__debezium_unavailable_value",
        );
    }
    // reconcilePayloadClassConfig
    if [
        AWS_DMS_PAYLOAD,
        DEFAULT_PAYLOAD,
        EVENT_TIME_PAYLOAD,
        MYSQL_DEBEZIUM_PAYLOAD,
        OVERWRITE_NON_DEFAULTS_PAYLOAD,
        OVERWRITE_WITH_LATEST_PAYLOAD,
        PARTIAL_UPDATE_PAYLOAD,
        POSTGRES_DEBEZIUM_PAYLOAD,
    ]
    .contains(&p)
    {
        c.set(LEGACY_PAYLOAD_CLASS, p);
        c.remove(keys::PAYLOAD_CLASS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Properties;

    fn config(pairs: &[(&str, &str)]) -> TableConfig {
        let mut p = Properties::new();
        p.set(keys::NAME, "t");
        p.set(keys::DATABASE_NAME, "default");
        for (k, v) in pairs {
            p.set(*k, *v);
        }
        TableConfig::from_properties(p).unwrap()
    }

    fn v6_mor_trips() -> TableConfig {
        config(&[
            (keys::TYPE, "MERGE_ON_READ"),
            (keys::VERSION, "6"),
            (keys::TIMELINE_LAYOUT_VERSION, "1"),
            (keys::PRECOMBINE_FIELD, "ts"),
            (keys::PAYLOAD_CLASS, OVERWRITE_WITH_LATEST_PAYLOAD),
            (
                keys::KEY_GENERATOR_CLASS,
                "org.apache.hudi.keygen.SimpleKeyGenerator",
            ),
        ])
    }

    #[test]
    fn test_six_to_eight_mor_with_ordering_is_event_time() {
        let c = upgraded_config(&v6_mor_trips(), 6, 8).unwrap();
        assert_eq!(c.get(keys::VERSION), Some("8"));
        assert_eq!(c.get(keys::TIMELINE_LAYOUT_VERSION), Some("2"));
        assert_eq!(c.get(keys::TIMELINE_PATH), Some("timeline"));
        assert_eq!(c.get(keys::INITIAL_VERSION), Some("6"));
        assert_eq!(c.get(keys::RECORD_MERGE_MODE), Some("EVENT_TIME_ORDERING"));
        assert_eq!(
            c.get(keys::RECORD_MERGE_STRATEGY_ID),
            Some(EVENT_TIME_STRATEGY)
        );
        assert_eq!(c.get(keys::PAYLOAD_CLASS), Some(DEFAULT_PAYLOAD));
        assert_eq!(c.get(keys::KEY_GENERATOR_TYPE), Some("SIMPLE"));
        assert_eq!(c.get(keys::PRECOMBINE_FIELD), Some("ts"));
    }

    #[test]
    fn test_six_to_eight_cow_without_payload_is_commit_time() {
        let c = config(&[
            (keys::TYPE, "COPY_ON_WRITE"),
            (keys::VERSION, "6"),
            (keys::PRECOMBINE_FIELD, "longField"),
            (
                keys::KEY_GENERATOR_CLASS,
                "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
            ),
        ]);
        let c = upgraded_config(&c, 6, 8).unwrap();
        assert_eq!(c.get(keys::RECORD_MERGE_MODE), Some("COMMIT_TIME_ORDERING"));
        assert_eq!(
            c.get(keys::PAYLOAD_CLASS),
            Some(OVERWRITE_WITH_LATEST_PAYLOAD)
        );
        assert_eq!(c.get(keys::KEY_GENERATOR_TYPE), Some("NON_PARTITION"));
    }

    #[test]
    fn test_custom_payload_and_unknown_keygen() {
        let c = config(&[
            (keys::TYPE, "COPY_ON_WRITE"),
            (keys::VERSION, "6"),
            (keys::PAYLOAD_CLASS, "com.acme.MyPayload"),
            (keys::KEY_GENERATOR_CLASS, "com.acme.MyKeyGen"),
        ]);
        let c = upgraded_config(&c, 6, 8).unwrap();
        assert_eq!(c.get(keys::RECORD_MERGE_MODE), Some("CUSTOM"));
        assert_eq!(
            c.get(keys::RECORD_MERGE_STRATEGY_ID),
            Some(PAYLOAD_STRATEGY)
        );
        assert_eq!(c.get(keys::PAYLOAD_CLASS), Some("com.acme.MyPayload"));
        assert_eq!(c.get(keys::KEY_GENERATOR_TYPE), Some("USER_PROVIDED"));
    }

    #[test]
    fn test_six_to_nine_mor_moves_payload_to_legacy() {
        let c = upgraded_config(&v6_mor_trips(), 6, 9).unwrap();
        assert_eq!(c.get(keys::VERSION), Some("9"));
        assert_eq!(c.get(keys::PAYLOAD_CLASS), None);
        assert_eq!(c.get(LEGACY_PAYLOAD_CLASS), Some(DEFAULT_PAYLOAD));
        assert_eq!(c.get(PARTIAL_UPDATE_MODE), None);
        assert_eq!(c.get(keys::RECORD_MERGE_MODE), Some("EVENT_TIME_ORDERING"));
        assert_eq!(c.get(keys::ORDERING_FIELDS), Some("ts"));
        assert_eq!(c.get(keys::PRECOMBINE_FIELD), None);
    }

    #[test]
    fn test_eight_to_nine_cow_dms_payload() {
        let c = config(&[
            (keys::TYPE, "COPY_ON_WRITE"),
            (keys::VERSION, "8"),
            (keys::TIMELINE_LAYOUT_VERSION, "2"),
            (keys::PRECOMBINE_FIELD, "seq"),
            (keys::PAYLOAD_CLASS, AWS_DMS_PAYLOAD),
            (keys::RECORD_MERGE_STRATEGY_ID, PAYLOAD_STRATEGY),
            (keys::RECORD_MERGE_MODE, "CUSTOM"),
        ]);
        let c = upgraded_config(&c, 8, 9).unwrap();
        assert_eq!(c.get(keys::VERSION), Some("9"));
        assert_eq!(c.get(keys::RECORD_MERGE_MODE), Some("COMMIT_TIME_ORDERING"));
        assert_eq!(
            c.get(keys::RECORD_MERGE_STRATEGY_ID),
            Some(COMMIT_TIME_STRATEGY)
        );
        assert_eq!(c.get(LEGACY_PAYLOAD_CLASS), Some(AWS_DMS_PAYLOAD));
        assert_eq!(c.get(keys::PAYLOAD_CLASS), None);
        assert_eq!(
            c.get("hoodie.record.merge.property.hoodie.payload.delete.marker"),
            Some("D")
        );
        assert_eq!(c.get(keys::ORDERING_FIELDS), Some("seq"));
    }

    #[test]
    fn test_refuses_downgrade_and_no_change() {
        let c = v6_mor_trips();
        for (from, to) in [(6, 6), (8, 8), (9, 8), (8, 6), (9, 9), (5, 8)] {
            let e = upgraded_config(&c, from, to).unwrap_err();
            assert!(
                matches!(e, TimelineError::Upgrade { .. }),
                "{from}->{to}: {e}"
            );
        }
    }

    #[test]
    fn test_bootstrap_index_type_from_class() {
        let c = config(&[
            (keys::TYPE, "COPY_ON_WRITE"),
            (keys::VERSION, "6"),
            (
                BOOTSTRAP_INDEX_CLASS,
                "org.apache.hudi.common.bootstrap.index.NoOpBootstrapIndex",
            ),
        ]);
        let c = upgraded_config(&c, 6, 8).unwrap();
        assert_eq!(c.get(BOOTSTRAP_INDEX_TYPE), Some("NO_OP"));
        let bad = config(&[
            (keys::TYPE, "COPY_ON_WRITE"),
            (keys::VERSION, "6"),
            (BOOTSTRAP_INDEX_CLASS, "com.acme.Index"),
        ]);
        assert!(upgraded_config(&bad, 6, 8).is_err());
    }
}
