//! Waiting for a request's answer: [`call`] (submit, then wait), [`stream`] (submit, then
//! progress lines and the answer) and [`wait_answer`] (an accepted request). Waiting uses store
//! events (`RequestDone`, `Progress`) and polls every [`POLL`] as a safety net, so a lost event
//! delays an answer by at most a second and never loses it.

use harmony_agent_protocol::Res;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::answers::Signal;
use super::requests::{
    Accepted, POLL, RequestError, Submission, Update, finished, ids_of, submit_as,
};
use super::{ControlPlane, regions};
use crate::store::now_ms;

/// Submits a request and waits up to `wait` for its answer.
pub async fn call(
    cp: &ControlPlane,
    region: &str,
    sub: Submission,
    wait: Duration,
) -> Result<Res, RequestError> {
    // Watched before submitting, so the answer's event cannot slip in between.
    let (id, shown) = ids_of(&sub)?;
    let mut watch = cp.answers.watch(&cp.store, &id);
    let accepted = submit_as(cp, region, id, shown, sub).await?;
    let read_first = !accepted.created;
    await_answer(cp, &accepted, &mut watch, read_first, wait, |_, _| {}).await
}

/// Submits a request and streams its progress, then its answer. Refusals at submit (unknown
/// region, too large, duplicate id) are returned before anything is streamed.
pub async fn stream(
    cp: Arc<ControlPlane>,
    region: &str,
    sub: Submission,
    wait: Duration,
) -> Result<(Accepted, mpsc::Receiver<Update>), RequestError> {
    let (id, shown) = ids_of(&sub)?;
    let mut watch = cp.answers.watch(&cp.store, &id);
    let accepted = submit_as(&cp, region, id, shown, sub).await?;
    let (tx, rx) = mpsc::channel(64);
    let task_accepted = accepted.clone();
    tokio::spawn(async move {
        let progress_tx = tx.clone();
        let on_progress = move |stage: String, detail: String| {
            // A slow reader loses progress lines, never the answer.
            let _ = progress_tx.try_send(Update::Progress { stage, detail });
        };
        let read_first = !task_accepted.created;
        let answer = await_answer(
            &cp,
            &task_accepted,
            &mut watch,
            read_first,
            wait,
            on_progress,
        )
        .await;
        let _ = tx.send(Update::Finished(answer)).await;
    });
    Ok((accepted, rx))
}

/// Waits up to `wait` for the answer of an accepted request (subscribing now).
pub async fn wait_answer(
    cp: &ControlPlane,
    accepted: &Accepted,
    wait: Duration,
) -> Result<Res, RequestError> {
    let mut watch = cp.answers.watch(&cp.store, &accepted.id);
    // Watched after the submit: the answer may already be stored.
    await_answer(cp, accepted, &mut watch, true, wait, |_, _| {}).await
}

async fn await_answer(
    cp: &ControlPlane,
    accepted: &Accepted,
    watch: &mut super::answers::Watch,
    read_first: bool,
    wait: Duration,
    mut on_progress: impl FnMut(String, String),
) -> Result<Res, RequestError> {
    let id = accepted.id.as_str();
    let started = Instant::now();
    let deadline = started + wait;
    // `read_first` is false for a request this call just created with `watch` taken before the
    // submit: its answer cannot be stored without its event reaching `watch`, so the first
    // read is skipped (one pooled connection less per request).
    let mut read = read_first;
    loop {
        if read {
            let record = cp
                .store
                .request(id)
                .await?
                .ok_or_else(|| RequestError::NotFound(accepted.shown.clone()))?;
            if record.state.is_finished() {
                return finished(record, &accepted.shown);
            }
        }
        read = true;
        // Wait for this request's answer event, a resync, or the next poll.
        let wake = deadline.min(Instant::now() + POLL);
        loop {
            tokio::select! {
                signal = watch.next() => match signal {
                    Some(Signal::Done | Signal::Resync) => break,
                    Some(Signal::Progress { stage, detail }) => on_progress(stage, detail),
                    // The store's event stream ended: polling alone from here on.
                    None => tokio::time::sleep_until(wake).await,
                },
                _ = tokio::time::sleep_until(wake) => break,
            }
            if Instant::now() >= wake {
                break;
            }
        }
        if Instant::now() >= deadline {
            // One last read: the answer may have arrived with the deadline.
            if let Some(r) = cp.store.request(id).await?
                && r.state.is_finished()
            {
                return finished(r, &accepted.shown);
            }
            let session = cp.store.session(&accepted.region, &accepted.zone).await?;
            let policy = cp.settings.policy;
            let (health, reason, _) = regions::health_of(session.as_ref(), now_ms(), &policy);
            return Err(RequestError::Timeout {
                id: accepted.shown.clone(),
                region: accepted.region.clone(),
                waited_s: started.elapsed().as_secs_f64(),
                health,
                reason,
            });
        }
    }
}
