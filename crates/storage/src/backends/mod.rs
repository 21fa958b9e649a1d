//! The built-in storage factories: local files and memory always, S3, Azure Blob and Google
//! Cloud Storage behind the cargo features `s3`, `azure` and `gcs` (object_store's `aws`,
//! `azure` and `gcp`).

use std::sync::Arc;

use crate::factory::StorageFactory;

#[cfg(feature = "azure")]
mod azure;
#[cfg(feature = "gcs")]
mod gcs;
mod local;
#[cfg(feature = "s3")]
mod s3;

/// The built-in (scheme, factory) pairs of this build.
pub(crate) fn builtin() -> Vec<(&'static str, Arc<dyn StorageFactory>)> {
    let file: Arc<dyn StorageFactory> = Arc::new(local::LocalFactory);
    #[allow(unused_mut)]
    let mut v: Vec<(&'static str, Arc<dyn StorageFactory>)> =
        vec![("file", file), ("memory", Arc::new(local::MemoryFactory))];
    #[cfg(feature = "s3")]
    {
        let s3: Arc<dyn StorageFactory> = Arc::new(s3::S3Factory);
        v.push(("s3", s3.clone()));
        v.push(("s3a", s3));
    }
    #[cfg(feature = "azure")]
    {
        let az: Arc<dyn StorageFactory> = Arc::new(azure::AzureFactory);
        v.push(("az", az.clone()));
        v.push(("azure", az));
    }
    #[cfg(feature = "gcs")]
    v.push(("gs", Arc::new(gcs::GcsFactory)));
    v
}

/// Every built-in remote backend: (schemes, option namespace, cargo feature, feature on).
const REMOTE: [(&[&str], &str, &str, bool); 3] = [
    (&["s3", "s3a"], "s3", "s3", cfg!(feature = "s3")),
    (&["az", "azure"], "azure", "azure", cfg!(feature = "azure")),
    (&["gs"], "gs", "gcs", cfg!(feature = "gcs")),
];

/// The cargo feature that would provide built-in `scheme`, when it is off in this build.
pub(crate) fn feature_of(scheme: &str) -> Option<&'static str> {
    REMOTE
        .iter()
        .find(|(schemes, _, _, on)| schemes.contains(&scheme) && !on)
        .map(|(_, _, feature, _)| *feature)
}

/// The option namespaces of built-in backends whose feature is off, with that feature.
pub(crate) fn disabled_namespaces() -> Vec<(&'static str, &'static str)> {
    REMOTE
        .iter()
        .filter(|(_, _, _, on)| !on)
        .map(|(_, ns, feature, _)| (*ns, *feature))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_remote_table_matches_builtin_registrations() {
        let registered: Vec<&str> = builtin().into_iter().map(|(s, _)| s).collect();
        assert!(registered.contains(&"file") && registered.contains(&"memory"));
        for (schemes, ns, feature, on) in REMOTE {
            for scheme in schemes {
                // A scheme is registered exactly when its feature is on; otherwise the error
                // names the feature.
                assert_eq!(registered.contains(scheme), on, "{scheme}");
                assert_eq!(feature_of(scheme), (!on).then_some(feature), "{scheme}");
            }
            assert_eq!(disabled_namespaces().contains(&(ns, feature)), !on, "{ns}");
        }
        assert_eq!(feature_of("file"), None);
    }
}
