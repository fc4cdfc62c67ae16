//! Who uses what, in Chromium, on SQLite and on PostgreSQL: two tenants with caps and projects
//! with quotas, a region whose agent operates a kube-apiserver with kube-controller-manager (so
//! each ResourceQuota's status is the real controller's), a pod in each tenant's project. The
//! admin's page shows both tenants' caps, quotas and use as the agent reported them; tenant
//! acme's page shows its own use and only its regions, and nothing of tenant beta: no name,
//! project, namespace, region or figure of beta's appears in what the browser shows or in the
//! page's HTML. `status_page/tenancy.mjs` signs in through the login form and reads the page.

use harmony::domain::RunContext;
use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::infra::control_plane::{AgentTopology, ControlPlaneClient};
use harmony_agent_protocol::SecretString;
use harmony_agent_protocol::tenancy::ProjectQuota;
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::ControlPlaneOptions;
use harmony_e2e::raw_api::RawApi;
use harmony_e2e::world::{Plane, World, WorldOptions, region};
use harmony_http::reqwest::Method;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long the agent may take to report the pods' use (it reads every 10 s).
const WAIT: Duration = Duration::from_secs(120);
const ACME_USE: &str = "cpu 0.5 / 2, memory 256 MiB / 4 GiB, pods 1 / 10";
const BETA_USE: &str = "cpu 0.75 / 3, memory 384 MiB / 6 GiB, pods 1 / 5";
const NEVER: &str = "use unknown: no agent has connected to this zone yet";

fn quota(cpu: &str, memory: &str, pods: u64) -> ProjectQuota {
    ProjectQuota {
        cpu: Some(cpu.into()),
        memory: Some(memory.into()),
        objects: [("pods".to_string(), pods)].into(),
        ..Default::default()
    }
}

fn pod(name: &str, cpu: &str, memory: &str) -> K8sObject {
    K8sObject::new(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    }))
    .unwrap()
}

/// `r`'s value, or a panic with the error and every log.
fn ok<T, E: std::fmt::Display>(w: &World, r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}\n{}", w.logs()))
}

/// Runs `tenancy.mjs` signed in with `token`.
async fn browse(w: &World, token: &str, name: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("status_page/tenancy.mjs");
    let modules = script
        .with_file_name("node_modules")
        .join("playwright-core");
    assert!(
        modules.exists(),
        "{} is missing: run tests/setup.sh (it installs playwright-core and chromium)",
        modules.display()
    );
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status_page");
    std::fs::create_dir_all(&out).unwrap();
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .env("STATUS_URL", w.url())
        .env("STATUS_TOKEN", token)
        .env("STATUS_OUT", &out)
        .env("STATUS_NAME", name)
        .env("HOME", w.dir.path());
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot run node {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TENANCY_RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "tenancy.mjs gave no result ({}):\n{stdout}\n{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr),
                w.logs()
            )
        });
    let result: Value = serde_json::from_str(line).unwrap();
    println!("tenants section ({name}): {}", result["screenshot"]);
    result
}

/// The use row of `project` in `region`/`zone` of `tenant`, from the browser's reading.
fn row<'a>(page: &'a Value, tenant: &str, project: &str, region: &str, zone: &str) -> &'a Value {
    page["tenants"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["tenant"] == tenant))
        .and_then(|t| t["rows"].as_array())
        .and_then(|rows| {
            rows.iter()
                .find(|r| r["project"] == project && r["region"] == region && r["zone"] == zone)
        })
        .unwrap_or_else(|| panic!("no row {tenant}/{project} in {region}/{zone}: {page:#}"))
}

async fn scenario(plane: Plane) {
    // Controllers: the ResourceQuotas' status (hard, used) is kube-controller-manager's.
    let server = ApiServer::start_with_controllers().unwrap_or_else(|e| panic!("{e}"));
    let w = World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            server: Some(server),
            plane,
            control_plane: ControlPlaneOptions {
                unhealthy_after_ms: 15_000,
                unavailable_after_ms: 30_000,
                ..ControlPlaneOptions::default()
            },
        },
    );
    let _agent = w.region_with_agent("eu", "eu-west", "paris-1").await;
    w.create("us-east", "nyc-1").await;
    w.create("ap-south", "tokyo-1").await;
    let admin = &w.client;
    // acme: project web in eu-west and us-east; beta: project shop in eu-west and ap-south.
    // Each tenant's caps: twice the CPU, and a memory figure of its own.
    let plan = [
        (
            "acme",
            "web",
            "10Gi",
            [("eu-west", 2, "4Gi", 10), ("us-east", 1, "2Gi", 5)],
        ),
        (
            "beta",
            "shop",
            "12Gi",
            [("eu-west", 3, "6Gi", 5), ("ap-south", 1, "1Gi", 2)],
        ),
    ];
    for (tenant, project, cap_memory, quotas) in &plan {
        ok(&w, admin.create_tenant(tenant).await);
        ok(&w, admin.create_project(tenant, project, None).await);
        for (r, cpu, memory, pods) in quotas {
            let cap = quota(&(cpu * 2).to_string(), cap_memory, 30);
            ok(&w, admin.set_tenant_cap(tenant, r, &cap).await);
            let q = quota(&cpu.to_string(), memory, *pods);
            ok(&w, admin.set_project_quota(tenant, project, r, &q).await);
        }
    }
    // A pod in each project, in eu-west, through the tenant's own token.
    let ca = std::fs::read(w.pki().ca()).unwrap();
    let mut tokens: Vec<SecretString> = Vec::new();
    for ((tenant, project, ..), (name, cpu, memory)) in plan
        .iter()
        .zip([("web-1", "500m", "256Mi"), ("shop-1", "750m", "384Mi")])
    {
        let minted = ok(&w, admin.create_tenant_token(tenant, None).await);
        let client = ControlPlaneClient::new(&w.url(), minted.token.clone(), Some(&ca))
            .unwrap()
            .for_project(None, project);
        let eu = AgentTopology::new("eu-west", region("eu-west"), client, &RunContext::default());
        let applied = eu
            .apply(&[pod(name, cpu, memory)], &ApplyOptions::default())
            .await;
        ok(&w, applied);
        tokens.push(minted.token);
    }

    // The agent reads the use every 10 s: wait until both pods show on the admin's page.
    let api = RawApi::new(&w.url(), w.pki().ca_pem.as_bytes());
    let shown = eventually(WAIT, "both tenants' use on the admin's page", || async {
        let (status, html) = api
            .call(Method::GET, "/status", Some(w.admin_token()), None)
            .await;
        let html = html.as_str().unwrap_or_default().to_string();
        if status == 200 && html.contains(ACME_USE) && html.contains(BETA_USE) {
            Ok(())
        } else {
            Err(html)
        }
    })
    .await;
    ok(&w, shown);

    let name = |who: &str| format!("tenancy-{who}-{plane:?}").to_lowercase();
    let page = browse(&w, w.admin_token(), &name("admin")).await;
    assert_eq!(page["heading"], "Tenants", "{page:#}");
    let tenants: Vec<&str> = page["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tenant"].as_str().unwrap())
        .collect();
    assert_eq!(tenants, ["acme", "beta"]);
    let acme_eu = row(&page, "acme", "web", "eu-west", "paris-1");
    assert_eq!(acme_eu["use"], ACME_USE, "{acme_eu}");
    assert_eq!(acme_eu["quota"], "cpu 2, memory 4 GiB, pods 10");
    assert_eq!(acme_eu["namespace"], "acme-web");
    assert_eq!(acme_eu["known"], true);
    assert!(
        acme_eu["use_note"].as_str().unwrap().starts_with("as of "),
        "{acme_eu}"
    );
    assert_eq!(
        row(&page, "beta", "shop", "eu-west", "paris-1")["use"],
        BETA_USE
    );
    let never = row(&page, "acme", "web", "us-east", "nyc-1");
    assert_eq!(
        (&never["use"], &never["known"]),
        (&json!(NEVER), &json!(false))
    );
    assert_eq!(
        row(&page, "beta", "shop", "ap-south", "tokyo-1")["use"],
        NEVER
    );
    let beta = &page["tenants"][1];
    assert!(
        beta["caps"]
            .as_str()
            .unwrap()
            .contains("eu-west: cpu 6, memory 12 GiB, pods 30"),
        "{beta}"
    );

    let page = browse(&w, tokens[0].expose(), &name("acme")).await;
    assert_eq!(page["heading"], "Your projects", "{page:#}");
    assert_eq!(page["tenants"].as_array().unwrap().len(), 1, "{page:#}");
    assert_eq!(
        row(&page, "acme", "web", "eu-west", "paris-1")["use"],
        ACME_USE
    );
    assert_eq!(row(&page, "acme", "web", "us-east", "nyc-1")["use"], NEVER);
    // Only the regions where acme has a project.
    let mut keys: Vec<&str> = page["zone_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["eu-west/paris-1", "us-east/nyc-1"], "{page:#}");
    let (text, html) = (
        page["text"].as_str().unwrap(),
        page["html"].as_str().unwrap(),
    );
    for s in ["beta", "shop", "ap-south", "tokyo-1"] {
        assert!(!html.contains(s), "{s:?} in acme's page:\n{html}");
    }
    for s in ["0.75", "384 MiB", "6 GiB", "12 GiB", "Caps"] {
        assert!(!text.contains(s), "{s:?} shown to acme:\n{text}");
    }
    assert!(
        !html.contains(tokens[0].expose()),
        "the token is not rendered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_quota_use_in_chromium_on_sqlite() {
    scenario(Plane::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_quota_use_in_chromium_on_postgres() {
    scenario(Plane::Postgres).await;
}
