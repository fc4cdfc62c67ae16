use super::*;

#[test]
fn ids_are_checked_or_chosen() {
    assert_eq!(request_id(Some("a".into())).unwrap(), "a");
    assert!(matches!(
        request_id(Some(String::new())),
        Err(RequestError::InvalidId)
    ));
    assert!(matches!(
        request_id(Some("x".repeat(129))),
        Err(RequestError::InvalidId)
    ));
    assert!(request_id(Some("x".repeat(128))).is_ok());
    assert!(request_id(Some("svc-1.create.2:a_b~c".into())).is_ok());
    for bad in ["a/b", "a b", "é", "a?b", "a%2F"] {
        assert!(
            matches!(request_id(Some(bad.into())), Err(RequestError::InvalidId)),
            "{bad}"
        );
    }
    let chosen = request_id(None).unwrap();
    assert_eq!(chosen.len(), 32);
    assert_ne!(chosen, request_id(None).unwrap());
}

#[test]
fn the_frame_size_is_the_exact_encoded_req() {
    let params = RawJson::from_string(r#"{"n": 1e2}"#.into()).unwrap();
    let encoded = harmony_agent_protocol::encode(&Frame::Req(Req {
        id: "r1".into(),
        op: "apply_manifests".into(),
        params: params.clone(),
        project: None,
    }));
    // The params bytes travel as sent: 1e2 stays 1e2.
    assert!(encoded.contains(r#"{"n": 1e2}"#), "{encoded}");
    assert_eq!(
        frame_size("r1", "apply_manifests", &params),
        encoded.len() as u64
    );
}

#[test]
fn waits_default_to_a_minute_and_are_capped() {
    let max = Duration::from_secs(300);
    assert_eq!(wait_for(None, max), DEFAULT_WAIT);
    assert_eq!(wait_for(Some(2.5), max), Duration::from_millis(2500));
    assert_eq!(wait_for(Some(1e6), max), max);
    assert_eq!(wait_for(Some(0.0), max), DEFAULT_WAIT);
}

fn record(state: RequestState, res: Option<&str>) -> RequestRecord {
    RequestRecord {
        id: "r1".into(),
        region: "eu".into(),
        zone: "z1".into(),
        op: "get_inventory".into(),
        params: "null".into(),
        body_hash: [0; 32],
        state,
        res: res.map(str::to_string),
        seq: 1,
        created_at: 1,
        sent_at: None,
        completed_at: None,
        deliveries: 1,
        scope: None,
    }
}

#[test]
fn a_finished_request_answers_its_stored_result_byte_for_byte() {
    let done = record(
        RequestState::Done,
        Some(r#"{"id":"r1","ok":true,"result":{"n":1e2}}"#),
    );
    // A tenant's request is stored as `acme@r1`; its answer carries the id the tenant sent.
    let res = finished(done, "r1").unwrap();
    assert_eq!(res.id, "r1");
    assert_eq!(res.result.unwrap().get(), r#"{"n":1e2}"#);
    let cancelled = record(
        RequestState::Cancelled,
        Some(
            r#"{"id":"r1","ok":false,"error":{"code":"unreachable","message":"region eu was decommissioned"}}"#,
        ),
    );
    match finished(cancelled, "r1") {
        Err(RequestError::Cancelled { message, .. }) => {
            assert_eq!(message, "region eu was decommissioned")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        finished(record(RequestState::Done, Some("{")), "r1"),
        Err(RequestError::Internal(_))
    ));
}

#[test]
fn request_ids_are_scoped_per_tenant_and_shown_without_the_tenant() {
    assert_eq!(scoped_id(Some("acme"), "r1"), "acme@r1");
    assert_eq!(scoped_id(None, "r1"), "r1");
    assert_eq!(shown_id(Some("acme"), "acme@r1"), "r1");
    // The admin sees the tenant-qualified id; a tenant never strips another's prefix.
    assert_eq!(shown_id(None, "acme@r1"), "acme@r1");
    assert_eq!(shown_id(Some("acm"), "acme@r1"), "acme@r1");
    // A caller cannot send a qualified id.
    assert!(matches!(
        request_id(Some("beta@r1".into())),
        Err(RequestError::InvalidId)
    ));
}
