//! The region agent rollout in render mode on a `RegionSiteTopology`: the control plane's URL
//! and the `RegionAgent`'s `clusterRules` come out in the rendered manifests, and nothing
//! contacts the control plane (its host does not even resolve).

use std::path::Path;

use harmony::domain::capability::{BootstrapGrant, CapabilityError, RegionAdmin, RegionState};
use harmony::domain::{ChangeAction, Inventory, Maestro, RunOptions, Score, ScoreStatus};
use harmony::infra::control_plane::{ControlPlaneClient, SecretString};
use harmony::infra::region_site::RegionSiteTopology;
use harmony::infra::render::RenderTopology;
use harmony_modules::region::{RegionAgentRolloutScore, RegionAgentSpec};
use harmony_types::{RegionId, ZoneId};

const CONTROL_PLANE: &str = "https://cp.invalid:8443";

fn topology(out: &Path) -> RegionSiteTopology<RenderTopology> {
    let cp = ControlPlaneClient::new(CONTROL_PLANE, SecretString::new("admin-token"), None)
        .unwrap_or_else(|e| panic!("{e}"));
    RegionSiteTopology::new(RenderTopology::new("eu-west", out), cp)
}

fn spec(cluster_rules: &str) -> RegionAgentSpec {
    serde_yaml::from_str(&format!(
        "region: eu-west\nzone: paris-1\nsite: site-eu\nimage: registry.example.com/harmony-agent:0.1\n{cluster_rules}"
    ))
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Every rendered file's text, concatenated.
fn rendered(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text.push_str(&rendered(&path));
        } else {
            text.push_str(&std::fs::read_to_string(&path).unwrap());
            text.push('\n');
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_agent_renders_with_its_cluster_rules_and_the_topologys_control_plane() {
    let out = tempfile::tempdir().unwrap();
    let score = RegionAgentRolloutScore::from_spec(&spec(
        "clusterRules:\n- apiGroups: [apiextensions.k8s.io]\n  resources: [customresourcedefinitions]\n  verbs: [get, create]\n  resourceNames: [widgets.example.com]\n",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut maestro = Maestro::new(Inventory::empty(), topology(out.path()));
    maestro.register(vec![Box::new(score)]);
    let report = maestro
        .run_all(RunOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0);
    assert_eq!(report.status, ScoreStatus::Success, "{report:#?}");
    // The region is reported as created on the topology's control plane.
    let region = report
        .changes
        .iter()
        .find(|c| c.object == "control-plane Region eu-west")
        .unwrap_or_else(|| panic!("{:#?}", report.changes));
    assert_eq!(region.action, ChangeAction::Create);
    assert_eq!(region.location.as_deref(), Some(CONTROL_PLANE));

    let text = rendered(out.path());
    // Agents dial the topology's control plane (no agent URL was given).
    assert!(
        text.contains(&format!("HARMONY_CONTROL_PLANE_URL: {CONTROL_PLANE}")),
        "{text}"
    );
    // clusterRules became the agent's cluster-scoped ClusterRole.
    let cluster_role = text
        .split("\n---\n")
        .flat_map(|doc| doc.split("apiVersion:"))
        .find(|doc| {
            doc.contains("kind: ClusterRole\n")
                && doc.contains("name: harmony-agent-harmony-agent-cluster")
        })
        .unwrap_or_else(|| panic!("no cluster ClusterRole rendered:\n{text}"));
    for expected in [
        "customresourcedefinitions",
        "widgets.example.com",
        "apiextensions.k8s.io",
    ] {
        assert!(cluster_role.contains(expected), "{cluster_role}");
    }
    assert!(
        !text.contains("admin-token"),
        "the admin token was rendered"
    );
}

#[test]
fn a_region_agent_asking_for_secrets_or_wildcards_is_refused_naming_the_entry() {
    let e = RegionAgentRolloutScore::from_spec(&spec(
        "clusterRules:\n- apiGroups: [\"\"]\n  resources: [persistentvolumes]\n  verbs: [get]\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n",
    ))
    .unwrap_err();
    assert_eq!(e.field, "spec.clusterRules[1].resources", "{e}");
    let e = RegionAgentRolloutScore::from_spec(&spec(
        "clusterRules:\n- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [\"*\"]\n",
    ))
    .unwrap_err();
    assert_eq!(e.field, "spec.clusterRules[0].verbs", "{e}");
    assert!(e.to_string().contains("wildcard"), "{e}");
}

/// A region administrator reached over plain HTTP (no real one is): only its URL is asked.
struct PlainHttpAdmin;

#[async_trait::async_trait]
impl RegionAdmin for PlainHttpAdmin {
    fn control_plane_url(&self) -> &str {
        "http://cp.invalid"
    }
    async fn create_region(
        &self,
        _: &RegionId,
        _: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        unreachable!("validation contacts no control plane")
    }
    async fn add_zone(
        &self,
        _: &RegionId,
        _: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        unreachable!("validation contacts no control plane")
    }
    async fn new_bootstrap_token(
        &self,
        _: &RegionId,
        _: &ZoneId,
    ) -> Result<BootstrapGrant, CapabilityError> {
        unreachable!("validation contacts no control plane")
    }
    async fn region_state(&self, _: &RegionId) -> Result<Option<RegionState>, CapabilityError> {
        unreachable!("validation contacts no control plane")
    }
    async fn decommission_region(&self, _: &RegionId) -> Result<(), CapabilityError> {
        unreachable!("validation contacts no control plane")
    }
}

#[test]
fn the_agent_url_must_be_tls_whether_given_or_taken_from_the_control_plane() {
    let out = tempfile::tempdir().unwrap();
    type T = RegionSiteTopology<RenderTopology>;
    let score = RegionAgentRolloutScore::from_spec(&spec("")).unwrap();
    Score::<T>::validate(&score).unwrap();
    Score::<T>::validate_on(&score, &topology(out.path())).unwrap();
    let plain = score.clone().with_agent_url("http://cp.invalid");
    let e = Score::<T>::validate(&plain).unwrap_err();
    assert_eq!(e.field, "agent_url", "{e}");
    assert!(e.fix.contains("https://"), "{e}");
    // Without an agent URL, agents dial the control plane's: it must be TLS too.
    let plain_site =
        RegionSiteTopology::new(RenderTopology::new("eu-west", out.path()), PlainHttpAdmin);
    let e = Score::<RegionSiteTopology<RenderTopology, PlainHttpAdmin>>::validate_on(
        &score,
        &plain_site,
    )
    .unwrap_err();
    assert_eq!(e.field, "agent_url", "{e}");
    assert!(e.problem.contains("http://cp.invalid"), "{e}");
    // An explicit TLS agent URL wins over the control plane's.
    let explicit = score.with_agent_url("wss://agents.example.com");
    Score::<RegionSiteTopology<RenderTopology, PlainHttpAdmin>>::validate_on(
        &explicit,
        &plain_site,
    )
    .unwrap();
}
