//! `MultiSiteTopology`: named sites, each a topology of its own, prepared together.

use async_trait::async_trait;
use std::collections::BTreeMap;

use super::default_topology::DefaultTopology;
use super::either::EitherTopology;
use super::kube::{K8sTopology, KubeTarget};
use super::render::RenderTopology;
use crate::domain::capability::MultiSite;
use crate::domain::operator::{Operator, OperatorHandle};
use crate::domain::{ExecutionMode, PreparationError, PreparationOutcome, RunContext, Topology};
use harmony_types::Dns1123Label;

/// A map of site name to topology, for Scores that span sites (a primary here, replicas there).
pub struct MultiSiteTopology<S> {
    name: String,
    sites: BTreeMap<String, S>,
    operator: OperatorHandle,
}

impl<S: Topology> MultiSiteTopology<S> {
    /// A topology named `name` over `sites`.
    pub fn new(
        name: impl Into<String>,
        sites: impl IntoIterator<Item = (Dns1123Label, S)>,
    ) -> Self {
        Self {
            name: name.into(),
            sites: sites.into_iter().map(|(n, s)| (n.to_string(), s)).collect(),
            operator: OperatorHandle::default(),
        }
    }

    /// The same topology, whose Scores ask `operator` (the run's: `RunContext::operator`) to
    /// confirm what needs confirming; by default nobody is asked and such Scores are refused.
    pub fn with_operator(mut self, operator: OperatorHandle) -> Self {
        self.operator = operator;
        self
    }
}

impl MultiSiteTopology<DefaultTopology> {
    /// Render mode by default: each site into `<out>/<site>/`. With `--kubeconfig FILE`, each
    /// site is the kubeconfig context named after the site; `--context` is refused.
    pub fn from_context(
        name: impl Into<String>,
        site_names: &[&str],
        ctx: &RunContext,
    ) -> Result<Self, String> {
        if let Some(context) = &ctx.context {
            return Err(format!(
                "--context {context}: a multi-site topology reaches each site through the kubeconfig context named after the site; use --kubeconfig FILE whose contexts are named {}",
                site_names.join(", ")
            ));
        }
        let live = ctx.kubeconfig.is_some();
        if let Some(path) = &ctx.kubeconfig {
            missing_site_contexts(path, site_names)?;
        }
        let mut sites = Vec::new();
        for site in site_names {
            let label = Dns1123Label::parse(site).map_err(|e| format!("site name: {e}"))?;
            let topology = if live {
                let target = KubeTarget::Kubeconfig {
                    path: ctx.kubeconfig.clone(),
                    context: Some(label.to_string()),
                };
                EitherTopology::Right(K8sTopology::new(site.to_string(), target, ctx))
            } else {
                EitherTopology::Left(RenderTopology::from_context(ctx).with_site(*site))
            };
            sites.push((label, topology));
        }
        Ok(Self::new(name, sites).with_operator(ctx.operator.clone()))
    }
}

/// Fails naming the sites whose context the kubeconfig at `path` lacks. A file that cannot be
/// read passes here: the site's topology reports it, naming the file.
fn missing_site_contexts(path: &std::path::Path, site_names: &[&str]) -> Result<(), String> {
    let Ok(kc) = kube::config::Kubeconfig::read_from(path) else {
        return Ok(());
    };
    let missing: Vec<&str> = site_names
        .iter()
        .copied()
        .filter(|site| !kc.contexts.iter().any(|c| c.name == *site))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let has: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    let has = if has.is_empty() {
        "it has none".to_string()
    } else {
        format!("it has: {}", has.join(", "))
    };
    Err(format!(
        "--kubeconfig {}: no context named {} ({has}); each site is reached through the context named after it; fix: add contexts named {} to the file (e.g. `kubectl config rename-context OLD {}`)",
        path.display(),
        missing.join(", "),
        site_names.join(", "),
        missing[0]
    ))
}

impl<S: Topology> MultiSite for MultiSiteTopology<S> {
    type Site = S;

    fn site(&self, name: &str) -> Option<&S> {
        self.sites.get(name)
    }

    fn site_names(&self) -> Vec<String> {
        self.sites.keys().cloned().collect()
    }

    fn operator(&self) -> &dyn Operator {
        self.operator.get()
    }
}

#[async_trait]
impl<S: Topology> Topology for MultiSiteTopology<S> {
    fn name(&self) -> &str {
        &self.name
    }

    /// Sites share one run, so they share its mode; the first site's is the run's.
    fn mode(&self) -> ExecutionMode {
        self.sites
            .values()
            .next()
            .map_or(ExecutionMode::Render, Topology::mode)
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        let fail = |reason: String| PreparationError {
            topology: self.name.clone(),
            reason,
        };
        if self.sites.is_empty() {
            return Err(fail("it has no sites; add at least one".into()));
        }
        let mode = self.mode();
        if let Some((name, _)) = self.sites.iter().find(|(_, s)| s.mode() != mode) {
            return Err(fail(format!(
                "site {name} runs in a different mode than the others; build every site from the same RunContext"
            )));
        }
        let results = futures::future::join_all(
            self.sites
                .iter()
                .map(|(name, site)| async move { (name, site.ensure_ready().await) }),
        )
        .await;
        let mut ready = Vec::new();
        for (name, result) in results {
            match result {
                Ok(PreparationOutcome::Success(m)) => ready.push(format!("{name}: {m}")),
                Ok(PreparationOutcome::Noop) => ready.push(format!("{name}: ready")),
                Err(e) => return Err(fail(format!("site {name}: {}", e.reason))),
            }
        }
        Ok(PreparationOutcome::Success(ready.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn render_sites_prepare_into_their_own_folders_and_unknown_sites_list_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = RunContext {
            out_dir: dir.path().to_path_buf(),
            ..RunContext::default()
        };
        let t =
            MultiSiteTopology::from_context("pg", &["site-paris", "site-newyork"], &ctx).unwrap();
        assert_eq!(t.site_names(), ["site-newyork", "site-paris"]);
        assert_eq!(t.mode(), ExecutionMode::Render);
        let ready = t.ensure_ready().await.unwrap();
        assert!(matches!(ready, PreparationOutcome::Success(m) if m.contains("site-paris")));
        let err = t
            .check_site("topology.replicas[0].site", "site-tokyo")
            .unwrap_err();
        assert_eq!(err.field, "topology.replicas[0].site");
        assert!(err.fix.contains("site-newyork, site-paris"), "{err}");
        assert!(MultiSiteTopology::from_context("pg", &["Bad_Site"], &ctx).is_err());
    }

    #[test]
    fn scores_ask_the_runs_operator_and_nobody_by_default() {
        use crate::domain::operator::{OperatorHandle, Unattended};
        let ctx = RunContext {
            operator: OperatorHandle::new(Unattended { assume_yes: true }),
            ..RunContext::default()
        };
        let t = MultiSiteTopology::from_context("pg", &["site-paris"], &ctx).unwrap();
        assert_eq!(t.operator().confirm("Promote?"), Ok(true));
        let t = MultiSiteTopology::new("pg", Vec::<(Dns1123Label, RenderTopology)>::new());
        assert!(
            t.operator().confirm("Promote?").is_err(),
            "nobody answers by default"
        );
    }
}
