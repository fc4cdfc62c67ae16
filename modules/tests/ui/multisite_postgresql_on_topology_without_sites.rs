// DefaultTopology is one Kubernetes site; a multisite PostgreSQL Score needs named sites
// (MultiSite): registering it on a single-site topology must not compile.
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::default_topology::DefaultTopology;
use harmony_modules::postgresql::MultisitePostgreSQLScore;

fn main() {
    let topology = DefaultTopology::from_context(&RunContext::default());
    let score = MultisitePostgreSQLScore::new("pg", "db", "10Gi", "east", "pg.east.example.com", &["west"]);
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    maestro.register(vec![Box::new(score)]);
}
