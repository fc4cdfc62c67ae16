//! External providers: services registered through the agent's REST API and reached over
//! plain HTTP or HTTPS (system roots) with the instance contract
//! `PUT|GET|DELETE {endpoint}/v1/instances/{id}` and a health URL.

use async_trait::async_trait;
use harmony_agent_protocol::{InstanceState, InstanceStatus};
use harmony_http::reqwest::{self, Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::time::Duration;

use super::{Provider, ProviderError, check_label, status};

/// How long an instance call may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer body read from a provider.
const MAX_BODY: usize = 1024 * 1024;

/// The HTTP(S) client shared by every external provider (Harmony's one TLS set-up).
pub type HttpClient = reqwest::Client;

/// Builds the shared client: plain HTTP or HTTPS verified against the system roots. Each
/// call bounds itself (instance calls [`REQUEST_TIMEOUT`], health checks their own timeout).
pub fn http_client() -> Result<HttpClient, String> {
    harmony_http::ClientSettings::new()
        .connect_timeout(REQUEST_TIMEOUT)
        .read_timeout(Some(REQUEST_TIMEOUT))
        .user_agent(concat!("harmony-agent/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("HTTP client for external providers: {e}"))
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
#[derive(derive_new::new)]
pub struct ExternalProvider {
    /// Its registration, already validated.
    registration: Registration,
    /// The client every call to the provider goes through.
    http: HttpClient,
}

impl ExternalProvider {
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
    ) -> Result<(StatusCode, Vec<u8>), String> {
        let mut request = self
            .http
            .request(method, url)
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(timeout);
        if let Some(b) = body {
            request = request.json(&b);
        }
        let describe = |e: reqwest::Error| {
            if e.is_timeout() {
                format!("no answer within {} ms", timeout.as_millis())
            } else {
                harmony_http::describe(&e)
            }
        };
        let mut response = request
            .send()
            .await
            .map_err(|e| format!("no answer: {}", describe(e)))?;
        let status = response.status();
        // Read at most MAX_BODY: a provider is trusted to answer, not to answer small.
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading the answer: {}", describe(e)))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(format!(
                    "reading the answer: the body exceeds {MAX_BODY} bytes; answer with a small JSON object"
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    }

    /// One instance call (10 s at most); a transport failure names the provider and the URL.
    async fn instance_call(
        &self,
        method: Method,
        url: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Vec<u8>), ProviderError> {
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

    /// A plain-HTTP provider on loopback answering `(status, body)` per request (after
    /// `delay`), recording `METHOD path body`.
    async fn provider(
        answer: impl Fn(&str) -> (u16, String) + Send + Sync + 'static,
        delay: Duration,
    ) -> (
        ExternalProvider,
        std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    ) {
        use http_body_util::{BodyExt, Full};
        use hyper::body::Bytes;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, answer) = (seen.clone(), std::sync::Arc::new(answer));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (log, answer) = (log.clone(), answer.clone());
                let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let (log, answer) = (log.clone(), answer.clone());
                    async move {
                        let line = format!("{} {}", req.method(), req.uri().path());
                        let body: hyper::body::Incoming = req.into_body();
                        let body = body.collect().await.unwrap().to_bytes();
                        log.lock()
                            .unwrap()
                            .push(format!("{line} {}", String::from_utf8_lossy(&body)));
                        tokio::time::sleep(delay).await;
                        let (status, text) = answer(&line);
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder()
                                .status(status)
                                .body(Full::new(Bytes::from(text)))
                                .unwrap(),
                        )
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
                );
            }
        });
        let registration = Registration {
            name: "q1".into(),
            service_types: vec!["queue".into()],
            endpoint: base.clone(),
            health_url: format!("{base}/healthz"),
        };
        (
            ExternalProvider::new(registration, http_client().unwrap()),
            seen,
        )
    }

    #[tokio::test]
    async fn the_instance_contract_runs_over_real_http() {
        let (p, seen) = provider(
            |line| match line {
                "PUT /v1/instances/a1" => {
                    (201, r#"{"state":"provisioning","detail":"soon"}"#.into())
                }
                "GET /v1/instances/a1" => (
                    200,
                    r#"{"state":"ready","outputs":{"url":"amqp://q"}}"#.into(),
                ),
                "DELETE /v1/instances/a1" => (204, String::new()),
                "GET /healthz" => (200, "ok".into()),
                _ => (404, String::new()),
            },
            Duration::ZERO,
        )
        .await;
        let created = p.create("a1", "queue", &json!({"size": 1})).await.unwrap();
        assert_eq!(created.state, InstanceState::Provisioning);
        let status = p.status("a1", "queue", &Value::Null).await.unwrap();
        assert_eq!(status.state, InstanceState::Ready);
        assert_eq!(status.outputs["url"], "amqp://q");
        let deleted = p.delete("a1", "queue", &Value::Null).await.unwrap();
        assert_eq!(deleted.state, InstanceState::Deleted);
        assert!(p.check_health(Duration::from_secs(2)).await.is_ok());
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen[0],
            r#"PUT /v1/instances/a1 {"instance_id":"a1","service_type":"queue","spec":{"size":1}}"#
        );
    }

    #[tokio::test]
    async fn refusals_oversized_answers_and_silence_are_named() {
        let (p, _) = provider(
            |line| match line {
                "PUT /v1/instances/big" => (200, "x".repeat(MAX_BODY + 1)),
                _ => (409, r#"{"error":"quota exhausted"}"#.into()),
            },
            Duration::ZERO,
        )
        .await;
        let e = p
            .create("a1", "queue", &json!({}))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("answered 409 Conflict: quota exhausted"), "{e}");
        let e = p
            .create("big", "queue", &json!({}))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("exceeds 1048576 bytes"), "{e}");
        let (slow, _) = provider(|_| (200, "ok".into()), Duration::from_secs(5)).await;
        let e = slow
            .check_health(Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(e.contains("no answer within 200 ms"), "{e}");
    }

    #[test]
    fn urls_in_messages_drop_the_query() {
        assert_eq!(
            display_url("http://h:1/v1/instances/a?token=s3cret#x"),
            "http://h:1/v1/instances/a"
        );
    }
}
