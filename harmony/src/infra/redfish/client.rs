//! Redfish over HTTP for one host's BMC: JSON GET, PATCH (with `If-Match` when the BMC gives
//! an ETag) and action POSTs, with basic authentication, and errors that name the host and the
//! BMC (never the credentials).

use harmony_http::reqwest::{self, Method, StatusCode};
use serde_json::Value;
use std::time::Duration;

use super::credentials::{self, Credentials};
use crate::domain::capability::{CapabilityError, HostBmc};

/// One host's BMC session: where it is, who the host is, how to log in.
pub(super) struct Bmc<'a> {
    http: &'a reqwest::Client,
    host: &'a HostBmc,
    credentials: Credentials,
    timeout: Duration,
}

/// A resource read from the BMC, with its ETag when it gave one.
pub(super) struct Resource {
    pub(super) body: Value,
    pub(super) etag: Option<String>,
}

impl<'a> Bmc<'a> {
    /// Reads the host's credentials from their source and opens a session.
    pub(super) fn open(
        http: &'a reqwest::Client,
        host: &'a HostBmc,
        timeout: Duration,
    ) -> Result<Self, CapabilityError> {
        let credentials = credentials::read(&host.credentials).map_err(|message| {
            CapabilityError::Credentials {
                object: object(host),
                server: server(host),
                message: format!("cannot read the BMC credentials: {message}"),
            }
        })?;
        Ok(Self {
            http,
            host,
            credentials,
            timeout,
        })
    }

    /// The host, for messages: `host 52:54:00:00:00:21`.
    pub(super) fn object(&self) -> String {
        object(self.host)
    }

    /// The BMC, for messages: `BMC redfish://10.0.0.5/redfish/v1/Systems/1`.
    pub(super) fn server(&self) -> String {
        server(self.host)
    }

    /// `GET path` (a path on the BMC: `/redfish/v1/Systems`).
    pub(super) async fn get(&self, path: &str) -> Result<Resource, CapabilityError> {
        self.send(Method::GET, path, None, None).await
    }

    /// `PATCH path` with `body`, sending `If-Match: etag` when there is one.
    pub(super) async fn patch(
        &self,
        path: &str,
        body: Value,
        etag: Option<&str>,
    ) -> Result<Resource, CapabilityError> {
        self.send(Method::PATCH, path, Some(body), etag).await
    }

    /// `POST path` with `body` (an action).
    pub(super) async fn post(&self, path: &str, body: Value) -> Result<Resource, CapabilityError> {
        self.send(Method::POST, path, Some(body), None).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        etag: Option<&str>,
    ) -> Result<Resource, CapabilityError> {
        if !path.starts_with("/redfish/") {
            return Err(self.rejected(
                &method,
                path,
                "the BMC pointed outside /redfish/ (refused: credentials go to the BMC's Redfish service only)".into(),
            ));
        }
        let url = format!("{}{path}", self.host.address.http_root());
        let mut request = self
            .http
            .request(method.clone(), &url)
            .basic_auth(&self.credentials.user, Some(&self.credentials.password))
            .header("Accept", "application/json")
            .header("OData-Version", "4.0")
            .timeout(self.timeout);
        if let Some(tag) = etag {
            request = request.header("If-Match", tag);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = answer.status();
        let etag = answer
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = answer.bytes().await.map_err(|e| self.unreachable(&e))?;
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        if status.is_success() {
            let etag = etag.or_else(|| {
                body.get("@odata.etag")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            return Ok(Resource { body, etag });
        }
        let said = redfish_message(&body).unwrap_or_else(|| {
            status
                .canonical_reason()
                .unwrap_or("no reason given")
                .to_string()
        });
        Err(match status {
            StatusCode::UNAUTHORIZED => CapabilityError::Credentials {
                object: self.object(),
                server: self.server(),
                message: format!(
                    "401 Unauthorized: the BMC refused the user {:?} from {} ({said}); check the user and password that {} holds",
                    self.credentials.user, self.host.credentials, self.host.credentials
                ),
            },
            StatusCode::FORBIDDEN => CapabilityError::Credentials {
                object: self.object(),
                server: self.server(),
                message: format!(
                    "403 Forbidden: {method} {path}: the user {:?} may not ({said}); give it a BMC role that may power the host and set its boot (Operator or Administrator on most BMCs)",
                    self.credentials.user
                ),
            },
            StatusCode::NOT_FOUND => CapabilityError::NotFound {
                object: self.object(),
                server: self.server(),
                message: format!(
                    "{method} {path}: 404 ({said}); check the system in the BMC address"
                ),
            },
            _ => self.rejected(&method, path, format!("{} ({said})", status.as_u16())),
        })
    }

    fn rejected(&self, method: &Method, path: &str, message: String) -> CapabilityError {
        CapabilityError::Rejected {
            object: self.object(),
            server: self.server(),
            message: format!("{method} {path}: {message}"),
        }
    }

    fn unreachable(&self, e: &reqwest::Error) -> CapabilityError {
        let reason = if e.is_timeout() {
            format!(
                "no answer within {} s (is the BMC's address right and its network reachable?)",
                self.timeout.as_secs()
            )
        } else {
            harmony_http::describe(e)
        };
        CapabilityError::Unreachable {
            server: format!("{} of {}", self.server(), self.object()),
            reason,
        }
    }
}

fn object(host: &HostBmc) -> String {
    format!("host {}", host.mac)
}

fn server(host: &HostBmc) -> String {
    format!("BMC {}", host.address)
}

/// The message of a Redfish error body (`error.@Message.ExtendedInfo[0].Message`, else
/// `error.message`), bounded.
fn redfish_message(body: &Value) -> Option<String> {
    let error = body.get("error")?;
    let text = error
        .pointer("/@Message.ExtendedInfo/0/Message")
        .or_else(|| error.get("message"))
        .and_then(Value::as_str)?;
    Some(text.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_redfish_message_is_read_from_either_place() {
        let extended = json!({"error": {"code": "Base.1.8.GeneralError", "message": "general",
            "@Message.ExtendedInfo": [{"Message": "The property Foo is unknown."}]}});
        assert_eq!(
            redfish_message(&extended).as_deref(),
            Some("The property Foo is unknown.")
        );
        let plain = json!({"error": {"message": "Action not allowed"}});
        assert_eq!(
            redfish_message(&plain).as_deref(),
            Some("Action not allowed")
        );
        assert_eq!(redfish_message(&json!({"x": 1})), None);
    }
}
