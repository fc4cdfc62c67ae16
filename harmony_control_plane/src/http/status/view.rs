//! The status page's view model: one row per live zone, most severe first, and the
//! decommissioned zones apart, built from the API's [`RegionView`]s for one [`Caller`]. A
//! tenant's rows carry no admin cells at all, so the templates cannot render them (nothing is
//! hidden with CSS). [`load`] reads what the page shows through the services; the page and its
//! live updates ([`super::live`]) both build from it, so they always agree.
//!
//! Adding to the page: per-zone data goes in a field of [`StatusRow`] (rendered by
//! `templates/status_row.html`, which the page and the live updates share); a section goes in a
//! `{% block %}` of `templates/status.html` listed in [`LIVE_SECTIONS`] to be updated live.

use askama::Template;
use harmony_api::{Health, RegionView};

use super::ops::{self, OpsCell, OpsSummary};
use crate::http::caller::Caller;
use crate::services::ControlPlane;
use crate::services::regions::{self, RegionError};

/// How often the page reloads itself without JavaScript (`<noscript><meta http-equiv=refresh>`),
/// in seconds.
pub const REFRESH_S: u32 = 15;

/// The `{% block %}`s of `status.html` the live updates re-render and send when they change
/// (each inside an element with `data-live="<name>"`).
pub const LIVE_SECTIONS: [&str; 4] = ["filters", "summary", "retired", "tenancy"];

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
    /// When it was decommissioned (`Some` for a decommissioned zone), ms since the Unix epoch.
    pub decommissioned_at: Option<i64>,
    /// Whether it (or its whole region) was decommissioned.
    pub decommissioned: bool,
    /// When it took its health (its stored transition), ms since the Unix epoch.
    pub health_since: Option<i64>,
    /// Its agent's last error, scrubbed (admin views only carry it).
    pub agent_error: Option<String>,
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
            decommissioned_at: z.decommissioned_at,
            decommissioned: r.decommissioned || z.decommissioned == Some(true),
            health_since: z.health_since,
            agent_error: z.agent_error.clone(),
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
    // The same human units as every duration the control plane writes ("12 min", "1 h 5 min").
    match s {
        ..1 => "0 s ago".into(),
        _ => format!(
            "{} ago",
            crate::services::health::human_duration(std::time::Duration::from_secs(s as u64))
        ),
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
    /// Ops, against the set most agents advertise.
    pub ops: OpsCell,
    /// Node count, `—` when unknown.
    pub node_count: String,
    /// Capacity, `—` when unknown.
    pub capacity: String,
    /// Replica holding the connection, `—` when none.
    pub replica: String,
}

/// One row of the table: a live zone of a region.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRow {
    /// `region/zone`: identifies the row across live updates.
    pub key: String,
    /// The region.
    pub region: String,
    /// The region's health.
    pub region_health: Health,
    /// Why the region's health is not this zone's (`region healthy: 1 of 2 zones healthy`);
    /// `None` when they are the same.
    pub region_note: Option<String>,
    /// The zone.
    pub zone: String,
    /// The zone's health.
    pub health: Health,
    /// Since when it has that health, and (admin only) its agent's last error
    /// (`templates/status_zone_state.html`).
    pub state: super::requests::ZoneStateCell,
    /// Its requests in flight and recent failures the viewer may see
    /// (`templates/status_zone_requests.html`; filled by [`load`]).
    pub requests: super::requests::ZoneRequestsCell,
    /// Admin-only cells; `None` for a tenant.
    pub admin: Option<AdminCells>,
}

/// A decommissioned zone (admin only): no health, no capacity, only when it left.
#[derive(Debug, Clone, PartialEq)]
pub struct RetiredRow {
    /// The region.
    pub region: String,
    /// The zone.
    pub zone: String,
    /// When it was decommissioned, when the store knows.
    pub at: Option<Stamp>,
}

/// A link to one health filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterLink {
    /// `all`, `healthy`, ...
    pub label: String,
    /// `/status` or `/status?health=...`.
    pub href: String,
    /// Live zones in that health (all live zones for `all`).
    pub count: usize,
    /// Whether it is the filter in force.
    pub active: bool,
}

/// The whole page.
#[derive(Debug, Clone, Template)]
#[template(path = "status.html", blocks = ["filters", "summary", "retired", "tenancy"])]
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
    /// The live zones that pass the filter, most severe first, then by region and zone.
    pub rows: Vec<StatusRow>,
    /// The ops most agents advertise (admin only; `None` when no agent advertised any).
    pub ops: Option<OpsSummary>,
    /// Decommissioned zones, by region and zone (admin only: empty for a tenant).
    pub retired: Vec<RetiredRow>,
    /// How many columns the table has.
    pub columns: usize,
    /// Reload period in seconds, without JavaScript.
    pub refresh_s: u32,
    /// Where the page's script reads live updates (`/status/events`, with the filter).
    pub events: String,
    /// Tenants, projects, quotas and use (`templates/status_tenancy.html`), set by [`load`].
    pub tenancy: super::tenancy::TenancySection,
}

/// One row of the table alone (`status_row.html`, also included by `status.html`): what the
/// live updates send.
#[derive(Debug, Clone, Template)]
#[template(path = "status_row.html")]
pub struct RowHtml<'a> {
    /// The row.
    pub row: &'a StatusRow,
}

/// The table's only row when no zone passes the filter (`status_empty.html`).
#[derive(Debug, Clone, Template)]
#[template(path = "status_empty.html")]
pub struct EmptyHtml {
    /// Whether the viewer is the admin.
    pub admin: bool,
    /// The filter in force.
    pub filter: Option<Health>,
    /// How many columns the table has.
    pub columns: usize,
}

/// The key of [`EmptyHtml`]'s row in live updates.
pub const EMPTY_KEY: &str = "-empty";

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

/// What `caller` sees now, read through the services like the API: the page and its live
/// updates both come from here.
pub async fn load(
    cp: &ControlPlane,
    caller: &Caller,
    filter: Option<Health>,
    now_ms: i64,
) -> Result<StatusPage, RegionError> {
    let list = regions::list(cp).await?;
    let (list, tenancy) = super::tenancy::load(cp, caller, list, now_ms).await?;
    let mut page = build(&list, caller, filter, now_ms);
    page.tenancy = tenancy;
    super::requests::attach(cp, caller, &list, &mut page.rows, now_ms).await?;
    Ok(page)
}

/// Most severe first: unavailable, unhealthy, healthy.
fn severity(h: Health) -> u8 {
    match h {
        Health::Unavailable => 0,
        Health::Unhealthy => 1,
        Health::Healthy => 2,
    }
}

/// Why a region's health is better than one of its zones': `region healthy: 1 of 2 zones
/// healthy`. `None` when the zone's health is the region's.
fn region_note(region: Health, zone: Health, live: &[Health]) -> Option<String> {
    if region == zone {
        return None;
    }
    let n = |h| live.iter().filter(|z| **z == h).count();
    let total = live.len();
    Some(match region {
        Health::Healthy => format!(
            "region healthy: {} of {total} zones healthy",
            n(Health::Healthy)
        ),
        _ => format!(
            "region {region}: no zone healthy, {} of {total} {region}",
            n(region)
        ),
    })
}

/// The page `caller` sees for `regions` at `now_ms`: live zones whose health is `filter`, most
/// severe first, then by region and zone; decommissioned zones apart (admin only), counted
/// nowhere else.
pub fn build(
    regions: &[RegionView],
    caller: &Caller,
    filter: Option<Health>,
    now_ms: i64,
) -> StatusPage {
    let admin = caller.is_admin();
    let zones: Vec<(&RegionView, Vec<ZoneFacts>)> =
        regions.iter().map(|r| (r, zones_of(r))).collect();
    let live = || {
        zones.iter().flat_map(|(r, zs)| {
            zs.iter()
                .filter(|z| !z.decommissioned)
                .map(move |z| (*r, z))
        })
    };
    let ops = admin
        .then(|| ops::summarize(live().map(|(_, z)| z.ops.as_slice())))
        .flatten();
    let mut all: Vec<StatusRow> = live()
        .map(|(r, z)| {
            let healths: Vec<Health> = zones
                .iter()
                .filter(|(other, _)| other.region == r.region)
                .flat_map(|(_, zs)| zs.iter().filter(|z| !z.decommissioned).map(|z| z.health))
                .collect();
            StatusRow {
                key: format!("{}/{}", r.region, z.zone),
                region: r.region.clone(),
                region_health: r.health,
                region_note: region_note(r.health, z.health, &healths),
                zone: z.zone.clone(),
                health: z.health,
                state: super::requests::state_cell(
                    z.health_since,
                    z.agent_error.as_deref(),
                    admin,
                    now_ms,
                ),
                requests: Default::default(),
                admin: admin.then(|| admin_cells(z.clone(), ops.as_ref(), now_ms)),
            }
        })
        .collect();
    all.sort_by(|a, b| {
        (severity(a.health), &a.region, &a.zone).cmp(&(severity(b.health), &b.region, &b.zone))
    });
    let mut retired: Vec<RetiredRow> = zones
        .iter()
        .flat_map(|(r, zs)| zs.iter().filter(|z| z.decommissioned).map(move |z| (*r, z)))
        .filter(|_| admin)
        .map(|(r, z)| RetiredRow {
            region: r.region.clone(),
            zone: z.zone.clone(),
            at: z.decommissioned_at.map(|t| Stamp::new(t, now_ms)),
        })
        .collect();
    retired.sort_by(|a, b| (&a.region, &a.zone).cmp(&(&b.region, &b.zone)));
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
        ops,
        retired,
        columns: if admin { 11 } else { 4 },
        refresh_s: REFRESH_S,
        events: match filter {
            Some(h) => format!("{}?health={h}", super::live::EVENTS_PATH),
            None => super::live::EVENTS_PATH.into(),
        },
        tenancy: Default::default(),
    }
}

fn admin_cells(z: ZoneFacts, ops: Option<&OpsSummary>, now_ms: i64) -> AdminCells {
    AdminCells {
        health_reason: z.health_reason,
        last_heartbeat: z.last_heartbeat.map(|t| Stamp::new(t, now_ms)),
        pending_requests: z.pending_requests,
        agent_version: dash(z.agent_version),
        ops: ops::cell(&z.ops, ops),
        node_count: dash(z.node_count.map(|n| n.to_string())),
        capacity: dash(z.capacity),
        replica: dash(z.replica),
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
pub(crate) mod tests;
