//! The PostgreSQL data path across sites, for real: PostgreSQL 18 with TLS behind an haproxy that
//! routes like the OpenShift router's passthrough frontend (SNI), and a libpq >= 17 client opening
//! a physical replication connection. The connection parameters are written by hand exactly as a
//! CNPG replica's `externalClusters` entry maps them to libpq (see docs/modules/multisite_postgresql.md,
//! "PostgreSQL 17: SNI and passthrough Routes"): they prove why the Score must set `sslnegotiation: direct`.
//! Tools: `bash tests/pg-datapath/install.sh` (tests/setup.sh runs it).

use std::collections::BTreeMap;

use harmony_e2e::DataPath;
use harmony_e2e::eventually::{Seen, eventually_blocking};

/// A Route host as the Score derives it: `<name>-<namespace>.<apps domain of the primary site>`.
const ROUTE_HOST: &str = "finance-db-tenant-a.apps.site-paris.example.com";

fn start() -> DataPath {
    DataPath::start(ROUTE_HOST).unwrap_or_else(|e| panic!("cannot start the data path: {e}"))
}

/// The replica's `externalClusters` connection for the primary, as libpq parameters. The only
/// transport substitutions: `hostaddr` (the Route host does not resolve here) and the haproxy port
/// instead of 443. `host` stays the Route host: it is the SNI and the name verify-full checks.
fn replica_params(dp: &DataPath) -> BTreeMap<String, String> {
    let p = |s: &std::path::Path| s.display().to_string();
    BTreeMap::from([
        ("host".to_string(), ROUTE_HOST.to_string()),
        ("hostaddr".to_string(), "127.0.0.1".to_string()),
        ("port".to_string(), dp.haproxy_port().to_string()),
        ("user".to_string(), "streaming_replica".to_string()),
        ("dbname".to_string(), "postgres".to_string()),
        ("sslmode".to_string(), "verify-full".to_string()),
        ("sslnegotiation".to_string(), "direct".to_string()),
        ("sslcert".to_string(), p(&dp.client_cert_path())),
        ("sslkey".to_string(), p(&dp.client_key_path())),
        ("sslrootcert".to_string(), p(&dp.ca_cert_path())),
    ])
}

fn connect(dp: &DataPath, params: &BTreeMap<String, String>) -> serde_json::Value {
    dp.connect(params)
        .unwrap_or_else(|e| panic!("the client did not run: {e}\n{}", dp.logs()))
}

fn assert_refused(dp: &DataPath, params: &BTreeMap<String, String>, why: &str) -> String {
    let out = connect(dp, params);
    assert_eq!(
        out["ok"],
        false,
        "{why}: the connection should have failed, got {out}\n{}",
        dp.logs()
    );
    let error = out["error"].as_str().unwrap_or_default().to_string();
    eprintln!("refused as expected ({why}): {error}");
    assert!(
        !error.is_empty(),
        "a failure without an error message: {out}"
    );
    error
}

#[test]
fn direct_tls_through_the_sni_router_runs_identify_system() {
    let dp = start();
    let out = connect(&dp, &replica_params(&dp));
    assert_eq!(
        out["ok"],
        true,
        "IDENTIFY_SYSTEM through haproxy failed: {out}\n{}",
        dp.logs()
    );
    let systemid = out["systemid"].as_str().unwrap_or_default();
    assert!(
        !systemid.is_empty() && systemid.chars().all(|c| c.is_ascii_digit()),
        "systemid should be a decimal number: {out}"
    );
    assert_eq!(
        out["timeline"], 1,
        "a fresh primary is on timeline 1: {out}"
    );
    assert_eq!(out["ssl"], true, "the connection must be TLS: {out}");
    let libpq = out["libpq"].as_u64().unwrap_or_default();
    assert!(libpq >= 170_000, "the client's libpq must be >= 17: {out}");
    assert_eq!(dp.route_host(), ROUTE_HOST);
}

#[test]
fn classic_ssl_request_without_sni_does_not_pass_the_router() {
    let dp = start();
    let mut params = replica_params(&dp);
    // What a Score would generate without `sslnegotiation: direct` (libpq's default: postgres).
    params.remove("sslnegotiation");
    assert_refused(
        &dp,
        &params,
        "an SSLRequest carries no SNI, so haproxy cannot route it to the primary",
    );

    // The same parameters with an explicit `sslnegotiation=postgres` fail the same way.
    params.insert("sslnegotiation".into(), "postgres".into());
    assert_refused(
        &dp,
        &params,
        "sslnegotiation=postgres is the classic SSLRequest",
    );

    // And the server itself is fine with the classic negotiation when reached directly: the
    // router, not PostgreSQL, is what the direct negotiation is for.
    params.insert("port".into(), dp.postgres_port().to_string());
    let out = connect(&dp, &params);
    assert_eq!(
        out["ok"],
        true,
        "classic TLS straight to PostgreSQL should work: {out}\n{}",
        dp.logs()
    );
}

/// PostgreSQL's `connection received` lines so far: one per connection that reached it.
fn connections_received(dp: &DataPath) -> usize {
    dp.postgres_log().matches("connection received").count()
}

#[test]
fn a_host_name_no_route_matches_is_not_routed() {
    let dp = start();
    let mut params = replica_params(&dp);
    params.insert(
        "host".into(),
        "finance-db-tenant-a.apps.site-newyork.example.com".into(),
    );
    // sslmode=require: libpq checks the chain against sslrootcert (the right CA) but never the
    // host name, so the server certificate (whose only SAN is the Paris host) is acceptable for
    // this unknown host. Nothing on the client side refuses it: only the router can.
    params.insert("sslmode".into(), "require".into());

    // Control: the same parameters straight to PostgreSQL, without the router, connect.
    let mut direct = params.clone();
    direct.insert("port".into(), dp.postgres_port().to_string());
    let out = connect(&dp, &direct);
    assert_eq!(
        out["ok"],
        true,
        "with sslmode=require the unknown host must be acceptable to client and server, so that \
         only haproxy can refuse it; straight to PostgreSQL it failed: {out}\n{}",
        dp.logs()
    );

    let reached_postgres = connections_received(&dp);
    let haproxy_lines = dp.haproxy_log().lines().count();
    let error = assert_refused(
        &dp,
        &params,
        "the SNI matches no Route, so haproxy sends it to the default backend",
    );
    // The kind of failure: haproxy closed the connection after reading the ClientHello, before
    // any ServerHello (an EOF in the TLS handshake). A certificate, name or authentication
    // failure would mean the connection reached PostgreSQL.
    let lower = error.to_lowercase();
    assert!(
        lower.contains("eof")
            && !lower.contains("certificate")
            && !lower.contains("authentication")
            && !lower.contains("pg_hba"),
        "the connection should be closed during the TLS handshake (an EOF), not fail a \
         certificate or authentication check: {error}\n{}",
        dp.logs()
    );
    // haproxy logs the connection (when it closes) as sent to the default backend, no server.
    let new_lines = eventually_blocking(
        std::time::Duration::from_secs(10),
        "a haproxy log line for the refused connection",
        || {
            let log = dp.haproxy_log();
            let new: Vec<String> = log
                .lines()
                .skip(haproxy_lines)
                .map(str::to_string)
                .collect();
            if new.is_empty() {
                Err(Seen(log))
            } else {
                Ok(new)
            }
        },
    )
    .unwrap_or_else(|w| panic!("haproxy logged no line for the refused connection: {w}"));
    assert!(
        new_lines.len() == 1 && new_lines[0].contains(" public_ssl be_no_sni/<NOSRV> "),
        "haproxy should have sent the connection to be_no_sni, which has no server: {new_lines:?}"
    );
    assert_eq!(
        connections_received(&dp),
        reached_postgres,
        "the unrouted connection must never reach PostgreSQL:\n{}",
        dp.logs()
    );
}

#[test]
fn verify_full_rejects_a_server_certificate_from_another_ca() {
    let dp = start();
    let mut params = replica_params(&dp);
    params.insert(
        "sslrootcert".into(),
        dp.foreign_ca_cert_path().display().to_string(),
    );
    let error = assert_refused(
        &dp,
        &params,
        "verify-full must reject a server certificate the trusted CA did not sign",
    );
    assert!(
        error.contains("certificate verify failed") || error.contains("certificate"),
        "the failure should be the certificate check: {error}"
    );
}

#[test]
fn the_client_key_is_private_and_the_start_checks_the_host() {
    use std::os::unix::fs::PermissionsExt;
    let dp = start();
    let mode = std::fs::metadata(dp.client_key_path())
        .unwrap_or_else(|e| panic!("client key: {e}"))
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o077,
        0,
        "libpq refuses a client key others can read: {mode:o}"
    );
    let err = DataPath::start("not a host")
        .err()
        .unwrap_or_else(|| panic!("a host with spaces must be refused"));
    assert!(err.contains("not a DNS name"), "{err}");
}
