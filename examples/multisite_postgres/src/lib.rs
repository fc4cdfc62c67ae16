//! The classic multi-site PostgreSQL scenario: cluster `finance-db` in namespace `tenant-a`,
//! 10Gi, 500m CPU / 1Gi memory, primary on `site-paris` (exposed through an OpenShift
//! passthrough Route), replica on `site-newyork`.

use harmony_modules::postgresql::{MultisitePostgreSQLScore, PrimarySite, ResourceList};

/// The sites of the example's topology.
pub const SITES: [&str; 2] = ["site-paris", "site-newyork"];

/// The OpenShift apps domain of the primary site; the Route host is derived from it.
pub const PARIS_APPS_DOMAIN: &str = "apps.site-paris.example.com";

/// The example's Score for PostgreSQL `version` (a major such as `"17"`).
pub fn finance_db(version: &str) -> MultisitePostgreSQLScore {
    let mut score = MultisitePostgreSQLScore::new(
        "finance-db",
        "tenant-a",
        "10Gi",
        "site-paris",
        "",
        &["site-newyork"],
    );
    score.spec.cluster.version = version.to_string();
    score.spec.cluster.resources.requests = ResourceList {
        cpu: Some("500m".into()),
        memory: Some("1Gi".into()),
    };
    score.spec.topology.primary = PrimarySite {
        site: "site-paris".into(),
        host: None,
        apps_domain: Some(PARIS_APPS_DOMAIN.into()),
    };
    score
}

/// Splits `--pg-version V` (or `--pg-version=V`) off the command line; the rest goes to the CLI.
pub fn split_version_flag(args: Vec<String>) -> Result<(String, Vec<String>), String> {
    let mut version = "17".to_string();
    let mut rest = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--pg-version" {
            version = it.next().ok_or("--pg-version needs a value, such as 17")?;
        } else if let Some(v) = arg.strip_prefix("--pg-version=") {
            version = v.to_string();
        } else {
            rest.push(arg);
        }
    }
    Ok((version, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_flag_is_split_off() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (v, rest) = split_version_flag(args(&["prog", "--pg-version", "15", "--yes"])).unwrap();
        assert_eq!((v.as_str(), rest), ("15", args(&["prog", "--yes"])));
        let (v, _) = split_version_flag(args(&["prog", "--pg-version=16"])).unwrap();
        assert_eq!(v, "16");
        assert_eq!(split_version_flag(args(&["prog"])).unwrap().0, "17");
        assert!(split_version_flag(args(&["prog", "--pg-version"])).is_err());
    }
}
