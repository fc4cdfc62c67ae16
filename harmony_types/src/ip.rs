use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::Ipv4Addr;

use crate::InvalidValue;

const IP_EXPECTED: &str = "a dotted-quad IPv4 address such as 192.168.10.5";
const CIDR_EXPECTED: &str = "a network in CIDR form such as 192.168.10.0/24";

/// An IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IpAddress(Ipv4Addr);

impl IpAddress {
    /// Parses a dotted quad; leading zeros are rejected because tools disagree on their meaning.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        s.parse::<Ipv4Addr>()
            .map(Self)
            .map_err(|e| InvalidValue::new("IPv4 address", s, e.to_string(), IP_EXPECTED))
    }

    /// The standard-library address.
    pub fn addr(&self) -> Ipv4Addr {
        self.0
    }
}

impl From<Ipv4Addr> for IpAddress {
    fn from(a: Ipv4Addr) -> Self {
        Self(a)
    }
}

impl fmt::Display for IpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

crate::string_value!(IpAddress);

/// An IPv4 network: a network address and a prefix length, with no host bits set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

impl Ipv4Cidr {
    /// Parses `a.b.c.d/n`; an address with host bits set is rejected with the network to use.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| InvalidValue::new("CIDR", s, "missing '/prefix'", CIDR_EXPECTED))?;
        let addr: Ipv4Addr = addr.parse().map_err(|e: std::net::AddrParseError| {
            InvalidValue::new("CIDR", s, format!("address part: {e}"), CIDR_EXPECTED)
        })?;
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32).ok_or_else(|| {
            InvalidValue::new(
                "CIDR",
                s,
                format!("prefix {prefix:?} is not 0..=32"),
                CIDR_EXPECTED,
            )
        })?;
        let network = Ipv4Addr::from(u32::from(addr) & mask(prefix));
        if network != addr {
            return Err(InvalidValue::new(
                "CIDR",
                s,
                format!("host bits are set; did you mean {network}/{prefix}?"),
                CIDR_EXPECTED,
            ));
        }
        Ok(Self { network, prefix })
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The dotted netmask, as dnsmasq and haproxy configs want it.
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(mask(self.prefix))
    }

    /// Whether `ip` lies inside this network.
    pub fn contains(&self, ip: IpAddress) -> bool {
        u32::from(ip.addr()) & mask(self.prefix) == u32::from(self.network)
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

crate::string_value!(Ipv4Cidr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_accepts_and_rejects() {
        assert_eq!(
            IpAddress::parse("10.0.0.1").unwrap().to_string(),
            "10.0.0.1"
        );
        for bad in [
            "",
            "10.0.0",
            "10.0.0.256",
            "010.0.0.1",
            "10.0.0.1/24",
            "fe80::1",
            "host",
        ] {
            let err = IpAddress::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
            assert_eq!(err.kind, "IPv4 address");
        }
    }

    #[test]
    fn cidr_parses_contains_and_masks() {
        let net = Ipv4Cidr::parse("192.168.10.0/24").unwrap();
        assert_eq!(net.netmask().to_string(), "255.255.255.0");
        assert!(net.contains(IpAddress::parse("192.168.10.254").unwrap()));
        assert!(!net.contains(IpAddress::parse("192.168.11.1").unwrap()));
        assert!(
            Ipv4Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains(IpAddress::parse("8.8.8.8").unwrap())
        );
        assert_eq!(
            Ipv4Cidr::parse("10.1.2.3/32").unwrap().to_string(),
            "10.1.2.3/32"
        );
    }

    #[test]
    fn cidr_rejects_with_the_fix() {
        let err = Ipv4Cidr::parse("192.168.10.5/24").unwrap_err();
        assert!(
            err.to_string().contains("did you mean 192.168.10.0/24"),
            "{err}"
        );
        for bad in [
            "192.168.10.0",
            "192.168.10.0/33",
            "192.168.10.0/x",
            "192.168.300.0/24",
            "/24",
        ] {
            let err = Ipv4Cidr::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn serde_round_trip() {
        let net = Ipv4Cidr::parse("10.0.0.0/8").unwrap();
        let json = serde_json::to_string(&net).unwrap();
        assert_eq!(serde_json::from_str::<Ipv4Cidr>(&json).unwrap(), net);
        let ip = IpAddress::parse("10.0.0.8").unwrap();
        assert_eq!(
            serde_json::from_str::<IpAddress>(&serde_json::to_string(&ip).unwrap()).unwrap(),
            ip
        );
        assert!(serde_json::from_str::<Ipv4Cidr>("\"10.0.0.1/8\"").is_err());
    }
}
