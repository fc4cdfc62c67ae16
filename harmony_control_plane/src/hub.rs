//! This replica's live agent connections, and the heartbeats they received that are not yet in
//! the store.
//!
//! The hub only routes: it never calls the store. Who holds a region's connection *durably* is
//! the session row in the store; the hub is how this replica reaches the connections it holds
//! (to deliver requests, or close them on revocation or replacement).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, mpsc};

use crate::store::Heartbeat;

/// A command for a connection's task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Close the connection with this WebSocket close code and reason.
    Close(u16, String),
}

/// What a connection's task listens to: commands, and delivery wake-ups (coalesced: many
/// wake-ups before the task looks count once, since the task re-reads the store each time).
#[derive(Debug)]
pub struct Inbox {
    /// Close and other commands.
    pub commands: mpsc::UnboundedReceiver<Command>,
    /// Signalled when the region may have requests to deliver.
    pub deliver: Arc<Notify>,
}

/// A connection id reserved before the connection is recorded anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserved {
    /// The id.
    pub id: String,
    /// Its order on this replica: a later connection of a region wins over an earlier one.
    pub seq: u64,
}

struct Connection {
    id: String,
    seq: u64,
    commands: mpsc::UnboundedSender<Command>,
    deliver: Arc<Notify>,
}

/// The live connections of this replica, one per region.
pub struct Hub {
    replica: String,
    next: AtomicU64,
    connections: Mutex<HashMap<String, Connection>>,
    /// The latest unflushed heartbeat of each region (a newer beat replaces an older one).
    beats: Mutex<HashMap<String, Heartbeat>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind, still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hub {
    /// An empty hub for replica `replica` (connection ids start with it).
    pub fn new(replica: &str) -> Self {
        Self {
            replica: replica.to_string(),
            next: AtomicU64::new(0),
            connections: Mutex::new(HashMap::new()),
            beats: Mutex::new(HashMap::new()),
        }
    }

    /// The replica id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// A new connection id, unique across replicas and restarts, and its order on this replica.
    pub fn reserve(&self) -> Reserved {
        let seq = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        Reserved {
            id: format!("{}-{}-{seq}", self.replica, crate::store::now_ms()),
            seq,
        }
    }

    /// Registers a welcomed connection of `region`, closing the one this replica held before
    /// (`replaced` is its close code and reason). `None` when this replica already holds a
    /// connection of the region reserved later: the new one is stale.
    pub fn connect(&self, region: &str, conn: &Reserved, replaced: (u16, &str)) -> Option<Inbox> {
        let (tx, rx) = mpsc::unbounded_channel();
        let deliver = Arc::new(Notify::new());
        let mut connections = lock(&self.connections);
        if connections.get(region).is_some_and(|c| c.seq > conn.seq) {
            return None;
        }
        let old = connections.insert(
            region.to_string(),
            Connection {
                id: conn.id.clone(),
                seq: conn.seq,
                commands: tx,
                deliver: deliver.clone(),
            },
        );
        if let Some(old) = old {
            let _ = old
                .commands
                .send(Command::Close(replaced.0, replaced.1.to_string()));
        }
        Some(Inbox {
            commands: rx,
            deliver,
        })
    }

    /// Forgets connection `conn` of `region` if it is still the current one; `true` if it was.
    pub fn disconnect(&self, region: &str, conn: &str) -> bool {
        let mut connections = lock(&self.connections);
        if connections.get(region).is_some_and(|c| c.id == conn) {
            connections.remove(region);
            true
        } else {
            false
        }
    }

    /// The connection id this replica holds for `region`, if any.
    pub fn holds(&self, region: &str) -> Option<String> {
        lock(&self.connections).get(region).map(|c| c.id.clone())
    }

    /// The regions this replica holds a connection of.
    pub fn regions(&self) -> Vec<String> {
        lock(&self.connections).keys().cloned().collect()
    }

    /// How many connections this replica holds.
    pub fn connected(&self) -> usize {
        lock(&self.connections).len()
    }

    /// Wakes `region`'s connection to deliver what is queued; `false` when not held here.
    pub fn nudge(&self, region: &str) -> bool {
        match lock(&self.connections).get(region) {
            Some(c) => {
                c.deliver.notify_one();
                true
            }
            None => false,
        }
    }

    /// Closes `region`'s connection (only if its id is `conn`, when given); `false` when this
    /// replica holds no such connection.
    pub fn close(&self, region: &str, conn: Option<&str>, code: u16, reason: &str) -> bool {
        let connections = lock(&self.connections);
        match connections.get(region) {
            Some(c) if conn.is_none_or(|id| id == c.id) => c
                .commands
                .send(Command::Close(code, reason.to_string()))
                .is_ok(),
            _ => false,
        }
    }

    /// Buffers a heartbeat until the next flush; a newer beat of the region replaces it, but a
    /// status it carried is kept when the newer one carries none.
    pub fn heartbeat(&self, beat: Heartbeat) {
        let mut beats = lock(&self.beats);
        match beats.get_mut(&beat.region) {
            Some(old) if old.conn == beat.conn => {
                old.at = old.at.max(beat.at);
                if beat.status_json.is_some() {
                    old.status_json = beat.status_json;
                }
            }
            _ => {
                beats.insert(beat.region.clone(), beat);
            }
        }
    }

    /// Takes every buffered heartbeat (for one batched store write).
    pub fn take_heartbeats(&self) -> Vec<Heartbeat> {
        lock(&self.beats).drain().map(|(_, b)| b).collect()
    }

    /// Takes the buffered heartbeat of `region`'s connection `conn`, if any (written before the
    /// session is closed, so the last heartbeat time is exact).
    pub fn take_heartbeat(&self, region: &str, conn: &str) -> Option<Heartbeat> {
        let mut beats = lock(&self.beats);
        if beats.get(region).is_some_and(|b| b.conn == conn) {
            beats.remove(region)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(region: &str, conn: &str, at: i64, status: Option<&str>) -> Heartbeat {
        Heartbeat {
            region: region.into(),
            conn: conn.into(),
            at,
            status_json: status.map(str::to_string),
        }
    }

    #[test]
    fn a_new_connection_replaces_and_closes_the_old_one_and_only_the_current_disconnects() {
        let hub = Hub::new("r1");
        let (first, second) = (hub.reserve(), hub.reserve());
        assert!(first.id.starts_with("r1-"));
        assert_ne!(first.id, second.id);
        let mut first_inbox = hub.connect("eu", &first, (4008, "replaced")).unwrap();
        let _inbox = hub.connect("eu", &second, (4008, "replaced")).unwrap();
        assert_eq!(
            first_inbox.commands.try_recv(),
            Ok(Command::Close(4008, "replaced".into()))
        );
        // The earlier connection registering late does not replace the later one.
        assert!(hub.connect("eu", &first, (4008, "replaced")).is_none());
        let (first, second) = (first.id, second.id);
        // The old connection's end does not forget the new one.
        assert!(!hub.disconnect("eu", &first));
        assert_eq!(hub.holds("eu"), Some(second.clone()));
        // A close aimed at another connection id is not for this one.
        assert!(!hub.close("eu", Some(&first), 4004, "revoked"));
        assert!(hub.close("eu", None, 4004, "revoked"));
        assert!(hub.nudge("eu") && !hub.nudge("us"));
        assert!(hub.disconnect("eu", &second));
        assert_eq!(hub.connected(), 0);
    }

    #[test]
    fn heartbeats_are_coalesced_per_region_until_flushed() {
        let hub = Hub::new("r1");
        hub.heartbeat(beat("eu", "c1", 10, Some("{\"k8s_reachable\":true}")));
        hub.heartbeat(beat("eu", "c1", 20, None));
        hub.heartbeat(beat("us", "c2", 15, None));
        let mut beats = hub.take_heartbeats();
        beats.sort_by(|a, b| a.region.cmp(&b.region));
        assert_eq!(
            beats,
            vec![
                beat("eu", "c1", 20, Some("{\"k8s_reachable\":true}")),
                beat("us", "c2", 15, None)
            ]
        );
        assert!(hub.take_heartbeats().is_empty());
        hub.heartbeat(beat("eu", "c1", 30, None));
        // A new connection's beat replaces the old connection's.
        hub.heartbeat(beat("eu", "c3", 31, None));
        assert_eq!(hub.take_heartbeat("eu", "c1"), None);
        assert_eq!(
            hub.take_heartbeat("eu", "c3"),
            Some(beat("eu", "c3", 31, None))
        );
    }
}
