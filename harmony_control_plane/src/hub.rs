//! Live state: one entry per region with its connection, heartbeat and request queue.
//!
//! A region's requests wait in its own queue; a slow or dead region only delays its own
//! callers. Delivery is at-least-once: a request stays queued until its `res` arrives and is
//! re-sent on every new connection of the region; the agent dedupes by id.

use harmony_agent_protocol::{AgentStatus, Frame, Hello, Req, Res, ServiceOffer, Services};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

use crate::store::now_ms;

/// Three-state health of a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Heartbeats on time and the agent reaches its cluster.
    Healthy,
    /// Connected but degraded, heartbeats late, or disconnected within the grace period.
    Unhealthy,
    /// No heartbeat past the threshold, or never connected.
    Unavailable,
}

/// Heartbeat interval and health thresholds.
#[derive(Debug, Clone, Copy)]
pub struct HealthPolicy {
    /// Interval the agents are told to heartbeat at.
    pub heartbeat: Duration,
    /// A heartbeat older than this makes a region unhealthy.
    pub unhealthy_after: Duration,
    /// A heartbeat older than this makes it unavailable.
    pub unavailable_after: Duration,
}

/// What to send to a connection's task.
#[derive(Debug)]
pub enum Outgoing {
    /// A frame.
    Frame(Frame),
    /// Close with a code and reason.
    Close(u16, String),
}

struct Connection {
    id: u64,
    tx: mpsc::UnboundedSender<Outgoing>,
}

struct Pending {
    req: Req,
    order: u64,
    waiters: Vec<oneshot::Sender<Res>>,
    deliveries: u32,
}

#[derive(Default)]
struct RegionLive {
    connection: Option<Connection>,
    hello: Option<Hello>,
    connected_at_ms: Option<i64>,
    last_heartbeat: Option<Instant>,
    last_heartbeat_ms: Option<i64>,
    status: AgentStatus,
    /// Whether the current connection has sent a heartbeat yet (it reports reachability).
    pinged: bool,
    pending: HashMap<String, Pending>,
    progress: u64,
    /// The latest `services` frame of the current connection (empty until it arrives).
    services: Services,
}

/// The live view of one region, as the API reports it.
#[derive(Debug, Clone, Serialize)]
pub struct LiveView {
    /// Health.
    pub health: Health,
    /// Why.
    pub health_reason: String,
    /// Whether an agent is connected now.
    pub connected: bool,
    /// When the current (or last) connection was welcomed, ms since epoch.
    pub connected_at: Option<i64>,
    /// Last heartbeat, ms since epoch.
    pub last_heartbeat: Option<i64>,
    /// The agent's version.
    pub agent_version: Option<String>,
    /// The ops it advertised.
    pub ops: Vec<String>,
    /// Whether it reaches its Kubernetes API.
    pub k8s_reachable: bool,
    /// Requests queued or executing.
    pub pending_requests: usize,
    /// The service types the agent holds, as its latest `services` frame listed them.
    pub services: Vec<ServiceOffer>,
    /// The types the region advertises now (region and offer healthy), sorted.
    pub advertised_services: Vec<String>,
}

/// Whether a region of `health` whose agent sent `services` advertises `service_type`: both the
/// region and the type's provider must be healthy.
pub fn advertises(health: Health, services: &Services, service_type: &str) -> bool {
    health == Health::Healthy
        && services
            .offers
            .iter()
            .any(|o| o.service_type == service_type && o.advertised())
}

/// Whether such a region holds `service_type` degraded: it is not unavailable, has an offer for
/// the type, and does not advertise it. Creates for a degraded type are queued, not refused.
pub fn holds_degraded(health: Health, services: &Services, service_type: &str) -> bool {
    health != Health::Unavailable
        && services
            .offers
            .iter()
            .any(|o| o.service_type == service_type)
        && !advertises(health, services, service_type)
}

/// The sorted types a region of `health` advertises.
pub fn advertised_types(health: Health, services: &Services) -> Vec<String> {
    let mut types: Vec<String> = services
        .offers
        .iter()
        .filter(|o| advertises(health, services, &o.service_type))
        .map(|o| o.service_type.clone())
        .collect();
    types.sort();
    types.dedup();
    types
}

/// All live regions.
pub struct Hub {
    regions: Mutex<HashMap<String, RegionLive>>,
    policy: HealthPolicy,
    next: Mutex<u64>,
}

/// Computes health from the last heartbeat (or welcome), connection and reachability.
pub fn health(
    now: Instant,
    connected: bool,
    last: Option<Instant>,
    k8s_reachable: bool,
    policy: &HealthPolicy,
) -> (Health, String) {
    let Some(last) = last else {
        return (Health::Unavailable, "no agent has connected yet".into());
    };
    let age = now.saturating_duration_since(last);
    let ms = age.as_millis();
    if age > policy.unavailable_after {
        let why = if connected {
            "connected but silent"
        } else {
            "disconnected"
        };
        return (
            Health::Unavailable,
            format!(
                "{why}: no heartbeat for {ms} ms (threshold {} ms)",
                policy.unavailable_after.as_millis()
            ),
        );
    }
    if !connected {
        return (
            Health::Unhealthy,
            format!(
                "disconnected, last heartbeat {ms} ms ago; unavailable after {} ms",
                policy.unavailable_after.as_millis()
            ),
        );
    }
    if age > policy.unhealthy_after {
        return (
            Health::Unhealthy,
            format!(
                "heartbeat late: {ms} ms (threshold {} ms)",
                policy.unhealthy_after.as_millis()
            ),
        );
    }
    if !k8s_reachable {
        return (
            Health::Unhealthy,
            "the agent cannot reach its Kubernetes API server".into(),
        );
    }
    (Health::Healthy, "heartbeats on time".into())
}

impl Hub {
    /// An empty hub.
    pub fn new(policy: HealthPolicy) -> Self {
        Self {
            regions: Mutex::new(HashMap::new()),
            policy,
            next: Mutex::new(0),
        }
    }

    /// The health policy.
    pub fn policy(&self) -> &HealthPolicy {
        &self.policy
    }

    fn next_id(&self) -> u64 {
        let mut n = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *n += 1;
        *n
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RegionLive>> {
        self.regions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a welcomed connection for `region`, replacing (closing) any previous one, and
    /// re-sends every queued request in order. Returns the connection id.
    pub fn connect(&self, region: &str, hello: Hello, tx: mpsc::UnboundedSender<Outgoing>) -> u64 {
        let id = self.next_id();
        let mut regions = self.lock();
        let live = regions.entry(region.to_string()).or_default();
        if let Some(old) = live.connection.take() {
            let _ = old.tx.send(Outgoing::Close(
                harmony_agent_protocol::close::REPLACED,
                "a newer connection of this region replaced this one".into(),
            ));
        }
        let mut queued: Vec<&mut Pending> = live.pending.values_mut().collect();
        queued.sort_by_key(|p| p.order);
        for p in queued {
            p.deliveries += 1;
            let _ = tx.send(Outgoing::Frame(Frame::Req(p.req.clone())));
        }
        live.connection = Some(Connection { id, tx });
        live.hello = Some(hello);
        live.connected_at_ms = Some(now_ms());
        live.last_heartbeat = Some(Instant::now());
        live.last_heartbeat_ms = Some(now_ms());
        // Healthy needs the agent to report its cluster reachable, which its first ping does.
        live.status = AgentStatus::default();
        live.pinged = false;
        // Offers of the previous connection may be stale: nothing is advertised until the
        // agent's first `services` frame of this connection.
        live.services = Services::default();
        id
    }

    /// Forgets connection `conn` of `region` if it is still the current one.
    pub fn disconnect(&self, region: &str, conn: u64) {
        let mut regions = self.lock();
        if let Some(live) = regions.get_mut(region)
            && live.connection.as_ref().is_some_and(|c| c.id == conn)
        {
            live.connection = None;
        }
    }

    /// Records a heartbeat.
    pub fn heartbeat(&self, region: &str, status: AgentStatus) {
        let mut regions = self.lock();
        if let Some(live) = regions.get_mut(region) {
            live.last_heartbeat = Some(Instant::now());
            live.last_heartbeat_ms = Some(now_ms());
            live.status = status;
            live.pinged = true;
        }
    }

    /// Stores the latest `services` frame of `region`; `true` when it differs from the last one.
    pub fn set_services(&self, region: &str, services: Services) -> bool {
        let mut regions = self.lock();
        let Some(live) = regions.get_mut(region) else {
            return false;
        };
        let changed = live.services != services;
        live.services = services;
        changed
    }

    /// The region's health and the service types its agent holds now.
    pub fn services(&self, region: &str) -> (Health, Services) {
        let regions = self.lock();
        match regions.get(region) {
            None => (Health::Unavailable, Services::default()),
            Some(live) => (
                self.live_health(live, Instant::now()).0,
                live.services.clone(),
            ),
        }
    }

    /// Whether `region` advertises `service_type` now.
    pub fn advertised(&self, region: &str, service_type: &str) -> bool {
        let (health, services) = self.services(region);
        advertises(health, &services, service_type)
    }

    /// Whether `region` holds `service_type` degraded now (creates are queued).
    pub fn degraded(&self, region: &str, service_type: &str) -> bool {
        let (health, services) = self.services(region);
        holds_degraded(health, &services, service_type)
    }

    fn live_health(&self, live: &RegionLive, now: Instant) -> (Health, String) {
        let connected = live.connection.is_some();
        match health(
            now,
            connected,
            live.last_heartbeat,
            live.status.k8s_reachable,
            &self.policy,
        ) {
            (Health::Unhealthy, _) if connected && !live.pinged => (
                Health::Unhealthy,
                "connected; waiting for the agent's first heartbeat, which reports whether it reaches its cluster".into(),
            ),
            other => other,
        }
    }

    /// Counts a progress frame.
    pub fn progress(&self, region: &str) {
        if let Some(live) = self.lock().get_mut(region) {
            live.progress += 1;
        }
    }

    /// Delivers a result to the waiters of request `res.id`; `false` if nobody waited.
    pub fn resolve(&self, region: &str, res: Res) -> bool {
        let pending = self
            .lock()
            .get_mut(region)
            .and_then(|live| live.pending.remove(&res.id));
        match pending {
            None => false,
            Some(p) => {
                for w in p.waiters {
                    let _ = w.send(res.clone());
                }
                true
            }
        }
    }

    /// Queues `req` for `region` (joining an identical id already queued) and sends it now if
    /// the region is connected. The receiver yields the result.
    pub fn submit(&self, region: &str, req: Req) -> oneshot::Receiver<Res> {
        let (tx, rx) = oneshot::channel();
        let order = self.next_id();
        let mut regions = self.lock();
        let live = regions.entry(region.to_string()).or_default();
        if let Some(p) = live.pending.get_mut(&req.id) {
            p.waiters.push(tx);
            return rx;
        }
        let mut deliveries = 0;
        if let Some(c) = &live.connection
            && c.tx.send(Outgoing::Frame(Frame::Req(req.clone()))).is_ok()
        {
            deliveries = 1;
        }
        live.pending.insert(
            req.id.clone(),
            Pending {
                req,
                order,
                waiters: vec![tx],
                deliveries,
            },
        );
        rx
    }

    /// Drops request `id` once its last waiter gave up.
    pub fn abandon(&self, region: &str, id: &str) {
        let mut regions = self.lock();
        if let Some(live) = regions.get_mut(region)
            && let Some(p) = live.pending.get_mut(id)
        {
            p.waiters.retain(|w| !w.is_closed());
            if p.waiters.is_empty() {
                live.pending.remove(id);
            }
        }
    }

    /// Closes the region's connection (revocation).
    pub fn close(&self, region: &str, code: u16, reason: &str) {
        let mut regions = self.lock();
        if let Some(live) = regions.get_mut(region) {
            if let Some(c) = live.connection.take() {
                let _ = c.tx.send(Outgoing::Close(code, reason.into()));
            }
            live.pending.clear();
        }
    }

    /// The live view of `region`.
    pub fn view(&self, region: &str) -> LiveView {
        let regions = self.lock();
        let now = Instant::now();
        match regions.get(region) {
            None => LiveView {
                health: Health::Unavailable,
                health_reason: "no agent has connected yet".into(),
                connected: false,
                connected_at: None,
                last_heartbeat: None,
                agent_version: None,
                ops: Vec::new(),
                k8s_reachable: false,
                pending_requests: 0,
                services: Vec::new(),
                advertised_services: Vec::new(),
            },
            Some(live) => {
                let connected = live.connection.is_some();
                let (health, health_reason) = self.live_health(live, now);
                LiveView {
                    health,
                    health_reason,
                    connected,
                    connected_at: live.connected_at_ms,
                    last_heartbeat: live.last_heartbeat_ms,
                    agent_version: live.hello.as_ref().map(|h| h.agent_version.clone()),
                    ops: live
                        .hello
                        .as_ref()
                        .map(|h| h.ops.clone())
                        .unwrap_or_default(),
                    k8s_reachable: live.status.k8s_reachable,
                    pending_requests: live.pending.len(),
                    services: live.services.offers.clone(),
                    advertised_services: advertised_types(health, &live.services),
                }
            }
        }
    }

    /// How many agents are connected now.
    pub fn connected(&self) -> usize {
        self.lock()
            .values()
            .filter(|l| l.connection.is_some())
            .count()
    }

    /// How many times each queued request of `region` was delivered (for diagnostics).
    pub fn deliveries(&self, region: &str) -> BTreeMap<String, u32> {
        self.lock()
            .get(region)
            .map(|l| {
                l.pending
                    .iter()
                    .map(|(id, p)| (id.clone(), p.deliveries))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HealthPolicy {
        HealthPolicy {
            heartbeat: Duration::from_millis(200),
            unhealthy_after: Duration::from_millis(600),
            unavailable_after: Duration::from_millis(1500),
        }
    }

    #[test]
    fn health_has_three_states_with_the_configured_thresholds() {
        let p = policy();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(health(at(0), true, None, true, &p).0, Health::Unavailable);
        assert_eq!(health(at(100), true, Some(t0), true, &p).0, Health::Healthy);
        assert_eq!(
            health(at(100), true, Some(t0), false, &p).0,
            Health::Unhealthy
        );
        assert_eq!(
            health(at(700), true, Some(t0), true, &p).0,
            Health::Unhealthy
        );
        assert_eq!(
            health(at(100), false, Some(t0), true, &p).0,
            Health::Unhealthy
        );
        assert_eq!(
            health(at(1600), false, Some(t0), true, &p).0,
            Health::Unavailable
        );
        assert_eq!(
            health(at(1600), true, Some(t0), true, &p).0,
            Health::Unavailable
        );
    }

    #[tokio::test]
    async fn requests_queue_per_region_and_are_redelivered_on_reconnect() {
        let hub = Hub::new(policy());
        let req = |id: &str| Req {
            id: id.into(),
            op: "get_inventory".into(),
            params: serde_json::Value::Null,
        };
        let hello = Hello {
            agent_version: "0.1.0".into(),
            region: "a".into(),
            zone: "z".into(),
            ops: vec![],
            protocol: 1,
        };
        // Queued while nobody is connected; a second submit with the same id joins it.
        let first = hub.submit("a", req("1"));
        let joined = hub.submit("a", req("1"));
        let other = hub.submit("b", req("2"));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let conn = hub.connect("a", hello.clone(), tx);
        assert!(matches!(rx.try_recv(), Ok(Outgoing::Frame(Frame::Req(r))) if r.id == "1"));
        // A reconnect re-sends what is still unanswered.
        hub.disconnect("a", conn);
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.connect("a", hello, tx);
        assert!(matches!(rx.try_recv(), Ok(Outgoing::Frame(Frame::Req(r))) if r.id == "1"));
        assert_eq!(hub.deliveries("a")["1"], 2);
        assert!(hub.resolve("a", Res::ok("1", serde_json::json!({}))));
        assert!(first.await.unwrap().ok && joined.await.unwrap().ok);
        assert!(!hub.resolve("a", Res::ok("1", serde_json::json!({}))));
        // Region b's request is untouched by a's traffic.
        assert_eq!(hub.view("b").pending_requests, 1);
        drop(other);
    }

    #[test]
    fn a_type_is_advertised_only_while_region_and_provider_are_healthy() {
        use harmony_agent_protocol::ProviderHealth;
        let offer = |t: &str, health| ServiceOffer {
            service_type: t.into(),
            provider: "p".into(),
            builtin: false,
            health,
            detail: String::new(),
        };
        let services = Services {
            offers: vec![
                offer("queue", ProviderHealth::Healthy),
                offer("db", ProviderHealth::Unhealthy),
            ],
        };
        assert!(advertises(Health::Healthy, &services, "queue"));
        assert!(!holds_degraded(Health::Healthy, &services, "queue"));
        assert!(!advertises(Health::Healthy, &services, "db"));
        assert!(holds_degraded(Health::Healthy, &services, "db"));
        // An unhealthy region advertises nothing but still holds its types degraded.
        assert!(!advertises(Health::Unhealthy, &services, "queue"));
        assert!(holds_degraded(Health::Unhealthy, &services, "queue"));
        // An unavailable region holds nothing; a type without an offer is neither.
        assert!(!holds_degraded(Health::Unavailable, &services, "queue"));
        assert!(!advertises(Health::Healthy, &services, "vm"));
        assert!(!holds_degraded(Health::Healthy, &services, "vm"));
        assert_eq!(advertised_types(Health::Healthy, &services), vec!["queue"]);
        assert!(advertised_types(Health::Unhealthy, &services).is_empty());

        let hub = Hub::new(policy());
        let hello = Hello {
            agent_version: "0.1.0".into(),
            region: "a".into(),
            zone: "z".into(),
            ops: vec![],
            protocol: 1,
        };
        let (tx, _rx) = mpsc::unbounded_channel();
        let conn = hub.connect("a", hello.clone(), tx);
        assert!(hub.set_services("a", services.clone()));
        assert!(!hub.set_services("a", services.clone()));
        // Before the first heartbeat the region is unhealthy: degraded, not advertised.
        assert!(!hub.advertised("a", "queue") && hub.degraded("a", "queue"));
        hub.heartbeat(
            "a",
            AgentStatus {
                k8s_reachable: true,
                ..AgentStatus::default()
            },
        );
        assert!(hub.advertised("a", "queue") && !hub.degraded("a", "queue"));
        let view = hub.view("a");
        assert_eq!(view.advertised_services, vec!["queue"]);
        assert_eq!(view.services.len(), 2);
        // The agent loses its cluster: the region is unhealthy, so nothing is advertised.
        hub.heartbeat("a", AgentStatus::default());
        assert!(!hub.advertised("a", "queue") && hub.degraded("a", "queue"));
        assert!(hub.view("a").advertised_services.is_empty());
        // A new connection starts with no offers until its agent sends them.
        hub.disconnect("a", conn);
        let (tx, _rx) = mpsc::unbounded_channel();
        hub.connect("a", hello, tx);
        assert!(hub.view("a").services.is_empty());
        assert!(!hub.degraded("a", "queue"));
        // Never-connected regions hold nothing.
        assert!(!hub.advertised("b", "queue") && !hub.degraded("b", "queue"));
    }
}
