//! The roles file: hosts given roles ahead of time, for runs without a terminal (CI).
//!
//! ```toml
//! [[host]]
//! mac = "52:54:00:00:00:21"   # or: id = "host-id-from-discovery"
//! role = "worker"             # bootstrap | control-plane | worker
//! logical = "worker0"         # optional: the logical host to bind it to
//!
//! [[bmc]]                     # optional: a host Harmony powers and PXE boots (as --bmc)
//! mac = "52:54:00:00:00:21"   # its boot MAC
//! address = "redfish://10.0.0.5/redfish/v1/Systems/1"
//! credentials = "env:BMC_R14" # or file:PATH; holds USER:PASSWORD, never written here
//! ```

use serde::Deserialize;
use std::path::Path;

use harmony_types::{BmcAddress, BmcCredentialsSource, HostName, Id, MacAddress};

use super::HaClusterError;
use crate::domain::ValidationError;
use crate::domain::capability::{
    ClusterLayout, DeclaredRole, HostBmc, HostMatch, HostSelector, RoleRule,
};
use crate::domain::inventory::HostRole;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    host: Vec<Entry>,
    #[serde(default)]
    bmc: Vec<BmcEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BmcEntry {
    mac: MacAddress,
    address: String,
    credentials: String,
}

/// Reads and parses a roles file; `err` makes its errors.
fn read(path: &Path, err: impl Fn(String) -> HaClusterError) -> Result<File, HaClusterError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(format!("{e}; pass an existing file to --roles")))?;
    toml::from_str(&text).map_err(|e| {
        err(format!(
            "{e}; each [[host]] needs `mac` or `id`, and `role` (bootstrap, control-plane or worker); each [[bmc]] needs `mac`, `address` (redfish://...) and `credentials` (env:VAR or file:PATH)"
        ))
    })
}

/// The `[[bmc]]` entries of a roles file (the same checks as `--bmc`).
pub fn parse_roles_file_bmcs(path: &Path) -> Result<Vec<HostBmc>, HaClusterError> {
    let err = |problem: String| HaClusterError::Roles {
        path: path.display().to_string(),
        problem,
    };
    let file = read(path, err)?;
    file.bmc
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            Ok(HostBmc {
                mac: e.mac,
                address: BmcAddress::parse(&e.address)
                    .map_err(|x| err(format!("bmc[{i}]: {x}")))?,
                credentials: BmcCredentialsSource::parse(&e.credentials)
                    .map_err(|x| err(format!("bmc[{i}]: {x}")))?,
            })
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: Option<Id>,
    mac: Option<MacAddress>,
    role: HostRole,
    logical: Option<HostName>,
}

/// Reads and checks a roles file against the layout.
pub fn parse_roles_file(
    path: &Path,
    layout: &ClusterLayout,
) -> Result<Vec<DeclaredRole>, HaClusterError> {
    let err = |problem: String| HaClusterError::Roles {
        path: path.display().to_string(),
        problem,
    };
    let file = read(path, err)?;
    let mut out: Vec<DeclaredRole> = Vec::new();
    for (i, e) in file.host.into_iter().enumerate() {
        let at = format!("host[{i}]");
        let host = match (e.id, e.mac) {
            (Some(id), None) => HostSelector::Id(id),
            (None, Some(mac)) => HostSelector::Mac(mac),
            _ => return Err(err(format!("{at}: give exactly one of `mac` or `id`"))),
        };
        if let Some(logical) = &e.logical {
            match layout.role_of(logical) {
                Some(r) if r == e.role => {}
                Some(r) => {
                    return Err(err(format!(
                        "{at}: {logical} is a {r} logical host, not a {} one; bind it to one of: {}",
                        e.role,
                        names(layout, e.role)
                    )));
                }
                None => {
                    return Err(err(format!(
                        "{at}: {logical} is not a logical host of the cluster; use one of: {}",
                        names(layout, e.role)
                    )));
                }
            }
        }
        if let Some(prev) = out
            .iter()
            .find(|d| d.host == host || (e.logical.is_some() && d.logical == e.logical))
        {
            let also = match &prev.logical {
                Some(logical) => format!("{} {logical}", prev.role),
                None => prev.role.to_string(),
            };
            return Err(err(format!(
                "{at}: {host} is declared twice (also as {also}); keep one entry per host"
            )));
        }
        out.push(DeclaredRole {
            host,
            role: e.role,
            logical: e.logical,
        });
    }
    Ok(out)
}

fn names(layout: &ClusterLayout, role: HostRole) -> String {
    layout
        .hosts_for(role)
        .iter()
        .map(|h| h.name.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks `--assign` rules: each names a role the cluster has hosts for, and a MAC is given one
/// role, whether by two rules or by a rule and the roles file.
pub(super) fn check_role_rules(
    rules: &[RoleRule],
    layout: &ClusterLayout,
    declared: &[DeclaredRole],
) -> Result<Vec<RoleRule>, HaClusterError> {
    let invalid = |problem: String, fix: String| {
        HaClusterError::Invalid(ValidationError::new("--assign", problem, fix))
    };
    for (i, rule) in rules.iter().enumerate() {
        if layout.hosts_for(rule.role).is_empty() {
            return Err(invalid(
                format!("{rule}: the cluster declares no {} hosts", rule.role),
                "give the rule to a role the cluster has (bootstrap, control-plane or worker hosts it declares), or drop it".into(),
            ));
        }
        let HostMatch::Mac(mac) = &rule.matcher else {
            continue;
        };
        if let Some(other) = rules[..i].iter().find(|r| r.matcher == rule.matcher) {
            return Err(invalid(
                format!("{other} and {rule} both name MAC {mac}"),
                "give each MAC one --assign rule".into(),
            ));
        }
        if let Some(d) = declared
            .iter()
            .find(|d| d.host == HostSelector::Mac(*mac) && d.role != rule.role)
        {
            return Err(invalid(
                format!(
                    "{rule} gives MAC {mac} a role the roles file gives as {}",
                    d.role
                ),
                "keep one role per machine: drop the rule or the roles file's entry".into(),
            ));
        }
    }
    Ok(rules.to_vec())
}
