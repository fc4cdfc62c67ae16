//! PostgreSQL Scores, written against the `PostgreSQL` capability (CloudNativePG on Kubernetes).
//!
//! - [`PostgreSQLScore`]: one cluster on one site;
//! - [`MultisitePostgreSQLScore`]: a primary on one site and replica clusters on others.
//!
//! User guide: `docs/modules/multisite_postgresql.md`.

mod multisite;
mod single;
mod spec;
mod status;

pub use multisite::{
    Exposure, MIN_MAJOR_FOR_PASSTHROUGH, MultisitePostgreSQL, MultisitePostgreSQLScore,
    MultisitePostgreSQLSpec, PrimarySite, ReplicaSite, SitesSpec,
};
pub use single::{PostgreSQLResource, PostgreSQLScore, PostgreSQLSpec};
pub use spec::{ClusterSpec, ResourceList, ResourcesSpec, SUPPORTED_MAJORS};
pub use status::{ResourceStatus, SiteState, StatusCondition};
