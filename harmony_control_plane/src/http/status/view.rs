//! The status page's view model: one row per region and zone, built from the API's
//! [`RegionView`]s for one [`Caller`]. A tenant's rows carry no admin cells at all, so the
//! templates cannot render them (nothing is hidden with CSS).

use askama::Template;
use harmony_api::{Health, RegionView};

use crate::http::caller::Caller;

/// How often the page reloads itself (`<meta http-equiv=refresh>`), in seconds.
pub const REFRESH_S: u32 = 15;

/// The health values the page filters by, in display order.
pub const HEALTHS: [Health; 3] = [Health::Healthy, Health::Unhealthy, Health::Unavailable];

/// One zone of a region as the page needs it. [`zones_of`] is the only place that reads a
/// [`RegionView`]'s zone fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneFacts {
    /// The zone.
    pub zone: String,
    /// Its health.
    pub health: Health,
    /// Why.
    pub health_reason: String,
    /// Last heartbeat of its agent, ms since the Unix epoch.
    pub last_heartbeat: Option<i64>,
    /// Requests accepted for it and not yet answered.
    pub pending_requests: usize,
    /// Its agent's version.
    pub agent_version: Option<String>,
    /// The ops its agent advertised.
    pub ops: Vec<String>,
    /// Its cluster's node count, when known.
    pub node_count: Option<u64>,
    /// Its cluster's capacity, as shown (for example `24 CPU, 96 GiB`), when known.
    pub capacity: Option<String>,
    /// The control-plane replica holding its agent's connection.
    pub replica: Option<String>,
}

/// The zones of `r`, one row each (first zone first), from the per-zone views the API gives.
pub fn zones_of(r: &RegionView) -> Vec<ZoneFacts> {
    r.zones
        .iter()
        .map(|z| ZoneFacts {
            zone: z.zone.clone(),
            health: z.health,
            health_reason: z.health_reason.clone().unwrap_or_default(),
            last_heartbeat: z.last_heartbeat,
            pending_requests: z.pending_requests.unwrap_or(0),
            agent_version: z.agent_version.clone(),
            ops: z.ops.clone().unwrap_or_default(),
            node_count: z.node_count.map(u64::from),
            capacity: z.capacity.as_ref().map(capacity_text),
            replica: z.replica.clone(),
        })
        .collect()
}

/// `24 CPU, 96 GiB, 110 pods`: a cluster's allocatable capacity for people.
fn capacity_text(c: &harmony_api::Capacity) -> String {
    let cpu = if c.cpu_millis.is_multiple_of(1000) {
        format!("{} CPU", c.cpu_millis / 1000)
    } else {
        format!("{:.1} CPU", c.cpu_millis as f64 / 1000.0)
    };
    let gib = c.memory_bytes as f64 / (1u64 << 30) as f64;
    format!("{cpu}, {gib:.1} GiB, {} pods", c.pods)
}

/// A moment shown on the page: a UTC timestamp and how long ago it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// RFC 3339 (`2026-11-24T06:50:01Z`), for `<time datetime>`.
    pub iso: String,
    /// For people: `2026-11-24 06:50:01 UTC`.
    pub utc: String,
    /// `3s ago`, `5m 2s ago`, `4h 10m ago`, `2d 3h ago`.
    pub ago: String,
}

impl Stamp {
    /// `at_ms` seen at `now_ms` (both ms since the Unix epoch).
    pub fn new(at_ms: i64, now_ms: i64) -> Self {
        let secs = at_ms.div_euclid(1000);
        let (y, mo, d) = civil(secs.div_euclid(86_400));
        let t = secs.rem_euclid(86_400);
        let (h, mi, s) = (t / 3600, t % 3600 / 60, t % 60);
        Self {
            iso: format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
            utc: format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC"),
            ago: ago((now_ms - at_ms).max(0) / 1000),
        }
    }
}

fn ago(s: i64) -> String {
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m {}s ago", s / 60, s % 60),
        3600..86_400 => format!("{}h {}m ago", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h ago", s / 86_400, s % 86_400 / 3600),
    }
}

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian calendar).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The cells only an admin sees.
#[derive(Debug, Clone, PartialEq)]
pub struct AdminCells {
    /// Why the zone has its health.
    pub health_reason: String,
    /// Last heartbeat, `None` when its agent never sent one.
    pub last_heartbeat: Option<Stamp>,
    /// Requests in flight (accepted, not yet answered).
    pub pending_requests: usize,
    /// Agent version, `—` when unknown.
    pub agent_version: String,
    /// Ops, comma-separated, `—` when none.
    pub ops: String,
    /// Node count, `—` when unknown.
    pub node_count: String,
    /// Capacity, `—` when unknown.
    pub capacity: String,
    /// Replica holding the connection, `—` when none.
    pub replica: String,
}

/// One row of the table: a zone of a region.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRow {
    /// The region.
    pub region: String,
    /// The region's health.
    pub region_health: Health,
    /// The zone.
    pub zone: String,
    /// The zone's health.
    pub health: Health,
    /// Admin-only cells; `None` for a tenant.
    pub admin: Option<AdminCells>,
}

/// A link to one health filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterLink {
    /// `all`, `healthy`, ...
    pub label: String,
    /// `/status` or `/status?health=...`.
    pub href: String,
    /// Zones in that health (all zones for `all`).
    pub count: usize,
    /// Whether it is the filter in force.
    pub active: bool,
}

/// The whole page.
#[derive(Debug, Clone, Template)]
#[template(path = "status.html")]
pub struct StatusPage {
    /// Whether admin columns are shown.
    pub admin: bool,
    /// Who is signed in (`admin`, `tenant acme`).
    pub who: String,
    /// When the page was made.
    pub generated: Stamp,
    /// The filter in force.
    pub filter: Option<Health>,
    /// Links to every filter.
    pub filters: Vec<FilterLink>,
    /// The rows that pass the filter.
    pub rows: Vec<StatusRow>,
    /// How many columns the table has.
    pub columns: usize,
    /// Reload period in seconds.
    pub refresh_s: u32,
}

/// The login form, with an error after a refused attempt.
#[derive(Debug, Clone, Template)]
#[template(path = "status_login.html")]
pub struct LoginPage {
    /// Why the last attempt was refused.
    pub error: Option<String>,
}

/// A page that only says something went wrong and how to go on.
#[derive(Debug, Clone, Template)]
#[template(path = "status_message.html")]
pub struct MessagePage {
    /// The headline.
    pub title: String,
    /// What happened, naming the field and the fix.
    pub message: String,
}

fn dash(v: Option<String>) -> String {
    v.filter(|s| !s.is_empty()).unwrap_or_else(|| "—".into())
}

/// Parses the `health` query value: empty or absent is no filter; anything else must be a
/// health, or the error names the allowed values.
pub fn parse_filter(raw: Option<&str>) -> Result<Option<Health>, String> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => HEALTHS
            .into_iter()
            .find(|h| h.to_string() == v)
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "health: {v:?} is not a health; use healthy, unhealthy or unavailable (/status?health=healthy), or no health parameter for every zone"
                )
            }),
    }
}

/// The page `caller` sees for `regions` at `now_ms`, keeping only zones whose health is
/// `filter`. Rows are sorted by region, then zone.
pub fn build(
    regions: &[RegionView],
    caller: &Caller,
    filter: Option<Health>,
    now_ms: i64,
) -> StatusPage {
    let admin = caller.is_admin();
    let mut all: Vec<StatusRow> = regions
        .iter()
        .flat_map(|r| {
            zones_of(r).into_iter().map(move |z| StatusRow {
                region: r.region.clone(),
                region_health: r.health,
                zone: z.zone.clone(),
                health: z.health,
                admin: admin.then(|| admin_cells(z, now_ms)),
            })
        })
        .collect();
    all.sort_by(|a, b| (&a.region, &a.zone).cmp(&(&b.region, &b.zone)));
    let mut filters = vec![FilterLink {
        label: "all".into(),
        href: "/status".into(),
        count: all.len(),
        active: filter.is_none(),
    }];
    filters.extend(HEALTHS.into_iter().map(|h| FilterLink {
        label: h.to_string(),
        href: format!("/status?health={h}"),
        count: all.iter().filter(|r| r.health == h).count(),
        active: filter == Some(h),
    }));
    let rows = all
        .into_iter()
        .filter(|r| filter.is_none_or(|h| r.health == h))
        .collect();
    StatusPage {
        admin,
        who: match caller {
            Caller::Admin => "admin".into(),
            Caller::Tenant { tenant } => format!("tenant {tenant}"),
        },
        generated: Stamp::new(now_ms, now_ms),
        filter,
        filters,
        rows,
        columns: if admin { 10 } else { 3 },
        refresh_s: REFRESH_S,
    }
}

fn admin_cells(z: ZoneFacts, now_ms: i64) -> AdminCells {
    AdminCells {
        health_reason: z.health_reason,
        last_heartbeat: z.last_heartbeat.map(|t| Stamp::new(t, now_ms)),
        pending_requests: z.pending_requests,
        agent_version: dash(z.agent_version),
        ops: dash(Some(z.ops.join(", "))),
        node_count: dash(z.node_count.map(|n| n.to_string())),
        capacity: dash(z.capacity),
        replica: dash(z.replica),
    }
}
