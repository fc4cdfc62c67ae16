//! The topology a program gets when it lets the operator choose: render files unless a cluster
//! is named with `--kubeconfig` or `--context`.

use async_trait::async_trait;
use std::time::Duration;

use super::kube::{K8sTopology, KubeTarget};
use super::render::RenderTopology;
use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, WaitCondition,
    WaitOutcome,
};
use crate::domain::{
    ExecutionMode, ObjectChange, PreparationError, PreparationOutcome, RunContext, Topology,
};

/// Render mode by default; a live cluster only when the operator names one explicitly, so a
/// `KUBECONFIG` left in the environment never turns a render into an apply.
pub enum DefaultTopology {
    /// Files under `--out`.
    Render(RenderTopology),
    /// A live cluster.
    Kubernetes(Box<K8sTopology>),
}

impl DefaultTopology {
    /// Chooses from the operator's flags.
    pub fn from_context(ctx: &RunContext) -> Self {
        if ctx.kubeconfig.is_some() || ctx.context.is_some() {
            let target = KubeTarget::Kubeconfig {
                path: ctx.kubeconfig.clone(),
                context: ctx.context.clone(),
            };
            let name = ctx.context.clone().unwrap_or_else(|| "kubernetes".into());
            DefaultTopology::Kubernetes(Box::new(K8sTopology::new(name, target, ctx)))
        } else {
            DefaultTopology::Render(RenderTopology::from_context(ctx))
        }
    }

    fn k8s(&self) -> &dyn K8sClient {
        match self {
            DefaultTopology::Render(r) => r,
            DefaultTopology::Kubernetes(k) => k.as_ref(),
        }
    }

    fn topology(&self) -> &dyn Topology {
        match self {
            DefaultTopology::Render(r) => r,
            DefaultTopology::Kubernetes(k) => k.as_ref(),
        }
    }
}

#[async_trait]
impl Topology for DefaultTopology {
    fn name(&self) -> &str {
        self.topology().name()
    }

    fn mode(&self) -> ExecutionMode {
        self.topology().mode()
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        self.topology().ensure_ready().await
    }
}

#[async_trait]
impl K8sClient for DefaultTopology {
    async fn apply(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        self.k8s().apply(objects, options).await
    }

    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        self.k8s().get(object).await
    }

    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        self.k8s().delete(object).await
    }

    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError> {
        self.k8s().wait_for(object, condition, timeout).await
    }
}
