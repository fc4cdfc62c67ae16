//! The iPXE scripts, rendered with askama from `modules/templates/okd/`.

use askama::Template;

use harmony::domain::capability::{CapabilityError, ClusterLayout, HostBinding};
use harmony_types::Url;

use super::{OkdInstallation, ignition_file};

#[derive(Template)]
#[template(path = "okd/boot.ipxe", escape = "none")]
struct Boot<'a> {
    base: &'a str,
    cluster: String,
}

#[derive(Template)]
#[template(path = "okd/host.ipxe", escape = "none")]
struct Host<'a> {
    base: &'a str,
    role: String,
    fqdn: String,
    mac: String,
    host_id: &'a str,
    ignition: &'a str,
    kernel: &'a str,
    initramfs: &'a str,
    rootfs: &'a str,
    install_dev: &'a str,
}

fn finish(r: Result<String, askama::Error>, what: &str) -> Result<String, CapabilityError> {
    let mut s = r.map_err(|e| CapabilityError::InvalidObject {
        object: what.to_string(),
        problem: format!("template failed: {e}"),
    })?;
    if !s.ends_with('\n') {
        s.push('\n');
    }
    Ok(s)
}

/// The script every iPXE client gets first: it chains to the per-MAC script.
pub fn boot_script(base: &Url, layout: &ClusterLayout) -> Result<String, CapabilityError> {
    finish(
        Boot {
            base: base.as_str(),
            cluster: layout.cluster_domain(),
        }
        .render(),
        "iPXE boot.ipxe",
    )
}

/// The per-MAC script of a bound host: the live installer with the role's ignition file.
pub fn host_script(
    base: &Url,
    layout: &ClusterLayout,
    binding: &HostBinding,
    install: &OkdInstallation,
    install_dev: &str,
) -> Result<String, CapabilityError> {
    finish(
        Host {
            base: base.as_str(),
            role: binding.role.to_string(),
            fqdn: layout.fqdn(binding.logical.as_str()),
            mac: binding.mac.to_string(),
            host_id: binding.host.as_str(),
            ignition: ignition_file(binding.role),
            kernel: &install.kernel,
            initramfs: &install.initramfs,
            rootfs: &install.rootfs,
            install_dev,
        }
        .render(),
        "iPXE host script",
    )
}
