//! The control plane's status page in headless Chromium: a real control plane with two regions,
//! one whose agent operates a fixture kube-apiserver (healthy) and one whose agent never
//! connected (unavailable, with requests queued for it). `status_page/shot.mjs` signs in through
//! the login form, reads the table and saves a screenshot; the table must say what
//! `GET /v1/regions` says.
//!
//! Needs `/usr/bin/chromium` and `tests/e2e/status_page/node_modules` (playwright-core):
//! `tests/setup.sh` installs both.

#[path = "status_page/tenancy.rs"]
mod tenancy;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::{Agent, ControlPlaneOptions};
use harmony_e2e::world::{Plane, World, WorldOptions};

#[path = "status_page/live.rs"]
mod live;
#[path = "status_page/requests.rs"]
mod requests;

const WAIT: Duration = Duration::from_secs(60);
const ADMIN_COLUMNS: [&str; 7] = [
    "last_heartbeat",
    "pending_requests",
    "agent_version",
    "ops",
    "node_count",
    "capacity",
    "replica",
];

/// The world, an HTTPS client trusting its CA, and the one agent.
struct StatusWorld {
    world: World,
    http: reqwest::Client,
    _agent: Agent,
}

impl StatusWorld {
    /// `eu-west`/`paris-1` healthy with its agent, `us-east`/`nyc-1` never connected with two
    /// requests queued; on SQLite.
    async fn new() -> Self {
        Self::on(Plane::Sqlite).await
    }

    /// [`StatusWorld::new`] on the store `plane` says.
    async fn on(plane: Plane) -> Self {
        // Generous health thresholds: a busy machine must not turn the healthy region
        // unhealthy between the page and the API's answer the test compares it with.
        let world = World::start(
            harmony_e2e::bins!(),
            WorldOptions {
                plane,
                control_plane: ControlPlaneOptions {
                    unhealthy_after_ms: 15_000,
                    unavailable_after_ms: 30_000,
                    ..ControlPlaneOptions::default()
                },
                ..Default::default()
            },
        );
        let eu = world.create("eu-west", "paris-1").await;
        world.create("us-east", "nyc-1").await;
        let options = world.agent_options("eu", "eu-west", "paris-1", Some(&eu.bootstrap_token));
        let agent = world.agent("eu", &options);
        let http = harmony_http::ClientSettings::new()
            .ca_pem(Some(world.pki().ca_pem.as_bytes()))
            .https_only(true)
            .build()
            .unwrap_or_else(|e| panic!("{}: {}", e.field, e.problem));
        let w = Self {
            world,
            http,
            _agent: agent,
        };
        w.wait_for("eu-west healthy", |r| health_of(r, "eu-west") == "healthy")
            .await;
        // Requests for the region without an agent stay queued: two in flight.
        for i in 0..2 {
            let answer = w
                .world
                .client
                .request(
                    "us-east",
                    &format!("queued-{i}"),
                    "get_inventory",
                    json!({}),
                    Duration::from_millis(200),
                )
                .await;
            assert!(answer.is_err(), "no agent can answer: {answer:?}");
        }
        w.wait_for("two requests in flight for us-east", |r| {
            region_of(r, "us-east")["pending_requests"] == 2
        })
        .await;
        w
    }

    /// Declares tenant acme with project `web` holding `quota` in eu-west (and that cap there):
    /// a tenant's page shows only the regions where it has a project.
    async fn acme_with_web_in_eu_west(&self, quota: Value) {
        let admin = self.world.admin_token().to_string();
        for (method, path, body, want) in [
            ("POST", "/v1/admin/tenants", json!({"tenant": "acme"}), 201),
            (
                "PUT",
                "/v1/admin/tenants/acme/caps/eu-west",
                quota.clone(),
                200,
            ),
            (
                "POST",
                "/v1/admin/tenants/acme/projects",
                json!({"project": "web"}),
                201,
            ),
            (
                "PUT",
                "/v1/admin/tenants/acme/projects/web/quotas/eu-west",
                quota,
                200,
            ),
        ] {
            let (status, answer) = self.call(method, path, &admin, Some(body)).await;
            assert_eq!(status, want, "{method} {path}: {answer}");
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(
                method.parse().unwrap(),
                format!("{}{path}", self.world.url()),
            )
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn regions(&self, token: &str) -> Value {
        let (status, body) = self.call("GET", "/v1/regions", token, None).await;
        assert_eq!(status, 200, "GET /v1/regions: {body}");
        body
    }

    async fn wait_for(&self, what: &str, ok: impl Fn(&Value) -> bool) {
        eventually(WAIT, what, || async {
            let r = self.regions(self.world.admin_token()).await;
            if ok(&r) { Ok(()) } else { Err(r) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.world.cp().logs()));
    }

    /// Runs `shot.mjs` signed in with `token`, clicking the `filter` link when given.
    async fn browse(&self, token: &str, name: &str, filter: Option<&str>) -> Value {
        self.browse_with(token, name, filter, None).await
    }

    /// [`StatusWorld::browse`], revoking the token through `revoke` (an admin API path) while the
    /// page is open instead of signing out.
    async fn browse_with(
        &self,
        token: &str,
        name: &str,
        filter: Option<&str>,
        revoke: Option<&str>,
    ) -> Value {
        let mut env = vec![
            ("STATUS_TOKEN", token.to_string()),
            ("STATUS_NAME", name.to_string()),
        ];
        if let Some(f) = filter {
            env.push(("STATUS_FILTER", f.to_string()));
        }
        if let Some(path) = revoke {
            env.push(("STATUS_REVOKE_URL", format!("{}{path}", self.world.url())));
            env.push(("STATUS_ADMIN_TOKEN", self.world.admin_token().to_string()));
        }
        let result = self.node("shot.mjs", "STATUS_PAGE_RESULT", env).await;
        println!("status page screenshot ({name}): {}", result["screenshot"]);
        result
    }

    /// Runs `status_page/<script>` with `env` (and `STATUS_URL`, `STATUS_OUT`); the JSON on its
    /// stdout line starting with `<marker> `.
    async fn node(&self, script: &str, marker: &str, env: Vec<(&str, String)>) -> Value {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("status_page")
            .join(script);
        let modules = script.with_file_name("node_modules");
        for package in ["playwright-core", "axe-core"] {
            assert!(
                modules.join(package).exists(),
                "{} is missing: run tests/setup.sh (it installs the npm packages and chromium)",
                modules.join(package).display()
            );
        }
        let mut cmd = Command::new("node");
        cmd.arg(&script)
            .env("STATUS_URL", self.world.url())
            .env("STATUS_OUT", shots_dir())
            .env("HOME", self.world.dir.path())
            // Node's own fetch, to the control plane signed by the test's CA.
            .env("NODE_TLS_REJECT_UNAUTHORIZED", "0")
            .envs(env);
        let output = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("cannot run node {}: {e}", script.display()));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let name = script.file_name().unwrap().to_string_lossy();
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{marker} ")))
            .unwrap_or_else(|| {
                panic!(
                    "{name} gave no result ({}):\n{stdout}\n{stderr}\ncontrol plane log:\n{}",
                    output.status,
                    self.world.cp().logs()
                )
            });
        for l in stderr
            .lines()
            .filter(|l| l.starts_with(&format!("{name}: ")))
        {
            eprintln!("{l}");
        }
        serde_json::from_str(line).unwrap()
    }
}

/// Screenshots are kept under the target folder, for people to look at.
fn shots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status_page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn region_of<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["regions"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["region"] == name))
        .unwrap_or_else(|| panic!("no region {name} in {list}"))
}

fn health_of(list: &Value, name: &str) -> String {
    region_of(list, name)["health"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The zones of a region as the API shows them: `zones` entries when they are objects, else
/// the region's own fields describe its one zone.
fn api_zones(region: &Value) -> Vec<Value> {
    match region["zones"].as_array() {
        Some(zs) if !zs.is_empty() && zs.iter().all(Value::is_object) => zs.clone(),
        _ => vec![region.clone()],
    }
}

/// `"—"` on the page is an absent value in the API.
fn shown(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        Value::String(s) if s.is_empty() => "—".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "—".into(),
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ`.
fn iso_secs(iso: &str) -> i64 {
    let n = |a: usize, b: usize| iso[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19)
}

/// The page's rows, checked against the API's answers before and after the page was read.
fn assert_rows_match(page: &Value, before: &Value, after: &Value, admin: bool) {
    let rows = page["rows"].as_array().unwrap();
    let mut expected = Vec::new();
    for region in after["regions"].as_array().unwrap() {
        for zone in api_zones(region) {
            expected.push((region.clone(), zone));
        }
    }
    assert_eq!(
        rows.len(),
        expected.len(),
        "one row per region and zone: {page:#}"
    );
    for (region, zone) in &expected {
        let name = region["region"].as_str().unwrap();
        let zone_name = zone["zone"].as_str().unwrap();
        let row = rows
            .iter()
            .find(|r| r["region"] == name && r["zone"] == zone_name)
            .unwrap_or_else(|| panic!("{name}/{zone_name} missing from the page: {page:#}"));
        let at = format!("{name}/{zone_name}");
        assert_eq!(row["region_health"], region["health"], "{at}");
        assert_eq!(row["health"], zone["health"], "{at}");
        if !admin {
            for col in ADMIN_COLUMNS {
                assert!(
                    row.get(col).is_none(),
                    "{at}: {col} shown to a tenant: {row}"
                );
            }
            continue;
        }
        assert_eq!(
            row["pending_requests"],
            shown(&zone["pending_requests"]),
            "{at}"
        );
        assert_eq!(row["agent_version"], shown(&zone["agent_version"]), "{at}");
        // Ops collapsed: the set most agents offer is listed once above the table.
        let ops = zone["ops"].as_array().cloned().unwrap_or_default();
        let mut sorted: Vec<_> = ops.iter().filter_map(Value::as_str).collect();
        sorted.sort();
        let common: Vec<_> = page["common_ops"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let want = match () {
            _ if ops.is_empty() => "—",
            _ if sorted == common => "common set",
            _ => "",
        };
        if want.is_empty() {
            assert!(
                row["ops"].as_str().unwrap().starts_with("adds:")
                    || row["ops"].as_str().unwrap().starts_with("lacks:"),
                "{at}: {row}"
            );
        } else {
            assert_eq!(row["ops"], want, "{at}: common {common:?}");
        }
        assert_eq!(row["replica"], shown(&zone["replica"]), "{at}");
        let before_zone = api_zones(region_of(before, name))
            .into_iter()
            .find(|z| z["zone"] == zone_name)
            .unwrap();
        match (
            zone["last_heartbeat"].as_i64(),
            row["last_heartbeat_iso"].as_str(),
        ) {
            (None, None) => assert_eq!(row["last_heartbeat"], "never", "{at}"),
            (Some(last), Some(iso)) => {
                // Heartbeats only move forward: the page's lies between the API's two answers.
                let shown = iso_secs(iso);
                let first = before_zone["last_heartbeat"].as_i64().unwrap_or(0);
                assert!(
                    first.div_euclid(1000) <= shown && shown <= last.div_euclid(1000),
                    "{at}: page heartbeat {iso} outside the API's {first}..{last} ms"
                );
                assert!(
                    row["last_heartbeat"].as_str().unwrap().contains(" UTC"),
                    "{at}"
                );
                assert!(
                    row["last_heartbeat"].as_str().unwrap().contains("ago"),
                    "{at}"
                );
            }
            (api, page) => panic!("{at}: heartbeat {api:?} in the API, {page:?} on the page"),
        }
    }
}

fn header_cols(page: &Value) -> Vec<String> {
    page["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["col"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_status_page_in_chromium_shows_what_the_api_answers() {
    let w = StatusWorld::new().await;
    let admin = w.world.admin_token().to_string();

    let before = w.regions(&admin).await;
    let page = w.browse(&admin, "status-admin", None).await;
    let after = w.regions(&admin).await;

    assert_eq!(page["login_url"], "/status/login", "{page:#}");
    assert_eq!(page["who"], "admin");
    assert_eq!(
        page["scripts"], 1,
        "the page runs its own script only (/status/live.js)"
    );
    let mut cols = vec!["region", "zone", "health", "requests"];
    cols.extend(ADMIN_COLUMNS);
    assert_eq!(header_cols(&page), cols);
    assert_rows_match(&page, &before, &after, true);
    assert_eq!(health_of(&after, "eu-west"), "healthy");
    assert_eq!(health_of(&after, "us-east"), "unavailable");
    let html = page["html"].as_str().unwrap();
    assert!(!html.contains(&admin), "the page shows the token");

    // The session cookie: HttpOnly, Secure, SameSite=Strict, for /status only; gone on sign-out.
    assert_eq!(
        page["cookie"],
        json!({"path": "/status", "httpOnly": true, "secure": true, "sameSite": "Strict"})
    );
    assert_eq!(page["after_logout"], "/status/login");
    assert_eq!(page["cookie_after_logout"], false);
    // The cookie is a server-side session: replayed after logout it leads to the login form.
    // (Cross-site sign-in is refused by the rules tested in-process through the real router,
    // with the headers Chromium sends: `http::status::tests`.)
    assert_eq!(page["replay_after_logout"], "/status/login", "{page:#}");

    // Filter links count the zones in each health, as the API does.
    let count = |h: &str| {
        after["regions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(api_zones)
            .filter(|z| h == "all" || z["health"] == h)
            .count()
    };
    for f in page["filters"].as_array().unwrap() {
        let label = f["label"].as_str().unwrap();
        assert_eq!(f["count"], count(label), "filter {label}: {f}");
        assert_eq!(f["active"], label == "all", "filter {label}: {f}");
    }

    // The unavailable filter, reached through its link: only us-east.
    let unavailable = w
        .browse(&admin, "status-unavailable", Some("unavailable"))
        .await;
    let rows = unavailable["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{unavailable:#}");
    assert_eq!(rows[0]["region"], "us-east");
    assert_eq!(rows[0]["zone"], "nyc-1");
    assert_eq!(rows[0]["health"], "unavailable");
    assert_eq!(rows[0]["pending_requests"], "2");
    let active: Vec<_> = unavailable["filters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["active"] == true)
        .map(|f| f["label"].clone())
        .collect();
    assert_eq!(active, [json!("unavailable")]);

    // The cookie is no credential for the API, and an unknown filter is a 400 naming the values.
    let raw = |path: &str, cookie: Option<&str>| {
        let mut req = w.http.get(format!("{}{path}", w.world.url()));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        req.send()
    };
    // A session of its own, signed in with a plain form post (no Origin: not a browser).
    let no_redirects = harmony_http::ClientSettings::new()
        .ca_pem(Some(w.world.pki().ca_pem.as_bytes()))
        .https_only(true)
        .builder()
        .unwrap_or_else(|e| panic!("{}: {}", e.field, e.problem))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = no_redirects
        .post(format!("{}/status/login", w.world.url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "token={}",
            admin
                .bytes()
                .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                })
                .collect::<String>()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status().as_u16(), 303);
    let session = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert!(
        !session.contains(&cookie_value(&admin)),
        "the cookie is not the token"
    );
    let api = raw("/v1/regions", Some(&session)).await.unwrap();
    assert_eq!(api.status().as_u16(), 401);
    let bad = raw("/status?health=sick", Some(&session)).await.unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    let text = bad.text().await.unwrap();
    assert!(text.contains("healthy, unhealthy or unavailable"), "{text}");
}

/// A token in URL-safe base64 without padding: what the cookie was before sessions (it must
/// never be that again).
fn cookie_value(token: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenants_status_page_shows_no_admin_fields() {
    let w = StatusWorld::new().await;
    let admin = w.world.admin_token().to_string();
    // A project with a quota in eu-west: a tenant's page shows only the regions where it has
    // one (us-east is not on it).
    w.acme_with_web_in_eu_west(json!({"cpu": "2"})).await;
    let mint = || async {
        let (status, minted) = w
            .call(
                "POST",
                "/v1/admin/tenants/acme/tokens",
                &admin,
                Some(json!({})),
            )
            .await;
        assert_eq!(status, 201, "{minted}");
        let token = minted["token"].as_str().expect("the tenant token");
        assert!(token.starts_with("htt_"), "{minted}");
        (
            token.to_string(),
            minted["id"].as_str().unwrap().to_string(),
        )
    };
    let (token, id) = mint().await;
    // A second token of the same tenant for the API calls: the first is revoked while its page
    // is open.
    let (api_token, _) = mint().await;
    let admin_view = w.regions(&admin).await;
    let before = w.regions(&api_token).await;
    let page = w
        .browse_with(
            &token,
            "status-tenant",
            None,
            Some(&format!("/v1/admin/tenants/acme/tokens/{id}")),
        )
        .await;
    // Revoked while the page was open: its next request is refused, to the login form.
    assert_eq!(page["after_revoke"], "/status/login", "{page:#}");
    let after = w.regions(&api_token).await;

    assert_eq!(page["who"], "tenant acme");
    assert_eq!(header_cols(&page), ["region", "zone", "health", "requests"]);
    let eu_west = |list: &Value| {
        let mut list = list.clone();
        list["regions"]
            .as_array_mut()
            .unwrap()
            .retain(|r| r["region"] == "eu-west");
        list
    };
    assert_rows_match(&page, &eu_west(&before), &eu_west(&after), false);
    let html = page["html"].as_str().unwrap();
    assert!(!html.contains("nyc-1"), "a region without acme's project");
    assert!(!html.contains(&token), "the page shows the token");
    // No admin value anywhere in the page: agent version, ops, replica, heartbeat.
    let eu = region_of(&admin_view, "eu-west");
    for field in ["agent_version", "replica"] {
        let v = eu[field]
            .as_str()
            .unwrap_or_else(|| panic!("admin sees {field}: {eu}"));
        assert!(!html.contains(v), "{field} {v} shown to a tenant");
    }
    for s in [
        "get_inventory",
        "Last heartbeat",
        "Requests in flight",
        "Agent version",
        "Replica",
    ] {
        assert!(!html.contains(s), "{s:?} shown to a tenant");
    }
    // And the tenant's API answer has no admin fields either.
    let tenant_eu = region_of(&after, "eu-west");
    for field in [
        "agent_version",
        "ops",
        "last_heartbeat",
        "replica",
        "pending_requests",
    ] {
        assert!(
            tenant_eu.get(field).is_none(),
            "{field} in a tenant's answer: {tenant_eu}"
        );
    }
}
