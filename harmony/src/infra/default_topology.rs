//! The topology a program gets when it lets the operator choose: render files unless a cluster
//! is named with `--kubeconfig` or `--context`.

use super::either::EitherTopology;
use super::kube::{K8sTopology, KubeTarget};
use super::render::RenderTopology;
use crate::domain::RunContext;

/// Render mode by default (`Left`); a live cluster (`Right`) only when the operator names one
/// explicitly, so a `KUBECONFIG` left in the environment never turns a render into an apply.
pub type DefaultTopology = EitherTopology<RenderTopology, K8sTopology>;

impl DefaultTopology {
    /// Chooses from the operator's flags.
    pub fn from_context(ctx: &RunContext) -> Self {
        if ctx.kubeconfig.is_some() || ctx.context.is_some() {
            let target = KubeTarget::Kubeconfig {
                path: ctx.kubeconfig.clone(),
                context: ctx.context.clone(),
            };
            let name = ctx.context.clone().unwrap_or_else(|| "kubernetes".into());
            EitherTopology::Right(K8sTopology::new(name, target, ctx))
        } else {
            EitherTopology::Left(RenderTopology::from_context(ctx))
        }
    }
}
