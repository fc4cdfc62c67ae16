use super::*;
use harmony_types::MacAddress;
use std::path::Path;

pub(crate) fn settings(dir: &Path) -> DnsmasqSettings {
    DnsmasqSettings {
        dir: dir.to_path_buf(),
        host_dir: dir.to_path_buf(),
        listen: IpAddress::parse("10.10.0.2").unwrap(),
        interface: None,
        dns_port: 53,
        network: Ipv4Cidr::parse("10.10.0.0/24").unwrap(),
        gateway: IpAddress::parse("10.10.0.1").unwrap(),
        domain: "okd.example.com".into(),
        upstream_dns: vec![],
        binary: "dnsmasq".into(),
        prefix: vec![],
        discovery_range: Some((
            IpAddress::parse("10.10.0.200").unwrap(),
            IpAddress::parse("10.10.0.249").unwrap(),
        )),
    }
}

fn binding(mac: &str, ip: &str, name: &str) -> DhcpHostBinding {
    DhcpHostBinding {
        mac: MacAddress::parse(mac).unwrap(),
        ip: IpAddress::parse(ip).unwrap(),
        hostname: HostName::parse(name).unwrap(),
        other_macs: Vec::new(),
    }
}

fn pxe() -> PxeBootOptions {
    PxeBootOptions {
        tftp_server: IpAddress::parse("10.10.0.2").unwrap(),
        bios_file: "undionly.kpxe".into(),
        uefi_file: "ipxe.efi".into(),
        ipxe_script: harmony_types::Url::parse("http://10.10.0.2:8080/boot.ipxe").unwrap(),
    }
}

/// `CI`'s value when this is a CI run: `CI` set to anything but empty, `0` or `false` (the
/// rule tests/run.sh applies too).
fn ci() -> Option<String> {
    std::env::var("CI")
        .ok()
        .filter(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"))
}

/// Compares `actual` with the golden file; `HARMONY_BLESS=1` rewrites it, except in CI, where
/// a blessed run would pass whatever the output and so must fail instead.
pub(crate) fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let bless = std::env::var_os("HARMONY_BLESS").is_some();
    if let (true, Some(ci)) = (bless, ci()) {
        panic!(
            "HARMONY_BLESS is set in CI (CI={ci}): a blessed run rewrites the golden files \
             instead of comparing with them, so it can never fail; unset HARMONY_BLESS (bless \
             locally and commit the reviewed golden files)"
        );
    }
    if bless {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with HARMONY_BLESS=1 to create it)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "golden file {} differs", path.display());
}

#[test]
fn golden_files() {
    let mut state = DnsmasqState::default();
    for b in [
        binding("52:54:00:00:00:22", "10.10.0.22", "worker1"),
        binding("52:54:00:00:00:21", "10.10.0.21", "worker0"),
    ] {
        state.bindings.insert(b.mac, b);
    }
    state.hosts.insert(
        HostName::parse("api.okd.example.com").unwrap(),
        IpAddress::parse("10.10.0.2").unwrap(),
    );
    state.wildcards.insert(
        HostName::parse("apps.okd.example.com").unwrap(),
        IpAddress::parse("10.10.0.2").unwrap(),
    );
    state.pxe = Some(pxe());
    let files = render_files(&settings(Path::new("/var/lib/harmony/dnsmasq")), &state).unwrap();
    for (name, text) in &files {
        golden(&format!("dnsmasq/{name}"), text);
    }
    assert!(files["dhcp-hosts"].starts_with("52:54:00:00:00:21,10.10.0.21,worker0\n"));
}

#[test]
fn unknown_macs_get_a_discovery_lease_or_nothing() {
    let state = DnsmasqState::default();
    let with = render_files(&settings(Path::new("/d")), &state).unwrap();
    let conf = &with["dnsmasq.conf"];
    assert!(
        conf.contains("\ndhcp-range=set:discovery,10.10.0.200,10.10.0.249,255.255.255.0,10m\n"),
        "{conf}"
    );
    assert!(conf.contains("\ndhcp-range=10.10.0.0,static,"), "{conf}");
    assert!(!conf.contains("dhcp-ignore"), "{conf}");
    // The boot timeline reads a lease's start as its expiry less these durations.
    assert_eq!(
        (super::DISCOVERY_LEASE, super::DISCOVERY_LEASE_SECS),
        ("10m", 600)
    );
    assert!(
        conf.contains("\ndhcp-range=10.10.0.0,static,255.255.255.0,1h\n")
            && super::RESERVED_LEASE_SECS == 3600,
        "{conf}"
    );
    let without = render_files(
        &DnsmasqSettings {
            discovery_range: None,
            ..settings(Path::new("/d"))
        },
        &state,
    )
    .unwrap();
    let conf = &without["dnsmasq.conf"];
    assert!(conf.contains("\ndhcp-ignore=tag:!known\n"), "{conf}");
    assert!(!conf.contains("set:discovery"), "{conf}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reservation_inside_the_discovery_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = Dnsmasq::new(settings(dir.path()), ServiceMode::Render);
    let err = d
        .ensure_bindings(&[binding("52:54:00:00:00:21", "10.10.0.210", "worker0")])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("inside the discovery range 10.10.0.200-10.10.0.249"),
        "{err}"
    );
    assert!(!dir.path().join("dhcp-hosts").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn state_round_trips_and_rerun_does_not_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let d = Dnsmasq::new(settings(dir.path()), ServiceMode::Render);
    let b = [binding("52:54:00:00:00:21", "10.10.0.21", "worker0")];
    let first = d.ensure_bindings(&b).await.unwrap();
    assert!(
        first
            .iter()
            .any(|c| c.object == "dnsmasq dhcp-hosts" && c.action == ChangeAction::Create)
    );
    d.set_pxe_options(&pxe()).await.unwrap();
    d.ensure_records(&[DnsRecord::Wildcard {
        domain: HostName::parse("apps.okd.example.com").unwrap(),
        ip: IpAddress::parse("10.10.0.2").unwrap(),
    }])
    .await
    .unwrap();
    let again = d.ensure_bindings(&b).await.unwrap();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].action, ChangeAction::Unchanged);
    let text = std::fs::read_to_string(dir.path().join("dhcp-hosts")).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let state = d.load_state().unwrap();
    assert_eq!(state.pxe, Some(pxe()));
    assert_eq!(state.wildcards.len(), 1);
    assert_eq!(d.bindings().await.unwrap(), b.to_vec());
}

#[tokio::test(flavor = "multi_thread")]
async fn conflicts_and_bad_input_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = Dnsmasq::new(settings(dir.path()), ServiceMode::Render);
    d.ensure_bindings(&[binding("52:54:00:00:00:21", "10.10.0.21", "worker0")])
        .await
        .unwrap();
    let before = std::fs::read(dir.path().join("dhcp-hosts")).unwrap();
    let err = d
        .ensure_bindings(&[binding("52:54:00:00:00:99", "10.10.0.21", "worker9")])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("52:54:00:00:00:21"), "{err}");
    let err = d
        .ensure_bindings(&[binding("52:54:00:00:00:98", "10.99.0.5", "worker8")])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("outside the DHCP network 10.10.0.0/24"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("dhcp-hosts")).unwrap(),
        before
    );
    let err = d
        .ensure_tftp_files(&[TftpFile {
            name: "undionly.kpxe".into(),
            source: dir.path().join("missing.kpxe"),
        }])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("apt-get install ipxe"), "{err}");
    std::fs::write(dir.path().join("dhcp-hosts"), "garbage\n").unwrap();
    let err = d.bindings().await.unwrap_err();
    assert!(err.to_string().contains("dhcp-hosts:1"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_mode_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = Dnsmasq::new(settings(&dir.path().join("d")), ServiceMode::Plan);
    let changes = d
        .ensure_bindings(&[binding("52:54:00:00:00:21", "10.10.0.21", "worker0")])
        .await
        .unwrap();
    assert!(changes.iter().all(|c| c.action == ChangeAction::Create));
    assert!(!dir.path().join("d").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_with_several_nics_is_reserved_by_all_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = Dnsmasq::new(settings(dir.path()), ServiceMode::Render);
    let mut two = binding("52:54:00:00:00:22", "10.10.0.22", "worker1");
    two.other_macs = vec![MacAddress::parse("52:54:00:00:00:21").unwrap()];
    d.ensure_bindings(&[two.clone()]).await.unwrap();
    let text = std::fs::read_to_string(dir.path().join("dhcp-hosts")).unwrap();
    assert_eq!(
        text,
        "52:54:00:00:00:22,52:54:00:00:00:21,10.10.0.22,worker1\n"
    );
    assert_eq!(
        d.bindings().await.unwrap(),
        vec![two],
        "read back as written"
    );
    // Another reservation claiming one of its MACs is refused, naming the holder.
    let e = d
        .ensure_bindings(&[binding("52:54:00:00:00:21", "10.10.0.23", "worker2")])
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("already reserved with 52:54:00:00:00:22"), "{e}");
}

#[test]
fn leases_are_read_as_dnsmasq_writes_them_and_expired_ones_dropped() {
    let text = "\
1764200000 52:54:00:00:00:31 10.10.0.231 * 01:52:54:00:00:00:31
1764100000 52:54:00:00:00:32 10.10.0.232 host-b *
0 52:54:00:00:00:33 10.10.0.233 * *
duid 00:01:00:01:2c:00:00:00:52:54:00:00:00:01
garbage line
";
    let leases = parse_leases(text, 1_764_150_000);
    let got: Vec<(String, String, Option<u64>)> = leases
        .iter()
        .map(|l| (l.mac.to_string(), l.ip.to_string(), l.expires))
        .collect();
    assert_eq!(
        got,
        [
            (
                "52:54:00:00:00:31".to_string(),
                "10.10.0.231".to_string(),
                Some(1_764_200_000)
            ),
            (
                "52:54:00:00:00:33".to_string(),
                "10.10.0.233".to_string(),
                None
            ),
        ],
        "the expired lease and the lines that are not leases are dropped"
    );
    let dir = tempfile::tempdir().unwrap();
    assert!(read_leases(&dir.path().join("none")).unwrap().is_empty());
}
