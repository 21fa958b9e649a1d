//! `arbor-branching`: branches, tags, publication and shallow clones (RFC-116).
//!
//! It is not implemented yet (issue 6); it exports nothing so that no caller can mistake it for
//! working code.
