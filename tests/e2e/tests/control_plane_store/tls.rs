//! PostgreSQL over TLS (what CloudNativePG serves, with its own CA): a real PostgreSQL 18 with
//! `ssl=on` and a certificate from a fresh CA. With that CA in `--database-ca-file` the store's
//! pool and its LISTEN connection both run over verified TLS; with another CA, or none, opening
//! fails and says to give `--database-ca-file`; a `hostssl`-only server refuses `sslmode=disable`,
//! and `sslmode=require` refuses a server without TLS.

use super::events::recv_skipping_resync;
use harmony_control_plane::store::postgres::{CHANNEL, tls};
use harmony_control_plane::store::{self, Event, StoreConfig};
use harmony_e2e::multi_region::Pki;
use harmony_e2e::postgres::{PgServer, PgTls};
use std::path::{Path, PathBuf};

/// A PostgreSQL 18 with TLS as `mode` says, its `harmony` database created.
fn server(mode: PgTls) -> PgServer {
    let server = PgServer::start_with(mode)
        .unwrap_or_else(|e| panic!("starting PostgreSQL 18 with TLS: {e}"));
    server
        .create_database("harmony")
        .unwrap_or_else(|e| panic!("creating the database: {e}\n{}", server.logs()));
    server
}

fn config(url: &str, ca_file: Option<PathBuf>) -> StoreConfig {
    StoreConfig::Postgres {
        url: url.to_string(),
        pool_size: 2,
        pool_wait: std::time::Duration::from_secs(10),
        ca_file,
    }
}

/// The password in a `postgres://user:password@host...` URL, to check errors never show it.
fn password(url: &str) -> &str {
    let creds = url.split('@').next().unwrap();
    creds.rsplit(':').next().unwrap()
}

/// What the server says about TLS, asked over a connection of our own made with the store's
/// connector: whether that connection is TLS, and (last query, TLS) of the store's connections.
async fn ssl_report(url: &str, ca_file: &Path) -> (bool, Vec<(String, bool)>) {
    let config = tls::parse_url(url).unwrap();
    let connector = tls::connector(&config, Some(ca_file)).unwrap();
    let (client, conn) = config
        .connect(connector)
        .await
        .unwrap_or_else(|e| panic!("connecting with the store's connector: {e:?}"));
    let driver = tokio::spawn(conn);
    let own: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let store = client
        .query(
            "SELECT a.query, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.application_name = 'harmony-control-plane' AND a.pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, bool>(1)))
        .collect();
    drop(client);
    let _ = driver.await;
    (own, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_require_with_the_right_ca_encrypts_the_pool_and_the_listener() {
    let server = server(PgTls::Required);
    let url = format!("{}?sslmode=require", server.url("harmony"));
    let ca = server.ca_file().expect("a TLS server has a CA");
    let config = config(&url, Some(ca.clone()));
    let (a, b) = (
        store::open(&config)
            .await
            .unwrap_or_else(|e| panic!("opening over TLS: {e}\n{}", server.logs())),
        store::open(&config).await.unwrap(),
    );

    assert!(a.create_region("eu", "zone-1").await.unwrap());
    let region = b
        .region("eu")
        .await
        .unwrap()
        .expect("the other replica reads it");
    assert_eq!(
        (region.name.as_str(), region.zone.as_str()),
        ("eu", "zone-1")
    );

    let mut on_b = b.subscribe();
    let e = Event::RequestQueued {
        region: "eu".into(),
        zone: None,
    };
    a.publish(&e).await.unwrap();
    assert_eq!(recv_skipping_resync(&mut on_b).await, e);

    let (own, sessions) = ssl_report(&url, &ca).await;
    assert!(own, "the server reports our session as SSL");
    assert!(
        sessions.iter().all(|(_, ssl)| *ssl),
        "every store connection is SSL: {sessions:?}"
    );
    let listen = format!("LISTEN {CHANNEL}");
    assert_eq!(
        sessions.iter().filter(|(q, _)| *q == listen).count(),
        2,
        "both replicas' LISTEN connections are there, over SSL: {sessions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_with_another_ca_or_none_fails_naming_the_ca_flag() {
    let server = server(PgTls::On);
    let base = server.url("harmony");
    let other = Pki::new().unwrap();
    for (url, ca) in [
        (format!("{base}?sslmode=require"), Some(other.ca())),
        (format!("{base}?sslmode=verify-full"), Some(other.ca())),
        (format!("{base}?sslmode=require"), None),
        // `prefer` (the default) uses TLS when offered and never falls back to an unverified
        // or plain connection when the certificate does not verify.
        (base.clone(), Some(other.ca())),
    ] {
        let err = match store::open(&config(&url, ca.clone())).await {
            Ok(_) => panic!("opened with CA {ca:?}: the certificate must not verify"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("--database-ca-file") && err.contains("does not verify"),
            "{err}"
        );
        assert!(!err.contains(password(&base)), "the password leaked: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_default_sslmode_and_direct_negotiation_use_tls() {
    let server = server(PgTls::On);
    let url = server.url("harmony");
    let ca = server.ca_file().unwrap();
    let s = store::open(&config(&url, Some(ca.clone())))
        .await
        .unwrap_or_else(|e| panic!("opening with sslmode=prefer: {e}"));
    assert!(s.create_region("eu", "z").await.unwrap());
    let (_, sessions) = ssl_report(&url, &ca).await;
    assert!(
        !sessions.is_empty() && sessions.iter().all(|(_, ssl)| *ssl),
        "prefer + a TLS server = TLS: {sessions:?}"
    );
    // Direct TLS (PostgreSQL 17+, no SSLRequest round trip) needs ALPN `postgresql`.
    let direct = format!("{url}?sslmode=require&sslnegotiation=direct");
    let s = store::open(&config(&direct, Some(ca)))
        .await
        .unwrap_or_else(|e| panic!("opening with sslnegotiation=direct: {e}"));
    assert_eq!(s.region("eu").await.unwrap().unwrap().zone, "z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_sslmode_disable_is_refused_by_a_hostssl_only_server() {
    let server = server(PgTls::Required);
    let url = format!("{}?sslmode=disable", server.url("harmony"));
    let err = match store::open(&config(&url, None)).await {
        Ok(_) => panic!("a plain connection was accepted by a hostssl-only server"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("pg_hba.conf") && err.contains("no encryption"),
        "{err}"
    );
    // A CA file with sslmode=disable is a contradiction, refused before connecting.
    let err = match store::open(&config(&url, server.ca_file())).await {
        Ok(_) => panic!("sslmode=disable with a CA file was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("--database-ca-file is given but"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tls_require_against_a_server_without_tls_is_refused() {
    let server = server(PgTls::Off);
    let url = format!("{}?sslmode=require", server.url("harmony"));
    let err = match store::open(&config(&url, None)).await {
        Ok(_) => panic!("sslmode=require connected to a server without TLS"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("server does not support TLS") && err.contains("has TLS off"),
        "{err}"
    );
}
