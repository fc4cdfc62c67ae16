//! The classic multi-site PostgreSQL scenario: cluster `finance-db` in namespace `tenant-a`,
//! 10Gi, 500m CPU / 1Gi memory, primary on `site-paris` (exposed through an OpenShift
//! passthrough Route), replica on `site-newyork`.

use std::process::ExitCode;

use harmony::domain::{Inventory, RunContext, Score};
use harmony::infra::default_topology::DefaultTopology;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony_modules::postgresql::{
    MIN_MAJOR_FOR_PASSTHROUGH, MultisitePostgreSQLScore, PrimarySite, ResourceList,
    SUPPORTED_MAJORS,
};

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

/// The example's own flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Render PostgreSQL `finance-db` on site-paris (primary) and site-newyork (replica), or apply it with --kubeconfig FILE whose contexts are named after the sites"
)]
pub struct Flags {
    /// The PostgreSQL major on both sites (a passthrough Route needs 17 or later).
    #[arg(long, value_name = "MAJOR", default_value = "17")]
    pub pg_version: String,
}

/// Refuses a `--pg-version` the Score would refuse, naming the flag: the Score's message names
/// its `version` field, and its way out through `exposure` is not a flag of the example.
fn check_pg_version(given: &str, score: &MultisitePostgreSQLScore) -> Result<(), String> {
    let Err(e) =
        <MultisitePostgreSQLScore as Score<MultiSiteTopology<DefaultTopology>>>::validate(score)
    else {
        return Ok(());
    };
    if e.field != "version" {
        return Ok(());
    }
    let (min, max) = (MIN_MAJOR_FOR_PASSTHROUGH, SUPPORTED_MAJORS.end());
    let fix = if e.fix.contains("exposure") {
        format!(
            "give --pg-version {min} or newer (replicas then connect with sslnegotiation=direct), or, in your own program, set spec.exposure to loadBalancer to expose the primary through a LoadBalancer Service"
        )
    } else {
        format!(
            "{}; the example takes --pg-version {min} to {max}, as its primary is exposed through an OpenShift passthrough Route",
            e.fix
        )
    };
    Err(format!("--pg-version '{given}': {}; fix: {fix}", e.problem))
}

/// The `example-multisite-postgres` program: renders both sites, or applies them with
/// `--kubeconfig FILE` (each site is the context named after it).
pub async fn cli_main() -> ExitCode {
    harmony_cli::run_program(Inventory::empty(), |flags: Flags, ctx: &RunContext| {
        let score = finance_db(&flags.pg_version);
        check_pg_version(&flags.pg_version, &score)?;
        let topology = MultiSiteTopology::from_context("finance", &SITES, ctx)?;
        let scores: Vec<Box<dyn Score<MultiSiteTopology<DefaultTopology>>>> = vec![Box::new(score)];
        Ok::<_, String>((topology, scores))
    })
    .await
}
