//! The name of arbor's exact-INSERT analyzer rule and whether a session runs it (apart from
//! the rule itself, so that the provider can check without importing the rule).

use datafusion::catalog::Session;
use datafusion::execution::session_state::SessionState;

/// The name of [`crate::ExactInsertCasts`].
pub const RULE_NAME: &str = "arbor_exact_insert_casts";

/// Whether `state` runs [`crate::ExactInsertCasts`].
pub fn is_registered(state: &dyn Session) -> bool {
    state
        .as_any()
        .downcast_ref::<SessionState>()
        .is_some_and(|s| s.analyzer().rules.iter().any(|r| r.name() == RULE_NAME))
}
