// Named sites that are bare-metal HA clusters have no Kubernetes and so no PostgreSQL: a
// multisite PostgreSQL Score on them must not compile.
use harmony::domain::{Inventory, Maestro};
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::okd::HAClusterTopology;
use harmony_modules::postgresql::MultisitePostgreSQLScore;

fn register(topology: MultiSiteTopology<HAClusterTopology>) {
    let score = MultisitePostgreSQLScore::new("pg", "db", "10Gi", "east", "pg.east.example.com", &["west"]);
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    maestro.register(vec![Box::new(score)]);
}

fn main() {
    let _ = register as fn(MultiSiteTopology<HAClusterTopology>);
}
