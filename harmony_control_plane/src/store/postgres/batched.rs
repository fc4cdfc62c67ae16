//! The request path's calls, combined ([`super::combine`]) into one statement per kind while
//! a previous one runs: what a burst of requests sends most (ADR 0027), and the credential
//! checks and zone transitions that a storm of reconnecting agents sends most.

use super::cached::Cached;
use deadpool_postgres::Pool;
use std::sync::Arc;
use std::time::Duration;

use super::combine::{self, Combiner};
use super::{CHANNEL, Error, identity, pg_error, pooled_client, requests, sessions, status};
use crate::store::{
    IdentityFacts, NewRequest, RegionRecord, RequestRecord, SessionRecord, Submitted, ZoneRecord,
    ZoneState,
};

/// The request path's combiners ([`combine`]): what a burst of requests sends most.
pub(super) struct Batched {
    pub(super) submit: Combiner<NewRequest, Submitted>,
    pub(super) read: Combiner<String, Option<RequestRecord>>,
    pub(super) region: Combiner<String, Option<RegionRecord>>,
    pub(super) region_zones: Combiner<String, Vec<ZoneRecord>>,
    pub(super) region_sessions: Combiner<String, Vec<SessionRecord>>,
    pub(super) session: Combiner<(String, String), Option<SessionRecord>>,
    pub(super) unanswered: Combiner<(String, String), Vec<RequestRecord>>,
    pub(super) mark_sent: Combiner<(String, i64), bool>,
    pub(super) finish: Combiner<requests::Finish, bool>,
    pub(super) publish: Combiner<String, ()>,
    pub(super) zone_state: Combiner<ZoneState, bool>,
    pub(super) identity: Combiner<Vec<u8>, Option<IdentityFacts>>,
}

/// Flushes at once per kind: a few, so a burst uses a few pooled connections and leaves the
/// rest of the pool to everything else.
const FLUSHES_IN_FLIGHT: usize = 2;
/// Calls per statement at most (arrays of this many rows).
pub(super) const MAX_BATCH: usize = 500;

impl Batched {
    pub(super) fn start(pool: &Pool, wait: Duration) -> Self {
        /// A flush: a pooled connection for `op`, then `$body` (a future using the client `$c`
        /// and the batch `$items`) answering every call; a lost connection fails them all.
        macro_rules! flush {
            ($op:literal, $items:ident, $c:ident => $body:expr) => {{
                let pool = pool.clone();
                let flush: combine::Flush<_, _> = Arc::new(move |$items| {
                    let pool = pool.clone();
                    Box::pin(async move {
                        let n = $items.len();
                        match pooled_client(&pool, wait, $op).await {
                            Ok($c) => $body,
                            Err(e) => vec![Err(e); n],
                        }
                    })
                });
                Combiner::start($op, FLUSHES_IN_FLIGHT, MAX_BATCH, flush)
            }};
        }
        /// A batched read: `$fetch(&client, &keys)` once for every key of the batch, then
        /// `$pick(&found, key)` answers each call (keys may repeat).
        macro_rules! keyed {
            ($op:literal, $key:ty, $fetch:path, |$found:ident, $k:ident| $pick:expr) => {
                flush!($op, items, c => {
                    let items: Vec<$key> = items;
                    match $fetch(&c, &items).await {
                        Ok($found) => items.iter().map(|$k| Ok($pick)).collect(),
                        Err(e) => vec![Err(pg_error($op, e)); items.len()],
                    }
                })
            };
        }
        Self {
            submit: flush!("submit a request", items, c => {
                let items: Vec<NewRequest> = items;
                let whole = requests::submit_many(&c, &items)
                    .await
                    .map_err(|e| pg_error("submit a request", e));
                combine::or_one_by_one(&items, whole, |r| {
                    Box::pin(async {
                        requests::submit(&c, r)
                            .await
                            .map_err(|e| pg_error("submit a request", e))
                    })
                })
                .await
            }),
            read: keyed!("read a request", String, requests::many, |found, id| found
                .get(id)
                .cloned()),
            region: keyed!(
                "read a region",
                String,
                identity::regions_named,
                |found, name| found.get(name).cloned()
            ),
            region_zones: keyed!(
                "list a region's zones",
                String,
                identity::zones_of_regions,
                |found, name| found.get(name).cloned().unwrap_or_default()
            ),
            region_sessions: keyed!(
                "list a region's sessions",
                String,
                sessions::of_regions,
                |found, name| found.get(name).cloned().unwrap_or_default()
            ),
            session: keyed!(
                "read a session",
                (String, String),
                sessions::many,
                |found, key| found.get(key).cloned()
            ),
            unanswered: keyed!(
                "list unanswered requests",
                (String, String),
                requests::unanswered_many,
                |found, key| found.get(key).cloned().unwrap_or_default()
            ),
            mark_sent: flush!("mark a request sent", items, c => {
                let items: Vec<(String, i64)> = items;
                match requests::mark_sent_many(&c, &items).await {
                    Ok(marked) => items.iter().map(|(id, _)| Ok(marked.contains(id))).collect(),
                    Err(e) => vec![Err(pg_error("mark a request sent", e)); items.len()],
                }
            }),
            finish: flush!("store a request's result", items, c => {
                let items: Vec<requests::Finish> = items;
                let whole = requests::finish_many(&c, &items)
                    .await
                    .map_err(|e| pg_error("store a request's result", e));
                combine::or_one_by_one(&items, whole, |(id, state, res, now)| {
                    Box::pin(async {
                        requests::finish(&c, id, *state, res, *now)
                            .await
                            .map_err(|e| pg_error("store a request's result", e))
                    })
                })
                .await
            }),
            publish: flush!("publish an event", items, c => {
                let items: Vec<String> = items;
                // One round trip, one notification per event (each payload fits one NOTIFY).
                match c
                    .execute_cached(
                        "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p",
                        &[&CHANNEL, &items],
                    )
                    .await
                {
                    Ok(_) => vec![Ok(()); items.len()],
                    Err(e) => vec![Err(pg_error("publish an event", Error::from(e))); items.len()],
                }
            }),
            identity: keyed!(
                "check a credential",
                Vec<u8>,
                identity::identity_facts_many,
                |found, hash| found.get(hash).cloned()
            ),
            // Zone transitions: every (re)connecting agent records two or three.
            zone_state: flush!("record a zone's state", items, c => {
                let items: Vec<ZoneState> = items;
                let whole = status::record_many(&c, &items)
                    .await
                    .map_err(|e| pg_error("record a zone's state", e));
                combine::or_one_by_one(&items, whole, |s| {
                    Box::pin(async {
                        status::record_many(&c, std::slice::from_ref(s))
                            .await
                            .map(|r| r[0])
                            .map_err(|e| pg_error("record a zone's state", e))
                    })
                })
                .await
            }),
        }
    }
}
