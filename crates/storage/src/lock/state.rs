//! The persisted state of a lock, shared by the providers that store it as a document.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The state of one lock as the file and object-store providers store it (JSON).
///
/// `token` is the last fencing token handed out; it survives release so that tokens keep
/// increasing. `owner` is `None` when the lock is free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockState {
    /// The current holder, if any.
    pub owner: Option<String>,
    /// The last token handed out.
    pub token: u64,
    /// When the current holder's lease lapses.
    pub expires_at: Option<DateTime<Utc>>,
}

impl LockState {
    /// True if someone holds a lease that has not lapsed at `now`.
    pub fn is_held_at(&self, now: DateTime<Utc>) -> bool {
        match (&self.owner, self.expires_at) {
            (Some(_), Some(exp)) => exp > now,
            _ => false,
        }
    }
}
