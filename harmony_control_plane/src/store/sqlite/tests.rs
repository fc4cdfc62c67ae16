//! SQLite-only behaviour: upgrading a database file of the previous release in place. The
//! contract shared with PostgreSQL is tested in tests/e2e/tests/control_plane_store.rs.

use rusqlite::{Connection, params};

use super::SqliteStore;
use crate::store::{Credential, Exchange, Store, now_ms, request_body_hash};

/// The schema of the release before durable requests (no schema_version, no salts, identities
/// without expiry).
const PREVIOUS_RELEASE: &str = "
CREATE TABLE regions (name TEXT PRIMARY KEY, zone TEXT NOT NULL, created_at INTEGER NOT NULL,
    decommissioned_at INTEGER);
CREATE TABLE bootstrap_tokens (id INTEGER PRIMARY KEY, region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    used_at INTEGER, revoked_at INTEGER);
CREATE TABLE identities (id INTEGER PRIMARY KEY, region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE, created_at INTEGER NOT NULL, revoked_at INTEGER);
CREATE INDEX identities_by_region ON identities(region);
CREATE INDEX bootstrap_by_region ON bootstrap_tokens(region);
CREATE TABLE service_instances (id TEXT PRIMARY KEY, service_type TEXT NOT NULL,
    region TEXT NOT NULL, state TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '', provider TEXT,
    outputs TEXT NOT NULL DEFAULT '{}', spec TEXT NOT NULL DEFAULT '{}',
    attempts INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE INDEX service_instances_by_state ON service_instances(state);
";

fn hash(tag: &str) -> [u8; 32] {
    request_body_hash("test", tag)
}

fn previous_release_database(path: &std::path::Path) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(PREVIOUS_RELEASE).unwrap();
    c.execute(
        "INSERT INTO regions (name, zone, created_at) VALUES ('eu', 'paris', 1)",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO identities (region, hash, created_at) VALUES ('eu', ?1, 1)",
        [&hash("hid_old")[..]],
    )
    .unwrap();
    c.execute(
        "INSERT INTO bootstrap_tokens (region, hash, created_at, expires_at) VALUES ('eu', ?1, 1, ?2)",
        params![&hash("hbt_unused")[..], now_ms() + 60_000],
    )
    .unwrap();
    c.execute(
        "INSERT INTO service_instances (id, service_type, region, state, created_at, updated_at)
         VALUES ('svc-1', 'queue', 'eu', 'ready', 1, 1)",
        [],
    )
    .unwrap();
}

#[tokio::test]
async fn a_database_of_the_previous_release_opens_and_keeps_its_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cp.sqlite");
    previous_release_database(&path);

    let store = SqliteStore::open(&path).unwrap();
    let now = now_ms();
    assert_eq!(
        store.check(&hash("hid_old"), now).await.unwrap(),
        Ok(Credential::Identity {
            region: "eu".into(),
            zone: "paris".into(),
            expires_at: None,
            used: false
        }),
        "an identity issued before expiry existed never expires"
    );
    let Ok(Credential::Bootstrap {
        id, salt, issued, ..
    }) = store.check(&hash("hbt_unused"), now).await.unwrap()
    else {
        panic!("an unused bootstrap token of the previous release is refused");
    };
    assert!(
        !issued && salt != [0; 32],
        "the upgrade gives old tokens a salt"
    );
    assert_eq!(
        store
            .exchange(id, "eu", &hash("hid_new"), now + 1000)
            .await
            .unwrap(),
        Exchange::Issued
    );
    assert_eq!(store.services().await.unwrap()[0].id, "svc-1");
    drop(store);

    // Opening again changes nothing (the salt stays, so the identity stays re-derivable).
    let store = SqliteStore::open(&path).unwrap();
    let Ok(Credential::Bootstrap { salt: again, .. }) =
        store.check(&hash("hbt_unused"), now).await.unwrap()
    else {
        panic!("the exchanged token's identity was never used, so it is still accepted");
    };
    assert_eq!(again, salt);
    let c = Connection::open(&path).unwrap();
    let version: i64 = c
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, super::schema::VERSION);
}

#[tokio::test]
async fn a_database_of_a_newer_release_is_refused_with_the_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cp.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let c = Connection::open(&path).unwrap();
    c.execute("UPDATE schema_version SET version = 99", [])
        .unwrap();
    drop(c);
    let e = SqliteStore::open(&path)
        .err()
        .expect("a newer schema must be refused");
    let shown = e.to_string();
    assert!(
        shown.contains("schema version 99") && shown.contains("cp.sqlite"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_version_1_database_gains_the_tenancy_tables_and_columns_in_place() {
    use crate::store::{NewRequest, RequestScope, TenancyStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cp.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    // Back to version 1: no tenancy tables, no tenant/project columns, one request queued.
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "DROP TABLE project_quotas; DROP TABLE projects; DROP TABLE tenant_caps;
         DROP TABLE tenant_tokens; DROP TABLE tenants;
         ALTER TABLE requests DROP COLUMN tenant; ALTER TABLE requests DROP COLUMN project;
         ALTER TABLE requests DROP COLUMN project_json;
         ALTER TABLE service_instances DROP COLUMN tenant;
         ALTER TABLE service_instances DROP COLUMN project;
         UPDATE schema_version SET version = 1;
         INSERT INTO requests (id, region, op, params, body_hash, state, created_at)
             VALUES ('old', 'eu', 'get_inventory', '{}', zeroblob(32), 'queued', 1);",
    )
    .unwrap();
    drop(c);
    let store = SqliteStore::open(&path).unwrap();
    let old = store.request("old").await.unwrap().unwrap();
    assert_eq!((old.op.as_str(), old.scope), ("get_inventory", None));
    assert!(store.create_tenant("acme", 1).await.unwrap());
    let scope = RequestScope {
        tenant: "acme".into(),
        project: "web".into(),
        project_json: "{}".into(),
    };
    let new = NewRequest::new("new", "eu", "get_objects", "{}", 2).scoped(scope.clone());
    store.submit_request(&new).await.unwrap();
    assert_eq!(
        store.request("new").await.unwrap().unwrap().scope,
        Some(scope)
    );
    let c = Connection::open(&path).unwrap();
    let version: i64 = c
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2);
}

#[test]
fn every_shared_statement_prepares_on_the_current_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cp.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let c = Connection::open(&path).unwrap();
    for (name, sql) in crate::store::sql::all() {
        if let Err(e) = c.prepare(sql.sqlite) {
            panic!("{name} does not prepare on SQLite: {e}\n{}", sql.sqlite);
        }
    }
}
