//! The checks of one scenario: for every completed instant a snapshot of the table as it was
//! right after the instant, time travel to it, and the incremental range that ends at it, each
//! read by arbor, by hudi-rs and computed from the model.
//!
//! arbor's answer and the model's rows are written as Arrow IPC files; hudi-rs' answer is a
//! request to `scripts/peer_digest.py`. All of them are digested together later (one Python
//! process for the whole matrix), see [`super::peer`].
//!
//! The metadata-table checks ([`super::metadata`]): `mdt` after every instant (validate_table on
//! the copy taken right after it), and `hidden` once per table (hudi-rs lists through FILES).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::read::TableReader;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{ActiveTimeline, InstantTime, TableLayout};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde_json::{json, Value};

use super::data::{self, Row};
use super::metadata::{self, HiddenInstant};
use super::scenario::{Outcome, Recorded};

/// hudi-rs' default start of an incremental range (before every instant).
pub const EARLIEST: &str = "19700101000000000";

/// One side of a check: a digest request for `peer_digest.py --batch`, or why there is none.
pub type Side = Result<Value, String>;

/// One line of the matrix.
#[derive(Debug)]
pub struct Check {
    pub scenario: String,
    /// `<ordinal>:<step>` of the instant, or a label for table-wide checks.
    pub position: String,
    /// The instant's requested time (empty for table-wide checks).
    pub instant: String,
    /// `snapshot`, `as_of`, `incr`, ...
    pub query: String,
    pub kind: Kind,
}

/// What a check compares.
#[derive(Debug)]
pub enum Kind {
    /// Decided without digests (a failed write, a timeline mismatch, or a passing timeline).
    Local(Result<(), String>),
    /// Rows read by arbor, by hudi-rs, and the model's rows.
    Rows {
        arbor: Side,
        peer: Side,
        model: Side,
    },
    /// The hidden-instant proof ([`metadata::hide_latest_instant`]): its local part's outcome,
    /// decided with the file slices hudi-rs plans ([`metadata::decide_hidden`]).
    Hidden(Result<HiddenInstant, String>),
}

/// Where a scenario's Arrow files go, and a counter naming them.
pub struct Files {
    dir: PathBuf,
    next: usize,
}

impl Files {
    pub fn new(dir: PathBuf) -> Result<Self, String> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Files { dir, next: 0 })
    }

    /// Writes `batches` as an Arrow IPC file; returns the digest request for it.
    fn arrow(&mut self, schema: &SchemaRef, batches: &[RecordBatch]) -> Side {
        self.next += 1;
        let path = self.dir.join(format!("{:04}.arrow", self.next));
        write_ipc(&path, schema, batches)?;
        Ok(json!({ "arrow": path }))
    }

    /// The model's rows as a digest request.
    fn model(&mut self, rows: &[Row]) -> Side {
        let batch = data::to_batch(rows)?;
        self.arrow(&data::schema(), &[batch])
    }
}

fn write_ipc(path: &Path, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(|e| err(&e))?;
    let mut w = arrow::ipc::writer::FileWriter::try_new(file, schema).map_err(|e| err(&e))?;
    for b in batches {
        w.write(b).map_err(|e| err(&e))?;
    }
    w.finish().map_err(|e| err(&e))
}

async fn open_reader(dir: &Path) -> Result<TableReader, String> {
    let storage: Arc<dyn Storage> = Arc::new(
        ObjectStoreStorage::local(dir).map_err(|e| format!("storage at {}: {e}", dir.display()))?,
    );
    TableReader::open(storage)
        .await
        .map_err(|e| format!("arbor cannot open {}: {e}", dir.display()))
}

fn parse_time(t: &str) -> Result<InstantTime, String> {
    InstantTime::parse(t).map_err(|e| format!("instant time {t}: {e}"))
}

/// arbor's answer to one query, as a digest request.
async fn arbor_side(
    files: &mut Files,
    reader: &Result<TableReader, String>,
    query: &Query<'_>,
) -> Side {
    let reader = reader.as_ref().map_err(Clone::clone)?;
    let batches = match query {
        Query::Snapshot => reader.snapshot(None).await,
        Query::AsOf(t) => reader.snapshot(Some(&parse_time(t)?)).await,
        Query::Incremental(s, e) => {
            reader
                .incremental(Some(&parse_time(s)?), Some(&parse_time(e)?))
                .await
        }
    }
    .map_err(|e| format!("arbor read failed: {e}"))?;
    files.arrow(reader.schema(), &batches)
}

enum Query<'a> {
    Snapshot,
    AsOf(&'a str),
    Incremental(&'a str, &'a str),
}

impl Query<'_> {
    fn peer_request(&self, table: &Path) -> Value {
        match self {
            Query::Snapshot => json!({ "table": table }),
            Query::AsOf(t) => json!({ "table": table, "as_of": t }),
            Query::Incremental(s, e) => json!({ "table": table, "incremental": [s, e] }),
        }
    }
}

/// Builds every check of one scenario (reading with arbor and writing Arrow files under
/// `files_dir`).
pub async fn build(outcome: &Outcome, files_dir: PathBuf) -> Vec<Check> {
    let scenario = outcome.scenario.name();
    let mut checks = Vec::new();
    let local = |position: String, result: Result<(), String>| Check {
        scenario: scenario.clone(),
        position,
        instant: String::new(),
        query: "-".to_string(),
        kind: Kind::Local(result),
    };
    if let Some((ordinal, step, e)) = &outcome.failure {
        checks.push(local(
            format!("{ordinal}:{}", step.name()),
            Err(format!("write failed, later steps not run: {e}")),
        ));
    }
    if outcome.instants.is_empty() {
        return checks;
    }
    checks.push(local(
        "timeline".to_string(),
        check_timeline(&outcome.table_dir, &outcome.instants).await,
    ));
    let mut files = match Files::new(files_dir) {
        Ok(f) => f,
        Err(e) => {
            checks.push(local("files".to_string(), Err(e)));
            return checks;
        }
    };
    let final_reader = open_reader(&outcome.table_dir).await;
    let mut previous_completion = EARLIEST.to_string();
    let mut all_instants = Vec::new();
    for rec in &outcome.instants {
        all_instants.push(rec.instant.clone());
        let copy_reader = open_reader(&rec.copy).await;
        let queries = [
            (
                "snapshot",
                Query::Snapshot,
                &copy_reader,
                &rec.copy,
                rec.model.rows(),
            ),
            (
                "as_of",
                Query::AsOf(&rec.instant),
                &final_reader,
                &outcome.table_dir,
                rec.model.rows(),
            ),
            (
                "incr",
                Query::Incremental(&previous_completion, &rec.completion),
                &final_reader,
                &outcome.table_dir,
                rec.model.written_by(std::slice::from_ref(&rec.instant)),
            ),
        ];
        for (name, query, reader, table, model_rows) in queries {
            checks.push(Check {
                scenario: scenario.clone(),
                position: format!("{}:{}", rec.ordinal, rec.step.name()),
                instant: rec.instant.clone(),
                query: name.to_string(),
                kind: Kind::Rows {
                    arbor: arbor_side(&mut files, reader, &query).await,
                    peer: Ok(query.peer_request(table)),
                    model: files.model(&model_rows),
                },
            });
        }
        // The metadata table (or its absence) after this step; the last copy is the final table.
        checks.push(Check {
            scenario: scenario.clone(),
            position: format!("{}:{}", rec.ordinal, rec.step.name()),
            instant: rec.instant.clone(),
            query: "mdt".to_string(),
            kind: Kind::Local(
                metadata::validate_dir(&rec.copy, outcome.scenario.metadata_table).await,
            ),
        });
        previous_completion = rec.completion.clone();
    }
    // One range over the whole history: every row of the final table.
    if let Some(last) = outcome.instants.last() {
        let query = Query::Incremental(EARLIEST, &last.completion);
        checks.push(Check {
            scenario: scenario.clone(),
            position: "all".to_string(),
            instant: last.instant.clone(),
            query: "incr_all".to_string(),
            kind: Kind::Rows {
                arbor: arbor_side(&mut files, &final_reader, &query).await,
                peer: Ok(query.peer_request(&outcome.table_dir)),
                model: files.model(&last.model.written_by(&all_instants)),
            },
        });
    }
    if outcome.scenario.metadata_table {
        let copy = PathBuf::from(format!("{}-mdt-hidden", outcome.table_dir.display()));
        let hidden = metadata::hide_latest_instant(outcome, &copy).await;
        checks.push(Check {
            scenario: scenario.clone(),
            position: "mdt_hidden".to_string(),
            instant: hidden
                .as_ref()
                .map(|h| h.instant.clone())
                .unwrap_or_default(),
            query: "hidden".to_string(),
            kind: Kind::Hidden(hidden),
        });
    }
    checks
}

/// The completed writes on the final table's timeline are exactly the recorded instants (same
/// requested and completion times, same actions), in the same order.
async fn check_timeline(table_dir: &Path, recorded: &[Recorded]) -> Result<(), String> {
    let storage: Arc<dyn Storage> = Arc::new(
        ObjectStoreStorage::local(table_dir)
            .map_err(|e| format!("storage at {}: {e}", table_dir.display()))?,
    );
    let timeline = ActiveTimeline::load(storage, TableLayout::v2(DEFAULT_META_DIR))
        .await
        .map_err(|e| format!("loading the timeline: {e}"))?;
    let on_disk: Vec<String> = timeline
        .completed_writes()
        .iter()
        .map(|i| {
            let c = i.completion_time.as_ref().map(ToString::to_string);
            format!(
                "{}_{}.{}",
                i.requested_time,
                c.unwrap_or_default(),
                i.action
            )
        })
        .collect();
    let expected: Vec<String> = recorded
        .iter()
        .map(|r| format!("{}_{}.{}", r.instant, r.completion, r.action))
        .collect();
    if on_disk == expected {
        Ok(())
    } else {
        Err(format!(
            "completed writes on the timeline {on_disk:?} differ from the commits made {expected:?}"
        ))
    }
}
