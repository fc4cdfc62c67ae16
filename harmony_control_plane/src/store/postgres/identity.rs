//! Regions, bootstrap tokens and identities in PostgreSQL.

use deadpool_postgres::{Client, GenericClient};
use tokio_postgres::Row;

use super::Error;

use crate::store::{
    BootstrapFacts, Credential, Exchange, IdentityFacts, Refusal, RegionRecord, ZoneRecord, now_ms,
};

const REGION_SELECT: &str = "SELECT r.name, r.zone, r.created_at, r.decommissioned_at,
        EXISTS(SELECT 1 FROM identities i WHERE i.region = r.name AND i.zone = r.zone
            AND i.revoked_at IS NULL)
     FROM regions r";

const ZONE_SELECT: &str = "SELECT z.region, z.zone, z.created_at,
        COALESCE(z.decommissioned_at, r.decommissioned_at),
        EXISTS(SELECT 1 FROM identities i WHERE i.region = z.region AND i.zone = z.zone
            AND i.revoked_at IS NULL),
        EXISTS(SELECT 1 FROM identities i WHERE i.region = z.region AND i.zone = z.zone
            AND i.revoked_at IS NULL
            AND (i.expires_at IS NULL OR i.expires_at > (extract(epoch from now()) * 1000)::bigint)
            AND (i.valid_until IS NULL OR i.valid_until > (extract(epoch from now()) * 1000)::bigint))
     FROM zones z JOIN regions r ON r.name = z.region";

pub(super) async fn zones(c: &Client) -> Result<Vec<ZoneRecord>, Error> {
    let rows = c
        .query(
            &format!("{ZONE_SELECT} ORDER BY z.region, z.zone <> r.zone, z.created_at, z.zone"),
            &[],
        )
        .await?;
    zone_rows(&rows)
}

fn zone_rows(rows: &[tokio_postgres::Row]) -> Result<Vec<ZoneRecord>, Error> {
    rows.iter()
        .map(|r| {
            Ok(ZoneRecord {
                region: r.try_get(0)?,
                zone: r.try_get(1)?,
                created_at: r.try_get(2)?,
                decommissioned_at: r.try_get(3)?,
                has_identity: r.try_get(4)?,
                live_identity: r.try_get(5)?,
            })
        })
        .collect()
}

/// Adds a zone to an active region, or re-commissions a decommissioned zone.
pub(super) async fn add_zone(c: &Client, region: &str, zone: &str) -> Result<bool, Error> {
    let n = c
        .execute(
            "INSERT INTO zones (region, zone, created_at)
             SELECT name, $2, $3 FROM regions WHERE name = $1 AND decommissioned_at IS NULL
             ON CONFLICT (region, zone) DO UPDATE
               SET decommissioned_at = NULL, created_at = EXCLUDED.created_at
               WHERE zones.decommissioned_at IS NOT NULL",
            &[&region, &zone, &now_ms()],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn decommission_zone(
    c: &mut Client,
    region: &str,
    zone: &str,
) -> Result<bool, Error> {
    let tx = c.transaction().await?;
    let now = now_ms();
    let n = tx
        .execute(
            "UPDATE zones SET decommissioned_at = $3
             WHERE region = $1 AND zone = $2 AND decommissioned_at IS NULL",
            &[&region, &zone, &now],
        )
        .await?;
    tx.execute(
        "UPDATE identities SET revoked_at = $3
         WHERE region = $1 AND zone = $2 AND revoked_at IS NULL",
        &[&region, &zone, &now],
    )
    .await?;
    tx.execute(
        "UPDATE bootstrap_tokens SET revoked_at = $3
         WHERE region = $1 AND zone = $2 AND revoked_at IS NULL",
        &[&region, &zone, &now],
    )
    .await?;
    tx.commit().await?;
    Ok(n == 1)
}

fn region_row(r: &Row) -> Result<RegionRecord, Error> {
    Ok(RegionRecord {
        name: r.try_get(0)?,
        zone: r.try_get(1)?,
        created_at: r.try_get(2)?,
        decommissioned_at: r.try_get(3)?,
        has_identity: r.try_get(4)?,
    })
}

/// Insert, or re-commission a decommissioned region; nothing for an active one. Its first zone
/// is (re-)commissioned with it; other zones of a re-created region stay decommissioned.
pub(super) async fn create_region(c: &mut Client, region: &str, zone: &str) -> Result<bool, Error> {
    let tx = c.transaction().await?;
    let n = tx
        .execute(
            "INSERT INTO regions (name, zone, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE
               SET zone = EXCLUDED.zone, created_at = EXCLUDED.created_at, decommissioned_at = NULL
               WHERE regions.decommissioned_at IS NOT NULL",
            &[&region, &zone, &now_ms()],
        )
        .await?;
    if n == 1 {
        tx.execute(
            "UPDATE zones SET decommissioned_at = COALESCE(decommissioned_at, $2)
             WHERE region = $1",
            &[&region, &now_ms()],
        )
        .await?;
        tx.execute(
            "INSERT INTO zones (region, zone, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (region, zone) DO UPDATE
               SET decommissioned_at = NULL, created_at = EXCLUDED.created_at",
            &[&region, &zone, &now_ms()],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(n == 1)
}

pub(super) async fn regions(c: &Client) -> Result<Vec<RegionRecord>, Error> {
    let rows = c
        .query(&format!("{REGION_SELECT} ORDER BY r.name"), &[])
        .await?;
    rows.iter().map(region_row).collect()
}

pub(super) async fn decommission(c: &mut Client, region: &str) -> Result<bool, Error> {
    let tx = c.transaction().await?;
    let now = now_ms();
    let n = tx
        .execute(
            "UPDATE regions SET decommissioned_at = $2 WHERE name = $1 AND decommissioned_at IS NULL",
            &[&region, &now],
        )
        .await?;
    tx.execute(
        "UPDATE identities SET revoked_at = $2 WHERE region = $1 AND revoked_at IS NULL",
        &[&region, &now],
    )
    .await?;
    tx.execute(
        "UPDATE bootstrap_tokens SET revoked_at = $2 WHERE region = $1 AND revoked_at IS NULL",
        &[&region, &now],
    )
    .await?;
    tx.execute(
        "UPDATE zones SET decommissioned_at = $2 WHERE region = $1 AND decommissioned_at IS NULL",
        &[&region, &now],
    )
    .await?;
    tx.commit().await?;
    Ok(n == 1)
}

pub(super) async fn add_bootstrap(
    c: &mut Client,
    region: &str,
    zone: &str,
    hash: &[u8; 32],
    salt: &[u8; 32],
    expires_at: i64,
) -> Result<i64, Error> {
    let tx = c.transaction().await?;
    let now = now_ms();
    tx.execute(
        "UPDATE bootstrap_tokens SET revoked_at = $3
         WHERE region = $1 AND zone = $2 AND revoked_at IS NULL",
        &[&region, &zone, &now],
    )
    .await?;
    let row = tx
        .query_one(
            "INSERT INTO bootstrap_tokens (region, zone, hash, salt, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            &[&region, &zone, &&hash[..], &&salt[..], &now, &expires_at],
        )
        .await?;
    tx.commit().await?;
    Ok(row.try_get(0)?)
}

/// Looks the hash up as an identity, then as a bootstrap token, and decides at `now`.
pub(super) async fn check(
    c: &Client,
    hash: &[u8; 32],
    now: i64,
) -> Result<Result<Credential, Refusal>, Error> {
    let identity = c
        .query_opt(
            "SELECT i.region, i.zone, i.revoked_at IS NOT NULL OR r.decommissioned_at IS NOT NULL
                        OR z.decommissioned_at IS NOT NULL,
                    i.expires_at, i.valid_until
             FROM identities i JOIN regions r ON r.name = i.region
             LEFT JOIN zones z ON z.region = i.region AND z.zone = i.zone
             WHERE i.hash = $1",
            &[&&hash[..]],
        )
        .await?;
    if let Some(r) = identity {
        let facts = IdentityFacts {
            region: r.try_get(0)?,
            zone: r.try_get(1)?,
            revoked: r.try_get(2)?,
            expires_at: r.try_get(3)?,
            valid_until: r.try_get(4)?,
        };
        return Ok(facts.decide(now));
    }
    let bootstrap = c
        .query_opt(
            "SELECT t.id, t.region, t.zone, t.salt, t.expires_at, t.used_at IS NOT NULL,
                    t.revoked_at IS NOT NULL,
                    r.decommissioned_at IS NOT NULL OR z.decommissioned_at IS NOT NULL,
                    COALESCE(i.id IS NOT NULL AND i.first_used_at IS NULL AND i.revoked_at IS NULL
                        AND i.valid_until IS NULL, FALSE)
             FROM bootstrap_tokens t JOIN regions r ON r.name = t.region
             LEFT JOIN zones z ON z.region = t.region AND z.zone = t.zone
             LEFT JOIN identities i ON i.bootstrap_id = t.id
             WHERE t.hash = $1",
            &[&&hash[..]],
        )
        .await?;
    let Some(r) = bootstrap else {
        return Ok(Err(Refusal::Unknown));
    };
    let salt: Vec<u8> = r.try_get(3)?;
    let salt = <[u8; 32]>::try_from(salt)
        .map_err(|_| Error::Data("a stored bootstrap salt is not 32 bytes".into()))?;
    let facts = BootstrapFacts {
        id: r.try_get(0)?,
        region: r.try_get(1)?,
        zone: r.try_get(2)?,
        salt,
        expires_at: r.try_get(4)?,
        used: r.try_get(5)?,
        superseded: r.try_get(6)?,
        decommissioned: r.try_get(7)?,
        identity_unused: r.try_get(8)?,
    };
    Ok(facts.decide(now))
}

pub(super) async fn exchange(
    c: &mut Client,
    bootstrap_id: i64,
    region: &str,
    identity_hash: &[u8; 32],
    expires_at: i64,
) -> Result<Exchange, Error> {
    let tx = c.transaction().await?;
    let now = now_ms();
    // A concurrent exchange of the same token waits on the row lock, then sees it used and
    // finds the identity the first one stored.
    let n = tx
        .execute(
            "UPDATE bootstrap_tokens SET used_at = $3
             WHERE id = $1 AND region = $2 AND used_at IS NULL AND revoked_at IS NULL",
            &[&bootstrap_id, &region, &now],
        )
        .await?;
    let outcome = if n == 1 {
        tx.execute(
            "INSERT INTO identities (region, zone, hash, created_at, expires_at, bootstrap_id)
             SELECT $1, t.zone, $2, $3, $4, $5 FROM bootstrap_tokens t WHERE t.id = $5",
            &[
                &region,
                &&identity_hash[..],
                &now,
                &expires_at,
                &bootstrap_id,
            ],
        )
        .await?;
        Exchange::Issued
    } else {
        let again = tx
            .query_opt(
                "SELECT i.expires_at FROM bootstrap_tokens t JOIN identities i ON i.bootstrap_id = t.id
                 WHERE t.id = $1 AND t.region = $2 AND i.hash = $3 AND t.revoked_at IS NULL
                   AND i.first_used_at IS NULL AND i.revoked_at IS NULL AND i.valid_until IS NULL",
                &[&bootstrap_id, &region, &&identity_hash[..]],
            )
            .await?;
        match again {
            Some(r) => Exchange::AlreadyIssuedUnused {
                expires_at: r.try_get(0)?,
            },
            None => Exchange::Used,
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

pub(super) async fn mark_identity_used(c: &Client, hash: &[u8; 32], now: i64) -> Result<(), Error> {
    c.execute(
        "UPDATE identities SET first_used_at = $2 WHERE hash = $1 AND first_used_at IS NULL",
        &[&&hash[..], &now],
    )
    .await?;
    Ok(())
}

#[allow(
    clippy::too_many_arguments,
    reason = "the trait method's arguments, plus the client"
)]
pub(super) async fn rotate_identity(
    c: &mut Client,
    region: &str,
    old: &[u8; 32],
    new: &[u8; 32],
    now: i64,
    new_expires_at: i64,
    old_valid_until: i64,
) -> Result<bool, Error> {
    let tx = c.transaction().await?;
    let n = tx
        .execute(
            "UPDATE identities
             SET valid_until = LEAST(COALESCE(valid_until, $4), $4),
                 first_used_at = COALESCE(first_used_at, $3)
             WHERE region = $1 AND hash = $2 AND revoked_at IS NULL
               AND (expires_at IS NULL OR expires_at > $3)
               AND (valid_until IS NULL OR valid_until > $3)
               AND EXISTS(SELECT 1 FROM regions r WHERE r.name = $1 AND r.decommissioned_at IS NULL)",
            &[&region, &&old[..], &now, &old_valid_until],
        )
        .await?;
    if n != 1 {
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO identities (region, zone, hash, created_at, expires_at)
         SELECT $1, zone, $2, $3, $4 FROM identities WHERE hash = $5",
        &[&region, &&new[..], &now_ms(), &new_expires_at, &&old[..]],
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// The regions named, by name (one statement for a batch of reads, see `combine`).
pub(super) async fn regions_named(
    c: &Client,
    names: &[String],
) -> Result<std::collections::HashMap<String, RegionRecord>, Error> {
    let rows = c
        .query(
            &format!("{REGION_SELECT} WHERE r.name = ANY($1)"),
            &[&names],
        )
        .await?;
    rows.iter()
        .map(|r| region_row(r).map(|rec| (rec.name.clone(), rec)))
        .collect()
}

/// The zones of each region named: the region's first zone first, then by creation (one
/// statement for a batch of reads, see `combine`).
pub(super) async fn zones_of_regions(
    c: &Client,
    regions: &[String],
) -> Result<std::collections::HashMap<String, Vec<ZoneRecord>>, Error> {
    let rows = c
        .query(
            &format!(
                "{ZONE_SELECT} WHERE z.region = ANY($1)
                 ORDER BY z.region, z.zone <> r.zone, z.created_at, z.zone"
            ),
            &[&regions],
        )
        .await?;
    let mut out: std::collections::HashMap<String, Vec<ZoneRecord>> = Default::default();
    for z in zone_rows(&rows)? {
        out.entry(z.region.clone()).or_default().push(z);
    }
    Ok(out)
}
