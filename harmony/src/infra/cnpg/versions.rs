//! PostgreSQL versions CloudNativePG publishes operand images for, and the image of each.
//!
//! A cluster's image must be exact: a floating tag (`postgresql:17`) lets two sites, or two
//! instances of one site, pull different minors. So every version resolves to the image of one
//! minor: `17.4` to `ghcr.io/cloudnative-pg/postgresql:17.4`, and a bare major to the newest
//! minor listed here (so upgrading Harmony can raise it, and `--plan` shows that as an update
//! of `spec.imageName`).
//!
//! Source of the table: the build definitions of <https://github.com/cloudnative-pg/postgres-containers>,
//! whose pipelines publish the `MAJOR.MINOR` tag for every minor they build: the legacy pipeline's
//! `Debian/<major>/.versions.json` (`POSTGRES_IMAGE_VERSION`, tags from
//! `.github/generate-strategy.sh`) up to September 2025, then `postgreSQLVersions` in
//! `docker-bake.hcl` (rolling tags from `getRollingTags`), cross-checked with the image catalogs
//! of <https://github.com/cloudnative-pg/artifacts> (`image-catalogs/`), as of their 2026-08-22
//! snapshot.
//! Minors that were never built are absent (18.5), as are minors older than those definitions.
//! The `MAJOR.MINOR` tag is CloudNativePG's `system` image on Debian bullseye, the image the
//! former default `postgresql:MAJOR` tag pointed at, so pinning a minor changes no operating
//! system under existing data. CloudNativePG now recommends `MAJOR.MINOR-standard-trixie` (or
//! `-minimal-`); use `imageCatalog` for those or for a private registry.

use std::ops::RangeInclusive;

/// The repository of CloudNativePG's PostgreSQL operand images.
pub const IMAGE_REPOSITORY: &str = "ghcr.io/cloudnative-pg/postgresql";

/// Per major, the minors with a published `MAJOR.MINOR` image, oldest first, none skipped
/// within a range.
const KNOWN: &[(u32, &[RangeInclusive<u32>])] = &[
    (13, &[6..=22]),
    (14, &[2..=24]),
    (15, &[0..=19]),
    (16, &[0..=15]),
    (17, &[0..=11]),
    // 18.5 was never built: the pipeline went from 18.4 to 18.6.
    (18, &[0..=4, 6..=6]),
];

/// An exact PostgreSQL version with an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactVersion {
    /// Major (`17`).
    pub major: u32,
    /// Minor (`4`).
    pub minor: u32,
}

impl ExactVersion {
    /// CloudNativePG's operand image for exactly this version.
    pub fn image(&self) -> String {
        format!("{IMAGE_REPOSITORY}:{}.{}", self.major, self.minor)
    }
}

impl std::fmt::Display for ExactVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The majors with at least one known image, oldest first.
pub fn known_majors() -> Vec<u32> {
    KNOWN.iter().map(|(major, _)| *major).collect()
}

/// The minors of `major` with a known image, oldest first; empty for an unknown major.
pub fn known_minors(major: u32) -> Vec<u32> {
    KNOWN
        .iter()
        .filter(|(m, _)| *m == major)
        .flat_map(|(_, ranges)| ranges.iter().cloned().flatten())
        .collect()
}

/// The newest known minor of `major`, which a version naming only the major pins.
pub fn newest(major: u32) -> Option<ExactVersion> {
    known_minors(major)
        .last()
        .map(|&minor| ExactVersion { major, minor })
}

/// Why a version has no image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownVersion {
    /// No image of this major at all.
    Major(u32),
    /// The major is known, this minor is not; `known` lists the minors that are, as `17.0`.
    Minor {
        /// The version asked for.
        asked: ExactVersion,
        /// The known versions of that major, oldest first.
        known: Vec<ExactVersion>,
    },
}

/// The exact version `major` (newest known minor) or `major.minor` stands for.
pub fn resolve(major: u32, minor: Option<u32>) -> Result<ExactVersion, UnknownVersion> {
    let minors = known_minors(major);
    let Some(&newest) = minors.last() else {
        return Err(UnknownVersion::Major(major));
    };
    match minor {
        None => Ok(ExactVersion {
            major,
            minor: newest,
        }),
        Some(minor) if minors.contains(&minor) => Ok(ExactVersion { major, minor }),
        Some(minor) => Err(UnknownVersion::Minor {
            asked: ExactVersion { major, minor },
            known: minors
                .into_iter()
                .map(|minor| ExactVersion { major, minor })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_version_renders_exactly_its_image() {
        let v = resolve(17, Some(4)).unwrap();
        assert_eq!(v.image(), "ghcr.io/cloudnative-pg/postgresql:17.4");
        assert_eq!(resolve(18, Some(0)).unwrap().to_string(), "18.0");
    }

    #[test]
    fn a_bare_major_pins_its_newest_known_minor() {
        assert_eq!(resolve(17, None).unwrap(), newest(17).unwrap());
        assert_eq!(
            resolve(17, None).unwrap().image(),
            "ghcr.io/cloudnative-pg/postgresql:17.11"
        );
        for major in known_majors() {
            let pinned = resolve(major, None).unwrap();
            assert!(!pinned.image().ends_with(&format!(":{major}")), "{pinned}");
        }
    }

    #[test]
    fn unknown_minors_list_the_known_ones_and_unbuilt_minors_are_unknown() {
        let Err(UnknownVersion::Minor { asked, known }) = resolve(17, Some(99)) else {
            panic!("17.99 must be unknown");
        };
        assert_eq!(asked.to_string(), "17.99");
        assert_eq!(known.first().unwrap().to_string(), "17.0");
        assert_eq!(known.last().unwrap().to_string(), "17.11");
        assert_eq!(known.len(), 12);
        assert!(matches!(
            resolve(18, Some(5)),
            Err(UnknownVersion::Minor { .. })
        ));
        assert_eq!(resolve(12, None), Err(UnknownVersion::Major(12)));
        assert_eq!(known_majors(), [13, 14, 15, 16, 17, 18]);
    }
}
