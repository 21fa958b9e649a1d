//! [`ValueSet`]: the values of an `IN` list, prepared once per compiled filter so that a row
//! or a partition value is checked in constant time and a `[min, max]` range of statistics
//! in logarithmic time, whatever the length of the list.
//!
//! Membership is exactly [`Value::compare`] returning `Equal` for some listed value: values of
//! another variant never match, floating-point `-0.0` equals `0.0` and NaN equals nothing,
//! strings compare byte for byte (no trimming, no case folding).

use std::cmp::Ordering;
use std::collections::HashSet;
use std::mem::discriminant;

use super::value::Value;

/// A hashable stand-in for a non-string [`Value`] with the same equality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Int(i128),
    Decimal(i128),
    Date(i64),
    Timestamp(i128),
    /// The bits of a non-NaN float, `-0.0` stored as `0.0`.
    Float(u64),
    Bool(bool),
}

impl Key {
    /// The key of `v`; `None` for strings (kept apart) and NaN (equal to nothing).
    fn of(v: &Value) -> Option<Key> {
        Some(match v {
            Value::Int(i) => Key::Int(*i),
            Value::Decimal(d) => Key::Decimal(*d),
            Value::Date(d) => Key::Date(*d),
            Value::Timestamp(t) => Key::Timestamp(*t),
            Value::Float(f) => Key::Float(float_bits(*f)?),
            Value::Bool(b) => Key::Bool(*b),
            Value::Str(_) => return None,
        })
    }
}

/// The bits `f` hashes as: `-0.0` and `0.0` alike; `None` for NaN.
fn float_bits(f: f64) -> Option<u64> {
    if f.is_nan() {
        None
    } else if f == 0.0 {
        Some(0.0f64.to_bits())
    } else {
        Some(f.to_bits())
    }
}

/// The values of an `IN` list, hashed for membership and sorted for range checks.
#[derive(Debug, Clone)]
pub(crate) struct ValueSet {
    keys: HashSet<Key>,
    strings: HashSet<String>,
    /// The distinct values in ascending order (when `uniform`).
    sorted: Vec<Value>,
    /// Every value is of one variant and none is NaN: `sorted` is totally ordered.
    uniform: bool,
    /// Every value orders like Java ([`Value::orders_like_java`]).
    orders_like_java: bool,
}

impl ValueSet {
    /// The set of `values` (any number, duplicates allowed).
    pub(crate) fn new(values: &[Value]) -> ValueSet {
        let mut keys = HashSet::new();
        let mut strings = HashSet::new();
        for v in values {
            match v {
                Value::Str(s) => {
                    strings.insert(s.clone());
                }
                other => {
                    if let Some(k) = Key::of(other) {
                        keys.insert(k);
                    }
                }
            }
        }
        let uniform = values.first().is_some_and(|first| {
            values
                .iter()
                .all(|v| discriminant(v) == discriminant(first) && v.compare(v).is_some())
        });
        let mut sorted = values.to_vec();
        if uniform {
            sorted.sort_by(|a, b| a.compare(b).unwrap_or(Ordering::Equal));
            sorted.dedup_by(|a, b| a.compare(b) == Some(Ordering::Equal));
        }
        ValueSet {
            keys,
            strings,
            sorted,
            uniform,
            orders_like_java: values.iter().all(Value::orders_like_java),
        }
    }

    /// Whether some listed value equals `v`.
    pub(crate) fn contains(&self, v: &Value) -> bool {
        match v {
            Value::Str(s) => self.strings.contains(s.as_str()),
            other => Key::of(other).is_some_and(|k| self.keys.contains(&k)),
        }
    }

    /// Whether some listed value is the string `s` (exactly).
    pub(crate) fn contains_str(&self, s: &str) -> bool {
        self.strings.contains(s)
    }

    /// Whether every listed value orders like Java ([`Value::orders_like_java`]).
    pub(crate) fn orders_like_java(&self) -> bool {
        self.orders_like_java
    }

    /// Whether some listed value may lie within `[min, max]`: false only when the order of
    /// every value against the bounds is known and puts it outside (a value whose order
    /// against a bound is unknown may lie within). A binary search for a list of one variant.
    pub(crate) fn any_within(&self, min: &Value, max: &Value) -> bool {
        let within = |v: &Value| {
            min.compare(v).is_none_or(|o| o != Ordering::Greater)
                && max.compare(v).is_none_or(|o| o != Ordering::Less)
        };
        let Some(first) = self.sorted.first() else {
            return false;
        };
        if !self.uniform || first.compare(min).is_none() || first.compare(max).is_none() {
            return self.sorted.iter().any(within);
        }
        // The first value not below `min` is the only candidate worth checking against `max`.
        let at = self
            .sorted
            .partition_point(|v| v.compare(min) == Some(Ordering::Less));
        self.sorted.get(at).is_some_and(within)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ints(v: &[i128]) -> ValueSet {
        ValueSet::new(&v.iter().map(|i| Value::Int(*i)).collect::<Vec<_>>())
    }

    #[test]
    fn test_contains_matches_compare_equal_only() {
        let s = ints(&[3, 1, 3, 7]);
        assert!(s.contains(&Value::Int(1)) && s.contains(&Value::Int(7)));
        assert!(!s.contains(&Value::Int(2)));
        // Another variant with the same number is not equal.
        assert!(!s.contains(&Value::Decimal(1)) && !s.contains(&Value::Timestamp(1)));
        let f = ValueSet::new(&[Value::Float(0.0), Value::Float(2.5)]);
        assert!(f.contains(&Value::Float(-0.0)) && f.contains(&Value::Float(2.5)));
        assert!(!f.contains(&Value::Float(f64::NAN)) && !f.contains(&Value::Float(2.4)));
        let b = ValueSet::new(&[Value::Bool(true)]);
        assert!(b.contains(&Value::Bool(true)) && !b.contains(&Value::Bool(false)));
    }

    #[test]
    fn test_strings_compare_exactly() {
        let s = ValueSet::new(&[Value::Str("a".into()), Value::Str(" b".into())]);
        assert!(s.contains_str("a") && s.contains_str(" b"));
        assert!(!s.contains_str("b") && !s.contains_str("A") && !s.contains_str("a "));
        assert!(s.contains(&Value::Str(" b".into())));
        assert!(!s.contains(&Value::Int(1)));
    }

    #[test]
    fn test_any_within_is_the_linear_answer() {
        let list = [40, -5, 10, 10, 25, 90];
        let s = ints(&list);
        for min in -10..100 {
            for max in min..min + 20 {
                let linear = list.iter().any(|v| (min..=max).contains(v));
                assert_eq!(
                    s.any_within(&Value::Int(min), &Value::Int(max)),
                    linear,
                    "[{min}, {max}]"
                );
            }
        }
        // Bounds of another variant prove nothing.
        assert!(s.any_within(&Value::Str("a".into()), &Value::Str("b".into())));
        assert!(!ValueSet::new(&[]).any_within(&Value::Int(0), &Value::Int(1)));
    }

    #[test]
    fn test_any_within_strings_and_mixed_lists() {
        let s = ValueSet::new(&[Value::Str("b".into()), Value::Str("m".into())]);
        let w = |a: &str, b: &str| s.any_within(&Value::Str(a.into()), &Value::Str(b.into()));
        assert!(w("a", "c") && w("m", "m") && w("c", "z"));
        assert!(!w("c", "l") && !w("n", "z") && !w("a", "az"));
        // A mixed list is checked value by value: the other variant may lie anywhere.
        let mixed = ValueSet::new(&[Value::Int(1), Value::Str("x".into())]);
        assert!(mixed.any_within(&Value::Int(5), &Value::Int(6)));
    }

    #[test]
    fn test_orders_like_java() {
        assert!(ValueSet::new(&[Value::Str("abc".into())]).orders_like_java());
        assert!(
            !ValueSet::new(&[Value::Str("a".into()), Value::Str("\u{E000}".into())])
                .orders_like_java()
        );
    }
}
