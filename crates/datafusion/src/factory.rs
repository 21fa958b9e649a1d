//! [`ArborTableFactory`]: `CREATE EXTERNAL TABLE t STORED AS HUDI LOCATION '...' OPTIONS (...)`,
//! and [`register_arbor`]/[`arbor_session`] to make a session that understands it.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::Result as DfResult;
use datafusion::datasource::TableProvider;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::CreateExternalTable;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::error::ArborSqlError;
use crate::exact_insert::ExactInsertCasts;
use crate::options::ArborTableOptions;
use crate::provider::ArborTableProvider;

/// The file type arbor's tables are created with: `STORED AS HUDI`.
pub const HUDI_FILE_TYPE: &str = "HUDI";

/// Makes an [`ArborTableProvider`] from `CREATE EXTERNAL TABLE ... STORED AS HUDI LOCATION
/// '<table>' [OPTIONS ('branch' 'audit', 'tag' 'v1', 'as_of' '...', 'incremental_start' '...',
/// 'incremental_end' '...', 'read_optimized' 'true', 'write_operation' 'insert',
/// 's3.endpoint' '...')]` ([`ArborTableOptions::from_map`]). The columns come from the table:
/// a statement that declares columns or partition columns is refused.
#[derive(Debug, Default)]
pub struct ArborTableFactory;

#[async_trait]
impl TableProviderFactory for ArborTableFactory {
    async fn create(
        &self,
        _state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> DfResult<Arc<dyn TableProvider>> {
        let location = match cmd.locations.as_slice() {
            [one] => one.clone(),
            other => {
                return Err(ArborSqlError::InvalidOption {
                    key: "LOCATION".to_string(),
                    reason: format!("a Hudi table has one location, given {}", other.len()),
                }
                .into())
            }
        };
        if !cmd.schema.fields().is_empty() || !cmd.table_partition_cols.is_empty() {
            return Err(ArborSqlError::InvalidOption {
                key: "columns".to_string(),
                reason: format!(
                    "{location}: the columns of a Hudi table come from the table; declare none \
                     (CREATE EXTERNAL TABLE {} STORED AS HUDI LOCATION '...')",
                    cmd.name
                ),
            }
            .into());
        }
        let options = ArborTableOptions::from_map(&cmd.options)?;
        Ok(Arc::new(
            ArborTableProvider::try_new(&location, options).await?,
        ))
    }
}

/// A session whose `CREATE EXTERNAL TABLE ... STORED AS HUDI` makes arbor tables, whose
/// `INSERT INTO` them converts values exactly ([`ExactInsertCasts`]), with DataFusion's
/// default functions and `config`.
pub fn arbor_session(config: SessionConfig) -> SessionContext {
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_analyzer_rule(Arc::new(ExactInsertCasts))
        .build();
    state
        .table_factories_mut()
        .insert(HUDI_FILE_TYPE.to_string(), Arc::new(ArborTableFactory));
    let ctx = SessionContext::new_with_state(state);
    ctx.register_udf(crate::exact_insert::NumberText::udf());
    ctx
}

/// Registers [`ArborTableFactory`] for `STORED AS HUDI` and [`ExactInsertCasts`] in an
/// existing session.
pub fn register_arbor(ctx: &SessionContext) {
    if !crate::insert_rule::is_registered(&ctx.state()) {
        ctx.add_analyzer_rule(Arc::new(ExactInsertCasts));
    }
    ctx.register_udf(crate::exact_insert::NumberText::udf());
    ctx.state_ref()
        .write()
        .table_factories_mut()
        .insert(HUDI_FILE_TYPE.to_string(), Arc::new(ArborTableFactory));
}
