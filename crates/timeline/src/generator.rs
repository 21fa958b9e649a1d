//! Instant time generation: strictly increasing 17-digit UTC instant times.
//!
//! [`InstantTimeGenerator::next`] returns `max(clock now, last issued + 1 ms, highest observed
//! + 1 ms)`, truncated to milliseconds, so within one generator the times it returns are
//! strictly increasing and never equal to a time it was told about with
//! [`InstantTimeGenerator::observe`], even when the clock steps back.
//!
//! Across processes or machines the generator cannot promise uniqueness: that comes from the
//! commit protocol. Writers take the table lock, [`observe`](InstantTimeGenerator::observe) the
//! instants already on the timeline (or call [`next_after`](InstantTimeGenerator::next_after)),
//! and every instant file is created with `put_if_absent`, so a time that another writer took in
//! the meantime makes the create fail instead of being reused. The same generator serves
//! completion times, which must also exceed every completion time seen before.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use arbor_storage::{Storage, StorageError, StorageExt};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::error::{Result, TimelineError};
use crate::instant::InstantTime;

/// The largest epoch millisecond a 17-digit instant time can express
/// (`99991231235959999`, 9999-12-31T23:59:59.999Z).
const MAX_EPOCH_MS: i64 = 253_402_300_799_999;

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// The current time in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to, for tests: it can be set to any time and stepped
/// forward or back. Millisecond precision; thread-safe.
#[derive(Debug)]
pub struct ManualClock {
    epoch_ms: AtomicI64,
}

impl ManualClock {
    /// A clock showing `t` (truncated to milliseconds).
    pub fn new(t: DateTime<Utc>) -> Self {
        ManualClock {
            epoch_ms: AtomicI64::new(t.timestamp_millis()),
        }
    }

    /// Sets the time to `t` (truncated to milliseconds), forward or back.
    pub fn set(&self, t: DateTime<Utc>) {
        self.epoch_ms.store(t.timestamp_millis(), Ordering::SeqCst);
    }

    /// Moves the time by `delta` milliseconds (negative steps back).
    pub fn advance_ms(&self, delta: i64) {
        let _ = self
            .epoch_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |ms| {
                Some(ms.saturating_add(delta))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.epoch_ms.load(Ordering::SeqCst)).unwrap_or_default()
    }
}

/// Generates strictly increasing 17-digit UTC instant times (`yyyyMMddHHmmssSSS`).
///
/// Guarantees, for one generator shared by any number of threads: every time returned by
/// [`next`](Self::next) is greater than every time it returned before and greater than every
/// time passed to [`observe`](Self::observe) before the call; the result is never before
/// 1970-01-01. See the module documentation for uniqueness across writers.
pub struct InstantTimeGenerator {
    clock: Arc<dyn Clock>,
    /// The smallest epoch millisecond the next time may take.
    floor_ms: AtomicI64,
    /// How far (ms) ahead of the clock [`next_shared`](Self::next_shared) may issue a time.
    max_ahead_ms: AtomicI64,
    /// The table whose shared instant clock [`next_shared`](Self::next_shared) follows.
    shared: OnceLock<Arc<dyn Storage>>,
}

/// The object holding the last instant time issued by any writer of the table, on any branch
/// (shared by every metadata root, like the table lock).
pub const SHARED_CLOCK_KEY: &str = ".hoodie/.locks/instant_clock";

/// How far ahead of this machine's clock a table's instant times may run by default (5
/// minutes): instant times further ahead are refused ([`TimelineError::ClockAhead`]).
pub const DEFAULT_MAX_AHEAD: std::time::Duration = std::time::Duration::from_secs(300);

/// How often [`InstantTimeGenerator::next_shared`] retries a lost compare-and-swap.
const SHARED_CLOCK_TRIES: usize = 32;

impl fmt::Debug for InstantTimeGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstantTimeGenerator")
            .field("floor_ms", &self.floor_ms.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl Default for InstantTimeGenerator {
    fn default() -> Self {
        InstantTimeGenerator::new()
    }
}

impl InstantTimeGenerator {
    /// A generator on the system clock.
    pub fn new() -> Self {
        InstantTimeGenerator::with_clock(Arc::new(SystemClock))
    }

    /// A generator on the given clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        InstantTimeGenerator {
            clock,
            floor_ms: AtomicI64::new(0),
            max_ahead_ms: AtomicI64::new(
                i64::try_from(DEFAULT_MAX_AHEAD.as_millis()).unwrap_or(i64::MAX),
            ),
            shared: OnceLock::new(),
        }
    }

    /// Sets how far ahead of this machine's clock [`next_shared`](Self::next_shared) may issue
    /// a time (default [`DEFAULT_MAX_AHEAD`]); beyond it, it fails with
    /// [`TimelineError::ClockAhead`].
    pub fn set_max_ahead(&self, max: std::time::Duration) {
        let ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
        self.max_ahead_ms.store(ms, Ordering::SeqCst);
    }

    /// The current time of this generator's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Fails with [`TimelineError::ClockAhead`] when `t` is further ahead of the clock than
    /// allowed.
    fn check_ahead(&self, t: &InstantTime) -> Result<()> {
        let now = self.clock.now();
        let Some(at) = t.to_datetime() else {
            return Ok(());
        };
        let ahead_ms = at.timestamp_millis().saturating_sub(now.timestamp_millis());
        let max = self.max_ahead_ms.load(Ordering::SeqCst);
        if ahead_ms <= max {
            return Ok(());
        }
        Err(TimelineError::ClockAhead {
            next: t.to_string(),
            now: InstantTime::from_datetime(now).to_string(),
            ahead_s: ahead_ms / 1000,
            max_s: max / 1000,
            clock_key: SHARED_CLOCK_KEY.to_string(),
        })
    }

    /// Makes [`next_shared`](Self::next_shared) follow the shared instant clock of the table
    /// stored in `table` (its storage, or any branch view of it). The first call wins; a
    /// generator serves one table.
    pub fn share_clock(&self, table: Arc<dyn Storage>) {
        let _ = self.shared.set(table);
    }

    /// [`next`](Self::next), made unique across every writer of the table on every branch when
    /// [`share_clock`](Self::share_clock) was called: the last time issued table-wide (at
    /// [`SHARED_CLOCK_KEY`]) is observed first, and the new time replaces it by
    /// compare-and-swap, so two writers never issue the same time even on different branches
    /// (whose timelines cannot see each other's instants). Without a shared clock this is
    /// [`next`](Self::next). Fails with [`TimelineError::ClockAhead`] (issuing nothing) when the
    /// time would be further ahead of this machine's clock than
    /// [`set_max_ahead`](Self::set_max_ahead) allows.
    pub async fn next_shared(&self) -> Result<InstantTime> {
        let Some(storage) = self.shared.get() else {
            let t = self.next()?;
            self.check_ahead(&t)?;
            return Ok(t);
        };
        for _ in 0..SHARED_CLOCK_TRIES {
            let current = storage.get_opt(SHARED_CLOCK_KEY).await?;
            if let Some((bytes, _)) = &current {
                let text = String::from_utf8_lossy(bytes);
                if let Ok(t) = InstantTime::parse(text.trim()) {
                    self.observe(&t);
                }
            }
            let t = self.next()?;
            // A clock far ahead is refused before it spreads (every later time would follow).
            self.check_ahead(&t)?;
            let data = Bytes::from(t.to_string());
            let swapped = match &current {
                Some((_, meta)) => {
                    storage
                        .put_if_match(SHARED_CLOCK_KEY, data, &meta.version)
                        .await
                }
                None => storage.put_if_absent(SHARED_CLOCK_KEY, data).await,
            };
            match swapped {
                Ok(_) => return Ok(t),
                Err(
                    StorageError::PreconditionFailed { .. } | StorageError::AlreadyExists { .. },
                ) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(TimelineError::InvalidInstantTime {
            value: SHARED_CLOCK_KEY.to_string(),
            reason: format!(
                "the shared instant clock kept changing under {SHARED_CLOCK_TRIES} attempts"
            ),
        })
    }

    /// Sets the floor back so that the next [`next`](Self::next) is the greater of the clock
    /// and `t` + 1 ms, forgetting every time observed or issued after `t`. Only for repairing
    /// a table whose clock ran ahead (`arbor doctor --fix`), after its shared clock was set back
    /// to `t`: times issued by this generator after `t` are no longer guaranteed to be exceeded.
    pub fn reset_floor(&self, t: &InstantTime) {
        let ms = t
            .to_datetime()
            .map_or(0, |dt| dt.timestamp_millis().saturating_add(1));
        self.floor_ms.store(ms, Ordering::SeqCst);
    }

    /// Raises the floor so that every later [`next`](Self::next) is greater than `t`. Reserved
    /// all-zero times (and anything before 1970) are below every generated time already.
    pub fn observe(&self, t: &InstantTime) {
        if let Some(dt) = t.to_datetime() {
            self.floor_ms
                .fetch_max(dt.timestamp_millis().saturating_add(1), Ordering::SeqCst);
        }
    }

    /// The next instant time: `max(clock now, last issued + 1 ms, highest observed + 1 ms)`.
    ///
    /// Fails with `InvalidInstantTime` only when that time would be after
    /// 9999-12-31T23:59:59.999Z, which 17 digits cannot express.
    pub fn next(&self) -> Result<InstantTime> {
        let now_ms = self.clock.now().timestamp_millis();
        let mut floor = self.floor_ms.load(Ordering::SeqCst);
        loop {
            let t = now_ms.max(floor);
            if t > MAX_EPOCH_MS {
                return Err(TimelineError::InvalidInstantTime {
                    value: t.to_string(),
                    reason: "the next instant time would be after year 9999 (epoch ms shown)"
                        .to_string(),
                });
            }
            match self.floor_ms.compare_exchange_weak(
                floor,
                t + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    let dt = DateTime::from_timestamp_millis(t).ok_or_else(|| {
                        TimelineError::InvalidInstantTime {
                            value: t.to_string(),
                            reason: "epoch milliseconds out of range".to_string(),
                        }
                    })?;
                    return Ok(InstantTime::from_datetime(dt));
                }
                Err(current) => floor = current,
            }
        }
    }

    /// Observes every instant time in `existing` (e.g. all requested and completion times on
    /// the timeline), then returns [`next`](Self::next): a time greater than all of them.
    pub fn next_after<'a, I>(&self, existing: I) -> Result<InstantTime>
    where
        I: IntoIterator<Item = &'a InstantTime>,
    {
        for t in existing {
            self.observe(t);
        }
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        InstantTime::parse(s).unwrap().to_datetime().unwrap()
    }

    fn gen_at(s: &str) -> (Arc<ManualClock>, InstantTimeGenerator) {
        let clock = Arc::new(ManualClock::new(at(s)));
        let generator = InstantTimeGenerator::with_clock(clock.clone());
        (clock, generator)
    }

    #[test]
    fn test_next_follows_clock_when_it_moves_forward() {
        let (clock, g) = gen_at("20250713010535797");
        assert_eq!(g.next().unwrap().as_str(), "20250713010535797");
        clock.advance_ms(1000);
        assert_eq!(g.next().unwrap().as_str(), "20250713010536797");
    }

    #[test]
    fn test_next_same_millisecond_increments_by_one_ms() {
        let (_clock, g) = gen_at("20250713010535999");
        assert_eq!(g.next().unwrap().as_str(), "20250713010535999");
        assert_eq!(g.next().unwrap().as_str(), "20250713010536000");
        assert_eq!(g.next().unwrap().as_str(), "20250713010536001");
    }

    #[test]
    fn test_next_clock_step_back_still_increasing() {
        let (clock, g) = gen_at("20250713010535797");
        let a = g.next().unwrap();
        clock.advance_ms(-3_600_000);
        let b = g.next().unwrap();
        assert!(b > a, "{b} <= {a}");
        assert_eq!(b.as_str(), "20250713010535798");
    }

    #[test]
    fn test_observe_ahead_of_clock_raises_floor() {
        let (_clock, g) = gen_at("20250713010535797");
        g.observe(&InstantTime::parse("20260101000000000").unwrap());
        assert_eq!(g.next().unwrap().as_str(), "20260101000000001");
        // Observing something older changes nothing.
        g.observe(&InstantTime::parse("20200101000000000").unwrap());
        assert_eq!(g.next().unwrap().as_str(), "20260101000000002");
    }

    #[test]
    fn test_next_after_existing_never_reuses_one() {
        let (_clock, g) = gen_at("20250713010535797");
        let existing: Vec<InstantTime> = [
            "20250713010535797",
            "20250713010535798",
            "00000000000000001",
        ]
        .iter()
        .map(|s| InstantTime::parse(s).unwrap())
        .collect();
        let t = g.next_after(&existing).unwrap();
        assert_eq!(t.as_str(), "20250713010535799");
    }

    #[test]
    fn test_observe_legacy_14_digit_time_is_exceeded() {
        let (_clock, g) = gen_at("20250713010535000");
        let legacy = InstantTime::parse("20250713010535").unwrap();
        let t = g.next_after([&legacy]).unwrap();
        assert!(t > legacy);
        assert_eq!(t.as_str(), "20250713010535001");
    }

    #[test]
    fn test_next_clock_before_1970_clamped() {
        let clock = Arc::new(ManualClock::new(
            DateTime::from_timestamp_millis(-5_000).unwrap(),
        ));
        let g = InstantTimeGenerator::with_clock(clock);
        assert_eq!(g.next().unwrap().as_str(), "19700101000000000");
        assert_eq!(g.next().unwrap().as_str(), "19700101000000001");
    }

    #[test]
    fn test_next_past_year_9999_errors() {
        let (_clock, g) = gen_at("20250713010535797");
        g.observe(&InstantTime::parse("99991231235959998").unwrap());
        assert_eq!(g.next().unwrap().as_str(), "99991231235959999");
        assert!(matches!(
            g.next(),
            Err(TimelineError::InvalidInstantTime { .. })
        ));
    }

    #[test]
    fn test_system_clock_generator_produces_valid_times() {
        let g = InstantTimeGenerator::new();
        let a = g.next().unwrap();
        let b = g.next().unwrap();
        assert!(b > a);
        assert!(InstantTime::parse(a.as_str()).is_ok());
        assert_eq!(a.as_str().len(), 17);
    }
}
