//! [`HAClusterTopology`]'s capabilities: cluster layout, DHCP, DNS, TFTP, HTTP boot, load
//! balancing, the host inventory and the installed cluster's nodes.

use async_trait::async_trait;
use std::time::Duration;

use harmony_types::Url;

use crate::domain::capability::{
    BootEvent, BootPhase, CapabilityError, ClusterLayout, DeclaredRole, DhcpHostBinding,
    DhcpServer, DnsRecord, DnsServer, HaCluster, HeldReport, HostBinding, HostInventory,
    HostTimeline, HttpAccess, HttpFile, HttpServer, LoadBalancer, LoadBalancerService,
    PxeBootOptions, RoleRule, RootDeviceRule, TftpFile, TftpServer,
};
use crate::domain::capability::{ClusterNodes, NodeStatus, PendingCsr};
use crate::domain::inventory::{PhysicalHost, RoleAssignment};
use crate::domain::operator::Operator;
use crate::domain::{ObjectChange, ValidationError};

use super::topology::HAClusterTopology;

impl HaCluster for HAClusterTopology {
    fn layout(&self) -> &ClusterLayout {
        &self.layout
    }

    fn operator(&self) -> &dyn Operator {
        self.operator.get()
    }

    fn declared_roles(&self) -> &[DeclaredRole] {
        &self.declared
    }

    fn discovery_timeout(&self) -> Duration {
        self.discovery_timeout
    }

    fn role_rules(&self) -> &[RoleRule] {
        &self.role_rules
    }

    fn root_device_rules(&self) -> &[RootDeviceRule] {
        &self.root_device_rules
    }
}

#[async_trait]
impl DhcpServer for HAClusterTopology {
    async fn ensure_bindings(
        &self,
        bindings: &[DhcpHostBinding],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.dnsmasq.ensure_bindings(bindings).await
    }

    async fn bindings(&self) -> Result<Vec<DhcpHostBinding>, CapabilityError> {
        self.dnsmasq.bindings().await
    }

    async fn leases(&self) -> Result<Vec<crate::domain::capability::DhcpLease>, CapabilityError> {
        self.dnsmasq.leases().await
    }

    async fn set_pxe_options(
        &self,
        options: &PxeBootOptions,
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.dnsmasq.set_pxe_options(options).await
    }
}

#[async_trait]
impl DnsServer for HAClusterTopology {
    async fn ensure_records(
        &self,
        records: &[DnsRecord],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.dnsmasq.ensure_records(records).await
    }

    async fn records(&self) -> Result<Vec<DnsRecord>, CapabilityError> {
        self.dnsmasq.records().await
    }
}

#[async_trait]
impl TftpServer for HAClusterTopology {
    async fn ensure_tftp_files(
        &self,
        files: &[TftpFile],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.dnsmasq.ensure_tftp_files(files).await
    }
}

#[async_trait]
impl HttpServer for HAClusterTopology {
    fn base_url(&self) -> Url {
        self.http.base_url()
    }

    async fn ensure_http_files(
        &self,
        files: &[HttpFile],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.http.ensure_http_files(files).await
    }

    async fn access_log(&self) -> Result<Vec<HttpAccess>, CapabilityError> {
        self.http.access_log().await
    }
}

#[async_trait]
impl LoadBalancer for HAClusterTopology {
    async fn ensure_services(
        &self,
        services: &[LoadBalancerService],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        self.haproxy.ensure_services(services).await
    }
}

#[async_trait]
impl HostInventory for HAClusterTopology {
    async fn known_hosts(&self) -> Result<Vec<PhysicalHost>, CapabilityError> {
        self.inventory.known_hosts().await
    }

    async fn record_host(&self, host: &PhysicalHost) -> Result<ObjectChange, CapabilityError> {
        self.inventory.record_host(host).await
    }

    async fn role_assignments(&self) -> Result<Vec<RoleAssignment>, CapabilityError> {
        self.inventory.role_assignments().await
    }

    async fn assign_role(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<ObjectChange, CapabilityError> {
        self.inventory.assign_role(assignment).await
    }

    async fn host_bindings(&self) -> Result<Vec<HostBinding>, CapabilityError> {
        self.inventory.host_bindings().await
    }

    async fn bind_host(&self, binding: &HostBinding) -> Result<ObjectChange, CapabilityError> {
        self.inventory.bind_host(binding).await
    }

    async fn record_boot_event(
        &self,
        mac: harmony_types::MacAddress,
        event: BootEvent,
    ) -> Result<(), CapabilityError> {
        self.inventory.record_boot_event(mac, event).await
    }

    async fn record_boot_phase(
        &self,
        mac: harmony_types::MacAddress,
        phase: BootPhase,
        at_ms: i64,
    ) -> Result<(), CapabilityError> {
        self.inventory.record_boot_phase_sync(mac, phase, at_ms)
    }

    async fn timelines(
        &self,
        macs: &[harmony_types::MacAddress],
    ) -> Result<Vec<HostTimeline>, CapabilityError> {
        self.timelines_now(macs)
    }

    async fn awaiting_boot(
        &self,
        macs: &[harmony_types::MacAddress],
    ) -> Result<Vec<harmony_types::MacAddress>, CapabilityError> {
        self.inventory.awaiting_boot(macs).await
    }

    async fn retired(
        &self,
        macs: &[harmony_types::MacAddress],
    ) -> Result<Vec<harmony_types::MacAddress>, CapabilityError> {
        self.inventory.retired(macs).await
    }

    async fn held_reports(&self) -> Result<Vec<HeldReport>, CapabilityError> {
        self.inventory.held_reports().await
    }

    async fn accept_held_report(
        &self,
        id: &harmony_types::Id,
    ) -> Result<ObjectChange, CapabilityError> {
        self.inventory.accept_held_report(id).await
    }
}

#[async_trait]
impl ClusterNodes for HAClusterTopology {
    async fn nodes(&self) -> Result<Vec<NodeStatus>, CapabilityError> {
        self.cluster_nodes()?.nodes().await
    }

    async fn pending_csrs(&self) -> Result<Vec<PendingCsr>, CapabilityError> {
        self.cluster_nodes()?.pending_csrs().await
    }

    async fn approve_csr(&self, name: &str, reason: &str) -> Result<(), CapabilityError> {
        self.cluster_nodes()?.approve_csr(name, reason).await
    }

    fn check_access(&self) -> Result<(), ValidationError> {
        let fix = "`openshift-install create ignition-configs --dir DIR` writes the installed cluster's admin kubeconfig to DIR/auth/kubeconfig: run it, or give that kubeconfig (the OKD example: --ignition-dir DIR or --cluster-kubeconfig FILE)";
        match &self.cluster_nodes {
            None => Err(ValidationError::new(
                "cluster kubeconfig",
                "no kubeconfig for the installed cluster was given, so its nodes cannot be awaited",
                fix,
            )),
            Some(n) if !n.kubeconfig().is_file() => Err(ValidationError::new(
                "cluster kubeconfig",
                format!("{} is not a file", n.kubeconfig().display()),
                fix,
            )),
            Some(_) => Ok(()),
        }
    }

    fn cluster_description(&self) -> String {
        match &self.cluster_nodes {
            Some(n) => n.cluster_description(),
            None => format!("cluster {} (no kubeconfig given)", self.layout.cluster_name),
        }
    }
}
