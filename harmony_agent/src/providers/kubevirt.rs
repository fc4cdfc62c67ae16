//! The built-in `kubevirt` provider: service type `vm` as a KubeVirt VirtualMachine on the
//! agent's cluster.

use async_trait::async_trait;
use harmony::domain::capability::ObjectRef;
use harmony_agent_protocol::{InstanceState, InstanceStatus};
use serde_json::{Map, Value, json};
use std::sync::Arc;

use super::cluster_access::{ClusterAccess, object_ref};
use super::kube_backed::KubeBacked;
use super::{ProviderError, SpecReader, labels, namespace_of, status};
use crate::cluster::Cluster;

/// The provider's name.
pub const NAME: &str = "kubevirt";
/// The service type it serves.
pub const SERVICE_TYPE: &str = "vm";

/// The VirtualMachine a `vm` spec asks for; errors name the field.
pub fn manifest(id: &str, spec: &Value) -> Result<Value, ProviderError> {
    let r = SpecReader::new(spec, &["image", "cpu", "memory", "namespace"])?;
    let image = r.required_string("image", "quay.io/containerdisks/fedora:41")?;
    let cpu = r.int("cpu", 1, 1, 256)?;
    let memory = r.quantity("memory", "1Gi")?;
    let namespace = r.namespace()?;
    let labels = labels(id);
    Ok(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": id, "namespace": namespace, "labels": labels},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "domain": {
                        "cpu": {"cores": cpu},
                        "resources": {"requests": {"memory": memory.as_str()}},
                        "devices": {"disks": [{"name": "rootdisk", "disk": {"bus": "virtio"}}]},
                    },
                    "volumes": [{"name": "rootdisk", "containerDisk": {"image": image}}],
                },
            },
        },
    }))
}

fn vm_ref(namespace: &str, id: &str) -> ObjectRef {
    object_ref("kubevirt.io/v1", "VirtualMachine", namespace, id)
}

/// The instance status a VirtualMachine (or its absence) says.
pub fn status_of(id: &str, namespace: &str, vm: Option<&Value>) -> InstanceStatus {
    let Some(vm) = vm else {
        return status(
            id,
            SERVICE_TYPE,
            NAME,
            InstanceState::Deleted,
            format!("no VirtualMachine {namespace}/{id}"),
            Map::new(),
        );
    };
    let printable = vm
        .pointer("/status/printableStatus")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let mut outputs = Map::new();
    outputs.insert("namespace".into(), json!(namespace));
    outputs.insert("virtual_machine".into(), json!(id));
    let state = if vm.pointer("/metadata/deletionTimestamp").is_some() {
        InstanceState::Deleting
    } else if printable == "Running" {
        InstanceState::Ready
    } else {
        InstanceState::Provisioning
    };
    status(id, SERVICE_TYPE, NAME, state, printable, outputs)
}

/// Serves `vm` on the agent's cluster.
pub struct KubevirtProvider {
    cluster: ClusterAccess,
}

impl KubevirtProvider {
    /// The provider on `cluster`.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self {
            cluster: ClusterAccess::new(cluster, NAME),
        }
    }
}

#[async_trait]
impl KubeBacked for KubevirtProvider {
    const NAME: &'static str = NAME;
    const SERVICE_TYPE: &'static str = SERVICE_TYPE;

    fn cluster(&self) -> &ClusterAccess {
        &self.cluster
    }

    fn primary(namespace: &str, id: &str) -> ObjectRef {
        vm_ref(namespace, id)
    }

    fn owned(namespace: &str, id: &str) -> Vec<ObjectRef> {
        vec![vm_ref(namespace, id)]
    }

    fn status_of(id: &str, namespace: &str, primary: Option<&Value>) -> InstanceStatus {
        status_of(id, namespace, primary)
    }

    async fn converge(&self, id: &str, spec: &Value) -> Result<String, ProviderError> {
        self.cluster.apply(vec![manifest(id, spec)?]).await?;
        Ok(namespace_of(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_becomes_an_always_running_vm() {
        let vm = manifest(
            "vm1",
            &json!({"image": "quay.io/containerdisks/fedora:41", "cpu": 2}),
        )
        .unwrap();
        assert_eq!(vm["spec"]["runStrategy"], "Always");
        assert_eq!(vm["spec"]["template"]["spec"]["domain"]["cpu"]["cores"], 2);
        assert_eq!(
            vm["spec"]["template"]["spec"]["domain"]["resources"]["requests"]["memory"],
            "1Gi"
        );
        assert_eq!(
            vm["metadata"]["labels"]["harmony.io/service-instance"],
            "vm1"
        );
        let e = manifest("vm1", &json!({"cpu": 2})).unwrap_err().to_string();
        assert!(e.starts_with("spec.image: is required"), "{e}");
        let e = manifest("vm1", &json!({"image": "x", "memory": "big"}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("spec.memory:"), "{e}");
    }

    #[test]
    fn status_follows_printable_status() {
        let s = status_of(
            "vm1",
            "ns",
            Some(&json!({"status": {"printableStatus": "Starting"}})),
        );
        assert_eq!(
            (s.state, s.detail.as_str()),
            (InstanceState::Provisioning, "Starting")
        );
        let s = status_of(
            "vm1",
            "ns",
            Some(&json!({"status": {"printableStatus": "Running"}})),
        );
        assert_eq!(s.state, InstanceState::Ready);
        assert_eq!(status_of("vm1", "ns", None).state, InstanceState::Deleted);
    }
}
