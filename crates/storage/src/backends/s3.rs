//! `s3://bucket/prefix` (and `s3a://`): S3 or an S3-compatible server, options `s3.*`.

use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};
use url::Url;

use crate::error::Result;
use crate::factory::StorageFactory;
use crate::location::{bucket_and_prefix, invalid};
use crate::object::ObjectStoreStorage;
use crate::options::{OptionSpec, StorageOptions};
use crate::storage::Storage;

/// The `s3.*` options.
const OPTIONS: [OptionSpec; 9] = [
    OptionSpec::plain("endpoint"),
    OptionSpec::plain("region"),
    OptionSpec::plain("access-key-id"),
    OptionSpec::secret("secret-access-key"),
    OptionSpec::secret("session-token"),
    OptionSpec::plain("allow-http"),
    OptionSpec::plain("virtual-hosted-style"),
    OptionSpec::plain("anonymous"),
    OptionSpec::plain("ambient-credentials"),
];

/// Opens `s3://` and `s3a://` locations.
pub(crate) struct S3Factory;

impl StorageFactory for S3Factory {
    fn option_namespace(&self) -> Option<&str> {
        Some("s3")
    }

    fn options(&self) -> &[OptionSpec] {
        &OPTIONS
    }

    fn open(&self, url: &Url, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
        let (bucket, prefix) = bucket_and_prefix(url)?;
        Ok(Arc::new(ObjectStoreStorage::s3(&bucket, &prefix, options)?))
    }
}

impl ObjectStoreStorage {
    /// A storage over S3 bucket `bucket` rooted at `prefix` (may be empty), configured from the
    /// `s3.*` keys of `options` alone (nothing is read from the environment), path-style by
    /// default, with conditional writes (`If-None-Match: *` / `If-Match: <etag>`).
    ///
    /// Credentials: `s3.access-key-id` and `s3.secret-access-key` (and `s3.session-token` for
    /// temporary credentials), or `s3.anonymous=true` for unsigned requests, or
    /// `s3.ambient-credentials=true` for the instance/container metadata service. Without any of
    /// these, opening fails rather than guessing. `s3.region` defaults to `us-east-1`; a plain
    /// `http://` `s3.endpoint` needs `s3.allow-http=true`.
    pub fn s3(bucket: &str, prefix: &str, options: &StorageOptions) -> Result<Self> {
        let store = build_s3(bucket, options)?;
        let prefix = prefix.trim_matches('/');
        let url = if prefix.is_empty() {
            format!("s3://{bucket}")
        } else {
            format!("s3://{bucket}/{prefix}")
        };
        Ok(Self::new(Arc::new(store), prefix, url)?.with_sorted_listing(true))
    }
}

/// Builds the S3 client for `bucket` from `options` alone.
fn build_s3(bucket: &str, options: &StorageOptions) -> Result<AmazonS3> {
    let url = format!("s3://{bucket}");
    if bucket.is_empty() {
        return Err(invalid(&url, "missing bucket name"));
    }
    options.check_namespace("s3", &OPTIONS)?;
    let flag = |name: &str| -> Result<bool> {
        Ok(options.get_bool(&format!("s3.{name}"))?.unwrap_or(false))
    };
    let allow_http = flag("allow-http")?;
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(options.get("s3.region").unwrap_or("us-east-1"))
        .with_allow_http(allow_http)
        .with_virtual_hosted_style_request(flag("virtual-hosted-style")?)
        .with_conditional_put(S3ConditionalPut::ETagMatch);
    if let Some(endpoint) = options.get("s3.endpoint") {
        if endpoint.starts_with("http://") && !allow_http {
            return Err(invalid(
                &url,
                format!("endpoint {endpoint} is plain http but s3.allow-http is not set"),
            ));
        }
        b = b.with_endpoint(endpoint);
    }
    match (
        options.get("s3.access-key-id"),
        options.get("s3.secret-access-key"),
    ) {
        (Some(id), Some(secret)) => {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
            if let Some(token) = options.get("s3.session-token") {
                b = b.with_token(token);
            }
        }
        (None, None) if flag("anonymous")? => b = b.with_skip_signature(true),
        (None, None) if flag("ambient-credentials")? => {}
        (None, None) => {
            return Err(invalid(
                &url,
                "no S3 credentials: set s3.access-key-id and s3.secret-access-key, or \
                 s3.anonymous=true, or s3.ambient-credentials=true",
            ))
        }
        _ => {
            return Err(invalid(
                &url,
                "s3.access-key-id and s3.secret-access-key must be given together",
            ))
        }
    }
    b.build().map_err(|e| invalid(&url, e.to_string()))
}

#[cfg(test)]
mod tests {
    use crate::{open_storage, StorageOptions};

    #[test]
    fn test_from_pairs() {
        let o = StorageOptions::from_pairs([
            ("s3.endpoint", "http://127.0.0.1:5055"),
            ("s3.region", "eu-west-1"),
            ("s3.access-key-id", "id"),
            ("S3.SECRET_ACCESS_KEY", "secret"),
            ("s3.allow-http", "true"),
            ("s3.virtual-hosted-style", "0"),
        ])
        .unwrap();
        assert_eq!(o.get("s3.endpoint"), Some("http://127.0.0.1:5055"));
        assert_eq!(o.get("s3.region"), Some("eu-west-1"));
        assert_eq!(o.get("s3.access-key-id"), Some("id"));
        assert_eq!(o.get("s3.secret-access-key"), Some("secret"));
        assert_eq!(o.get_bool("s3.allow-http").unwrap(), Some(true));
        assert_eq!(o.get_bool("s3.virtual-hosted-style").unwrap(), Some(false));
        assert!(!format!("{o:?}").contains("secret\""), "{o:?}");
        let err = StorageOptions::from_pairs([("s3.bogus", "1")]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("s3.bogus") && msg.contains("s3.endpoint"),
            "{msg}"
        );
        // A bad boolean fails when the backend reads it, naming the key.
        let o = StorageOptions::from_pairs([("s3.allow-http", "maybe"), ("s3.anonymous", "1")])
            .unwrap();
        let err = open_storage("s3://b", &o).unwrap_err();
        assert!(err.to_string().contains("s3.allow-http"), "{err}");
    }

    #[test]
    fn test_s3_requires_explicit_credentials() {
        let err = open_storage("s3://b/p", &StorageOptions::default()).unwrap_err();
        assert!(err.to_string().contains("credentials"), "{err}");
        let opts =
            |pairs: &[(&str, &str)]| StorageOptions::from_pairs(pairs.iter().copied()).unwrap();
        let base = [
            ("s3.endpoint", "http://127.0.0.1:1"),
            ("s3.access-key-id", "a"),
            ("s3.secret-access-key", "b"),
        ];
        let err = open_storage("s3://b/p", &opts(&base)).unwrap_err();
        assert!(err.to_string().contains("allow-http"), "{err}");
        let mut with_http = base.to_vec();
        with_http.push(("s3.allow-http", "true"));
        let s = open_storage("s3://b/p", &opts(&with_http)).unwrap();
        assert_eq!(s.to_string(), "s3://b/p");
        let s = open_storage("s3a://b/p/q/", &opts(&with_http)).unwrap();
        assert_eq!(s.to_string(), "s3://b/p/q");
        let half = [("s3.secret-access-key", "b")];
        assert!(open_storage("s3://b/p", &opts(&half)).is_err());
        let anon = [("s3.anonymous", "true")];
        assert!(open_storage("s3://b", &opts(&anon)).is_ok());
        assert!(open_storage("s3:///p", &opts(&anon)).is_err());
        assert!(open_storage("s3://b/a/../c", &opts(&anon)).is_err());
    }
}
