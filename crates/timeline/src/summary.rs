//! A flat listing of a table's instants, as `arbor timeline` prints it.

use std::sync::Arc;

use arbor_storage::Storage;
use serde::Serialize;

use crate::archive::{InstantLocation, TimelineHistory};
use crate::avro::{decode_instant, InstantContent};
use crate::config::TableConfig;
use crate::error::Result;
use crate::instant::{Instant, State};
use crate::layout::{TableLayout, DEFAULT_META_DIR};
use crate::naming::LayoutVersion;

/// Which instants [`list_instants`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListScope {
    /// Completed `commit`, `deltacommit` and `replacecommit` instants of the active timeline:
    /// the instants a reader sees, as hudi-rs lists them.
    CompletedWrites,
    /// Every instant, active (any state, any action) and archived.
    All,
}

/// One line of the listing. Field names follow the canonical JSON of the peer-reader oracle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstantSummary {
    /// The requested (instant) time.
    pub timestamp: String,
    /// The completion time; `None` for pending instants and for table version 6.
    pub completion_time: Option<String>,
    /// The action (the completed action for completed instants).
    pub action: String,
    /// `REQUESTED`, `INFLIGHT` or `COMPLETED`.
    pub state: String,
    /// The write operation type recorded in the commit metadata (e.g. `UPSERT`), when the
    /// instant is a completed write.
    pub operation: Option<String>,
    /// True if the instant lives in the archived timeline.
    pub archived: bool,
}

/// Opens the table config of main (`.hoodie/hoodie.properties`) and the layout it describes.
pub async fn open_main(storage: &dyn Storage) -> Result<(TableConfig, TableLayout)> {
    let config = TableConfig::load(storage, DEFAULT_META_DIR).await?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    Ok((config, layout))
}

/// Lists the instants of main's timeline, ordered by requested time.
///
/// Every completed write's content is decoded (to report its operation); with
/// [`ListScope::All`] every instant file is decoded, so a corrupt or truncated instant file
/// fails the listing with an error naming it. Nothing is written.
pub async fn list_instants(
    storage: Arc<dyn Storage>,
    scope: ListScope,
) -> Result<Vec<InstantSummary>> {
    let (_config, layout) = open_main(storage.as_ref()).await?;
    let history = TimelineHistory::load(storage.clone(), layout.clone()).await?;
    let mut out = Vec::new();
    for h in history.instants() {
        let instant = &h.instant;
        let archived = h.location == InstantLocation::Archived;
        let wanted = match scope {
            ListScope::CompletedWrites => {
                !archived && instant.is_completed() && instant.action.is_write()
            }
            ListScope::All => true,
        };
        if !wanted {
            continue;
        }
        let operation = if archived {
            let bytes = history
                .read_completed_content(&instant.requested_time, instant.action)
                .await?;
            let key = format!(
                "{}#{}",
                layout.history_dir.as_deref().unwrap_or_default(),
                instant
            );
            operation_of(instant, &bytes, &key, &layout)?
        } else {
            let files = history
                .active()
                .get(&instant.requested_time, instant.action);
            let mut operation = None;
            for file in files
                .into_iter()
                .flat_map(|f| [&f.requested, &f.inflight, &f.completed])
                .flatten()
            {
                // Decode every state file with --all; only the completed one otherwise.
                if scope == ListScope::CompletedWrites && file.state != State::Completed {
                    continue;
                }
                let key = layout.instant_key(file)?;
                let bytes = storage.get(&key).await?.0;
                let op = operation_of(file, &bytes, &key, &layout)?;
                if file.state == State::Completed {
                    operation = op;
                }
            }
            operation
        };
        out.push(InstantSummary {
            timestamp: instant.requested_time.to_string(),
            completion_time: instant.completion_time.as_ref().map(ToString::to_string),
            action: instant.action.to_string(),
            state: instant.state.to_string(),
            operation,
            archived,
        });
    }
    Ok(out)
}

/// Decodes one instant file and returns the operation type of write metadata.
fn operation_of(
    instant: &Instant,
    bytes: &[u8],
    key: &str,
    layout: &TableLayout,
) -> Result<Option<String>> {
    let legacy = layout.layout == LayoutVersion::V1 || instant.completion_time.is_none();
    let content = decode_instant(instant, bytes, key, legacy)?;
    let op = match &content {
        InstantContent::Commit(m) => m.operation_type(),
        InstantContent::ReplaceCommit(m) => m.operation_type(),
        _ => None,
    };
    Ok(op.map(|o| o.name().to_string()))
}
