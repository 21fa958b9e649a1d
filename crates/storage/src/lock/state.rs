//! The persisted state of a lock and its transitions (grant, renew, release), shared by the
//! in-process, file and object-store providers: each of them reads a [`LockState`], applies one
//! transition under its own mutual exclusion (a mutex, an OS file lock, a compare-and-swap) and
//! stores it back.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::Lease;
use crate::error::{LockError, LockHolder, LockResult};

/// The longest lease granted; longer requests are clamped to it (about 100 years).
pub(super) const MAX_LEASE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

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
    /// The fencing reservation of the object-store and file providers: a lower bound of the
    /// high-water mark they keep beside the state (`<name>.fence`, `<name>.lock.fence`) when this
    /// state was written, so tokens up to it are granted without touching the mark. 0 for the
    /// other providers (and for states written before it existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reserved: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The outcome of [`LockState::try_grant`].
#[derive(Debug)]
pub(super) enum Grant {
    /// The lock was free (or its lease had lapsed) and now belongs to the caller.
    Granted(Lease),
    /// Somebody holds a live lease.
    Held {
        /// The current owner.
        holder: Option<LockHolder>,
    },
}

/// The moment a lease of length `lease` starting at `now` lapses (clamped to [`MAX_LEASE`]).
pub(super) fn lease_end(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    let lease = TimeDelta::from_std(lease.min(MAX_LEASE)).unwrap_or(TimeDelta::MAX);
    now.checked_add_signed(lease)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A new, unique owner id for one acquisition.
pub(super) fn new_owner() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The error for a `renew` or `release` by somebody who does not hold `held.lock`.
pub(super) fn not_holder(held: &Lease) -> LockError {
    LockError::NotHolder {
        lock: held.lock.clone(),
        owner: held.owner.clone(),
        token: held.token,
    }
}

impl LockState {
    /// True if someone holds a lease that has not lapsed at `now`.
    pub fn is_held_at(&self, now: DateTime<Utc>) -> bool {
        match (&self.owner, self.expires_at) {
            (Some(_), Some(exp)) => exp > now,
            _ => false,
        }
    }

    /// The current holder as a waiter reports it (`None` when the lock is free).
    pub(super) fn holder(&self) -> Option<LockHolder> {
        self.owner.as_ref().map(|owner| LockHolder {
            owner: owner.clone(),
            token: self.token,
            expires_at: self.expires_at,
        })
    }

    /// The state of a lock that was never taken: no owner, last token 0.
    pub(super) fn free() -> Self {
        LockState {
            owner: None,
            token: 0,
            expires_at: None,
            reserved: 0,
        }
    }

    /// Takes the lock for a new owner if nobody holds a live lease at `now`: the token becomes
    /// the last one plus one and the lease runs until `now + lease`.
    pub(super) fn try_grant(
        &mut self,
        lock: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> LockResult<Grant> {
        if self.is_held_at(now) {
            return Ok(Grant::Held {
                holder: self.holder(),
            });
        }
        let token = self
            .token
            .checked_add(1)
            .ok_or_else(|| LockError::Corrupt {
                lock: lock.to_string(),
                reason: "fencing token space exhausted".to_string(),
            })?;
        let held = Lease {
            lock: lock.to_string(),
            owner: new_owner(),
            token,
            expires_at: lease_end(now, lease),
        };
        *self = LockState {
            owner: Some(held.owner.clone()),
            token,
            expires_at: Some(held.expires_at),
            reserved: self.reserved,
        };
        Ok(Grant::Granted(held))
    }

    /// True if `held` is the current holder (same owner and token). A lapsed lease that nobody
    /// took over still counts: its holder may renew or release it.
    pub(super) fn is_holder(&self, held: &Lease) -> bool {
        self.owner.as_deref() == Some(held.owner.as_str()) && self.token == held.token
    }

    /// Extends the lease of the current holder to `now + lease`.
    pub(super) fn renew(
        &mut self,
        held: &Lease,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> LockResult<Lease> {
        if !self.is_holder(held) {
            return Err(not_holder(held));
        }
        let expires_at = lease_end(now, lease);
        self.expires_at = Some(expires_at);
        Ok(Lease {
            expires_at,
            ..held.clone()
        })
    }

    /// Frees the lock if `held` is the current holder; the token is kept so that it keeps
    /// increasing.
    pub(super) fn release(&mut self, held: &Lease) -> LockResult<()> {
        if !self.is_holder(held) {
            return Err(not_holder(held));
        }
        self.owner = None;
        self.expires_at = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn test_lease_end_huge_lease_is_clamped() {
        let now = Utc::now();
        let end = lease_end(now, Duration::MAX);
        assert!(end > now + TimeDelta::days(365 * 99));
        assert!(end < now + TimeDelta::days(365 * 101));
    }

    #[test]
    fn test_state_renew_and_release_other_owner_not_holder() {
        let now = Utc::now();
        let mut state = LockState::free();
        let Grant::Granted(held) = state.try_grant("t", now, LONG).unwrap() else {
            panic!("free lock not granted")
        };
        let other = Lease {
            owner: "someone-else".to_string(),
            ..held.clone()
        };
        assert!(matches!(
            state.renew(&other, now, LONG),
            Err(LockError::NotHolder { .. })
        ));
        assert!(matches!(
            state.release(&other),
            Err(LockError::NotHolder { .. })
        ));
        assert!(state.is_holder(&held));
        state.release(&held).unwrap();
        assert_eq!(state.owner, None);
        assert_eq!(state.token, held.token);
    }

    #[test]
    fn test_state_try_grant_lapsed_lease_takes_over() {
        let now = Utc::now();
        let mut state = LockState::free();
        let Grant::Granted(first) = state
            .try_grant("t", now, Duration::from_millis(10))
            .unwrap()
        else {
            panic!("free lock not granted")
        };
        let later = now + TimeDelta::milliseconds(11);
        let Grant::Granted(second) = state.try_grant("t", later, LONG).unwrap() else {
            panic!("lapsed lock not granted")
        };
        assert_eq!(second.token, first.token + 1);
        assert!(!state.is_holder(&first));
    }

    #[test]
    fn test_state_try_grant_live_lease_held() {
        let now = Utc::now();
        let mut state = LockState::free();
        let Grant::Granted(first) = state.try_grant("t", now, LONG).unwrap() else {
            panic!("free lock not granted")
        };
        let before = state.clone();
        match state.try_grant("t", now, LONG).unwrap() {
            Grant::Held { holder } => assert_eq!(holder.map(|h| h.owner), Some(first.owner)),
            Grant::Granted(l) => panic!("a held lock was granted again: {l:?}"),
        }
        assert_eq!(state, before, "a refused grant changed the state");
    }

    #[test]
    fn test_state_try_grant_exhausted_token_corrupt() {
        let mut state = LockState {
            owner: None,
            token: u64::MAX,
            expires_at: None,
            reserved: 0,
        };
        assert!(matches!(
            state.try_grant("t", Utc::now(), LONG),
            Err(LockError::Corrupt { .. })
        ));
    }
}
