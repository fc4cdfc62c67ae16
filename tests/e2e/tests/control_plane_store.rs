//! Contract tests of the control plane's `Store`: every case runs the same assertions against
//! SQLite (a temp file) and PostgreSQL (a real PostgreSQL 18 started by the test, see
//! `harmony_e2e::postgres`). PostgreSQL-only cases cover what only N replicas can do: two store
//! instances on one database see each other's writes and events, the event listener survives
//! a database crash, and TLS to PostgreSQL verifies the server (`tls.rs`).
//!
//! Run: `cargo test -p harmony_e2e --test control_plane_store` (needs
//! `bash tests/pg-datapath/install.sh` once, for the PostgreSQL binaries).

#[path = "control_plane_store/credentials.rs"]
mod credentials;
#[path = "control_plane_store/events.rs"]
mod events;
#[path = "control_plane_store/plans.rs"]
mod plans;
#[path = "control_plane_store/requests.rs"]
mod requests;
#[path = "control_plane_store/services.rs"]
mod services;
#[path = "control_plane_store/status.rs"]
mod status;
#[path = "control_plane_store/tenancy.rs"]
mod tenancy;
#[path = "control_plane_store/tls.rs"]
mod tls;
#[path = "control_plane_store/zones.rs"]
mod zones;

use credentials::*;
use events::*;
use requests::*;
use services::*;
use status::*;
use tenancy::*;
use zones::*;

use harmony_control_plane::store::{self, Store, StoreConfig};
use harmony_e2e::postgres::PgServer;
use std::sync::Arc;

/// A database for one test: a temp SQLite file, or a database on its own PostgreSQL server.
enum Db {
    Sqlite(tempfile::TempDir),
    Postgres { server: PgServer, url: String },
}

impl Db {
    fn sqlite() -> Self {
        Db::Sqlite(tempfile::tempdir().expect("a temp dir"))
    }

    fn postgres() -> Self {
        let server = PgServer::start().unwrap_or_else(|e| panic!("starting PostgreSQL 18: {e}"));
        server
            .create_database("harmony")
            .unwrap_or_else(|e| panic!("creating the database: {e}\n{}", server.logs()));
        let url = server.url("harmony");
        Db::Postgres { server, url }
    }

    fn config(&self) -> StoreConfig {
        match self {
            Db::Sqlite(dir) => StoreConfig::Sqlite(dir.path().join("cp.sqlite")),
            Db::Postgres { url, .. } => StoreConfig::Postgres {
                url: url.clone(),
                pool_size: 4,
                pool_wait: std::time::Duration::from_secs(10),
                ca_file: None,
            },
        }
    }

    /// A new store instance on this database (another replica, or the same one restarted).
    async fn open(&self) -> Arc<dyn Store> {
        store::open(&self.config())
            .await
            .unwrap_or_else(|e| panic!("opening the store: {e}"))
    }

    /// A store on this PostgreSQL database with one pooled connection, so the plans its first
    /// calls make are the ones every later call uses, and one call can hold the whole pool.
    async fn open_one_connection(&self) -> Arc<dyn Store> {
        let Db::Postgres { url, .. } = self else {
            panic!("a pool of one connection is a PostgreSQL setting")
        };
        store::open(&StoreConfig::Postgres {
            url: url.clone(),
            pool_size: 1,
            pool_wait: std::time::Duration::from_secs(10),
            ca_file: None,
        })
        .await
        .unwrap_or_else(|e| panic!("opening the store: {e}"))
    }

    /// A plain connection to this PostgreSQL database, outside any store (statistics, locks,
    /// rows written directly), and the task driving it.
    async fn connect(&self) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
        let Db::Postgres { url, .. } = self else {
            panic!("a plain connection is to PostgreSQL")
        };
        let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connecting: {e:?}"));
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        (c, driver)
    }
}

/// Generates `sqlite::<case>` and `postgres::<case>` tests running the same case.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Db::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Db::postgres()).await;
                }
            )*
        }
    };
}

contract!(
    regions_are_created_once_listed_and_recommissioned,
    bootstrap_token_is_single_use_expires_and_is_superseded,
    concurrent_credential_checks_each_get_their_own_answer,
    lost_welcome_re_exchange_returns_the_same_identity_until_it_is_used,
    rotation_keeps_the_old_identity_valid_for_the_overlap_only,
    decommission_revokes_identities_and_tokens,
    sessions_follow_the_current_connection_only,
    heartbeats_of_many_regions_apply_in_one_call,
    durable_request_ids_are_idempotency_keys,
    unanswered_requests_keep_submit_order_and_finish_once,
    requests_survive_reopening_the_store,
    service_instance_cancel_and_claim_exclude_each_other,
    service_instances_survive_reopening_the_store,
    published_events_reach_subscribers,
    tenants_and_their_tokens_are_stored_hashed_and_revoked,
    projects_are_unique_and_their_quotas_stay_under_the_tenant_cap,
    a_cap_is_never_lowered_below_the_quotas_granted,
    page_sessions_are_kept_hashed_and_ended,
    requests_and_instances_keep_their_tenant_and_project,
    zones_are_added_listed_and_decommissioned_one_by_one,
    sessions_and_requests_are_kept_per_zone,
    concurrent_calls_each_get_the_answer_they_would_get_alone,
    zone_states_change_once_and_never_to_an_older_observation,
    zone_states_recorded_together_apply_as_one_after_the_other,
    a_turn_is_held_by_one_holder_until_its_lease_runs_out,
    request_summaries_are_listed_per_zone_and_tenant_with_their_failure,
    progress_keeps_the_last_lines_of_unanswered_requests_of_their_zone,
);

fn hash(tag: &str) -> [u8; 32] {
    store::request_body_hash("test", tag)
}
