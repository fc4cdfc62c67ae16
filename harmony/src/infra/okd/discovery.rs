//! The discovery range: the addresses dnsmasq leases, briefly, to machines it has no reservation
//! for, so they can boot the discovery image and report themselves.

use std::net::Ipv4Addr;
use std::path::Path;

use harmony_types::IpAddress;

use crate::domain::ValidationError;
use crate::domain::capability::ClusterLayout;
use crate::domain::inventory::HostRole;

/// How many addresses the default discovery range holds: enough for a rack booted at once.
pub const DEFAULT_DISCOVERY_ADDRESSES: u32 = 50;

/// The discovery range of `layout`: `given` once checked, else the last
/// [`DEFAULT_DISCOVERY_ADDRESSES`] host addresses of the network (10.0.0.205-10.0.0.254 in a
/// /24). Either way it must lie inside the network and hold none of the layout's addresses.
pub fn discovery_range(
    layout: &ClusterLayout,
    given: Option<(IpAddress, IpAddress)>,
) -> Result<(IpAddress, IpAddress), ValidationError> {
    const FIELD: &str = "services.discovery_range";
    let net = layout.network;
    let base = u32::from(net.network());
    let broadcast = base | !u32::from(net.netmask());
    let (first, last) = match given {
        Some(range) => range,
        None => {
            if net.prefix() > 29 {
                return Err(ValidationError::new(
                    FIELD,
                    format!("the network {net} is too small for a default discovery range"),
                    "give BareMetalServices::discovery_range a few free addresses, or widen `network`",
                ));
            }
            let last = broadcast - 1;
            let first = (last + 1)
                .saturating_sub(DEFAULT_DISCOVERY_ADDRESSES)
                .max(base + 1);
            (
                IpAddress::from(Ipv4Addr::from(first)),
                IpAddress::from(Ipv4Addr::from(last)),
            )
        }
    };
    let how = if given.is_some() {
        "set BareMetalServices::discovery_range to"
    } else {
        "the default range collides; set BareMetalServices::discovery_range to"
    };
    for ip in [first, last] {
        let n = u32::from(ip.addr());
        if !net.contains(ip) || n == base || n == broadcast {
            return Err(ValidationError::new(
                FIELD,
                format!("{first}-{last}: {ip} is not a host address of the network {net}"),
                format!("{how} a range of free host addresses inside {net}"),
            ));
        }
    }
    if first > last {
        return Err(ValidationError::new(
            FIELD,
            format!("{first}-{last}: the first address is after the last"),
            "give the lower address first",
        ));
    }
    let mut taken = vec![
        ("the gateway".to_string(), layout.gateway),
        ("the load balancer".to_string(), layout.load_balancer),
        ("the services address".to_string(), layout.services),
    ];
    for role in [
        HostRole::Bootstrap,
        HostRole::ControlPlane,
        HostRole::Worker,
    ] {
        for h in layout.hosts_for(role) {
            taken.push((format!("host {}", h.name), h.ip));
        }
    }
    if let Some((what, ip)) = taken
        .iter()
        .find(|(_, ip)| (first.addr()..=last.addr()).contains(&ip.addr()))
    {
        return Err(ValidationError::new(
            FIELD,
            format!("{first}-{last} holds {ip}, the address of {what}"),
            format!(
                "{how} addresses no logical host, gateway, load balancer or services address uses"
            ),
        ));
    }
    Ok((first, last))
}

/// The files of a discovery image, as `discovery-image/build.sh` writes them.
pub const DISCOVERY_IMAGE_FILES: [&str; 2] = ["vmlinuz", "initrd.img"];

/// Checks that `dir` holds a discovery image, before anything is served from it.
pub fn check_discovery_image(dir: &Path) -> Result<(), ValidationError> {
    match DISCOVERY_IMAGE_FILES
        .into_iter()
        .find(|f| !dir.join(f).is_file())
    {
        None => Ok(()),
        Some(file) => Err(ValidationError::new(
            "services.discovery_image",
            format!("{} has no {file}", dir.display()),
            format!(
                "build the image with `discovery-image/build.sh {}` (it writes vmlinuz and initrd.img), or leave the discovery image out",
                dir.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::capability::LogicalHost;
    use harmony_types::{Dns1123Label, HostName, Ipv4Cidr};

    fn ip(s: &str) -> IpAddress {
        IpAddress::parse(s).unwrap()
    }

    fn layout(network: &str, worker: &str) -> ClusterLayout {
        let host = |n: &str, a: &str| LogicalHost::new(HostName::parse(n).unwrap(), ip(a));
        let net = Ipv4Cidr::parse(network).unwrap();
        let at = |last: u8| {
            let o = net.network().octets();
            Ipv4Addr::new(o[0], o[1], o[2], o[3] + last).to_string()
        };
        ClusterLayout {
            cluster_name: Dns1123Label::parse("okd").unwrap(),
            base_domain: HostName::parse("example.com").unwrap(),
            network: net,
            gateway: ip(&at(1)),
            load_balancer: ip(&at(2)),
            services: ip(&at(2)),
            bootstrap: host("bootstrap", &at(3)),
            control_plane: vec![
                host("cp0", &at(4)),
                host("cp1", &at(5)),
                host("cp2", &at(6)),
            ],
            workers: vec![host("worker0", worker)],
        }
    }

    #[test]
    fn the_default_is_the_top_of_the_network() {
        let l = layout("10.77.0.0/24", "10.77.0.21");
        assert_eq!(
            discovery_range(&l, None).unwrap(),
            (ip("10.77.0.205"), ip("10.77.0.254"))
        );
        // A /27 has 30 host addresses: the range starts right after the network address...
        // which collides with the layout, so the error says to set it.
        let small = layout("10.77.0.0/27", "10.77.0.7");
        let e = discovery_range(&small, None).unwrap_err();
        assert_eq!(e.field, "services.discovery_range");
        assert!(
            e.problem.contains("10.77.0.1, the address of the gateway"),
            "{e:?}"
        );
        assert!(e.fix.contains("the default range collides"), "{}", e.fix);
        let tiny = layout("10.77.0.0/30", "10.77.0.2");
        assert!(
            discovery_range(&tiny, None)
                .unwrap_err()
                .problem
                .contains("too small")
        );
    }

    #[test]
    fn a_discovery_image_needs_both_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("vmlinuz"), "k").unwrap();
        let e = check_discovery_image(dir.path()).unwrap_err();
        assert_eq!(e.field, "services.discovery_image");
        assert!(e.problem.ends_with("has no initrd.img"), "{}", e.problem);
        assert!(e.fix.contains("discovery-image/build.sh"), "{}", e.fix);
        std::fs::write(dir.path().join("initrd.img"), "i").unwrap();
        check_discovery_image(dir.path()).unwrap();
    }

    #[test]
    fn a_given_range_is_checked() {
        let l = layout("10.77.0.0/24", "10.77.0.121");
        let ok = (ip("10.77.0.100"), ip("10.77.0.120"));
        assert_eq!(discovery_range(&l, Some(ok)).unwrap(), ok);
        let e = discovery_range(&l, Some((ip("10.77.0.100"), ip("10.77.0.130")))).unwrap_err();
        assert!(
            e.problem
                .contains("holds 10.77.0.121, the address of host worker0"),
            "{e:?}"
        );
        let e = discovery_range(&l, Some((ip("10.77.0.200"), ip("10.77.1.10")))).unwrap_err();
        assert!(
            e.problem.contains("10.77.1.10 is not a host address"),
            "{e:?}"
        );
        let e = discovery_range(&l, Some((ip("10.77.0.200"), ip("10.77.0.255")))).unwrap_err();
        assert!(
            e.problem.contains("10.77.0.255 is not a host address"),
            "{e:?}"
        );
        let e = discovery_range(&l, Some((ip("10.77.0.220"), ip("10.77.0.210")))).unwrap_err();
        assert!(
            e.problem.contains("first address is after the last"),
            "{e:?}"
        );
    }
}
