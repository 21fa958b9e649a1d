//! Build-time only: no code. See this crate's `Cargo.toml` for why it exists.
