//! The in-memory dedupe window: a cache in front of the request records kept in the cluster
//! ([`super::records`]). It answers a redelivery of a request this process finished without an
//! API call, and ignores a redelivery of one it is executing now.

use harmony_agent_protocol::Res;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

enum Seen {
    InFlight,
    Done(Res),
}

/// Remembers recent request ids and their results.
pub struct DedupeWindow {
    entries: HashMap<String, (Seen, Instant)>,
    order: VecDeque<String>,
    capacity: usize,
    ttl: Duration,
}

/// What to do with an incoming request.
#[derive(Debug)]
pub enum Admission {
    /// Not known to this process: look at the cluster's record, then execute or answer.
    Execute,
    /// Executing now: its result will be sent when done.
    InFlight,
    /// Done already: answer with this first result.
    Answer(Res),
}

impl DedupeWindow {
    /// A window of at most `capacity` ids kept at most `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            ttl,
        }
    }

    fn evict(&mut self) {
        let now = Instant::now();
        while let Some(front) = self.order.front() {
            let expired = self.entries.get(front).is_none_or(|(s, t)| {
                matches!(s, Seen::Done(_)) && now.duration_since(*t) > self.ttl
            });
            if expired || self.order.len() > self.capacity {
                if let Some(id) = self.order.pop_front() {
                    self.entries.remove(&id);
                }
            } else {
                break;
            }
        }
    }

    /// Admits request `id`.
    pub fn admit(&mut self, id: &str) -> Admission {
        self.evict();
        match self.entries.get(id) {
            Some((Seen::InFlight, _)) => Admission::InFlight,
            Some((Seen::Done(res), _)) => Admission::Answer(res.clone()),
            None => {
                self.entries
                    .insert(id.to_string(), (Seen::InFlight, Instant::now()));
                self.order.push_back(id.to_string());
                Admission::Execute
            }
        }
    }

    /// Records the result of `id`.
    pub fn finish(&mut self, res: &Res) {
        if let Some(entry) = self.entries.get_mut(&res.id) {
            *entry = (Seen::Done(res.clone()), Instant::now());
        }
    }

    /// Requests executing now.
    pub fn in_flight(&self) -> usize {
        self.entries
            .values()
            .filter(|(s, _)| matches!(s, Seen::InFlight))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dedupe_window_answers_redeliveries_with_the_first_result() {
        let mut w = DedupeWindow::new(2, Duration::from_secs(60));
        assert!(matches!(w.admit("a"), Admission::Execute));
        assert!(matches!(w.admit("a"), Admission::InFlight));
        assert_eq!(w.in_flight(), 1);
        w.finish(&Res::ok("a", serde_json::json!({"n": 1})));
        assert!(
            matches!(w.admit("a"), Admission::Answer(r) if r.result.as_ref().map(|r| r.get()) == Some(r#"{"n":1}"#))
        );
        // Capacity 2: the oldest finished id falls out.
        assert!(matches!(w.admit("b"), Admission::Execute));
        w.finish(&Res::ok("b", serde_json::Value::Null));
        assert!(matches!(w.admit("c"), Admission::Execute));
        assert!(matches!(w.admit("a"), Admission::Execute));
    }
}
