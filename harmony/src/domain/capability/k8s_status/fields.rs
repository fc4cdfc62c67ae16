//! Reading status fields and building statuses: the helpers every kind's rules share.

use serde_json::Value;

use super::{MESSAGE_LIMIT, ObjectStatus, Readiness};

/// One entry of `status.conditions`, its fields read as text (empty when absent).
pub(super) struct Condition<'a> {
    pub(super) type_: &'a str,
    pub(super) status: &'a str,
    pub(super) reason: &'a str,
    pub(super) message: &'a str,
}

pub(super) fn conditions(object: &Value) -> impl Iterator<Item = Condition<'_>> {
    array_at(object, "/status/conditions")
        .iter()
        .map(|c| Condition {
            type_: str_at(c, "/type").unwrap_or(""),
            status: str_at(c, "/status").unwrap_or(""),
            reason: str_at(c, "/reason").unwrap_or(""),
            message: str_at(c, "/message").unwrap_or(""),
        })
}

pub(super) fn condition<'a>(object: &'a Value, type_: &str) -> Option<Condition<'a>> {
    conditions(object).find(|c| c.type_ == type_)
}

pub(super) fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

pub(super) fn int_at(value: &Value, pointer: &str) -> Option<i64> {
    value.pointer(pointer).and_then(Value::as_i64)
}

pub(super) fn int_or_zero(value: &Value, pointer: &str) -> i64 {
    int_at(value, pointer).unwrap_or(0)
}

pub(super) fn array_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

pub(super) fn is_set(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// `value` unless it is blank, then `fallback`.
pub(super) fn or<'a>(value: &'a str, fallback: &'a str) -> &'a str {
    if value.trim().is_empty() {
        fallback
    } else {
        value
    }
}

pub(super) fn current(reason: &str, message: impl Into<String>) -> ObjectStatus {
    ObjectStatus::new(Readiness::Current, reason, message)
}

pub(super) fn in_progress(reason: &str, message: impl Into<String>) -> ObjectStatus {
    ObjectStatus::new(Readiness::InProgress, reason, message)
}

pub(super) fn failed(reason: &str, message: impl Into<String>) -> ObjectStatus {
    ObjectStatus::new(Readiness::Failed, reason, message)
}

/// One line, at most [`MESSAGE_LIMIT`] characters, for the reason and the message alike.
pub(super) fn tidy(mut status: ObjectStatus) -> ObjectStatus {
    status.reason = one_line(&status.reason, 80);
    status.message = one_line(&status.message, MESSAGE_LIMIT);
    status
}

/// `text` with every run of whitespace (newlines included) made one space, cut to `limit`
/// characters with an ellipsis.
pub(super) fn one_line(text: &str, limit: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= limit {
        return flat;
    }
    let mut cut: String = flat.chars().take(limit.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}
