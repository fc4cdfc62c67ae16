//! Which Nodes and certificate signing requests belong to the bound hosts of a role: the
//! names a host's kubelet may register with, and the kubelet CSRs that may be approved.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use harmony::domain::capability::cluster_nodes::{
    KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER, NODE_BOOTSTRAPPER, NODES_GROUP, node_user,
};
use harmony::domain::capability::{
    CapabilityError, ClusterLayout, NodeReadiness, NodeStatus, PendingCsr,
};
use harmony::domain::inventory::HostRole;
use harmony::domain::report_progress;

/// How often the join and bootstrap-removal phases look at the cluster again.
pub(crate) const POLL: Duration = Duration::from_secs(2);

/// The Node names a bound host may register with: its short name and its full name in the
/// cluster domain (what its kubelet picks depends on the host's DNS settings).
pub(crate) struct NodeNames {
    /// Node name → logical host name.
    names: HashMap<String, String>,
}

impl NodeNames {
    pub(crate) fn new<'a>(
        layout: &ClusterLayout,
        logical: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut names = HashMap::new();
        for l in logical {
            names.insert(l.to_string(), l.to_string());
            names.insert(layout.fqdn(l), l.to_string());
        }
        Self { names }
    }

    /// The logical host a Node or CSR name `name` belongs to.
    pub(crate) fn logical(&self, name: &str) -> Option<&str> {
        self.names.get(name).map(String::as_str)
    }

    /// The logical hosts' Node statuses: each one's Node, or `None` while it has not registered.
    pub(crate) fn statuses<'a>(
        &self,
        logical: &[String],
        nodes: &'a [NodeStatus],
    ) -> BTreeMap<String, Option<&'a NodeStatus>> {
        let mut out: BTreeMap<String, Option<&NodeStatus>> =
            logical.iter().map(|l| (l.clone(), None)).collect();
        for n in nodes {
            if let Some(l) = self.logical(&n.name)
                && let Some(slot) = out.get_mut(l)
            {
                // A Ready registration wins over a stale NotReady one under the other name.
                if slot.is_none_or(|s| s.readiness != NodeReadiness::Ready) {
                    *slot = Some(n);
                }
            }
        }
        out
    }
}

/// What to do with one pending CSR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Approve it: the client certificate of this logical host's kubelet.
    Client(String),
    /// Approve it: the serving certificate of this logical host's kubelet.
    Serving(String),
    /// Leave it pending, for this reason.
    Leave(String),
}

/// Whether the CSR's usages are, as a set, exactly one of `sets`: the kube-controller-manager's
/// kubelet signers sign nothing else (an approved CSR with other usages only gets a `Failed`
/// condition and no certificate).
fn usages_are(csr: &PendingCsr, sets: &[&[&str]]) -> bool {
    let asked: BTreeSet<&str> = csr.usages.iter().map(String::as_str).collect();
    sets.iter()
        .any(|set| asked == set.iter().copied().collect::<BTreeSet<&str>>())
}

/// The usages of a kubelet client certificate the signer accepts (with key encipherment for
/// an RSA key, without for ECDSA).
const CLIENT_USAGES: &[&[&str]] = &[
    &["digital signature", "client auth"],
    &["digital signature", "key encipherment", "client auth"],
];

/// The usages of a kubelet serving certificate the signer accepts.
const SERVING_USAGES: &[&[&str]] = &[
    &["digital signature", "server auth"],
    &["digital signature", "key encipherment", "server auth"],
];

/// Decides whether `csr` is a kubelet CSR of one of the hosts `names` knows.
pub(crate) fn classify(csr: &PendingCsr, names: &NodeNames, role: HostRole) -> Verdict {
    let Some(cn) = &csr.common_name else {
        return Verdict::Leave("no subject common name could be read from the request".into());
    };
    let Some(node) = cn.strip_prefix("system:node:") else {
        return Verdict::Leave(format!(
            "the requested name {cn} is not a node (system:node:<host>)"
        ));
    };
    let Some(logical) = names.logical(node) else {
        return Verdict::Leave(format!("{node} is not a bound {role} host"));
    };
    if csr.organizations != [NODES_GROUP] {
        return Verdict::Leave(format!(
            "the request's organisation is [{}], not [{NODES_GROUP}]",
            csr.organizations.join(", ")
        ));
    }
    if csr.requester == NODE_BOOTSTRAPPER {
        if csr.signer != KUBELET_CLIENT_SIGNER {
            return Verdict::Leave(format!(
                "the node-bootstrapper asked signer {} instead of {KUBELET_CLIENT_SIGNER}",
                csr.signer
            ));
        }
        if !usages_are(csr, CLIENT_USAGES) {
            return Verdict::Leave(format!(
                "usages {} are not those of a kubelet client certificate",
                csr.usages.join(", ")
            ));
        }
        // The client signer refuses any subject alternative name.
        let sans: Vec<&str> = csr
            .dns_names
            .iter()
            .chain(&csr.ip_addresses)
            .chain(&csr.other_alt_names)
            .map(String::as_str)
            .collect();
        if !sans.is_empty() {
            return Verdict::Leave(format!(
                "a kubelet client certificate names no subject alternative name, this one asks for {}",
                sans.join(", ")
            ));
        }
        return Verdict::Client(logical.to_string());
    }
    if csr.requester == node_user(node) {
        if csr.signer != KUBELET_SERVING_SIGNER {
            return Verdict::Leave(format!(
                "the node asked signer {} instead of {KUBELET_SERVING_SIGNER}",
                csr.signer
            ));
        }
        if !usages_are(csr, SERVING_USAGES) {
            return Verdict::Leave(format!(
                "usages {} are not those of a kubelet serving certificate",
                csr.usages.join(", ")
            ));
        }
        // The serving signer wants DNS or IP alternative names and nothing else.
        if !csr.other_alt_names.is_empty() {
            return Verdict::Leave(format!(
                "a kubelet serving certificate names only DNS names and IP addresses, this one also asks for {}",
                csr.other_alt_names.join(", ")
            ));
        }
        if csr.dns_names.is_empty() && csr.ip_addresses.is_empty() {
            return Verdict::Leave(
                "a kubelet serving certificate names its DNS names or IP addresses, this one names none"
                    .into(),
            );
        }
        return Verdict::Serving(logical.to_string());
    }
    Verdict::Leave(format!(
        "requester {} is neither the node-bootstrapper nor {}",
        csr.requester,
        node_user(node)
    ))
}

/// Whether waiting may go on after `e`: the API server may be down for a while (still
/// bootstrapping, restarting, the load balancer reloading); anything else will not pass.
pub(crate) fn transient(e: &CapabilityError) -> bool {
    matches!(e, CapabilityError::Unreachable { .. })
}

/// One cluster read inside a wait loop: its value, or `None` after a transient failure while
/// time is left (reported, then one [`POLL`] slept: the caller starts its next round).
pub(crate) async fn read_or_wait<T>(
    read: Result<T, CapabilityError>,
    started: Instant,
    timeout: Duration,
) -> Result<Option<T>, CapabilityError> {
    match read {
        Ok(value) => Ok(Some(value)),
        Err(e) if transient(&e) && started.elapsed() < timeout => {
            report_progress(format!("{e}; retrying"));
            tokio::time::sleep(POLL).await;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// One CSR left pending, as the report lists it.
pub(crate) fn describe_left(csr: &PendingCsr, why: &str) -> String {
    format!(
        "{} (requester {}, CN {}): {why}",
        csr.name,
        csr.requester,
        csr.common_name.as_deref().unwrap_or("none")
    )
}

/// A node's state in one line: `worker0 Ready (KubeletReady)`, `worker1 not registered`.
pub(crate) fn describe_node(logical: &str, node: Option<&NodeStatus>) -> String {
    match node {
        None => format!("{logical} not registered as a Node"),
        Some(n) if n.reason.is_empty() => format!("{logical} {} (Node {})", n.readiness, n.name),
        Some(n) => format!("{logical} {} (Node {}, {})", n.readiness, n.name, n.reason),
    }
}

/// A small cluster for unit tests: bootstrap, cp0-cp2, worker0.
#[cfg(test)]
pub(crate) fn tests_layout() -> ClusterLayout {
    use harmony::domain::capability::LogicalHost;
    use harmony_types::{Dns1123Label, HostName, IpAddress, Ipv4Cidr};
    {
        let host = |n: &str, ip: &str| {
            LogicalHost::new(HostName::parse(n).unwrap(), IpAddress::parse(ip).unwrap())
        };
        ClusterLayout {
            cluster_name: Dns1123Label::parse("okd").unwrap(),
            base_domain: HostName::parse("example.com").unwrap(),
            network: Ipv4Cidr::parse("10.0.0.0/24").unwrap(),
            gateway: IpAddress::parse("10.0.0.1").unwrap(),
            load_balancer: IpAddress::parse("10.0.0.2").unwrap(),
            services: IpAddress::parse("10.0.0.2").unwrap(),
            bootstrap: host("bootstrap", "10.0.0.10"),
            control_plane: vec![
                host("cp0", "10.0.0.11"),
                host("cp1", "10.0.0.12"),
                host("cp2", "10.0.0.13"),
            ],
            workers: vec![host("worker0", "10.0.0.21")],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> ClusterLayout {
        tests_layout()
    }

    fn csr(requester: &str, cn: Option<&str>, signer: &str, usages: &[&str]) -> PendingCsr {
        PendingCsr {
            name: "csr-1".into(),
            requester: requester.into(),
            common_name: cn.map(str::to_string),
            organizations: vec![NODES_GROUP.into()],
            // A serving request names its host; a client request names nothing.
            dns_names: if signer == KUBELET_SERVING_SIGNER {
                vec!["worker0".into()]
            } else {
                Vec::new()
            },
            ip_addresses: Vec::new(),
            other_alt_names: Vec::new(),
            signer: signer.into(),
            usages: usages.iter().map(|u| u.to_string()).collect(),
        }
    }

    const CLIENT: &[&str] = &["digital signature", "client auth"];
    const SERVING: &[&str] = &["digital signature", "server auth"];

    #[test]
    fn only_kubelet_csrs_of_bound_hosts_are_approved() {
        let names = NodeNames::new(&layout(), ["worker0"]);
        let w = HostRole::Worker;
        let client = csr(
            NODE_BOOTSTRAPPER,
            Some("system:node:worker0"),
            KUBELET_CLIENT_SIGNER,
            CLIENT,
        );
        assert_eq!(
            classify(&client, &names, w),
            Verdict::Client("worker0".into())
        );
        let fqdn = csr(
            NODE_BOOTSTRAPPER,
            Some("system:node:worker0.okd.example.com"),
            KUBELET_CLIENT_SIGNER,
            CLIENT,
        );
        assert_eq!(
            classify(&fqdn, &names, w),
            Verdict::Client("worker0".into())
        );
        let serving = csr(
            "system:node:worker0",
            Some("system:node:worker0"),
            KUBELET_SERVING_SIGNER,
            SERVING,
        );
        assert_eq!(
            classify(&serving, &names, w),
            Verdict::Serving("worker0".into())
        );

        let unknown = csr(
            NODE_BOOTSTRAPPER,
            Some("system:node:intruder"),
            KUBELET_CLIENT_SIGNER,
            CLIENT,
        );
        assert!(
            matches!(classify(&unknown, &names, w), Verdict::Leave(why) if why.contains("intruder is not a bound worker host"))
        );
        let stranger = csr(
            "system:serviceaccount:default:builder",
            Some("system:node:worker0"),
            KUBELET_CLIENT_SIGNER,
            CLIENT,
        );
        assert!(
            matches!(classify(&stranger, &names, w), Verdict::Leave(why) if why.contains("system:serviceaccount:default:builder"))
        );
        // Another node may not ask for worker0's serving certificate.
        let other_node = csr(
            "system:node:worker9",
            Some("system:node:worker0"),
            KUBELET_SERVING_SIGNER,
            SERVING,
        );
        assert!(matches!(
            classify(&other_node, &names, w),
            Verdict::Leave(_)
        ));
        let wrong_signer = csr(
            NODE_BOOTSTRAPPER,
            Some("system:node:worker0"),
            KUBELET_SERVING_SIGNER,
            SERVING,
        );
        assert!(
            matches!(classify(&wrong_signer, &names, w), Verdict::Leave(why) if why.contains("signer"))
        );
        let server_usage = csr(
            NODE_BOOTSTRAPPER,
            Some("system:node:worker0"),
            KUBELET_CLIENT_SIGNER,
            &["client auth", "server auth"],
        );
        assert!(
            matches!(classify(&server_usage, &names, w), Verdict::Leave(why) if why.contains("usages"))
        );
        let mut masters = client.clone();
        masters.organizations.push("system:masters".into());
        assert!(
            matches!(classify(&masters, &names, w), Verdict::Leave(why) if why.contains("system:nodes, system:masters"))
        );
        // What the kube-controller-manager's signers would refuse is left pending too.
        let rsa = csr(
            NODE_BOOTSTRAPPER,
            Some("system:node:worker0"),
            KUBELET_CLIENT_SIGNER,
            &["client auth", "key encipherment", "digital signature"],
        );
        assert_eq!(classify(&rsa, &names, w), Verdict::Client("worker0".into()));
        let client_only = csr(
            NODE_BOOTSTRAPPER,
            Some("system:node:worker0"),
            KUBELET_CLIENT_SIGNER,
            &["client auth"],
        );
        assert!(
            matches!(classify(&client_only, &names, w), Verdict::Leave(why) if why.contains("usages client auth"))
        );
        let mut client_san = client.clone();
        client_san.ip_addresses.push("10.0.0.21".into());
        assert!(
            matches!(classify(&client_san, &names, w), Verdict::Leave(why) if why.contains("asks for 10.0.0.21"))
        );
        let mut no_san = serving.clone();
        no_san.dns_names.clear();
        assert!(
            matches!(classify(&no_san, &names, w), Verdict::Leave(why) if why.contains("names none"))
        );
        let mut ip_only = no_san.clone();
        ip_only.ip_addresses.push("10.0.0.21".into());
        assert_eq!(
            classify(&ip_only, &names, w),
            Verdict::Serving("worker0".into())
        );
        let mut email = serving.clone();
        email.other_alt_names.push("email a@example.com".into());
        assert!(
            matches!(classify(&email, &names, w), Verdict::Leave(why) if why.contains("email a@example.com"))
        );
        let serving_only = csr(
            "system:node:worker0",
            Some("system:node:worker0"),
            KUBELET_SERVING_SIGNER,
            &["server auth", "key encipherment"],
        );
        assert!(matches!(
            classify(&serving_only, &names, w),
            Verdict::Leave(why) if why.contains("serving certificate")
        ));
        let unreadable = csr(NODE_BOOTSTRAPPER, None, KUBELET_CLIENT_SIGNER, CLIENT);
        assert!(matches!(
            classify(&unreadable, &names, w),
            Verdict::Leave(_)
        ));
    }

    #[test]
    fn a_ready_node_under_either_name_counts() {
        let names = NodeNames::new(&layout(), ["worker0"]);
        let nodes = [
            NodeStatus {
                name: "worker0".into(),
                readiness: NodeReadiness::NotReady,
                reason: "KubeletNotReady".into(),
            },
            NodeStatus {
                name: "worker0.okd.example.com".into(),
                readiness: NodeReadiness::Ready,
                reason: "KubeletReady".into(),
            },
            NodeStatus {
                name: "cp0".into(),
                readiness: NodeReadiness::Ready,
                reason: String::new(),
            },
        ];
        let s = names.statuses(&["worker0".into()], &nodes);
        assert_eq!(s.len(), 1);
        assert_eq!(s["worker0"].unwrap().readiness, NodeReadiness::Ready);
        assert_eq!(
            describe_node("worker0", s["worker0"]),
            "worker0 Ready (Node worker0.okd.example.com, KubeletReady)"
        );
        assert_eq!(
            describe_node("worker1", None),
            "worker1 not registered as a Node"
        );
    }
}
