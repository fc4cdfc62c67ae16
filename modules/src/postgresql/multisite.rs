//! `MultisitePostgreSQLScore`: a primary on one site, streaming replicas on others.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use harmony::domain::capability::{
    CredentialsLookup, DistributedPostgreSQL, MemberRole, MultiSite, PostgreSQL, PostgresCluster,
    PrimaryExposure, ReplicationSource,
};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    InterpretError, Inventory, ObjectChange, Outcome, Score, Topology, ValidationError,
    report_progress,
};
use harmony::types::{Dns1123Label, HostName, Version};

use super::spec::ClusterSpec;

/// The replication status read and the apply's wait for streaming replicas.
mod health;
/// CloudNativePG's distributed topology: the live-primary check and the secrets' copies.
mod members;
/// The resource's spec types and their defaults.
mod resource;

pub use resource::{
    Exposure, MIN_MAJOR_FOR_PASSTHROUGH, MultisitePostgreSQL, MultisitePostgreSQLSpec, PrimarySite,
    ReplicaSite, SitesSpec,
};
use resource::{
    default_credentials_timeout, default_max_replica_lag_bytes, default_streaming_timeout,
    default_wal_keep_size,
};

/// A PostgreSQL cluster replicated across sites through CloudNativePG replica clusters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultisitePostgreSQLScore {
    /// The cluster's name on every site.
    pub name: String,
    /// Its namespace on every site.
    pub namespace: String,
    /// Everything else.
    pub spec: MultisitePostgreSQLSpec,
    /// Where status reads connect for a host (Route or load-balancer host) instead of resolving
    /// it; the TLS server name and the certificate check still use the host (as curl's
    /// `--connect-to`). For running Harmony where the sites' hosts do not resolve. Not part of
    /// the spec.
    #[serde(skip)]
    pub status_connect_to: BTreeMap<String, SocketAddr>,
}

impl MultisitePostgreSQLScore {
    /// The Score a `MultisitePostgreSQL` resource asks for (name and namespace from its metadata).
    pub fn from_resource(resource: &MultisitePostgreSQL) -> Self {
        Self {
            name: resource.metadata.name.clone().unwrap_or_default(),
            namespace: resource
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            spec: resource.spec.clone(),
            status_connect_to: BTreeMap::new(),
        }
    }

    /// The owners (ApplySet names) of what this Score applies, per step, the same on every
    /// site whatever its role (so a switchover never moves an object from one owner to
    /// another); cleanup deletes them. `cluster`: each site's `Cluster`; `exposure`: its Route or
    /// load balancer; `credentials`: the copies of the other sites' replication secrets. The last
    /// two, `primary` and `replica`, owned the `Cluster`s and copies before the distributed
    /// topology: they are listed so that cleanup also finds what they still hold.
    pub fn owners(&self) -> [String; 5] {
        let score = format!("MultisitePostgreSQL {}/{}", self.namespace, self.name);
        ["cluster", "exposure", "credentials", "primary", "replica"]
            .map(|step| format!("{score} {step}"))
    }
}

/// Everything the Interpret needs, checked.
struct Resolved {
    primary_site: String,
    replica_sites: Vec<String>,
    /// Per replica site, in order: its own exposure, when `topology.replicaHosts` names it.
    replica_exposures: Vec<Option<PrimaryExposure>>,
    primary: PostgresCluster,
    replica: PostgresCluster,
    source: ReplicationSource,
    timeout: Duration,
    /// How long an apply waits for streaming (`None`: it does not wait).
    streaming_wait: Option<Duration>,
    max_lag_bytes: u64,
}

impl MultisitePostgreSQLScore {
    /// A PostgreSQL 17 cluster exposed through a passthrough Route with host `host` on
    /// `primary_site`, replicated to each of `replica_sites`.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        storage: impl Into<String>,
        primary_site: impl Into<String>,
        host: impl Into<String>,
        replica_sites: &[&str],
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            spec: MultisitePostgreSQLSpec {
                cluster: ClusterSpec::new(storage),
                topology: SitesSpec {
                    primary: PrimarySite {
                        site: primary_site.into(),
                        host: Some(host.into()),
                        apps_domain: None,
                    },
                    replicas: replica_sites
                        .iter()
                        .map(|s| ReplicaSite {
                            site: s.to_string(),
                        })
                        .collect(),
                    replica_hosts: BTreeMap::new(),
                },
                exposure: Exposure::Route,
                wal_keep_size: default_wal_keep_size(),
                server_tls_secret: None,
                credentials_timeout_seconds: default_credentials_timeout(),
                wait_for_streaming: true,
                streaming_timeout_seconds: default_streaming_timeout(),
                max_replica_lag_bytes: default_max_replica_lag_bytes(),
            },
            status_connect_to: BTreeMap::new(),
        }
    }

    /// Whether the Route host comes from the primary site's ingress domain: a Route, and
    /// neither `host` nor `appsDomain` given.
    pub(crate) fn needs_site_domain(&self) -> bool {
        let p = &self.spec.topology.primary;
        p.host.is_none() && p.apps_domain.is_none() && self.spec.exposure == Exposure::Route
    }

    /// Resolves the Score against `topology`: when the Route host comes from the primary
    /// site's ingress domain, that site is asked for it (a read, nothing is applied).
    async fn resolve_on<T>(&self, topology: &T) -> Result<Resolved, InterpretError>
    where
        T: Topology + MultiSite,
        T::Site: PostgreSQL,
    {
        if !self.needs_site_domain() {
            return Ok(self.resolve()?);
        }
        let name = &self.spec.topology.primary.site;
        topology.check_site("topology.primary.site", name)?;
        let domain = site(topology, name)?.ingress_domain().await.map_err(|source| {
            InterpretError::Capability {
                action: format!("reading the ingress domain of site {name} for the Route host (topology.primary.host or appsDomain skips this)"),
                applied: Vec::new(),
                source,
            }
        })?;
        Ok(self.resolve_with(domain.as_deref())?)
    }

    /// `site_domain`: the primary site's ingress domain, when it was read and it has one.
    fn host(&self, site_domain: Option<&str>) -> Result<HostName, ValidationError> {
        let p = &self.spec.topology.primary;
        let (field, text) = match (&p.host, &p.apps_domain, self.spec.exposure) {
            (Some(h), _, _) => ("topology.primary.host", h.clone()),
            (None, Some(d), Exposure::Route) => (
                "topology.primary.appsDomain",
                format!("{}-{}.{d}", self.name, self.namespace),
            ),
            (None, None, Exposure::Route) => match site_domain.filter(|d| !d.is_empty()) {
                Some(d) => (
                    "topology.primary.host",
                    format!("{}-{}.{d}", self.name, self.namespace),
                ),
                None => {
                    return Err(ValidationError::new(
                        "topology.primary.host",
                        format!(
                            "neither host nor appsDomain is set, and site {:?} has no ingress domain to derive it from (OpenShift's ingresses.config.openshift.io/cluster .spec.domain)",
                            p.site
                        ),
                        "give the Route host (topology.primary.host) or the site's apps domain (topology.primary.appsDomain)",
                    ));
                }
            },
            (None, _, Exposure::LoadBalancer) => {
                return Err(ValidationError::new(
                    "topology.primary.host",
                    "is not set",
                    "give the DNS name that resolves to the primary's load balancer",
                ));
            }
        };
        if text.parse::<std::net::IpAddr>().is_ok() {
            return Err(ValidationError::new(
                field,
                format!(
                    "{text:?} is an IP address; verify-full checks the server certificate against a name, and a passthrough router routes by name (SNI)"
                ),
                "give the DNS name that resolves to the router or load balancer",
            ));
        }
        HostName::parse(&text).map_err(|e| {
            ValidationError::new(
                field,
                e.to_string(),
                "use a DNS name such as \"finance-db-tenant-a.apps.paris.example.com\" (not an IP: verify-full checks the name)",
            )
        })
    }

    /// Resolves what needs no site: a Route host from the primary site's ingress domain is
    /// missing here (see [`Self::resolve_on`]).
    fn resolve(&self) -> Result<Resolved, ValidationError> {
        self.resolve_with(None)
    }

    fn resolve_with(&self, site_domain: Option<&str>) -> Result<Resolved, ValidationError> {
        let mut primary = self.spec.cluster.resolve(&self.name, &self.namespace)?;
        if self.spec.exposure == Exposure::Route
            && primary.major_version < MIN_MAJOR_FOR_PASSTHROUGH
        {
            return Err(ValidationError::new(
                "version",
                format!(
                    "PostgreSQL {} cannot replicate through an OpenShift passthrough Route: the router chooses the backend by the TLS SNI, and libpq before 17 first sends a plain SSLRequest that carries no SNI, so the replica's connection can never be routed",
                    primary.major_version
                ),
                "use version \"17\" or newer (replicas then connect with sslnegotiation=direct), or set exposure to \"loadBalancer\" to expose the primary through a LoadBalancer Service",
            ));
        }
        let wal = &self.spec.wal_keep_size;
        let digits = wal.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        if digits.is_empty()
            || !digits.chars().all(|c| c.is_ascii_digit())
            || !["", "kB", "MB", "GB", "TB"].contains(&&wal[digits.len()..])
            || digits.parse::<u64>().unwrap_or(0) == 0
        {
            return Err(ValidationError::new(
                "walKeepSize",
                format!("{wal:?} is not a positive PostgreSQL size"),
                "write it as PostgreSQL does, such as \"2GB\" or \"512MB\" (units kB, MB, GB, TB)",
            ));
        }
        if self.spec.server_tls_secret.is_some() {
            return Err(ValidationError::new(
                "serverTlsSecret",
                "the operator refuses serverAltDNSNames together with serverTLSSecret, and replicas need the Route host in the server certificate for verify-full",
                "remove serverTlsSecret: the operator then issues (and rotates) a server certificate that includes the host",
            ));
        }
        let primary_site = self.spec.topology.primary.site.clone();
        let site_label = Dns1123Label::parse(&primary_site).map_err(|e| {
            ValidationError::new(
                "topology.primary.site",
                e.to_string(),
                "name a site of the topology",
            )
        })?;
        if self.spec.topology.replicas.is_empty() {
            return Err(ValidationError::new(
                "topology.replicas",
                "is empty",
                "name at least one replica site (or use PostgreSQLScore for a single site)",
            ));
        }
        let mut seen = BTreeSet::new();
        let mut replica_sites = Vec::new();
        let mut replica_exposures = Vec::new();
        for (i, r) in self.spec.topology.replicas.iter().enumerate() {
            replica_exposures.push(health::replica_exposure(
                &r.site,
                self.spec.topology.replica_hosts.get(&r.site),
                self.spec.exposure,
            )?);
            let field = format!("topology.replicas[{i}].site");
            if r.site == primary_site {
                return Err(ValidationError::new(
                    field,
                    format!("{:?} is also the primary's site", r.site),
                    "put replicas on other sites than the primary (standbys on the primary's site come from instances)",
                ));
            }
            if !seen.insert(r.site.clone()) {
                return Err(ValidationError::new(
                    field,
                    format!("{:?} is listed twice", r.site),
                    "list each replica site once",
                ));
            }
            replica_sites.push(r.site.clone());
        }
        health::check_replica_hosts(&self.spec.topology)?;
        let host = self.host(site_domain)?;
        let exposure = match self.spec.exposure {
            Exposure::Route => PrimaryExposure::PassthroughRoute { host: host.clone() },
            Exposure::LoadBalancer => PrimaryExposure::LoadBalancer { host: host.clone() },
        };
        let source_name = format!("{}-{site_label}", self.name);
        let source = ReplicationSource {
            name: Dns1123Label::parse(&source_name).map_err(|e| {
                ValidationError::new(
                    "topology.primary.site",
                    format!("the replication source name {source_name:?} is invalid: {e}"),
                    "shorten the cluster or site name (together at most 62 characters)",
                )
            })?,
            primary: primary.name.clone(),
            exposure,
        };
        primary.wal_keep_size = Some(wal.clone());
        let replica = primary.clone();
        primary.server_alt_dns_names = vec![host];
        Ok(Resolved {
            primary_site,
            replica_sites,
            primary,
            replica,
            source,
            timeout: Duration::from_secs(self.spec.credentials_timeout_seconds),
            streaming_wait: self
                .spec
                .wait_for_streaming
                .then(|| Duration::from_secs(self.spec.streaming_timeout_seconds)),
            max_lag_bytes: self.spec.max_replica_lag_bytes,
            replica_exposures,
        })
    }
}

impl<T> Score<T> for MultisitePostgreSQLScore
where
    T: Topology + MultiSite + 'static,
    T::Site: PostgreSQL + DistributedPostgreSQL,
{
    fn name(&self) -> String {
        format!("MultisitePostgreSQL {}/{}", self.namespace, self.name)
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn validate(&self) -> Result<(), ValidationError> {
        // A host from the site's ingress domain is read at run time; every other rule
        // (including the host's shape) is checked now, on a stand-in domain.
        let stand_in = self.needs_site_domain().then_some("ingress-domain.invalid");
        self.resolve_with(stand_in).map(|_| ())
    }

    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        topology.check_site("topology.primary.site", &self.spec.topology.primary.site)?;
        for (i, r) in self.spec.topology.replicas.iter().enumerate() {
            topology.check_site(&format!("topology.replicas[{i}].site"), &r.site)?;
        }
        Ok(())
    }
}

/// The site named `name`; validation has checked it exists, so a miss is a changed topology.
fn site<'a, T: MultiSite>(topology: &'a T, name: &str) -> Result<&'a T::Site, ValidationError> {
    topology.site(name).ok_or_else(|| {
        ValidationError::new(
            "topology",
            format!("site {name:?} disappeared during the run"),
            "keep the topology's sites fixed while Scores run",
        )
    })
}

/// Prefixes each change's location with its site, so a report over several sites reads clearly.
fn on_site(site: &str, changes: Vec<ObjectChange>) -> Vec<ObjectChange> {
    changes
        .into_iter()
        .map(|mut c| {
            c.location = Some(match c.location.take() {
                Some(l) => format!("{site} @ {l}"),
                None => site.to_string(),
            });
            c
        })
        .collect()
}

#[async_trait]
impl<T> Interpret<T> for MultisitePostgreSQLScore
where
    T: Topology + MultiSite + 'static,
    T::Site: PostgreSQL + DistributedPostgreSQL,
{
    fn name(&self) -> InterpretName {
        InterpretName("MultisitePostgreSQL")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        self.validate_on(topology)?;
        let r = self.resolve_on(topology).await?;
        let cluster = members::distributed(&r)?;
        let [owner_cluster, owner_exposure, owner_credentials, ..] = self.owners();
        let fail = |action: String, applied: &[ObjectChange], more: Vec<ObjectChange>, source| {
            InterpretError::Capability {
                action,
                applied: [applied.to_vec(), more].concat(),
                source,
            }
        };
        let primary = site(topology, &r.primary_site)?;
        let mut changes: Vec<ObjectChange> = Vec::new();

        primary
            .check_exposure(&r.primary, &r.source.exposure)
            .await
            .map_err(|e| {
                fail(
                    format!(
                        "checking how site {} can expose the primary",
                        r.primary_site
                    ),
                    &[],
                    Vec::new(),
                    e,
                )
            })?;
        for (name, exposure) in r.replica_sites.iter().zip(&r.replica_exposures) {
            if let Some(e) = exposure {
                site(topology, name)?
                    .check_exposure(&r.replica, e)
                    .await
                    .map_err(|e| {
                        fail(
                            format!("checking how site {name} can expose its replica"),
                            &[],
                            Vec::new(),
                            e,
                        )
                    })?;
            }
        }

        let live = members::live_states(self, &cluster, topology).await?;
        let role = MemberRole::primary_is(&r.primary_site);

        report_progress(format!("primary cluster on {}", r.primary_site));
        let applied = primary
            .apply_member(
                &cluster,
                &r.primary_site,
                &role,
                live.get(&r.primary_site),
                &owner_cluster,
            )
            .await
            .map_err(|f| {
                fail(
                    primary.mode().acting_on("the primary", &r.primary_site),
                    &changes,
                    on_site(&r.primary_site, f.applied),
                    f.error,
                )
            })?;
        changes.extend(on_site(&r.primary_site, applied));
        let applied = primary
            .expose_primary(&r.primary, &r.source.exposure, &owner_exposure)
            .await
            .map_err(|f| {
                fail(
                    primary
                        .mode()
                        .acting_on("the primary's exposure", &r.primary_site),
                    &changes,
                    on_site(&r.primary_site, f.applied),
                    f.error,
                )
            })?;
        changes.extend(on_site(&r.primary_site, applied));

        let lookup = primary
            .replication_credentials(&r.primary, r.timeout)
            .await
            .map_err(|e| {
                fail(
                    format!(
                        "waiting on {} for the operator's replication secrets",
                        r.primary_site
                    ),
                    &changes,
                    Vec::new(),
                    e,
                )
            })?;
        let (credentials, note) = match lookup {
            CredentialsLookup::Found(c) => (Some(c), None),
            CredentialsLookup::NotObservable(why) => (None, Some(why)),
        };

        for (i, name) in r.replica_sites.iter().enumerate() {
            report_progress(format!("replica cluster on {name}"));
            let replica = health::replica_cluster(&r, i);
            let mode = site(topology, name)?.mode();
            let applied = site(topology, name)?
                .apply_member(&cluster, name, &role, live.get(name), &owner_cluster)
                .await
                .map_err(|f| {
                    fail(
                        mode.acting_on("the replica", name),
                        &changes,
                        on_site(name, f.applied),
                        f.error,
                    )
                })?;
            changes.extend(on_site(name, applied));
            if let Some(e) = &r.replica_exposures[i] {
                let applied = site(topology, name)?
                    .expose_primary(&replica, e, &owner_exposure)
                    .await
                    .map_err(|f| {
                        fail(
                            mode.acting_on("the replica's exposure", name),
                            &changes,
                            on_site(name, f.applied),
                            f.error,
                        )
                    })?;
                changes.extend(on_site(name, applied));
            }
        }

        let missing = members::copy_credentials(
            &r,
            &cluster,
            topology,
            credentials,
            &owner_credentials,
            &mut changes,
        )
        .await?;
        let (replication, figures) = health::verify(self, &r, topology, &changes).await?;
        let mut outcome = Outcome::from_changes(changes);
        let exposure = &r.source.exposure;
        outcome.details.push(format!(
            "replicas on {} stream from {}:{} as streaming_replica (sslmode=verify-full{})",
            r.replica_sites.join(", "),
            exposure.host(),
            exposure.port(),
            if exposure.needs_direct_tls() {
                ", sslnegotiation=direct"
            } else {
                ""
            }
        ));
        if self.needs_site_domain() {
            outcome.details.push(format!(
                "Route host {} derived from the ingress domain of site {} (ingresses.config.openshift.io/cluster)",
                exposure.host(),
                r.primary_site
            ));
        }
        for why in note.into_iter().chain(missing) {
            outcome
                .details
                .push(format!("replication secrets not copied: {why}"));
        }
        outcome.details.extend(replication);
        if let Some(report) = figures {
            // The same figures as the table, for machines: the JSON report's `data`.
            match serde_json::to_value(&report) {
                Ok(value) => outcome = outcome.with_data(serde_json::json!({"replication": value})),
                Err(e) => log::warn!("the replication figures could not be encoded: {e}"),
            }
        }
        Ok(outcome)
    }
}
