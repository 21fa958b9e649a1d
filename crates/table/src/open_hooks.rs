//! What every open of main does first, shared by [`crate::Table`] and the reader.

use std::sync::Arc;

use arbor_storage::Storage;
use arbor_timeline::MetaRoot;

/// Main's config forgets the metadata partitions Java dropped at the root since (a restore on
/// a published table; [`arbor_timeline::legacy::adopt_java_dropped_metadata_partitions`]), best
/// effort: one that cannot now is adopted by the next state change.
pub(crate) async fn adopt_java_drops_on_open(storage: &Arc<dyn Storage>, main: &MetaRoot) {
    if let Err(e) =
        arbor_timeline::legacy::adopt_java_dropped_metadata_partitions(storage.as_ref(), main).await
    {
        tracing::warn!(error = %e, "could not adopt the metadata partitions Java dropped");
    }
}
