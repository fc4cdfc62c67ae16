//! Reading a streamed request answer: NDJSON lines of `harmony_api::RequestEvent` (progress
//! lines, then one result or error line), or a plain JSON `Res` from a server that does not
//! stream.

use harmony_agent_protocol::Res;
use harmony_api::{RequestEvent, RequestEventKind};
use harmony_http::reqwest::{self, StatusCode, header};
use std::time::Duration;

use super::client::{ControlPlaneClient, ControlPlaneError};

/// Largest single line accepted: a result line carries one agent frame (4 MiB by default, up
/// to what an agent announces), so this only stops a runaway answer from exhausting memory.
pub(super) const MAX_LINE_BYTES: usize = 256 * 1024 * 1024;

/// Sends `request` and reads its answer, calling `on_progress` for each progress line.
pub(super) async fn read_answer<F>(
    client: &ControlPlaneClient,
    request: reqwest::RequestBuilder,
    what: &str,
    path: &str,
    total: Duration,
    mut on_progress: F,
) -> Result<Res, ControlPlaneError>
where
    F: FnMut(&RequestEvent) + Send,
{
    let fail = |e: reqwest::Error| client.failed(what, path, total, &e);
    let mut response = request.send().await.map_err(fail)?;
    let status = response.status();
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with(harmony_api::NDJSON));
    if status != StatusCode::OK || !streamed {
        let body = response.bytes().await.map_err(fail)?;
        return match status {
            StatusCode::OK => ControlPlaneClient::parse(what, &body),
            s => Err(ControlPlaneClient::status_error(what, s, &body)),
        };
    }
    let mut lines = Lines::default();
    loop {
        let chunk = response.chunk().await.map_err(fail)?;
        let Some(chunk) = chunk else {
            // The connection closed before the last line (a replica restarting, a proxy
            // cutting it): a transport failure, so the caller retries with the same id and
            // joins the same durable request.
            return Err(ControlPlaneError::Unreachable {
                url: format!("{}{path}", client.url()),
                reason: "the answer stream ended before the request's result".into(),
            });
        };
        lines.push(&chunk).map_err(|reason| invalid(what, reason))?;
        while let Some(line) = lines.next_line() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event: RequestEvent = serde_json::from_slice(&line)
                .map_err(|e| invalid(what, format!("unreadable NDJSON line: {e}")))?;
            if let Some(done) = finish(what, event, &mut on_progress) {
                return done;
            }
        }
    }
}

/// Handles one event: `None` to keep reading, or the outcome.
fn finish<F: FnMut(&RequestEvent)>(
    what: &str,
    event: RequestEvent,
    on_progress: &mut F,
) -> Option<Result<Res, ControlPlaneError>> {
    match event.kind {
        RequestEventKind::Progress => {
            on_progress(&event);
            None
        }
        RequestEventKind::Result => Some(
            event
                .res
                .ok_or_else(|| invalid(what, "a result line without `res`".into())),
        ),
        RequestEventKind::Error => Some(Err(ControlPlaneError::Status {
            what: what.to_string(),
            status: event.status.unwrap_or(500),
            error: Box::new(event.error.unwrap_or_default()),
        })),
    }
}

fn invalid(what: &str, reason: String) -> ControlPlaneError {
    ControlPlaneError::Invalid {
        what: what.to_string(),
        reason,
    }
}

/// Splits a byte stream into lines, whatever the chunk boundaries.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    /// Where the next line starts in `buf`.
    start: usize,
}

impl Lines {
    fn push(&mut self, chunk: &[u8]) -> Result<(), String> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.buf.len() + chunk.len() > MAX_LINE_BYTES && !chunk.contains(&b'\n') {
            return Err(format!(
                "an NDJSON line exceeds {MAX_LINE_BYTES} bytes; the answer is not a request event stream"
            ));
        }
        self.buf.extend_from_slice(chunk);
        Ok(())
    }

    fn next_line(&mut self) -> Option<Vec<u8>> {
        let end = self.buf[self.start..].iter().position(|b| *b == b'\n')? + self.start;
        let line = self.buf[self.start..end].to_vec();
        self.start = end + 1;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_survive_any_chunking() {
        let text = b"{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}\n";
        for size in 1..text.len() {
            let mut lines = Lines::default();
            let mut got = Vec::new();
            for chunk in text.chunks(size) {
                lines.push(chunk).unwrap();
                while let Some(l) = lines.next_line() {
                    got.push(String::from_utf8(l).unwrap());
                }
            }
            assert_eq!(
                got,
                ["{\"a\":1}", "", "{\"b\":2}\r", "{\"c\":3}"],
                "chunk {size}"
            );
        }
    }
}
