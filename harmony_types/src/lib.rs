//! Validated value types: every constructor rejects bad input with an error that names it.
//!
//! Nothing here performs I/O; the types are plain values that serialize as strings.

mod bmc;
mod error;
mod host;
mod id;
mod ip;
mod mac;
mod names;
mod quantity;
mod region;
mod url;
mod version;

pub use bmc::{BmcAddress, BmcCredentialsSource, MAX_BMC_ADDRESS_LEN};
pub use error::InvalidValue;
pub use host::{
    DiscoveryReport, Disk, DiskName, InvalidReport, MAX_CPUS, MAX_DISK_BYTES, MAX_DISKS, MAX_MACS,
    MAX_MEMORY_BYTES, MAX_TEXT, MIN_MEMORY_BYTES, PhysicalHost, check_printable, check_uuid,
};
pub use id::Id;
pub use ip::{IpAddress, Ipv4Cidr};
pub use mac::MacAddress;
pub use names::{Dns1123Label, Dns1123Subdomain, HostName};
pub use quantity::Quantity;
pub use region::{RegionId, ZoneId};
pub use url::Url;
pub use version::Version;

/// Implements `Display`, `FromStr`, `TryFrom<String>`/`TryFrom<&str>` and `From<T> for String`
/// for a type with `fn parse(&str) -> Result<Self, InvalidValue>`, so serde can go through strings.
macro_rules! string_value {
    ($ty:ty) => {
        impl std::str::FromStr for $ty {
            type Err = $crate::InvalidValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$ty>::parse(s)
            }
        }
        impl TryFrom<String> for $ty {
            type Error = $crate::InvalidValue;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                <$ty>::parse(&s)
            }
        }
        impl TryFrom<&str> for $ty {
            type Error = $crate::InvalidValue;
            fn try_from(s: &str) -> Result<Self, Self::Error> {
                <$ty>::parse(s)
            }
        }
        impl From<$ty> for String {
            fn from(v: $ty) -> String {
                v.to_string()
            }
        }
    };
}
pub(crate) use string_value;
