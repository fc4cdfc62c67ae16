//! This replica's live agent connections, and the heartbeats they received that are not yet in
//! the store.
//!
//! The hub only routes: it never calls the store. Who holds a zone's connection *durably* is
//! the session row in the store; the hub is how this replica reaches the connections it holds
//! (to deliver requests, or close them on revocation or replacement). Connections are keyed by
//! (region, zone): each zone of a region is its own cluster with its own agent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, oneshot};

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
    /// The one command a connection gets: close (the first close ends it, so one is enough).
    /// A oneshot, not an mpsc channel: an mpsc channel allocates a block of 32 slots up front,
    /// about 1.5 KiB per idle agent connection (measured with heaptrack, docs/benchmarks.md).
    /// Ends with an error when the hub forgets the connection without a command.
    pub commands: oneshot::Receiver<Command>,
    /// Signalled when the zone may have requests to deliver.
    pub deliver: Arc<Notify>,
}

/// A connection id reserved before the connection is recorded anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserved {
    /// The id.
    pub id: String,
    /// Its order on this replica: a later connection of a zone wins over an earlier one.
    pub seq: u64,
}

struct Connection {
    id: String,
    seq: u64,
    /// Taken by the first close.
    commands: Option<oneshot::Sender<Command>>,
    deliver: Arc<Notify>,
}

/// A (region, zone) pair: what one agent connection serves.
pub type ZoneKey = (String, String);

fn key(region: &str, zone: &str) -> ZoneKey {
    (region.to_string(), zone.to_string())
}

/// The live connections of this replica, one per (region, zone).
pub struct Hub {
    replica: String,
    next: AtomicU64,
    connections: Mutex<HashMap<ZoneKey, Connection>>,
    /// The latest unflushed heartbeat of each connection (a newer beat replaces an older one).
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

    /// Registers a welcomed connection of `region`/`zone`, closing the one this replica held
    /// before (`replaced` is its close code and reason). `None` when this replica already holds
    /// a connection of the zone reserved later: the new one is stale.
    pub fn connect(
        &self,
        region: &str,
        zone: &str,
        conn: &Reserved,
        replaced: (u16, &str),
    ) -> Option<Inbox> {
        let (tx, rx) = oneshot::channel();
        let deliver = Arc::new(Notify::new());
        let mut connections = lock(&self.connections);
        let k = key(region, zone);
        if connections.get(&k).is_some_and(|c| c.seq > conn.seq) {
            return None;
        }
        let old = connections.insert(
            k,
            Connection {
                id: conn.id.clone(),
                seq: conn.seq,
                commands: Some(tx),
                deliver: deliver.clone(),
            },
        );
        if let Some(tx) = old.and_then(|old| old.commands) {
            let _ = tx.send(Command::Close(replaced.0, replaced.1.to_string()));
        }
        Some(Inbox {
            commands: rx,
            deliver,
        })
    }

    /// Forgets connection `conn` of `region`/`zone` if it is still the current one; `true` if
    /// it was.
    pub fn disconnect(&self, region: &str, zone: &str, conn: &str) -> bool {
        let mut connections = lock(&self.connections);
        let k = key(region, zone);
        if connections.get(&k).is_some_and(|c| c.id == conn) {
            connections.remove(&k);
            true
        } else {
            false
        }
    }

    /// The connection id this replica holds for `region`/`zone`, if any.
    pub fn holds(&self, region: &str, zone: &str) -> Option<String> {
        lock(&self.connections)
            .get(&key(region, zone))
            .map(|c| c.id.clone())
    }

    /// The (region, zone) pairs this replica holds a connection of.
    pub fn zones(&self) -> Vec<ZoneKey> {
        lock(&self.connections).keys().cloned().collect()
    }

    /// How many connections this replica holds.
    pub fn connected(&self) -> usize {
        lock(&self.connections).len()
    }

    /// Wakes the connection of `region`'s zone `zone` (every zone of the region when `None`)
    /// to deliver what is queued; `false` when none is held here.
    pub fn nudge(&self, region: &str, zone: Option<&str>) -> bool {
        let mut any = false;
        for ((r, z), c) in lock(&self.connections).iter() {
            if r == region && zone.is_none_or(|zone| zone == z) {
                c.deliver.notify_one();
                any = true;
            }
        }
        any
    }

    /// Closes the connection of `region`'s zone `zone` (every zone when `None`), only if its id
    /// is `conn` when given; `false` when this replica holds no such connection.
    pub fn close(
        &self,
        region: &str,
        zone: Option<&str>,
        conn: Option<&str>,
        code: u16,
        reason: &str,
    ) -> bool {
        let mut connections = lock(&self.connections);
        let mut any = false;
        for ((r, z), c) in connections.iter_mut() {
            if r == region && zone.is_none_or(|zone| zone == z) && conn.is_none_or(|id| id == c.id)
            {
                // Already told to close: it is closing, which is what was asked.
                let closing = match c.commands.take() {
                    Some(tx) => tx.send(Command::Close(code, reason.to_string())).is_ok(),
                    None => true,
                };
                any |= closing;
            }
        }
        any
    }

    /// Buffers a heartbeat until the next flush; a newer beat of the same connection replaces
    /// it, but a status it carried is kept when the newer one carries none.
    pub fn heartbeat(&self, beat: Heartbeat) {
        let mut beats = lock(&self.beats);
        match beats.get_mut(&beat.conn) {
            Some(buffered) => {
                let older = std::mem::replace(buffered, beat);
                fold(buffered, older);
            }
            None => {
                beats.insert(beat.conn.clone(), beat);
            }
        }
    }

    /// Takes every buffered heartbeat (for one batched store write).
    pub fn take_heartbeats(&self) -> Vec<Heartbeat> {
        lock(&self.beats).drain().map(|(_, b)| b).collect()
    }

    /// Puts back heartbeats taken for a write the store could not make, under any that arrived
    /// since: those are newer, so their time and status win, and an older beat only adds the
    /// status (a first heartbeat's) that a newer one without status would have kept.
    pub fn requeue_heartbeats(&self, older: Vec<Heartbeat>) {
        let mut beats = lock(&self.beats);
        for beat in older {
            match beats.get_mut(&beat.conn) {
                Some(newer) => fold(newer, beat),
                None => {
                    beats.insert(beat.conn.clone(), beat);
                }
            }
        }
    }

    /// Takes the buffered heartbeat of connection `conn`, if any (written before the session is
    /// closed, so the last heartbeat time is exact).
    pub fn take_heartbeat(&self, conn: &str) -> Option<Heartbeat> {
        lock(&self.beats).remove(conn)
    }
}

/// Folds an `older` heartbeat of the same connection into `newer`: the later time, and the
/// newer status unless it carries none.
fn fold(newer: &mut Heartbeat, older: Heartbeat) {
    newer.at = newer.at.max(older.at);
    if newer.status_json.is_none() {
        newer.status_json = older.status_json;
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
        let mut first_inbox = hub.connect("eu", "a", &first, (4008, "replaced")).unwrap();
        let _inbox = hub.connect("eu", "a", &second, (4008, "replaced")).unwrap();
        assert_eq!(
            first_inbox.commands.try_recv(),
            Ok(Command::Close(4008, "replaced".into()))
        );
        // The earlier connection registering late does not replace the later one.
        assert!(hub.connect("eu", "a", &first, (4008, "replaced")).is_none());
        let (first, second) = (first.id, second.id);
        // The old connection's end does not forget the new one.
        assert!(!hub.disconnect("eu", "a", &first));
        assert_eq!(hub.holds("eu", "a"), Some(second.clone()));
        // A close aimed at another connection id is not for this one.
        assert!(!hub.close("eu", Some("a"), Some(&first), 4004, "revoked"));
        assert!(hub.close("eu", None, None, 4004, "revoked"));
        assert!(hub.nudge("eu", None) && !hub.nudge("us", None) && !hub.nudge("eu", Some("b")));
        assert!(hub.disconnect("eu", "a", &second));
        assert_eq!(hub.connected(), 0);
    }

    #[test]
    fn each_zone_of_a_region_has_its_own_connection() {
        let hub = Hub::new("r1");
        let (a, b) = (hub.reserve(), hub.reserve());
        let mut inbox_a = hub.connect("eu", "a", &a, (4008, "replaced")).unwrap();
        let mut inbox_b = hub.connect("eu", "b", &b, (4008, "replaced")).unwrap();
        // A second zone does not replace the first.
        assert!(inbox_a.commands.try_recv().is_err());
        assert_eq!(hub.holds("eu", "a"), Some(a.id.clone()));
        assert_eq!(hub.holds("eu", "b"), Some(b.id.clone()));
        // Closing one zone leaves the other; closing the region closes both.
        assert!(hub.close("eu", Some("b"), None, 4004, "zone decommissioned"));
        assert!(inbox_a.commands.try_recv().is_err());
        assert_eq!(
            inbox_b.commands.try_recv(),
            Ok(Command::Close(4004, "zone decommissioned".into()))
        );
        assert!(hub.close("eu", None, None, 4004, "revoked"));
        // The region's close reaches the zone still open; the one already closing is told once.
        assert!(inbox_a.commands.try_recv().is_ok() && inbox_b.commands.try_recv().is_err());
        let mut zones = hub.zones();
        zones.sort();
        assert_eq!(zones, vec![key("eu", "a"), key("eu", "b")]);
    }

    #[test]
    fn heartbeats_are_coalesced_per_connection_until_flushed() {
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
        // Another connection (a new one, or another zone's) has its own beat.
        hub.heartbeat(beat("eu", "c3", 31, None));
        assert_eq!(hub.take_heartbeat("c1"), Some(beat("eu", "c1", 30, None)));
        assert_eq!(hub.take_heartbeat("c3"), Some(beat("eu", "c3", 31, None)));
        assert_eq!(hub.take_heartbeat("c3"), None);
    }

    #[test]
    fn heartbeats_put_back_after_a_failed_write_yield_to_newer_ones() {
        let hub = Hub::new("r1");
        let first = "{\"k8s_reachable\":true}";
        hub.heartbeat(beat("eu", "c1", 10, Some(first)));
        hub.heartbeat(beat("us", "c2", 11, Some(first)));
        let taken = hub.take_heartbeats();
        // While the write failed: c1 beat again without a status, c2 with a newer one.
        hub.heartbeat(beat("eu", "c1", 20, None));
        hub.heartbeat(beat("us", "c2", 21, Some("{\"k8s_reachable\":false}")));
        hub.requeue_heartbeats(taken);
        let mut beats = hub.take_heartbeats();
        beats.sort_by(|a, b| a.region.cmp(&b.region));
        assert_eq!(
            beats,
            vec![
                beat("eu", "c1", 20, Some(first)),
                beat("us", "c2", 21, Some("{\"k8s_reachable\":false}"))
            ]
        );
        // Nothing arrived meanwhile: the beats come back as they were.
        hub.heartbeat(beat("eu", "c1", 30, None));
        let taken = hub.take_heartbeats();
        hub.requeue_heartbeats(taken);
        assert_eq!(hub.take_heartbeats(), vec![beat("eu", "c1", 30, None)]);
    }
}
