//! The process-wide registry of storage factories (URL scheme -> [`StorageFactory`]) and
//! [`open_storage`], which opens every location through it.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use crate::backends;
use crate::error::Result;
use crate::factory::StorageFactory;
use crate::location::{invalid, location_url};
use crate::options::{normalize_key, unknown_key, OptionSpec, StorageOptions};
use crate::storage::Storage;

type Factories = BTreeMap<String, Arc<dyn StorageFactory>>;

/// The registry, filled with the built-in backends on first use.
fn registry() -> &'static RwLock<Factories> {
    static REGISTRY: OnceLock<RwLock<Factories>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut m = Factories::new();
        for (scheme, factory) in backends::builtin() {
            m.insert(scheme.to_string(), factory);
        }
        RwLock::new(m)
    })
}

/// A snapshot of the registry (a poisoned lock still holds a consistent map: writers only
/// insert).
fn factories() -> Factories {
    match registry().read() {
        Ok(m) => m.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// Registers `factory` for URL scheme `scheme` (case-insensitive; letters, digits, `+`, `-`,
/// `.`, starting with a letter) for the whole process, replacing and returning the factory that
/// had it (built-ins included). From then on [`open_storage`] opens `scheme://...` locations with
/// it and [`StorageOptions::from_pairs`] accepts the options it declares. An invalid scheme is an
/// `InvalidLocation` error.
pub fn register_storage_factory(
    scheme: &str,
    factory: Arc<dyn StorageFactory>,
) -> Result<Option<Arc<dyn StorageFactory>>> {
    let scheme = scheme.to_ascii_lowercase();
    let valid = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid {
        return Err(invalid(
            &scheme,
            "not a URL scheme (a letter, then letters, digits, +, - or .)",
        ));
    }
    let mut m = match registry().write() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    Ok(m.insert(scheme, factory))
}

/// The schemes registered now (built-ins and plugins), sorted.
pub fn registered_schemes() -> Vec<String> {
    factories().into_keys().collect()
}

/// Opens the storage at `location` with the factory registered for its scheme:
/// - a plain path (relative paths are resolved against the current directory) or `file:///abs`:
///   the local file system (the directory is created if missing);
/// - `memory://`: a fresh in-memory store;
/// - `s3://bucket/prefix` (or `s3a://`; feature `s3`): S3 or an S3-compatible server;
/// - `az://container/prefix` (or `azure://`; feature `azure`): Azure Blob Storage;
/// - `gs://bucket/prefix` (feature `gcs`): Google Cloud Storage;
/// - any scheme registered with [`register_storage_factory`].
///
/// Remote backends are configured only from `options` (never from the environment). An unknown
/// scheme, or one whose cargo feature is off, is an `InvalidLocation` error saying so.
pub fn open_storage(location: &str, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
    let url = location_url(location)?;
    let scheme = url.scheme().to_string();
    let all = factories();
    let Some(factory) = all.get(&scheme) else {
        if let Some(feature) = backends::feature_of(&scheme) {
            return Err(invalid(
                location,
                format!("{scheme}:// needs arbor-storage built with its cargo feature `{feature}`"),
            ));
        }
        let known: Vec<String> = all.keys().map(|s| format!("{s}://")).collect();
        return Err(invalid(
            location,
            format!(
                "unknown scheme {scheme:?} (registered: {}, or a plain path)",
                known.join(", ")
            ),
        ));
    };
    factory.open(&url, options)
}

impl StorageOptions {
    /// Options from `key = value` pairs (a config file, `--storage-option` flags ...), validated
    /// against the registered backends: keys are `namespace.name` (case-insensitive, `_` and `-`
    /// interchangeable), the namespace must be one a registered factory declares (`s3`, `azure`,
    /// `gs` when their features are on, or a plugin's), and the name one it accepts. An unknown
    /// key is an `InvalidLocation` error naming it and listing the accepted keys. Values are
    /// trimmed and parsed by the backend when it opens a location; a later pair for the same key
    /// replaces an earlier one.
    ///
    /// Built-in keys: `s3.endpoint`, `s3.region`, `s3.access-key-id`, `s3.secret-access-key`,
    /// `s3.session-token`, `s3.allow-http`, `s3.virtual-hosted-style`, `s3.anonymous`,
    /// `s3.ambient-credentials`; `azure.account`, `azure.access-key`, `azure.sas-token`,
    /// `azure.bearer-token`, `azure.client-id`, `azure.client-secret`, `azure.tenant-id`,
    /// `azure.endpoint`, `azure.use-emulator`, `azure.allow-http`, `azure.anonymous`,
    /// `azure.ambient-credentials`; `gs.service-account-path`, `gs.service-account-key`,
    /// `gs.application-credentials`, `gs.anonymous`, `gs.ambient-credentials`.
    pub fn from_pairs<I, K, V>(pairs: I) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let all = factories();
        let mut namespaces: BTreeMap<String, Vec<OptionSpec>> = BTreeMap::new();
        for f in all.values() {
            if let Some(ns) = f.option_namespace() {
                namespaces
                    .entry(ns.to_ascii_lowercase())
                    .or_default()
                    .extend_from_slice(f.options());
            }
        }
        let mut o = Self::new();
        for (k, v) in pairs {
            let key = normalize_key(k.as_ref());
            let Some((ns, name)) = key.split_once('.') else {
                return Err(unknown_namespace(k.as_ref(), &namespaces));
            };
            let Some(specs) = namespaces.get(ns) else {
                return Err(unknown_namespace(k.as_ref(), &namespaces));
            };
            let Some(spec) = specs.iter().find(|s| s.name == name) else {
                return Err(unknown_key(k.as_ref(), ns, specs));
            };
            o.insert_checked(key.clone(), v.as_ref(), spec.secret);
        }
        Ok(o)
    }
}

/// The error for a key whose namespace no registered backend declares.
fn unknown_namespace(
    key: &str,
    namespaces: &BTreeMap<String, Vec<OptionSpec>>,
) -> crate::error::StorageError {
    let known: Vec<String> = namespaces.keys().map(|n| format!("{n}.*")).collect();
    let disabled: Vec<String> = backends::disabled_namespaces()
        .iter()
        .map(|(ns, feature)| format!("{ns}.* needs feature `{feature}`"))
        .collect();
    let mut reason = format!(
        "unknown storage option (accepted: {})",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    );
    if !disabled.is_empty() {
        reason.push_str(&format!("; {}", disabled.join(", ")));
    }
    invalid(key, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StorageError;

    #[test]
    fn test_unknown_scheme_is_invalid_location() {
        let err = open_storage("nope://b/p", &StorageOptions::default()).unwrap_err();
        assert!(matches!(err, StorageError::InvalidLocation { .. }), "{err}");
        assert!(err.to_string().contains("memory://"), "{err}");
    }

    #[test]
    fn test_open_local_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let s = open_storage(p.to_str().unwrap(), &StorageOptions::default()).unwrap();
        assert!(p.is_dir());
        assert!(s.to_string().starts_with("file:///"));
        let m = open_storage("memory://", &StorageOptions::default()).unwrap();
        assert_eq!(m.to_string(), "memory://");
        assert!(open_storage("memory://x", &StorageOptions::default()).is_err());
        assert!(open_storage("file://host/t", &StorageOptions::default()).is_err());
    }

    #[test]
    fn test_from_pairs_rejects_unknown_keys_listing_accepted_ones() {
        let err = StorageOptions::from_pairs([("bogus.key", "1")]).unwrap_err();
        assert!(err.to_string().contains("bogus.key"), "{err}");
        let err = StorageOptions::from_pairs([("nonamespace", "1")]).unwrap_err();
        assert!(err.to_string().contains("nonamespace"), "{err}");
    }

    #[test]
    fn test_register_rejects_bad_scheme() {
        struct Nothing;
        impl StorageFactory for Nothing {
            fn open(&self, url: &url::Url, _: &StorageOptions) -> Result<Arc<dyn Storage>> {
                Err(invalid(url.as_str(), "never"))
            }
        }
        assert!(register_storage_factory("1abc", Arc::new(Nothing)).is_err());
        assert!(register_storage_factory("", Arc::new(Nothing)).is_err());
        assert!(register_storage_factory("unit-test+x", Arc::new(Nothing))
            .unwrap()
            .is_none());
        assert!(registered_schemes().contains(&"unit-test+x".to_string()));
        let err = open_storage("unit-test+x://a", &StorageOptions::default()).unwrap_err();
        assert!(err.to_string().contains("never"), "{err}");
    }
}
