//! Tenant `acme` of a Harmony control plane: a cap per region, and two projects, `shop` (a quota
//! in every region given) and `analytics` (a quota in the first region only), declared with
//! `TenantScore` on a `TenantAdminTopology` (the control plane's admin client, nothing else).
//!
//! ```
//! use example_tenants::{acme, parse_regions};
//!
//! let regions = parse_regions("eu-west,us-east").unwrap();
//! let spec = acme(&regions);
//! assert_eq!(spec.caps.len(), 2);
//! assert_eq!(spec.projects[0].quotas.len(), 2); // shop: both regions
//! assert_eq!(spec.projects[1].quotas.len(), 1); // analytics: the first one
//! ```

mod flags;
mod program;

pub use flags::{ENV_ADMIN_TOKEN_FILE, ENV_CONTROL_PLANE, FlagError, Flags, Regions};
pub use program::cli_main;

use std::collections::BTreeMap;

use harmony::domain::capability::ProjectQuota;
use harmony_modules::tenant::{Tenant, TenantProjectSpec, TenantScore, TenantSpec};
use harmony_types::RegionId;

/// The tenant this example declares.
pub const TENANT: &str = "acme";

/// The regions used when `--regions` is not given.
pub const DEFAULT_REGIONS: &str = "eu-west";

fn quota(cpu: &str, memory: &str, storage: &str, pods: u64) -> ProjectQuota {
    ProjectQuota {
        cpu: Some(cpu.into()),
        memory: Some(memory.into()),
        storage: Some(storage.into()),
        objects: BTreeMap::from([("pods".to_string(), pods)]),
    }
}

/// The `--regions` value (`eu-west` or `eu-west,us-east`): region names (DNS-1123 labels),
/// at least one, each once. The error names the flag, the value and the fix.
pub fn parse_regions(value: &str) -> Result<Vec<RegionId>, FlagError> {
    let bad = |problem: String| {
        FlagError {
        flag: "--regions",
        problem,
        fix: "give region names separated by commas, each a DNS-1123 label (lower-case letters, digits and '-'), such as --regions eu-west,us-east".into(),
    }
    };
    let mut regions: Vec<RegionId> = Vec::new();
    for name in value.split(',').map(str::trim) {
        let region = RegionId::parse(name).map_err(|e| bad(e.to_string()))?;
        if regions.contains(&region) {
            return Err(bad(format!("region \"{name}\" is given twice")));
        }
        regions.push(region);
    }
    Ok(regions)
}

/// What the example declares for `regions` (at least one): `acme`'s cap in each (8 CPUs, 16Gi,
/// 200Gi, 100 pods), project `shop` with a quota in each (4 CPUs, 8Gi, 100Gi, 50 pods), project
/// `analytics` with a quota in the first (2 CPUs, 4Gi, 50Gi, 20 pods). The projects take the
/// default namespaces `acme-shop` and `acme-analytics`.
pub fn acme(regions: &[RegionId]) -> TenantSpec {
    let each = |q: &ProjectQuota| -> BTreeMap<String, ProjectQuota> {
        regions
            .iter()
            .map(|r| (r.as_str().to_string(), q.clone()))
            .collect()
    };
    TenantSpec {
        caps: each(&quota("8", "16Gi", "200Gi", 100)),
        projects: vec![
            TenantProjectSpec {
                name: "shop".into(),
                namespace: None,
                quotas: each(&quota("4", "8Gi", "100Gi", 50)),
            },
            TenantProjectSpec {
                name: "analytics".into(),
                namespace: None,
                quotas: regions
                    .first()
                    .map(|r| (r.as_str().to_string(), quota("2", "4Gi", "50Gi", 20)))
                    .into_iter()
                    .collect(),
            },
        ],
    }
}

/// The Score that declares `spec` for [`TENANT`] on the control plane.
pub fn score(spec: TenantSpec) -> TenantScore {
    TenantScore::from_spec(TENANT, spec)
}

/// The same declaration as a `Tenant` resource, as the operator inside the control plane would
/// reconcile it (what the example prints when no control plane is given).
pub fn resource(spec: TenantSpec) -> Tenant {
    Tenant::new(TENANT, spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_labels_given_once() {
        let r = parse_regions("eu-west, us-east").unwrap();
        assert_eq!(
            r.iter().map(RegionId::as_str).collect::<Vec<_>>(),
            ["eu-west", "us-east"]
        );
        for (bad, problem) in [("EU", "\"EU\""), ("", "\"\""), ("a,a", "twice")] {
            let e = parse_regions(bad).unwrap_err();
            assert_eq!(e.flag, "--regions", "{bad}");
            assert!(e.problem.contains(problem), "{bad}: {e}");
            assert!(e.to_string().contains("--regions eu-west,us-east"), "{e}");
        }
    }

    #[test]
    fn the_declaration_fits_under_the_caps_and_validates() {
        let regions = parse_regions("eu-west,us-east").unwrap();
        let spec = acme(&regions);
        assert_eq!(spec.caps["us-east"].cpu.as_deref(), Some("8"));
        assert_eq!(spec.projects[0].name, "shop");
        assert_eq!(
            spec.projects[1].quotas.keys().collect::<Vec<_>>(),
            ["eu-west"]
        );
        let s = score(spec);
        let validate = <TenantScore as harmony::domain::Score<
            harmony::infra::tenant_admin_topology::TenantAdminTopology,
        >>::validate;
        validate(&s).unwrap();
    }
}
