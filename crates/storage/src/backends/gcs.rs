//! `gs://bucket/prefix`: Google Cloud Storage, options `gs.*`.

use std::sync::Arc;

use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder};
use url::Url;

use crate::error::Result;
use crate::factory::StorageFactory;
use crate::location::{bucket_and_prefix, invalid};
use crate::object::ObjectStoreStorage;
use crate::options::{OptionSpec, StorageOptions};
use crate::storage::Storage;

/// The `gs.*` options.
const OPTIONS: [OptionSpec; 5] = [
    OptionSpec::plain("service-account-path"),
    OptionSpec::secret("service-account-key"),
    OptionSpec::plain("application-credentials"),
    OptionSpec::plain("anonymous"),
    OptionSpec::plain("ambient-credentials"),
];

/// Opens `gs://` locations.
pub(crate) struct GcsFactory;

impl StorageFactory for GcsFactory {
    fn option_namespace(&self) -> Option<&str> {
        Some("gs")
    }

    fn options(&self) -> &[OptionSpec] {
        &OPTIONS
    }

    fn open(&self, url: &Url, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
        let (bucket, prefix) = bucket_and_prefix(url)?;
        Ok(Arc::new(ObjectStoreStorage::gcs(
            &bucket, &prefix, options,
        )?))
    }
}

impl ObjectStoreStorage {
    /// A storage over Google Cloud Storage bucket `bucket` rooted at `prefix` (may be empty),
    /// configured from the `gs.*` keys of `options`, with conditional writes (object_store's
    /// generation preconditions). Credentials: `gs.service-account-path` (a JSON key file),
    /// `gs.service-account-key` (its contents), `gs.application-credentials` (an application
    /// default credentials file), `gs.anonymous=true` (unsigned requests) or
    /// `gs.ambient-credentials=true` (object_store's application-default lookup and the
    /// metadata server). Without any, opening fails rather than guessing. Not exercised against
    /// a server by arbor's tests.
    pub fn gcs(bucket: &str, prefix: &str, options: &StorageOptions) -> Result<Self> {
        let store = build_gcs(bucket, options)?;
        let prefix = prefix.trim_matches('/');
        let url = if prefix.is_empty() {
            format!("gs://{bucket}")
        } else {
            format!("gs://{bucket}/{prefix}")
        };
        Ok(Self::new(Arc::new(store), prefix, url)?.with_sorted_listing(true))
    }
}

/// Builds the GCS client for `bucket` from `options` alone.
fn build_gcs(bucket: &str, options: &StorageOptions) -> Result<GoogleCloudStorage> {
    let url = format!("gs://{bucket}");
    if bucket.is_empty() {
        return Err(invalid(&url, "missing bucket name"));
    }
    options.check_namespace("gs", &OPTIONS)?;
    let get = |name: &str| options.get(&format!("gs.{name}"));
    let flag = |name: &str| -> Result<bool> {
        Ok(options.get_bool(&format!("gs.{name}"))?.unwrap_or(false))
    };
    let mut b = GoogleCloudStorageBuilder::new().with_bucket_name(bucket);
    let mut credential = false;
    if let Some(path) = get("service-account-path") {
        b = b.with_service_account_path(path);
        credential = true;
    }
    if let Some(key) = get("service-account-key") {
        b = b.with_service_account_key(key);
        credential = true;
    }
    if let Some(path) = get("application-credentials") {
        b = b.with_application_credentials(path);
        credential = true;
    }
    if flag("anonymous")? {
        b = b.with_skip_signature(true);
        credential = true;
    }
    if !credential && !flag("ambient-credentials")? {
        return Err(invalid(
            &url,
            "no GCS credentials: set gs.service-account-path, gs.service-account-key, \
             gs.application-credentials, gs.anonymous=true or gs.ambient-credentials=true",
        ));
    }
    b.build().map_err(|e| invalid(&url, e.to_string()))
}

#[cfg(test)]
mod tests {
    use crate::{open_storage, StorageOptions};

    #[test]
    fn test_gcs_requires_explicit_credentials() {
        let err = open_storage("gs://b/p", &StorageOptions::default()).unwrap_err();
        assert!(err.to_string().contains("credentials"), "{err}");
        let o = StorageOptions::from_pairs([("gs.anonymous", "true")]).unwrap();
        let s = open_storage("gs://b/p/", &o).unwrap();
        assert_eq!(s.to_string(), "gs://b/p");
        assert!(StorageOptions::from_pairs([("gs.region", "x")]).is_err());
    }
}
