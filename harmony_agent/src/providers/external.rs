//! External providers: services registered through the agent's REST API and reached over
//! plain HTTP or HTTPS (system roots) with the instance contract
//! `PUT|GET|DELETE {endpoint}/v1/instances/{id}` and a health URL.

use async_trait::async_trait;
use harmony_agent_protocol::{InstanceState, InstanceStatus};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

use super::{Provider, ProviderError, check_label, status};

/// How long an instance call may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer body read from a provider.
const MAX_BODY: usize = 1024 * 1024;

/// The HTTP(S) client shared by every external provider.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Builds the shared client: plain HTTP or HTTPS verified against the system roots.
pub fn http_client() -> Result<HttpClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(c);
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS configuration for external providers: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// A provider registration as posted to `POST /v1/providers` and persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// The provider's name (a DNS-1123 label).
    pub name: String,
    /// The service types it serves.
    pub service_types: Vec<String>,
    /// Base URL of its instance API.
    pub endpoint: String,
    /// URL answering 2xx while it is healthy.
    pub health_url: String,
}

fn check_url(field: &str, value: &str) -> Result<url::Url, ProviderError> {
    let bad = |problem: String| ProviderError::InvalidParams {
        field: field.into(),
        problem,
    };
    let u = url::Url::parse(value).map_err(|e| {
        bad(format!(
            "{e}; give an absolute http:// or https:// URL such as \"http://127.0.0.1:9000\""
        ))
    })?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(bad(format!(
            "scheme {:?} is not supported; use http:// or https://",
            u.scheme()
        )));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(bad("has no host; give an http(s) URL with a host".into()));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad(
            "must not carry credentials; the agent sends none to providers".into(),
        ));
    }
    Ok(u)
}

impl Registration {
    /// Validates every field; the error names the field and the fix.
    pub fn validate(&self) -> Result<(), ProviderError> {
        check_label("name", &self.name)?;
        if self.service_types.is_empty() {
            return Err(ProviderError::InvalidParams {
                field: "service_types".into(),
                problem: "is empty; list at least one service type, e.g. [\"queue\"]".into(),
            });
        }
        for (i, t) in self.service_types.iter().enumerate() {
            check_label(&format!("service_types[{i}]"), t)?;
            if self.service_types[..i].contains(t) {
                return Err(ProviderError::InvalidParams {
                    field: format!("service_types[{i}]"),
                    problem: format!("{t:?} is listed twice; list each type once"),
                });
            }
        }
        check_url("endpoint", &self.endpoint)?;
        check_url("health_url", &self.health_url)?;
        Ok(())
    }
}

/// A URL for messages: no query string, no fragment.
pub fn display_url(u: &str) -> String {
    match url::Url::parse(u) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => u.split(['?', '#']).next().unwrap_or_default().to_string(),
    }
}

/// What an external provider answers about an instance.
#[derive(Debug, Deserialize)]
struct Answer {
    state: Option<String>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    outputs: Option<Map<String, Value>>,
}

/// A registered external provider.
pub struct ExternalProvider {
    registration: Registration,
    http: HttpClient,
}

impl ExternalProvider {
    /// The provider of a validated `registration`, calling through `http`.
    pub fn new(registration: Registration, http: HttpClient) -> Self {
        Self { registration, http }
    }

    /// Its registration.
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// One health check: any 2xx from the health URL within `timeout` succeeds.
    pub async fn check_health(&self, timeout: Duration) -> Result<(), String> {
        let url = &self.registration.health_url;
        let shown = display_url(url);
        match self.exchange(Method::GET, url, None, timeout).await {
            Ok((s, _)) if s.is_success() => Ok(()),
            Ok((s, _)) => Err(format!("health check {shown} answered {s}")),
            Err(e) => Err(format!("health check {shown}: {e}")),
        }
    }

    fn instance_url(&self, id: &str) -> String {
        let base = self.registration.endpoint.trim_end_matches('/');
        format!("{base}/v1/instances/{id}")
    }

    async fn exchange(
        &self,
        method: Method,
        url: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), String> {
        let mut builder = Request::builder().method(method).uri(url);
        let payload = match body {
            Some(b) => {
                builder = builder.header("content-type", "application/json");
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        builder = builder.header("accept", "application/json");
        let request = builder
            .body(Full::new(payload))
            .map_err(|e| format!("building the request: {e}"))?;
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| format!("no answer: {e}"))?;
            let status = response.status();
            let body = http_body_util::Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {} ms", timeout.as_millis()))?
    }

    /// One instance call (10 s at most); a transport failure names the provider and the URL.
    async fn instance_call(
        &self,
        method: Method,
        url: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Bytes), ProviderError> {
        self.exchange(method, url, body, REQUEST_TIMEOUT)
            .await
            .map_err(|e| self.error(url, e))
    }

    fn error(&self, url: &str, problem: String) -> ProviderError {
        ProviderError::External {
            provider: self.registration.name.clone(),
            url: display_url(url),
            problem,
        }
    }

    /// Reads a provider's answer; `default` is the state when the body says none.
    fn parse(
        &self,
        url: &str,
        id: &str,
        service_type: &str,
        status_code: StatusCode,
        body: &[u8],
        default: Option<InstanceState>,
    ) -> Result<InstanceStatus, ProviderError> {
        let unreadable = |why: String| {
            self.error(
                url,
                format!("answered {status_code} with an unreadable body: {why}; expected {{\"state\": \"ready\", \"detail\"?, \"outputs\"?}}"),
            )
        };
        let answer = if body.iter().all(u8::is_ascii_whitespace) {
            Answer {
                state: None,
                detail: None,
                outputs: None,
            }
        } else {
            serde_json::from_slice::<Answer>(body).map_err(|e| unreadable(e.to_string()))?
        };
        let state = match (answer.state, default) {
            (Some(word), _) => InstanceState::parse(&word).ok_or_else(|| {
                unreadable(format!(
                    "state {:?} is not one of queued, pending, provisioning, ready, failed, deleting, deleted",
                    word.chars().take(32).collect::<String>()
                ))
            })?,
            (None, Some(d)) => d,
            (None, None) => return Err(unreadable("no \"state\" field".into())),
        };
        Ok(status(
            id,
            service_type,
            &self.registration.name,
            state,
            answer.detail.unwrap_or_default(),
            answer.outputs.unwrap_or_default(),
        ))
    }

    fn refused(&self, url: &str, s: StatusCode, body: &[u8]) -> ProviderError {
        let said = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
            .map(|m| format!(": {}", m.chars().take(300).collect::<String>()))
            .unwrap_or_default();
        self.error(url, format!("answered {s}{said}"))
    }

    fn deleted(&self, id: &str, service_type: &str) -> InstanceStatus {
        status(
            id,
            service_type,
            &self.registration.name,
            InstanceState::Deleted,
            "",
            Map::new(),
        )
    }
}

#[async_trait]
impl Provider for ExternalProvider {
    fn name(&self) -> &str {
        &self.registration.name
    }

    fn service_types(&self) -> Vec<String> {
        self.registration.service_types.clone()
    }

    async fn create(
        &self,
        id: &str,
        service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        let url = self.instance_url(id);
        let body = json!({"instance_id": id, "service_type": service_type, "spec": spec});
        let (s, b) = self.instance_call(Method::PUT, &url, Some(body)).await?;
        if !s.is_success() {
            return Err(self.refused(&url, s, &b));
        }
        self.parse(&url, id, service_type, s, &b, None)
    }

    async fn delete(
        &self,
        id: &str,
        service_type: &str,
        _spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        let url = self.instance_url(id);
        let (s, b) = self.instance_call(Method::DELETE, &url, None).await?;
        match s {
            StatusCode::NOT_FOUND | StatusCode::NO_CONTENT => Ok(self.deleted(id, service_type)),
            s if s.is_success() => {
                self.parse(&url, id, service_type, s, &b, Some(InstanceState::Deleting))
            }
            s => Err(self.refused(&url, s, &b)),
        }
    }

    async fn status(
        &self,
        id: &str,
        service_type: &str,
        _spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        let url = self.instance_url(id);
        let (s, b) = self.instance_call(Method::GET, &url, None).await?;
        match s {
            StatusCode::NOT_FOUND => Ok(self.deleted(id, service_type)),
            StatusCode::OK => self.parse(&url, id, service_type, s, &b, None),
            s => Err(self.refused(&url, s, &b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg() -> Registration {
        Registration {
            name: "q1".into(),
            service_types: vec!["queue".into()],
            endpoint: "http://127.0.0.1:9000".into(),
            health_url: "https://127.0.0.1:9000/healthz".into(),
        }
    }

    #[test]
    fn registrations_are_validated_field_by_field() {
        assert!(reg().validate().is_ok());
        let e = |f: &dyn Fn(&mut Registration)| {
            let mut r = reg();
            f(&mut r);
            r.validate().unwrap_err().to_string()
        };
        assert!(e(&|r| r.name = "Q_1".into()).starts_with("name: "));
        assert!(e(&|r| r.service_types.clear()).starts_with("service_types: is empty"));
        assert!(
            e(&|r| r.service_types = vec!["queue".into(), "Bad".into()])
                .starts_with("service_types[1]: ")
        );
        assert!(
            e(&|r| r.service_types = vec!["queue".into(), "queue".into()]).contains("listed twice")
        );
        assert!(e(&|r| r.endpoint = "ftp://x".into()).starts_with("endpoint: scheme \"ftp\""));
        assert!(e(&|r| r.endpoint = "not a url".into()).starts_with("endpoint: "));
        assert!(
            e(&|r| r.health_url = "http://u:p@h/".into())
                .starts_with("health_url: must not carry credentials")
        );
    }

    #[test]
    fn urls_in_messages_drop_the_query() {
        assert_eq!(
            display_url("http://h:1/v1/instances/a?token=s3cret#x"),
            "http://h:1/v1/instances/a"
        );
    }
}
