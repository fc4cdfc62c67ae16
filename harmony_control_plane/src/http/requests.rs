//! `POST /v1/regions/{region}/requests` (answered at once, or streamed as NDJSON) and
//! `GET /v1/requests/{id}`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use harmony_api::{NDJSON, RequestEvent, RequestStatus, SubmitRequest};
use serde::Deserialize;
use std::convert::Infallible;

use super::{AppState, Body, Caller, Failure};
use crate::services::regions::RegionError;
use crate::services::requests::{self, RequestError, Submission, Update};
use crate::services::scope::{self, Asked};

/// The query of a request submission.
#[derive(Debug, Default, Deserialize)]
pub struct SubmitQuery {
    /// `ndjson`: stream progress lines, then the result line.
    #[serde(default)]
    pub stream: Option<String>,
}

/// Whether the caller asked for a stream (`?stream=ndjson` or `Accept: application/x-ndjson`).
fn wants_stream(query: &SubmitQuery, headers: &HeaderMap) -> bool {
    query.stream.as_deref() == Some("ndjson")
        || headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().starts_with(NDJSON)))
}

/// One NDJSON line.
fn line(event: &RequestEvent) -> Bytes {
    let mut bytes = serde_json::to_vec(event).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// The line an update becomes, and whether more follow.
fn event_of(id: &str, update: Update) -> (RequestEvent, bool) {
    match update {
        Update::Progress { stage, detail } => (RequestEvent::progress(id, stage, detail), true),
        Update::Finished(Ok(res)) => (RequestEvent::result(res), false),
        Update::Finished(Err(e)) => {
            let f = Failure::from(e);
            (RequestEvent::error(id, f.0.as_u16(), f.1), false)
        }
    }
}

/// Submits a request and answers its `res` (200), or streams it. Refusals at submit are
/// answered with their status before anything is streamed: 400, 404, 409 `duplicate_id`,
/// 410, 413 `too_large`; no answer in time is 504 (or an `error` line). A request for a
/// project (required with a tenant token) is checked first: 400 no project, 403 an op or
/// object the token may not touch, 404 no such project, 422 no quota in the region.
pub async fn submit(
    State(s): State<AppState>,
    Path(region): Path<String>,
    Query(query): Query<SubmitQuery>,
    headers: HeaderMap,
    caller: Caller,
    Body(body): Body<SubmitRequest>,
) -> Result<Response, Failure> {
    let timeout_s = super::body::seconds(
        "timeout_s",
        body.timeout_s,
        0.001,
        super::body::MAX_WAIT_S,
        "omit it for the default wait, or ask for at most a day (the server caps it at its --max-request-wait-s)",
    )
    .map_err(super::body::bad_request)?;
    let wait = requests::wait_for(timeout_s, s.cp.settings.max_request_wait);
    // An unknown region is a 404 before anything about projects is said.
    match crate::services::regions::existing(&s.cp, &region).await {
        Ok(_) => {}
        Err(RegionError::Unknown(r)) => return Err(RequestError::UnknownRegion(r).into()),
        Err(e) => return Err(e.into()),
    }
    let asked = Asked {
        caller: caller.tenant(),
        tenant: body.tenant.as_deref(),
        project: body.project.as_deref(),
    };
    let scope = scope::request_scope(&s.cp, asked, &region, &body.op, &body.params)
        .await
        .map_err(RequestError::from)?;
    let sub = Submission {
        id: body.id,
        op: body.op,
        params: body.params,
        scope,
        zone: body.zone,
        by_admin: caller.is_admin(),
    };
    if !wants_stream(&query, &headers) {
        let res = requests::call(&s.cp, &region, sub, wait).await?;
        return Ok(Json(res).into_response());
    }
    let (accepted, rx) = requests::stream(s.cp.clone(), &region, sub, wait).await?;
    let id = accepted.shown;
    let lines = futures::stream::unfold(Some(rx), move |rx| {
        let id = id.clone();
        async move {
            let mut rx = rx?;
            let update = rx.recv().await?;
            let (event, more) = event_of(&id, update);
            Some((Ok::<_, Infallible>(line(&event)), more.then_some(rx)))
        }
    });
    let mut response = axum::body::Body::from_stream(lines).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    Ok(response)
}

/// `GET /v1/requests/{id}`: the request as stored, from any replica (for a tenant, only its
/// own: another tenant's is 404).
pub async fn status(
    State(s): State<AppState>,
    Path(id): Path<String>,
    caller: Caller,
) -> Result<Json<RequestStatus>, Failure> {
    Ok(Json(requests::status(&s.cp, &id, caller.tenant()).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_agent_protocol::{RawJson, Res};

    #[test]
    fn a_stream_is_asked_for_by_query_or_accept_header() {
        let mut headers = HeaderMap::new();
        let plain = SubmitQuery::default();
        assert!(!wants_stream(&plain, &headers));
        let query = SubmitQuery {
            stream: Some("ndjson".into()),
        };
        assert!(wants_stream(&query, &headers));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, application/x-ndjson"),
        );
        assert!(wants_stream(&plain, &headers));
    }

    #[test]
    fn updates_become_lines_and_the_last_one_says_so() {
        let (p, more) = event_of(
            "r1",
            Update::Progress {
                stage: "applying".into(),
                detail: "3/45".into(),
            },
        );
        assert!(more);
        assert_eq!(
            line(&p),
            Bytes::from_static(
                b"{\"type\":\"progress\",\"id\":\"r1\",\"stage\":\"applying\",\"detail\":\"3/45\"}\n"
            )
        );
        let res = Res::ok_raw("r1", RawJson::from_string("{\"n\":1e2}".into()).unwrap());
        let (r, more) = event_of("r1", Update::Finished(Ok(res)));
        assert!(!more);
        assert!(String::from_utf8_lossy(&line(&r)).contains("{\"n\":1e2}"));
        let (e, more) = event_of(
            "r1",
            Update::Finished(Err(RequestError::NotFound("r1".into()))),
        );
        assert!(!more);
        assert_eq!(e.status, Some(404));
    }
}
