//! The prepare phase: DNS names, load-balancer services, PXE options, TFTP and HTTP boot files.

use async_trait::async_trait;

use harmony::domain::capability::{
    BackendServer, CapabilityError, ClusterLayout, DnsRecord, HealthCheck, HttpFile,
    LoadBalancerService, LogicalHost, PxeBootOptions, TftpFile,
};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::inventory::HostRole;
use harmony::domain::{
    ExecutionMode, InterpretError, Inventory, ObjectChange, Outcome, Score, ValidationError,
    report_progress,
};
use harmony_types::{HostName, Url, Version};

use super::bootstrap_removal::{bootstrap_macs, services_without_bootstrap};
use super::{OkdInstallation, OkdTopology, boot_script, capability_error, ignition_file, version};

/// Sets up everything shared by all hosts: `api`, `api-int`, `*.apps` and host records; the
/// 6443/22623/80/443 load-balancer services; PXE options; the iPXE binaries over TFTP; the
/// iPXE boot script and the ignition files over HTTP.
#[derive(Debug, Clone, derive_new::new)]
pub struct OkdPrepareScore {
    /// The installation whose shared services are prepared.
    install: OkdInstallation,
}

fn name(s: &str) -> Result<HostName, CapabilityError> {
    HostName::parse(s).map_err(|e| CapabilityError::InvalidObject {
        object: format!("DNS name {s}"),
        problem: e.to_string(),
    })
}

/// The DNS records of the cluster: `api`, `api-int` and `*.apps` to the load balancer, and
/// every logical host's full name to its address.
pub fn dns_records(layout: &ClusterLayout) -> Result<Vec<DnsRecord>, CapabilityError> {
    let lb = layout.load_balancer;
    let mut records = vec![
        DnsRecord::A {
            name: name(&layout.fqdn("api"))?,
            ip: lb,
        },
        DnsRecord::A {
            name: name(&layout.fqdn("api-int"))?,
            ip: lb,
        },
        DnsRecord::Wildcard {
            domain: name(&layout.fqdn("apps"))?,
            ip: lb,
        },
    ];
    for role in [
        HostRole::Bootstrap,
        HostRole::ControlPlane,
        HostRole::Worker,
    ] {
        for h in layout.hosts_for(role) {
            records.push(DnsRecord::A {
                name: name(&layout.fqdn(h.name.as_str()))?,
                ip: h.ip,
            });
        }
    }
    Ok(records)
}

fn pool(hosts: &[&LogicalHost], port: u16) -> Vec<BackendServer> {
    hosts
        .iter()
        .map(|h| BackendServer {
            name: h.name.clone(),
            ip: h.ip,
            port,
        })
        .collect()
}

/// The load-balancer services: API (6443) and machine config (22623) to bootstrap and control
/// plane; ingress (80, 443) to the workers, or to the control plane when there are none.
pub fn load_balancer_services(layout: &ClusterLayout) -> Vec<LoadBalancerService> {
    let masters: Vec<&LogicalHost> = std::iter::once(&layout.bootstrap)
        .chain(&layout.control_plane)
        .collect();
    let ingress: Vec<&LogicalHost> = if layout.workers.is_empty() {
        layout.control_plane.iter().collect()
    } else {
        layout.workers.iter().collect()
    };
    let service =
        |name: &str, port: u16, hosts: &[&LogicalHost], health_check| LoadBalancerService {
            name: name.into(),
            listen_ip: layout.load_balancer,
            port,
            backends: pool(hosts, port),
            health_check,
        };
    let router = HealthCheck::Http {
        path: "/healthz/ready".into(),
        port: 1936,
    };
    vec![
        service(
            "api",
            6443,
            &masters,
            HealthCheck::Https {
                path: "/readyz".into(),
                port: 6443,
            },
        ),
        service(
            "machine-config",
            22623,
            &masters,
            HealthCheck::Https {
                path: "/healthz".into(),
                port: 22623,
            },
        ),
        service("ingress-http", 80, &ingress, router.clone()),
        service("ingress-https", 443, &ingress, router),
    ]
}

impl OkdPrepareScore {
    fn ignition_files(&self) -> Result<Vec<HttpFile>, ValidationError> {
        let Some(dir) = &self.install.ignition_dir else {
            return Ok(Vec::new());
        };
        [
            HostRole::Bootstrap,
            HostRole::ControlPlane,
            HostRole::Worker,
        ]
        .into_iter()
        .map(|role| {
            let file = ignition_file(role);
            let path = dir.join(file);
            let content = std::fs::read(&path).map_err(|e| {
                ValidationError::new(
                    "ignition_dir",
                    format!("cannot read {}: {e}", path.display()),
                    format!(
                        "run `openshift-install create ignition-configs --dir {}` first",
                        dir.display()
                    ),
                )
            })?;
            Ok(HttpFile {
                path: format!("ignition/{file}"),
                content,
            })
        })
        .collect()
    }
}

impl<T: OkdTopology> Score<T> for OkdPrepareScore {
    fn name(&self) -> String {
        "OKD prepare".into()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "kernel": self.install.kernel,
            "initramfs": self.install.initramfs,
            "rootfs": self.install.rootfs,
            "ignition_dir": self.install.ignition_dir,
            "ipxe_dir": self.install.ipxe_dir,
        })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        self.ignition_files().map(|_| ())
    }

    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        topology.layout().validate()?;
        if topology.mode() == ExecutionMode::Apply && self.install.ignition_dir.is_none() {
            return Err(ValidationError::new(
                "ignition_dir",
                "no ignition files are declared, so installed hosts would have nothing to apply",
                "run `openshift-install create ignition-configs --dir DIR` and set `OkdInstallation::ignition_dir` to DIR",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl<T: OkdTopology> Interpret<T> for OkdPrepareScore {
    fn name(&self) -> InterpretName {
        InterpretName("OkdPrepare")
    }

    fn version(&self) -> Version {
        version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let layout = topology.layout();
        let mut changes: Vec<ObjectChange> = Vec::new();
        let mut details = Vec::new();

        report_progress("DNS records");
        let records =
            dns_records(layout).map_err(capability_error("building DNS records", &changes))?;
        let c = topology
            .ensure_records(&records)
            .await
            .map_err(capability_error("DNS records", &changes))?;
        changes.extend(c);

        report_progress("load balancer");
        // Once the bootstrap removal phase has taken the bootstrap host out, a re-run keeps it
        // out rather than serving it again until that phase runs.
        let retired = if topology.mode() == ExecutionMode::Apply {
            let macs = bootstrap_macs(topology)
                .await
                .map_err(capability_error("load balancer", &changes))?;
            topology
                .retired(&macs)
                .await
                .map_err(capability_error("load balancer", &changes))?
        } else {
            Vec::new()
        };
        let services = if retired.is_empty() {
            load_balancer_services(layout)
        } else {
            details.push(format!(
                "the bootstrap host {} was removed once the control plane was Ready: it stays out of the 6443 and 22623 backends",
                layout.bootstrap.name
            ));
            services_without_bootstrap(layout)
        };
        let c = topology
            .ensure_services(&services)
            .await
            .map_err(capability_error("load balancer", &changes))?;
        changes.extend(c);

        report_progress("PXE options");
        let base = topology.base_url();
        let script = Url::parse(&format!("{base}boot.ipxe")).map_err(|e| {
            capability_error("PXE options", &changes)(CapabilityError::InvalidObject {
                object: "iPXE script URL".into(),
                problem: e.to_string(),
            })
        })?;
        let c = topology
            .set_pxe_options(&PxeBootOptions {
                tftp_server: layout.services,
                bios_file: "undionly.kpxe".into(),
                uefi_file: "ipxe.efi".into(),
                ipxe_script: script,
            })
            .await
            .map_err(capability_error("PXE options", &changes))?;
        changes.extend(c);

        let tftp = ["undionly.kpxe", "ipxe.efi"].map(|name| TftpFile {
            name: name.into(),
            source: self.install.ipxe_dir.join(name),
        });
        // Render and plan read no binaries that are not installed: plan after a render must
        // work on the machine that rendered. Apply copies them, and fails naming the package.
        if topology.mode() != ExecutionMode::Apply && tftp.iter().any(|f| !f.source.is_file()) {
            details.push(format!(
                "TFTP: the iPXE binaries are copied from {} when applying (install Debian's `ipxe` package there)",
                self.install.ipxe_dir.display()
            ));
        } else {
            report_progress("TFTP iPXE binaries");
            let c = topology
                .ensure_tftp_files(&tftp)
                .await
                .map_err(capability_error("TFTP files", &changes))?;
            changes.extend(c);
        }

        report_progress("HTTP boot files");
        // The topology knows whether it serves a discovery image; the Score only says where
        // unknown machines look for one and how to get it.
        details.push(format!(
            "unknown machines boot the discovery image from {base}discovery/ (vmlinuz, initrd.img) and report to {base}discovery: build it with `discovery-image/build.sh DIR` and serve it with --discovery-image DIR"
        ));
        let mut files = vec![HttpFile {
            path: "boot.ipxe".into(),
            content: boot_script(&base, layout)
                .map_err(capability_error("iPXE boot script", &changes))?
                .into_bytes(),
        }];
        let ignition = self.ignition_files()?;
        if ignition.is_empty() {
            details.push(
                "no ignition_dir declared: ignition files are not served (required to apply)"
                    .into(),
            );
        }
        files.extend(ignition);
        let c = topology
            .ensure_http_files(&files)
            .await
            .map_err(capability_error("HTTP boot files", &changes))?;
        changes.extend(c);

        let mut outcome = Outcome::from_changes(changes);
        outcome.details = details;
        Ok(outcome)
    }
}
