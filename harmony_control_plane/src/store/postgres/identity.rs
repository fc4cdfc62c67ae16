//! Regions, bootstrap tokens and identities in PostgreSQL. The statements SQLite shares are in
//! [`crate::store::sql`]; the ones here are PostgreSQL's own.

use super::cached::Cached;
use deadpool_postgres::{Client, GenericClient};
use tokio_postgres::Row;

use super::Error;

use crate::store::sql::{self, REGION_SELECT_PROBED, ZONE_ORDER, ZONE_SELECT, ZONE_SELECT_PROBED};
use crate::store::{
    BootstrapFacts, Credential, Exchange, IdentityFacts, Refusal, RegionRecord, ZoneRecord, now_ms,
};

pub(super) async fn zones(c: &Client) -> Result<Vec<ZoneRecord>, Error> {
    let rows = c
        .query_cached(
            &format!("{} ORDER BY z.region, {ZONE_ORDER}", ZONE_SELECT.postgres),
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

/// Adds a zone to an active region, or re-commissions a decommissioned zone. PostgreSQL's own:
/// one upsert from the region's row (SQLite reads the region first).
pub(super) async fn add_zone(c: &Client, region: &str, zone: &str) -> Result<bool, Error> {
    let n = c
        .execute_cached(
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
        .execute_cached(sql::DECOMMISSION_ZONE.postgres, &[&region, &zone, &now])
        .await?;
    tx.execute_cached(
        sql::REVOKE_ZONE_IDENTITIES.postgres,
        &[&region, &zone, &now],
    )
    .await?;
    tx.execute_cached(
        sql::REVOKE_ZONE_BOOTSTRAP_TOKENS.postgres,
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
/// PostgreSQL's own upsert of the region's row (SQLite reads it first).
pub(super) async fn create_region(c: &mut Client, region: &str, zone: &str) -> Result<bool, Error> {
    let tx = c.transaction().await?;
    let n = tx
        .execute_cached(
            "INSERT INTO regions (name, zone, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE
               SET zone = EXCLUDED.zone, created_at = EXCLUDED.created_at, decommissioned_at = NULL
               WHERE regions.decommissioned_at IS NOT NULL",
            &[&region, &zone, &now_ms()],
        )
        .await?;
    if n == 1 {
        tx.execute_cached(sql::RETIRE_REGION_ZONES.postgres, &[&region, &now_ms()])
            .await?;
        tx.execute_cached(sql::COMMISSION_ZONE.postgres, &[&region, &zone, &now_ms()])
            .await?;
    }
    tx.commit().await?;
    Ok(n == 1)
}

pub(super) async fn regions(c: &Client) -> Result<Vec<RegionRecord>, Error> {
    let rows = c.query_cached(sql::REGIONS.postgres, &[]).await?;
    rows.iter().map(region_row).collect()
}

pub(super) async fn decommission(c: &mut Client, region: &str) -> Result<bool, Error> {
    let tx = c.transaction().await?;
    let now = now_ms();
    let n = tx
        .execute_cached(sql::DECOMMISSION_REGION.postgres, &[&region, &now])
        .await?;
    tx.execute_cached(sql::REVOKE_REGION_IDENTITIES.postgres, &[&region, &now])
        .await?;
    tx.execute_cached(
        sql::REVOKE_REGION_BOOTSTRAP_TOKENS.postgres,
        &[&region, &now],
    )
    .await?;
    tx.execute_cached(sql::DECOMMISSION_REGION_ZONES.postgres, &[&region, &now])
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
    tx.execute_cached(
        sql::REVOKE_ZONE_BOOTSTRAP_TOKENS.postgres,
        &[&region, &zone, &now],
    )
    .await?;
    // PostgreSQL's own: the statement returns the new id (SQLite asks the connection).
    let row = tx
        .query_one_cached(
            &format!("{} RETURNING id", sql::INSERT_BOOTSTRAP_TOKEN.postgres),
            &[&region, &zone, &&hash[..], &&salt[..], &now, &expires_at],
        )
        .await?;
    tx.commit().await?;
    Ok(row.try_get(0)?)
}

/// The facts of each identity whose hash is among `hashes` (one statement for a batch of
/// credential checks, see `combine`): a storm of reconnecting agents checks one each.
pub(super) async fn identity_facts_many(
    c: &Client,
    hashes: &[Vec<u8>],
) -> Result<std::collections::HashMap<Vec<u8>, IdentityFacts>, Error> {
    let rows = c
        .query_cached(
            concat!(sql::identity_facts_select!(), " WHERE i.hash = ANY($1)"),
            &[&hashes],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let facts = IdentityFacts {
                region: r.try_get(0)?,
                zone: r.try_get(1)?,
                revoked: r.try_get(2)?,
                expires_at: r.try_get(3)?,
                valid_until: r.try_get(4)?,
                used: r.try_get(6)?,
            };
            Ok((r.try_get::<_, Vec<u8>>(5)?, facts))
        })
        .collect()
}

/// Looks the hash up as a bootstrap token and decides at `now` (an identity's hash is looked up
/// first, by [`identity_facts_many`]).
pub(super) async fn check_bootstrap(
    c: &Client,
    hash: &[u8; 32],
    now: i64,
) -> Result<Result<Credential, Refusal>, Error> {
    let bootstrap = c
        .query_opt_cached(sql::BOOTSTRAP_FACTS.postgres, &[&&hash[..]])
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
        .execute_cached(
            sql::USE_BOOTSTRAP_TOKEN.postgres,
            &[&bootstrap_id, &region, &now],
        )
        .await?;
    let outcome = if n == 1 {
        tx.execute_cached(
            sql::ISSUE_IDENTITY.postgres,
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
            .query_opt_cached(
                sql::UNUSED_IDENTITY_OF_TOKEN.postgres,
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
    c.execute_cached(sql::MARK_IDENTITY_USED.postgres, &[&&hash[..], &now])
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
        .execute_cached(
            sql::RETIRE_IDENTITY.postgres,
            &[&region, &&old[..], &now, &old_valid_until],
        )
        .await?;
    if n != 1 {
        return Ok(false);
    }
    tx.execute_cached(
        sql::ROTATED_IDENTITY.postgres,
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
        .query_cached(
            &format!("{REGION_SELECT_PROBED} WHERE r.name = ANY($1)"),
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
        .query_cached(
            // The condition on both tables, so each is read through its index whatever the
            // planner guesses of how many zones match (a hash join read every region).
            &format!(
                "{ZONE_SELECT_PROBED} WHERE z.region = ANY($1) AND r.name = ANY($1) \
                 ORDER BY z.region, {ZONE_ORDER}"
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
