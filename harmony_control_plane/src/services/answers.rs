//! Callers waiting for answers, found by request id. One task per replica reads the store's
//! events and wakes only the callers of the request an event names (`RequestDone`, `Progress`),
//! and every caller on `Resync`. Before, each waiting caller read every event of the replica:
//! 1,000 callers and 2,000 events made two million wake-ups and copies (ADR 0027).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::mpsc;

use crate::store::{Event, Store, next_event};

/// What a waiting caller is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Its request has an answer (read it from the store).
    Done,
    /// The agent's progress on it.
    Progress {
        /// A short stage name.
        stage: String,
        /// Detail for people.
        detail: String,
    },
    /// Events may have been missed: read the store again.
    Resync,
}

type Waiters = HashMap<String, Vec<(u64, mpsc::UnboundedSender<Signal>)>>;

/// The waiting callers of one replica, by request id.
#[derive(Debug, Default)]
pub struct Answers {
    waiters: Arc<Mutex<Waiters>>,
    next: AtomicU64,
    /// Set once the event task runs (started by the first watch).
    started: OnceLock<()>,
}

impl Answers {
    /// Starts telling the caller of request `id` (its stored id) what happens to it, from now
    /// on: watch before submitting, and no event of the request can be missed. Needs a Tokio
    /// runtime.
    pub fn watch(&self, store: &Arc<dyn Store>, id: &str) -> Watch {
        self.started.get_or_init(|| {
            // Subscribed here, before this first watch is registered, so nothing is missed.
            let events = store.subscribe();
            tokio::spawn(dispatch(events, Arc::downgrade(&self.waiters)));
        });
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.waiters)
            .entry(id.to_string())
            .or_default()
            .push((key, tx));
        Watch {
            id: id.to_string(),
            key,
            rx,
            waiters: Arc::downgrade(&self.waiters),
        }
    }
}

fn lock(w: &Mutex<Waiters>) -> std::sync::MutexGuard<'_, Waiters> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

/// Forwards each event to the callers it concerns, until the event stream ends (then every
/// watch ends too, and its caller polls).
async fn dispatch(
    mut events: tokio::sync::broadcast::Receiver<Event>,
    waiters: std::sync::Weak<Mutex<Waiters>>,
) {
    while let Some(event) = next_event(&mut events).await {
        let Some(waiters) = waiters.upgrade() else {
            return;
        };
        let waiters = lock(&waiters);
        let tell = |id: &str, signal: Signal| {
            for (_, tx) in waiters.get(id).into_iter().flatten() {
                let _ = tx.send(signal.clone());
            }
        };
        match event {
            Event::RequestDone { id } => tell(&id, Signal::Done),
            Event::Progress { id, stage, detail } => tell(&id, Signal::Progress { stage, detail }),
            Event::Resync => {
                for (_, tx) in waiters.values().flatten() {
                    let _ = tx.send(Signal::Resync);
                }
            }
            _ => {}
        }
    }
    if let Some(waiters) = waiters.upgrade() {
        lock(&waiters).clear();
    }
}

/// One caller's view of its request; leaves the table when dropped.
#[derive(Debug)]
pub struct Watch {
    id: String,
    key: u64,
    rx: mpsc::UnboundedReceiver<Signal>,
    waiters: std::sync::Weak<Mutex<Waiters>>,
}

impl Watch {
    /// The next signal; `None` once the replica's event stream ended (poll from then on).
    pub async fn next(&mut self) -> Option<Signal> {
        self.rx.recv().await
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(waiters) = self.waiters.upgrade() else {
            return;
        };
        let mut waiters = lock(&waiters);
        if let Some(list) = waiters.get_mut(&self.id) {
            list.retain(|(key, _)| *key != self.key);
            if list.is_empty() {
                waiters.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;

    #[tokio::test]
    async fn each_caller_hears_only_of_its_own_request_and_every_caller_of_a_resync() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
        let answers = Answers::default();
        let mut a = answers.watch(&store, "a");
        let mut a2 = answers.watch(&store, "a");
        let mut b = answers.watch(&store, "b");
        let progress = Event::Progress {
            id: "a".into(),
            stage: "apply".into(),
            detail: "1 of 2".into(),
        };
        store.publish(&progress).await.unwrap();
        store
            .publish(&Event::RequestDone { id: "a".into() })
            .await
            .unwrap();
        store.publish(&Event::Resync).await.unwrap();
        for w in [&mut a, &mut a2] {
            assert_eq!(
                w.next().await,
                Some(Signal::Progress {
                    stage: "apply".into(),
                    detail: "1 of 2".into()
                })
            );
            assert_eq!(w.next().await, Some(Signal::Done));
            assert_eq!(w.next().await, Some(Signal::Resync));
        }
        assert_eq!(
            b.next().await,
            Some(Signal::Resync),
            "nothing of a reaches b"
        );
        drop(a);
        drop(a2);
        assert!(
            !lock(&answers.waiters).contains_key("a"),
            "a dropped watch leaves"
        );
        assert!(lock(&answers.waiters).contains_key("b"));
    }
}
