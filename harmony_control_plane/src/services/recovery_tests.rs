//! An agent offline past its identity's lifetime comes back by an admin action that keeps its
//! zone and its queued requests: a new bootstrap token for the zone, allowed once the identity
//! has expired (refused while it is valid), exchanged for a new identity.

use harmony_agent_protocol::Services;
use std::time::Duration;

use super::identities::{self, AuthError};
use super::regions::{self, RegionError};
use super::requests;
use super::tests::{agent, control_plane_with, inventory, region, settings, sub};
use crate::session::refusal_close;
use crate::store::{Refusal, RequestState};

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_whose_identity_expired_offline_comes_back_with_its_zone_and_queue() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings();
    s.identity_ttl = Duration::from_millis(400);
    s.identity_overlap = Duration::from_millis(100);
    let cp = control_plane_with(dir.path(), s).await;
    let token = region(&cp, "eu").await;
    let first = identities::authenticate(&cp, Some(&token), "eu", "z")
        .await
        .unwrap();
    let identity = first.issued.clone().unwrap();
    identities::confirm(&cp, &first.identity_hash)
        .await
        .unwrap();
    // While the identity is valid, no second agent may bootstrap.
    assert!(matches!(
        regions::new_bootstrap(&cp, "eu", Some("z")).await,
        Err(RegionError::AlreadyBootstrapped(..))
    ));
    // The agent goes offline; a request is queued for the zone meanwhile.
    let queued = requests::submit(&cp, "eu", sub("kept-1", "{}"))
        .await
        .unwrap();
    assert_eq!(queued.zone, "z");
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Back after its identity expired: refused, and the close reason names the way back.
    let e = identities::authenticate(&cp, Some(&identity), "eu", "z")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            AuthError::Refused {
                refusal: Refusal::Expired,
                bootstrap: false
            }
        ),
        "{e:?}"
    );
    let (code, reason) = refusal_close(&e);
    assert_eq!(code, harmony_agent_protocol::close::IDENTITY_EXPIRED);
    assert!(
        reason.contains("/bootstrap-token") && reason.contains("zone and queue are kept"),
        "{reason}"
    );
    // The admin action: a bootstrap token for the zone, now allowed; the agent exchanges it.
    let minted = regions::new_bootstrap(&cp, "eu", Some("z")).await.unwrap();
    let back = identities::authenticate(&cp, Some(&minted.token), "eu", "z")
        .await
        .unwrap();
    assert!(back.issued.is_some(), "a new identity");
    let zones = regions::zones_of(&cp, "eu").await.unwrap();
    assert!(
        zones
            .iter()
            .any(|z| z.zone == "z" && z.decommissioned_at.is_none())
    );
    // The request queued while it was away is still there, and is answered once it connects.
    let stored = cp.store.request("kept-1").await.unwrap().unwrap();
    assert_eq!(stored.state, RequestState::Queued);
    let _closed = agent(&cp, "eu", 1 << 20, Services::default(), Some(inventory)).await;
    let answered = requests::wait_answer(&cp, &queued, Duration::from_secs(10)).await;
    assert!(answered.is_ok(), "{answered:?}");
}
