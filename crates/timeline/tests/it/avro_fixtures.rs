//! Every instant file of every Spark-written fixture table (data table and metadata table)
//! decodes, re-encodes and decodes again to the same value.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use arbor_testkit::{fixture_zips, fixtures_root_or_skip, unzip_table};
use arbor_timeline::avro::{self, decode_instant, encode_instant, InstantContent};
use arbor_timeline::naming::{parse_instant_file_name, LayoutVersion};
use arbor_timeline::State;

/// The timeline directories of a table base: (directory, layout).
fn timeline_dirs(base: &Path) -> Vec<(PathBuf, LayoutVersion)> {
    let mut out = Vec::new();
    for table in [base.to_path_buf(), base.join(".hoodie").join("metadata")] {
        let meta = table.join(".hoodie");
        if !meta.is_dir() {
            continue;
        }
        let timeline = meta.join("timeline");
        if timeline.is_dir() {
            out.push((timeline, LayoutVersion::V2));
        } else {
            out.push((meta, LayoutVersion::V1));
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    files: usize,
    legacy_json: usize,
    empty: usize,
    by_kind: BTreeMap<String, usize>,
    same_schema_text: usize,
    same_datum_bytes: usize,
}

fn check_file(path: &Path, layout: LayoutVersion, tally: &mut Tally) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let Ok(instant) = parse_instant_file_name(&name, layout) else {
        return; // hoodie.properties, .crc files and the like
    };
    let bytes = fs::read(path).unwrap();
    let legacy = layout == LayoutVersion::V1
        || (instant.state == State::Completed && instant.completion_time.is_none());
    let key = path.display().to_string();
    let content = decode_instant(&instant, &bytes, &key, legacy)
        .unwrap_or_else(|e| panic!("decode {key}: {e}"));

    let again = encode_instant(&content).unwrap_or_else(|e| panic!("encode {key}: {e}"));
    let back = decode_instant(&instant, &again, &key, false)
        .unwrap_or_else(|e| panic!("decode re-encoded {key}: {e}"));
    assert_eq!(back, content, "round trip of {key}");

    tally.files += 1;
    if content.is_empty() {
        tally.empty += 1;
        assert!(bytes.is_empty(), "{key}");
    } else if !avro::ocf::has_magic(&bytes) {
        tally.legacy_json += 1;
    } else {
        // Byte compatibility: we embed exactly the schema text Spark embedded (for the records
        // the fixtures contain), and our datum differs from Spark's at most in map order.
        let theirs = avro::ocf::read_single(&bytes, &key).unwrap();
        let ours = avro::ocf::read_single(&again, &key).unwrap();
        if theirs.schema_json == ours.schema_json {
            tally.same_schema_text += 1;
        }
        assert_eq!(
            theirs.datum.len(),
            ours.datum.len(),
            "re-encoded datum of {key} differs in length"
        );
        if theirs.datum == ours.datum {
            tally.same_datum_bytes += 1;
        }
    }
    let kind = content
        .schema()
        .map_or("Empty".to_string(), |s| s.record_name().to_string());
    *tally.by_kind.entry(kind).or_default() += 1;
}

#[test]
fn test_decode_instant_every_fixture_file_round_trips() {
    let Some(root) = fixtures_root_or_skip("test_decode_instant_every_fixture_file_round_trips")
    else {
        return;
    };
    let zips = fixture_zips(&root);
    assert!(!zips.is_empty(), "no fixture zips found");
    let mut tally = Tally::default();
    for zip in &zips {
        let (_tmp, base) = unzip_table(zip);
        for (dir, layout) in timeline_dirs(&base) {
            let mut entries: Vec<PathBuf> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .collect();
            entries.sort();
            for path in entries {
                check_file(&path, layout, &mut tally);
            }
        }
    }
    eprintln!(
        "decoded {} instant files from {} fixture zips: {} empty, {} legacy JSON, {} Avro \
         ({} with identical schema text, {} with identical datum bytes); by record: {:?}",
        tally.files,
        zips.len(),
        tally.empty,
        tally.legacy_json,
        tally.files - tally.empty - tally.legacy_json,
        tally.same_schema_text,
        tally.same_datum_bytes,
        tally.by_kind
    );
    assert!(tally.files > 0);
    let avro_files = tally.files - tally.empty - tally.legacy_json;
    assert_eq!(
        tally.same_schema_text, avro_files,
        "every re-encoded Avro file embeds the schema text Spark embedded"
    );
    assert!(tally.same_datum_bytes > 0, "some datums are byte-identical");
    assert!(tally.legacy_json > 0, "v6 JSON commit metadata was decoded");
    for kind in [
        "HoodieCommitMetadata",
        "HoodieReplaceCommitMetadata",
        "HoodieRequestedReplaceMetadata",
        "HoodieCompactionPlan",
        "HoodieRollbackPlan",
        "HoodieRollbackMetadata",
        "HoodieIndexPlan",
        "HoodieIndexCommitMetadata",
        "Empty",
    ] {
        assert!(
            tally.by_kind.contains_key(kind),
            "no fixture file decoded as {kind}"
        );
    }
}

#[test]
fn test_decode_instant_truncated_fixture_commit_errors_with_path() {
    let Some(root) =
        fixtures_root_or_skip("test_decode_instant_truncated_fixture_commit_errors_with_path")
    else {
        return;
    };
    let zip = fixture_zips(&root)
        .into_iter()
        .find(|z| z.to_string_lossy().contains("v8_nonpartitioned"))
        .expect("v8_nonpartitioned fixture");
    let (_tmp, base) = unzip_table(&zip);
    let dir = base.join(".hoodie").join("timeline");
    let path = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(".commit")
        })
        .expect("a completed commit");
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let instant = parse_instant_file_name(&name, LayoutVersion::V2).unwrap();
    let bytes = fs::read(&path).unwrap();
    assert!(decode_instant(&instant, &bytes, &name, false).is_ok());
    for cut in [
        1,
        3,
        4,
        5,
        20,
        bytes.len() / 2,
        bytes.len() - 17,
        bytes.len() - 1,
    ] {
        let e = decode_instant(&instant, &bytes[..cut], &name, false).unwrap_err();
        assert!(
            matches!(&e, arbor_timeline::TimelineError::Decode { path, .. } if path == &name),
            "cut at {cut}: {e}"
        );
    }
    assert!(matches!(
        decode_instant(&instant, &[], &name, false).unwrap(),
        InstantContent::Empty
    ));
}
