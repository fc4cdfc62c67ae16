//! The control plane's HTTP API as a hostile or careful caller sees it: a method, a path, an
//! optional bearer token and JSON body in; the status and the JSON body (or its text) out.
//! Suites that compare exact answers (the authorisation matrix, tenant isolation) use it
//! instead of `ControlPlaneClient`, which turns answers into typed results.

use harmony_http::reqwest::{self, Method};
use serde_json::Value;

/// A raw caller of one control plane.
pub struct RawApi {
    base: String,
    http: reqwest::Client,
}

impl RawApi {
    /// A caller of `base` (`https://127.0.0.1:PORT`) trusting the CA in `ca_pem`.
    pub fn new(base: &str, ca_pem: &[u8]) -> Self {
        Self {
            base: base.to_string(),
            http: harmony_http::ClientSettings::new()
                .ca_pem(Some(ca_pem))
                .build()
                .expect("an HTTP client"),
        }
    }

    /// One call: the status and the body as JSON (a JSON string when it is not JSON).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.json(b);
        }
        let response = r.send().await.unwrap_or_else(|e| panic!("{path}: {e:?}"));
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A call that must answer `expect`; its body.
    pub async fn must(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Value,
        expect: u16,
    ) -> Value {
        let body = (!body.is_null()).then_some(body);
        let (status, answer) = self.call(method, path, Some(token), body.as_ref()).await;
        assert_eq!(status, expect, "{path}: {answer}");
        answer
    }
}

/// An answer's status, `Retry-After` header and JSON body (`null` when it is not JSON).
pub async fn answer(r: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, retry_after, r.json().await.unwrap_or(Value::Null))
}
