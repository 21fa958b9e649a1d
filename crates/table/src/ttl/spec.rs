//! Partition specs (`region=eu`, `region=eu/dt=2024-01-02`) and the field values of partition
//! paths they are matched against.
//!
//! A partition path has one segment per partition field (`eu/2024-01-02`, or hive style
//! `region=eu/dt=2024-01-02`); a table with one partition field may have a path of several
//! segments (a timestamp key generator writing `2024/01/02`), which is then that field's one
//! value. A segment's value is the segment without its `field=` prefix; a URL-encoded value
//! (`a%2Fb`) is also known by its decoded form (`a/b`), and a spec value matches either.
//! Specs are normalized to the partition fields' order, `field=value` joined by `/`, without
//! the RFC's trailing `/`.

use crate::error::{Result, TableError};

/// The partition fields of a table config's `hoodie.table.partition.fields`, without the
/// CUSTOM key generator's `:<type>` suffixes.
pub fn field_names(raw: &[String]) -> Vec<String> {
    raw.iter()
        .map(|f| f.split(':').next().unwrap_or_default().trim().to_string())
        .collect()
}

/// One partition field's value in a partition path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathValue {
    /// The segment as stored, without the `field=` prefix.
    pub raw: String,
    /// `raw` with `%XX` escapes decoded (equal to `raw` when it has none or they are not UTF-8).
    pub decoded: String,
}

impl PathValue {
    fn new(raw: &str) -> Self {
        PathValue {
            raw: raw.to_string(),
            decoded: percent_decode(raw).unwrap_or_else(|| raw.to_string()),
        }
    }

    /// True when `value` is this value, raw or decoded.
    pub fn is(&self, value: &str) -> bool {
        self.raw == value || self.decoded == value
    }
}

/// Decodes `%XX` escapes; `None` when there is none, an escape is malformed, or the bytes are
/// not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return None;
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The value of each partition field in `partition`, in field order. Errors (as text, for a
/// skipped partition's reason) when the path's segments do not map onto the fields.
pub fn path_values(
    partition: &str,
    fields: &[String],
) -> std::result::Result<Vec<PathValue>, String> {
    let segments: Vec<&str> = partition.split('/').collect();
    let strip = |seg: &str, field: &str| -> String {
        seg.strip_prefix(field)
            .and_then(|r| r.strip_prefix('='))
            .unwrap_or(seg)
            .to_string()
    };
    if segments.len() == fields.len() {
        return Ok(segments
            .iter()
            .zip(fields)
            .map(|(s, f)| PathValue::new(&strip(s, f)))
            .collect());
    }
    if let [field] = fields {
        let joined: Vec<String> = segments.iter().map(|s| strip(s, field)).collect();
        return Ok(vec![PathValue::new(&joined.join("/"))]);
    }
    Err(format!(
        "partition path {partition:?} has {} segments for {} partition fields",
        segments.len(),
        fields.len()
    ))
}

/// A partition spec: values of some partition fields, in partition-field order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    /// `(field index, field, value)`, ordered by field index.
    parts: Vec<(usize, String, String)>,
}

fn bad_spec(text: &str, why: &str) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason: format!("partition spec {text:?}: {why}"),
    }
}

impl PartitionSpec {
    /// Parses `field=value[/field=value...]` (a trailing `/` is allowed, as the RFC writes
    /// specs) against the table's partition `fields`. Errors: an empty spec, a part without
    /// `=`, an empty value, a `*` (the default policy has its own form), an unknown or repeated
    /// field.
    pub fn parse(text: &str, fields: &[String]) -> Result<PartitionSpec> {
        let trimmed = text.trim().trim_end_matches('/');
        if trimmed.is_empty() {
            return Err(bad_spec(text, "is empty"));
        }
        let mut parts = Vec::new();
        for part in trimmed.split('/') {
            let (f, v) = part
                .split_once('=')
                .ok_or_else(|| bad_spec(text, &format!("{part:?} is not field=value")))?;
            let (f, v) = (f.trim(), v.trim());
            if v.is_empty() || v == "*" {
                return Err(bad_spec(text, &format!("field {f:?} needs a value")));
            }
            let idx = fields.iter().position(|x| x == f).ok_or_else(|| {
                bad_spec(
                    text,
                    &format!(
                        "{f:?} is not a partition field (the table's are {})",
                        fields.join(", ")
                    ),
                )
            })?;
            if parts.iter().any(|(i, _, _)| *i == idx) {
                return Err(bad_spec(text, &format!("field {f:?} appears twice")));
            }
            parts.push((idx, f.to_string(), v.to_string()));
        }
        parts.sort_by_key(|(i, _, _)| *i);
        Ok(PartitionSpec { parts })
    }

    /// The spec for exactly one partition path (all its fields, raw values), as Java's
    /// `partition.selected` lists partitions.
    pub fn of_path(partition: &str, fields: &[String]) -> Result<PartitionSpec> {
        let values = path_values(partition, fields).map_err(|e| bad_spec(partition, &e))?;
        Ok(PartitionSpec {
            parts: fields
                .iter()
                .zip(values)
                .enumerate()
                .map(|(i, (f, v))| (i, f.clone(), v.raw))
                .collect(),
        })
    }

    /// The normalized text: `field=value` joined by `/` in partition-field order.
    pub fn normalized(&self) -> String {
        self.parts
            .iter()
            .map(|(_, f, v)| format!("{f}={v}"))
            .collect::<Vec<_>>()
            .join("/")
    }

    /// How many fields the spec fixes (its specificity).
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always false: a parsed spec fixes at least one field.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The indexes (in the partition fields) of the fields the spec fixes, ascending.
    pub fn field_indexes(&self) -> Vec<usize> {
        self.parts.iter().map(|(i, _, _)| *i).collect()
    }

    /// True when the spec fixes exactly the leading `len()` partition fields.
    pub fn is_leading(&self) -> bool {
        self.parts.iter().enumerate().all(|(n, (i, _, _))| n == *i)
    }

    /// True when every field the spec fixes has its value in `values` (a partition's
    /// [`path_values`]).
    pub fn matches(&self, values: &[PathValue]) -> bool {
        self.parts
            .iter()
            .all(|(i, _, v)| values.get(*i).is_some_and(|pv| pv.is(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn specs_normalize_to_field_order() {
        let f = fields(&["region", "dt"]);
        let s = PartitionSpec::parse("dt=2024-01-02/region=eu/", &f).unwrap();
        assert_eq!(s.normalized(), "region=eu/dt=2024-01-02");
        assert_eq!(s.len(), 2);
        assert!(s.is_leading());
        let d = PartitionSpec::parse("dt=2024-01-02", &f).unwrap();
        assert!(!d.is_leading());
        assert_eq!(d.field_indexes(), vec![1]);
    }

    #[test]
    fn bad_specs_are_errors() {
        let f = fields(&["region", "dt"]);
        for t in [
            "",
            "/",
            "region",
            "region=",
            "region=*",
            "city=x",
            "region=a/region=b",
        ] {
            assert!(PartitionSpec::parse(t, &f).is_err(), "{t:?} accepted");
        }
    }

    #[test]
    fn specs_match_hive_and_plain_paths_and_encoded_values() {
        let f = fields(&["region", "dt"]);
        let s = PartitionSpec::parse("region=eu", &f).unwrap();
        for p in ["region=eu/dt=2024-01-02", "eu/2024-01-02"] {
            assert!(s.matches(&path_values(p, &f).unwrap()), "{p}");
        }
        assert!(!s.matches(&path_values("us/2024-01-02", &f).unwrap()));
        let enc = PartitionSpec::parse("region=a b", &f).unwrap();
        assert!(enc.matches(&path_values("region=a%20b/dt=x", &f).unwrap()));
        let raw = PartitionSpec::parse("region=a%20b", &f).unwrap();
        assert!(raw.matches(&path_values("region=a%20b/dt=x", &f).unwrap()));
    }

    #[test]
    fn one_field_takes_every_segment() {
        let f = fields(&["ts"]);
        let v = path_values("2024/01/02", &f).unwrap();
        assert_eq!(v[0].raw, "2024/01/02");
        assert!(path_values("a/b/c", &fields(&["x", "y"])).is_err());
    }

    #[test]
    fn a_path_is_a_spec_of_all_its_fields() {
        let f = fields(&["region", "dt"]);
        let s = PartitionSpec::of_path("region=eu/dt=2024-01-02", &f).unwrap();
        assert_eq!(s.normalized(), "region=eu/dt=2024-01-02");
        assert_eq!(
            PartitionSpec::of_path("eu/x%2Fy", &f).unwrap().normalized(),
            "region=eu/dt=x%2Fy"
        );
        assert_eq!(
            field_names(&fields(&["a:SIMPLE", "b"])),
            fields(&["a", "b"])
        );
    }
}
