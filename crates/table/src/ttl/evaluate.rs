//! Evaluating TTL policies over partition statistics: which partitions a run deletes, which it
//! leaves for later (the cap), and which it cannot judge. Pure: no I/O.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::pattern::DatePattern;
use super::policy::{PolicyScope, Retention, TtlPolicies, TtlPolicy, TtlStrategy};
use super::spec::{field_names, path_values, PartitionSpec, PathValue};
use super::stats::PartitionStat;
use super::validate::validate_policy;
use crate::error::{Result, TableError};

/// A partition a run deletes (or, capped, leaves for a later run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The partition path.
    pub partition: String,
    /// The governing policy (its one-line `Display`).
    pub policy: String,
    /// Why it expired, e.g. `last modified 2024-01-02T00:00:00Z + 30d < now 2024-02-05T00:00:00Z`.
    pub reason: String,
}

/// A partition a policy governs but the run does not judge, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The partition path.
    pub partition: String,
    /// Why (pending compaction or clustering; an event-time value that does not parse; no
    /// creation time; a path that does not map onto the partition fields).
    pub reason: String,
}

/// What a TTL run does at one evaluation time.
#[derive(Debug, Clone, PartialEq)]
pub struct TtlPlan {
    /// The evaluation time.
    pub now: chrono::DateTime<chrono::Utc>,
    /// Partitions the run deletes, oldest first (by the policy's time / smallest partition value), at most the cap.
    pub expired: Vec<Expired>,
    /// Expired partitions left for a later run by the cap, oldest first.
    pub capped: Vec<Expired>,
    /// Partitions not judged (pending compaction/clustering; event-time value that does not parse; ...), named with why.
    pub skipped: Vec<Skipped>,
    /// Partitions examined.
    pub partitions: usize,
}

impl TtlPlan {
    /// The partitions the run deletes, in plan order.
    pub fn expired_partitions(&self) -> Vec<String> {
        self.expired.iter().map(|e| e.partition.clone()).collect()
    }
}

/// A policy ready to apply.
struct Compiled<'p> {
    policy: &'p TtlPolicy,
    shown: String,
    spec: Option<PartitionSpec>,
    /// Field indexes that form the group; the others order partitions inside it.
    group: Vec<usize>,
    pattern: Option<(usize, DatePattern)>,
}

fn compile<'p>(policy: &'p TtlPolicy, fields: &[String]) -> Result<Compiled<'p>> {
    let checked = validate_policy(policy, fields)?;
    let (spec, group) = match &checked.scope {
        PolicyScope::Default { fields: g } => (None, (0..g.len()).collect()),
        PolicyScope::Spec(s) => {
            let spec = PartitionSpec::parse(s, fields)?;
            let group = spec.field_indexes();
            (Some(spec), group)
        }
    };
    let pattern = match (&checked.time_field, &checked.format) {
        (Some(f), Some(p)) => {
            let idx = fields.iter().position(|x| x == f).unwrap_or_default();
            Some((idx, DatePattern::compile(p)?))
        }
        _ => None,
    };
    Ok(Compiled {
        policy,
        shown: policy.to_string(),
        spec,
        group,
        pattern,
    })
}

/// One partition as judged.
struct Member<'s> {
    stat: &'s PartitionStat,
    values: Vec<PathValue>,
}

/// Whether every value at `pos` of the members parses as an integer.
fn numeric_at(members: &[&Member<'_>], pos: usize) -> bool {
    members.iter().all(|m| {
        m.values
            .get(pos)
            .is_some_and(|v| v.decoded.parse::<i128>().is_ok())
    })
}

/// Orders two members of a group by their values outside the group (numerically at positions
/// where every member's value is an integer, else by the decoded text), then by path.
fn compare(a: &Member<'_>, b: &Member<'_>, positions: &[(usize, bool)]) -> Ordering {
    for (pos, numeric) in positions {
        let (va, vb) = (a.values.get(*pos), b.values.get(*pos));
        let ord = match (va, vb, numeric) {
            (Some(x), Some(y), true) => {
                let (nx, ny) = (x.decoded.parse::<i128>(), y.decoded.parse::<i128>());
                match (nx, ny) {
                    (Ok(nx), Ok(ny)) => nx.cmp(&ny),
                    _ => x.decoded.cmp(&y.decoded),
                }
            }
            (Some(x), Some(y), false) => x.decoded.cmp(&y.decoded),
            _ => va.is_some().cmp(&vb.is_some()),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.stat.partition.cmp(&b.stat.partition)
}

fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// An expired partition with its order key for the cap.
struct Verdict {
    time: Option<DateTime<Utc>>,
    expired: Expired,
}

/// Decides which partitions expire at `now` under `policies` (see the module doc of
/// [`crate::ttl`] for the rules), for a table with partition fields `partition_fields` (as
/// `hoodie.table.partition.fields` names them; `:<type>` suffixes are ignored). `stats` are
/// the partitions examined; `max_partitions` caps the partitions deleted (the rest, oldest
/// first, are `capped`). Errors: a policy that does not fit the fields; a cap of 0.
pub fn evaluate(
    policies: &TtlPolicies,
    partition_fields: &[String],
    stats: &[PartitionStat],
    now: chrono::DateTime<chrono::Utc>,
    max_partitions: Option<usize>,
) -> Result<TtlPlan> {
    if max_partitions == Some(0) {
        return Err(TableError::InvalidInput {
            column: None,
            row: None,
            reason: "a TTL run must be allowed to delete at least one partition (max \
                     partitions 0)"
                .to_string(),
        });
    }
    let fields = field_names(partition_fields);
    let default = policies
        .default
        .as_ref()
        .map(|p| compile(p, &fields))
        .transpose()?;
    let explicit: Vec<Compiled<'_>> = policies
        .explicit
        .iter()
        .map(|p| compile(p, &fields))
        .collect::<Result<_>>()?;
    let mut skipped = Vec::new();
    // (policy index: explicit i as Some(i), default as None) -> group key -> members
    let mut groups: BTreeMap<(Option<usize>, Vec<String>), Vec<Member<'_>>> = BTreeMap::new();
    for stat in stats {
        if policies.is_empty() {
            break;
        }
        let values = match path_values(&stat.partition, &fields) {
            Ok(v) => v,
            Err(reason) => {
                skipped.push(Skipped {
                    partition: stat.partition.clone(),
                    reason,
                });
                continue;
            }
        };
        let mut best: Option<(usize, usize)> = None;
        for (i, c) in explicit.iter().enumerate() {
            if let Some(spec) = &c.spec {
                if spec.matches(&values) && best.is_none_or(|(_, len)| spec.len() > len) {
                    best = Some((i, spec.len()));
                }
            }
        }
        let (which, compiled) = match best {
            Some((i, _)) => match explicit.get(i) {
                Some(c) => (Some(i), c),
                None => continue,
            },
            None => match &default {
                Some(c) => (None, c),
                None => continue,
            },
        };
        let key: Vec<String> = compiled
            .group
            .iter()
            .map(|i| values.get(*i).map(|v| v.raw.clone()).unwrap_or_default())
            .collect();
        groups
            .entry((which, key))
            .or_default()
            .push(Member { stat, values });
    }
    let mut verdicts: Vec<Verdict> = Vec::new();
    for ((which, _), members) in &groups {
        let Some(c) = which.map_or(default.as_ref(), |i| explicit.get(i)) else {
            continue;
        };
        judge(c, &fields, members, now, &mut verdicts, &mut skipped);
    }
    verdicts.sort_by(|a, b| {
        a.time
            .cmp(&b.time)
            .then_with(|| a.expired.partition.cmp(&b.expired.partition))
    });
    let mut expired: Vec<Expired> = verdicts.into_iter().map(|v| v.expired).collect();
    let capped = match max_partitions {
        Some(cap) if expired.len() > cap => expired.split_off(cap),
        _ => Vec::new(),
    };
    skipped.sort_by(|a, b| a.partition.cmp(&b.partition));
    Ok(TtlPlan {
        now,
        expired,
        capped,
        skipped,
        partitions: stats.len(),
    })
}

/// Judges the members of one group under policy `c`, adding expired partitions to `out` and
/// unjudged ones to `skipped`. A partition with a pending table service is always skipped,
/// though it keeps its place in a count or size ranking.
fn judge(
    c: &Compiled<'_>,
    fields: &[String],
    members: &[Member<'_>],
    now: DateTime<Utc>,
    out: &mut Vec<Verdict>,
    skipped: &mut Vec<Skipped>,
) {
    let skip = |m: &Member<'_>, reason: String, skipped: &mut Vec<Skipped>| {
        skipped.push(Skipped {
            partition: m.stat.partition.clone(),
            reason,
        })
    };
    let mut push = |m: &Member<'_>,
                    time: Option<DateTime<Utc>>,
                    reason: String,
                    skipped: &mut Vec<Skipped>| {
        if let Some(p) = &m.stat.pending_service {
            skip(
                m,
                format!("{p} (expired under `{}`: {reason})", c.shown),
                skipped,
            );
            return;
        }
        out.push(Verdict {
            time,
            expired: Expired {
                partition: m.stat.partition.clone(),
                policy: c.shown.clone(),
                reason,
            },
        });
    };
    let last_modified =
        |m: &Member<'_>| m.stat.last_modified.as_ref().and_then(|t| t.to_datetime());
    match (c.policy.strategy, c.policy.retain) {
        (s, Retention::Duration(d)) if s.is_time_based() => {
            for m in members {
                let (what, time) = match s {
                    TtlStrategy::Time => (
                        "last modified",
                        last_modified(m).ok_or("no last modified instant"),
                    ),
                    TtlStrategy::CreationTime => (
                        "created",
                        m.stat.created.as_ref().and_then(|t| t.to_datetime()).ok_or(
                            "creation time unknown (no commitTime in .hoodie_partition_metadata)",
                        ),
                    ),
                    _ => ("event time", Err("")),
                };
                let time = match (s, &c.pattern) {
                    (TtlStrategy::EventTime, Some((idx, pattern))) => {
                        let value = event_value(&m.values, fields, *idx, pattern.segments());
                        match pattern.parse(&value) {
                            Ok(t) => t,
                            Err(_) => {
                                skip(
                                    m,
                                    format!(
                                        "event time {value:?} does not parse as {:?}",
                                        pattern.as_str()
                                    ),
                                    skipped,
                                );
                                continue;
                            }
                        }
                    }
                    _ => match time {
                        Ok(t) => t,
                        Err(why) => {
                            skip(m, why.to_string(), skipped);
                            continue;
                        }
                    },
                };
                let Some(ends) = chrono::Duration::from_std(d)
                    .ok()
                    .and_then(|delta| time.checked_add_signed(delta))
                else {
                    continue;
                };
                if ends < now {
                    let reason = format!(
                        "{what} {} + {} < now {}",
                        rfc3339(&time),
                        c.policy.retain,
                        rfc3339(&now)
                    );
                    push(m, Some(time), reason, skipped);
                } else if let Some(p) = &m.stat.pending_service {
                    skip(m, p.clone(), skipped);
                }
            }
        }
        (strategy, retain) => {
            let below: Vec<usize> = (0..fields.len()).filter(|i| !c.group.contains(i)).collect();
            let refs: Vec<&Member<'_>> = members.iter().collect();
            let positions: Vec<(usize, bool)> =
                below.iter().map(|p| (*p, numeric_at(&refs, *p))).collect();
            let mut ranked = refs;
            ranked.sort_by(|a, b| compare(b, a, &positions));
            let total = ranked.len();
            let mut kept_bytes: u64 = 0;
            let mut full = false;
            for (rank, m) in ranked.into_iter().enumerate() {
                let reason = match (strategy, retain) {
                    (TtlStrategy::Count, Retention::Count(n)) => {
                        if (rank as u64) < n {
                            None
                        } else {
                            Some(format!(
                                "{} of {total} partitions by partition value; keeps {n}",
                                ordinal(rank + 1)
                            ))
                        }
                    }
                    (TtlStrategy::Size, Retention::Bytes(n)) => {
                        let sum = kept_bytes.checked_add(m.stat.size_bytes);
                        match sum {
                            Some(s) if !full && s <= n => {
                                kept_bytes = s;
                                None
                            }
                            _ => {
                                full = true;
                                Some(format!(
                                    "greater partition values keep {kept_bytes} bytes; its {} \
                                     bytes do not fit in {n}",
                                    m.stat.size_bytes
                                ))
                            }
                        }
                    }
                    _ => None,
                };
                match reason {
                    Some(r) => push(m, last_modified(m), r, skipped),
                    None => {
                        if let Some(p) = &m.stat.pending_service {
                            skip(m, p.clone(), skipped);
                        }
                    }
                }
            }
        }
    }
}

/// The event-time value: the decoded values of the `segments` fields from `idx` on, joined by
/// `/` (a one-field table's one value).
fn event_value(values: &[PathValue], fields: &[String], idx: usize, segments: usize) -> String {
    if fields.len() == 1 {
        return values
            .first()
            .map(|v| v.decoded.clone())
            .unwrap_or_default();
    }
    values
        .iter()
        .skip(idx)
        .take(segments)
        .map(|v| v.decoded.as_str())
        .collect::<Vec<_>>()
        .join("/")
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
#[path = "evaluate_tests.rs"]
mod tests;
