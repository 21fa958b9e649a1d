//! Property: `arbor_table::ttl::evaluate` agrees with a simple independent model over random
//! policies (a default grouped or not, explicit specs; every strategy), partitions (one and two
//! levels, hive style or not, date, integer or text values), statistics (times, sizes, pending
//! services), evaluation times and caps: the same partitions expire (deleted plus capped), the
//! same are skipped, the cap keeps the oldest, and nothing is both.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbor_table::ttl::{
    evaluate, PartitionStat, PolicyScope, Retention, TtlPolicies, TtlPolicy, TtlStrategy,
};
use arbor_timeline::InstantTime;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const REGIONS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
struct Case {
    levels: usize,
    hive: bool,
    /// 0: dates `2024-01-DD`; 1: integers; 2: integers and one text value.
    kind: u8,
    parts: Vec<(usize, u32, u32, Option<u32>, u64, bool)>,
    default: Option<(TtlStrategy, u64, bool)>,
    explicit: Vec<(TtlStrategy, u64, usize, Option<u32>)>,
    now_half_days: u32,
    cap: Option<usize>,
}

fn strategy() -> impl Strategy<Value = TtlStrategy> {
    prop_oneof![
        Just(TtlStrategy::Time),
        Just(TtlStrategy::CreationTime),
        Just(TtlStrategy::EventTime),
        Just(TtlStrategy::Count),
        Just(TtlStrategy::Size),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..=2,
        any::<bool>(),
        0u8..3,
        prop::collection::vec(
            (
                0usize..3,
                1u32..=12,
                0u32..40,
                prop::option::of(0u32..40),
                0u64..50,
                prop::bool::weighted(0.1),
            ),
            0..14,
        ),
        prop::option::of((strategy(), 1u64..6, any::<bool>())),
        prop::collection::vec(
            (strategy(), 1u64..6, 0usize..4, prop::option::of(1u32..=12)),
            0..4,
        ),
        0u32..60,
        prop::option::of(1usize..5),
    )
        .prop_map(
            |(levels, hive, kind, parts, default, explicit, now_half_days, cap)| Case {
                levels,
                hive,
                kind,
                parts,
                default,
                explicit,
                now_half_days,
                cap,
            },
        )
}

fn at(half_days: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap()
        + chrono::Duration::hours(12 * i64::from(half_days))
}

fn dt_value(kind: u8, day: u32) -> String {
    match (kind, day) {
        (0, d) => format!("2024-01-{d:02}"),
        (2, 12) => "x".to_string(),
        (_, d) => d.to_string(),
    }
}

/// The retention of a strategy from a small number: days for time policies (in half days to
/// hit boundaries), a count, or bytes (times 10).
fn retention(s: TtlStrategy, n: u64) -> Retention {
    match s {
        TtlStrategy::Count => Retention::Count(n),
        TtlStrategy::Size => Retention::Bytes(n * 10),
        _ => Retention::Duration(Duration::from_secs(n * 12 * 3600)),
    }
}

struct Built {
    fields: Vec<String>,
    policies: TtlPolicies,
    stats: Vec<PartitionStat>,
    now: DateTime<Utc>,
}

/// Builds the policies and stats of a case, dropping policies that do not fit the table (the
/// validation is tested elsewhere) and duplicate partitions.
fn build(c: &Case) -> Built {
    let fields: Vec<String> = if c.levels == 2 {
        vec!["region".into(), "dt".into()]
    } else {
        vec!["dt".into()]
    };
    let path = |region: usize, dt: &str| -> String {
        let r = REGIONS[region];
        match (c.levels, c.hive) {
            (2, true) => format!("region={r}/dt={dt}"),
            (2, false) => format!("{r}/{dt}"),
            (_, true) => format!("dt={dt}"),
            (_, false) => dt.to_string(),
        }
    };
    let mut seen = BTreeSet::new();
    let mut stats = Vec::new();
    for (region, day, modified, created, size, pending) in &c.parts {
        let region = if c.levels == 2 { *region } else { 0 };
        let p = path(region, &dt_value(c.kind, *day));
        if !seen.insert(p.clone()) {
            continue;
        }
        stats.push(PartitionStat {
            partition: p,
            last_modified: Some(InstantTime::from_datetime(at(*modified))),
            created: created.map(|h| InstantTime::from_datetime(at(h))),
            size_bytes: *size,
            file_groups: 1,
            pending_service: pending.then(|| "pending compaction 1".to_string()),
        });
    }
    let make = |s: TtlStrategy, n: u64, scope: PolicyScope| TtlPolicy {
        strategy: s,
        retain: retention(s, n),
        scope,
        time_field: (s == TtlStrategy::EventTime).then(|| "dt".to_string()),
        format: (s == TtlStrategy::EventTime).then(|| "yyyy-MM-dd".to_string()),
    };
    let fits = |p: &TtlPolicy| arbor_table::ttl::validate_policy(p, &fields).is_ok();
    let default = c.default.and_then(|(s, n, grouped)| {
        let group = if grouped && c.levels == 2 {
            vec!["region".to_string()]
        } else {
            vec![]
        };
        Some(make(s, n, PolicyScope::Default { fields: group })).filter(fits)
    });
    let mut explicit: Vec<TtlPolicy> = Vec::new();
    for (s, n, region, day) in &c.explicit {
        let spec = match (c.levels, day) {
            // Region 3: a spec of the date alone (overlapping a region spec as specific).
            (2, Some(d)) if *region == 3 => format!("dt={}", dt_value(c.kind, *d)),
            (2, None) if *region == 3 => continue,
            (2, None) => format!("region={}", REGIONS[*region]),
            (2, Some(d)) => format!("region={}/dt={}", REGIONS[*region], dt_value(c.kind, *d)),
            (_, Some(d)) => format!("dt={}", dt_value(c.kind, *d)),
            (_, None) => continue,
        };
        let p = make(*s, *n, PolicyScope::Spec(spec));
        if fits(&p) && !explicit.iter().any(|e| e.scope == p.scope) {
            explicit.push(p);
        }
    }
    Built {
        fields,
        policies: TtlPolicies {
            default,
            explicit,
            ..TtlPolicies::default()
        },
        stats,
        now: at(c.now_half_days),
    }
}

/// Expired partitions with their order key `(time, path)`, and skipped partitions.
type ModelAnswer = (
    BTreeMap<String, (Option<DateTime<Utc>>, String)>,
    BTreeSet<String>,
);

/// The model's answer: expired partitions with their order key, and skipped partitions.
fn model(b: &Built) -> ModelAnswer {
    let values = |p: &str| -> Vec<String> {
        p.split('/')
            .zip(&b.fields)
            .map(|(seg, f)| {
                seg.strip_prefix(&format!("{f}="))
                    .unwrap_or(seg)
                    .to_string()
            })
            .collect()
    };
    let spec_of = |p: &TtlPolicy| -> Vec<(usize, String)> {
        match &p.scope {
            PolicyScope::Spec(s) => s
                .split('/')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (b.fields.iter().position(|f| f == k).unwrap(), v.to_string())
                })
                .collect(),
            PolicyScope::Default { fields } => {
                (0..fields.len()).map(|i| (i, String::new())).collect()
            }
        }
    };
    // Assign each partition its policy (index into `all`: 0 is the default).
    let all: Vec<Option<&TtlPolicy>> = std::iter::once(b.policies.default.as_ref())
        .chain(b.policies.explicit.iter().map(Some))
        .collect();
    let mut groups: BTreeMap<(usize, Vec<String>), Vec<&PartitionStat>> = BTreeMap::new();
    for s in &b.stats {
        let v = values(&s.partition);
        let mut best: Option<(usize, usize)> = None;
        for (i, p) in all.iter().enumerate().skip(1) {
            let spec = spec_of(p.unwrap());
            if spec.iter().all(|(idx, val)| v[*idx] == *val)
                && best.is_none_or(|(_, len)| spec.len() > len)
            {
                best = Some((i, spec.len()));
            }
        }
        let which = match best {
            Some((i, _)) => i,
            None if all[0].is_some() => 0,
            None => continue,
        };
        let p = all[which].unwrap();
        let group: Vec<String> = spec_of(p).iter().map(|(i, _)| v[*i].clone()).collect();
        groups.entry((which, group)).or_default().push(s);
    }
    let mut expired = BTreeMap::new();
    let mut skipped = BTreeSet::new();
    for ((which, _), members) in groups {
        let p = all[which].unwrap();
        let fixed: Vec<usize> = spec_of(p).iter().map(|(i, _)| *i).collect();
        let lm = |s: &PartitionStat| s.last_modified.as_ref().and_then(|t| t.to_datetime());
        let mut out: Vec<(&PartitionStat, Option<DateTime<Utc>>)> = Vec::new();
        match p.retain {
            Retention::Duration(d) => {
                for s in members {
                    let t = match p.strategy {
                        TtlStrategy::Time => lm(s),
                        TtlStrategy::CreationTime => {
                            s.created.as_ref().and_then(|t| t.to_datetime())
                        }
                        _ => {
                            let v = values(&s.partition);
                            NaiveDate::parse_from_str(v.last().unwrap(), "%Y-%m-%d")
                                .ok()
                                .map(|d| d.and_hms_opt(0, 0, 0).unwrap().and_utc())
                        }
                    };
                    match t {
                        None => {
                            skipped.insert(s.partition.clone());
                        }
                        Some(t) if t + chrono::Duration::from_std(d).unwrap() < b.now => {
                            out.push((s, Some(t)))
                        }
                        Some(_) => {
                            if s.pending_service.is_some() {
                                skipped.insert(s.partition.clone());
                            }
                        }
                    }
                }
            }
            retain => {
                let below: Vec<usize> =
                    (0..b.fields.len()).filter(|i| !fixed.contains(i)).collect();
                let numeric: Vec<bool> = below
                    .iter()
                    .map(|i| {
                        members
                            .iter()
                            .all(|s| values(&s.partition)[*i].parse::<i128>().is_ok())
                    })
                    .collect();
                let key = |s: &PartitionStat| {
                    let v = values(&s.partition);
                    below
                        .iter()
                        .zip(&numeric)
                        .map(|(i, n)| {
                            if *n {
                                (v[*i].parse::<i128>().unwrap(), String::new())
                            } else {
                                (0, v[*i].clone())
                            }
                        })
                        .collect::<Vec<_>>()
                };
                let mut sorted = members.clone();
                sorted.sort_by(|x, y| key(y).cmp(&key(x)).then(y.partition.cmp(&x.partition)));
                let mut used = 0u64;
                let mut full = false;
                for (rank, s) in sorted.into_iter().enumerate() {
                    let keep = match retain {
                        Retention::Count(n) => (rank as u64) < n,
                        Retention::Bytes(n) => {
                            if !full && used + s.size_bytes <= n {
                                used += s.size_bytes;
                                true
                            } else {
                                full = true;
                                false
                            }
                        }
                        Retention::Duration(_) => unreachable!(),
                    };
                    if !keep {
                        out.push((s, lm(s)));
                    } else if s.pending_service.is_some() {
                        skipped.insert(s.partition.clone());
                    }
                }
            }
        }
        for (s, t) in out {
            if s.pending_service.is_some() {
                skipped.insert(s.partition.clone());
            } else {
                expired.insert(s.partition.clone(), (t, s.partition.clone()));
            }
        }
    }
    (expired, skipped)
}

#[test]
fn test_ttl_evaluate_matches_the_model() {
    let mut runner = TestRunner::new(Config {
        cases: 512,
        ..Config::default()
    });
    let judged = std::cell::Cell::new(0usize);
    runner
        .run(&case(), |c| {
            let b = build(&c);
            let plan = evaluate(&b.policies, &b.fields, &b.stats, b.now, c.cap).unwrap();
            let (want, want_skipped) = model(&b);
            let got_all: Vec<String> = plan
                .expired
                .iter()
                .chain(&plan.capped)
                .map(|e| e.partition.clone())
                .collect();
            let got_set: BTreeSet<String> = got_all.iter().cloned().collect();
            prop_assert_eq!(got_set.len(), got_all.len());
            let want_set: BTreeSet<String> = want.keys().cloned().collect();
            prop_assert_eq!(&got_set, &want_set, "{:?}", c);
            let skipped: BTreeSet<String> =
                plan.skipped.iter().map(|s| s.partition.clone()).collect();
            prop_assert_eq!(&skipped, &want_skipped, "{:?}", c);
            prop_assert!(skipped.is_disjoint(&got_set));
            let cap = c.cap.unwrap_or(usize::MAX);
            prop_assert_eq!(plan.expired.len(), want.len().min(cap));
            let keys: Vec<_> = got_all.iter().map(|p| want[p].clone()).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            prop_assert_eq!(keys, sorted, "oldest first: {:?}", c);
            prop_assert_eq!(plan.partitions, b.stats.len());
            judged.set(judged.get() + want.len());
            Ok(())
        })
        .unwrap();
    assert!(
        judged.get() > 100,
        "the cases expire too little to test anything: {}",
        judged.get()
    );
}
