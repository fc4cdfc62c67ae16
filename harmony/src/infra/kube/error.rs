use kube::Error;

use crate::domain::capability::{CapabilityError, ObjectRef};

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
            message: format!("{} ({} {})", status.message, status.code, status.reason),
        },
        other => CapabilityError::Unreachable {
            server: server.to_string(),
            reason: other.to_string(),
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
