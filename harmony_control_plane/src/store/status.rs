//! What the status page reads beyond regions and sessions: each zone's health transitions (its
//! state now and since when, with a bounded history), summaries of requests in flight and of
//! recent failures per zone, and the last few progress lines of each request. The
//! [`StatusStore`] half of the [`Store`](super::Store).
//!
//! A transition is written by a conditional statement ([`StatusStore::record_zone_state`]):
//! only when the health differs from the stored one and the new start is not older than the
//! stored start, so replicas observing the same change write it once, and an observation read
//! before a newer one never replaces it.

use async_trait::async_trait;
use harmony_api::Health;

use super::{RequestState, StoreError};

/// Transitions kept per zone in the history; older ones are deleted as new ones are written.
pub const HISTORY_PER_ZONE: i64 = 20;

/// Progress lines kept per request (the latest ones).
pub const PROGRESS_PER_REQUEST: u64 = 5;

/// The longest progress detail stored, in characters.
pub const MAX_PROGRESS_CHARS: usize = 300;

/// The longest failure text stored with a request (its error's code and message), in
/// characters.
pub const MAX_ERROR_CHARS: usize = 1000;

/// A zone's health from a moment on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneState {
    /// Region name.
    pub region: String,
    /// Zone name.
    pub zone: String,
    /// The health it changed to.
    pub health: Health,
    /// Why, as said when it changed.
    pub reason: String,
    /// When it changed (ms since the Unix epoch).
    pub since: i64,
}

/// A request as a list shows it: no params, no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSummary {
    /// Its stored id (tenant-qualified for a tenant's request).
    pub id: String,
    /// Its region.
    pub region: String,
    /// The zone it was placed in.
    pub zone: String,
    /// Its op.
    pub op: String,
    /// Its state.
    pub state: RequestState,
    /// The tenant it runs for (`None`: the admin's own).
    pub tenant: Option<String>,
    /// Submission time (ms).
    pub created_at: i64,
    /// Last delivery (ms).
    pub sent_at: Option<i64>,
    /// When it finished (ms).
    pub completed_at: Option<i64>,
    /// Its failure (`code: message`), when it failed.
    pub error: Option<String>,
    /// How many requests of its zone the list it comes from holds in all (the list itself
    /// keeps a few).
    pub zone_total: u64,
}

/// One progress line of a request, as its agent sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressLine {
    /// When it arrived (ms).
    pub at: i64,
    /// A short stage name.
    pub stage: String,
    /// Detail for people (at most [`MAX_PROGRESS_CHARS`]).
    pub detail: String,
}

/// Zone transitions, request lists and progress lines.
#[async_trait]
pub trait StatusStore: Send + Sync {
    /// Records `s` as its zone's state when the zone has none, or when the stored health
    /// differs and started no later than `s.since`; a recorded state is added to the zone's
    /// history (the last [`HISTORY_PER_ZONE`] kept). `Ok(false)` when nothing changed.
    async fn record_zone_state(&self, s: &ZoneState) -> Result<bool, StoreError>;
    /// Records each of `states` as [`Self::record_zone_state`] would, one after the other:
    /// whether each was recorded. PostgreSQL writes them in a few statements, not one each.
    async fn record_zone_states(&self, states: &[ZoneState]) -> Result<Vec<bool>, StoreError> {
        let mut recorded = Vec::with_capacity(states.len());
        for s in states {
            recorded.push(self.record_zone_state(s).await?);
        }
        Ok(recorded)
    }
    /// Every zone's state, by region and zone.
    async fn zone_states(&self) -> Result<Vec<ZoneState>, StoreError>;
    /// Takes the turn at `job` for `holder` until `now + lease_ms`, or renews it when `holder`
    /// has it: one replica at a time does work every replica could (the sweep), and another
    /// takes over once the holder's lease runs out. `Ok(false)` while another's lease runs.
    async fn take_turn(
        &self,
        job: &str,
        holder: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError>;
    /// The last `limit` transitions of a zone, newest first.
    async fn zone_history(
        &self,
        region: &str,
        zone: &str,
        limit: i64,
    ) -> Result<Vec<ZoneState>, StoreError>;
    /// The `per_zone` oldest unanswered requests of each zone (of `tenant` only, when given),
    /// by region, zone and submit order; each carries its zone's unanswered total.
    async fn unanswered_summaries(
        &self,
        tenant: Option<&str>,
        per_zone: i64,
    ) -> Result<Vec<RequestSummary>, StoreError>;
    /// The `per_zone` latest failed requests of each zone finished at or after `since` (of
    /// `tenant` only, when given), by region, zone and newest first.
    async fn recent_failures(
        &self,
        tenant: Option<&str>,
        since: i64,
        per_zone: i64,
    ) -> Result<Vec<RequestSummary>, StoreError>;
    /// Stores progress line number `n` of request `id`, in place of line `n` minus
    /// [`PROGRESS_PER_REQUEST`], only while the request is unanswered and placed in `region`'s
    /// zone `zone` (an agent writes only its own zone's requests). `Ok(false)` when not stored.
    async fn add_progress(
        &self,
        id: &str,
        region: &str,
        zone: &str,
        n: u64,
        line: &ProgressLine,
    ) -> Result<bool, StoreError>;
    /// The stored progress lines of request `id`, oldest first.
    async fn progress(&self, id: &str) -> Result<Vec<ProgressLine>, StoreError>;
}

/// The stored word of a health.
pub(crate) fn health_word(h: Health) -> &'static str {
    match h {
        Health::Healthy => "healthy",
        Health::Unhealthy => "unhealthy",
        Health::Unavailable => "unavailable",
    }
}

/// Parses a stored health word.
pub(crate) fn parse_health(word: &str) -> Option<Health> {
    [Health::Healthy, Health::Unhealthy, Health::Unavailable]
        .into_iter()
        .find(|h| health_word(*h) == word)
}

/// What a request's `res` frame (raw JSON) says went wrong: `code: message`, cut to
/// [`MAX_ERROR_CHARS`]; `None` when it succeeded or does not parse. Both adapters store it with
/// the result, in the same statement.
pub(crate) fn failure_of(res_json: &str) -> Option<String> {
    let res: harmony_agent_protocol::Res = serde_json::from_str(res_json).ok()?;
    if res.ok {
        return None;
    }
    let text = match res.error {
        Some(e) => format!("{}: {}", e.code, e.message),
        None => "failed without an error".to_string(),
    };
    Some(cut(&text, MAX_ERROR_CHARS))
}

/// `text` cut to at most `max` characters (an ellipsis marks a cut).
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => {
            let keep = text[..end]
                .char_indices()
                .nth(max.saturating_sub(1))
                .map_or(end, |(i, _)| i);
            format!("{}…", &text[..keep])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_its_code_and_message_and_a_success_none() {
        let failed =
            r#"{"id":"r1","ok":false,"error":{"code":"invalid_params","message":"no kind"}}"#;
        assert_eq!(
            failure_of(failed).as_deref(),
            Some("invalid_params: no kind")
        );
        assert_eq!(failure_of(r#"{"id":"r1","ok":true,"result":{}}"#), None);
        assert_eq!(failure_of("not json"), None);
        let long = format!(
            r#"{{"id":"r","ok":false,"error":{{"code":"internal","message":"{}"}}}}"#,
            "é".repeat(2000)
        );
        let text = failure_of(&long).unwrap();
        assert_eq!(text.chars().count(), MAX_ERROR_CHARS);
        assert!(text.ends_with('…'));
    }

    #[test]
    fn cutting_keeps_short_text_and_marks_a_cut() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut("", 0), "");
        for h in [Health::Healthy, Health::Unhealthy, Health::Unavailable] {
            assert_eq!(parse_health(health_word(h)), Some(h));
        }
        assert_eq!(parse_health("sick"), None);
    }
}
