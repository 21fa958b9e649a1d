//! TTL policies: strategy, retention and scope.

use std::fmt;
use std::time::Duration;

use super::values::{format_duration, format_size, parse_count, parse_duration, parse_size};
use crate::error::{Result, TableError};

/// What decides that a partition expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TtlStrategy {
    /// Java's `KEEP_BY_TIME`: the newest base instant among the partition's latest file slices
    /// plus the retention is before the evaluation time.
    Time,
    /// Java's `KEEP_BY_CREATION_TIME`: the `commitTime` of the partition's
    /// `.hoodie_partition_metadata` plus the retention is before the evaluation time.
    CreationTime,
    /// The value of a partition field, parsed with a date pattern, plus the retention is before
    /// the evaluation time.
    EventTime,
    /// Keep the N partitions with the greatest partition values in each group.
    Count,
    /// Keep the greatest partition values whose latest file slices fit in N bytes, per group.
    Size,
}

impl TtlStrategy {
    /// Every strategy, in declaration order.
    pub const ALL: [TtlStrategy; 5] = [
        TtlStrategy::Time,
        TtlStrategy::CreationTime,
        TtlStrategy::EventTime,
        TtlStrategy::Count,
        TtlStrategy::Size,
    ];

    /// Parses arbor's name (`time`, `creation-time`, `event-time`, `count`, `size`) or the
    /// RFC's / Java's (`KEEP_BY_TIME`, `KEEP_BY_CREATION_TIME`, `KEEP_BY_EVENT_TIME`,
    /// `KEEP_BY_COUNT`, `KEEP_BY_SIZE`), case-insensitive. Errors name the accepted values.
    pub fn parse(s: &str) -> Result<Self> {
        let t = s.trim();
        TtlStrategy::ALL
            .into_iter()
            .find(|x| t.eq_ignore_ascii_case(x.name()) || t.eq_ignore_ascii_case(x.hudi_name()))
            .ok_or_else(|| TableError::InvalidInput {
                column: None,
                row: None,
                reason: format!(
                    "TTL policy {s:?}: expected one of time, creation-time, event-time, count, \
                     size (or KEEP_BY_TIME, KEEP_BY_CREATION_TIME, KEEP_BY_EVENT_TIME, \
                     KEEP_BY_COUNT, KEEP_BY_SIZE)"
                ),
            })
    }

    /// arbor's name: `time`, `creation-time`, `event-time`, `count`, `size`.
    pub fn name(self) -> &'static str {
        match self {
            TtlStrategy::Time => "time",
            TtlStrategy::CreationTime => "creation-time",
            TtlStrategy::EventTime => "event-time",
            TtlStrategy::Count => "count",
            TtlStrategy::Size => "size",
        }
    }

    /// The RFC's / Java's name: `KEEP_BY_TIME`, `KEEP_BY_CREATION_TIME`, ...
    pub fn hudi_name(self) -> &'static str {
        match self {
            TtlStrategy::Time => "KEEP_BY_TIME",
            TtlStrategy::CreationTime => "KEEP_BY_CREATION_TIME",
            TtlStrategy::EventTime => "KEEP_BY_EVENT_TIME",
            TtlStrategy::Count => "KEEP_BY_COUNT",
            TtlStrategy::Size => "KEEP_BY_SIZE",
        }
    }

    /// True for the strategies judging a time (time, creation-time, event-time).
    pub fn is_time_based(self) -> bool {
        matches!(
            self,
            TtlStrategy::Time | TtlStrategy::CreationTime | TtlStrategy::EventTime
        )
    }
}

/// How much a policy retains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// How long a partition lives (time policies). Days are 24 hours.
    Duration(Duration),
    /// How many partitions each group keeps (count).
    Count(u64),
    /// How many bytes of latest file slices each group keeps (size).
    Bytes(u64),
}

impl Retention {
    /// Parses the retention of `strategy`: a duration (`30d`, `12h`, `90m`, `3600s`; a bare
    /// number is days) for the time policies, a whole number for count, bytes (`107374182400`,
    /// `100GiB`, `500MB`) for size. Zero, overflow and garbage are errors.
    pub fn parse(strategy: TtlStrategy, text: &str) -> Result<Self> {
        Ok(match strategy {
            TtlStrategy::Time | TtlStrategy::CreationTime | TtlStrategy::EventTime => {
                Retention::Duration(parse_duration(text)?)
            }
            TtlStrategy::Count => Retention::Count(parse_count(text)?),
            TtlStrategy::Size => Retention::Bytes(parse_size(text)?),
        })
    }

    /// True when this kind of retention is the one `strategy` takes.
    pub fn fits(&self, strategy: TtlStrategy) -> bool {
        matches!(
            (self, strategy),
            (Retention::Duration(_), s) if s.is_time_based()
        ) || matches!(
            (self, strategy),
            (Retention::Count(_), TtlStrategy::Count) | (Retention::Bytes(_), TtlStrategy::Size)
        )
    }
}

impl fmt::Display for Retention {
    /// `30d`, `12h`, `10`, `100GiB`: a form [`Retention::parse`] reads back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Retention::Duration(d) => f.write_str(&format_duration(*d)),
            Retention::Count(n) => write!(f, "{n}"),
            Retention::Bytes(b) => f.write_str(&format_size(*b)),
        }
    }
}

/// Which partitions a policy governs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyScope {
    /// The default policy: one group per distinct value of these high-level partition fields (empty: the whole table is one group).
    Default {
        /// The leading partition fields that form a group.
        fields: Vec<String>,
    },
    /// An explicit policy for the partitions matching this spec (normalized `field=value[/field=value]`), overriding the default for them.
    Spec(String),
}

/// One TTL policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtlPolicy {
    /// What decides expiry.
    pub strategy: TtlStrategy,
    /// How much is kept.
    pub retain: Retention,
    /// Which partitions it governs.
    pub scope: PolicyScope,
    /// Event-time: the partition field holding the time (required for event-time, refused otherwise).
    pub time_field: Option<String>,
    /// Event-time: the Java-style pattern of that field's values (required for event-time).
    pub format: Option<String>,
}

impl fmt::Display for TtlPolicy {
    /// One line: `region=eu: count 10`, `default (by region): time 30d`, `default: size
    /// 100GiB`, `default: event-time 30d (dt as yyyy-MM-dd)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scope {
            PolicyScope::Default { fields } if fields.is_empty() => f.write_str("default")?,
            PolicyScope::Default { fields } => write!(f, "default (by {})", fields.join(", "))?,
            PolicyScope::Spec(s) => f.write_str(s)?,
        }
        write!(f, ": {} {}", self.strategy.name(), self.retain)?;
        if let Some(field) = &self.time_field {
            write!(f, " ({field} as {})", self.format.as_deref().unwrap_or("?"))?;
        }
        Ok(())
    }
}

/// Every TTL policy of a table, and how runs are made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TtlPolicies {
    /// The default policy, governing every partition no explicit policy matches.
    pub default: Option<TtlPolicy>,
    /// Explicit policies, each for the partitions of its spec (scope [`PolicyScope::Spec`]).
    pub explicit: Vec<TtlPolicy>,
    /// `hoodie.partition.ttl.inline`: run after every commit of a write.
    pub inline: bool,
    /// `hoodie.partition.ttl.strategy.max.delete.partitions` when set.
    pub max_partitions: Option<usize>,
}

/// `TtlPolicies::from_config` is defined with the keys, in [`super::properties`].
impl TtlPolicies {
    /// True when there is no policy.
    pub fn is_empty(&self) -> bool {
        self.default.is_none() && self.explicit.is_empty()
    }

    /// Every policy: the default first, then the explicit ones in stored order.
    pub fn iter(&self) -> impl Iterator<Item = &TtlPolicy> {
        self.default.iter().chain(self.explicit.iter())
    }

    /// True when some policy is of `strategy`.
    pub fn uses(&self, strategy: TtlStrategy) -> bool {
        self.iter().any(|p| p.strategy == strategy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_parse_every_name_case_insensitively() {
        for s in TtlStrategy::ALL {
            assert_eq!(TtlStrategy::parse(s.name()).unwrap(), s);
            assert_eq!(TtlStrategy::parse(s.hudi_name()).unwrap(), s);
            assert_eq!(
                TtlStrategy::parse(&s.hudi_name().to_lowercase()).unwrap(),
                s
            );
            assert_eq!(TtlStrategy::parse(&s.name().to_uppercase()).unwrap(), s);
        }
        assert!(TtlStrategy::parse("keep").is_err());
        assert!(TtlStrategy::parse("").is_err());
    }

    #[test]
    fn retention_follows_the_strategy_and_round_trips() {
        let d = Retention::parse(TtlStrategy::Time, "30d").unwrap();
        assert_eq!(d, Retention::Duration(Duration::from_secs(30 * 86_400)));
        assert_eq!(d.to_string(), "30d");
        let c = Retention::parse(TtlStrategy::Count, "10").unwrap();
        assert_eq!(c.to_string(), "10");
        assert!(Retention::parse(TtlStrategy::Count, "10d").is_err());
        let b = Retention::parse(TtlStrategy::Size, "100GiB").unwrap();
        assert_eq!(b, Retention::Bytes(107_374_182_400));
        assert_eq!(b.to_string(), "100GiB");
        for s in TtlStrategy::ALL {
            let r = Retention::parse(s, "7").unwrap();
            assert!(r.fits(s));
            assert_eq!(Retention::parse(s, &r.to_string()).unwrap(), r);
        }
        assert!(!Retention::Count(1).fits(TtlStrategy::Size));
    }

    #[test]
    fn policies_display_on_one_line() {
        let p = TtlPolicy {
            strategy: TtlStrategy::Count,
            retain: Retention::Count(10),
            scope: PolicyScope::Spec("region=eu".into()),
            time_field: None,
            format: None,
        };
        assert_eq!(p.to_string(), "region=eu: count 10");
        let d = TtlPolicy {
            strategy: TtlStrategy::Time,
            retain: Retention::Duration(Duration::from_secs(30 * 86_400)),
            scope: PolicyScope::Default {
                fields: vec!["region".into()],
            },
            time_field: None,
            format: None,
        };
        assert_eq!(d.to_string(), "default (by region): time 30d");
        let e = TtlPolicy {
            strategy: TtlStrategy::EventTime,
            scope: PolicyScope::Default { fields: vec![] },
            time_field: Some("dt".into()),
            format: Some("yyyy-MM-dd".into()),
            ..d
        };
        assert_eq!(e.to_string(), "default: event-time 30d (dt as yyyy-MM-dd)");
    }
}
