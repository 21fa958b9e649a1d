//! Unit tests of the table config: properties text, validation, accessors, changes, the
//! builder and the backup protocol.

use chrono::{DateTime, Utc};

use super::*;
use crate::error::TimelineError;
use crate::naming::LayoutVersion;

fn props(pairs: &[(&str, &str)]) -> Properties {
    let mut p = Properties::new();
    for (k, v) in pairs {
        p.set(*k, *v);
    }
    p
}

const MINIMAL_V8: &str = "hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\n\
    hoodie.table.version=8\nhoodie.timeline.layout.version=2\n";

#[test]
fn test_parse_separators_and_comments_all_forms() {
    let text =
        "# comment\n! also comment\n\n  a=1\nb:2\nc 3\nd = 4\ne\t:\t5\nf\ng=\n  h  =  x y  \n";
    let p = Properties::parse(text).unwrap();
    assert_eq!(
        p,
        props(&[
            ("a", "1"),
            ("b", "2"),
            ("c", "3"),
            ("d", "4"),
            ("e", "5"),
            ("f", ""),
            ("g", ""),
            ("h", "x y  "),
        ])
    );
}

#[test]
fn test_parse_escapes_java_semantics() {
    let text = "k\\:x\\=y\\ z=a\\:b\\=c\\\\d\\te\\nf\\u00e9\\u20AC\\qg\n";
    let p = Properties::parse(text).unwrap();
    assert_eq!(p.get("k:x=y z"), Some("a:b=c\\d\te\nf\u{e9}\u{20ac}qg"));
}

#[test]
fn test_parse_surrogate_pair_escape_decodes() {
    let p = Properties::parse("k=\\uD83D\\uDE00\n").unwrap();
    assert_eq!(p.get("k"), Some("\u{1F600}"));
    assert!(Properties::parse("k=\\uD83D\n").is_err());
}

#[test]
fn test_parse_line_continuation_joins_and_strips_indent() {
    let text = "a=one\\\n    two\\\n\tthree\nb=x\\\\\nc=y\\\r\n  #notcomment\r\nd=z\\";
    let p = Properties::parse(text).unwrap();
    assert_eq!(p.get("a"), Some("onetwothree"));
    assert_eq!(p.get("b"), Some("x\\"));
    assert_eq!(p.get("c"), Some("y#notcomment"));
    assert_eq!(p.get("d"), Some("z"));
}

#[test]
fn test_parse_comment_line_ending_in_backslash_does_not_continue() {
    let p = Properties::parse("# comment \\\na=1\n").unwrap();
    assert_eq!(p, props(&[("a", "1")]));
}

#[test]
fn test_parse_malformed_unicode_escape_names_line() {
    let err = Properties::parse("a=1\nb=\\u12G4\n").unwrap_err();
    assert_eq!(err.line, 2);
    assert!(err.reason.contains("uXXXX"), "{err}");
}

#[test]
fn test_parse_cr_only_line_endings() {
    let p = Properties::parse("a=1\rb=2\r").unwrap();
    assert_eq!(p, props(&[("a", "1"), ("b", "2")]));
}

#[test]
fn test_parse_duplicate_key_keeps_position_and_last_value() {
    let p = Properties::parse("a=1\nb=2\na=3\n").unwrap();
    assert_eq!(p, props(&[("a", "3"), ("b", "2")]));
}

#[test]
fn test_render_escapes_like_java_store() {
    let p = props(&[
        ("k y", " lead: =#!\\é€"),
        ("#k", "tab\there"),
        ("\u{1F600}", "x"),
    ]);
    let text = p.render(&["c"]);
    assert_eq!(
        text,
        "#c\nk\\ y=\\ lead\\: \\=\\#\\!\\\\\\u00E9\\u20AC\n\\#k=tab\\there\n\\uD83D\\uDE00=x\n"
    );
    assert_eq!(Properties::parse(&text).unwrap(), p);
}

#[test]
fn test_render_parse_round_trip_schema_value() {
    let schema = r#"{"type":"record","name":"r","fields":[{"name":"a","type":["long","null"]}]}"#;
    let p = props(&[(keys::CREATE_SCHEMA, schema)]);
    let text = p.render(&[]);
    assert!(text.contains(r#"{"type"\:"record""#), "{text}");
    assert_eq!(Properties::parse(&text).unwrap(), p);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn test_properties_render_parse_round_trip_any_text(
            entries in proptest::collection::vec((any::<String>(), any::<String>()), 0..8)
        ) {
            let mut p = Properties::new();
            for (k, v) in entries {
                p.set(k, v);
            }
            let text = p.render(&["Updated at now", "date"]);
            prop_assert_eq!(Properties::parse(&text).unwrap(), p);
        }

        #[test]
        fn test_properties_parse_arbitrary_text_never_panics(text in any::<String>()) {
            let _ = Properties::parse(&text);
        }
    }
}

#[test]
fn test_table_checksum_matches_fixture_values() {
    assert_eq!(
        table_checksum(Some("default"), "v8_trips_8i3u1d"),
        1_197_752_875
    );
    assert_eq!(
        table_checksum(None, "v8_trips_8i3u1d_metadata"),
        380_169_000
    );
    assert_eq!(
        table_checksum(Some(""), "v8_trips_8i3u1d_metadata"),
        380_169_000
    );
}

#[test]
fn test_parse_minimal_v8_accepted_with_defaults() {
    let cfg = TableConfig::parse(MINIMAL_V8.as_bytes(), ".hoodie/hoodie.properties").unwrap();
    assert_eq!(cfg.name(), "t");
    assert_eq!(cfg.table_type(), TableType::CopyOnWrite);
    assert_eq!(cfg.version(), TableVersion::Eight);
    assert_eq!(cfg.timeline_layout_version(), LayoutVersion::V2);
    assert_eq!(cfg.timeline_path(), "timeline");
    assert_eq!(cfg.history_path(), "history");
    assert_eq!(cfg.timeline_timezone(), TimelineTimezone::Local);
    assert_eq!(cfg.base_file_format(), BaseFileFormat::Parquet);
    assert!(cfg.populate_meta_fields());
    assert!(cfg.partition_fields().is_empty());
    assert_eq!(cfg.checksum(), None);
}

#[test]
fn test_parse_table_type_spellings_accepted() {
    for (s, t) in [
        ("MERGE_ON_READ", TableType::MergeOnRead),
        ("mor", TableType::MergeOnRead),
        ("cow", TableType::CopyOnWrite),
        ("Copy_On_Write", TableType::CopyOnWrite),
    ] {
        let text = MINIMAL_V8.replace("COPY_ON_WRITE", s);
        let cfg = TableConfig::parse(text.as_bytes(), "p").unwrap();
        assert_eq!(cfg.table_type(), t, "{s}");
    }
    let text = MINIMAL_V8.replace("COPY_ON_WRITE", "BOTH");
    let err = TableConfig::parse(text.as_bytes(), "p").unwrap_err();
    assert!(
        matches!(err, TimelineError::InvalidConfig { key: Some(ref k), .. } if k == keys::TYPE),
        "{err:?}"
    );
}

#[test]
fn test_parse_missing_required_key_names_key() {
    for key in [keys::NAME, keys::TYPE, keys::VERSION] {
        let text: String = MINIMAL_V8
            .lines()
            .filter(|l| !l.starts_with(&format!("{key}=")))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = TableConfig::parse(text.as_bytes(), "x/hoodie.properties").unwrap_err();
        match err {
            TimelineError::InvalidConfig {
                path, key: Some(k), ..
            } => {
                assert_eq!(path, "x/hoodie.properties");
                assert_eq!(k, key);
            }
            other => panic!("{key}: {other:?}"),
        }
    }
}

#[test]
fn test_parse_versions_6_8_9_accepted_7_rejected() {
    let v6 = "hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\n\
              hoodie.timeline.layout.version=1\n";
    let cfg = TableConfig::parse(v6.as_bytes(), "p").unwrap();
    assert_eq!(cfg.version(), TableVersion::Six);
    assert_eq!(cfg.timeline_layout_version(), LayoutVersion::V1);
    let v9 = MINIMAL_V8.replace("version=8", "version=9");
    assert_eq!(
        TableConfig::parse(v9.as_bytes(), "p").unwrap().version(),
        TableVersion::Nine
    );
    let v7 = MINIMAL_V8.replace("version=8", "version=7");
    let err = TableConfig::parse(v7.as_bytes(), "p").unwrap_err();
    assert!(
        matches!(err, TimelineError::UnsupportedVersion { ref version, .. } if version == "7"),
        "{err:?}"
    );
}

#[test]
fn test_parse_v8_with_layout_1_or_missing_rejected() {
    for text in [
        MINIMAL_V8.replace("layout.version=2", "layout.version=1"),
        MINIMAL_V8.replace("hoodie.timeline.layout.version=2\n", ""),
    ] {
        let err = TableConfig::parse(text.as_bytes(), "p").unwrap_err();
        assert!(
            matches!(err, TimelineError::InvalidConfig { key: Some(ref k), .. }
                if k == keys::TIMELINE_LAYOUT_VERSION),
            "{err:?}"
        );
    }
}

#[test]
fn test_parse_wrong_checksum_rejected() {
    let text = format!("{MINIMAL_V8}hoodie.table.checksum=12345\n");
    let err = TableConfig::parse(text.as_bytes(), "p").unwrap_err();
    match err {
        TimelineError::ChecksumMismatch {
            stored, computed, ..
        } => {
            assert_eq!(stored, "12345");
            assert_eq!(computed, table_checksum(None, "t"));
        }
        other => panic!("{other:?}"),
    }
    let good = format!(
        "{MINIMAL_V8}hoodie.table.checksum={}\n",
        table_checksum(None, "t")
    );
    assert!(TableConfig::parse(good.as_bytes(), "p").is_ok());
}

#[test]
fn test_parse_empty_and_invalid_utf8_rejected() {
    for bytes in [&b""[..], b"  \n\n", b"\xff\xfe\x00garbage"] {
        let err = TableConfig::parse(bytes, "m/hoodie.properties").unwrap_err();
        assert!(
            matches!(err, TimelineError::InvalidConfig { ref path, .. } if path == "m/hoodie.properties"),
            "{err:?}"
        );
    }
}

#[test]
fn test_set_name_updates_checksum_and_rejects_bad_values() {
    let mut cfg = TableConfig::new_v8("t1", TableType::MergeOnRead).unwrap();
    cfg.set(keys::NAME, "t2").unwrap();
    assert_eq!(
        cfg.checksum(),
        Some(table_checksum(Some("default"), "t2").to_string().as_str())
    );
    cfg.remove(keys::DATABASE_NAME).unwrap();
    assert_eq!(
        cfg.checksum(),
        Some(table_checksum(None, "t2").to_string().as_str())
    );
    let before = cfg.clone();
    assert!(cfg.set(keys::VERSION, "7").is_err());
    assert!(cfg.set(keys::CHECKSUM, "1").is_err());
    assert!(cfg.remove(keys::NAME).is_err());
    assert!(cfg.set(keys::TIMELINE_TIMEZONE, "Mars").is_err());
    assert_eq!(cfg, before);
    cfg.set("my.custom.key", "v").unwrap();
    assert_eq!(cfg.get("my.custom.key"), Some("v"));
}

#[test]
fn test_new_v8_writes_java_compat_keys() {
    let cfg = TableConfig::builder_v8("trips", TableType::MergeOnRead)
        .record_key_fields(["uuid"])
        .partition_fields(["city"])
        .ordering_field("ts")
        .hive_style_partitioning(true)
        .metadata_partitions(["files"])
        .build()
        .unwrap();
    for (k, v) in [
        (keys::NAME, "trips"),
        (keys::TYPE, "MERGE_ON_READ"),
        (keys::VERSION, "8"),
        (keys::INITIAL_VERSION, "8"),
        (keys::TIMELINE_LAYOUT_VERSION, "2"),
        (keys::TIMELINE_PATH, "timeline"),
        (keys::TIMELINE_HISTORY_PATH, "history"),
        (keys::TIMELINE_TIMEZONE, "UTC"),
        (keys::DATABASE_NAME, "default"),
        (keys::RECORD_KEY_FIELDS, "uuid"),
        (keys::PARTITION_FIELDS, "city"),
        (keys::PRECOMBINE_FIELD, "ts"),
        (keys::KEY_GENERATOR_TYPE, "SIMPLE"),
        (keys::RECORD_MERGE_MODE, "EVENT_TIME_ORDERING"),
        (
            keys::RECORD_MERGE_STRATEGY_ID,
            "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
        ),
        (keys::HIVE_STYLE_PARTITIONING, "true"),
        (keys::URL_ENCODE_PARTITIONING, "false"),
        (keys::DROP_PARTITION_COLUMNS, "false"),
        (keys::METADATA_PARTITIONS, "files"),
        (keys::METADATA_PARTITIONS_INFLIGHT, ""),
    ] {
        assert_eq!(cfg.get(k), Some(v), "{k}");
    }
    assert_eq!(
        cfg.checksum(),
        Some(
            table_checksum(Some("default"), "trips")
                .to_string()
                .as_str()
        )
    );
    assert_eq!(
        cfg.properties().iter().last().map(|(k, _)| k),
        Some(keys::CHECKSUM)
    );
    assert_eq!(cfg.ordering_fields(), vec!["ts".to_string()]);
    assert_eq!(cfg.timeline_timezone(), TimelineTimezone::Utc);
}

#[test]
fn test_builder_rejects_values_needing_escapes() {
    for name in ["", "a b", "a=b", "a:b", "é"] {
        assert!(
            TableConfig::new_v8(name, TableType::CopyOnWrite).is_err(),
            "{name:?}"
        );
    }
    assert!(TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["a,b"])
        .build()
        .is_err());
}

#[test]
fn test_render_then_parse_gives_equal_config() {
    let cfg = TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .create_schema(r#"{"type":"record","name":"x","fields":[]}"#)
        .build()
        .unwrap();
    let now = DateTime::parse_from_rfc3339("2025-12-20T21:01:18.422371Z")
        .unwrap()
        .with_timezone(&Utc);
    let text = cfg.render(now);
    assert!(
        text.starts_with(
            "#Updated at 2025-12-20T21:01:18.422371Z\n#Sat Dec 20 21:01:18 UTC 2025\n"
        ),
        "{text}"
    );
    assert_eq!(TableConfig::parse(text.as_bytes(), "p").unwrap(), cfg);
}

#[test]
fn test_render_adds_missing_checksum_last() {
    let cfg = TableConfig::parse(MINIMAL_V8.as_bytes(), "p").unwrap();
    let text = cfg.render(Utc::now());
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        format!("hoodie.table.checksum={}", table_checksum(None, "t"))
    );
}

#[test]
fn test_builder_defaults_to_v9_with_v9_spelling() {
    let cfg = TableConfig::builder("trips", TableType::CopyOnWrite)
        .record_key_fields(["uuid"])
        .partition_fields(["city"])
        .ordering_field("ts")
        .build()
        .unwrap();
    assert_eq!(cfg.version(), TableVersion::Nine);
    for (k, v) in [
        (keys::VERSION, "9"),
        (keys::INITIAL_VERSION, "9"),
        (keys::TABLE_FORMAT, "native"),
        (keys::ORDERING_FIELDS, "ts"),
        (keys::RECORD_MERGE_MODE, "EVENT_TIME_ORDERING"),
        (keys::TIMELINE_LAYOUT_VERSION, "2"),
    ] {
        assert_eq!(cfg.get(k), Some(v), "{k}");
    }
    for absent in [
        keys::PRECOMBINE_FIELD,
        keys::PAYLOAD_CLASS,
        keys::RECORD_MERGE_STRATEGY_ID,
    ] {
        assert_eq!(cfg.get(absent), None, "{absent}");
    }
    assert_eq!(cfg.ordering_fields(), vec!["ts".to_string()]);
}

#[test]
fn test_v9_commit_time_has_no_strategy_but_custom_keeps_it() {
    let commit = TableConfig::builder("t", TableType::CopyOnWrite)
        .build()
        .unwrap();
    assert_eq!(
        commit.get(keys::RECORD_MERGE_MODE),
        Some("COMMIT_TIME_ORDERING")
    );
    assert_eq!(commit.get(keys::RECORD_MERGE_STRATEGY_ID), None);
    assert_eq!(commit.get(keys::PAYLOAD_CLASS), None);
    let custom = TableConfig::builder("t", TableType::MergeOnRead)
        .merge_mode(RecordMergeMode::Custom)
        .build()
        .unwrap();
    assert_eq!(
        custom.get(keys::RECORD_MERGE_STRATEGY_ID),
        Some(RecordMergeMode::Custom.strategy_id())
    );
}

#[test]
fn test_builder_refuses_version_6() {
    let err = TableConfig::builder("t", TableType::CopyOnWrite)
        .table_version(TableVersion::Six)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("version 8 or 9"), "{err}");
}

#[test]
fn test_v8_builder_keeps_v8_spelling() {
    let cfg = TableConfig::builder("t", TableType::CopyOnWrite)
        .table_version(TableVersion::Eight)
        .ordering_field("ts")
        .build()
        .unwrap();
    assert_eq!(cfg.version(), TableVersion::Eight);
    assert_eq!(cfg.get(keys::PRECOMBINE_FIELD), Some("ts"));
    assert_eq!(cfg.get(keys::ORDERING_FIELDS), None);
    assert_eq!(cfg.get(keys::TABLE_FORMAT), None);
    assert!(cfg.get(keys::PAYLOAD_CLASS).is_some());
}

#[test]
fn test_writable_versions() {
    assert_eq!(TableVersion::default(), TableVersion::Nine);
    assert_eq!(
        TableVersion::writable_from_code(8),
        Some(TableVersion::Eight)
    );
    assert_eq!(
        TableVersion::writable_from_code(9),
        Some(TableVersion::Nine)
    );
    for code in [6, 7, 10] {
        assert_eq!(TableVersion::writable_from_code(code), None, "{code}");
    }
}
