//! The table lock's holder log across processes: `arbor` run with `ARBOR_LOG` showing target
//! `arbor::lock` at DEBUG prints one line per grant, renewal, release and loss of the table
//! lock (`arbor_table::write::commit`); this module parses the lines of many processes and
//! checks that no two holders' grants overlapped while both were live and that the fencing
//! tokens increase in grant order.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `ARBOR_LOG` for processes whose holder log a test reads (warnings stay visible).
pub const LOCK_LOG: &str = "warn,arbor::lock=debug";

/// `arbor args...` with the holder log on stderr (no colours), and `TMPDIR` set to `tmpdir`
/// when given.
pub fn logged_arbor(args: &[&str], tmpdir: Option<&Path>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_arbor"));
    cmd.args(args)
        .env("ARBOR_LOG", LOCK_LOG)
        .env("NO_COLOR", "1");
    if let Some(dir) = tmpdir {
        cmd.env("TMPDIR", dir);
    }
    cmd
}

/// One line of the holder log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEvent {
    /// `granted`, `renewed`, `released`, `release_failed` or `lost`.
    pub event: String,
    pub owner: String,
    pub token: u64,
    /// The lease's end as the event saw it (microseconds since the epoch).
    pub expires_at_us: i64,
    /// The wall clock of the event (microseconds since the epoch).
    pub at_us: i64,
    pub pid: u32,
}

/// `text` without ANSI colour sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The holder-log event of one stderr line, if it is one.
pub fn parse_line(line: &str) -> Option<LockEvent> {
    let line = strip_ansi(line);
    if !line.contains(" arbor::lock: ") {
        return None;
    }
    let fields: BTreeMap<&str, &str> = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k, v.trim_matches('"')))
        .collect();
    let event = LockEvent {
        event: fields.get("event")?.to_string(),
        owner: fields.get("owner")?.to_string(),
        token: fields.get("token")?.parse().ok()?,
        expires_at_us: fields.get("expires_at_us")?.parse().ok()?,
        at_us: fields.get("at_us")?.parse().ok()?,
        pid: fields.get("pid")?.parse().ok()?,
    };
    Some(event)
}

/// Every holder-log event in `stderr`; panics on a holder-log line it cannot parse.
pub fn parse(stderr: &str) -> Vec<LockEvent> {
    stderr
        .lines()
        .filter(|l| strip_ansi(l).contains(" arbor::lock: "))
        .map(|l| parse_line(l).unwrap_or_else(|| panic!("unparsable holder-log line: {l:?}")))
        .collect()
}

/// One grant of the lock, from its events: live from `start_us` (logged just after the
/// provider granted it, so not earlier than the real grant) until `end_us`, the earlier of its
/// release (logged just before asking the provider, so not later than the real release) or
/// loss and the last lease end it knew of. The interval therefore lies inside the interval
/// the grant really held the lock: two that overlap show a real overlap.
#[derive(Debug, Clone)]
pub struct Grant {
    pub owner: String,
    pub token: u64,
    pub pid: u32,
    pub start_us: i64,
    /// The lease end at the grant.
    pub first_expiry_us: i64,
    pub end_us: i64,
    /// The event that ended it: `released`, `release_failed`, `lost`, or `none` (it expired).
    pub ended_by: String,
    pub renewals: usize,
}

impl Grant {
    /// True when the grant was logged only after its first lease had ended (the process
    /// stalled between the grant and the log line): its start says nothing about the order.
    pub fn logged_late(&self) -> bool {
        self.start_us > self.first_expiry_us
    }
}

/// The grants of `events` (of any number of processes), sorted by start. Panics when an
/// owner's events do not begin with its grant or name two tokens.
pub fn grants(events: &[LockEvent]) -> Vec<Grant> {
    let mut by_owner: BTreeMap<&str, Vec<&LockEvent>> = BTreeMap::new();
    for e in events {
        by_owner.entry(e.owner.as_str()).or_default().push(e);
    }
    let mut out = Vec::new();
    for (owner, mut evs) in by_owner {
        evs.sort_by_key(|e| e.at_us);
        let first = evs
            .iter()
            .find(|e| e.event == "granted")
            .unwrap_or_else(|| panic!("owner {owner} has no grant: {evs:?}"));
        assert!(
            evs.iter()
                .all(|e| e.token == first.token && e.pid == first.pid),
            "owner {owner} has events of two tokens or processes: {evs:?}"
        );
        assert_eq!(
            evs.iter().filter(|e| e.event == "granted").count(),
            1,
            "owner {owner} was granted twice: {evs:?}"
        );
        let last_expiry = evs.iter().map(|e| e.expires_at_us).max().unwrap_or(0);
        let end = evs
            .iter()
            .find(|e| matches!(e.event.as_str(), "released" | "release_failed" | "lost"));
        let (end_us, ended_by) = match end {
            Some(e) => (e.at_us.min(last_expiry), e.event.clone()),
            None => (last_expiry, "none".to_string()),
        };
        out.push(Grant {
            owner: owner.to_string(),
            token: first.token,
            pid: first.pid,
            start_us: first.at_us,
            first_expiry_us: first.expires_at_us,
            end_us,
            ended_by,
            renewals: evs.iter().filter(|e| e.event == "renewed").count(),
        });
    }
    out.sort_by_key(|g| (g.start_us, g.token));
    out
}

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct HolderCheck {
    pub grants: usize,
    pub processes: usize,
    pub renewals: usize,
    pub lost: usize,
    pub expired: usize,
    pub logged_late: usize,
    pub first_token: u64,
    pub last_token: u64,
    /// Pairs of grants of different owners whose live intervals overlap.
    pub overlaps: Vec<String>,
    /// Tokens handed out twice.
    pub duplicate_tokens: Vec<u64>,
    /// Consecutive grants (by start) whose tokens do not increase.
    pub token_order: Vec<String>,
    /// The shortest time from one grant's end to the next grant's start.
    pub min_handover_us: Option<i64>,
    /// The time the lock was held, summed over the grants.
    pub held_us: i64,
    /// From the first grant's start to the last grant's end.
    pub span_us: i64,
}

impl HolderCheck {
    /// True when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.overlaps.is_empty() && self.duplicate_tokens.is_empty() && self.token_order.is_empty()
    }

    /// One line for the test output.
    pub fn summary(&self) -> String {
        format!(
            "{} grants by {} processes (tokens {}..={}), {} renewals, {} lost, {} ended by \
             expiry, {} logged late; overlaps: {}, duplicate tokens: {}, token order \
             violations: {}; shortest handover {} us; held {:.1} s of {:.1} s",
            self.grants,
            self.processes,
            self.first_token,
            self.last_token,
            self.renewals,
            self.lost,
            self.expired,
            self.logged_late,
            self.overlaps.len(),
            self.duplicate_tokens.len(),
            self.token_order.len(),
            self.min_handover_us
                .map_or_else(|| "-".to_string(), |v| v.to_string()),
            self.held_us as f64 / 1e6,
            self.span_us as f64 / 1e6,
        )
    }
}

/// Checks the grants of the holder logs of every process of a test (`events` of all of
/// them): no two grants of different owners live at the same time, no token handed out
/// twice, and tokens strictly increasing in the order of the grants (grants logged late, see
/// [`Grant::logged_late`], are left out of the order only).
pub fn check(events: &[LockEvent]) -> HolderCheck {
    let grants = grants(events);
    let mut c = HolderCheck {
        grants: grants.len(),
        renewals: grants.iter().map(|g| g.renewals).sum(),
        lost: grants.iter().filter(|g| g.ended_by == "lost").count(),
        expired: grants.iter().filter(|g| g.ended_by == "none").count(),
        logged_late: grants.iter().filter(|g| g.logged_late()).count(),
        first_token: grants.iter().map(|g| g.token).min().unwrap_or(0),
        last_token: grants.iter().map(|g| g.token).max().unwrap_or(0),
        held_us: grants.iter().map(|g| (g.end_us - g.start_us).max(0)).sum(),
        span_us: grants.iter().map(|g| g.end_us).max().unwrap_or(0)
            - grants.first().map_or(0, |g| g.start_us),
        ..HolderCheck::default()
    };
    let mut pids: Vec<u32> = grants.iter().map(|g| g.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    c.processes = pids.len();
    for (i, a) in grants.iter().enumerate() {
        for b in grants.iter().skip(i + 1) {
            // Sorted by start: b and every later grant start after a ended.
            if b.start_us >= a.end_us {
                break;
            }
            // An empty interval (a grant logged after its lease ended) overlaps nothing.
            if a.owner != b.owner && b.end_us > b.start_us {
                c.overlaps.push(format!(
                    "token {} (pid {}, {}..{}, {}) and token {} (pid {}, {}..{}, {})",
                    a.token,
                    a.pid,
                    a.start_us,
                    a.end_us,
                    a.ended_by,
                    b.token,
                    b.pid,
                    b.start_us,
                    b.end_us,
                    b.ended_by
                ));
            }
        }
    }
    let mut tokens: Vec<u64> = grants.iter().map(|g| g.token).collect();
    tokens.sort_unstable();
    for w in tokens.windows(2) {
        if w[0] == w[1] {
            c.duplicate_tokens.push(w[0]);
        }
    }
    let ordered: Vec<&Grant> = grants.iter().filter(|g| !g.logged_late()).collect();
    for w in ordered.windows(2) {
        if w[1].token <= w[0].token {
            c.token_order.push(format!(
                "token {} granted at {} (pid {}) before token {} at {} (pid {})",
                w[0].token, w[0].start_us, w[0].pid, w[1].token, w[1].start_us, w[1].pid
            ));
        }
        let gap = w[1].start_us - w[0].end_us;
        c.min_handover_us = Some(c.min_handover_us.map_or(gap, |m| m.min(gap)));
    }
    c
}

/// A log line as `arbor` prints it, for the checker's own tests.
#[cfg(test)]
fn line(event: &str, owner: &str, token: u64, expires_at_us: i64, at_us: i64) -> String {
    format!(
        "\u{1b}[2m2026-01-01T00:00:00Z\u{1b}[0m DEBUG arbor::lock: table lock {event} \
         event=\"{event}\" lock=table_lock owner={owner} token={token} \
         expires_at_us={expires_at_us} at_us={at_us} pid=7"
    )
}

#[test]
fn test_holder_log_handovers_in_token_order_are_clean() {
    let log = [
        line("granted", "a", 1, 10_000, 0),
        line("renewed", "a", 1, 13_000, 3_000),
        line("released", "a", 1, 13_000, 4_000),
        line("granted", "b", 2, 14_500, 4_500),
        line("lost", "b", 2, 14_500, 20_000),
        line("granted", "c", 3, 25_000, 15_000),
        "2026-01-01T00:00:00Z  WARN arbor_table: something else".to_string(),
    ]
    .join("\n");
    let c = check(&parse(&log));
    assert!(c.is_clean(), "{c:?}");
    assert_eq!((c.grants, c.renewals, c.lost, c.expired), (3, 1, 1, 1));
    assert_eq!(c.min_handover_us, Some(500));
}

#[test]
fn test_holder_log_overlap_and_token_inversion_are_found() {
    // b is granted while a's renewed lease is live and a has not released it.
    let log = [
        line("granted", "a", 1, 10_000, 0),
        line("renewed", "a", 1, 15_000, 5_000),
        line("granted", "b", 2, 21_000, 11_000),
        line("released", "a", 1, 15_000, 12_000),
        line("released", "b", 2, 21_000, 13_000),
        // c has a smaller token than b although granted later.
        line("granted", "c", 2, 30_000, 20_000),
    ]
    .join("\n");
    let c = check(&parse(&log));
    assert_eq!(c.overlaps.len(), 1, "{c:?}");
    assert!(c.overlaps[0].contains("token 1") && c.overlaps[0].contains("token 2"));
    assert_eq!(c.duplicate_tokens, [2]);
    assert_eq!(c.token_order.len(), 1, "{c:?}");
    assert!(!c.is_clean());
}
