//! Write combining: concurrent calls of one kind (submit a request, store a result, read a
//! request, publish an event) are gathered and sent as one statement, as the heartbeats are.
//!
//! A combiner takes calls from every task of the replica; while a flush is in flight (at most
//! `in_flight` at once), the calls that arrive meanwhile wait and go together in the next one.
//! An idle replica therefore sends each call alone and at once (no timer, no added latency);
//! a busy one sends hundreds per statement instead of one statement, and one pooled connection,
//! per call. A flush answers every call of its batch, in order.

use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::store::StoreError;

/// What one flush does: the answers to a batch of calls, one per call, in their order.
pub(super) type Flush<I, O> =
    Arc<dyn Fn(Vec<I>) -> BoxFuture<'static, Vec<Result<O, StoreError>>> + Send + Sync>;

type Call<I, O> = (I, oneshot::Sender<Result<O, StoreError>>);

/// Gathers calls of one kind into batched flushes. Dropping it stops its task (calls then fail).
pub(super) struct Combiner<I, O> {
    op: &'static str,
    calls: mpsc::UnboundedSender<Call<I, O>>,
    task: JoinHandle<()>,
}

impl<I: Send + 'static, O: Send + 'static> Combiner<I, O> {
    /// Starts a combiner (`op` names the operation in errors) running up to `in_flight`
    /// flushes at once, each of at most `max_batch` calls. Needs a Tokio runtime.
    pub(super) fn start(
        op: &'static str,
        in_flight: usize,
        max_batch: usize,
        flush: Flush<I, O>,
    ) -> Self {
        let (calls, mut rx) = mpsc::unbounded_channel::<Call<I, O>>();
        let slots = Arc::new(Semaphore::new(in_flight.max(1)));
        let max_batch = max_batch.max(1);
        let task = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                // Wait for a free slot first: what arrives meanwhile joins this batch.
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let mut batch = vec![first];
                while batch.len() < max_batch {
                    match rx.try_recv() {
                        Ok(call) => batch.push(call),
                        Err(_) => break,
                    }
                }
                let (items, replies): (Vec<I>, Vec<_>) = batch.into_iter().unzip();
                let flush = flush.clone();
                tokio::spawn(async move {
                    let answers = flush(items).await;
                    debug_assert_eq!(answers.len(), replies.len());
                    for (reply, answer) in replies.into_iter().zip(answers) {
                        // The caller may have gone (its request was dropped): nothing to tell.
                        let _ = reply.send(answer);
                    }
                    drop(slot);
                });
            }
        });
        Self { op, calls, task }
    }

    /// Makes one call and waits for its answer.
    pub(super) async fn call(&self, item: I) -> Result<O, StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || StoreError::new(super::BACKEND, self.op, "the store is shutting down");
        self.calls.send((item, reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl<I, O> Drop for Combiner<I, O> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The answers of `batch` from `whole`, its one statement; if the database refused it and the
/// batch holds more than one call, each call alone (`one`), so a call the database refuses
/// fails alone. A busy or unreachable database ([`StoreError::is_transient`]) fails every call
/// at once: one by one, each would wait for it again.
pub(super) async fn or_one_by_one<'a, I, O>(
    batch: &'a [I],
    whole: Result<Vec<O>, StoreError>,
    one: impl Fn(&'a I) -> BoxFuture<'a, Result<O, StoreError>>,
) -> Vec<Result<O, StoreError>> {
    match whole {
        Ok(answers) => answers.into_iter().map(Ok).collect(),
        Err(e) if batch.len() == 1 || e.is_transient() => {
            batch.iter().map(|_| Err(e.clone())).collect()
        }
        Err(e) => {
            log::debug!("a batch of {} failed ({e}); each call alone", batch.len());
            let mut answers = Vec::with_capacity(batch.len());
            for item in batch {
                answers.push(one(item).await);
            }
            answers
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn concurrent_calls_are_flushed_together_and_each_gets_its_own_answer() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let flush: Flush<u32, u32> = Arc::new(move |items: Vec<u32>| {
            seen.lock().unwrap().push(items.len());
            Box::pin(async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                items
                    .into_iter()
                    .map(|i| {
                        if i == 7 {
                            Err(StoreError::new("test", "double", "seven is refused"))
                        } else {
                            Ok(i * 2)
                        }
                    })
                    .collect()
            })
        });
        let c = Arc::new(Combiner::start("double", 1, 64, flush));
        let calls = (0..200u32).map(|i| {
            let c = c.clone();
            tokio::spawn(async move { (i, c.call(i).await) })
        });
        for done in futures::future::join_all(calls).await {
            let (i, answer) = done.unwrap();
            match answer {
                Ok(v) => assert_eq!(v, i * 2),
                Err(e) => assert_eq!((i, e.cause.as_str()), (7, "seven is refused")),
            }
        }
        let sizes = sizes.lock().unwrap().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 200);
        assert!(sizes.iter().all(|n| *n <= 64), "{sizes:?}");
        assert!(
            sizes.len() < 200,
            "200 concurrent calls took {} flushes: none was combined",
            sizes.len()
        );
    }

    #[tokio::test]
    async fn a_failed_batch_is_retried_call_by_call() {
        let batch = [1, 2, 3];
        let answers = or_one_by_one(
            &batch,
            Err(StoreError::new("test", "batch", "one row is bad")),
            |i: &i32| {
                let i = *i;
                Box::pin(async move {
                    if i == 2 {
                        Err(StoreError::new("test", "one", "bad row"))
                    } else {
                        Ok(i)
                    }
                })
            },
        )
        .await;
        assert_eq!(answers[0], Ok(1));
        assert!(answers[1].is_err());
        assert_eq!(answers[2], Ok(3));
    }

    #[tokio::test]
    async fn a_batch_failed_by_a_busy_database_is_not_retried_call_by_call() {
        let batch = [1, 2, 3];
        let tried = Mutex::new(0);
        let answers = or_one_by_one(
            &batch,
            Err(StoreError::busy("test", "batch", "waited for a lock")),
            |i: &i32| {
                *tried.lock().unwrap() += 1;
                let i = *i;
                Box::pin(async move { Ok(i) })
            },
        )
        .await;
        assert_eq!(*tried.lock().unwrap(), 0, "each call was sent again alone");
        assert_eq!(answers.len(), 3);
        assert!(
            answers
                .iter()
                .all(|a| a.as_ref().is_err_and(|e| e.overloaded))
        );
    }
}
