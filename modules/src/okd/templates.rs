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

/// Characters that never appear in a value put on an iPXE line: whitespace and control
/// characters split or end the line; `$` starts an iPXE setting (`${...}`), `#` a comment, `|`
/// and `&` chain commands; quotes and backslashes have no business in a URL, a path or a name.
const UNSAFE: &[char] = &['$', '#', '|', '&', ';', '"', '\'', '`', '\\'];

/// Refuses a value that would change a script's shape: it must be one word of printable ASCII
/// without [`UNSAFE`] characters. Every value put on an iPXE line goes through it, so a value
/// from an older inventory (stored before reports were validated) is refused too.
fn one_word(object: &str, field: &str, value: &str) -> Result<(), CapabilityError> {
    let bad = value
        .chars()
        .find(|c| !c.is_ascii_graphic() || UNSAFE.contains(c));
    if value.is_empty() || bad.is_some() {
        let problem = match bad {
            Some(c) => format!("{c:?} in it"),
            None => "it is empty".into(),
        };
        return Err(CapabilityError::InvalidObject {
            object: object.to_string(),
            problem: format!(
                "{field} {value:?} would change the script's lines or arguments ({problem}); it \
                 must be one word of printable ASCII without $ # | & ; quotes or backslashes"
            ),
        });
    }
    Ok(())
}

/// The lines of `host.ipxe`, by their first word; the kernel line's arguments.
const HOST_COMMANDS: [&str; 6] = ["#!ipxe", "#", "echo", "kernel", "initrd", "boot"];
const KERNEL_ARGS: [&str; 7] = [
    "kernel",
    "",
    "initrd=main",
    "ip=dhcp",
    "coreos.live.rootfs_url=",
    "coreos.inst.install_dev=",
    "coreos.inst.ignition_url=",
];

/// The shape every per-MAC script has: the lines of [`HOST_COMMANDS`] in order, and one
/// `kernel` line with the arguments of [`KERNEL_ARGS`] (the empty one being the kernel's URL),
/// the install device being `install_dev`. Returns what differs.
pub fn host_script_shape(script: &str, install_dev: &str) -> Result<(), String> {
    let lines: Vec<&str> = script.lines().collect();
    let firsts: Vec<&str> = lines
        .iter()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    if firsts != HOST_COMMANDS {
        return Err(format!(
            "its lines start with {firsts:?}, not {HOST_COMMANDS:?}"
        ));
    }
    let args: Vec<&str> = lines[3].split(' ').collect();
    let shaped = args.len() == KERNEL_ARGS.len()
        && args
            .iter()
            .zip(KERNEL_ARGS)
            .all(|(a, want)| a.starts_with(want) && !a.is_empty())
        && args[5] == format!("coreos.inst.install_dev={install_dev}");
    if !shaped {
        return Err(format!(
            "its kernel line has the arguments {args:?}, not {KERNEL_ARGS:?} with \
             install_dev {install_dev:?}"
        ));
    }
    Ok(())
}

/// The script every iPXE client gets first: it chains to the per-MAC script.
pub fn boot_script(base: &Url, layout: &ClusterLayout) -> Result<String, CapabilityError> {
    one_word("iPXE boot.ipxe", "the HTTP base URL", base.as_str())?;
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
///
/// Every value is checked to be one word that cannot add a line, an argument or an iPXE
/// setting, and the rendered script is checked to have [`host_script_shape`]; either failure is
/// an error naming the physical host, its MAC and the field.
pub fn host_script(
    base: &Url,
    layout: &ClusterLayout,
    binding: &HostBinding,
    install: &OkdInstallation,
    install_dev: &str,
) -> Result<String, CapabilityError> {
    let object = format!(
        "iPXE script of physical host {} ({})",
        binding.host, binding.mac
    );
    let fqdn = layout.fqdn(binding.logical.as_str());
    let mac = binding.mac.to_string();
    for (field, value) in [
        ("the HTTP base URL", base.as_str()),
        ("the logical host name", fqdn.as_str()),
        ("the MAC", mac.as_str()),
        ("the host id", binding.host.as_str()),
        ("kernel", install.kernel.as_str()),
        ("initramfs", install.initramfs.as_str()),
        ("rootfs", install.rootfs.as_str()),
        ("install_dev", install_dev),
    ] {
        one_word(&object, field, value)?;
    }
    let script = finish(
        Host {
            base: base.as_str(),
            role: binding.role.to_string(),
            fqdn,
            mac,
            host_id: binding.host.as_str(),
            ignition: ignition_file(binding.role),
            kernel: &install.kernel,
            initramfs: &install.initramfs,
            rootfs: &install.rootfs,
            install_dev,
        }
        .render(),
        &object,
    )?;
    host_script_shape(&script, install_dev).map_err(|problem| CapabilityError::InvalidObject {
        object,
        problem: format!("the rendered script changed shape: {problem}"),
    })?;
    Ok(script)
}
