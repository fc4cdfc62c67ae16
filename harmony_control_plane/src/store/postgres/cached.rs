//! Statements prepared once per pooled connection. A plain `query(&str)` makes tokio-postgres
//! prepare an unnamed statement on every call: a round trip, and PostgreSQL parsing and
//! planning the text again each time. Measured while 12,000 agents bootstrapped across 6
//! replicas, PostgreSQL took 64 % of the machine's CPU, much of it in the parser, the catalogue
//! caches and the planner. [`Cached`] asks deadpool's statement cache instead (kept per
//! connection, and across recycling with [`deadpool_postgres::RecyclingMethod::Fast`]), so a
//! statement is parsed once per connection and then only bound and executed.
//!
//! Every statement text is a constant or built from constants only, so each cache holds a
//! bounded set. DDL (`schema.rs`) and `LISTEN` (`events.rs`) are not prepared.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

/// `query`, `query_one`, `query_opt` and `execute` through the connection's statement cache,
/// for a pooled client or a transaction on one.
#[async_trait]
pub(super) trait Cached: GenericClient + Sync {
    /// Every row of `sql`.
    async fn query_cached(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query(&statement, params).await
    }

    /// Exactly one row of `sql` (an error otherwise).
    async fn query_one_cached(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query_one(&statement, params).await
    }

    /// At most one row of `sql`.
    async fn query_opt_cached(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query_opt(&statement, params).await
    }

    /// Runs `sql`; the rows it changed.
    async fn execute_cached(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        let statement = self.prepare_cached(sql).await?;
        self.execute(&statement, params).await
    }
}

impl<T: GenericClient + Sync + ?Sized> Cached for T {}
