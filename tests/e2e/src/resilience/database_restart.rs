//! PostgreSQL restarted under callers: 3 replicas on one PostgreSQL behind haproxy, a region
//! with its agent, and callers sending requests (`get_inventory` through the agent) and reading
//! the regions in a loop while the database stops and starts again (`pg_ctl stop -m
//! immediate`, then start, as a crash and its recovery). Every answer must be a success or a
//! retryable `503` with `Retry-After`; a caller told to retry sends the same request id again,
//! as the documented client does (it joins the stored request, never runs it twice).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::raw_api::answer;

use crate::world::{Bins, Plane, World, WorldOptions};

/// How the callers fared.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    /// Calls answered 2xx.
    pub ok: usize,
    /// Calls answered 503 with `Retry-After` (then retried).
    pub retryable: usize,
    /// Every other answer, counted by `status code` (or `transport: ...`).
    pub other: BTreeMap<String, usize>,
    /// How long the database was down (stop and start again).
    pub restart: Duration,
    /// Requests that completed (each id answered 2xx once, after any retries).
    pub requests_done: usize,
}

impl Answers {
    /// Every call made.
    pub fn calls(&self) -> usize {
        self.ok + self.retryable + self.other.values().sum::<usize>()
    }
}

#[derive(Default)]
struct Tally {
    ok: usize,
    retryable: usize,
    other: BTreeMap<String, usize>,
    requests_done: usize,
}

/// One call: its status, `Retry-After` and the body's `code`, or a transport error.
async fn call(req: harmony_http::reqwest::RequestBuilder) -> Result<(u16, bool, String), String> {
    let r = req.send().await.map_err(|e| format!("transport: {e}"))?;
    let (status, retry_after, body) = answer(r).await;
    let code = body["code"].as_str().unwrap_or("").to_string();
    Ok((status, retry_after.is_some(), code))
}

/// Counts one answer; true when the call should be sent again (a retryable 503).
fn count(t: &mut Tally, answer: Result<(u16, bool, String), String>) -> bool {
    match answer {
        Ok((200..=299, _, _)) => {
            t.ok += 1;
            false
        }
        Ok((503, true, _)) => {
            t.retryable += 1;
            true
        }
        Ok((status, retry_after, code)) => {
            let key = format!(
                "{status} {code}{}",
                if retry_after { " (Retry-After)" } else { "" }
            );
            *t.other.entry(key).or_default() += 1;
            false
        }
        Err(e) => {
            *t.other.entry(e).or_default() += 1;
            false
        }
    }
}

/// Runs `callers` callers for 2 s, restarts PostgreSQL, and keeps them calling 3 s more. An
/// error says what could not be set up.
pub async fn callers_through_a_database_restart(
    bins: Bins,
    callers: usize,
) -> Result<Answers, String> {
    let mut w = tokio::task::block_in_place(|| {
        World::start(
            bins,
            WorldOptions {
                plane: Plane::Replicas {
                    count: 3,
                    max_agents: callers + 16,
                },
                ..WorldOptions::default()
            },
        )
    });
    let _agent = w.region_with_agent("agent", "eu", "z1").await;
    let (base, token) = (w.url(), w.admin_token().to_string());
    let http = harmony_http::ClientSettings::new()
        .ca_pem(Some(w.pki().ca_pem.as_bytes()))
        .build()
        .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..callers {
        let (http, base, token, stop) = (http.clone(), base.clone(), token.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut t = Tally::default();
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = format!("caller{c}-{n}");
                // A request, sent again with the same id for as long as it is told to retry.
                loop {
                    let submit = http
                        .post(format!("{base}/v1/regions/eu/requests"))
                        .bearer_auth(&token)
                        .json(&json!({"id": id, "op": "get_inventory", "params": {}, "timeout_s": 10}));
                    let answer = call(submit).await;
                    let done = matches!(answer, Ok((200..=299, _, _)));
                    if !count(&mut t, answer) {
                        t.requests_done += usize::from(done);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let list = http.get(format!("{base}/v1/regions")).bearer_auth(&token);
                if count(&mut t, call(list).await) {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            t
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    tokio::task::block_in_place(|| w.replicas_mut().pg.restart())?;
    let restart = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let mut answers = Answers {
        restart,
        ..Answers::default()
    };
    for task in tasks {
        let t = task.await.map_err(|e| e.to_string())?;
        answers.ok += t.ok;
        answers.retryable += t.retryable;
        answers.requests_done += t.requests_done;
        for (k, v) in t.other {
            *answers.other.entry(k).or_default() += v;
        }
    }
    Ok(answers)
}
