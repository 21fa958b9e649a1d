use super::*;
use arbor_timeline::InstantTime;
use chrono::TimeZone;
use std::time::Duration;

fn fields(f: &[&str]) -> Vec<String> {
    f.iter().map(|s| s.to_string()).collect()
}

fn t(y: i32, mo: u32, d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, 0, 0, 0).unwrap()
}

fn stat(p: &str, modified: Option<DateTime<Utc>>, size: u64) -> PartitionStat {
    PartitionStat {
        partition: p.to_string(),
        last_modified: modified.map(InstantTime::from_datetime),
        created: None,
        size_bytes: size,
        file_groups: 1,
        pending_service: None,
    }
}

fn policy(strategy: TtlStrategy, retain: Retention, scope: PolicyScope) -> TtlPolicy {
    TtlPolicy {
        strategy,
        retain,
        scope,
        time_field: None,
        format: None,
    }
}

fn whole() -> PolicyScope {
    PolicyScope::Default { fields: vec![] }
}

fn days(n: u64) -> Retention {
    Retention::Duration(Duration::from_secs(n * 86_400))
}

fn only(default: TtlPolicy) -> TtlPolicies {
    TtlPolicies {
        default: Some(default),
        ..TtlPolicies::default()
    }
}

fn names(e: &[Expired]) -> Vec<&str> {
    e.iter().map(|x| x.partition.as_str()).collect()
}

#[test]
fn time_expires_strictly_after_the_limit() {
    let f = fields(&["dt"]);
    let p = only(policy(TtlStrategy::Time, days(30), whole()));
    let stats = vec![
        stat("a", Some(t(2024, 1, 1)), 1),
        stat("b", Some(t(2024, 1, 2)), 1),
        stat("c", Some(t(2024, 1, 3)), 1),
    ];
    // a + 30d = 2024-01-31 < now; b + 30d == now: not expired.
    let plan = evaluate(&p, &f, &stats, t(2024, 2, 1), None).unwrap();
    assert_eq!(names(&plan.expired), vec!["a"]);
    assert_eq!(plan.partitions, 3);
    assert!(plan.expired[0]
        .reason
        .contains("last modified 2024-01-01T00:00:00Z + 30d < now"));
    assert_eq!(plan.expired[0].policy, "default: time 30d");
    let later = evaluate(
        &p,
        &f,
        &stats,
        t(2024, 2, 1) + chrono::Duration::milliseconds(1),
        None,
    )
    .unwrap();
    assert_eq!(names(&later.expired), vec!["a", "b"]);
}

#[test]
fn creation_time_reads_the_marker_time_and_skips_without_one() {
    let f = fields(&["dt"]);
    let p = only(policy(TtlStrategy::CreationTime, days(1), whole()));
    let mut a = stat("a", Some(t(2024, 3, 1)), 1);
    a.created = Some(InstantTime::from_datetime(t(2024, 1, 1)));
    let b = stat("b", Some(t(2024, 1, 1)), 1);
    let plan = evaluate(&p, &f, &[a, b], t(2024, 2, 1), None).unwrap();
    assert_eq!(names(&plan.expired), vec!["a"]);
    assert_eq!(plan.skipped.len(), 1);
    assert!(plan.skipped[0].reason.contains("creation time unknown"));
}

#[test]
fn event_time_parses_the_partition_value_and_skips_garbage() {
    let f = fields(&["region", "dt"]);
    let mut e = policy(TtlStrategy::EventTime, days(30), whole());
    e.time_field = Some("dt".into());
    e.format = Some("yyyy-MM-dd".into());
    let p = only(e);
    let stats = vec![
        stat("region=eu/dt=2024-01-01", None, 1),
        stat("region=eu/dt=2024-01-02", None, 1),
        stat("region=eu/dt=bogus", None, 1),
    ];
    let plan = evaluate(&p, &f, &stats, t(2024, 2, 1), None).unwrap();
    assert_eq!(names(&plan.expired), vec!["region=eu/dt=2024-01-01"]);
    assert_eq!(plan.skipped.len(), 1);
    assert!(
        plan.skipped[0].reason.contains("\"bogus\"")
            && plan.skipped[0].reason.contains("yyyy-MM-dd")
    );
}

#[test]
fn event_time_spans_levels_with_slashes() {
    let f = fields(&["y", "m", "d"]);
    let mut e = policy(TtlStrategy::EventTime, days(1), whole());
    e.time_field = Some("y".into());
    e.format = Some("yyyy/MM/dd".into());
    let stats = vec![stat("2024/01/01", None, 1), stat("2024/03/01", None, 1)];
    let plan = evaluate(&only(e), &f, &stats, t(2024, 2, 1), None).unwrap();
    assert_eq!(names(&plan.expired), vec!["2024/01/01"]);
}

#[test]
fn count_keeps_the_greatest_values_per_group() {
    let f = fields(&["region", "day"]);
    let p = only(policy(
        TtlStrategy::Count,
        Retention::Count(2),
        PolicyScope::Default {
            fields: vec!["region".into()],
        },
    ));
    // Integers compare numerically: 9 < 10 < 11.
    let stats = vec![
        stat("eu/9", Some(t(2024, 1, 1)), 1),
        stat("eu/10", Some(t(2024, 1, 1)), 1),
        stat("eu/11", Some(t(2024, 1, 1)), 1),
        stat("us/1", Some(t(2024, 1, 1)), 1),
        stat("us/2", Some(t(2024, 1, 1)), 1),
    ];
    let plan = evaluate(&p, &f, &stats, t(2024, 2, 1), None).unwrap();
    assert_eq!(names(&plan.expired), vec!["eu/9"]);
    // Text compares lexicographically when one value is not an integer.
    let stats = vec![
        stat("eu/9", None, 1),
        stat("eu/10", None, 1),
        stat("eu/x", None, 1),
    ];
    let plan = evaluate(&p, &f, &stats, t(2024, 2, 1), None).unwrap();
    assert_eq!(names(&plan.expired), vec!["eu/10"]);
}

#[test]
fn size_keeps_a_prefix_that_fits() {
    let f = fields(&["region", "day"]);
    let p = only(policy(
        TtlStrategy::Size,
        Retention::Bytes(10),
        PolicyScope::Default {
            fields: vec!["region".into()],
        },
    ));
    let stats = vec![
        stat("eu/1", None, 1),
        stat("eu/2", None, 1),
        stat("eu/3", None, 5),
        stat("eu/4", None, 5),
    ];
    // 4 and 3 fill exactly 10 (kept); 2 does not fit, nor 1 after it.
    let plan = evaluate(&p, &f, &stats, t(2024, 2, 1), None).unwrap();
    let mut got = names(&plan.expired);
    got.sort();
    assert_eq!(got, vec!["eu/1", "eu/2"]);
}

#[test]
fn explicit_overrides_default_and_the_most_specific_wins() {
    let f = fields(&["region", "dt"]);
    let p = TtlPolicies {
        default: Some(policy(TtlStrategy::Time, days(1), whole())),
        explicit: vec![
            policy(
                TtlStrategy::Time,
                days(100),
                PolicyScope::Spec("region=eu".into()),
            ),
            policy(
                TtlStrategy::Time,
                days(2),
                PolicyScope::Spec("region=eu/dt=x".into()),
            ),
        ],
        ..TtlPolicies::default()
    };
    let old = Some(t(2024, 1, 1));
    let stats = vec![
        stat("region=eu/dt=x", old, 1),
        stat("region=eu/dt=y", old, 1),
        stat("region=us/dt=y", old, 1),
    ];
    let plan = evaluate(&p, &f, &stats, t(2024, 2, 1), None).unwrap();
    assert_eq!(
        names(&plan.expired),
        vec!["region=eu/dt=x", "region=us/dt=y"]
    );
    assert_eq!(plan.expired[0].policy, "region=eu/dt=x: time 2d");
}

#[test]
fn pending_services_skip_only_their_partition() {
    let f = fields(&["dt"]);
    let p = only(policy(TtlStrategy::Time, days(1), whole()));
    let mut a = stat("a", Some(t(2024, 1, 1)), 1);
    a.pending_service = Some("pending compaction 20240101000000000".into());
    let b = stat("b", Some(t(2024, 1, 1)), 1);
    let plan = evaluate(&p, &f, &[a, b], t(2024, 2, 1), None).unwrap();
    assert_eq!(names(&plan.expired), vec!["b"]);
    assert_eq!(plan.skipped.len(), 1);
    assert!(plan.skipped[0].reason.starts_with("pending compaction"));
}

#[test]
fn the_cap_takes_the_oldest_first() {
    let f = fields(&["dt"]);
    let p = only(policy(TtlStrategy::Time, days(1), whole()));
    let stats = vec![
        stat("c", Some(t(2024, 1, 1)), 1),
        stat("a", Some(t(2024, 1, 3)), 1),
        stat("b", Some(t(2024, 1, 2)), 1),
    ];
    let plan = evaluate(&p, &f, &stats, t(2024, 2, 1), Some(2)).unwrap();
    assert_eq!(names(&plan.expired), vec!["c", "b"]);
    assert_eq!(names(&plan.capped), vec!["a"]);
    assert!(evaluate(&p, &f, &stats, t(2024, 2, 1), Some(0)).is_err());
}

#[test]
fn no_policy_judges_nothing() {
    let plan = evaluate(
        &TtlPolicies::default(),
        &fields(&["dt"]),
        &[stat("a", Some(t(2000, 1, 1)), 1)],
        t(2024, 1, 1),
        None,
    )
    .unwrap();
    assert!(plan.expired.is_empty() && plan.skipped.is_empty());
    assert_eq!(plan.partitions, 1);
}

#[test]
fn paths_that_do_not_fit_the_fields_are_skipped() {
    let f = fields(&["a", "b"]);
    let p = only(policy(TtlStrategy::Time, days(1), whole()));
    let plan = evaluate(
        &p,
        &f,
        &[stat("x", Some(t(2000, 1, 1)), 1)],
        t(2024, 1, 1),
        None,
    )
    .unwrap();
    assert!(plan.expired.is_empty());
    assert_eq!(plan.skipped.len(), 1);
}
