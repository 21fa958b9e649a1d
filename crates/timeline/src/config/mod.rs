//! `hoodie.properties`: the table config, with Hudi's checksum and atomic replacement.
//!
//! - [`Properties`] is an ordered `java.util.Properties` text codec (comments, `=`/`:`/space
//!   separators, backslash escapes, `\uXXXX`, line continuations; Java `Properties.store`
//!   escaping on output). Unknown keys are kept and the order of keys is preserved on rewrite.
//! - [`TableConfig`] is a validated set of properties: it always has a table name, a table type,
//!   a readable table version (6, 8 or 9), a timeline layout that fits the version and, when a
//!   checksum is stored, the right checksum. Typed accessors read the keys arbor needs.
//! - [`TableConfig::load`], [`TableConfig::create`], [`TableConfig::update`] and
//!   [`TableConfig::recover`] do the I/O, following Java's backup protocol so that a crash at
//!   any point leaves a loadable config.

mod builder;
mod io;
pub mod keys;
mod properties;
mod table;
mod values;

pub use builder::TableConfigBuilder;
pub use properties::{Properties, PropertiesSyntaxError};
pub use table::TableConfig;
pub use values::{
    table_checksum, BaseFileFormat, RecordMergeMode, TableType, TableVersion, TimelineTimezone,
};

/// Name of the table config file inside the meta directory (`.hoodie/`).
pub const PROPERTIES_FILE: &str = "hoodie.properties";

/// Name of the transient backup written while the config is being replaced.
pub const PROPERTIES_BACKUP_FILE: &str = "hoodie.properties.backup";

#[cfg(test)]
mod tests;
