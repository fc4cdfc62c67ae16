//! Two tenants, one of them hostile, against real processes on loopback: the control plane (on
//! SQLite, and on PostgreSQL), a region agent operating a real kube-apiserver fixture (with
//! kube-controller-manager: a project's quota gets its status from the real controller), and an
//! external provider (`e2e-provider`) serving the `queue` type. Tenant beta works normally;
//! tenant acme then uses beta's ids, names and parents, known and guessed:
//!
//! - ids live in the tenant: acme's use of beta's request or instance id answers exactly as a
//!   fresh id does; beta's ids and project are "not found" to acme by every spelling, with the
//!   body of a missing one; a parent of beta's is "not found" like a missing parent;
//! - squatting: acme first submits every instance-request id it can predict for beta; beta's
//!   create and delete then succeed;
//! - containment at submit: a cluster-scoped kind, in any spelling, including one only the
//!   agent's discovery knows (a CRD), is a 422 before anything reaches the agent;
//! - ownership records are per project: both tenants apply with owner `site` and prune, and
//!   acme's prune deletes only acme's objects;
//! - nothing of beta's changed (read back as the admin and as beta).
//!
//! Run: `cargo test -p harmony_e2e --test tenant_isolation`.

use harmony_api::ProjectQuota;
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::{eventually, eventually_blocking};
use harmony_e2e::multi_region::{Agent, AgentOptions, ControlPlaneOptions, free_port};
use harmony_e2e::providers::{ProviderProcess, http_json};
use harmony_e2e::raw_api::RawApi;
use harmony_e2e::world::{Plane, World, WorldOptions};
use harmony_http::reqwest::Method as M;
use serde_json::{Value, json};
use std::time::Duration;

const PROVIDER_BIN: &str = env!("CARGO_BIN_EXE_e2e-provider");
const WAIT: Duration = Duration::from_secs(60);

/// A cluster-scoped kind that only discovery knows (not in the control plane's static list).
const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// The shared e2e world, with the agent, provider and tenants of this suite.
struct Tenants {
    world: World,
    _agent: Agent,
    _provider: ProviderProcess,
    api: RawApi,
    admin: String,
    acme: String,
    beta: String,
}

impl Tenants {
    async fn start(postgres: bool) -> Self {
        // Controllers: a project's presence waits for its ResourceQuota's status.
        let server = ApiServer::start_with_controllers().unwrap_or_else(|e| panic!("{e}"));
        let out = server.kubectl_stdin(&["apply", "-f", "-"], WIDGET_CRD);
        assert!(out.status.success(), "{out:?}");
        let out = server.kubectl(&[
            "wait",
            "--for=condition=established",
            "--timeout=60s",
            "crd/widgets.example.com",
        ]);
        assert!(out.status.success(), "{out:?}");
        let world = World::start(
            harmony_e2e::bins!(),
            WorldOptions {
                server: Some(server),
                plane: if postgres {
                    Plane::Postgres
                } else {
                    Plane::Sqlite
                },
                control_plane: ControlPlaneOptions {
                    rust_log: Some("harmony_control_plane=debug,info".into()),
                    ..Default::default()
                },
            },
        );
        let client = world.client.clone();
        let created = world.create("eu", "z1").await;
        let provider_api = free_port().unwrap();
        let options = AgentOptions {
            rust_log: Some("harmony_agent=debug,info".into()),
            extra_args: vec![
                "--provider-listen".into(),
                format!("127.0.0.1:{provider_api}"),
                "--instance-poll-ms".into(),
                "200".into(),
            ],
            ..world.agent_options("agent", "eu", "z1", Some(&created.bootstrap_token))
        };
        let agent = world.agent("agent", &options);
        let provider =
            ProviderProcess::start(PROVIDER_BIN.as_ref(), "q1", world.dir.path(), 0).unwrap();
        let url = provider.url();
        let register = json!({"name": "q1", "service_types": ["queue"], "endpoint": url,
            "health_url": format!("{url}/healthz")});
        let providers = format!("http://127.0.0.1:{provider_api}/v1/providers");
        eventually_blocking(
            WAIT,
            "the agent's provider API to register q1",
            || match http_json("POST", &providers, Some(&register), None) {
                Ok((200 | 201, _)) => Ok(()),
                other => Err(other),
            },
        )
        .unwrap_or_else(|w| panic!("{w}\n{}", world.logs()));
        let api = RawApi::new(&world.cp().url(), world.pki().ca_pem.as_bytes());
        let admin = world.cp().admin_token.clone();
        let mut w = Self {
            world,
            _agent: agent,
            _provider: provider,
            api,
            admin,
            acme: String::new(),
            beta: String::new(),
        };
        eventually(WAIT, "region eu healthy, advertising queue", || async {
            let (_, eu) = w
                .api
                .call(M::GET, "/v1/regions/eu", Some(&w.admin), None)
                .await;
            let advertised = eu["advertised_services"]
                .as_array()
                .is_some_and(|a| a.iter().any(|t| t == "queue"));
            if advertised && eu["health"] == "healthy" {
                Ok(())
            } else {
                Err(eu)
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.world.logs()));
        for (tenant, project) in [("acme", "web"), ("beta", "shop")] {
            client.create_tenant(tenant).await.unwrap();
            client.create_project(tenant, project, None).await.unwrap();
            let quota = ProjectQuota {
                cpu: Some("2".into()),
                memory: Some("4Gi".into()),
                ..Default::default()
            };
            client
                .set_project_quota(tenant, project, "eu", &quota)
                .await
                .unwrap();
            let token = client.create_tenant_token(tenant, None).await.unwrap();
            let token = token.token.expose().to_string();
            match tenant {
                "acme" => w.acme = token,
                _ => w.beta = token,
            }
        }
        w
    }

    async fn call(&self, token: &str, method: M, path: &str, body: Option<Value>) -> (u16, Value) {
        self.api
            .call(method, path, Some(token), body.as_ref())
            .await
    }

    /// Submits `op` for `project` with `id` as `token`.
    async fn submit(
        &self,
        token: &str,
        id: &str,
        project: &str,
        op: &str,
        params: Value,
    ) -> (u16, Value) {
        let body = json!({"id": id, "op": op, "project": project, "params": params,
            "timeout_s": 20});
        self.call(token, M::POST, "/v1/regions/eu/requests", Some(body))
            .await
    }

    /// The control plane's and the agent's logs, for failure messages.
    fn logs(&self) -> String {
        let agent = std::fs::read_to_string(self.world.log("agent")).unwrap_or_default();
        format!(
            "control plane:\n{}\nagent:\n{agent}",
            self.world.cp().logs()
        )
    }

    /// Creates an instance of `queue` for `project` as `token` (`extra` merged into the body).
    async fn create(&self, token: &str, project: &str, extra: Value) -> (u16, Value) {
        let mut body = json!({"type": "queue", "project": project, "region": "eu"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        self.call(token, M::POST, "/v1/services", Some(body)).await
    }

    /// Waits until `token`'s instance `id` is in `state`.
    async fn wait_state(&self, token: &str, id: &str, state: &str) -> Value {
        eventually(WAIT, format!("instance {id} to be {state}"), || async {
            let (status, v) = self
                .call(token, M::GET, &format!("/v1/services/{id}"), None)
                .await;
            if status == 200 && v["state"] == state {
                Ok(v)
            } else {
                Err((status, v))
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.world.logs()))
    }

    /// The names of the ConfigMaps in `namespace` labelled `set=isolation`.
    fn config_maps(&self, namespace: &str) -> Vec<String> {
        let out = self.world.server.kubectl(&[
            "get",
            "configmaps",
            "-n",
            namespace,
            "-l",
            "set=isolation",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ]);
        assert!(out.status.success(), "{out:?}");
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }
}

/// The control plane's stored id of tenant `tenant`'s instance `id` (what a hostile tenant can
/// compute too: the scheme is public).
fn stored_instance_id(tenant: &str, id: &str) -> String {
    harmony_control_plane::services::instance_ids::stored_id(Some(tenant), id)
}

/// An answer with `id` replaced by `ID`, to compare the answers for two ids.
fn masked(answer: &Value, id: &str) -> String {
    answer.to_string().replace(id, "ID")
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"set": "isolation"}}, "data": {"k": name}})
}

fn owned(manifests: Vec<Value>) -> Value {
    json!({"manifests": manifests, "owner": "site", "prune": true})
}

async fn two_tenants_one_hostile(postgres: bool) {
    let w = Tenants::start(postgres).await;
    let (acme, beta) = (w.acme.as_str(), w.beta.as_str());
    let no_objects = json!({"objects": []});

    // Beta, working normally: two requests, an instance, and owned objects.
    for id in ["beta-req-1", "beta-req-2"] {
        let (status, answer) = w
            .submit(beta, id, "shop", "get_objects", no_objects.clone())
            .await;
        assert_eq!(status, 200, "{answer}\n{}", w.logs());
    }
    let (status, answer) = w.create(beta, "shop", json!({"id": "beta-db"})).await;
    assert!(status == 201 || status == 202, "{status} {answer}");
    assert_eq!(answer["id"], "beta-db");
    let beta_db = w.wait_state(beta, "beta-db", "ready").await;
    let (status, answer) = w
        .submit(
            beta,
            "beta-site-1",
            "shop",
            "apply_manifests",
            owned(vec![config_map("b1"), config_map("b2")]),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(w.config_maps("beta-shop"), ["b1", "b2"]);

    // 1. Ids live in the tenant. Beta's request id is acme's own, exactly as a fresh one is.
    for id in ["beta-req-1", "acme-fresh-1"] {
        let (status, answer) = w
            .submit(acme, id, "web", "get_objects", no_objects.clone())
            .await;
        assert_eq!(status, 200, "{id}: {answer}");
        assert_eq!(answer["id"], id, "{answer}");
    }
    // Beta's requests are "not found" to acme by every spelling, with a missing id's body.
    let missing = |id: &str| format!("/v1/requests/{id}");
    let (status, nothing) = w.call(acme, M::GET, &missing("no-such-req"), None).await;
    assert_eq!(status, 404, "{nothing}");
    for id in ["beta-req-2", "beta@beta-req-2"] {
        let (status, answer) = w.call(acme, M::GET, &missing(id), None).await;
        assert_eq!(
            (status, masked(&answer, id)),
            (404, masked(&nothing, "no-such-req")),
            "{id}"
        );
    }
    // Beta's project name is a missing project to acme, for requests and instances alike.
    let (status, nothing) = w
        .submit(
            acme,
            "p-1",
            "no-such-project",
            "get_objects",
            no_objects.clone(),
        )
        .await;
    assert_eq!(status, 404, "{nothing}");
    let (status, answer) = w
        .submit(acme, "p-1", "shop", "get_objects", no_objects.clone())
        .await;
    assert_eq!(
        (status, masked(&answer, "shop")),
        (404, masked(&nothing, "no-such-project"))
    );
    let (status, nothing) = w.create(acme, "no-such-project", json!({})).await;
    assert_eq!(status, 404, "{nothing}");
    let (status, answer) = w.create(acme, "shop", json!({})).await;
    assert_eq!(
        (status, masked(&answer, "shop")),
        (404, masked(&nothing, "no-such-project"))
    );
    // An instance id of beta's is acme's own too (no 409, nothing of beta's told).
    let (status, answer) = w.create(acme, "web", json!({"id": "beta-db"})).await;
    assert!(status == 201 || status == 202, "{status} {answer}");
    assert_eq!(answer["id"], "beta-db");
    assert!(!answer.to_string().contains("shop"), "{answer}");
    w.wait_state(acme, "beta-db", "ready").await;
    // Beta's instance, by its id and by its stored id, is "not found" like a missing one.
    let beta_stored = stored_instance_id("beta", "beta-db");
    let (_, nothing) = w.call(acme, M::GET, "/v1/services/no-such-db", None).await;
    for method in [M::GET, M::DELETE] {
        let (status, none) = w
            .call(acme, method.clone(), "/v1/services/no-such-db", None)
            .await;
        assert_eq!(status, 404, "{none}");
        let (status, answer) = w
            .call(
                acme,
                method.clone(),
                &format!("/v1/services/{beta_stored}"),
                None,
            )
            .await;
        assert_eq!(
            (status, masked(&answer, &beta_stored)),
            (404, masked(&nothing, "no-such-db")),
            "{method}"
        );
    }

    // 2. Links stay inside the tenant: beta's instance as a parent is a missing parent.
    let (status, nothing) = w
        .create(
            acme,
            "web",
            json!({"id": "child-1", "parent": "no-such-db"}),
        )
        .await;
    assert_eq!(status, 400, "{nothing}");
    for parent in [beta_stored.as_str(), "beta-db2"] {
        let (status, answer) = w
            .create(acme, "web", json!({"id": "child-1", "parent": parent}))
            .await;
        assert_eq!(
            (status, masked(&answer, parent)),
            (400, masked(&nothing, "no-such-db")),
            "{parent}"
        );
    }

    // 3. Squatting: acme first takes every instance-request id it can predict for beta-db2.
    let beta_db2 = stored_instance_id("beta", "beta-db2");
    for id in [
        "beta-db2.create.1".to_string(),
        "beta-db2.delete.2".to_string(),
        format!("{beta_db2}.create.1"),
        format!("{beta_db2}.delete.2"),
    ] {
        let (status, answer) = w
            .submit(acme, &id, "web", "get_objects", no_objects.clone())
            .await;
        assert_eq!(status, 200, "{id}: {answer}");
    }
    let (status, answer) = w.create(beta, "shop", json!({"id": "beta-db2"})).await;
    assert!(status == 201 || status == 202, "{status} {answer}");
    w.wait_state(beta, "beta-db2", "ready").await;
    let (status, answer) = w.call(beta, M::DELETE, "/v1/services/beta-db2", None).await;
    assert!(status == 200 || status == 202, "{status} {answer}");
    eventually(WAIT, "beta-db2 to be deleted", || async {
        let (status, answer) = w.call(beta, M::GET, "/v1/services/beta-db2", None).await;
        assert_ne!(answer["state"], "failed", "{answer}");
        if status == 404 { Ok(()) } else { Err(answer) }
    })
    .await
    .unwrap();

    // 4. Containment at submit: cluster-scoped kinds in any spelling, from the agent's discovery
    // too (Widget is a CRD the control plane has no list of), are refused with 422.
    for kind in [
        "Widget",
        "widget",
        "ClusterRole",
        "clusterrole",
        "NAMESPACE",
    ] {
        let api_version = match kind.to_ascii_lowercase().as_str() {
            "widget" => "example.com/v1",
            "clusterrole" => "rbac.authorization.k8s.io/v1",
            _ => "v1",
        };
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "w1"}});
        let (status, answer) = w
            .submit(
                acme,
                &format!("scoped-{kind}"),
                "web",
                "apply_manifests",
                json!({"manifests": [object]}),
            )
            .await;
        assert_eq!(status, 422, "{kind}: {answer}");
        assert_eq!(answer["code"], "containment", "{answer}");
    }
    let out = w.world.server.kubectl(&["get", "widgets", "-o", "name"]);
    assert!(out.stdout.is_empty(), "{out:?}");

    // 5. Ownership records per project: acme's owner `site` is not beta's.
    let (status, answer) = w
        .submit(
            acme,
            "acme-site-1",
            "web",
            "apply_manifests",
            owned(vec![config_map("a1"), config_map("a2")]),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = w
        .submit(
            acme,
            "acme-site-2",
            "web",
            "apply_manifests",
            owned(vec![config_map("a1")]),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(w.config_maps("acme-web"), ["a1"]);
    assert_eq!(
        w.config_maps("beta-shop"),
        ["b1", "b2"],
        "acme's prune reached beta"
    );
    for ns in ["acme-web", "beta-shop"] {
        let out =
            w.world
                .server
                .kubectl(&["get", "configmap", "-n", ns, "harmony-site", "-o", "name"]);
        assert!(out.status.success(), "no ownership record in {ns}: {out:?}");
    }

    // Nothing of beta's changed: its requests (as the admin, tenant-qualified) and instance.
    let (status, r) = w
        .call(&w.admin, M::GET, "/v1/requests/beta@beta-req-1", None)
        .await;
    assert_eq!(
        (status, r["op"].as_str()),
        (200, Some("get_objects")),
        "{r}"
    );
    let (status, r) = w
        .call(&w.admin, M::GET, "/v1/requests/acme@beta-req-1", None)
        .await;
    assert_eq!(status, 200, "{r}");
    let now = w.wait_state(beta, "beta-db", "ready").await;
    assert_eq!(now["created_at"], beta_db["created_at"]);
    let (status, all) = w.call(&w.admin, M::GET, "/v1/services", None).await;
    assert_eq!(status, 200);
    let owners: Vec<(String, String)> = all["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default().to_string(),
                s["tenant"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        owners.contains(&(beta_stored.clone(), "beta".into())),
        "{owners:?}"
    );
    assert!(
        owners.contains(&(stored_instance_id("acme", "beta-db"), "acme".into())),
        "{owners:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hostile_tenant_cannot_see_block_or_link_to_another_on_sqlite() {
    two_tenants_one_hostile(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hostile_tenant_cannot_see_block_or_link_to_another_on_postgresql() {
    two_tenants_one_hostile(true).await;
}
