// A PostgreSQL Score compiles on any Kubernetes topology, and a multisite PostgreSQL Score on
// named Kubernetes sites.
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::default_topology::DefaultTopology;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::render::RenderTopology;
use harmony_modules::postgresql::{MultisitePostgreSQLScore, PostgreSQLScore};

fn main() {
    let ctx = RunContext::default();
    let mut maestro = Maestro::new(Inventory::empty(), RenderTopology::from_context(&ctx));
    maestro.register(vec![Box::new(PostgreSQLScore::new("pg", "db", "10Gi"))]);
    let sites = MultiSiteTopology::<DefaultTopology>::from_context("pg", &["east", "west"], &ctx)
        .unwrap();
    let score = MultisitePostgreSQLScore::new("pg", "db", "10Gi", "east", "pg.east.example.com", &["west"]);
    let mut maestro = Maestro::new(Inventory::empty(), sites);
    maestro.register(vec![Box::new(score)]);
}
