//! Who uses what, for the status page: each tenant's caps, its projects' quotas per region and,
//! per zone, the quota's use as the zone's agent last reported it (the ResourceQuota status of
//! the project's namespace, in the heartbeat's `status.quotas`, stored with the session row), or
//! why the use is not known.
//!
//! A tenant's overview is built from its own tenant record and projects only: another tenant's
//! namespaces in the agents' reports are never looked at.

use harmony_agent_protocol::Hello;
use harmony_agent_protocol::quota_use::QuotaReport;
use harmony_agent_protocol::tenancy::ProjectQuota;
use std::collections::{BTreeMap, BTreeSet};

use super::ControlPlane;
use super::health::status_of;
use super::zones::Snapshot;
use crate::store::{ProjectRecord, SessionRecord, StoreError, TenantRecord};

/// The tenants a caller may see, with their projects' quotas and use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenancyOverview {
    /// The tenants (the admin: every one; a tenant: itself), by name.
    pub tenants: Vec<TenantUse>,
}

/// One tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantUse {
    /// Its name.
    pub tenant: String,
    /// Its caps by region.
    pub caps: BTreeMap<String, ProjectQuota>,
    /// Its projects, by name.
    pub projects: Vec<ProjectUse>,
}

/// One project.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectUse {
    /// Its name.
    pub project: String,
    /// Its namespace (the same in every region).
    pub namespace: String,
    /// The regions it has a quota in, by name.
    pub regions: Vec<RegionUse>,
}

/// A project's quota in one region and its use in each of the region's active zones.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionUse {
    /// The region.
    pub region: String,
    /// The project's quota there (each zone's cluster enforces it on its own).
    pub quota: ProjectQuota,
    /// The region's active zones (none when the region is unknown or decommissioned).
    pub zones: Vec<ZoneUse>,
}

/// The use of a project's quota in one zone.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneUse {
    /// The zone.
    pub zone: String,
    /// What its agent said.
    pub usage: Usage,
}

/// What a zone's agent said of a project namespace's quota.
#[derive(Debug, Clone, PartialEq)]
pub enum Usage {
    /// The ResourceQuota's status.
    Reported {
        /// `status.hard` (what the cluster enforces).
        hard: BTreeMap<String, String>,
        /// `status.used`.
        used: BTreeMap<String, String>,
        /// When the agent read it, ms since the Unix epoch.
        at: i64,
        /// Why the agent's later reads failed, when they did (then this is the last good one).
        stale: Option<String>,
    },
    /// No such namespace in the zone's cluster: the project has run nothing there yet (its
    /// namespace is made on its first request).
    NotPresent {
        /// When the agent looked, ms since the Unix epoch.
        at: i64,
        /// Why the agent's later reads failed, when they did.
        stale: Option<String>,
    },
    /// Not known.
    Unknown(Unknown),
}

/// Why a zone's use of a project's quota is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// No agent ever connected to the zone.
    NeverConnected,
    /// The zone's agent is not connected now.
    Disconnected {
        /// Its last heartbeat, ms since the Unix epoch.
        last_heartbeat: i64,
    },
    /// Connected, no heartbeat yet.
    NoHeartbeat,
    /// The agent's heartbeats carry no quota report (an older agent, or its first read is
    /// still to come).
    NotReported {
        /// The agent's version.
        agent_version: Option<String>,
    },
    /// The agent could never read the quotas.
    ReadFailed {
        /// Its reason (scrubbed and bounded by the protocol; for the admin only).
        error: String,
    },
    /// The agent's report stops before this namespace (it carries at most
    /// [`harmony_agent_protocol::quota_use::MAX_QUOTA_NAMESPACES`]).
    PastLimit,
    /// The namespace in the zone's cluster is labelled for another project.
    OtherLabels,
}

impl TenancyOverview {
    /// The regions where the overview's projects have a quota.
    pub fn regions(&self) -> BTreeSet<&str> {
        self.tenants
            .iter()
            .flat_map(|t| &t.projects)
            .flat_map(|p| &p.regions)
            .map(|r| r.region.as_str())
            .collect()
    }
}

/// The overview `tenant` sees (`None`: the admin, every tenant).
pub async fn read(cp: &ControlPlane, tenant: Option<&str>) -> Result<TenancyOverview, StoreError> {
    let tenants = match tenant {
        None => cp.store.tenants().await?,
        Some(t) => cp.store.tenant(t).await?.into_iter().collect(),
    };
    let projects = cp.store.projects(tenant).await?;
    let snap = Snapshot::read_live(cp).await?;
    Ok(overview(&tenants, &projects, &snap))
}

/// The overview of `tenants` and their `projects` (others' projects are ignored) from the
/// store's snapshot.
pub fn overview(
    tenants: &[TenantRecord],
    projects: &[ProjectRecord],
    snap: &Snapshot,
) -> TenancyOverview {
    let mut tenants: Vec<TenantUse> = tenants
        .iter()
        .map(|t| {
            let mut projects: Vec<ProjectUse> = projects
                .iter()
                .filter(|p| p.tenant == t.name)
                .map(|p| project_use(p, snap))
                .collect();
            projects.sort_by(|a, b| a.project.cmp(&b.project));
            TenantUse {
                tenant: t.name.clone(),
                caps: t.caps.clone(),
                projects,
            }
        })
        .collect();
    tenants.sort_by(|a, b| a.tenant.cmp(&b.tenant));
    TenancyOverview { tenants }
}

fn project_use(p: &ProjectRecord, snap: &Snapshot) -> ProjectUse {
    ProjectUse {
        project: p.project.clone(),
        namespace: p.namespace.clone(),
        regions: p
            .quotas
            .iter()
            .map(|(region, quota)| RegionUse {
                region: region.clone(),
                quota: quota.clone(),
                zones: snap
                    .zones
                    .iter()
                    .filter(|z| &z.region == region && z.decommissioned_at.is_none())
                    .map(|z| ZoneUse {
                        zone: z.zone.clone(),
                        usage: usage(p, snap.session(z)),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// What the session row of a zone's agent says of project `p`'s namespace.
pub fn usage(p: &ProjectRecord, session: Option<&SessionRecord>) -> Usage {
    let Some(s) = session else {
        return Usage::Unknown(Unknown::NeverConnected);
    };
    if !s.connected {
        return Usage::Unknown(Unknown::Disconnected {
            last_heartbeat: s.last_heartbeat_at,
        });
    }
    let Some(status) = status_of(s) else {
        return Usage::Unknown(Unknown::NoHeartbeat);
    };
    let Some(report) = status.quotas else {
        let hello: Option<Hello> = serde_json::from_str(&s.hello_json).ok();
        return Usage::Unknown(Unknown::NotReported {
            agent_version: hello.map(|h| h.agent_version),
        });
    };
    of_report(p, report)
}

fn of_report(p: &ProjectRecord, report: QuotaReport) -> Usage {
    if report.at == 0 {
        return Usage::Unknown(Unknown::ReadFailed {
            error: report.error.unwrap_or_default(),
        });
    }
    match report.namespace(&p.namespace) {
        Some(n) if n.tenant != p.tenant || n.project != p.project => {
            Usage::Unknown(Unknown::OtherLabels)
        }
        Some(n) => Usage::Reported {
            hard: n.hard.clone(),
            used: n.used.clone(),
            at: report.at,
            stale: report.error,
        },
        None if report.truncated => Usage::Unknown(Unknown::PastLimit),
        None => Usage::NotPresent {
            at: report.at,
            stale: report.error,
        },
    }
}

#[cfg(test)]
#[path = "tenancy_views_tests.rs"]
pub(crate) mod tests;
