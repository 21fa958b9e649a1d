//! Key validation shared by every backend.

use crate::error::{Result, StorageError};

/// Checks that `key` is a relative, `/`-separated key with no empty, `.` or `..` segment and no
/// control character. The empty key is accepted only where `allow_empty` (listing the root).
pub fn validate_key(key: &str, allow_empty: bool) -> Result<()> {
    let bad = |reason: &str| {
        Err(StorageError::InvalidKey {
            path: key.to_string(),
            reason: reason.to_string(),
        })
    };
    if key.is_empty() {
        return if allow_empty {
            Ok(())
        } else {
            bad("empty key")
        };
    }
    if key.starts_with('/') {
        return bad("keys are relative to the storage root and must not start with '/'");
    }
    if key.chars().any(|c| c.is_control()) {
        return bad("control characters are not allowed");
    }
    for seg in key.split('/') {
        match seg {
            "" => return bad("empty path segment"),
            "." | ".." => return bad("'.' and '..' segments are not allowed"),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_validate_key_rejects_hostile_keys() {
        for k in ["../x", "a/../b", "/abs", "a//b", "a/", "./a", "a\nb"] {
            assert!(validate_key(k, false).is_err(), "{k:?} accepted");
        }
        assert!(validate_key("", false).is_err());
        assert!(validate_key("", true).is_ok());
        assert!(validate_key(".hoodie/timeline/1_2.commit", false).is_ok());
    }
}
