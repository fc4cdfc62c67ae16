//! Faithful errors: an agent's error code, or the control plane's HTTP answer, becomes the
//! `CapabilityError` of the same kind, so a Score sees the same error through an agent as it
//! would against the cluster directly.

use harmony_agent_protocol::{ErrorBody, Op, code};
use std::time::Duration;

use super::client::ControlPlaneError;
use crate::domain::ObjectChange;
use crate::domain::capability::{CapabilityError, ObjectStatus, Readiness};

/// What a remote error is about, for its message.
pub(super) struct Origin<'a> {
    /// The op sent.
    pub op: Op,
    /// The object (`v1 ConfigMap shop/web`) or, for a batch, the op.
    pub object: &'a str,
    /// The object's kind and apiVersion when the op is about one object.
    pub kind: Option<(&'a str, &'a str)>,
    /// `region east (through its agent)`.
    pub server: &'a str,
    /// The time the request was given.
    pub budget: Duration,
}

/// The capability error of an agent's error body: one kind per code.
pub(super) fn from_agent(o: &Origin<'_>, e: ErrorBody) -> CapabilityError {
    let object = o.object.to_string();
    let server = o.server.to_string();
    let message = e.message;
    match e.code.as_str() {
        code::CONFLICT => {
            let (manager, fields) = conflict_parts(&message);
            CapabilityError::Conflict {
                object,
                manager: manager.unwrap_or_else(|| "another field manager".into()),
                fields: fields.unwrap_or(message),
            }
        }
        code::FORBIDDEN => CapabilityError::Forbidden {
            object,
            server,
            message,
        },
        code::QUOTA_EXCEEDED => {
            let (quota, resource) = quota_parts(&message);
            CapabilityError::QuotaExceeded {
                object,
                quota: quota.unwrap_or_else(|| "(unnamed)".into()),
                server,
                resource: resource.unwrap_or(message),
            }
        }
        code::NOT_FOUND => CapabilityError::NotFound {
            object,
            server,
            message,
        },
        code::INVALID_OBJECT | code::INVALID_PARAMS => CapabilityError::InvalidObject {
            object,
            problem: message,
        },
        code::REJECTED => CapabilityError::Rejected {
            object,
            server,
            message,
        },
        code::UNKNOWN_KIND => {
            let (kind, api_version) = unknown_kind_parts(&message)
                .or_else(|| o.kind.map(|(k, v)| (k.to_string(), v.to_string())))
                .unwrap_or_else(|| ("(unnamed)".into(), message.clone()));
            CapabilityError::UnknownKind {
                kind,
                api_version,
                server,
            }
        }
        code::UNREACHABLE => CapabilityError::Unreachable {
            server,
            reason: message,
        },
        code::TIMEOUT => CapabilityError::Timeout {
            waited_for: format!("{} to finish {}", o.server, o.op),
            after: o.budget,
            last_seen: message,
        },
        code::UNSUPPORTED | code::UNSUPPORTED_OP => CapabilityError::Unsupported {
            what: o.op.to_string(),
            backend: server,
            reason: message,
        },
        code::RESULT_TOO_LARGE => CapabilityError::TooLarge {
            what: format!("the result of {} from {}", o.op, o.server),
            limit: message,
            fix: "ask for fewer objects per call, or raise the agent's and the control plane's frame limits together".into(),
        },
        code::TOO_LARGE | code::FRAME_TOO_LARGE => CapabilityError::TooLarge {
            what: format!("request {} to {}", o.op, o.server),
            limit: message,
            fix: too_large_fix(),
        },
        other => CapabilityError::Rejected {
            object,
            server,
            message: format!("{message} (agent error code {other})"),
        },
    }
}

fn too_large_fix() -> String {
    "send fewer or smaller objects per request (split the Score), or raise the agent's --max-frame-bytes".into()
}

impl ControlPlaneError {
    /// The capability error this failure is, for a call about `object` to the control plane
    /// at `server`. A 504 is a gateway giving up (callers that long-poll a region map it to
    /// their own timeout first).
    pub fn into_capability(self, object: &str, server: &str) -> CapabilityError {
        let object = object.to_string();
        let server = server.to_string();
        match self {
            ControlPlaneError::Config { field, problem } => CapabilityError::InvalidObject {
                object: field.to_string(),
                problem,
            },
            ControlPlaneError::Unreachable { url, reason } => CapabilityError::Unreachable {
                server: url,
                reason,
            },
            ControlPlaneError::Timeout { what, after } => CapabilityError::Timeout {
                waited_for: what,
                after,
                last_seen: "no answer from the control plane".into(),
            },
            ControlPlaneError::Invalid { what, reason } => CapabilityError::Rejected {
                object,
                server,
                message: format!("{what}: unexpected answer: {reason}"),
            },
            ControlPlaneError::Status {
                status,
                error,
                what,
            } => {
                let is = |c: &str| error.code.as_deref() == Some(c);
                let message = error.error.clone();
                match status {
                    _ if status == 413 || is(code::TOO_LARGE) => CapabilityError::TooLarge {
                        what: format!("{object} ({what})"),
                        limit: match (error.limit_bytes, error.size_bytes) {
                            (Some(l), Some(s)) => {
                                format!("the limit is {l} bytes and it is {s} bytes")
                            }
                            (Some(l), None) => format!("the limit is {l} bytes"),
                            _ => message,
                        },
                        fix: too_large_fix(),
                    },
                    401 => CapabilityError::Forbidden {
                        object,
                        server,
                        message: format!(
                            "{message} (check the token: the admin token, or a tenant token that is neither revoked nor expired)"
                        ),
                    },
                    // The server names what this token may not do (a tenant token outside its
                    // project, or on an admin route).
                    403 => CapabilityError::Forbidden {
                        object,
                        server,
                        message,
                    },
                    404 => CapabilityError::NotFound {
                        object,
                        server,
                        message,
                    },
                    400 | 422 => CapabilityError::InvalidObject {
                        object,
                        problem: message,
                    },
                    502..=504 => CapabilityError::Unreachable {
                        server,
                        reason: format!("answered {status}: {message}"),
                    },
                    _ => CapabilityError::Rejected {
                        object,
                        server,
                        message: match error.code {
                            Some(c) => format!("{message} ({status}, {c})"),
                            None => format!("{message} ({status})"),
                        },
                    },
                }
            }
        }
    }
}

/// Manager and fields of an agent's conflict message, which is the direct adapter's
/// `…: fields owned by "kubectl" would change (.data.a, .data.b); re-run …`.
fn conflict_parts(message: &str) -> (Option<String>, Option<String>) {
    let manager = message
        .split_once("fields owned by \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(m, _)| m.to_string());
    let fields = message
        .split_once("would change (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(f, _)| f.to_string());
    (manager, fields)
}

/// Quota and resource of an agent's quota message, which is the direct adapter's
/// `…: exceeded ResourceQuota shop/q on https://…: count/configmaps requested 1, …; delete …`.
fn quota_parts(message: &str) -> (Option<String>, Option<String>) {
    let Some((_, rest)) = message.split_once("exceeded ResourceQuota ") else {
        return (None, None);
    };
    let (quota, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let resource = rest
        .split_once(": ")
        .map(|(_, r)| r.split_once("; delete ").map_or(r, |(r, _)| r).to_string());
    (Some(quota.to_string()), resource)
}

/// Kind and apiVersion of `… has no kind Route in route.openshift.io/v1; install …`.
fn unknown_kind_parts(message: &str) -> Option<(String, String)> {
    let (_, rest) = message.split_once(" has no kind ")?;
    let (kind, rest) = rest.split_once(" in ")?;
    let api_version = rest.split([';', ' ']).next()?;
    Some((kind.to_string(), api_version.to_string()))
}

/// The agent's `not_current` answer as the error a direct apply gives: every object whose
/// status is not current; a timeout unless one of them failed (the wait stops at a failure).
pub(super) fn not_current(applied: &[ObjectChange], timeout: Duration) -> CapabilityError {
    let objects: Vec<(String, ObjectStatus)> = applied
        .iter()
        .filter_map(|c| Some((c.object.clone(), c.status.clone()?.status)))
        .filter(|(_, s)| s.state != Readiness::Current)
        .collect();
    let failed = objects.iter().any(|(_, s)| s.state == Readiness::Failed);
    CapabilityError::NotCurrent {
        objects,
        timed_out: (!failed).then_some(timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_and_unknown_kind_messages_are_read_back() {
        let m = "apps/v1 Deployment a/b: fields owned by \"kubectl\" would change (.spec.replicas, .data.x); re-run with --force-conflicts";
        assert_eq!(
            conflict_parts(m),
            (
                Some("kubectl".into()),
                Some(".spec.replicas, .data.x".into())
            )
        );
        assert_eq!(conflict_parts("no structure"), (None, None));
        let u = "https://api:6443 has no kind Route in route.openshift.io/v1; install its CRD";
        assert_eq!(
            unknown_kind_parts(u),
            Some(("Route".into(), "route.openshift.io/v1".into()))
        );
        assert_eq!(unknown_kind_parts("nothing"), None);
    }

    #[test]
    fn quota_messages_are_read_back_into_a_quota_error() {
        let direct = CapabilityError::QuotaExceeded {
            object: "v1 ConfigMap acme-web/c3".into(),
            quota: "acme-web/harmony-project-quota".into(),
            server: "https://api:6443".into(),
            resource: "count/configmaps requested 1, used 2, limited 2".into(),
        };
        let body = ErrorBody::new(code::QUOTA_EXCEEDED, direct.to_string());
        let origin = Origin {
            op: Op::ApplyManifests,
            object: "v1 ConfigMap acme-web/c3",
            kind: None,
            server: "region east (through its agent)",
            budget: Duration::from_secs(1),
        };
        match from_agent(&origin, body) {
            CapabilityError::QuotaExceeded {
                quota, resource, ..
            } => {
                assert_eq!(quota, "acme-web/harmony-project-quota");
                assert_eq!(resource, "count/configmaps requested 1, used 2, limited 2");
            }
            other => panic!("not a quota error: {other}"),
        }
        assert_eq!(quota_parts("no structure"), (None, None));
    }
}
