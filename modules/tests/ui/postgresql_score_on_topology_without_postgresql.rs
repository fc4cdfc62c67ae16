// The bare-metal HAClusterTopology has no Kubernetes and so no PostgreSQL capability:
// registering a PostgreSQL Score on it must not compile.
use harmony::domain::{Inventory, Maestro};
use harmony::infra::okd::HAClusterTopology;
use harmony_modules::postgresql::PostgreSQLScore;

fn register(topology: HAClusterTopology) {
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    maestro.register(vec![Box::new(PostgreSQLScore::new("pg", "db", "10Gi"))]);
}

fn main() {
    let _ = register as fn(HAClusterTopology);
}
