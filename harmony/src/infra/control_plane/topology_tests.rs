//! AgentTopology over real HTTPS (the loopback server of `agent::tests`): every agent error
//! code and every control-plane refusal maps onto one `CapabilityError` kind, progress reaches
//! the run, and retries reuse the request id.

use super::*;
use crate::domain::events::with_progress;
use crate::infra::control_plane::tests::{Reply, TestServer, line, streaming};
use harmony_agent_protocol::Res;
use harmony_api::ApiError;
use std::sync::{Arc, Mutex};

fn topology(server: &TestServer) -> AgentTopology {
    AgentTopology::new(
        "remote",
        RegionId::parse("east").unwrap(),
        server.client(),
        &RunContext::default(),
    )
    .with_request_timeout(Duration::from_secs(5))
}

fn object() -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("shop".into()),
        name: "web".into(),
    }
}

/// The error `get` returns when the server answers `reply` to every request.
async fn get_error(reply: impl Fn() -> Reply + Send + Sync + 'static) -> CapabilityError {
    let server = TestServer::start(move |_| reply()).await;
    topology(&server).get(&object()).await.unwrap_err()
}

async fn agent_error(code: &str, message: &str) -> CapabilityError {
    let res = Res::err("x", ErrorBody::new(code, message));
    get_error(move || Reply::json(200, &res)).await
}

type Check = fn(&CapabilityError) -> bool;

#[tokio::test]
async fn every_agent_error_code_maps_to_its_own_kind() {
    use CapabilityError as E;
    let conflict = "v1 ConfigMap shop/web: fields owned by \"kubectl\" would change (.data.a); re-run with --force-conflicts";
    let table: Vec<(&str, &str, Check)> = vec![
        (
            code::CONFLICT,
            conflict,
            |e| matches!(e, E::Conflict { manager, fields, .. } if manager == "kubectl" && fields == ".data.a"),
        ),
        (
            code::FORBIDDEN,
            "User \"agent\" cannot get configmaps",
            |e| matches!(e, E::Forbidden { object, message, .. } if object == "v1 ConfigMap shop/web" && message.contains("cannot get")),
        ),
        (
            code::NOT_FOUND,
            "namespaces \"shop\" not found",
            |e| matches!(e, E::NotFound { message, .. } if message.contains("shop")),
        ),
        (
            code::INVALID_OBJECT,
            "metadata.name: empty",
            |e| matches!(e, E::InvalidObject { problem, .. } if problem == "metadata.name: empty"),
        ),
        (code::INVALID_PARAMS, "objects[0].kind: missing", |e| {
            matches!(e, E::InvalidObject { .. })
        }),
        (
            code::REJECTED,
            "admission webhook denied",
            |e| matches!(e, E::Rejected { message, .. } if message == "admission webhook denied"),
        ),
        (
            code::UNKNOWN_KIND,
            "https://api has no kind Route in route.openshift.io/v1; install it",
            |e| matches!(e, E::UnknownKind { kind, api_version, .. } if kind == "Route" && api_version == "route.openshift.io/v1"),
        ),
        (
            code::UNKNOWN_KIND,
            "no structure here",
            |e| matches!(e, E::UnknownKind { kind, api_version, .. } if kind == "ConfigMap" && api_version == "v1"),
        ),
        (
            code::UNREACHABLE,
            "dial tcp 10.0.0.1:6443: refused",
            |e| matches!(e, E::Unreachable { reason, .. } if reason.contains("refused")),
        ),
        (
            code::TIMEOUT,
            "the API server did not answer",
            |e| matches!(e, E::Timeout { last_seen, .. } if last_seen.contains("did not answer")),
        ),
        (code::UNSUPPORTED, "not in this mode", |e| {
            matches!(e, E::Unsupported { .. })
        }),
        (code::UNSUPPORTED_OP, "unknown op", |e| {
            matches!(e, E::Unsupported { .. })
        }),
        (
            code::RESULT_TOO_LARGE,
            "the result is 9000000 bytes; the limit is 4194304 bytes",
            |e| matches!(e, E::TooLarge { what, limit, .. } if what.starts_with("the result of get_objects") && limit.contains("4194304")),
        ),
        (
            code::TOO_LARGE,
            "the limit is 4194304 bytes",
            |e| matches!(e, E::TooLarge { limit, .. } if limit.contains("4194304")),
        ),
        (
            code::INTERNAL,
            "panicked",
            |e| matches!(e, E::Rejected { message, .. } if message.contains("internal")),
        ),
    ];
    for (code, message, check) in table {
        let e = agent_error(code, message).await;
        assert!(check(&e), "agent code {code} became: {e:?}");
    }
}

#[tokio::test]
async fn every_control_plane_refusal_maps_to_its_own_kind() {
    use CapabilityError as E;
    let too_large = ApiError {
        error: "request frame is 6000000 bytes".into(),
        code: Some(code::TOO_LARGE.into()),
        limit_bytes: Some(4_194_304),
        size_bytes: Some(6_000_000),
        ..ApiError::default()
    };
    let table: Vec<(u16, ApiError, Check)> = vec![
        (
            413,
            too_large,
            |e| matches!(e, E::TooLarge { limit, .. } if limit == "the limit is 4194304 bytes and it is 6000000 bytes"),
        ),
        (
            404,
            ApiError::new("no region east"),
            |e| matches!(e, E::NotFound { message, .. } if message == "no region east"),
        ),
        (
            401,
            ApiError::new("bad token"),
            |e| matches!(e, E::Forbidden { message, .. } if message.contains("admin token")),
        ),
        (
            403,
            ApiError::new(
                "params: Secret s is in namespace kube-system, outside the project's namespace acme-web",
            ),
            |e| matches!(e, E::Forbidden { message, .. } if message.starts_with("params: Secret s") && !message.contains("admin token")),
        ),
        (
            400,
            ApiError::new("op: unknown"),
            |e| matches!(e, E::InvalidObject { problem, .. } if problem == "op: unknown"),
        ),
        (
            504,
            ApiError::new("no answer within 5 s"),
            |e| matches!(e, E::Timeout { last_seen, .. } if last_seen.contains("no answer")),
        ),
        (
            409,
            ApiError::new("id: request x already exists").with_code(code::DUPLICATE_ID),
            |e| matches!(e, E::Rejected { message, .. } if message.contains("duplicate_id")),
        ),
    ];
    for (status, body, check) in table {
        let e = get_error(move || Reply::json(status, &body)).await;
        assert!(check(&e), "HTTP {status} became: {e:?}");
    }
}

#[tokio::test]
async fn a_proxy_without_replica_is_retried_with_the_same_id_then_reported_unreachable() {
    let server =
        TestServer::start(|_| Reply::json(503, ApiError::new("no server available"))).await;
    let e = topology(&server).get(&object()).await.unwrap_err();
    assert!(matches!(e, CapabilityError::Unreachable { .. }), "{e:?}");
    let ids: Vec<String> = server
        .seen()
        .iter()
        .map(|s| serde_json::from_str::<serde_json::Value>(&s.body).unwrap()["id"].to_string())
        .collect();
    assert_eq!(ids.len(), TRANSPORT_ATTEMPTS as usize);
    assert!(ids.iter().all(|id| id == &ids[0]), "{ids:?}");
}

#[test]
fn only_a_504_after_a_real_wait_is_joined_again_and_only_while_the_budget_lasts() {
    let s = Duration::from_secs;
    assert!(rejoin(s(720), s(300), s(300)), "the control plane's cap");
    assert!(
        !rejoin(s(720), s(1), Duration::from_millis(20)),
        "an immediate 504"
    );
    assert!(!rejoin(s(120), s(120), s(120)), "the budget is spent");
    assert!(!rejoin(s(120), Duration::from_millis(119_500), s(60)));
}

#[tokio::test]
async fn an_apply_outlasting_the_control_planes_wait_joins_its_request_again() {
    let calls = Arc::new(Mutex::new(0u32));
    let seen_calls = calls.clone();
    let server = TestServer::start(move |_| {
        let mut n = seen_calls.lock().unwrap();
        *n += 1;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        if *n == 1 {
            // The control plane's own wait ends before the agent's: 504, the request queued.
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(1_100)).await;
                let cap = ApiError::new("timed out after 1.1s; the request stays queued");
                let _ = tx.send(line(&RequestEvent::error("x", 504, cap)));
            });
        } else {
            let res = Res::ok(
                "x",
                serde_json::json!({"changes": [
                {"object": "v1 ConfigMap shop/web", "action": "create",
                 "status": {"state": "current", "reason": "Exists", "message": "",
                            "time_to_current_ms": 1500}}]}),
            );
            tx.send(line(&RequestEvent::result(res))).unwrap();
        }
        Reply::Lines(rx)
    })
    .await;
    let cm = K8sObject::new(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"}
    }))
    .unwrap();
    let applied = topology(&server)
        .with_wait(WaitPolicy::within(Duration::from_secs(30)))
        .apply(&[cm], &ApplyOptions::default())
        .await
        .unwrap();
    let status = applied[0].status.as_ref().expect("the waited status");
    assert_eq!(status.status.state, Readiness::Current);
    assert_eq!(status.time_to_current_s, Some(1.5));
    let bodies: Vec<serde_json::Value> = server
        .seen()
        .iter()
        .map(|s| serde_json::from_str(&s.body).unwrap())
        .collect();
    assert_eq!(bodies.len(), 2, "joined once: {bodies:?}");
    assert_eq!(bodies[0]["id"], bodies[1]["id"], "the same request");
    assert_eq!(bodies[0]["params"], bodies[1]["params"]);
    assert_eq!(bodies[0]["params"]["wait_timeout_s"], 30);
}

#[tokio::test]
async fn agent_progress_is_reported_to_the_run() {
    let (tx, handler) = streaming();
    let server = TestServer::start(handler).await;
    tx.send(line(&RequestEvent::progress(
        "x",
        "applying",
        "1/1 objects",
    )))
    .unwrap();
    let result = Res::ok("x", serde_json::json!({"changes": []}));
    tx.send(line(&RequestEvent::result(result))).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let cm = K8sObject::new(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"}
    }))
    .unwrap();
    let topology = topology(&server);
    let applied = with_progress(
        Arc::new(move |m: String| sink.lock().unwrap().push(m)),
        topology.apply(&[cm], &ApplyOptions::default()),
    )
    .await
    .unwrap();
    assert!(applied.is_empty());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            "sending 1 object(s) to region east",
            "region east: applying: 1/1 objects"
        ]
    );
}

#[tokio::test]
async fn objects_labelled_for_another_region_or_zone_are_refused_before_anything_is_sent() {
    let res = Res::err("x", ErrorBody::new(code::NOT_FOUND, "absent"));
    let server = TestServer::start(move |_| Reply::json(200, &res)).await;
    let zoned = topology(&server).with_zone(ZoneId::parse("z1").unwrap());
    let labelled = |labels: serde_json::Value| {
        K8sObject::new(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "shop", "labels": labels}}))
        .unwrap()
    };
    for (labels, label) in [
        (
            serde_json::json!({"harmony.io/region": "west"}),
            "harmony.io/region=west",
        ),
        (
            serde_json::json!({"harmony.io/zone": "z2"}),
            "harmony.io/zone=z2",
        ),
    ] {
        let failure = zoned
            .apply(&[labelled(labels)], &ApplyOptions::default())
            .await
            .expect_err("a misplaced object");
        match failure.error {
            CapabilityError::InvalidObject { object, problem } => {
                assert_eq!(object, "ConfigMap shop/web");
                assert!(
                    problem.contains(label) && problem.contains("region east zone z1"),
                    "{problem}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        server.seen().is_empty(),
        "nothing reached the control plane"
    );
    // Ops of a zoned topology name their zone.
    let _ = zoned.get(&object()).await;
    assert!(
        server.seen()[0].body.contains(r#""zone":"z1""#),
        "{}",
        server.seen()[0].body
    );
}
