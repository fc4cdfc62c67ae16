use kube::Error;
use kube::config::{KubeconfigError, LoadDataError};
use kube::core::Status;
use std::error::Error as _;

use crate::domain::capability::{CapabilityError, ObjectRef};

/// A kube-rs error in the user's words: for an API server refusal its reason, code, message and
/// the fields it names; otherwise the chain of causes (`client error (Connect): tcp connect
/// error: Connection refused`), without kube-rs's variant names or Rust debug formatting.
///
/// kube-rs's own `Display` of an API error appends the whole `Status` struct in debug form
/// (`ApiError: ... (Status { status: Some(Failure), ... })`), so no caller prints it directly.
///
/// Takes any error so kubeconfig and configuration errors (`KubeconfigError`,
/// `InferConfigError`) read the same way.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut level = Some(e);
    while let Some(err) = level {
        let (text, next) = own_text(err);
        if let Some(text) = text.filter(|t| !t.is_empty())
            && !parts.iter().any(|p| p.contains(&text))
        {
            parts.push(text);
        }
        level = next;
    }
    parts.join(": ")
}

/// An API server's `Status` as one line: `Invalid (422): <message>`, then any field the
/// server's causes name that the message does not already mention.
pub(crate) fn status_text(status: &Status) -> String {
    let message = if status.message.is_empty() {
        "the server gave no message"
    } else {
        status.message.as_str()
    };
    let mut text = match (status.reason.is_empty(), status.code) {
        (true, 0) => message.to_string(),
        (true, code) => format!("HTTP {code}: {message}"),
        (false, 0) => format!("{}: {message}", status.reason),
        (false, code) => format!("{} ({code}): {message}", status.reason),
    };
    let causes = status.details.iter().flat_map(|d| &d.causes);
    for cause in causes.filter(|c| !c.field.is_empty() && !message.contains(&c.field)) {
        text.push_str(&format!("; field {}: {}", cause.field, cause.message));
    }
    text
}

type Level<'a> = (
    Option<String>,
    Option<&'a (dyn std::error::Error + 'static)>,
);

/// One level's words and the level below it. Library wrappers repeat their source in their
/// own text (`HyperError: {0}`), so `describe` skips a level already contained in the text so
/// far. kube-rs's wrappers name their Rust variant
/// (`ServiceError: `) and print paths in debug form (`'"/x"'`): those levels say it plainly.
fn own_text<'a>(err: &'a (dyn std::error::Error + 'static)) -> Level<'a> {
    if let Some(k) = err.downcast_ref::<Error>() {
        return match k {
            Error::Api(status) => (Some(status_text(status)), None),
            // The variant name is kube-rs's, not the user's: its cause says what happened.
            Error::HyperError(_) | Error::Service(_) | Error::InferConfig(_) => (None, k.source()),
            Error::InferKubeconfig(_) => (None, k.source()),
            Error::Auth(_) => (Some("authentication failed".into()), k.source()),
            Error::RustlsTls(_) => (Some("TLS setup failed".into()), k.source()),
            Error::SerdeError(e) => (
                Some(format!("the server's answer does not parse: {e}")),
                None,
            ),
            other => (Some(lead(other)), other.source()),
        };
    }
    if let Some(k) = err.downcast_ref::<KubeconfigError>() {
        return match k {
            KubeconfigError::ReadConfig(io, path) => (
                Some(format!("cannot read kubeconfig {}: {io}", path.display())),
                None,
            ),
            // The parser's report quotes the offending line, which may hold a credential:
            // keep only its first line (the position and what was expected).
            KubeconfigError::Parse(e) => {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default();
                let first = first.strip_prefix("error: ").unwrap_or(first);
                (Some(format!("not a kubeconfig (YAML): {first}")), None)
            }
            other => (Some(lead(other)), other.source()),
        };
    }
    if let Some(LoadDataError::ReadFile(io, path)) = err.downcast_ref::<LoadDataError>() {
        return (
            Some(format!("cannot read file {}: {io}", path.display())),
            None,
        );
    }
    (Some(lead(err)), err.source())
}

/// A level's own words: its text without the source's text that wrappers append
/// (`failed to load client key: {0}`), since `describe` prints the source in its own words next.
fn lead(err: &(dyn std::error::Error + 'static)) -> String {
    let text = err.to_string();
    let Some(source) = err
        .source()
        .map(|s| s.to_string())
        .filter(|s| !s.is_empty())
    else {
        return text;
    };
    match text.strip_suffix(&source) {
        Some(own) => own.trim_end_matches([':', ' ']).to_string(),
        None => text,
    }
}

/// Maps a kube-rs error on `object` to a capability error naming the object and the server.
pub(super) fn map(object: &ObjectRef, server: &str, e: Error) -> CapabilityError {
    match e {
        Error::Api(status)
            if status.code == 409
                && status.reason == "Conflict"
                && status.message.contains("conflict") =>
        {
            CapabilityError::Conflict {
                object: object.to_string(),
                manager: conflicting_manager(&status.message)
                    .unwrap_or_else(|| "another field manager".into()),
                fields: conflicting_fields(&status.message),
            }
        }
        // A ResourceQuota's refusal is a 403 too, but the fix is another: free or raise quota.
        Error::Api(status) if status.code == 403 && super::quota::is_quota(&status.message) => {
            let q = super::quota::parse(&status.message);
            CapabilityError::QuotaExceeded {
                object: object.to_string(),
                quota: match &object.namespace {
                    Some(ns) => format!("{ns}/{}", q.quota),
                    None => q.quota,
                },
                server: server.to_string(),
                resource: q.resource,
            }
        }
        // The API server's verdicts keep their kind, so callers (and the agent's error codes)
        // can tell "not allowed" and "does not exist" from "refused as written".
        Error::Api(status) if status.code == 403 => CapabilityError::Forbidden {
            object: object.to_string(),
            server: server.to_string(),
            message: status.message,
        },
        Error::Api(status) if status.code == 404 => CapabilityError::NotFound {
            object: object.to_string(),
            server: server.to_string(),
            message: status.message,
        },
        Error::Api(status) => CapabilityError::Rejected {
            object: object.to_string(),
            server: server.to_string(),
            message: status_text(&status),
        },
        other => CapabilityError::Unreachable {
            server: server.to_string(),
            reason: describe(&other),
        },
    }
}

/// The first quoted manager in `Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.a`.
fn conflicting_manager(message: &str) -> Option<String> {
    let rest = &message[message.find("with \"")? + 6..];
    Some(rest[..rest.find('"')?].to_string())
}

/// The field paths of the conflict message, comma-separated.
fn conflicting_fields(message: &str) -> String {
    let fields: Vec<&str> = message
        .split(['\n', ' '])
        .map(|t| t.trim_start_matches("- "))
        .filter(|t| t.starts_with('.'))
        .collect();
    if fields.is_empty() {
        "unknown fields".into()
    } else {
        fields.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> Error {
        Error::Api(
            kube::core::Status::failure(message, reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn api_errors_keep_their_kind() {
        let obj = ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        let e = |code, reason, message| map(&obj, "https://api:6443", api(code, reason, message));
        assert!(matches!(
            e(403, "Forbidden", "configmaps \"web\" is forbidden: User \"x\" cannot patch"),
            CapabilityError::Forbidden { ref message, .. } if message.contains("cannot patch")
        ));
        assert!(matches!(
            e(404, "NotFound", "namespaces \"shop\" not found"),
            CapabilityError::NotFound { ref message, .. } if message.contains("shop")
        ));
        assert!(matches!(
            e(409, "Conflict", "Apply failed with 1 conflict: conflict with \"kubectl\" using v1: .data.a"),
            CapabilityError::Conflict { ref manager, .. } if manager == "kubectl"
        ));
        assert!(matches!(
            e(409, "AlreadyExists", "configmaps \"web\" already exists"),
            CapabilityError::Rejected { .. }
        ));
        assert!(matches!(
            e(422, "Invalid", "spec.replicas: Invalid value"),
            CapabilityError::Rejected { .. }
        ));
        match e(
            403,
            "Forbidden",
            "configmaps \"web\" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2",
        ) {
            CapabilityError::QuotaExceeded {
                quota, resource, ..
            } => {
                assert_eq!(quota, "shop/q");
                assert_eq!(resource, "count/configmaps requested 1, used 2, limited 2");
            }
            other => panic!("a quota refusal is not {other:?}"),
        }
        let text = e(403, "Forbidden", "no").to_string();
        assert!(
            text.contains("forbidden by https://api:6443") && text.contains("Role or ClusterRole"),
            "{text}"
        );
    }

    /// What Rust's debug formatting of kube-rs's types leaves in a message.
    const DEBUG_MARKERS: [&str; 6] = [
        "Status {",
        "ErrorResponse {",
        "Api(",
        "Some(",
        "\\\"",
        "'\"",
    ];

    fn assert_plain(text: &str) {
        for marker in DEBUG_MARKERS {
            assert!(!text.contains(marker), "{marker} in {text}");
        }
    }

    #[test]
    fn an_api_refusal_reads_as_reason_code_message_and_fields() {
        let mut status = kube::core::Status::failure(
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "Invalid",
        )
        .with_code(422);
        status.details = Some(kube::core::response::StatusDetails {
            name: "web".into(),
            group: "apps".into(),
            kind: "Deployment".into(),
            uid: String::new(),
            causes: vec![
                kube::core::response::StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: -1".into(),
                    field: "spec.replicas".into(),
                },
                kube::core::response::StatusCause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "spec.template.spec.containers[0].image".into(),
                },
            ],
            retry_after_seconds: 0,
        });
        let e = Error::Api(status.boxed());
        // kube-rs's own Display carries the struct in debug form: the reason this module exists.
        assert!(e.to_string().contains("Status {"), "{e}");
        let text = describe(&e);
        assert_plain(&text);
        assert!(
            text.starts_with("Invalid (422): Deployment.apps \"web\" is invalid: spec.replicas"),
            "{text}"
        );
        // A field the message already names is not repeated; one it does not name is added.
        assert_eq!(text.matches("spec.replicas").count(), 1, "{text}");
        assert!(
            text.ends_with("; field spec.template.spec.containers[0].image: Required value"),
            "{text}"
        );

        let obj = ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        let rejected = map(&obj, "https://api:6443", e).to_string();
        assert_plain(&rejected);
        assert!(
            rejected.starts_with(
                "apps/v1 Deployment shop/web rejected by https://api:6443: Invalid (422): "
            ),
            "{rejected}"
        );
    }

    #[test]
    fn connection_and_kubeconfig_failures_read_as_their_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = Error::Service(Box::new(io));
        let text = describe(&e);
        assert_eq!(text, "Connection refused");

        let missing = KubeconfigError::ReadConfig(
            std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
            "/nowhere/kubeconfig".into(),
        );
        // kube-rs prints the path in debug form inside quotes: '"/nowhere/kubeconfig"'.
        assert!(missing.to_string().contains("'\""), "{missing}");
        let text = describe(&missing);
        assert_plain(&text);
        assert_eq!(
            text,
            "cannot read kubeconfig /nowhere/kubeconfig: No such file or directory"
        );

        let wrapped =
            Error::InferKubeconfig(KubeconfigError::LoadClientKey(LoadDataError::ReadFile(
                std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
                "/keys/client.key".into(),
            )));
        let text = describe(&wrapped);
        assert_plain(&text);
        assert!(text.contains("client key"), "{text}");
        assert!(
            text.ends_with("cannot read file /keys/client.key: No such file or directory"),
            "{text}"
        );
    }

    #[test]
    fn parses_conflicts() {
        let one = "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.a";
        assert_eq!(
            conflicting_manager(one).as_deref(),
            Some("kubectl-client-side-apply")
        );
        assert_eq!(conflicting_fields(one), ".data.a");
        let two = "Apply failed with 2 conflicts: conflicts with \"other\" using v1:\n- .data.a\n- .data.b";
        assert_eq!(conflicting_manager(two).as_deref(), Some("other"));
        assert_eq!(conflicting_fields(two), ".data.a, .data.b");
    }
}
