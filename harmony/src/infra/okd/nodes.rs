//! The cluster-nodes capability on the installed cluster's API, through the admin kubeconfig
//! `openshift-install` writes (`<ignition dir>/auth/kubeconfig`) or one the operator names.

use async_trait::async_trait;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::OnceCell;
use x509_cert::der::asn1::{Ia5StringRef, ObjectIdentifier, PrintableStringRef, Utf8StringRef};
use x509_cert::der::{Decode, Encode, Tag, Tagged};
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::request::ExtensionReq;

use crate::domain::capability::{
    CapabilityError, ClusterNodes, NodeReadiness, NodeStatus, PendingCsr,
};
use crate::infra::kube::describe_error;

/// The reason written into the `Approved` condition of every CSR Harmony approves.
pub const APPROVAL_REASON: &str = "HarmonyOkdNodes";

/// The subject common name attribute (2.5.4.3).
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");

/// The subject organisation attribute (2.5.4.10): a client certificate's groups.
const ORGANIZATION: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");

/// The PKCS#9 extensionRequest attribute (1.2.840.113549.1.9.14): the extensions a request asks for.
const EXTENSION_REQUEST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.14");

/// The subjectAltName extension (2.5.29.17).
const SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");

/// The installed cluster reached through a kubeconfig file, connected on first use.
pub struct KubeClusterNodes {
    kubeconfig: PathBuf,
    client: OnceCell<Client>,
}

impl KubeClusterNodes {
    /// Reaches the cluster of `kubeconfig` (its current context) when first asked.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self {
            kubeconfig,
            client: OnceCell::new(),
        }
    }

    /// The kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn server(&self) -> String {
        format!("the cluster of {}", self.kubeconfig.display())
    }

    async fn client(&self) -> Result<&Client, CapabilityError> {
        self.client
            .get_or_try_init(|| async {
                // A kubeconfig that cannot be used is not a passing outage: no retry helps.
                let unusable = |problem: String| CapabilityError::InvalidObject {
                    object: format!("kubeconfig {}", self.kubeconfig.display()),
                    problem,
                };
                let fix = "it is written by `openshift-install create ignition-configs` into <ignition dir>/auth/kubeconfig; give that file or another admin kubeconfig of the installed cluster";
                let kc = Kubeconfig::read_from(&self.kubeconfig).map_err(|e| match &e {
                    kube::config::KubeconfigError::ReadConfig(io, _) => {
                        unusable(format!("cannot read it: {io}; fix: {fix}"))
                    }
                    other => unusable(format!("{}; fix: {fix}", describe_error(other))),
                })?;
                let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| unusable(format!("{}; fix: {fix}", describe_error(&e))))?;
                config.connect_timeout = Some(Duration::from_secs(5));
                config.read_timeout = Some(Duration::from_secs(30));
                Client::try_from(config).map_err(|e| unusable(describe_error(&e)))
            })
            .await
    }

    fn failed(&self, what: &str, e: kube::Error) -> CapabilityError {
        match &e {
            kube::Error::Api(status) if status.code == 403 => CapabilityError::Forbidden {
                object: what.to_string(),
                server: self.server(),
                message: status.message.clone(),
            },
            kube::Error::Api(status) if status.code == 404 => CapabilityError::NotFound {
                object: what.to_string(),
                server: self.server(),
                message: status.message.clone(),
            },
            kube::Error::Api(_) => CapabilityError::Rejected {
                object: what.to_string(),
                server: self.server(),
                message: describe_error(&e),
            },
            _ => CapabilityError::Unreachable {
                server: self.server(),
                reason: format!("{what}: {}", describe_error(&e)),
            },
        }
    }
}

/// The Node's name and `Ready` condition.
fn node_status(node: &Node) -> NodeStatus {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    NodeStatus {
        name: node.metadata.name.clone().unwrap_or_default(),
        readiness: match ready {
            Some(c) if c.status == "True" => NodeReadiness::Ready,
            _ => NodeReadiness::NotReady,
        },
        reason: ready.and_then(|c| c.reason.clone()).unwrap_or_default(),
    }
}

/// Whether the CSR has been decided (approved or denied): a decided CSR is never pending.
fn decided(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| (c.type_ == "Approved" || c.type_ == "Denied") && c.status == "True")
        })
}

/// The subject of a PEM-encoded PKCS#10 request: its common name, its organisations and the
/// subject alternative names it asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestedSubject {
    /// The common name (`system:node:worker0`), if any.
    pub common_name: Option<String>,
    /// The organisations (`system:nodes`), in order.
    pub organizations: Vec<String>,
    /// The DNS subject alternative names, in order.
    pub dns_names: Vec<String>,
    /// The IP subject alternative names, in order.
    pub ip_addresses: Vec<String>,
    /// Any other subject alternative name, described (`email a@b`, `URI x`, `other name`), or
    /// `unreadable subjectAltName` when the requested extensions do not decode.
    pub other_alt_names: Vec<String>,
}

/// Adds the subject alternative names `req` asks for (in its extensionRequest attribute) to
/// `subject`.
fn read_alt_names(req: &x509_cert::request::CertReq, subject: &mut RequestedSubject) {
    let unreadable = "unreadable subjectAltName".to_string();
    for attr in req.info.attributes.iter() {
        if attr.oid != EXTENSION_REQUEST {
            continue;
        }
        for value in attr.values.iter() {
            let Some(extensions) = value
                .to_der()
                .ok()
                .and_then(|der| ExtensionReq::from_der(&der).ok())
            else {
                subject.other_alt_names.push(unreadable.clone());
                continue;
            };
            for ext in extensions
                .0
                .iter()
                .filter(|e| e.extn_id == SUBJECT_ALT_NAME)
            {
                let Ok(names) = SubjectAltName::from_der(ext.extn_value.as_bytes()) else {
                    subject.other_alt_names.push(unreadable.clone());
                    continue;
                };
                for name in names.0 {
                    match name {
                        GeneralName::DnsName(dns) => subject.dns_names.push(dns.to_string()),
                        GeneralName::IpAddress(ip) => {
                            let bytes = ip.as_bytes();
                            let text = if let Ok(v4) = <[u8; 4]>::try_from(bytes) {
                                std::net::IpAddr::from(v4).to_string()
                            } else if let Ok(v6) = <[u8; 16]>::try_from(bytes) {
                                std::net::IpAddr::from(v6).to_string()
                            } else {
                                subject.other_alt_names.push(unreadable.clone());
                                continue;
                            };
                            subject.ip_addresses.push(text);
                        }
                        GeneralName::Rfc822Name(email) => {
                            subject.other_alt_names.push(format!("email {email}"))
                        }
                        GeneralName::UniformResourceIdentifier(uri) => {
                            subject.other_alt_names.push(format!("URI {uri}"))
                        }
                        GeneralName::OtherName(_) => {
                            subject.other_alt_names.push("other name".into())
                        }
                        GeneralName::DirectoryName(_) => {
                            subject.other_alt_names.push("directory name".into())
                        }
                        GeneralName::EdiPartyName(_) => {
                            subject.other_alt_names.push("EDI party name".into())
                        }
                        GeneralName::RegisteredId(oid) => {
                            subject.other_alt_names.push(format!("registered ID {oid}"))
                        }
                    }
                }
            }
        }
    }
}

/// Reads the subject of a PEM-encoded PKCS#10 request; `None` when it does not parse.
pub fn requested_subject(pem_text: &[u8]) -> Option<RequestedSubject> {
    let block = pem::parse(pem_text).ok()?;
    let req = x509_cert::request::CertReq::from_der(block.contents()).ok()?;
    let mut subject = RequestedSubject::default();
    for atv in req.info.subject.0.iter().flat_map(|rdn| rdn.0.iter()) {
        let text = match atv.value.tag() {
            Tag::Utf8String => Utf8StringRef::try_from(&atv.value).ok().map(|s| s.as_str()),
            Tag::PrintableString => PrintableStringRef::try_from(&atv.value)
                .ok()
                .map(|s| s.as_str()),
            Tag::Ia5String => Ia5StringRef::try_from(&atv.value).ok().map(|s| s.as_str()),
            _ => None,
        };
        let Some(text) = text else { continue };
        if atv.oid == COMMON_NAME && subject.common_name.is_none() {
            subject.common_name = Some(text.to_string());
        } else if atv.oid == ORGANIZATION {
            subject.organizations.push(text.to_string());
        }
    }
    read_alt_names(&req, &mut subject);
    Some(subject)
}

fn pending(csr: &CertificateSigningRequest) -> PendingCsr {
    let subject = requested_subject(&csr.spec.request.0).unwrap_or_default();
    PendingCsr {
        name: csr.metadata.name.clone().unwrap_or_default(),
        requester: csr.spec.username.clone().unwrap_or_default(),
        common_name: subject.common_name,
        organizations: subject.organizations,
        dns_names: subject.dns_names,
        ip_addresses: subject.ip_addresses,
        other_alt_names: subject.other_alt_names,
        signer: csr.spec.signer_name.clone(),
        usages: csr.spec.usages.clone().unwrap_or_default(),
    }
}

#[async_trait]
impl ClusterNodes for KubeClusterNodes {
    async fn nodes(&self) -> Result<Vec<NodeStatus>, CapabilityError> {
        let api: Api<Node> = Api::all(self.client().await?.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| self.failed("listing Nodes", e))?;
        let mut nodes: Vec<NodeStatus> = list.items.iter().map(node_status).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    async fn pending_csrs(&self) -> Result<Vec<PendingCsr>, CapabilityError> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client().await?.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| self.failed("listing CertificateSigningRequests", e))?;
        let mut csrs: Vec<PendingCsr> = list
            .items
            .iter()
            .filter(|c| !decided(c))
            .map(pending)
            .collect();
        csrs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(csrs)
    }

    async fn approve_csr(&self, name: &str, reason: &str) -> Result<(), CapabilityError> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client().await?.clone());
        let what = format!("approving CertificateSigningRequest {name}");
        // A merge patch of the approval subresource replaces the conditions list: read the
        // current conditions first so that none is dropped.
        let current = api
            .get_approval(name)
            .await
            .map_err(|e| self.failed(&what, e))?;
        if decided(&current) {
            return Ok(());
        }
        let mut conditions = current
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        conditions.push(
            k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition {
                type_: "Approved".into(),
                status: "True".into(),
                reason: Some(APPROVAL_REASON.into()),
                message: Some(reason.to_string()),
                last_update_time: None,
                last_transition_time: None,
            },
        );
        let patch = serde_json::json!({ "status": { "conditions": conditions } });
        api.patch_approval(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.failed(&what, e))?;
        Ok(())
    }

    fn cluster_description(&self) -> String {
        self.server()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_is_read_from_a_pem_request() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:worker0");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let csr = params.serialize_request(&key).unwrap();
        let pem_text = csr.pem().unwrap();
        assert_eq!(
            requested_subject(pem_text.as_bytes()),
            Some(RequestedSubject {
                common_name: Some("system:node:worker0".into()),
                organizations: vec!["system:nodes".into()],
                ..RequestedSubject::default()
            })
        );
        assert_eq!(requested_subject(b"not a request"), None);
    }

    #[test]
    fn the_alternative_names_are_read_from_a_pem_request() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![
            "worker0".to_string(),
            "10.0.0.21".to_string(),
            "fd00::21".to_string(),
        ])
        .unwrap();
        params.subject_alt_names.push(rcgen::SanType::Rfc822Name(
            "a@example.com".try_into().unwrap(),
        ));
        params
            .subject_alt_names
            .push(rcgen::SanType::URI("spiffe://x/y".try_into().unwrap()));
        let pem_text = params.serialize_request(&key).unwrap().pem().unwrap();
        let subject = requested_subject(pem_text.as_bytes()).unwrap();
        assert_eq!(subject.dns_names, ["worker0"]);
        assert_eq!(subject.ip_addresses, ["10.0.0.21", "fd00::21"]);
        assert_eq!(
            subject.other_alt_names,
            ["email a@example.com", "URI spiffe://x/y"]
        );
    }
}
