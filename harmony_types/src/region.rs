use serde::{Deserialize, Serialize};
use std::fmt;

use crate::{Dns1123Label, InvalidValue};

macro_rules! label_id {
    ($(#[$doc:meta])* $ty:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $ty(Dns1123Label);

        impl $ty {
            /// Validates `s`; it must be a DNS-1123 label because it names Kubernetes objects.
            pub fn parse(s: &str) -> Result<Self, InvalidValue> {
                Dns1123Label::parse(s)
                    .map(Self)
                    .map_err(|e| InvalidValue { kind: $kind, ..e })
            }

            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        crate::string_value!($ty);
    };
}

label_id!(
    /// A region: a set of zones reached through one agent.
    RegionId,
    "region id"
);
label_id!(
    /// A zone: one Kubernetes cluster with its bare-metal services, inside a region.
    ZoneId,
    "zone id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_validate_as_labels_and_say_which_kind() {
        assert_eq!(RegionId::parse("eu-west").unwrap().as_str(), "eu-west");
        let err = ZoneId::parse("Paris 1").unwrap_err();
        assert!(
            err.to_string().starts_with("invalid zone id \"Paris 1\""),
            "{err}"
        );
        let r: RegionId = serde_json::from_str("\"us-east\"").unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"us-east\"");
    }
}
