//! `EitherTopology`: one of two topologies, chosen at run time; every call goes to that one.

use async_trait::async_trait;
use std::time::Duration;

use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, WaitCondition,
    WaitOutcome,
};
use crate::domain::{ExecutionMode, ObjectChange, PreparationError, PreparationOutcome, Topology};

/// One of two topologies (render or live, direct or through an agent) behind one type, so a
/// program picks at run time and its Scores still see a single topology.
pub enum EitherTopology<L, R> {
    /// The first kind.
    Left(L),
    /// The second kind.
    Right(R),
}

impl<L: Topology, R: Topology> EitherTopology<L, R> {
    fn topology(&self) -> &dyn Topology {
        match self {
            Self::Left(t) => t,
            Self::Right(t) => t,
        }
    }
}

impl<L: K8sClient, R: K8sClient> EitherTopology<L, R> {
    fn k8s(&self) -> &dyn K8sClient {
        match self {
            Self::Left(t) => t,
            Self::Right(t) => t,
        }
    }
}

#[async_trait]
impl<L: Topology, R: Topology> Topology for EitherTopology<L, R> {
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
impl<L: K8sClient, R: K8sClient> K8sClient for EitherTopology<L, R> {
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

    fn apply_progress(&self, what: &str) -> String {
        self.k8s().apply_progress(what)
    }
}
