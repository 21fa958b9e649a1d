//! [`StorageOptions`]: the validated `key = value` options of the storage backends, namespaced
//! per backend (`s3.*`, `azure.*`, `gs.*`, or a plugin's own namespace), with typed accessors.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Result, StorageError};

/// One option a backend accepts, as its [`crate::StorageFactory`] declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionSpec {
    /// The key inside the backend's namespace, lowercase with `-` (e.g. `endpoint`, so the full
    /// key is `s3.endpoint`).
    pub name: &'static str,
    /// True if the value is a secret: `Debug` of [`StorageOptions`] shows it as `<redacted>`.
    pub secret: bool,
}

impl OptionSpec {
    /// A plain option.
    pub const fn plain(name: &'static str) -> Self {
        Self {
            name,
            secret: false,
        }
    }

    /// A secret option (redacted by `Debug`).
    pub const fn secret(name: &'static str) -> Self {
        Self { name, secret: true }
    }
}

/// One stored value.
#[derive(Clone, PartialEq, Eq)]
struct OptionValue {
    value: String,
    secret: bool,
}

/// Options of the backends, as a map from a normalized key (`namespace.name`, lowercase, `-`
/// rather than `_`) to its value, trimmed. Nothing is ever taken from the environment by arbor: a
/// caller that wants `AWS_*` or `AZURE_*` variables reads them itself and passes them here.
///
/// Built with [`StorageOptions::from_pairs`], which accepts only keys some registered backend
/// declares (an unknown key is an error naming it and listing the accepted ones), so a map holds
/// only known keys. Backends read them with the typed accessors ([`StorageOptions::get`],
/// [`StorageOptions::get_bool`]), which fail naming the key when a value does not parse.
/// `Debug` redacts secret values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StorageOptions {
    values: BTreeMap<String, OptionValue>,
}

impl fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.values {
            if v.secret {
                m.entry(k, &"<redacted>");
            } else {
                m.entry(k, &v.value);
            }
        }
        m.finish()
    }
}

/// A key normalized for lookup: trimmed, lowercase, `_` replaced by `-`.
pub fn normalize_key(key: &str) -> String {
    key.trim().to_ascii_lowercase().replace('_', "-")
}

impl StorageOptions {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no option is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Stores `value` under the normalized `key` without checking that a backend knows it (the
    /// registry's [`StorageOptions::from_pairs`] checks). Used by the registry once a key is
    /// validated; `secret` says whether `Debug` redacts it.
    pub(crate) fn insert_checked(&mut self, key: String, value: &str, secret: bool) {
        self.values.insert(
            key,
            OptionValue {
                value: value.trim().to_string(),
                secret,
            },
        );
    }

    /// The value of `key` (any spelling: case and `_`/`-` do not matter), if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(&normalize_key(key))
            .map(|v| v.value.as_str())
    }

    /// The value of `key` as a boolean (`true`/`false`/`1`/`0`/`yes`/`no`/`on`/`off`); `None`
    /// when unset, an `InvalidLocation` error naming the key when it is not a boolean.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        self.get(key).map(|v| parse_bool(key, v)).transpose()
    }

    /// Every option of `namespace` (e.g. `s3`), as (full key, value), in key order.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.values.iter().filter_map(move |(k, v)| {
            let (ns, _) = k.split_once('.')?;
            (ns == namespace).then_some((k.as_str(), v.value.as_str()))
        })
    }

    /// Every option, as (full key, value), in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values
            .iter()
            .map(|(k, v)| (k.as_str(), v.value.as_str()))
    }

    /// Fails naming the first key of `namespace` that is not in `accepted` (names without the
    /// namespace), listing the accepted keys. Backends call it before reading their options, so
    /// that a map assembled by hand cannot carry a key that would be ignored.
    pub fn check_namespace(&self, namespace: &str, accepted: &[OptionSpec]) -> Result<()> {
        for (key, _) in self.in_namespace(namespace) {
            let name = key.split_once('.').map(|(_, n)| n).unwrap_or(key);
            if !accepted.iter().any(|s| s.name == name) {
                return Err(unknown_key(key, namespace, accepted));
            }
        }
        Ok(())
    }
}

/// The error for `key`, unknown in `namespace`, listing the accepted keys.
pub(crate) fn unknown_key(key: &str, namespace: &str, accepted: &[OptionSpec]) -> StorageError {
    let list: Vec<String> = accepted
        .iter()
        .map(|s| format!("{namespace}.{}", s.name))
        .collect();
    StorageError::InvalidLocation {
        url: key.to_string(),
        reason: format!(
            "unknown storage option for {namespace} (accepted: {})",
            list.join(", ")
        ),
    }
}

/// Parses a boolean option value; the error names `key`.
pub(crate) fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(StorageError::InvalidLocation {
            url: key.to_string(),
            reason: format!("{value:?} is not a boolean (true/false)"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_get_normalizes_and_debug_redacts() {
        let mut o = StorageOptions::new();
        o.insert_checked("s3.region".into(), " eu-west-1 ", false);
        o.insert_checked("s3.secret-access-key".into(), "hunter2", true);
        assert_eq!(o.get("S3.REGION"), Some("eu-west-1"));
        assert_eq!(o.get("s3.secret_access_key"), Some("hunter2"));
        let dbg = format!("{o:?}");
        assert!(!dbg.contains("hunter2"), "{dbg}");
        assert!(dbg.contains("eu-west-1"), "{dbg}");
    }

    #[test]
    fn test_get_bool_names_the_key() {
        let mut o = StorageOptions::new();
        o.insert_checked("s3.allow-http".into(), "maybe", false);
        let err = o.get_bool("s3.allow-http").unwrap_err();
        assert!(err.to_string().contains("s3.allow-http"), "{err}");
        assert_eq!(o.get_bool("s3.anonymous").unwrap(), None);
    }

    #[test]
    fn test_check_namespace_lists_accepted_keys() {
        let mut o = StorageOptions::new();
        o.insert_checked("gs.bogus".into(), "1", false);
        o.insert_checked("s3.region".into(), "x", false);
        let accepted = [OptionSpec::plain("region")];
        assert!(o.check_namespace("s3", &accepted).is_ok());
        let err = o.check_namespace("gs", &accepted).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("gs.bogus") && msg.contains("gs.region"),
            "{msg}"
        );
    }
}
