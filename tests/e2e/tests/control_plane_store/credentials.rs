//! Regions, bootstrap tokens and identities.

use super::{Db, hash};
use harmony_control_plane::store::{Credential, Exchange, Refusal, now_ms};

pub(super) async fn regions_are_created_once_listed_and_recommissioned(db: Db) {
    let s = db.open().await;
    assert!(s.create_region("eu", "paris").await.unwrap());
    assert!(!s.create_region("eu", "paris").await.unwrap());
    assert!(s.create_region("ap", "tokyo").await.unwrap());
    let names: Vec<String> = s
        .regions()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["ap", "eu"]);
    let eu = s.region("eu").await.unwrap().unwrap();
    assert_eq!(
        (eu.zone.as_str(), eu.decommissioned_at, eu.has_identity),
        ("paris", None, false)
    );
    assert!(s.region("nowhere").await.unwrap().is_none());

    assert!(s.decommission("eu").await.unwrap());
    assert!(!s.decommission("eu").await.unwrap());
    assert!(!s.decommission("nowhere").await.unwrap());
    assert!(
        s.region("eu")
            .await
            .unwrap()
            .unwrap()
            .decommissioned_at
            .is_some()
    );
    // A decommissioned region can be created again, in another zone.
    assert!(s.create_region("eu", "berlin").await.unwrap());
    let eu = s.region("eu").await.unwrap().unwrap();
    assert_eq!((eu.zone.as_str(), eu.decommissioned_at), ("berlin", None));
}

pub(super) async fn concurrent_credential_checks_each_get_their_own_answer(db: Db) {
    let s = db.open().await;
    let now = now_ms();
    // 30 regions, each with an identity; the odd ones' regions decommissioned (revoked).
    let mut identities = Vec::new();
    for i in 0..30 {
        let region = format!("r{i}");
        s.create_region(&region, "z").await.unwrap();
        let token = hash(&format!("hbt_{i}"));
        let id = s
            .add_bootstrap(&region, "z", &token, &hash("salt"), now + 60_000)
            .await
            .unwrap();
        let identity = hash(&format!("hid_{i}"));
        assert_eq!(
            s.exchange(id, &region, &identity, now + 1_000_000)
                .await
                .unwrap(),
            Exchange::Issued
        );
        identities.push((region, identity));
    }
    for (region, _) in identities.iter().skip(1).step_by(2) {
        assert!(s.decommission(region).await.unwrap());
    }
    // Every identity, an unknown hash and a bootstrap token, all at once, twice over (so calls
    // of the same hash meet on PostgreSQL's batched read).
    let unknown = hash("nobody");
    s.add_bootstrap("r0", "z", &hash("hbt_new"), &hash("salt"), now + 60_000)
        .await
        .unwrap();
    let checks = identities
        .iter()
        .map(|(_, h)| *h)
        .chain([unknown, hash("hbt_new")])
        .cycle()
        .take(2 * (identities.len() + 2));
    let answers = futures::future::join_all(checks.map(|h| {
        let s = s.clone();
        async move { (h, s.check(&h, now).await.unwrap()) }
    }))
    .await;
    for (h, answer) in answers {
        if h == unknown {
            assert_eq!(answer, Err(Refusal::Unknown));
        } else if h == hash("hbt_new") {
            assert!(
                matches!(answer, Ok(Credential::Bootstrap { .. })),
                "{answer:?}"
            );
        } else {
            let i = identities.iter().position(|(_, x)| *x == h).unwrap();
            if i % 2 == 1 {
                assert_eq!(answer, Err(Refusal::Revoked), "r{i}");
            } else {
                match answer {
                    Ok(Credential::Identity { region, zone, .. }) => {
                        assert_eq!((region, zone.as_str()), (format!("r{i}"), "z"));
                    }
                    other => panic!("r{i}: {other:?}"),
                }
            }
        }
    }
}

pub(super) async fn bootstrap_token_is_single_use_expires_and_is_superseded(db: Db) {
    let s = db.open().await;
    let now = now_ms();
    s.create_region("eu", "paris").await.unwrap();
    let (token, salt) = (hash("hbt_1"), hash("salt_1"));
    let id = s
        .add_bootstrap("eu", "paris", &token, &salt, now + 60_000)
        .await
        .unwrap();
    match s.check(&token, now).await.unwrap() {
        Ok(Credential::Bootstrap {
            id: got,
            region,
            zone,
            salt: got_salt,
            expires_at,
            issued,
        }) => {
            assert_eq!((got, region.as_str(), zone.as_str()), (id, "eu", "paris"));
            assert_eq!((got_salt, expires_at, issued), (salt, now + 60_000, false));
        }
        other => panic!("a valid bootstrap token was not accepted: {other:?}"),
    }
    // Checking does not consume: still valid.
    assert!(matches!(
        s.check(&token, now).await.unwrap(),
        Ok(Credential::Bootstrap { .. })
    ));
    let identity = hash("hid_1");
    assert_eq!(
        s.exchange(id, "eu", &identity, now + 1_000_000)
            .await
            .unwrap(),
        Exchange::Issued
    );
    s.mark_identity_used(&identity, now).await.unwrap();
    assert_eq!(s.check(&token, now).await.unwrap(), Err(Refusal::Used));
    assert_eq!(
        s.exchange(id, "eu", &identity, now + 1).await.unwrap(),
        Exchange::Used
    );
    assert!(s.region("eu").await.unwrap().unwrap().has_identity);

    // Expiry is decided at the caller's `now`.
    let late = hash("hbt_late");
    s.add_bootstrap("eu", "paris", &late, &salt, now + 10)
        .await
        .unwrap();
    assert!(matches!(
        s.check(&late, now).await.unwrap(),
        Ok(Credential::Bootstrap { .. })
    ));
    assert_eq!(
        s.check(&late, now + 10).await.unwrap(),
        Err(Refusal::Expired)
    );

    // A newer token supersedes an unused older one.
    let newer = hash("hbt_newer");
    s.add_bootstrap("eu", "paris", &newer, &hash("salt_2"), now + 60_000)
        .await
        .unwrap();
    assert_eq!(s.check(&late, now).await.unwrap(), Err(Refusal::Unknown));
    assert!(matches!(
        s.check(&newer, now).await.unwrap(),
        Ok(Credential::Bootstrap { .. })
    ));
    assert_eq!(
        s.check(&hash("never stored"), now).await.unwrap(),
        Err(Refusal::Unknown)
    );
}

pub(super) async fn lost_welcome_re_exchange_returns_the_same_identity_until_it_is_used(db: Db) {
    let s = db.open().await;
    let now = now_ms();
    s.create_region("eu", "paris").await.unwrap();
    let token = hash("hbt_lost");
    let id = s
        .add_bootstrap("eu", "paris", &token, &hash("salt"), now + 60_000)
        .await
        .unwrap();
    let identity = hash("hid_derived");
    let expiry = now + 30 * 86_400_000;
    assert_eq!(
        s.exchange(id, "eu", &identity, expiry).await.unwrap(),
        Exchange::Issued
    );

    // The welcome was lost: the agent presents the bootstrap token again.
    match s.check(&token, now + 1).await.unwrap() {
        Ok(Credential::Bootstrap {
            id: got, issued, ..
        }) => assert_eq!((got, issued), (id, true)),
        other => panic!("a re-presented bootstrap token was refused: {other:?}"),
    }
    assert_eq!(
        s.exchange(id, "eu", &identity, now + 99).await.unwrap(),
        Exchange::AlreadyIssuedUnused {
            expires_at: Some(expiry)
        },
        "the stored identity (and its first expiry) comes back"
    );
    // Only that identity: another one is never issued for a spent token.
    assert_eq!(
        s.exchange(id, "eu", &hash("hid_other"), expiry)
            .await
            .unwrap(),
        Exchange::Used
    );
    assert_eq!(
        s.check(&hash("hid_other"), now).await.unwrap(),
        Err(Refusal::Unknown)
    );
    // Past the token's expiry, re-presenting it no longer works.
    assert_eq!(
        s.check(&token, now + 60_000).await.unwrap(),
        Err(Refusal::Expired)
    );

    // Once the identity connected, the token is spent for good.
    assert!(matches!(
        s.check(&identity, now).await.unwrap(),
        Ok(Credential::Identity { used: false, .. })
    ));
    s.mark_identity_used(&identity, now).await.unwrap();
    s.mark_identity_used(&identity, now + 5).await.unwrap();
    assert!(
        matches!(
            s.check(&identity, now).await.unwrap(),
            Ok(Credential::Identity { used: true, .. })
        ),
        "the check says the first use is recorded, so a reconnect writes nothing"
    );
    assert_eq!(s.check(&token, now + 1).await.unwrap(), Err(Refusal::Used));
    assert_eq!(
        s.exchange(id, "eu", &identity, expiry).await.unwrap(),
        Exchange::Used
    );
}

pub(super) async fn rotation_keeps_the_old_identity_valid_for_the_overlap_only(db: Db) {
    let s = db.open().await;
    let now = now_ms();
    s.create_region("eu", "paris").await.unwrap();
    s.create_region("ap", "tokyo").await.unwrap();
    let token = hash("hbt_rot");
    let id = s
        .add_bootstrap("eu", "paris", &token, &hash("salt"), now + 60_000)
        .await
        .unwrap();
    let (old, new) = (hash("hid_old"), hash("hid_new"));
    let (old_expiry, new_expiry, overlap_end) = (now + 100_000, now + 200_000, now + 3_600);
    s.exchange(id, "eu", &old, old_expiry).await.unwrap();
    assert_eq!(
        s.check(&old, now).await.unwrap(),
        Ok(Credential::Identity {
            region: "eu".into(),
            zone: "paris".into(),
            expires_at: Some(old_expiry),
            used: false
        })
    );

    assert!(
        !s.rotate_identity("ap", &old, &new, now, new_expiry, overlap_end)
            .await
            .unwrap(),
        "an identity rotates only within its own region"
    );
    assert!(
        !s.rotate_identity(
            "eu",
            &hash("hid_unknown"),
            &new,
            now,
            new_expiry,
            overlap_end
        )
        .await
        .unwrap()
    );
    assert!(
        s.rotate_identity("eu", &old, &new, now, new_expiry, overlap_end)
            .await
            .unwrap()
    );

    assert_eq!(
        s.check(&old, now + 1).await.unwrap(),
        Ok(Credential::Identity {
            region: "eu".into(),
            zone: "paris".into(),
            expires_at: Some(overlap_end),
            used: true
        }),
        "the old identity stays valid until the end of the overlap"
    );
    assert_eq!(
        s.check(&old, overlap_end).await.unwrap(),
        Err(Refusal::Expired)
    );
    assert_eq!(
        s.check(&new, overlap_end).await.unwrap(),
        Ok(Credential::Identity {
            region: "eu".into(),
            zone: "paris".into(),
            expires_at: Some(new_expiry),
            used: false
        })
    );
    assert_eq!(
        s.check(&new, new_expiry).await.unwrap(),
        Err(Refusal::Expired)
    );
    // Rotating counts as using the identity: the bootstrap token cannot give it again.
    assert_eq!(s.check(&token, now).await.unwrap(), Err(Refusal::Used));
    // A second renewal within the overlap (the first `identity` frame was lost) works, and does
    // not extend the old identity's overlap; an expired one cannot renew.
    let newer = hash("hid_newer");
    assert!(
        s.rotate_identity("eu", &old, &newer, now + 2, new_expiry, now + 999_999)
            .await
            .unwrap()
    );
    assert_eq!(
        s.check(&old, overlap_end).await.unwrap(),
        Err(Refusal::Expired)
    );
    assert!(
        !s.rotate_identity(
            "eu",
            &old,
            &hash("hid_x"),
            overlap_end,
            new_expiry,
            overlap_end + 10
        )
        .await
        .unwrap()
    );
}

pub(super) async fn decommission_revokes_identities_and_tokens(db: Db) {
    let s = db.open().await;
    let now = now_ms();
    s.create_region("eu", "paris").await.unwrap();
    let id = s
        .add_bootstrap("eu", "paris", &hash("hbt_a"), &hash("s"), now + 60_000)
        .await
        .unwrap();
    let identity = hash("hid_a");
    s.exchange(id, "eu", &identity, now + 60_000).await.unwrap();
    let spare = hash("hbt_spare");
    s.add_bootstrap("eu", "paris", &spare, &hash("s2"), now + 60_000)
        .await
        .unwrap();

    assert!(s.decommission("eu").await.unwrap());
    assert_eq!(
        s.check(&identity, now).await.unwrap(),
        Err(Refusal::Revoked)
    );
    assert_eq!(s.check(&spare, now).await.unwrap(), Err(Refusal::Revoked));
    assert!(
        !s.rotate_identity("eu", &identity, &hash("hid_b"), now, now + 1, now + 1)
            .await
            .unwrap()
    );
    let r = s.region("eu").await.unwrap().unwrap();
    assert!(r.decommissioned_at.is_some() && !r.has_identity);
    // Re-commissioning does not bring the old identity back.
    s.create_region("eu", "paris").await.unwrap();
    assert_eq!(
        s.check(&identity, now).await.unwrap(),
        Err(Refusal::Revoked)
    );
}
