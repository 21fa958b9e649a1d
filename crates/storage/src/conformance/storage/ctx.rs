//! The context of one run of the storage conformance suite and its assertion helpers.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::StorageError;
use crate::storage::Storage;

pub(super) struct Ctx {
    pub(super) s: Arc<dyn Storage>,
    pub(super) name: String,
    pub(super) base: String,
}

impl Ctx {
    pub(super) fn key(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base)
    }
}

/// Panics naming the backend and the property.
macro_rules! check {
    ($ctx:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            panic!("[{}] {}", $ctx.name, format!($($fmt)+));
        }
    };
}
pub(super) use check;

/// Unwraps a result, panicking with the backend, the step and the error.
pub(super) fn ok<T>(ctx: &Ctx, what: &str, r: crate::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("[{}] {what} failed: {e}", ctx.name),
    }
}

pub(super) fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

pub(super) fn is_not_found<T>(r: &crate::Result<T>) -> bool {
    matches!(r, Err(StorageError::NotFound { .. }))
}
