//! Location strings: a plain path or a URL, and the `scheme://bucket/prefix` form of the object
//! stores.

use std::path::Path;

use url::Url;

use crate::error::{Result, StorageError};
use crate::path::validate_key;

/// An `InvalidLocation` error for `location`.
pub(crate) fn invalid(location: &str, reason: impl Into<String>) -> StorageError {
    StorageError::InvalidLocation {
        url: location.to_string(),
        reason: reason.into(),
    }
}

/// The URL of a location: a string without `://` is a local path (a relative one is resolved
/// against the current directory) and becomes a `file://` URL; anything else must parse as a URL.
/// Outside `file://`, `.`/`..` path segments are rejected rather than resolved (the URL parser
/// would silently drop them).
pub(crate) fn location_url(location: &str) -> Result<Url> {
    if location.trim().is_empty() {
        return Err(invalid(location, "empty location"));
    }
    let Some((scheme, rest)) = location.split_once("://") else {
        let path = Path::new(location);
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| invalid(location, format!("cannot resolve a relative path: {e}")))?
                .join(path)
        };
        return Url::from_file_path(&path)
            .map_err(|()| invalid(location, "not a usable local path"));
    };
    if !scheme.eq_ignore_ascii_case("file")
        && rest.split('/').skip(1).any(|s| s == "." || s == "..")
    {
        return Err(invalid(
            location,
            "bad prefix: `.` and `..` segments are not allowed",
        ));
    }
    Url::parse(location).map_err(|e| invalid(location, e.to_string()))
}

/// Splits an object-store URL `scheme://bucket/prefix/...` into the bucket (or container) and the
/// prefix (without leading or trailing `/`, percent-decoded, validated as a key; empty for the
/// bucket's root). A missing bucket, a port, user info, a query or a fragment is an
/// `InvalidLocation` error. For backends (built-in or plugins) whose locations have this form.
pub fn bucket_and_prefix(url: &Url) -> Result<(String, String)> {
    let scheme = url.scheme();
    let bucket = url.host_str().unwrap_or_default();
    if bucket.is_empty() {
        return Err(invalid(
            url.as_str(),
            format!("missing bucket name ({scheme}://bucket/prefix)"),
        ));
    }
    if url.port().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(invalid(
            url.as_str(),
            format!(
                "{scheme}:// takes only a bucket and a prefix (no port, user, query or fragment)"
            ),
        ));
    }
    let bucket = percent_decode(url.as_str(), bucket)?;
    let prefix = percent_decode(url.as_str(), url.path().trim_matches('/'))?;
    if !prefix.is_empty() {
        validate_key(&prefix, false)
            .map_err(|e| invalid(url.as_str(), format!("bad prefix: {e}")))?;
    }
    Ok((bucket, prefix))
}

/// Decodes `%XX` escapes (the URL parser encodes e.g. spaces); the result must be UTF-8.
fn percent_decode(url: &str, text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| invalid(url, format!("bad percent escape in {text:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(url, format!("{text:?} is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_location_url_of_paths() {
        assert_eq!(location_url("/tmp/t").unwrap().as_str(), "file:///tmp/t");
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            location_url("rel/t").unwrap().to_file_path().unwrap(),
            cwd.join("rel/t")
        );
        assert!(location_url("").is_err());
        assert!(location_url("s3://b/a/../c").is_err());
        assert!(location_url("s3://b/./c").is_err());
    }

    #[test]
    fn test_bucket_and_prefix() {
        let p = |s: &str| bucket_and_prefix(&Url::parse(s).unwrap());
        assert_eq!(p("s3://b/p/q/").unwrap(), ("b".into(), "p/q".into()));
        assert_eq!(p("s3://b").unwrap(), ("b".into(), String::new()));
        assert_eq!(
            p("az://c/my dir/t").unwrap(),
            ("c".into(), "my dir/t".into())
        );
        assert!(p("s3:///p").is_err());
        assert!(p("s3://b/a//c").is_err());
        assert!(p("s3://b:9/p").is_err());
        assert!(p("s3://b/p?x=1").is_err());
    }
}
