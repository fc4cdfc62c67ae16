//! Zones: where in a region things go. Each zone of a region is a cluster with its own agent,
//! session and request queue. A request names a zone, or its objects' `harmony.io/zone` label
//! does, or placement picks one (healthy, then unhealthy, then the first); a service instance
//! goes to its parent's zone, or to the zone placement picks in its region. Objects and
//! children labelled (or parented) for another region or zone are refused (containment).

use harmony_agent_protocol::{Hello, Services};
use harmony_api::{Health, ZoneView};
use std::collections::HashMap;
use std::sync::OnceLock;

use super::ControlPlane;
use super::health::HealthPolicy;
use super::health::status_of;
use super::placement::RegionOffers;
use super::zone_states;
use crate::store::{RegionRecord, SessionRecord, StoreError, ZoneRecord, ZoneState, now_ms};

/// What the store says of each zone now: zone records, session rows and unanswered counts.
pub struct Snapshot {
    /// Every zone, by region, first zones first.
    pub zones: Vec<ZoneRecord>,
    /// Session rows by (region, zone).
    pub sessions: HashMap<(String, String), SessionRecord>,
    /// Unanswered requests by (region, zone).
    pub pending: HashMap<(String, String), u64>,
    /// Stored health transitions by (region, zone) (read with the request counts only).
    pub states: HashMap<(String, String), ZoneState>,
    /// Positions in `zones` by region, built on the first [`Snapshot::zones_of`] (so `zones`
    /// must not change after it): describing every region is then linear, not quadratic (at
    /// 100,000 regions a scan of every zone per region kept a listing busy for minutes).
    pub by_region: OnceLock<HashMap<String, Vec<usize>>>,
}

impl Snapshot {
    /// Reads zones and sessions only (no request counts), for placement.
    pub async fn read_live(cp: &ControlPlane) -> Result<Self, StoreError> {
        let sessions = cp
            .store
            .sessions()
            .await?
            .into_iter()
            .map(|s| ((s.region.clone(), s.zone.clone()), s))
            .collect();
        Ok(Self {
            zones: cp.store.zones().await?,
            sessions,
            pending: HashMap::new(),
            states: HashMap::new(),
            by_region: OnceLock::new(),
        })
    }

    /// Reads one region's zones and sessions only: what placing a request in it needs. Two
    /// index lookups instead of every zone and session row (which, read for every request,
    /// held pooled connections long enough to exhaust the pool under 1,000 concurrent
    /// requests at 10,000 regions).
    pub async fn read_region(cp: &ControlPlane, region: &str) -> Result<Self, StoreError> {
        let sessions = cp
            .store
            .region_sessions(region)
            .await?
            .into_iter()
            .map(|s| ((s.region.clone(), s.zone.clone()), s))
            .collect();
        Ok(Self {
            zones: cp.store.region_zones(region).await?,
            sessions,
            pending: HashMap::new(),
            states: HashMap::new(),
            by_region: OnceLock::new(),
        })
    }

    /// Reads it from the store, with the unanswered request counts and the stored health
    /// transitions (read first: a transition is never newer than the sessions it is shown with).
    pub async fn read(cp: &ControlPlane) -> Result<Self, StoreError> {
        let states = zone_states::stored(cp).await?;
        let mut snap = Self::read_live(cp).await?;
        snap.pending = cp.store.unanswered_counts().await?;
        snap.states = states;
        Ok(snap)
    }

    /// The zones of `r`, first zone first (its record's zone when the store lists none).
    pub fn zones_of(&self, r: &RegionRecord) -> Vec<ZoneRecord> {
        let by_region = self.by_region.get_or_init(|| {
            let mut index: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, z) in self.zones.iter().enumerate() {
                index.entry(z.region.clone()).or_default().push(i);
            }
            index
        });
        let zones: Vec<ZoneRecord> = by_region
            .get(&r.name)
            .map(|at| at.iter().map(|&i| self.zones[i].clone()).collect())
            .unwrap_or_default();
        if zones.is_empty() {
            return vec![ZoneRecord {
                region: r.name.clone(),
                zone: r.zone.clone(),
                created_at: r.created_at,
                decommissioned_at: r.decommissioned_at,
                has_identity: r.has_identity,
                // A store without zone rows predates expiring identities' recovery: as issued.
                live_identity: r.has_identity,
            }];
        }
        zones
    }

    /// The session row of a zone.
    pub fn session(&self, z: &ZoneRecord) -> Option<&SessionRecord> {
        self.sessions.get(&(z.region.clone(), z.zone.clone()))
    }

    /// A zone's health now and the services its agent holds.
    pub fn health(
        &self,
        z: &ZoneRecord,
        now: i64,
        policy: &HealthPolicy,
    ) -> (Health, String, Services) {
        let o = zone_states::observe_zone(z, self.session(z), now, policy);
        let services = match self.session(z) {
            Some(s) if z.decommissioned_at.is_none() => super::health::session_services(s),
            _ => Services::default(),
        };
        (o.health, o.reason, services)
    }

    /// The zone placement picks in `r` now: the first healthy active zone, else the first
    /// unhealthy one, else the first active one; `None` when every zone is decommissioned.
    pub fn placement_zone(
        &self,
        r: &RegionRecord,
        now: i64,
        policy: &HealthPolicy,
    ) -> Option<ZoneRecord> {
        pick_zone(
            self.zones_of(r)
                .into_iter()
                .filter(|z| z.decommissioned_at.is_none())
                .map(|z| {
                    let h = self.health(&z, now, policy).0;
                    (z, h)
                }),
        )
    }
}

/// The first healthy zone, else the first unhealthy one, else the first one.
pub fn pick_zone<Z>(zones: impl IntoIterator<Item = (Z, Health)>) -> Option<Z> {
    let mut unhealthy = None;
    let mut first = None;
    for (z, h) in zones {
        match h {
            Health::Healthy => return Some(z),
            Health::Unhealthy if unhealthy.is_none() => unhealthy = Some(z),
            _ if first.is_none() => first = Some(z),
            _ => {}
        }
    }
    unhealthy.or(first)
}

/// The API view of one zone (admin fields included).
pub fn describe_zone(z: &ZoneRecord, snap: &Snapshot, now: i64, policy: &HealthPolicy) -> ZoneView {
    let session = snap.session(z);
    let observed = zone_states::observe_zone(z, session, now, policy);
    let stored = snap.states.get(&(z.region.clone(), z.zone.clone()));
    let health_since = zone_states::health_since(z, stored, &observed);
    let (health, health_reason) = (observed.health, observed.reason);
    let hello: Option<Hello> = session.and_then(|s| serde_json::from_str(&s.hello_json).ok());
    let status = session.and_then(status_of);
    let live = z.decommissioned_at.is_none();
    ZoneView {
        zone: z.zone.clone(),
        health,
        health_reason: Some(health_reason),
        connected: Some(live && session.is_some_and(|s| s.connected)),
        last_heartbeat: session.map(|s| s.last_heartbeat_at),
        agent_version: hello.as_ref().map(|h| h.agent_version.clone()),
        ops: Some(hello.map(|h| h.ops).unwrap_or_default()),
        node_count: status.as_ref().and_then(|s| s.node_count),
        capacity: status.as_ref().and_then(|s| s.allocatable.clone()),
        pending_requests: Some(
            snap.pending
                .get(&(z.region.clone(), z.zone.clone()))
                .copied()
                .unwrap_or(0) as usize,
        ),
        replica: session
            .filter(|s| live && s.connected)
            .map(|s| s.replica.clone()),
        decommissioned: Some(!live),
        decommissioned_at: z.decommissioned_at,
        health_since,
        agent_error: live.then(|| zone_states::agent_error(session)).flatten(),
        bootstrapped: Some(z.has_identity),
    }
}

/// What placement needs to know of every region now: each region as seen through the zone a
/// create would go to (the zone placement picks, or `pin`'s zone for its region: a child's
/// parent's zone).
pub async fn region_offers(
    cp: &ControlPlane,
    pin: Option<(&str, &str)>,
) -> Result<Vec<RegionOffers>, StoreError> {
    let counts = cp.store.live_services_by_region().await?;
    let snap = Snapshot::read_live(cp).await?;
    let now = now_ms();
    let policy = &cp.settings.policy;
    Ok(cp
        .store
        .regions()
        .await?
        .into_iter()
        .map(|r| {
            let zones = snap.zones_of(&r);
            let zone = match pin {
                Some((region, zone)) if region == r.name => {
                    zones.into_iter().find(|z| z.zone == zone)
                }
                _ => snap.placement_zone(&r, now, policy),
            };
            let (health, services, zone) = match zone {
                Some(z) => {
                    let (h, _, services) = snap.health(&z, now, policy);
                    (h, services, z.zone)
                }
                None => (Health::Unavailable, Default::default(), r.zone.clone()),
            };
            RegionOffers {
                live_instances: counts.get(&r.name).copied().unwrap_or(0),
                decommissioned: r.decommissioned_at.is_some(),
                name: r.name,
                zone,
                health,
                services,
            }
        })
        .collect())
}

/// The names of `zones`, comma-separated, for error messages.
pub fn zone_names(zones: &[ZoneRecord]) -> String {
    zones
        .iter()
        .filter(|z| z.decommissioned_at.is_none())
        .map(|z| z.zone.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
