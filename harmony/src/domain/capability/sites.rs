//! Multi-site topologies: a map of site name to the topology of that site.

use super::super::operator::{Operator, Unattended};
use super::super::topology::Topology;
use super::super::validation::ValidationError;

/// Nobody to ask: confirmations are refused (no terminal, no `--yes`).
static NOBODY: Unattended = Unattended { assume_yes: false };

/// A topology made of named sites, each a topology of its own (one Kubernetes cluster, say).
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no named sites (`MultiSite`)",
    label = "this Score needs a topology that implements `MultiSite` (it acts on several sites by name)",
    note = "use `MultiSiteTopology` (`harmony::infra::multi_site::MultiSiteTopology`, e.g. `MultiSiteTopology<DefaultTopology>` with one site per `--site`) or implement `MultiSite` for `{Self}`"
)]
pub trait MultiSite: Send + Sync {
    /// The topology of one site.
    type Site: Topology;

    /// The site named `name`, if the topology has it.
    fn site(&self, name: &str) -> Option<&Self::Site>;

    /// Every site name, sorted.
    fn site_names(&self) -> Vec<String>;

    /// Who answers questions during the run (a terminal, `--yes`, or nobody): what a Score that
    /// must be confirmed asks. By default nobody, so such a Score is refused.
    fn operator(&self) -> &dyn Operator {
        &NOBODY
    }

    /// Fails naming `field` and listing the known sites when `name` is not one of them.
    fn check_site(&self, field: &str, name: &str) -> Result<(), ValidationError> {
        if self.site(name).is_some() {
            return Ok(());
        }
        let known = self.site_names();
        Err(ValidationError::new(
            field,
            format!("unknown site {name:?}"),
            if known.is_empty() {
                "add the site to the topology".to_string()
            } else {
                format!("use one of the topology's sites: {}", known.join(", "))
            },
        ))
    }
}
