//! Since when, and what failed, answered from the page in Chromium, on SQLite and on
//! PostgreSQL. Region `eu` has a healthy zone `ok-1` (its agent operates the fixture
//! kube-apiserver) and a zone `bad-1` whose agent cannot reach its cluster (its kubeconfig names
//! a closed port); region `us` has a zone `gone-1` whose agent was killed, with a request queued
//! since. Tenants acme and beta each sent a request with the same id `fail-1` to `ok-1`, with a
//! manifest the API server refuses. `status_page/requests.mjs` signs in, reads the rows, follows
//! a failure's link to its page, and opens paths directly.
//!
//! The admin's page says since when each zone has its health (the killed zone unavailable from
//! after the kill), the unreachable zone's agent's own error, the queued request's age with "agent
//! not connected", and both tenants' failures in the agent's words, each one click from its
//! request's page. Acme's page shows its failure under its own id and nothing of beta's; beta's
//! request is the same 404 for acme as a request that does not exist.

use harmony_agent_protocol::tenancy::ProjectQuota;
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::ControlPlaneOptions;
use harmony_e2e::raw_api::RawApi;
use harmony_e2e::world::{Plane, World, WorldOptions, region, zone};
use harmony_http::reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{StatusWorld, iso_secs};

const WAIT: Duration = Duration::from_secs(90);

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Text with runs of whitespace as one space, as the page script reads it.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A row (`region/zone`) of a page reading.
fn row<'a>(page: &'a Value, key: &str) -> &'a Value {
    page["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["key"] == key))
        .unwrap_or_else(|| panic!("no row {key}: {:#}", page["rows"]))
}

/// The ids of a row's list (`in_flight` or `failures`).
fn ids(row: &Value, list: &str) -> Vec<String> {
    row[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// A copy of the fixture's kubeconfig naming a closed port: its agent cannot reach a cluster.
fn unreachable_kubeconfig(w: &World) -> std::path::PathBuf {
    let text = std::fs::read_to_string(w.server.kubeconfig()).unwrap();
    let broken: Vec<String> = text
        .lines()
        .map(|l| match l.find("server:") {
            Some(at) => format!("{}server: https://127.0.0.1:1", &l[..at]),
            None => l.to_string(),
        })
        .collect();
    let path = w.dir.path().join("unreachable.kubeconfig");
    std::fs::write(&path, broken.join("\n")).unwrap();
    path
}

/// Sends tenant `tenant`'s request `fail-1` to `eu`/`ok-1`: a ConfigMap named `name`, which the
/// API server refuses. The error the agent answered, as `code: message`.
async fn failing_request(w: &World, tenant: &str, name: &str) -> String {
    let admin = &w.client;
    let minted = admin.create_tenant_token(tenant, None).await.unwrap();
    let ca = std::fs::read(w.pki().ca()).unwrap();
    let client = harmony::infra::control_plane::ControlPlaneClient::new(
        &w.url(),
        minted.token.clone(),
        Some(&ca),
    )
    .unwrap()
    .for_project(None, "web");
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"k": "v"}});
    let res = client
        .request_in_zone(
            "eu",
            Some("ok-1"),
            "fail-1",
            "apply_manifests",
            json!({ "manifests": [manifest] }),
            Duration::from_secs(60),
        )
        .await
        .unwrap_or_else(|e| panic!("{tenant}'s request: {e}\n{}", w.logs()));
    assert!(!res.ok, "the API server refuses {name}: {res:?}");
    let e = res.error.expect("an error");
    format!("{}: {}", e.code, e.message)
}

async fn scenario(plane: Plane) {
    let started = now_secs();
    // Controllers: a project's ResourceQuota is enforced (its status set) before its objects go.
    let server = ApiServer::start_with_controllers().unwrap_or_else(|e| panic!("{e}"));
    let w = World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            server: Some(server),
            plane,
            control_plane: ControlPlaneOptions {
                unhealthy_after_ms: 3_000,
                unavailable_after_ms: 6_000,
                ..ControlPlaneOptions::default()
            },
        },
    );
    let ok = w.region_with_agent("eu-ok", "eu", "ok-1").await;
    let bad = w
        .client
        .add_zone(&region("eu"), &zone("bad-1"), None)
        .await
        .unwrap()
        .expect("a new zone");
    let options = harmony_e2e::multi_region::AgentOptions {
        kubeconfig: unreachable_kubeconfig(&w),
        ..w.agent_options("eu-bad", "eu", "bad-1", Some(&bad.bootstrap_token))
    };
    let _bad_agent = w.agent("eu-bad", &options);
    let mut gone = w.region_with_agent("us-gone", "us", "gone-1").await;

    let quota = ProjectQuota {
        cpu: Some("1".into()),
        ..Default::default()
    };
    for tenant in ["acme", "beta"] {
        w.client.create_tenant(tenant).await.unwrap();
        w.client.create_project(tenant, "web", None).await.unwrap();
        w.client.set_tenant_cap(tenant, "eu", &quota).await.unwrap();
        w.client
            .set_project_quota(tenant, "web", "eu", &quota)
            .await
            .unwrap();
    }
    let acme_error = failing_request(&w, "acme", "Acme_Bad!").await;
    let beta_error = failing_request(&w, "beta", "Beta_Bad!").await;

    // The us agent dies; a request for it waits.
    let killed = now_secs();
    gone.kill9();
    let queued = w
        .client
        .request(
            "us",
            "stuck-1",
            "get_inventory",
            json!({}),
            Duration::from_millis(300),
        )
        .await;
    assert!(queued.is_err(), "no agent answers: {queued:?}");
    let api = RawApi::new(&w.url(), w.pki().ca_pem.as_bytes());
    eventually(
        WAIT,
        "us unavailable and eu/bad-1 reporting its error",
        || async {
            let (_, text) = api
                .call(Method::GET, "/v1/regions", Some(w.admin_token()), None)
                .await;
            let zone_of = |r: &str, z: &str| {
                text["regions"]
                    .as_array()
                    .and_then(|rs| rs.iter().find(|x| x["region"] == r))
                    .and_then(|x| x["zones"].as_array())
                    .and_then(|zs| zs.iter().find(|x| x["zone"] == z))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let (us, bad) = (zone_of("us", "gone-1"), zone_of("eu", "bad-1"));
            if us["health"] == "unavailable" && bad["agent_error"].is_string() {
                Ok(())
            } else {
                Err(text)
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));

    let http = harmony_http::ClientSettings::new()
        .ca_pem(Some(w.pki().ca_pem.as_bytes()))
        .https_only(true)
        .build()
        .unwrap_or_else(|e| panic!("{}: {}", e.field, e.problem));
    let s = StatusWorld {
        world: w,
        http,
        _agent: ok,
    };
    let name = |who: &str| format!("requests-{who}-{plane:?}").to_lowercase();
    let read = |token: String, who: &str, open: &str, visit: &str| {
        let env = vec![
            ("STATUS_TOKEN", token),
            ("STATUS_NAME", name(who)),
            ("STATUS_OPEN", open.to_string()),
            ("STATUS_VISIT", visit.to_string()),
        ];
        s.node("requests.mjs", "REQUESTS_PAGE_RESULT", env)
    };

    // The admin.
    let admin = read(
        s.world.admin_token().to_string(),
        "admin",
        "acme@fail-1",
        "",
    )
    .await;
    let read_at = now_secs();
    let us = row(&admin, "us/gone-1");
    assert_eq!(us["health"], "unavailable", "{us}");
    assert!(
        us["since"]
            .as_str()
            .unwrap()
            .starts_with("unavailable since "),
        "{us}"
    );
    let since = iso_secs(us["since_iso"].as_str().unwrap());
    assert!(
        killed <= since && since <= read_at,
        "outage began at {since}, killed at {killed}: {us}"
    );
    assert_eq!(ids(us, "in_flight"), ["stuck-1"], "{us}");
    let stuck = us["in_flight"][0]["text"].as_str().unwrap();
    assert!(
        stuck.contains("queued ") && stuck.ends_with("; agent not connected"),
        "{stuck}"
    );

    let bad = row(&admin, "eu/bad-1");
    assert_eq!(bad["health"], "unhealthy", "{bad}");
    let since = iso_secs(bad["since_iso"].as_str().unwrap());
    assert!(started <= since && since <= read_at, "{bad}");
    let error = bad["agent_error"].as_str().unwrap();
    assert!(
        error.contains("https://127.0.0.1:1") && error.contains("Connection refused"),
        "the agent's own words: {bad}"
    );

    let ok_row = row(&admin, "eu/ok-1");
    assert!(
        ok_row["since"]
            .as_str()
            .unwrap()
            .starts_with("healthy since "),
        "{ok_row}"
    );
    let mut failed = ids(ok_row, "failures");
    failed.sort();
    assert_eq!(failed, ["acme@fail-1", "beta@fail-1"], "{ok_row}");
    let listed = ok_row["requests"].as_str().unwrap();
    for e in [&acme_error, &beta_error] {
        let start: String = squeeze(e).chars().take(60).collect();
        assert!(listed.contains(&start), "{start:?} not in {listed:?}");
    }
    // One click from the zone: acme's request, its error in the agent's words.
    let page = &admin["opened"][0];
    assert_eq!(page["url"], "/status/requests/acme@fail-1");
    assert_eq!(page["state"], "failed");
    assert_eq!(page["owner"], "acme / web");
    let start: String = squeeze(&acme_error).chars().take(200).collect();
    assert!(
        page["error"].as_str().unwrap().contains(&start),
        "{start:?}: {page:#}"
    );
    assert!(
        page["params"]
            .as_array()
            .unwrap()
            .contains(&json!("manifests: 1 object: 1 ConfigMap"))
    );

    // Tenant acme: its own failure by its own id; nothing of beta's, whose request is a 404
    // exactly like one that does not exist.
    let token = s
        .world
        .client
        .create_tenant_token("acme", None)
        .await
        .unwrap()
        .token;
    let mine = read(
        token.expose().to_string(),
        "acme",
        "fail-1",
        "/status/requests/beta@fail-1,/status/requests/beta@nothing",
    )
    .await;
    let keys: Vec<&str> = mine["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.iter().all(|k| k.starts_with("eu/")),
        "acme's regions only: {keys:?}"
    );
    let ok_row = row(&mine, "eu/ok-1");
    assert_eq!(ids(ok_row, "failures"), ["fail-1"], "{ok_row}");
    assert_eq!(ok_row["failures"][0]["href"], "/status/requests/fail-1");
    let page = &mine["opened"][0];
    assert_eq!(
        (page["state"].as_str(), page["owner"].as_str()),
        (Some("failed"), None)
    );
    assert!(
        page["error"].as_str().unwrap().contains("Acme_Bad"),
        "{page:#}"
    );
    for html in [&mine["html"], &page["html"]] {
        let html = html.as_str().unwrap();
        for other in ["beta", "Beta_Bad", "gone-1", "stuck-1"] {
            assert!(!html.contains(other), "{other:?} shown to acme");
        }
    }
    let visited = mine["visited"].as_array().unwrap();
    for v in visited {
        assert_eq!(v["status"], 404, "{v:#}");
        assert_eq!(v["title"], "No such request");
    }
    let theirs = visited[0]["html"]
        .as_str()
        .unwrap()
        .replace("beta@fail-1", "ID");
    let none = visited[1]["html"]
        .as_str()
        .unwrap()
        .replace("beta@nothing", "ID");
    assert_eq!(
        theirs, none,
        "another tenant's request is answered as a missing one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn since_when_and_what_failed_are_answered_from_the_page_on_sqlite() {
    scenario(Plane::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn since_when_and_what_failed_are_answered_from_the_page_on_postgres() {
    scenario(Plane::Postgres).await;
}
