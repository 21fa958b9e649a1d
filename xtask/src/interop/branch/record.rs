//! What a scenario records: readings to digest, checks pending on the peer's digests, and how
//! two or more readings are decided the same.

use std::path::{Path, PathBuf};

use arbor_table::read::TableReader;
use arbor_timeline::InstantTime;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde_json::json;

use crate::interop::check::Side;
use crate::interop::data::{self};
use crate::interop::model::Model;

/// One reading of rows to digest.
#[derive(Debug)]
pub(super) struct Reading {
    /// What was read, by whom, when (`hudi-rs main after branch writes`).
    pub(super) label: String,
    /// The digest request, or why there is none.
    pub(super) request: Side,
    /// The rows carry the `_hoodie_*` meta columns (read from the table, not the model).
    pub(super) meta: bool,
}

impl Reading {
    pub(super) fn table(label: &str, request: Side) -> Reading {
        Reading {
            label: label.to_string(),
            request,
            meta: true,
        }
    }

    pub(super) fn model(label: &str, request: Side) -> Reading {
        Reading {
            label: label.to_string(),
            request,
            meta: false,
        }
    }
}

/// What one check compares before it is decided.
#[derive(Debug)]
pub(super) enum Pending {
    /// Decided without digests.
    Done(Result<(), String>),
    /// Every reading must agree with the first.
    Same(Vec<Reading>),
}

#[derive(Debug)]
pub(super) struct PendingCheck {
    pub(super) position: String,
    pub(super) instant: String,
    pub(super) query: String,
    pub(super) pending: Pending,
}

/// Collects one scenario's checks and writes its Arrow files.
pub(super) struct Recorder {
    pub(super) dir: PathBuf,
    pub(super) next: usize,
    pub(super) position: String,
    pub(super) instant: String,
    pub(super) checks: Vec<PendingCheck>,
}

impl Recorder {
    pub(super) fn push(&mut self, query: &str, pending: Pending) {
        self.checks.push(PendingCheck {
            position: self.position.clone(),
            instant: self.instant.clone(),
            query: query.to_string(),
            pending,
        });
    }

    pub(super) fn at(&mut self, position: &str, instant: &InstantTime) {
        self.position = position.to_string();
        self.instant = instant.to_string();
    }

    pub(super) fn arrow_path(&mut self) -> PathBuf {
        self.next += 1;
        self.dir.join(format!("{:04}.arrow", self.next))
    }

    /// arbor's latest snapshot through `reader`, written as an Arrow file.
    pub(super) async fn arbor<E: std::fmt::Display>(
        &mut self,
        reader: Result<TableReader, E>,
    ) -> Side {
        let reader = reader.map_err(|e| format!("arbor cannot open the table: {e}"))?;
        let batches = reader
            .snapshot(None)
            .await
            .map_err(|e| format!("arbor read failed: {e}"))?;
        let path = self.arrow_path();
        write_arrow(&path, reader.schema(), &batches)?;
        Ok(json!({ "arrow": path }))
    }

    /// The model's rows, written as an Arrow file.
    pub(super) fn model(&mut self, model: &Model) -> Side {
        let batch = data::to_batch(&model.rows())?;
        let path = self.arrow_path();
        write_arrow(&path, &data::schema(), &[batch])?;
        Ok(json!({ "arrow": path }))
    }
}

fn write_arrow(path: &Path, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(|e| err(&e))?;
    let mut w = arrow::ipc::writer::FileWriter::try_new(file, schema).map_err(|e| err(&e))?;
    for b in batches {
        w.write(b).map_err(|e| err(&e))?;
    }
    w.finish().map_err(|e| err(&e))
}

/// hudi-rs' latest snapshot of the table (or peer view) at `dir`.
pub(super) fn hudi(dir: &Path) -> Side {
    Ok(json!({ "table": dir }))
}
