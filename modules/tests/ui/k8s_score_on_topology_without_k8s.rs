// A topology with no K8sClient capability: registering a Kubernetes Score must not compile.
use async_trait::async_trait;
use harmony::domain::{ExecutionMode, Inventory, Maestro, PreparationError, PreparationOutcome, Topology};
use harmony_modules::k8s::NamespaceScore;
use harmony_types::Dns1123Label;

struct BareMetalOnly;

#[async_trait]
impl Topology for BareMetalOnly {
    fn name(&self) -> &str {
        "bare-metal-only"
    }
    fn mode(&self) -> ExecutionMode {
        ExecutionMode::Render
    }
    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        Ok(PreparationOutcome::Noop)
    }
}

fn main() {
    let mut maestro = Maestro::new(Inventory::empty(), BareMetalOnly);
    maestro.register(vec![Box::new(NamespaceScore::new(Dns1123Label::parse("shop").unwrap()))]);
}
