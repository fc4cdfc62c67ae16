// HAClusterTopology offers every bare-metal capability an OKD bring-up needs, so OKD Scores can
// be registered on it (checked at compile time only: building the topology needs its services).
use harmony::domain::{Inventory, Maestro};
use harmony::infra::okd::HAClusterTopology;
use harmony_modules::okd::{OkdInstallationReportScore, OkdSanityCheckScore};

fn register(topology: HAClusterTopology) {
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    maestro.register(vec![Box::new(OkdSanityCheckScore), Box::new(OkdInstallationReportScore)]);
}

fn main() {
    let _ = register as fn(HAClusterTopology);
}
