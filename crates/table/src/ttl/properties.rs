//! TTL policies in `hoodie.properties`: the RFC-65 keys (written), and Java's write-config keys
//! (read, meaning the same).
//!
//! RFC keys: `hoodie.partition.ttl.management.default.policy` (`KEEP_BY_*`),
//! `...default.fields` (comma list), `...default.policy.value`, and the explicit policies as a
//! JSON array in `hoodie.partition.ttl.policies`
//! (`[{"partitionSpec":"region=eu/","policy":"KEEP_BY_COUNT","policyValue":10}]`). A
//! `policyValue` is days for the time policies (a whole number of days is written as a
//! number, as the RFC does; another duration as text such as `"12h"`), a count, or bytes.
//! arbor's event-time adds `timeField` and `timeFormat` to a JSON policy, and
//! `...default.time.field` / `...default.time.format` to the default.
//!
//! Java keys: `hoodie.partition.ttl.inline`, `hoodie.partition.ttl.management.strategy.type`
//! (or `hoodie.partition.ttl.strategy.class`), `hoodie.partition.ttl.strategy.days.retain`
//! (`-1`: off), `...strategy.partition.selected` (comma list of partition paths),
//! `...strategy.max.delete.partitions`. A Java policy with `days.retain > 0` is a default
//! policy over the whole table, or one explicit policy per selected partition. Writing
//! policies moves a Java policy into the RFC keys and removes Java's policy keys (`inline` and
//! `max.delete.partitions` stay).

use std::time::Duration;

use arbor_timeline::{TableConfig, TimelineError};
use serde_json::{json, Value};

use super::policy::{PolicyScope, Retention, TtlPolicies, TtlPolicy, TtlStrategy};
use super::spec::{field_names, PartitionSpec};
use super::validate::validate_policy;
use crate::error::{Result, TableError};

/// RFC: the default policy's strategy.
pub const DEFAULT_POLICY: &str = "hoodie.partition.ttl.management.default.policy";
/// RFC: the default policy's group fields.
pub const DEFAULT_FIELDS: &str = "hoodie.partition.ttl.management.default.fields";
/// RFC: the default policy's value.
pub const DEFAULT_VALUE: &str = "hoodie.partition.ttl.management.default.policy.value";
/// arbor: the default event-time policy's field.
pub const DEFAULT_TIME_FIELD: &str = "hoodie.partition.ttl.management.default.time.field";
/// arbor: the default event-time policy's format.
pub const DEFAULT_TIME_FORMAT: &str = "hoodie.partition.ttl.management.default.time.format";
/// RFC: the explicit policies (JSON array).
pub const POLICIES: &str = "hoodie.partition.ttl.policies";
/// Java: run TTL after every commit.
pub const INLINE: &str = "hoodie.partition.ttl.inline";
/// Java: the strategy type.
pub const JAVA_STRATEGY_TYPE: &str = "hoodie.partition.ttl.management.strategy.type";
/// Java: the strategy class.
pub const JAVA_STRATEGY_CLASS: &str = "hoodie.partition.ttl.strategy.class";
/// Java: days retained (`-1`: off).
pub const JAVA_DAYS_RETAIN: &str = "hoodie.partition.ttl.strategy.days.retain";
/// Java: the partitions the policy applies to.
pub const JAVA_PARTITION_SELECTED: &str = "hoodie.partition.ttl.strategy.partition.selected";
/// Java: the most partitions one run deletes.
pub const MAX_DELETE_PARTITIONS: &str = "hoodie.partition.ttl.strategy.max.delete.partitions";

const JAVA_TIME_CLASS: &str = "org.apache.hudi.table.action.ttl.strategy.KeepByTimeStrategy";
const JAVA_CREATION_CLASS: &str =
    "org.apache.hudi.table.action.ttl.strategy.KeepByCreationTimeStrategy";

fn invalid(key: &str, reason: String) -> TableError {
    TableError::Timeline(TimelineError::InvalidConfig {
        path: "hoodie.properties".to_string(),
        key: Some(key.to_string()),
        reason: format!("{key}: {reason}"),
    })
}

fn nonempty<'a>(config: &'a TableConfig, key: &str) -> Option<&'a str> {
    config.get(key).map(str::trim).filter(|v| !v.is_empty())
}

impl TtlPolicies {
    /// The policies `config` (hoodie.properties) holds: RFC keys, and Java's write-config keys meaning the same (a Java KEEP_BY_TIME/KEEP_BY_CREATION_TIME with days.retain > 0 is a default policy over the whole table, or explicit policies for the partitions of `partition.selected`). Contradicting keys are an error naming them.
    pub fn from_config(config: &TableConfig) -> Result<Self> {
        read(config)
    }
}

/// Reads every TTL policy of `config` (see the module doc), each validated against the
/// table's partition fields.
pub(crate) fn read(config: &TableConfig) -> Result<TtlPolicies> {
    let fields = field_names(&config.partition_fields());
    let mut out = TtlPolicies {
        inline: config
            .get(INLINE)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        ..TtlPolicies::default()
    };
    if let Some(v) = nonempty(config, MAX_DELETE_PARTITIONS) {
        let n: usize = v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            invalid(
                MAX_DELETE_PARTITIONS,
                format!("{v:?} is not a whole number > 0"),
            )
        })?;
        out.max_partitions = Some(n);
    }
    out.default = read_default(config, &fields)?;
    if let Some(text) = nonempty(config, POLICIES) {
        out.explicit = read_explicit(text, &fields)?;
    }
    let (java_default, java_explicit) = read_java(config, &fields)?;
    if let Some(j) = java_default {
        match &out.default {
            Some(d) if *d != j => {
                return Err(invalid(
                    JAVA_DAYS_RETAIN,
                    format!("Java's policy `{j}` contradicts {DEFAULT_POLICY}'s `{d}`; remove one"),
                ))
            }
            Some(_) => {}
            None => out.default = Some(j),
        }
    }
    for j in java_explicit {
        match out.explicit.iter().find(|e| e.scope == j.scope) {
            Some(e) if *e != j => {
                return Err(invalid(
                    JAVA_PARTITION_SELECTED,
                    format!("Java's policy `{j}` contradicts {POLICIES}'s `{e}`; remove one"),
                ))
            }
            Some(_) => {}
            None => out.explicit.push(j),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for e in &out.explicit {
        if !seen.insert(format!("{:?}", e.scope)) {
            return Err(invalid(POLICIES, format!("two policies for {:?}", e.scope)));
        }
    }
    Ok(out)
}

fn read_default(config: &TableConfig, fields: &[String]) -> Result<Option<TtlPolicy>> {
    let Some(name) = nonempty(config, DEFAULT_POLICY) else {
        for k in [
            DEFAULT_VALUE,
            DEFAULT_FIELDS,
            DEFAULT_TIME_FIELD,
            DEFAULT_TIME_FORMAT,
        ] {
            if nonempty(config, k).is_some() {
                return Err(invalid(k, format!("set without {DEFAULT_POLICY}")));
            }
        }
        return Ok(None);
    };
    let strategy = TtlStrategy::parse(name).map_err(|e| invalid(DEFAULT_POLICY, e.to_string()))?;
    let value = nonempty(config, DEFAULT_VALUE).ok_or_else(|| {
        invalid(
            DEFAULT_VALUE,
            format!("missing for {DEFAULT_POLICY}={name}"),
        )
    })?;
    let retain =
        Retention::parse(strategy, value).map_err(|e| invalid(DEFAULT_VALUE, e.to_string()))?;
    let group: Vec<String> = nonempty(config, DEFAULT_FIELDS)
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();
    let policy = TtlPolicy {
        strategy,
        retain,
        scope: PolicyScope::Default { fields: group },
        time_field: nonempty(config, DEFAULT_TIME_FIELD).map(str::to_string),
        format: nonempty(config, DEFAULT_TIME_FORMAT).map(str::to_string),
    };
    validate_policy(&policy, fields)
        .map(Some)
        .map_err(|e| invalid(DEFAULT_POLICY, e.to_string()))
}

fn read_explicit(text: &str, fields: &[String]) -> Result<Vec<TtlPolicy>> {
    let bad = |why: String| invalid(POLICIES, why);
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not a JSON array: {e}")))?;
    let Value::Array(items) = v else {
        return Err(bad("not a JSON array".to_string()));
    };
    let mut out = Vec::new();
    for (n, item) in items.iter().enumerate() {
        let field = |k: &str| item.get(k);
        let text_of = |k: &str| -> Result<Option<String>> {
            match field(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(bad(format!("policy {n}: {k} is {other}, not text"))),
            }
        };
        let spec = text_of("partitionSpec")?
            .ok_or_else(|| bad(format!("policy {n} has no partitionSpec")))?;
        let name = text_of("policy")?.ok_or_else(|| bad(format!("policy {n} has no policy")))?;
        let strategy = TtlStrategy::parse(&name).map_err(|e| bad(format!("policy {n}: {e}")))?;
        let value = match field("policyValue") {
            Some(Value::Number(x)) => x.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => return Err(bad(format!("policy {n} has no policyValue"))),
        };
        let retain =
            Retention::parse(strategy, &value).map_err(|e| bad(format!("policy {n}: {e}")))?;
        let policy = TtlPolicy {
            strategy,
            retain,
            scope: PolicyScope::Spec(spec),
            time_field: text_of("timeField")?,
            format: text_of("timeFormat")?,
        };
        out.push(validate_policy(&policy, fields).map_err(|e| bad(e.to_string()))?);
    }
    Ok(out)
}

/// Java's keys: `(default, explicit)`.
fn read_java(
    config: &TableConfig,
    fields: &[String],
) -> Result<(Option<TtlPolicy>, Vec<TtlPolicy>)> {
    let Some(days) = nonempty(config, JAVA_DAYS_RETAIN) else {
        return Ok((None, Vec::new()));
    };
    let days: i64 = days
        .parse()
        .map_err(|_| invalid(JAVA_DAYS_RETAIN, format!("{days:?} is not a whole number")))?;
    if days <= 0 {
        return Ok((None, Vec::new()));
    }
    let by_class = nonempty(config, JAVA_STRATEGY_CLASS)
        .map(|c| match c {
            JAVA_TIME_CLASS => Ok(TtlStrategy::Time),
            JAVA_CREATION_CLASS => Ok(TtlStrategy::CreationTime),
            other => Err(invalid(
                JAVA_STRATEGY_CLASS,
                format!("strategy class {other:?} is not one arbor applies"),
            )),
        })
        .transpose()?;
    let by_type = nonempty(config, JAVA_STRATEGY_TYPE)
        .map(|t| match TtlStrategy::parse(t) {
            Ok(s @ (TtlStrategy::Time | TtlStrategy::CreationTime)) => Ok(s),
            _ => Err(invalid(
                JAVA_STRATEGY_TYPE,
                format!("{t:?}: Java's keys take KEEP_BY_TIME or KEEP_BY_CREATION_TIME"),
            )),
        })
        .transpose()?;
    let strategy = match (by_class, by_type) {
        (Some(c), Some(t)) if c != t => {
            return Err(invalid(
                JAVA_STRATEGY_CLASS,
                format!("contradicts {JAVA_STRATEGY_TYPE}"),
            ))
        }
        (Some(s), _) | (None, Some(s)) => s,
        (None, None) => TtlStrategy::Time,
    };
    let secs = u64::try_from(days)
        .ok()
        .and_then(|d| d.checked_mul(86_400))
        .ok_or_else(|| invalid(JAVA_DAYS_RETAIN, format!("{days} days is too long")))?;
    let policy = |scope| TtlPolicy {
        strategy,
        retain: Retention::Duration(Duration::from_secs(secs)),
        scope,
        time_field: None,
        format: None,
    };
    let Some(selected) = nonempty(config, JAVA_PARTITION_SELECTED) else {
        let p = policy(PolicyScope::Default { fields: Vec::new() });
        let p =
            validate_policy(&p, fields).map_err(|e| invalid(JAVA_DAYS_RETAIN, e.to_string()))?;
        return Ok((Some(p), Vec::new()));
    };
    let mut out = Vec::new();
    for path in selected.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let spec = PartitionSpec::of_path(path, fields)
            .map_err(|e| invalid(JAVA_PARTITION_SELECTED, e.to_string()))?;
        let p = policy(PolicyScope::Spec(spec.normalized()));
        out.push(
            validate_policy(&p, fields)
                .map_err(|e| invalid(JAVA_PARTITION_SELECTED, e.to_string()))?,
        );
    }
    Ok((None, out))
}

/// A retention as the RFC stores it: days (a number) for a whole number of days, counts and
/// bytes as numbers, other durations as text.
fn policy_value(r: &Retention) -> Value {
    match r {
        Retention::Duration(d) if d.subsec_nanos() == 0 && d.as_secs() % 86_400 == 0 => {
            json!(d.as_secs() / 86_400)
        }
        Retention::Duration(_) => json!(r.to_string()),
        Retention::Count(n) | Retention::Bytes(n) => json!(n),
    }
}

/// Writes `policies` into `config` in the RFC keys, removing every earlier TTL policy key
/// (RFC and Java; `inline` and `max.delete.partitions` are left as they are).
pub(crate) fn write(policies: &TtlPolicies, config: &mut TableConfig) -> Result<()> {
    for k in [
        DEFAULT_POLICY,
        DEFAULT_FIELDS,
        DEFAULT_VALUE,
        DEFAULT_TIME_FIELD,
        DEFAULT_TIME_FORMAT,
        POLICIES,
        JAVA_STRATEGY_TYPE,
        JAVA_STRATEGY_CLASS,
        JAVA_DAYS_RETAIN,
        JAVA_PARTITION_SELECTED,
    ] {
        if config.get(k).is_some() {
            config.remove(k)?;
        }
    }
    if let Some(d) = &policies.default {
        config.set(DEFAULT_POLICY, d.strategy.hudi_name())?;
        let value = match policy_value(&d.retain) {
            Value::String(s) => s,
            other => other.to_string(),
        };
        config.set(DEFAULT_VALUE, value)?;
        if let PolicyScope::Default { fields } = &d.scope {
            if !fields.is_empty() {
                config.set(DEFAULT_FIELDS, fields.join(","))?;
            }
        }
        if let Some(f) = &d.time_field {
            config.set(DEFAULT_TIME_FIELD, f.clone())?;
        }
        if let Some(f) = &d.format {
            config.set(DEFAULT_TIME_FORMAT, f.clone())?;
        }
    }
    if !policies.explicit.is_empty() {
        let items: Vec<Value> = policies
            .explicit
            .iter()
            .map(|p| {
                let spec = match &p.scope {
                    PolicyScope::Spec(s) => s.clone(),
                    PolicyScope::Default { .. } => String::new(),
                };
                let mut item = json!({
                    "partitionSpec": spec,
                    "policy": p.strategy.hudi_name(),
                    "policyValue": policy_value(&p.retain),
                });
                if let (Some(f), Value::Object(m)) = (&p.time_field, &mut item) {
                    m.insert("timeField".into(), json!(f));
                }
                if let (Some(f), Value::Object(m)) = (&p.format, &mut item) {
                    m.insert("timeFormat".into(), json!(f));
                }
                item
            })
            .collect();
        config.set(POLICIES, Value::Array(items).to_string())?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "properties_tests.rs"]
mod tests;
