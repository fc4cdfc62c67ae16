//! Self-test of the emulated-BMC fixture (`harmony_e2e::bmc_lab`): a lab of two QEMU VMs
//! behind the sushy-tools Redfish emulator answers over TLS with basic auth, refuses callers
//! without it, and its resets really power the VMs on and off. A second test runs the VMs on
//! tap devices in a network namespace. The tools come from `bash tests/redfish-bmc/install.sh`;
//! without them the tests fail, naming that command.

use std::time::{Duration, Instant};

use harmony_e2e::bmc_lab::{BmcLab, BmcLabOptions, BootFirst, available};
use harmony_e2e::eventually::{eventually, eventually_blocking};
use harmony_e2e::netns::Netns;
use harmony_http::reqwest::{self, StatusCode};
use serde_json::{Value, json};

/// How long a VM may take to reach the state a reset asked for.
const POWER_TIMEOUT: Duration = Duration::from_secs(30);

fn client(lab: &BmcLab) -> reqwest::Client {
    harmony_http::ClientSettings::new()
        .ca_pem(Some(lab.ca_pem().as_bytes()))
        .build()
        .expect("an HTTP client")
}

async fn get(lab: &BmcLab, http: &reqwest::Client, url: &str) -> Value {
    let r = http
        .get(url)
        .basic_auth(lab.username(), Some(lab.password()))
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "GET {url}: {}\n{}",
                harmony_http::describe(&e),
                lab.log_tail()
            )
        });
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    assert_eq!(
        status,
        StatusCode::OK,
        "GET {url}: {body}\n{}",
        lab.log_tail()
    );
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: not JSON ({e}): {body}"))
}

/// POSTs a reset of VM `i`, which must succeed; returns how long the POST took.
async fn reset(lab: &BmcLab, http: &reqwest::Client, i: usize, reset_type: &str) -> Duration {
    let started = Instant::now();
    let url = format!("{}/Actions/ComputerSystem.Reset", lab.bmc_url(i));
    let r = http
        .post(&url)
        .basic_auth(lab.username(), Some(lab.password()))
        .json(&json!({ "ResetType": reset_type }))
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {}", harmony_http::describe(&e)));
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    assert!(
        status.is_success(),
        "POST {url} {reset_type}: {status} {body}\n{}",
        lab.log_tail()
    );
    started.elapsed()
}

/// Waits (bounded) until VM `i` is in `state` as virsh sees it and its Redfish `PowerState`
/// reads `power`; returns how long it took.
async fn wait_power(
    lab: &BmcLab,
    http: &reqwest::Client,
    i: usize,
    state: &str,
    power: &str,
) -> Duration {
    let started = Instant::now();
    eventually(
        POWER_TIMEOUT,
        format!("VM {i} {state:?} with PowerState {power:?}"),
        || async move {
            let seen = lab.domain_state(i);
            if seen != state {
                return Err(format!("VM {i} is {seen:?}"));
            }
            let system = get(lab, http, &lab.bmc_url(i)).await;
            if system["PowerState"] == power {
                Ok(())
            } else {
                Err(format!(
                    "VM {i} is {seen:?}, PowerState {}",
                    system["PowerState"]
                ))
            }
        },
    )
    .await
    .unwrap_or_else(|w| panic!("{w}\n{}", lab.log_tail()));
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn bmc_lab_fixture_powers_vms_on_and_off_over_redfish() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let started = Instant::now();
    let lab = BmcLab::start(BmcLabOptions::with_vms(2)).unwrap_or_else(|e| panic!("{e}"));
    println!("the BMC lab (2 VMs) started in {:?}", started.elapsed());
    let http = client(&lab);

    // The collection lists both systems, with basic auth.
    let systems = get(
        &lab,
        &http,
        &format!("{}/redfish/v1/Systems", lab.base_url()),
    )
    .await;
    let members: Vec<&str> = systems["Members"]
        .as_array()
        .expect("Members")
        .iter()
        .filter_map(|m| m["@odata.id"].as_str())
        .collect();
    assert_eq!(members.len(), 2, "{systems}");
    for id in lab.system_ids() {
        assert!(
            members.contains(&format!("/redfish/v1/Systems/{id}").as_str()),
            "{id} not in {systems}"
        );
    }

    // Without credentials, or with a wrong password: 401.
    let url = lab.bmc_url(0);
    let r = http.get(&url).send().await.expect("GET without auth");
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "GET {url} without auth"
    );
    let r = http
        .get(&url)
        .basic_auth(lab.username(), Some("wrong"))
        .send()
        .await
        .expect("GET with a wrong password");
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "GET {url} wrong password"
    );

    // Defined powered off.
    for i in 0..2 {
        assert_eq!(lab.domain_state(i), "shut off");
        assert_eq!(get(&lab, &http, &lab.bmc_url(i)).await["PowerState"], "Off");
    }

    // On, then ForceOff, of VM 1: VM 0 stays off.
    let post = reset(&lab, &http, 1, "On").await;
    let took = wait_power(&lab, &http, 1, "running", "On").await;
    println!("the On reset took {post:?}; VM 1 was running {took:?} after it answered");
    assert_eq!(lab.domain_state(0), "shut off");
    reset(&lab, &http, 1, "ForceOff").await;
    wait_power(&lab, &http, 1, "shut off", "Off").await;

    // What the emulator offers, for the record.
    let system = get(&lab, &http, &lab.bmc_url(0)).await;
    println!(
        "ResetType@Redfish.AllowableValues: {}",
        system["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"]
    );

    // An unknown reset type, for the record (sushy-tools 2.2.0 answers 204 and does nothing).
    let r = http
        .post(format!("{}/Actions/ComputerSystem.Reset", lab.bmc_url(0)))
        .basic_auth(lab.username(), Some(lab.password()))
        .json(&json!({"ResetType": "PowerCycle"}))
        .send()
        .await
        .expect("POST an unknown ResetType");
    println!(
        "ResetType PowerCycle (not offered) answers {}; VM 0 is then {:?}",
        r.status(),
        lab.domain_state(0)
    );

    // A one-time PXE override, then the fixture playing a BMC that ignored it: the VM's
    // config boots from disk first again, and Redfish reads Hdd.
    let r = http
        .patch(lab.bmc_url(0))
        .basic_auth(lab.username(), Some(lab.password()))
        .json(&json!({"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}))
        .send()
        .await
        .expect("PATCH Boot");
    assert!(r.status().is_success(), "PATCH Boot: {}", r.status());
    let boot = get(&lab, &http, &lab.bmc_url(0)).await["Boot"].clone();
    assert_eq!(boot["BootSourceOverrideTarget"], "Pxe", "{boot}");
    println!("after a Once PXE override: {boot}");
    let mut lab = lab;
    lab.set_boot_order_disk_first(0)
        .unwrap_or_else(|e| panic!("{e}"));
    let boot = get(&lab, &http, &lab.bmc_url(0)).await["Boot"].clone();
    assert_eq!(boot["BootSourceOverrideTarget"], "Hdd", "{boot}");
    assert_eq!(lab.domain_state(0), "shut off");
}

#[tokio::test(flavor = "multi_thread")]
async fn bmc_lab_fixture_runs_vms_on_taps_in_a_network_namespace() {
    if let Err(e) = available().and_then(|()| harmony_e2e::netns::available()) {
        panic!("{e}");
    }
    let ns = Netns::new("bmc").unwrap_or_else(|e| panic!("{e}"));
    let mut options = BmcLabOptions::with_vms(1);
    options.netns = Some(ns.name().to_string());
    options.vms[0].tap = Some("tap0".into());
    options.vms[0].boot = BootFirst::Network;
    ns.run(&[
        "ip", "tuntap", "add", "dev", "tap0", "mode", "tap", "user", "nobody",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    ns.run(&["ip", "link", "set", "tap0", "up"])
        .unwrap_or_else(|e| panic!("{e}"));
    let lab = BmcLab::start(options).unwrap_or_else(|e| panic!("{e}"));
    let http = client(&lab);
    reset(&lab, &http, 0, "On").await;
    wait_power(&lab, &http, 0, "running", "On").await;
    // QEMU holds the tap: its carrier is up, and network-first firmware sends DHCP on it.
    let carrier = eventually_blocking(Duration::from_secs(10), "a carrier on tap0", || {
        let out = ns.run(&["cat", "/sys/class/net/tap0/carrier"]).ok()?;
        (String::from_utf8_lossy(&out.stdout).trim() == "1").then_some(())
    });
    assert!(carrier.is_ok(), "tap0 has no carrier\n{}", lab.log_tail());
    let sent = eventually_blocking(
        Duration::from_secs(60),
        "a packet from the VM on tap0",
        || {
            let out = ns
                .run(&["cat", "/sys/class/net/tap0/statistics/rx_packets"])
                .ok()?;
            let n: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
            (n > 0).then_some(n)
        },
    );
    assert!(
        sent.is_ok(),
        "the VM sent nothing on tap0 in a minute\n{}",
        lab.log_tail()
    );
    reset(&lab, &http, 0, "ForceOff").await;
    wait_power(&lab, &http, 0, "shut off", "Off").await;
    drop(lab);
    drop(ns);
}
