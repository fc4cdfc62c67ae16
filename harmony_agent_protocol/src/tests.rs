//! Frame round trips, the decoder's refusals, and a mutation test of the decoder.
use super::*;

#[test]
fn a_late_hello_is_closed_with_a_code_the_agent_retries_after() {
    assert!(!close::is_fatal(close::TRY_AGAIN_LATER));
    assert!(close::is_fatal(close::PROTOCOL));
}

#[test]
fn a_silent_flow_is_dropped_by_the_second_heartbeat_after_the_last_answer() {
    use std::time::Duration;
    for h in [0.2, 1.0, 5.0, 30.0] {
        let h = Duration::from_secs_f64(h);
        let limit = silence_limit(h);
        // Heard within one heartbeat (answer to the last ping): kept, with room to spare.
        assert!(limit >= h + Duration::from_secs(2).min(h / 2), "{h:?}");
        // Checked at each heartbeat: two heartbeats of silence exceed it (5 s: 7.5 s).
        assert!(
            limit < h * 2 || h < Duration::from_secs(4),
            "{h:?}: {limit:?}"
        );
    }
    assert_eq!(
        silence_limit(Duration::from_secs(5)),
        Duration::from_millis(7500)
    );
}
use serde_json::{Value, json};

#[test]
fn frames_round_trip_with_the_documented_shape() {
    let hello = Frame::Hello(Hello {
        agent_version: "0.1.0".into(),
        region: "eu-west".into(),
        zone: "paris-1".into(),
        ops: vec!["apply_manifests".into()],
        protocol: 1,
        max_frame_bytes: 1024,
        cluster_scoped: vec!["clusterrole".into()],
    });
    let text = encode(&hello);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["type"], "hello");
    assert_eq!(v["protocol"], 1);
    assert_eq!(decode(&text).unwrap(), hello);
    let res = Frame::Res(Res::err(
        "r1",
        ErrorBody::new(code::UNSUPPORTED_OP, "no such op"),
    ));
    let v: Value = serde_json::from_str(&encode(&res)).unwrap();
    assert_eq!(
        v,
        json!({"type": "res", "id": "r1", "ok": false, "error": {"code": "unsupported_op", "message": "no such op"}})
    );
}

#[test]
fn unknown_fields_are_ignored_and_unknown_types_are_errors() {
    let f =
        decode(r#"{"type":"ping","seq":3,"status":{"k8s_reachable":true,"gpu":"x"},"extra":[1]}"#)
            .unwrap();
    assert!(matches!(f, Frame::Ping(Ping { seq: 3, .. })));
    let e = decode(r#"{"type":"teleport","to":"mars"}"#).unwrap_err();
    assert_eq!(e.code(), code::UNKNOWN_FRAME);
    assert!(e.to_string().contains("teleport"), "{e}");
    let e = decode(r#"{"type":"req","id":7}"#).unwrap_err();
    assert_eq!(e.code(), code::MALFORMED_FRAME);
    assert!(e.to_string().starts_with("req frame is malformed"), "{e}");
    assert_eq!(decode("[]").unwrap_err().code(), code::MALFORMED_FRAME);
    assert_eq!(decode("{").unwrap_err().code(), code::MALFORMED_FRAME);
    assert_eq!(decode(r#"{"seq":1}"#).unwrap_err(), DecodeError::NoType);
}

#[test]
fn oversized_frames_are_refused_before_parsing() {
    let big = format!(
        r#"{{"type":"progress","id":"x","stage":"s","detail":"{}"}}"#,
        "a".repeat(MAX_FRAME_BYTES)
    );
    assert!(matches!(
        decode(&big).unwrap_err(),
        DecodeError::TooLarge { .. }
    ));
}

#[test]
fn a_welcome_identity_is_not_in_debug_output() {
    let w = Welcome {
        heartbeat_s: 5.0,
        identity: Some(SecretString::new("hid_supersecretvalue")),
        protocol: 1,
        identity_expires_at: Some(1),
        max_frame_bytes: 1024,
    };
    assert!(!format!("{w:?}").contains("supersecret"));
    assert!(encode(&Frame::Welcome(w)).contains("hid_supersecretvalue"));
}

/// A small deterministic generator (xorshift64*) so the fuzz test needs no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<String> {
    vec![
        encode(&Frame::Hello(Hello {
            agent_version: "1.0.0".into(),
            region: "r".into(),
            zone: "z".into(),
            ops: vec!["apply_manifests".into(), "get_inventory".into()],
            protocol: 1,
            max_frame_bytes: 4096,
            cluster_scoped: Vec::new(),
        })),
        encode(&Frame::Ping(Ping {
            seq: 9,
            status: AgentStatus {
                k8s_reachable: true,
                detail: Some("v1.35".into()),
                in_flight: 2,
                node_count: Some(3),
                allocatable: Some(crate::ops::Capacity {
                    cpu_millis: 12_000,
                    memory_bytes: 48 << 30,
                    pods: 330,
                }),
                quotas: None,
            },
        })),
        encode(&Frame::Req(
            Req::new(
                "abc",
                "apply_manifests",
                &json!({"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "n": 1e2}}]}),
            )
            .unwrap(),
        )),
        encode(&Frame::Res(Res::ok("abc", json!({"changes": []})))),
        encode(&Frame::Progress(Progress {
            id: "abc".into(),
            stage: "applying".into(),
            detail: "1 of 2".into(),
        })),
        encode(&Frame::Welcome(Welcome {
            heartbeat_s: 0.2,
            identity: None,
            protocol: 1,
            identity_expires_at: None,
            max_frame_bytes: 4096,
        })),
        encode(&Frame::Renew(Renew {})),
        encode(&Frame::Identity(IdentityFrame {
            identity: SecretString::new("hid_x"),
            expires_at: 5,
        })),
        encode(&Frame::Services(Services {
            offers: vec![ServiceOffer {
                service_type: "queue".into(),
                provider: "q".into(),
                builtin: false,
                health: ProviderHealth::Healthy,
                detail: "ok".into(),
            }],
        })),
        encode(&Frame::Instance(InstanceStatus {
            instance_id: "i".into(),
            service_type: "queue".into(),
            provider: "q".into(),
            state: InstanceState::Ready,
            detail: String::new(),
            outputs: serde_json::Map::new(),
        })),
    ]
}

/// Property: for any byte mutation, truncation, splice or random input, `decode` returns
/// (never panics), and whatever it accepts re-encodes to a frame that decodes to itself.
#[test]
fn decoder_survives_random_and_mutated_input() {
    let seeds = seeds();
    let alphabet: &[u8] = b"{}[]\":,0123456789.-+eE truefalsnul\\/\x00\x7fabcXYZtypeidopreq";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut accepted = 0;
    for round in 0..60_000 {
        let base = &seeds[rng.below(seeds.len())];
        let mut bytes = base.as_bytes().to_vec();
        match round % 5 {
            0 => {
                for _ in 0..=rng.below(8) {
                    let i = rng.below(bytes.len());
                    bytes[i] = alphabet[rng.below(alphabet.len())];
                }
            }
            1 => bytes.truncate(rng.below(bytes.len())),
            2 => {
                let other = seeds[rng.below(seeds.len())].as_bytes();
                let cut = rng.below(bytes.len());
                let from = rng.below(other.len());
                bytes.truncate(cut);
                bytes.extend_from_slice(&other[from..]);
            }
            3 => {
                let i = rng.below(bytes.len());
                let n = rng.below(6);
                let junk: Vec<u8> = (0..n)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                bytes.splice(i..i, junk);
            }
            _ => {
                bytes = (0..rng.below(64))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(frame) = decode(&text) {
            accepted += 1;
            assert_eq!(decode(&encode(&frame)).as_ref(), Ok(&frame), "{text}");
        }
    }
    // The mutations must exercise both paths, or the test proves little.
    assert!(accepted > 100, "only {accepted} mutated frames decoded");
}

#[test]
fn params_and_results_keep_their_bytes_through_decode_and_encode() {
    let text = r#"{"type":"req","id":"a","op":"apply_manifests","params":{"x":1e2,"y":[1.50]}}"#;
    let Frame::Req(req) = decode(text).unwrap() else {
        panic!("not a req")
    };
    assert_eq!(req.params.get(), r#"{"x":1e2,"y":[1.50]}"#);
    let again = encode(&Frame::Req(req));
    assert_eq!(again.len(), text.len(), "{again}");
    let res = r#"{"type":"res","id":"a","ok":true,"result":{"big":1E+300}}"#;
    let Frame::Res(r) = decode(res).unwrap() else {
        panic!("not a res")
    };
    assert_eq!(r.result.as_ref().unwrap().get(), r#"{"big":1E+300}"#);
    assert_eq!(encode(&Frame::Res(r)), res);
}

#[test]
fn the_limit_is_the_receivers() {
    let frame = encode(&Frame::Renew(Renew {}));
    assert!(decode_with_limit(&frame, frame.len()).is_ok());
    assert!(matches!(
        decode_with_limit(&frame, frame.len() - 1),
        Err(DecodeError::TooLarge { .. })
    ));
    assert_eq!(encoded_len(&Frame::Renew(Renew {})), frame.len());
}

#[test]
fn deeply_nested_input_is_an_error_not_a_stack_overflow() {
    // Raw params are only skipped over (iteratively) by the decoder; parsing them into a
    // value is where depth is limited, and it is an error there, not a crash.
    let deep = format!(
        r#"{{"type":"req","id":"x","op":"y","params":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let Ok(Frame::Req(req)) = decode(&deep) else {
        panic!("a deep but well-formed req is still a req frame")
    };
    assert!(req.params.parse::<Value>().is_err());
    let deep_header = format!(
        r#"{{"type":{}"req"{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(decode(&deep_header).is_err());
}
