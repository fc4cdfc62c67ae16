//! Reading the X.509 certificates the fixture's CSR signer issues.

use x509_cert::der::asn1::{Ia5StringRef, ObjectIdentifier, PrintableStringRef, Utf8StringRef};
use x509_cert::der::{Tag, Tagged};
use x509_cert::name::Name;

/// The `commonName` attribute (CN).
pub const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
/// The `organizationName` attribute (O).
pub const ORGANIZATION: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");

/// The values of attribute `oid` in an X.509 name, in order (UTF-8, printable and IA5 strings).
pub fn name_attributes(name: &Name, oid: ObjectIdentifier) -> Vec<String> {
    name.0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .filter(|atv| atv.oid == oid)
        .filter_map(|atv| match atv.value.tag() {
            Tag::Utf8String => Utf8StringRef::try_from(&atv.value)
                .ok()
                .map(|s| s.as_str().to_string()),
            Tag::PrintableString => PrintableStringRef::try_from(&atv.value)
                .ok()
                .map(|s| s.as_str().to_string()),
            Tag::Ia5String => Ia5StringRef::try_from(&atv.value)
                .ok()
                .map(|s| s.as_str().to_string()),
            _ => None,
        })
        .collect()
}
