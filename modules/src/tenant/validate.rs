//! Checking a tenant's declaration before anything is sent: names are DNS-1123 labels, quantities
//! parse, project names and namespaces are unique. Each error names the field and the fix.

use std::collections::BTreeMap;

use harmony::domain::ValidationError;
use harmony::domain::capability::ProjectQuota;
use harmony_types::{Dns1123Label, Dns1123Subdomain, Quantity, RegionId};

use super::resource::TenantSpec;

/// How fields are named in errors: the Score's own names, or the resource's (`metadata.name`,
/// `spec.caps...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    /// The tenant's name field.
    pub tenant: &'static str,
    /// Prefix of the spec's fields (`""` or `"spec."`).
    pub prefix: &'static str,
}

/// A project as declared, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DeclaredProject {
    /// Its name.
    pub name: Dns1123Label,
    /// Its namespace as written (`None`: the default).
    pub namespace: Option<Dns1123Label>,
    /// The namespace it has: the one written, or `<tenant>-<project>`.
    pub effective_namespace: String,
    /// Its quota per region.
    pub quotas: BTreeMap<RegionId, ProjectQuota>,
}

/// A tenant's declaration, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Declared {
    /// The tenant.
    pub tenant: Dns1123Label,
    /// Its cap per region.
    pub caps: BTreeMap<RegionId, ProjectQuota>,
    /// Its projects, in declaration order.
    pub projects: Vec<DeclaredProject>,
}

fn label(field: &str, value: &str, example: &str) -> Result<Dns1123Label, ValidationError> {
    Dns1123Label::parse(value).map_err(|e| {
        ValidationError::new(
            field,
            e.to_string(),
            format!("use a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters) such as \"{example}\""),
        )
    })
}

fn region(field: &str, value: &str) -> Result<RegionId, ValidationError> {
    RegionId::parse(value).map_err(|e| {
        ValidationError::new(
            field,
            e.to_string(),
            "key the map by region name, a DNS-1123 label such as \"eu-west\"",
        )
    })
}

/// Checks each quantity and object count of `quota` (at `field`).
fn quota(field: &str, q: &ProjectQuota) -> Result<(), ValidationError> {
    for (name, value) in [
        ("cpu", &q.cpu),
        ("memory", &q.memory),
        ("storage", &q.storage),
    ] {
        let Some(v) = value else { continue };
        let at = format!("{field}.{name}");
        let fix = "write a non-negative Kubernetes quantity such as \"500m\", \"4\" or \"8Gi\"";
        let parsed =
            Quantity::parse(v).map_err(|e| ValidationError::new(&at, e.to_string(), fix))?;
        let unit = v.trim_start_matches(|c: char| c.is_ascii_digit() || "+-.".contains(c));
        if parsed.as_str().starts_with('-') || unit == "n" || unit == "u" {
            return Err(ValidationError::new(
                &at,
                format!("{v:?} is negative or below a thousandth (n, u) of a unit"),
                fix,
            ));
        }
    }
    for kind in q.objects.keys() {
        Dns1123Subdomain::parse(kind).map_err(|e| {
            ValidationError::new(
                format!("{field}.objects.{kind}"),
                e.to_string(),
                "key object counts by resource name, such as \"configmaps\", \"pods\" or \"services.loadbalancers\"",
            )
        })?;
    }
    Ok(())
}

/// Every region's quota of a map at `field`, checked.
fn quotas(
    field: &str,
    map: &BTreeMap<String, ProjectQuota>,
) -> Result<BTreeMap<RegionId, ProjectQuota>, ValidationError> {
    map.iter()
        .map(|(r, q)| {
            let at = format!("{field}.{r}");
            let id = region(&at, r)?;
            quota(&at, q)?;
            Ok((id, q.clone()))
        })
        .collect()
}

/// Checks `tenant`'s declaration `spec`, naming fields as `fields` says.
pub(super) fn check(
    tenant: &str,
    spec: &TenantSpec,
    fields: Fields,
) -> Result<Declared, ValidationError> {
    let p = fields.prefix;
    let tenant = label(fields.tenant, tenant, "acme")?;
    let caps = quotas(&format!("{p}caps"), &spec.caps)?;
    let mut projects: Vec<DeclaredProject> = Vec::new();
    for (i, project) in spec.projects.iter().enumerate() {
        let at = format!("{p}projects[{i}]");
        let name = label(&format!("{at}.name"), &project.name, "web")?;
        if let Some(j) = projects.iter().position(|d| d.name == name) {
            return Err(ValidationError::new(
                format!("{at}.name"),
                format!("project \"{name}\" is declared twice (also {p}projects[{j}])"),
                "declare each project once; merge the two entries",
            ));
        }
        let namespace = match &project.namespace {
            Some(ns) => Some(label(&format!("{at}.namespace"), ns, "acme-web")?),
            None => None,
        };
        let effective_namespace = match &namespace {
            Some(ns) => ns.to_string(),
            None => {
                let default = format!("{tenant}-{name}");
                if default.len() > 63 {
                    return Err(ValidationError::new(
                        format!("{at}.namespace"),
                        format!(
                            "the default namespace \"{default}\" is {} characters, over the 63 a namespace may have",
                            default.len()
                        ),
                        format!("give a shorter namespace in {at}.namespace"),
                    ));
                }
                default
            }
        };
        if let Some(j) = projects
            .iter()
            .position(|d| d.effective_namespace == effective_namespace)
        {
            return Err(ValidationError::new(
                format!("{at}.namespace"),
                format!(
                    "namespace \"{effective_namespace}\" is also {p}projects[{j}]'s; a namespace holds one project"
                ),
                format!("give {at}.namespace another name"),
            ));
        }
        let quotas = quotas(&format!("{at}.quotas"), &project.quotas)?;
        projects.push(DeclaredProject {
            name,
            namespace,
            effective_namespace,
            quotas,
        });
    }
    Ok(Declared {
        tenant,
        caps,
        projects,
    })
}

#[cfg(test)]
mod tests {
    use super::super::resource::TenantProjectSpec;
    use super::*;

    const SCORE: Fields = Fields {
        tenant: "tenant",
        prefix: "",
    };
    const RESOURCE: Fields = Fields {
        tenant: "metadata.name",
        prefix: "spec.",
    };

    fn q(cpu: &str) -> ProjectQuota {
        ProjectQuota {
            cpu: Some(cpu.into()),
            ..ProjectQuota::default()
        }
    }

    fn project(name: &str, namespace: Option<&str>) -> TenantProjectSpec {
        TenantProjectSpec {
            name: name.into(),
            namespace: namespace.map(str::to_string),
            quotas: BTreeMap::from([("eu-west".to_string(), q("1"))]),
        }
    }

    fn spec(projects: Vec<TenantProjectSpec>) -> TenantSpec {
        TenantSpec {
            caps: BTreeMap::from([("eu-west".to_string(), q("4"))]),
            projects,
        }
    }

    fn field(tenant: &str, spec: &TenantSpec, fields: Fields) -> (String, String) {
        let e = check(tenant, spec, fields).unwrap_err();
        (e.field, e.fix)
    }

    #[test]
    fn a_good_declaration_is_checked_into_names_and_default_namespaces() {
        let d = check(
            "acme",
            &spec(vec![project("web", None), project("jobs", Some("batch"))]),
            SCORE,
        )
        .unwrap();
        assert_eq!(d.tenant.as_str(), "acme");
        assert_eq!(d.projects[0].effective_namespace, "acme-web");
        assert_eq!(d.projects[0].namespace, None);
        assert_eq!(d.projects[1].effective_namespace, "batch");
        assert_eq!(d.caps.keys().next().unwrap().as_str(), "eu-west");
    }

    #[test]
    fn bad_names_are_refused_naming_the_field_and_the_fix() {
        let (f, fix) = field("Acme", &spec(vec![]), RESOURCE);
        assert_eq!(f, "metadata.name");
        assert!(fix.contains("DNS-1123 label"), "{fix}");
        assert_eq!(field("Acme", &spec(vec![]), SCORE).0, "tenant");
        let bad_project = spec(vec![project("web_1", None)]);
        assert_eq!(
            field("acme", &bad_project, RESOURCE).0,
            "spec.projects[0].name"
        );
        let bad_ns = spec(vec![project("web", Some("Web"))]);
        assert_eq!(field("acme", &bad_ns, SCORE).0, "projects[0].namespace");
        let mut bad_region = spec(vec![]);
        bad_region.caps.insert("EU".into(), q("1"));
        let (f, fix) = field("acme", &bad_region, RESOURCE);
        assert_eq!(f, "spec.caps.EU");
        assert!(fix.contains("region name"), "{fix}");
    }

    #[test]
    fn quantities_must_parse_and_be_non_negative() {
        for (bad, problem) in [("4 cores", "suffix"), ("-1", "negative"), ("5u", "below")] {
            let mut s = spec(vec![project("web", None)]);
            s.projects[0].quotas.insert("eu-west".into(), q(bad));
            let e = check("acme", &s, RESOURCE).unwrap_err();
            assert_eq!(e.field, "spec.projects[0].quotas.eu-west.cpu", "{bad}");
            assert!(e.problem.contains(problem), "{bad}: {e}");
            assert!(e.fix.contains("quantity"), "{e}");
        }
        let mut s = spec(vec![]);
        s.caps
            .get_mut("eu-west")
            .unwrap()
            .objects
            .insert("Pods!".into(), 3);
        assert_eq!(field("acme", &s, SCORE).0, "caps.eu-west.objects.Pods!");
    }

    #[test]
    fn projects_and_namespaces_are_unique_and_default_namespaces_fit() {
        let twice = spec(vec![project("web", None), project("web", Some("other"))]);
        let e = check("acme", &twice, SCORE).unwrap_err();
        assert_eq!(e.field, "projects[1].name");
        assert!(e.problem.contains("projects[0]"), "{e}");
        let shared = spec(vec![project("web", None), project("api", Some("acme-web"))]);
        let e = check("acme", &shared, SCORE).unwrap_err();
        assert_eq!(e.field, "projects[1].namespace");
        let long = "a".repeat(40);
        let e = check(&long, &spec(vec![project(&long, None)]), SCORE).unwrap_err();
        assert_eq!(e.field, "projects[0].namespace");
        assert!(e.problem.contains("81 characters"), "{e}");
        assert!(e.fix.contains("shorter namespace"), "{e}");
    }
}
