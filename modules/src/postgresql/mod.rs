//! PostgreSQL Scores, written against the `PostgreSQL` capability (CloudNativePG on Kubernetes).
//!
//! - [`PostgreSQLScore`]: one cluster on one site;
//! - [`MultisitePostgreSQLScore`]: a primary on one site and replica clusters on others;
//! - [`PostgreSQLSwitchoverScore`]: moves the primary to another site without losing a write;
//! - [`PostgreSQLFailoverScore`]: promotes the most advanced replica when the primary is lost.
//!
//! User guide: `docs/modules/multisite_postgresql.md`.

mod failover;
#[allow(
    unreachable_pub,
    reason = "false positive: KubeSchema with x_kube(validation) copies SitesSpec and MultisitePostgreSQLSpec into a private item that keeps `pub` and drops item attributes; both are re-exported publicly below"
)]
mod multisite;
mod primary_change;
mod single;
mod spec;
mod status;
mod switchover;

pub use failover::PostgreSQLFailoverScore;
pub use multisite::{
    Exposure, MIN_MAJOR_FOR_PASSTHROUGH, MultisitePostgreSQL, MultisitePostgreSQLScore,
    MultisitePostgreSQLSpec, PrimarySite, ReplicaSite, SitesSpec,
};
pub use single::{PostgreSQLResource, PostgreSQLScore, PostgreSQLSpec};
pub use spec::{ClusterSpec, ResourceList, ResourcesSpec, SUPPORTED_MAJORS};
pub use status::{ResourceStatus, SiteState, StatusCondition};
pub use switchover::{
    DistributedCluster, DistributedPostgreSQL, LivePrimary, Member, MemberRole, MemberState,
    PostgreSQLSwitchoverScore, ReplicaShape, live_primary, member_name,
};
