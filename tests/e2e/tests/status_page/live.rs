//! The status page live, accessible and on a phone, in headless Chromium on both stores
//! (`status_page/live.mjs`): a region created through the admin API shows on the open page
//! within 2 s without a navigation; a paused page holds updates that a live one shows, and
//! shows them once resumed; a decommissioned region moves to its own section; axe-core finds
//! no serious or critical violation on the admin's or the tenant's page (wide and on a phone);
//! from 1280 px down to a 390×844 phone the page is never wider than the window. Screenshots of the admin's and tenant's pages and of the phone
//! view go to the target folder, or to `docs/modules/images/` with
//! `HARMONY_UPDATE_SCREENSHOTS=1`.

use super::*;

/// The world of [`StatusWorld::on`], plus what the screenshots should show: a second zone of
/// `eu-west` that never connected (the region healthy beside an unavailable zone), a
/// decommissioned region, and tenant `acme` with a project in `eu-west`; and acme's token.
async fn world(plane: Plane) -> (StatusWorld, String) {
    let w = StatusWorld::on(plane).await;
    let admin = w.world.admin_token().to_string();
    let must = |method: &'static str, path: &'static str, body: Option<Value>, want: u16| {
        let (w, admin) = (&w, admin.clone());
        async move {
            let (status, answer) = w.call(method, path, &admin, body).await;
            assert_eq!(status, want, "{method} {path}: {answer}");
            answer
        }
    };
    must(
        "POST",
        "/v1/admin/regions/eu-west/zones",
        Some(json!({"zone": "paris-2"})),
        201,
    )
    .await;
    must(
        "POST",
        "/v1/admin/regions",
        Some(json!({"region": "af-south", "zone": "cpt-1"})),
        201,
    )
    .await;
    must("DELETE", "/v1/admin/regions/af-south", None, 200).await;
    // acme has a project with a quota in eu-west: its page shows that region's zones.
    w.acme_with_web_in_eu_west(json!({"cpu": "2", "memory": "4Gi"}))
        .await;
    let minted = must(
        "POST",
        "/v1/admin/tenants/acme/tokens",
        Some(json!({})),
        201,
    )
    .await;
    let token = minted["token"].as_str().unwrap().to_string();
    (w, token)
}

/// Where the screenshots go: the docs' images for the SQLite run with
/// `HARMONY_UPDATE_SCREENSHOTS=1`, else the target folder (one folder per store).
fn screenshots(plane: &Plane) -> PathBuf {
    let docs = std::env::var_os("HARMONY_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1");
    match plane {
        Plane::Sqlite if docs => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/modules/images")
        }
        Plane::Sqlite => shots_dir().join("sqlite"),
        _ => shots_dir().join("postgres"),
    }
}

async fn live_accessible_and_phone_wide(plane: Plane) {
    let shots = screenshots(&plane);
    let (w, tenant) = world(plane).await;
    std::fs::create_dir_all(&shots).unwrap();
    let result = w
        .node(
            "live.mjs",
            "STATUS_LIVE_RESULT",
            vec![
                ("STATUS_TOKEN", w.world.admin_token().to_string()),
                ("STATUS_TENANT_TOKEN", tenant.clone()),
                ("STATUS_SHOTS", shots.display().to_string()),
            ],
        )
        .await;
    let live = &result["live"];
    println!("live: {live}");
    println!(
        "lowest control border contrast: login {}, admin {}, tenant {}",
        result["login_border"],
        result["views"]["admin"]["border"],
        result["views"]["tenant"]["border"]
    );
    // A change shows within 2 s (live.mjs waits at most that long), without a reload.
    assert!(
        live["appeared_ms"].is_number(),
        "not within 2 s: {result:#}"
    );
    assert_eq!(live["marker"], "kept", "the page was reloaded: {result:#}");
    assert_eq!(live["navigations"], 0, "{result:#}");
    assert_eq!(live["focus"], "live", "the focus stays: {result:#}");
    assert_eq!(live["csp_errors"], json!([]), "{result:#}");
    // The reload is the fallback without scripts only, and the toggle needs them.
    assert_eq!(result["scripted"]["refresh"], 0, "{result:#}");
    assert_eq!(result["noscript"]["refresh"], 1, "{result:#}");
    assert_eq!(result["noscript"]["toggle_visible"], false, "{result:#}");
    // Paused: held, while a live page shows the change; resumed: shown.
    assert_eq!(live["paused"]["pressed"], "false", "{result:#}");
    assert!(
        live["paused"]["state"]
            .as_str()
            .unwrap()
            .starts_with("Paused"),
        "{result:#}"
    );
    assert!(live["other_ms"].is_number(), "{result:#}");
    assert_eq!(live["shown_while_paused"], false, "{result:#}");
    assert!(live["resumed_ms"].is_number(), "{result:#}");
    // Decommissioned: in its own section, out of the table and its counts.
    assert!(live["retired_ms"].is_number(), "{result:#}");
    let rows: Vec<_> = live["rows"].as_array().unwrap().iter().collect();
    assert!(
        !rows.contains(&&json!("sa-east/sao-1")) && rows.contains(&&json!("ap-south/mumbai-1")),
        "{result:#}"
    );
    assert_eq!(live["all_count"], rows.len(), "{result:#}");

    let login = &result["login_border"];
    assert!(login["ratio"].as_f64().unwrap() >= 3.0, "login: {login}");
    for who in ["admin", "tenant"] {
        let view = &result["views"][who];
        // Control borders at 3:1 at least (WCAG 1.4.11; axe-core does not check them).
        let border = &view["border"];
        assert!(border["ratio"].as_f64().unwrap() >= 3.0, "{who}: {border}");
        for key in ["violations", "phone_violations"] {
            assert_eq!(view[key], json!([]), "axe-core, {who}, {key}: {view:#}");
        }
        // Down to a phone's 390 px, the page is never wider than the window.
        let widths = view["phone"].as_array().unwrap();
        assert_eq!(widths.last().unwrap()["inner_width"], 390, "{who}: {view}");
        for w in widths {
            assert!(
                w["scroll_width"].as_u64() <= w["inner_width"].as_u64(),
                "{who}: the page scrolls sideways: {w} (all: {widths:?})"
            );
        }
    }
    for png in ["status-admin.png", "status-tenant.png", "status-phone.png"] {
        assert!(
            std::fs::metadata(shots.join(png)).unwrap().len() > 0,
            "{png}"
        );
    }
    println!("status page screenshots: {}", result["screenshots"]);
    // Nothing of the tenant's token or the admin's in what the test prints.
    assert!(!result.to_string().contains(&tenant));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_page_is_live_accessible_and_fits_a_phone_on_sqlite() {
    live_accessible_and_phone_wide(Plane::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_page_is_live_accessible_and_fits_a_phone_on_postgres() {
    live_accessible_and_phone_wide(Plane::Postgres).await;
}
