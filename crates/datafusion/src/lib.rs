//! `arbor-datafusion`: Hudi tables managed by arbor as DataFusion tables.
//!
//! [`ArborTableProvider`] reads main or a branch, at a tag, as of an instant, an incremental
//! range or read-optimized ([`ArborTableOptions`]); partitions are pruned by their path values
//! (exactly), file slices by the metadata table's partition and column stats and the record and
//! secondary indexes, parquet row groups by DataFusion; copy-on-write slices are read by
//! DataFusion's own parquet source, slices with log files merged by arbor in parallel
//! partitions ([`scan`]). `INSERT INTO` writes one commit per statement on main or a branch.
//! [`ArborTableFactory`] serves `CREATE EXTERNAL TABLE t STORED AS HUDI LOCATION '...'
//! OPTIONS ('branch' 'audit')`; [`arbor_session`] makes a session with it registered.
//!
//! ```no_run
//! # async fn example() -> datafusion::error::Result<()> {
//! use arbor_datafusion::arbor_session;
//! use datafusion::prelude::SessionConfig;
//!
//! let ctx = arbor_session(SessionConfig::new());
//! ctx.sql("CREATE EXTERNAL TABLE trips STORED AS HUDI LOCATION './trips' OPTIONS ('tag' 'v1')")
//!     .await?;
//! let rows = ctx.sql("SELECT city, count(*) FROM trips GROUP BY city").await?.collect().await?;
//! # Ok(()) }
//! ```

mod error;
mod exact_insert;
mod factory;
mod filters;
mod insert_rule;
pub mod object_store;
mod options;
mod provider;
pub mod scan;
mod sink;

pub use error::{ArborSqlError, Result};
pub use exact_insert::{exact_number_literals, ExactInsertCasts};
pub use factory::{arbor_session, register_arbor, ArborTableFactory, HUDI_FILE_TYPE};
pub use filters::to_partition_filters;
pub use insert_rule::RULE_NAME as EXACT_INSERT_RULE;
pub use options::{parse_write_operation, ArborTableOptions, TABLE_OPTION_KEYS};
pub use provider::ArborTableProvider;
pub use sink::ArborSink;
