//! The status page's "Tenants" section (`templates/status_tenancy.html`): for the admin every
//! tenant with its caps per region and each project's quota and use per zone; for a tenant its
//! own projects only. Use reads `cpu 1.5 / 4, memory 2 GiB / 8 GiB, pods 3 / 20` (used / the
//! project's quota), from the zone agents' ResourceQuota reports
//! ([`crate::services::tenancy_views`]), or `use unknown: ...` saying why.
//!
//! A tenant's page also shows only the regions where one of its projects has a quota, and of
//! those only the live zones ([`visible_regions`]); nothing of another tenant is read into its
//! section, so nothing of it can be rendered.

use harmony_agent_protocol::quota_use::{MAX_QUOTA_NAMESPACES, hard, object_key};
use harmony_agent_protocol::tenancy::ProjectQuota;
use harmony_api::RegionView;
use std::collections::BTreeMap;

use super::view::Stamp;
use crate::http::caller::Caller;
use crate::services::ControlPlane;
use crate::services::tenancy_views::{self, TenancyOverview, Unknown, Usage};
use crate::store::StoreError;
use crate::store::quantity::{Milli, parse};

/// The section as the template needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenancySection {
    /// Whether it was read (a page built without [`load`] shows no section).
    pub shown: bool,
    /// Whether the caller is the admin (the section then lists every tenant, with caps).
    pub admin: bool,
    /// The tenants shown (the tenant's own only, for a tenant).
    pub tenants: Vec<TenantBlock>,
}

/// One tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantBlock {
    /// Its name.
    pub tenant: String,
    /// Its caps, `(region, "cpu 8, memory 16 GiB")`, by region (admin only: empty for a tenant).
    pub caps: Vec<(String, String)>,
    /// One line per project, region and zone.
    pub rows: Vec<UseRow>,
}

/// One project's quota and use in one zone of a region.
#[derive(Debug, Clone, PartialEq)]
pub struct UseRow {
    /// The project.
    pub project: String,
    /// Its namespace.
    pub namespace: String,
    /// The region.
    pub region: String,
    /// The project's quota there, `cpu 4, memory 8 GiB, pods 20`.
    pub quota: String,
    /// The zone, `—` when the region has no live zone.
    pub zone: String,
    /// Whether the use is known.
    pub known: bool,
    /// `cpu 1.5 / 4, ...`, `none yet: ...` or `use unknown: ...`.
    pub usage: String,
    /// When the agent read it and anything else worth knowing about it.
    pub note: Option<String>,
    /// Whether a resource is used up (used reached the quota).
    pub full: bool,
}

/// What the page shows `caller` of tenants, and the regions it may see: every region for the
/// admin; for a tenant those where one of its projects has a quota, without decommissioned
/// regions or zones. The page's [`super::view::load`] calls this.
pub async fn load(
    cp: &ControlPlane,
    caller: &Caller,
    regions: Vec<RegionView>,
    now_ms: i64,
) -> Result<(Vec<RegionView>, TenancySection), StoreError> {
    let overview = tenancy_views::read(cp, caller.tenant()).await?;
    let regions = visible_regions(regions, &overview, caller);
    Ok((regions, section(&overview, caller, now_ms)))
}

/// The regions and zones `caller` sees on the page (see [`load`]).
pub fn visible_regions(
    regions: Vec<RegionView>,
    overview: &TenancyOverview,
    caller: &Caller,
) -> Vec<RegionView> {
    if caller.is_admin() {
        return regions;
    }
    let mine = overview.regions();
    regions
        .into_iter()
        .filter(|r| !r.decommissioned && mine.contains(r.region.as_str()))
        .map(|mut r| {
            r.zones.retain(|z| z.decommissioned != Some(true));
            r
        })
        .filter(|r| !r.zones.is_empty())
        .collect()
}

/// The section `caller` sees of `overview` at `now_ms`.
pub fn section(overview: &TenancyOverview, caller: &Caller, now_ms: i64) -> TenancySection {
    let admin = caller.is_admin();
    TenancySection {
        shown: true,
        admin,
        tenants: overview
            .tenants
            .iter()
            .map(|t| TenantBlock {
                tenant: t.tenant.clone(),
                caps: if admin {
                    t.caps
                        .iter()
                        .map(|(r, c)| (r.clone(), quota_text(c)))
                        .collect()
                } else {
                    Vec::new()
                },
                rows: t
                    .projects
                    .iter()
                    .flat_map(|p| {
                        p.regions.iter().flat_map(move |r| {
                            let row = |zone: String, usage: Described| UseRow {
                                project: p.project.clone(),
                                namespace: p.namespace.clone(),
                                region: r.region.clone(),
                                quota: quota_text(&r.quota),
                                zone,
                                known: usage.known,
                                usage: usage.text,
                                note: usage.note,
                                full: usage.full,
                            };
                            if r.zones.is_empty() {
                                let none = Described::unknown(format!(
                                    "use unknown: region {} has no live zone",
                                    r.region
                                ));
                                return vec![row("—".into(), none)];
                            }
                            r.zones
                                .iter()
                                .map(|z| {
                                    let d =
                                        describe(&z.usage, &r.quota, &p.namespace, admin, now_ms);
                                    row(z.zone.clone(), d)
                                })
                                .collect()
                        })
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// A zone's use in words.
struct Described {
    known: bool,
    text: String,
    note: Option<String>,
    full: bool,
}

impl Described {
    fn unknown(text: String) -> Self {
        Self {
            known: false,
            text,
            note: None,
            full: false,
        }
    }
}

fn describe(u: &Usage, quota: &ProjectQuota, ns: &str, admin: bool, now_ms: i64) -> Described {
    let as_of = |at: i64, stale: &Option<String>| {
        let mut note = format!("as of {}", Stamp::new(at, now_ms).ago);
        if let Some(e) = stale {
            note.push_str("; the agent's latest read failed");
            if admin {
                note.push_str(&format!(": {e}"));
            }
        }
        note
    };
    match u {
        Usage::Reported {
            hard: enforced,
            used,
            at,
            stale,
        } => {
            let (text, full) = use_text(quota, used);
            let mut note = as_of(*at, stale);
            let differs = differing(quota, enforced);
            if !differs.is_empty() {
                note.push_str(&format!(
                    "; the cluster still enforces {} (the quota applies on the project's next request there)",
                    differs.join(", ")
                ));
            }
            Described {
                known: true,
                text,
                note: Some(note),
                full,
            }
        }
        Usage::NotPresent { at, stale } => Described {
            known: true,
            text: "none yet: the project has run nothing in this zone".into(),
            note: Some(as_of(*at, stale)),
            full: false,
        },
        Usage::Unknown(why) => Described::unknown(format!(
            "use unknown: {}",
            unknown_text(why, ns, admin, now_ms)
        )),
    }
}

fn unknown_text(why: &Unknown, ns: &str, admin: bool, now_ms: i64) -> String {
    match why {
        Unknown::NeverConnected => "no agent has connected to this zone yet".into(),
        Unknown::Disconnected { last_heartbeat } => format!(
            "the zone's agent is not connected (last heartbeat {})",
            Stamp::new(*last_heartbeat, now_ms).ago
        ),
        Unknown::NoHeartbeat => {
            "the zone's agent connected and has not sent its first heartbeat yet".into()
        }
        Unknown::NotReported { agent_version } => match agent_version.as_deref() {
            Some(v) if admin => format!(
                "the zone's agent (version {v}) has not reported quota use; agents older than the control plane never do: upgrade it"
            ),
            _ => "the zone's agent has not reported quota use".into(),
        },
        Unknown::ReadFailed { error } if admin => {
            format!("the zone's agent could not read the quotas: {error}")
        }
        Unknown::ReadFailed { .. } => "the zone's agent could not read its cluster's quotas".into(),
        Unknown::PastLimit => format!(
            "the zone's agent reports at most {MAX_QUOTA_NAMESPACES} project namespaces, and not {ns}"
        ),
        Unknown::OtherLabels => format!(
            "namespace {ns} in this zone's cluster is labelled for another project; an admin must relabel or remove it"
        ),
    }
}

/// One resource of a quota: its ResourceQuota key, its name for people, how its figures read
/// and its quota.
struct Resource {
    key: String,
    name: String,
    unit: Unit,
    limit: String,
}

#[derive(Clone, Copy)]
enum Unit {
    Cores,
    Bytes,
    Count,
}

/// The resources of `q`: cpu, memory, storage, then object counts by name.
fn resources(q: &ProjectQuota) -> Vec<Resource> {
    let mut out = Vec::new();
    for (key, name, unit, limit) in [
        ("requests.cpu", "cpu", Unit::Cores, &q.cpu),
        ("requests.memory", "memory", Unit::Bytes, &q.memory),
        ("requests.storage", "storage", Unit::Bytes, &q.storage),
    ] {
        if let Some(l) = limit {
            out.push(Resource {
                key: key.into(),
                name: name.into(),
                unit,
                limit: l.clone(),
            });
        }
    }
    for (resource, n) in &q.objects {
        out.push(Resource {
            key: object_key(resource),
            name: resource.trim_start_matches("count/").to_string(),
            unit: Unit::Count,
            limit: n.to_string(),
        });
    }
    out
}

/// `cpu 4, memory 8 GiB, pods 20`; `no limits` for an empty quota.
pub fn quota_text(q: &ProjectQuota) -> String {
    let parts: Vec<String> = resources(q)
        .iter()
        .map(|r| format!("{} {}", r.name, figure(&r.limit, r.unit)))
        .collect();
    if parts.is_empty() {
        "no limits".into()
    } else {
        parts.join(", ")
    }
}

/// `cpu 1.5 / 4, memory 2 GiB / 8 GiB, pods 3 / 20` and whether any resource is used up.
fn use_text(q: &ProjectQuota, used: &BTreeMap<String, String>) -> (String, bool) {
    let mut full = false;
    let parts: Vec<String> = resources(q)
        .iter()
        .map(|r| {
            let limit = figure(&r.limit, r.unit);
            match used.get(&r.key) {
                Some(u) => {
                    let at_limit =
                        matches!((parse(u), parse(&r.limit)), (Ok(u), Ok(l)) if l > 0 && u >= l);
                    full |= at_limit;
                    let mark = if at_limit { " (full)" } else { "" };
                    format!("{} {} / {limit}{mark}", r.name, figure(u, r.unit))
                }
                None => format!("{} not counted yet / {limit}", r.name),
            }
        })
        .collect();
    if parts.is_empty() {
        return ("no limits".into(), false);
    }
    (parts.join(", "), full)
}

/// The figures the cluster enforces that are not the project's quota, `cpu 2`.
fn differing(q: &ProjectQuota, enforced: &BTreeMap<String, String>) -> Vec<String> {
    let wanted = hard(q);
    let names: BTreeMap<String, (String, Unit)> = resources(q)
        .into_iter()
        .map(|r| (r.key, (r.name, r.unit)))
        .collect();
    wanted
        .iter()
        .filter_map(|(k, want)| {
            let have = enforced.get(k)?;
            let same =
                have == want || matches!((parse(have), parse(want)), (Ok(a), Ok(b)) if a == b);
            let (name, unit) = names.get(k)?;
            (!same).then(|| format!("{name} {}", figure(have, *unit)))
        })
        .collect()
}

/// A quantity for people: cores as a decimal, bytes in binary units, counts as numbers; the
/// text as it is when it does not parse.
fn figure(text: &str, unit: Unit) -> String {
    let Ok(m) = parse(text) else {
        return text.to_string();
    };
    match unit {
        Unit::Cores | Unit::Count => decimal(m, 1000),
        Unit::Bytes => bytes(m / 1000),
    }
}

fn bytes(b: Milli) -> String {
    for (unit, shift) in [
        ("EiB", 60),
        ("PiB", 50),
        ("TiB", 40),
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
    ] {
        if b >= 1 << shift {
            return format!("{} {unit}", decimal(b, 1 << shift));
        }
    }
    format!("{b} B")
}

/// `n / d` with at most two decimals, trailing zeros dropped: `1.5`, `4`, `0.25`.
fn decimal(n: Milli, d: Milli) -> String {
    let hundredths = (n * 100 + d / 2) / d;
    let (whole, frac) = (hundredths / 100, hundredths % 100);
    match frac {
        0 => whole.to_string(),
        f if f % 10 == 0 => format!("{whole}.{}", f / 10),
        f => format!("{whole}.{f:02}"),
    }
}

#[cfg(test)]
#[path = "tenancy_tests.rs"]
mod tests;
