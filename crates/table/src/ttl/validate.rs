//! Checking a policy against the table's partition fields (on set, and on every read of
//! `hoodie.properties`, so a run never applies a policy that does not fit the table).

use super::pattern::DatePattern;
use super::policy::{PolicyScope, Retention, TtlPolicy, TtlStrategy};
use super::spec::PartitionSpec;
use crate::error::{Result, TableError};

fn bad(policy: &TtlPolicy, why: String) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!("TTL policy `{policy}`: {why}"),
    }
}

/// Checks `policy` against the table's partition `fields` (names without `:<type>`) and
/// returns it normalized (a spec scope in [`PartitionSpec::normalized`] form). Rules: the table
/// is partitioned; the retention is the strategy's kind; a default's fields are the leading
/// partition fields, in order; a spec names partition fields; count and size leave at least
/// one partition level below the group (and a spec of them fixes leading fields); event-time
/// has a `time_field` that is a partition field and a `format` that compiles and fits the
/// levels from that field on; other strategies have neither.
pub fn validate_policy(policy: &TtlPolicy, fields: &[String]) -> Result<TtlPolicy> {
    if fields.is_empty() {
        return Err(TableError::Unsupported {
            reason: format!("TTL policy `{policy}`: the table is not partitioned"),
        });
    }
    if !policy.retain.fits(policy.strategy) {
        return Err(bad(
            policy,
            format!(
                "a {} policy retains {}",
                policy.strategy.name(),
                match policy.strategy {
                    TtlStrategy::Count => "a count",
                    TtlStrategy::Size => "bytes",
                    _ => "a duration",
                }
            ),
        ));
    }
    // What `Retention::parse` refuses is refused here too: a policy written to
    // hoodie.properties must read back.
    let zero = match policy.retain {
        Retention::Duration(d) => d.is_zero(),
        Retention::Count(n) | Retention::Bytes(n) => n == 0,
    };
    if zero {
        return Err(bad(
            policy,
            format!("its retention {} must be greater than zero", policy.retain),
        ));
    }
    let mut out = policy.clone();
    let group_len = match &policy.scope {
        PolicyScope::Default { fields: g } => {
            let leading = fields.get(..g.len());
            if leading != Some(g.as_slice()) {
                return Err(bad(
                    policy,
                    format!(
                        "a default policy groups by leading partition fields in order (the \
                         table's are {})",
                        fields.join(", ")
                    ),
                ));
            }
            g.len()
        }
        PolicyScope::Spec(s) => {
            let spec = PartitionSpec::parse(s, fields)?;
            if matches!(policy.strategy, TtlStrategy::Count | TtlStrategy::Size)
                && !spec.is_leading()
            {
                return Err(bad(
                    policy,
                    "a count or size spec fixes leading partition fields".to_string(),
                ));
            }
            out.scope = PolicyScope::Spec(spec.normalized());
            spec.len()
        }
    };
    if matches!(policy.strategy, TtlStrategy::Count | TtlStrategy::Size)
        && group_len >= fields.len()
    {
        return Err(bad(
            policy,
            format!(
                "{} needs at least one partition level below the group (the table's fields \
                 are {})",
                policy.strategy.name(),
                fields.join(", ")
            ),
        ));
    }
    if policy.strategy == TtlStrategy::EventTime {
        let (Some(field), Some(format)) = (&policy.time_field, &policy.format) else {
            return Err(bad(
                policy,
                "event-time needs a time field and a format".to_string(),
            ));
        };
        let idx = fields.iter().position(|f| f == field).ok_or_else(|| {
            bad(
                policy,
                format!(
                    "time field {field:?} is not a partition field (the table's are {})",
                    fields.join(", ")
                ),
            )
        })?;
        let pattern = DatePattern::compile(format)?;
        if fields.len() > 1 && idx + pattern.segments() > fields.len() {
            return Err(bad(
                policy,
                format!(
                    "format {format:?} spans {} levels but {field:?} has {} level(s) from it on",
                    pattern.segments(),
                    fields.len() - idx
                ),
            ));
        }
    } else if policy.time_field.is_some() || policy.format.is_some() {
        return Err(bad(
            policy,
            "a time field and format apply to event-time only".to_string(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn f(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn pol(strategy: TtlStrategy, retain: Retention, scope: PolicyScope) -> TtlPolicy {
        TtlPolicy {
            strategy,
            retain,
            scope,
            time_field: None,
            format: None,
        }
    }

    #[test]
    fn zero_retention_is_refused_as_the_parser_refuses_it() {
        let fields = f(&["dt"]);
        let all = || PolicyScope::Default { fields: Vec::new() };
        for (strategy, retain) in [
            (TtlStrategy::Time, Retention::Duration(Duration::ZERO)),
            (TtlStrategy::Count, Retention::Count(0)),
            (TtlStrategy::Size, Retention::Bytes(0)),
        ] {
            let e = validate_policy(&pol(strategy, retain, all()), &fields).unwrap_err();
            assert!(e.to_string().contains("greater than zero"), "{e}");
        }
        let one = pol(TtlStrategy::Count, Retention::Count(1), all());
        assert!(validate_policy(&one, &fields).is_ok());
    }

    #[test]
    fn scopes_are_checked_against_the_partition_fields() {
        let fields = f(&["region", "dt"]);
        let day = Retention::Duration(Duration::from_secs(86_400));
        let ok = pol(
            TtlStrategy::Time,
            day,
            PolicyScope::Spec("dt=x/region=eu/".into()),
        );
        assert_eq!(
            validate_policy(&ok, &fields).unwrap().scope,
            PolicyScope::Spec("region=eu/dt=x".into())
        );
        let by = |g: &[&str]| PolicyScope::Default { fields: f(g) };
        assert!(validate_policy(&pol(TtlStrategy::Time, day, by(&["region"])), &fields).is_ok());
        assert!(validate_policy(&pol(TtlStrategy::Time, day, by(&["dt"])), &fields).is_err());
        assert!(validate_policy(&pol(TtlStrategy::Time, day, by(&["x"])), &fields).is_err());
        assert!(validate_policy(&pol(TtlStrategy::Time, day, by(&[])), &[]).is_err());
        let c = Retention::Count(3);
        assert!(validate_policy(&pol(TtlStrategy::Count, c, by(&["region"])), &fields).is_ok());
        assert!(
            validate_policy(&pol(TtlStrategy::Count, c, by(&["region", "dt"])), &fields).is_err()
        );
        assert!(validate_policy(
            &pol(TtlStrategy::Count, c, PolicyScope::Spec("dt=x".into())),
            &fields
        )
        .is_err());
        assert!(validate_policy(&pol(TtlStrategy::Count, day, by(&[])), &fields).is_err());
    }

    #[test]
    fn event_time_needs_a_field_and_a_format() {
        let fields = f(&["region", "dt"]);
        let day = Retention::Duration(Duration::from_secs(86_400));
        let mut p = pol(
            TtlStrategy::EventTime,
            day,
            PolicyScope::Default { fields: vec![] },
        );
        assert!(validate_policy(&p, &fields).is_err());
        p.time_field = Some("dt".into());
        p.format = Some("yyyy-MM-dd".into());
        assert!(validate_policy(&p, &fields).is_ok());
        p.format = Some("yyyy/MM/dd".into());
        assert!(validate_policy(&p, &fields).is_err());
        p.format = Some("yy".into());
        assert!(validate_policy(&p, &fields).is_err());
        p.format = Some("yyyy".into());
        p.time_field = Some("nope".into());
        assert!(validate_policy(&p, &fields).is_err());
        let mut t = pol(
            TtlStrategy::Time,
            day,
            PolicyScope::Default { fields: vec![] },
        );
        t.time_field = Some("dt".into());
        assert!(validate_policy(&t, &fields).is_err());
    }
}
