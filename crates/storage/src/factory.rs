//! [`open_storage`]: a [`Storage`] from a URL or path, with explicit [`StorageOptions`].

use std::fmt;
use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};

use crate::error::{Result, StorageError};
use crate::object::ObjectStoreStorage;
use crate::storage::Storage;

/// Options of the remote backends (today: S3). Nothing is ever taken from the environment: a
/// caller that wants `AWS_*` variables reads them itself and passes them here.
///
/// Credentials: give `access_key_id` and `secret_access_key` (and `session_token` for temporary
/// credentials), or set `anonymous` for unsigned requests, or `ambient_credentials` to let the
/// S3 client use the instance/container metadata service. Without any of these, opening an S3
/// location fails rather than guessing.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StorageOptions {
    /// Endpoint URL, e.g. `http://127.0.0.1:5055` for moto or MinIO; `None` for AWS.
    pub endpoint: Option<String>,
    /// Region; `us-east-1` when `None`.
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Session token of temporary credentials.
    pub session_token: Option<String>,
    /// Allow plain `http://` endpoints.
    pub allow_http: bool,
    /// Address buckets as `https://bucket.endpoint/` rather than `https://endpoint/bucket/`
    /// (path style, the default, which S3-compatible servers expect).
    pub virtual_hosted_style: bool,
    /// Send unsigned requests (public buckets).
    pub anonymous: bool,
    /// Use the instance/container metadata credentials when no keys are given.
    pub ambient_credentials: bool,
}

impl fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |o: &Option<String>| o.as_ref().map(|_| "<redacted>");
        f.debug_struct("StorageOptions")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &redact(&self.secret_access_key))
            .field("session_token", &redact(&self.session_token))
            .field("allow_http", &self.allow_http)
            .field("virtual_hosted_style", &self.virtual_hosted_style)
            .field("anonymous", &self.anonymous)
            .field("ambient_credentials", &self.ambient_credentials)
            .finish()
    }
}

impl StorageOptions {
    /// Options from `key = value` pairs (e.g. a config file or `--storage-option` flags).
    ///
    /// Keys (case-insensitive, `_` and `-` interchangeable): `s3.endpoint`, `s3.region`,
    /// `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token`, `s3.allow-http`,
    /// `s3.virtual-hosted-style`, `s3.anonymous`, `s3.ambient-credentials`. Booleans are
    /// `true`/`false`/`1`/`0`/`yes`/`no`. An unknown key or bad value is an `InvalidLocation`
    /// error naming it.
    pub fn from_pairs<I, K, V>(pairs: I) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut o = Self::default();
        for (k, v) in pairs {
            let (key, value) = (k.as_ref(), v.as_ref());
            let norm = key.trim().to_ascii_lowercase().replace('_', "-");
            let text = || Some(value.trim().to_string());
            match norm.as_str() {
                "s3.endpoint" => o.endpoint = text(),
                "s3.region" => o.region = text(),
                "s3.access-key-id" => o.access_key_id = text(),
                "s3.secret-access-key" => o.secret_access_key = text(),
                "s3.session-token" => o.session_token = text(),
                "s3.allow-http" => o.allow_http = parse_bool(key, value)?,
                "s3.virtual-hosted-style" => o.virtual_hosted_style = parse_bool(key, value)?,
                "s3.anonymous" => o.anonymous = parse_bool(key, value)?,
                "s3.ambient-credentials" => o.ambient_credentials = parse_bool(key, value)?,
                _ => {
                    return Err(StorageError::InvalidLocation {
                        url: key.to_string(),
                        reason: "unknown storage option (known: s3.endpoint, s3.region, \
                                 s3.access-key-id, s3.secret-access-key, s3.session-token, \
                                 s3.allow-http, s3.virtual-hosted-style, s3.anonymous, \
                                 s3.ambient-credentials)"
                            .to_string(),
                    })
                }
            }
        }
        Ok(o)
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(StorageError::InvalidLocation {
            url: key.to_string(),
            reason: format!("{value:?} is not a boolean (true/false)"),
        }),
    }
}

/// What a location string denotes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    Local(std::path::PathBuf),
    Memory,
    S3 { bucket: String, prefix: String },
}

fn invalid(location: &str, reason: impl Into<String>) -> StorageError {
    StorageError::InvalidLocation {
        url: location.to_string(),
        reason: reason.into(),
    }
}

fn parse_location(location: &str) -> Result<Location> {
    if location.trim().is_empty() {
        return Err(invalid(location, "empty location"));
    }
    let Some((scheme, rest)) = location.split_once("://") else {
        let path = std::path::Path::new(location);
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| invalid(location, format!("cannot resolve a relative path: {e}")))?
                .join(path)
        };
        return Ok(Location::Local(path));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "file" => {
            let url = url::Url::parse(location).map_err(|e| invalid(location, e.to_string()))?;
            let path = url.to_file_path().map_err(|()| {
                invalid(
                    location,
                    "not a local absolute file URL (use file:///absolute/path or a plain path)",
                )
            })?;
            Ok(Location::Local(path))
        }
        "memory" => {
            if rest.trim_matches('/').is_empty() {
                Ok(Location::Memory)
            } else {
                Err(invalid(location, "memory:// takes no bucket or path"))
            }
        }
        "s3" | "s3a" => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(invalid(
                    location,
                    "missing bucket name (s3://bucket/prefix)",
                ));
            }
            let prefix = prefix.trim_matches('/').to_string();
            if !prefix.is_empty() {
                crate::path::validate_key(&prefix, false)
                    .map_err(|e| invalid(location, format!("bad prefix: {e}")))?;
            }
            Ok(Location::S3 {
                bucket: bucket.to_string(),
                prefix,
            })
        }
        other => Err(invalid(
            location,
            format!("unknown scheme {other:?} (supported: file://, memory://, s3://, or a path)"),
        )),
    }
}

/// Opens the storage at `location`:
/// - a plain path (relative paths are resolved against the current directory) or `file:///abs`:
///   the local file system (the directory is created if missing);
/// - `memory://`: a fresh in-memory store;
/// - `s3://bucket/prefix` (or `s3a://`): S3 or an S3-compatible server, configured only from
///   `options` (never from the environment), path-style by default, with conditional writes.
///
/// Any other scheme is an `InvalidLocation` error.
pub fn open_storage(location: &str, options: &StorageOptions) -> Result<Arc<dyn Storage>> {
    Ok(match parse_location(location)? {
        Location::Local(path) => Arc::new(ObjectStoreStorage::local(&path)?),
        Location::Memory => Arc::new(ObjectStoreStorage::memory()),
        Location::S3 { bucket, prefix } => {
            Arc::new(ObjectStoreStorage::s3(&bucket, &prefix, options)?)
        }
    })
}

/// Builds the S3 client for `bucket` from `options` alone.
pub(crate) fn build_s3(bucket: &str, options: &StorageOptions) -> Result<AmazonS3> {
    let url = format!("s3://{bucket}");
    if bucket.is_empty() {
        return Err(invalid(&url, "missing bucket name"));
    }
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(options.region.as_deref().unwrap_or("us-east-1"))
        .with_allow_http(options.allow_http)
        .with_virtual_hosted_style_request(options.virtual_hosted_style)
        .with_conditional_put(S3ConditionalPut::ETagMatch);
    if let Some(endpoint) = &options.endpoint {
        if endpoint.starts_with("http://") && !options.allow_http {
            return Err(invalid(
                &url,
                format!("endpoint {endpoint} is plain http but s3.allow-http is not set"),
            ));
        }
        b = b.with_endpoint(endpoint);
    }
    match (&options.access_key_id, &options.secret_access_key) {
        (Some(id), Some(secret)) => {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
            if let Some(token) = &options.session_token {
                b = b.with_token(token);
            }
        }
        (None, None) if options.anonymous => b = b.with_skip_signature(true),
        (None, None) if options.ambient_credentials => {}
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
    use super::*;

    #[test]
    fn test_parse_plain_and_file_paths() {
        assert_eq!(
            parse_location("/tmp/t").unwrap(),
            Location::Local("/tmp/t".into())
        );
        assert_eq!(
            parse_location("file:///tmp/t").unwrap(),
            Location::Local("/tmp/t".into())
        );
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            parse_location("rel/t").unwrap(),
            Location::Local(cwd.join("rel/t"))
        );
        assert!(parse_location("file://host/t").is_err());
        assert!(parse_location("").is_err());
    }

    #[test]
    fn test_parse_memory_and_s3() {
        assert_eq!(parse_location("memory://").unwrap(), Location::Memory);
        assert!(parse_location("memory://x").is_err());
        assert_eq!(
            parse_location("s3://b/p/q/").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                prefix: "p/q".into()
            }
        );
        assert_eq!(
            parse_location("s3://b").unwrap(),
            Location::S3 {
                bucket: "b".into(),
                prefix: String::new()
            }
        );
        assert!(parse_location("s3:///p").is_err());
        assert!(parse_location("s3://b/a/../c").is_err());
    }

    #[test]
    fn test_unknown_scheme_is_invalid_location() {
        let err = open_storage("gs://b/p", &StorageOptions::default()).unwrap_err();
        assert!(matches!(err, StorageError::InvalidLocation { .. }), "{err}");
    }

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
        assert_eq!(o.endpoint.as_deref(), Some("http://127.0.0.1:5055"));
        assert_eq!(o.region.as_deref(), Some("eu-west-1"));
        assert_eq!(o.access_key_id.as_deref(), Some("id"));
        assert_eq!(o.secret_access_key.as_deref(), Some("secret"));
        assert!(o.allow_http);
        assert!(!o.virtual_hosted_style);
        assert!(!format!("{o:?}").contains("secret\""), "{o:?}");
        assert!(StorageOptions::from_pairs([("s3.bogus", "1")]).is_err());
        assert!(StorageOptions::from_pairs([("s3.allow-http", "maybe")]).is_err());
    }

    #[test]
    fn test_s3_requires_explicit_credentials() {
        let err = open_storage("s3://b/p", &StorageOptions::default()).unwrap_err();
        assert!(err.to_string().contains("credentials"), "{err}");
        let mut o = StorageOptions {
            endpoint: Some("http://127.0.0.1:1".into()),
            access_key_id: Some("a".into()),
            secret_access_key: Some("b".into()),
            ..Default::default()
        };
        let err = open_storage("s3://b/p", &o).unwrap_err();
        assert!(err.to_string().contains("allow-http"), "{err}");
        o.allow_http = true;
        let s = open_storage("s3://b/p", &o).unwrap();
        assert_eq!(s.to_string(), "s3://b/p");
        o.access_key_id = None;
        assert!(open_storage("s3://b/p", &o).is_err());
        o.secret_access_key = None;
        o.anonymous = true;
        assert!(open_storage("s3://b", &o).is_ok());
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
    }
}
