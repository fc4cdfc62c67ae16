//! Harmony's Redfish adapter (`harmony::infra::redfish::RedfishPower`) against real emulated
//! BMCs: sushy-tools' Redfish emulator over libvirt and QEMU VMs (`harmony_e2e::bmc_lab`).
//! It reads power states, powers VMs on, off (graceful, then forced) and cycles them, sets a
//! one-time PXE boot and reports what the BMC kept; wrong credentials and a BMC that does not
//! answer fail for that host alone, naming host and BMC, never the password.

use std::time::{Duration, Instant};

use harmony::domain::capability::{
    BootOverride, CapabilityError, HostBmc, PowerControl, PowerState, PowerTimeouts,
};
use harmony::infra::redfish::{RedfishPower, RedfishSettings};
use harmony_e2e::bmc_lab::{BmcLab, BmcLabOptions, available};
use harmony_e2e::eventually::eventually;
use harmony_types::{BmcAddress, BmcCredentialsSource, MacAddress};

const PASSWORD: &str = "Redfish-s3cret-42";

/// Every log record of this test binary, at every level (reqwest's, hyper's and rustls' too).
static LOGGED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        LOGGED.lock().unwrap().push(format!(
            "{} {}: {}",
            record.level(),
            record.target(),
            record.args()
        ));
    }
    fn flush(&self) {}
}

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_boxed_logger(Box::new(Capture)).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn lab(vms: usize) -> BmcLab {
    capture_logs();
    available().unwrap_or_else(|e| panic!("{e}"));
    let options = BmcLabOptions {
        password: PASSWORD.into(),
        ..BmcLabOptions::with_vms(vms)
    };
    BmcLab::start(options).unwrap_or_else(|e| panic!("{e}"))
}

/// The `--bmc` entry of VM `i`, its credentials in a file of `dir`.
fn host(lab: &BmcLab, i: usize, dir: &std::path::Path, password: &str) -> HostBmc {
    let file = dir.join(format!("bmc-{i}"));
    std::fs::write(&file, format!("{}:{password}\n", lab.username())).unwrap();
    let url = lab.bmc_url(i).replacen("https://", "redfish://", 1);
    HostBmc {
        mac: MacAddress::parse(&lab.vms()[i].mac).unwrap(),
        address: BmcAddress::parse(&url).unwrap(),
        credentials: BmcCredentialsSource::File(file),
    }
}

fn power(lab: &BmcLab, timeout: Duration) -> RedfishPower {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, lab.ca_pem()).unwrap();
    RedfishPower::new(&RedfishSettings {
        ca_file: Some(ca),
        request_timeout: timeout,
        poll: Duration::from_millis(300),
        ..RedfishSettings::default()
    })
    .unwrap()
}

async fn eventually_state(lab: &BmcLab, i: usize, want: &str) {
    eventually(
        Duration::from_secs(60),
        format!("VM {i} {want:?}"),
        || async {
            let state = lab.domain_state(i);
            if state.trim() == want {
                Ok(())
            } else {
                Err(state)
            }
        },
    )
    .await
    .unwrap_or_else(|w| panic!("{w}\n{}", lab.log_tail()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harmony_powers_and_pxe_boots_vms_through_redfish() {
    let lab = lab(1);
    let dir = tempfile::tempdir().unwrap();
    let vm = host(&lab, 0, dir.path(), PASSWORD);
    let power = power(&lab, Duration::from_secs(20));

    assert_eq!(power.power_state(&vm).await.unwrap(), PowerState::Off);

    // A one-time network boot: read back, so what the BMC really kept is known.
    let kept = power.boot_from_network_once(&vm).await.unwrap();
    assert!(
        matches!(kept, BootOverride::Once | BootOverride::Continuous),
        "the emulator keeps a PXE override: {kept:?}"
    );

    let on = power.power_on(&vm).await.unwrap();
    assert_eq!(on.before, PowerState::Off);
    assert_eq!(on.sent, ["On"]);
    assert_eq!(on.after, PowerState::On);
    eventually_state(&lab, 0, "running").await;

    // Already on: nothing is sent.
    let again = power.power_on(&vm).await.unwrap();
    assert!(again.sent.is_empty(), "{again:?}");

    let cycled = power.power_cycle(&vm).await.unwrap();
    assert_eq!(cycled.before, PowerState::On);
    assert_eq!(cycled.sent.len(), 1, "{cycled:?}");
    assert!(
        ["ForceRestart", "PowerCycle"].contains(&cycled.sent[0].as_str()),
        "{cycled:?}"
    );
    eventually_state(&lab, 0, "running").await;

    // The VM runs no OS that answers ACPI: the graceful shutdown is forced after its timeout.
    let off = power
        .power_off(
            &vm,
            PowerTimeouts {
                graceful: Duration::from_secs(3),
                settle: Duration::from_secs(30),
            },
        )
        .await
        .unwrap();
    assert_eq!(off.sent, ["GracefulShutdown", "ForceOff"], "{off:?}");
    assert_eq!(off.after, PowerState::Off);
    eventually_state(&lab, 0, "shut off").await;

    // Off: a power cycle powers it on.
    let cycled = power.power_cycle(&vm).await.unwrap();
    assert_eq!(
        (cycled.before, cycled.sent),
        (PowerState::Off, vec!["On".to_string()])
    );
    eventually_state(&lab, 0, "running").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_and_a_silent_bmc_fail_their_host_alone_never_showing_the_password() {
    let lab = lab(2);
    let dir = tempfile::tempdir().unwrap();
    let wrong = host(&lab, 0, dir.path(), "not-the-Redfish-password");
    let right = host(&lab, 1, dir.path(), PASSWORD);
    let power = power(&lab, Duration::from_secs(3));

    let e = power.power_on(&wrong).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, CapabilityError::Credentials { .. }), "{text}");
    assert!(text.contains("401"), "{text}");
    assert!(text.contains(&wrong.mac.to_string()), "{text}");
    assert!(text.contains(wrong.address.as_str()), "{text}");
    assert!(!text.contains("not-the-Redfish-password"), "{text}");
    assert_eq!(
        lab.domain_state(0).trim(),
        "shut off",
        "nothing was powered"
    );

    // The other host, with its own credentials, is not held back.
    power.power_on(&right).await.unwrap();
    eventually_state(&lab, 1, "running").await;

    // A BMC that accepts the connection and never answers: a timeout for that host.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let stuck = HostBmc {
        address: BmcAddress::parse(&format!("redfish://127.0.0.1:{port}/redfish/v1/Systems/1"))
            .unwrap(),
        ..right.clone()
    };
    let started = Instant::now();
    let e = power.power_state(&stuck).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, CapabilityError::Unreachable { .. }), "{text}");
    assert!(text.contains("no answer within 3 s"), "{text}");
    assert!(text.contains(&stuck.mac.to_string()), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "bounded by the request timeout"
    );
    drop(silent);

    // Credentials that cannot be read: named by their source, nothing sent.
    let missing = HostBmc {
        credentials: BmcCredentialsSource::Env("HARMONY_TEST_UNSET_BMC_CREDENTIALS".into()),
        ..right.clone()
    };
    let text = power.power_state(&missing).await.unwrap_err().to_string();
    assert!(
        text.contains("env:HARMONY_TEST_UNSET_BMC_CREDENTIALS: the variable is not set"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");

    // Nothing logged at any level holds a password, plain or as the basic-auth header.
    use base64::Engine;
    let logged = LOGGED.lock().unwrap().clone();
    assert!(
        logged.iter().any(|l| l.contains("ResetType On")),
        "the adapter's own lines were captured: {logged:?}"
    );
    for secret in [
        PASSWORD.to_string(),
        "not-the-Redfish-password".to_string(),
        base64::engine::general_purpose::STANDARD.encode(format!("admin:{PASSWORD}")),
    ] {
        let hits: Vec<&String> = logged.iter().filter(|l| l.contains(&secret)).collect();
        assert!(hits.is_empty(), "logged: {hits:?}");
    }
}
