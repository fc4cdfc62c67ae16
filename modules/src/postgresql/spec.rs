//! The parameters both PostgreSQL Scores share, as a user writes them, and their validation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use harmony::domain::ValidationError;
use harmony::domain::capability::{ComputeResources, PostgresCluster};
use harmony::infra::cnpg::versions::{self, UnknownVersion};
use harmony::types::{Dns1123Label, Quantity};

/// Major versions the CloudNativePG operand images exist for.
pub const SUPPORTED_MAJORS: std::ops::RangeInclusive<u32> = 13..=18;

/// CPU and memory as quantities (`500m`, `1Gi`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceList {
    /// CPU (`500m`, `2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory (`1Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

/// Requests and limits of each instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourcesSpec {
    /// What the scheduler reserves.
    #[serde(default)]
    pub requests: ResourceList,
    /// The ceiling.
    #[serde(default)]
    pub limits: ResourceList,
}

/// A PostgreSQL cluster's shape: version, size and resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    /// PostgreSQL version: exactly `"17.4"`, or a major (`"17"`), which pins the newest minor
    /// Harmony knows so that every site runs the same image.
    #[schemars(length(max = 16))]
    pub version: String,
    /// Instances per site (one primary, the rest standbys).
    #[serde(default = "one")]
    pub instances: u32,
    /// Volume size per instance (`10Gi`).
    pub storage: String,
    /// CPU and memory per instance.
    #[serde(default)]
    pub resources: ResourcesSpec,
    /// Operand image per major version (`"17": "registry.example.com/postgresql:17.6"`); majors
    /// not listed use CloudNativePG's image of the exact version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image_catalog: BTreeMap<String, String>,
}

fn one() -> u32 {
    1
}

impl ClusterSpec {
    /// PostgreSQL 17, one instance, `storage`, no resource settings.
    pub fn new(storage: impl Into<String>) -> Self {
        Self {
            version: "17".into(),
            instances: 1,
            storage: storage.into(),
            resources: ResourcesSpec::default(),
            image_catalog: BTreeMap::new(),
        }
    }

    /// The major version, or an error naming `version`.
    pub fn major(&self) -> Result<u32, ValidationError> {
        self.parsed_version().map(|(major, _)| major)
    }

    /// `version` as (major, minor when given), or an error naming `version`.
    fn parsed_version(&self) -> Result<(u32, Option<u32>), ValidationError> {
        let bad = |problem: String| {
            ValidationError::new(
                "version",
                problem,
                format!(
                    "give a PostgreSQL major version from {} to {}, such as \"17\", or an exact version such as \"17.4\"",
                    SUPPORTED_MAJORS.start(),
                    SUPPORTED_MAJORS.end()
                ),
            )
        };
        let mut parts = self.version.split('.');
        let major: u32 = parts
            .next()
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| bad(format!("{:?} is not a version number", self.version)))?;
        let minor = match parts.next() {
            None => None,
            Some(m) => Some(
                m.parse::<u32>()
                    .map_err(|_| bad(format!("{:?} is not MAJOR or MAJOR.MINOR", self.version)))?,
            ),
        };
        if parts.next().is_some() {
            return Err(bad(format!(
                "{:?} is not MAJOR or MAJOR.MINOR",
                self.version
            )));
        }
        if !SUPPORTED_MAJORS.contains(&major) {
            return Err(bad(format!("PostgreSQL {major} is not supported")));
        }
        Ok((major, minor))
    }

    /// The operand image `version` stands for: the `imageCatalog` entry of its major, else
    /// CloudNativePG's image of exactly that minor, or of the newest known minor when `version`
    /// names only the major (so every site runs the same minor).
    fn image(&self, major: u32, minor: Option<u32>) -> Result<String, ValidationError> {
        let field = format!("imageCatalog.{major}");
        let listed = self
            .image_catalog
            .iter()
            .find(|(key, _)| key.parse::<u32>().ok() == Some(major));
        if let Some((_, image)) = listed {
            if let (Some(minor), Some(tagged)) = (minor, tagged_minor(image, major))
                && tagged != minor
            {
                return Err(ValidationError::new(
                    field,
                    format!(
                        "{image:?} is tagged PostgreSQL {major}.{tagged}, but version is {:?}",
                        self.version
                    ),
                    format!(
                        "set version to \"{major}.{tagged}\", or map {major} to an image of {major}.{minor}"
                    ),
                ));
            }
            return Ok(image.clone());
        }
        match versions::resolve(major, minor) {
            Ok(exact) => Ok(exact.image()),
            Err(UnknownVersion::Minor { asked, known }) => {
                let listed: Vec<String> = known.iter().map(ToString::to_string).collect();
                let newest = known.last().map(ToString::to_string).unwrap_or_default();
                Err(ValidationError::new(
                    "version",
                    format!("Harmony knows no CloudNativePG image of PostgreSQL {asked}"),
                    format!(
                        "use a known {major} minor ({}), or \"{major}\" for the newest ({newest}, pinned so every site runs the same), or map \"{major}\" to your own image in imageCatalog",
                        listed.join(", ")
                    ),
                ))
            }
            Err(UnknownVersion::Major(_)) => Err(ValidationError::new(
                "version",
                format!("Harmony knows no CloudNativePG image of PostgreSQL {major}"),
                format!("map \"{major}\" to an image in imageCatalog"),
            )),
        }
    }

    /// The typed cluster for `name` in `namespace`, or the first problem, naming its field.
    pub fn resolve(&self, name: &str, namespace: &str) -> Result<PostgresCluster, ValidationError> {
        let name = cluster_name(name)?;
        let namespace = Dns1123Label::parse(namespace).map_err(|e| {
            ValidationError::new(
                "namespace",
                e.to_string(),
                "use a DNS-1123 label such as \"tenant-a\"",
            )
        })?;
        let (major_version, minor) = self.parsed_version()?;
        if self.instances == 0 {
            return Err(ValidationError::new(
                "instances",
                "is 0",
                "give at least 1 instance (1 primary; more adds standbys)",
            ));
        }
        let storage = quantity("storage", &self.storage)?;
        let q = |field: &str, v: &Option<String>| -> Result<Option<Quantity>, ValidationError> {
            v.as_deref().map(|s| quantity(field, s)).transpose()
        };
        let r = &self.resources;
        let resources = ComputeResources {
            cpu_request: q("resources.requests.cpu", &r.requests.cpu)?,
            memory_request: q("resources.requests.memory", &r.requests.memory)?,
            cpu_limit: q("resources.limits.cpu", &r.limits.cpu)?,
            memory_limit: q("resources.limits.memory", &r.limits.memory)?,
        };
        for (what, request, limit) in [
            ("cpu", &resources.cpu_request, &resources.cpu_limit),
            ("memory", &resources.memory_request, &resources.memory_limit),
        ] {
            if let (Some(req), Some(lim)) = (request, limit)
                && req.value() > lim.value()
            {
                return Err(ValidationError::new(
                    format!("resources.requests.{what}"),
                    format!(
                        "request {req} is greater than the limit {lim} (the operator refuses it)"
                    ),
                    format!("lower resources.requests.{what} or raise resources.limits.{what}"),
                ));
            }
        }
        for (major, value) in &self.image_catalog {
            let field = format!("imageCatalog.{major}");
            major.parse::<u32>().map_err(|_| {
                ValidationError::new(
                    &field,
                    format!("{major:?} is not a major version"),
                    "key the catalogue by major version, e.g. \"17\"",
                )
            })?;
            if value.trim().is_empty() || value.contains(char::is_whitespace) {
                return Err(ValidationError::new(
                    &field,
                    format!("{value:?} is not an image reference"),
                    "give an image such as \"ghcr.io/cloudnative-pg/postgresql:17.6-standard-trixie\"",
                ));
            }
        }
        let image = Some(self.image(major_version, minor)?);
        Ok(PostgresCluster {
            name,
            namespace,
            major_version,
            image,
            instances: self.instances,
            storage,
            resources,
            server_alt_dns_names: Vec::new(),
            wal_keep_size: None,
        })
    }
}

/// A CloudNativePG cluster name: a DNS-1035 label of at most 50 characters (the operator
/// derives Service, Pod and Job names from it).
fn cluster_name(name: &str) -> Result<Dns1123Label, ValidationError> {
    let fix = "use at most 50 lower-case letters, digits and '-', starting with a letter, such as \"finance-db\"";
    let label =
        Dns1123Label::parse(name).map_err(|e| ValidationError::new("name", e.to_string(), fix))?;
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(ValidationError::new(
            "name",
            format!("{name:?} does not start with a letter (Service names must)"),
            fix,
        ));
    }
    if name.len() > 50 {
        return Err(ValidationError::new(
            "name",
            format!(
                "{name:?} has {} characters; the operator allows 50",
                name.len()
            ),
            fix,
        ));
    }
    Ok(label)
}

/// The minor of `major` an image's tag starts with (`17.6` in `...postgresql:17.6-standard`),
/// if the tag says one; digests and registry ports are not tags.
fn tagged_minor(image: &str, major: u32) -> Option<u32> {
    let name = image.split('@').next()?;
    let tag = name.rsplit('/').next()?.split_once(':')?.1;
    let rest = tag.strip_prefix(&format!("{major}."))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn quantity(field: &str, value: &str) -> Result<Quantity, ValidationError> {
    Quantity::parse(value).map_err(|e| {
        ValidationError::new(
            field,
            e.to_string(),
            "write a quantity such as \"10Gi\", \"1Gi\" or \"500m\"",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ClusterSpec {
        let mut s = ClusterSpec::new("10Gi");
        s.resources.requests = ResourceList {
            cpu: Some("500m".into()),
            memory: Some("1Gi".into()),
        };
        s
    }

    #[test]
    fn resolves_a_valid_spec() {
        let c = spec().resolve("finance-db", "tenant-a").unwrap();
        assert_eq!(
            (c.name.as_str(), c.namespace.as_str(), c.major_version),
            ("finance-db", "tenant-a", 17)
        );
        assert_eq!(c.resources.cpu_request.unwrap().as_str(), "500m");
        // A bare major pins the newest known minor, never the floating tag.
        assert_eq!(
            c.image.as_deref(),
            Some(versions::newest(17).unwrap().image().as_str())
        );
    }

    #[test]
    fn an_exact_version_renders_exactly_its_image() {
        let mut s = spec();
        s.version = "17.4".into();
        let c = s.resolve("db", "ns").unwrap();
        assert_eq!(c.major_version, 17);
        assert_eq!(
            c.image.as_deref(),
            Some("ghcr.io/cloudnative-pg/postgresql:17.4")
        );
    }

    #[test]
    fn an_unknown_minor_is_refused_listing_the_known_ones() {
        let mut s = spec();
        s.version = "17.99".into();
        let e = s.resolve("db", "ns").unwrap_err();
        assert_eq!(e.field, "version");
        assert!(e.problem.contains("17.99"), "{e}");
        for needle in [
            "17.0, 17.1",
            "17.11",
            "\"17\" for the newest",
            "imageCatalog",
        ] {
            assert!(e.fix.contains(needle), "{needle}: {e}");
        }
        // The catalogue is the way to a minor Harmony does not know yet.
        s.image_catalog
            .insert("17".into(), "registry.example.com/pg:17.99".into());
        assert_eq!(
            s.resolve("db", "ns").unwrap().image.as_deref(),
            Some("registry.example.com/pg:17.99")
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let field = |s: ClusterSpec, name: &str| s.resolve(name, "tenant-a").unwrap_err().field;
        assert_eq!(field(spec(), "Finance_DB"), "name");
        assert_eq!(field(spec(), "1db"), "name");
        assert_eq!(field(spec(), &"a".repeat(51)), "name");
        assert_eq!(
            spec().resolve("db", "Tenant A").unwrap_err().field,
            "namespace"
        );
        let mut s = spec();
        s.version = "seventeen".into();
        assert_eq!(field(s, "db"), "version");
        let mut s = spec();
        s.version = "12".into();
        let e = s.resolve("db", "ns").unwrap_err();
        assert!(e.to_string().contains("13 to 18"), "{e}");
        let mut s = spec();
        s.storage = "10GB".into();
        assert_eq!(field(s, "db"), "storage");
        let mut s = spec();
        s.resources.requests.cpu = Some("half".into());
        assert_eq!(field(s, "db"), "resources.requests.cpu");
        let mut s = spec();
        s.instances = 0;
        assert_eq!(field(s, "db"), "instances");
    }

    #[test]
    fn a_request_above_its_limit_is_refused_as_the_operator_would() {
        let mut s = spec();
        s.resources.limits.memory = Some("512Mi".into());
        let e = s.resolve("db", "ns").unwrap_err();
        assert_eq!(e.field, "resources.requests.memory");
        s.resources.limits.memory = Some("2Gi".into());
        s.resources.limits.cpu = Some("1".into());
        assert!(s.resolve("db", "ns").is_ok());
    }

    #[test]
    fn the_image_catalogue_picks_the_major() {
        let mut s = spec();
        s.image_catalog
            .insert("17".into(), "registry.example.com/pg:17.6".into());
        s.image_catalog
            .insert("16".into(), "registry.example.com/pg:16.9".into());
        assert_eq!(
            s.resolve("db", "ns").unwrap().image.as_deref(),
            Some("registry.example.com/pg:17.6")
        );
        s.image_catalog.insert("x".into(), "y".into());
        assert_eq!(s.resolve("db", "ns").unwrap_err().field, "imageCatalog.x");
    }

    #[test]
    fn a_catalogue_image_of_another_minor_than_the_version_is_refused() {
        let mut s = spec();
        s.version = "17.4".into();
        s.image_catalog.insert(
            "17".into(),
            "registry.example.com:5000/pg:17.6-standard-trixie@sha256:ab".into(),
        );
        let e = s.resolve("db", "ns").unwrap_err();
        assert_eq!(e.field, "imageCatalog.17");
        assert!(e.fix.contains("\"17.6\""), "{e}");
        s.version = "17.6".into();
        assert!(s.resolve("db", "ns").is_ok());
        // A tag that names no minor is the user's business.
        s.image_catalog
            .insert("17".into(), "registry.example.com/pg:stable".into());
        assert!(s.resolve("db", "ns").is_ok());
    }

    #[test]
    fn every_supported_major_has_images() {
        assert_eq!(
            versions::known_majors(),
            SUPPORTED_MAJORS.collect::<Vec<_>>()
        );
    }
}
