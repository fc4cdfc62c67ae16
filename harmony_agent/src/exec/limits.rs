//! The control plane's frame limit applied to results: a result whose `res` frame would exceed
//! the `max_frame_bytes` of the welcome is answered with `result_too_large` instead, so one big
//! result fails its own request and never the connection (a frame above the limit would make
//! the control plane drop the connection, and the redelivered request would fail again, forever).

use harmony_agent_protocol::{ErrorBody, Frame, Res, code, encoded_len};

/// `res` when its encoded frame fits in `limit` bytes, else a `result_too_large` error naming
/// the size and the limit.
pub fn fit(res: Res, limit: u64) -> Res {
    let frame = Frame::Res(res);
    let size = encoded_len(&frame) as u64;
    let Frame::Res(res) = frame else {
        // The frame was built just above from `res`.
        return Res::err("", ErrorBody::new(code::INTERNAL, "lost a result"));
    };
    if size <= limit {
        return res;
    }
    log::warn!(
        "request {}: the result is {size} bytes encoded, above the control plane's {limit}-byte frame limit; answering result_too_large",
        res.id
    );
    too_large(&res.id, size, limit)
}

/// The `result_too_large` answer for request `id` whose result is `size` bytes encoded.
pub fn too_large(id: &str, size: u64, limit: u64) -> Res {
    Res::err(
        id,
        ErrorBody::new(
            code::RESULT_TOO_LARGE,
            format!(
                "the result of request {id} is {size} bytes encoded, above the control plane's limit of {limit} bytes per frame (max_frame_bytes); ask for less per request (fewer objects per get_objects or apply_manifests) or raise the control plane's limit"
            ),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_above_the_limit_becomes_result_too_large_naming_size_and_limit() {
        let small = Res::ok("r1", json!({"n": 1}));
        let size = encoded_len(&Frame::Res(small.clone())) as u64;
        assert_eq!(fit(small.clone(), size), small, "exactly the limit fits");
        let big = Res::ok("r2", json!({"blob": "x".repeat(10_000)}));
        let size = encoded_len(&Frame::Res(big.clone())) as u64;
        let answered = fit(big, 4096);
        assert!(!answered.ok && answered.id == "r2");
        let e = answered.error.unwrap();
        assert_eq!(e.code, code::RESULT_TOO_LARGE);
        assert!(
            e.message.contains(&format!("{size} bytes")) && e.message.contains("4096 bytes"),
            "{}",
            e.message
        );
        // The substitute is small whatever the result was.
        assert!(encoded_len(&Frame::Res(too_large("r2", size, 4096))) < 1024);
    }
}
