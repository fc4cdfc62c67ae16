//! The adapter's tolerance of vendor differences, against a BMC played by the test over plain
//! HTTP (`redfish+http://`): reset types listed only through `@Redfish.ActionInfo`, an
//! absolute action target, a PATCH refused without `If-Match`, a boot override not kept, and a
//! system that offers no graceful shutdown. sushy-tools (tests/e2e/tests/redfish_power.rs)
//! shows none of these.

use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use harmony_types::{BmcAddress, BmcCredentialsSource, MacAddress};

/// What the played BMC saw and holds.
#[derive(Default)]
struct Played {
    /// `METHOD PATH [If-Match]` of each request.
    seen: Vec<String>,
    power: String,
    boot: Value,
    /// The reset action's target, as the BMC gives it (absolute).
    target: String,
}

/// Serves one played BMC on 127.0.0.1; returns its port.
async fn play_bmc(state: Arc<Mutex<Played>>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = conn.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        while buf.len() < end + 4 + length {
                            let n = conn.read(&mut chunk).await.unwrap_or(0);
                            if n == 0 {
                                break;
                            }
                            buf.extend_from_slice(&chunk[..n]);
                        }
                        break (head, buf[end + 4..].to_vec());
                    }
                };
                let (status, answer) = respond(&state, &head, &body);
                let text = answer.to_string();
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nETag: \"e1\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

fn respond(state: &Mutex<Played>, head: &str, body: &[u8]) -> (&'static str, Value) {
    let mut s = state.lock().unwrap();
    let line = head.lines().next().unwrap_or_default().to_string();
    let mut words = line.split(' ');
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let if_match = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("if-match")
            .then(|| value.trim().to_string())
    });
    s.seen.push(format!(
        "{method} {path}{}",
        if_match
            .as_deref()
            .map(|m| format!(" {m}"))
            .unwrap_or_default()
    ));
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match (method, path) {
        ("GET", "/redfish/v1/Systems") => (
            "200 OK",
            json!({"Members": [{"@odata.id": "/redfish/v1/Systems/System.Embedded.1"}]}),
        ),
        ("GET", "/redfish/v1/Systems/System.Embedded.1") => (
            "200 OK",
            json!({
                "PowerState": s.power,
                "Boot": s.boot,
                "Actions": {"#ComputerSystem.Reset": {
                    // An absolute target, and allowed values only through ActionInfo.
                    "target": s.target,
                    "@Redfish.ActionInfo": "/redfish/v1/Systems/System.Embedded.1/ResetActionInfo"
                }}
            }),
        ),
        ("GET", "/redfish/v1/Systems/System.Embedded.1/ResetActionInfo") => (
            "200 OK",
            json!({"Parameters": [{"Name": "ResetType", "AllowableValues": ["On", "ForceOff", "ForceRestart"]}]}),
        ),
        ("PATCH", "/redfish/v1/Systems/System.Embedded.1") => {
            if if_match.is_none() {
                return (
                    "428 Precondition Required",
                    json!({"error": {"message": "If-Match required"}}),
                );
            }
            // This BMC accepts the override and keeps none of it.
            let _ = body;
            s.boot = json!({"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled"});
            ("204 No Content", Value::Null)
        }
        ("POST", "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset") => {
            match body["ResetType"].as_str() {
                Some("On") => s.power = "On".into(),
                Some("ForceOff") => s.power = "Off".into(),
                Some("ForceRestart") => {}
                other => {
                    return (
                        "400 Bad Request",
                        json!({"error": {"@Message.ExtendedInfo": [{"Message": format!("ResetType {other:?} is not supported")}]}}),
                    );
                }
            }
            ("204 No Content", Value::Null)
        }
        _ => (
            "404 Not Found",
            json!({"error": {"message": "no such resource"}}),
        ),
    }
}

#[tokio::test]
async fn a_vendor_bmc_played_by_the_test_is_driven_by_what_it_lists() {
    let state = Arc::new(Mutex::new(Played {
        power: "On".into(),
        boot: json!({"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled",
            "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Hdd"]}),
        ..Played::default()
    }));
    let port = play_bmc(state.clone()).await;
    state.lock().unwrap().target = format!(
        "http://127.0.0.1:{port}/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset"
    );
    let var = format!("HARMONY_REDFISH_TEST_{port}");
    // SAFETY: the variable is this test's own (named by its port); nothing else reads it.
    unsafe { std::env::set_var(&var, "root:calvin") };
    let host = HostBmc {
        mac: MacAddress::parse("52:54:00:00:00:21").unwrap(),
        address: BmcAddress::parse(&format!("redfish+http://127.0.0.1:{port}")).unwrap(),
        credentials: BmcCredentialsSource::Env(var),
    };
    let power = RedfishPower::new(&RedfishSettings {
        poll: Duration::from_millis(10),
        ..RedfishSettings::default()
    })
    .unwrap();

    // The absolute target is followed by its path; the system was found as the only member.
    let cycled = power.power_cycle(&host).await.unwrap();
    assert_eq!(cycled.sent, ["ForceRestart"]);

    // No GracefulShutdown offered (ActionInfo lists On, ForceOff, ForceRestart): forced at once.
    let off = power
        .power_off(&host, PowerTimeouts::default())
        .await
        .unwrap();
    assert_eq!(off.sent, ["ForceOff"]);

    // The PATCH carries If-Match; the override read back is reported as not kept.
    let kept = power.boot_from_network_once(&host).await.unwrap();
    assert!(
        matches!(&kept, BootOverride::NotKept(what) if what.contains("\"Disabled\"")),
        "{kept:?}"
    );
    let seen = state.lock().unwrap().seen.clone();
    assert!(
        seen.iter()
            .any(|l| l == "PATCH /redfish/v1/Systems/System.Embedded.1 \"e1\""),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|l| !l.starts_with("POST http")),
        "an absolute target is sent as a path: {seen:?}"
    );
}

#[tokio::test]
async fn a_target_on_another_host_is_never_sent_the_credentials() {
    let state = Arc::new(Mutex::new(Played {
        power: "Off".into(),
        target:
            "http://10.99.0.1/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset"
                .into(),
        ..Played::default()
    }));
    let port = play_bmc(state.clone()).await;
    let var = format!("HARMONY_REDFISH_TEST_{port}");
    // SAFETY: the variable is this test's own (named by its port); nothing else reads it.
    unsafe { std::env::set_var(&var, "root:calvin") };
    // The played BMC's action target names another host: refused, not followed.
    let host = HostBmc {
        mac: MacAddress::parse("52:54:00:00:00:22").unwrap(),
        address: BmcAddress::parse(&format!(
            "redfish+http://127.0.0.1:{port}/redfish/v1/Systems/System.Embedded.1"
        ))
        .unwrap(),
        credentials: BmcCredentialsSource::Env(var),
    };
    let power = RedfishPower::new(&RedfishSettings::default()).unwrap();
    let e = power.power_on(&host).await.unwrap_err().to_string();
    assert!(e.contains("outside /redfish/"), "{e}");
    assert!(!e.contains("calvin"), "{e}");
    let seen = state.lock().unwrap().seen.clone();
    assert!(seen.iter().all(|l| !l.starts_with("POST")), "{seen:?}");
}

#[test]
fn power_states_are_read_verbatim_when_unknown() {
    assert_eq!(power_state(&json!({"PowerState": "On"})), PowerState::On);
    assert_eq!(
        power_state(&json!({"PowerState": "Paused"})),
        PowerState::Unknown("Paused".into())
    );
    assert_eq!(power_state(&json!({})), PowerState::Unknown(String::new()));
}
