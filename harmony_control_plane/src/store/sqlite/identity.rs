//! Regions, bootstrap tokens and identities in SQLite.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conversion;
use crate::store::{Credential, Exchange, Refusal, RegionRecord, ZoneRecord, now_ms};

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
            AND (i.expires_at IS NULL OR i.expires_at > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
            AND (i.valid_until IS NULL OR i.valid_until > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)))
     FROM zones z JOIN regions r ON r.name = z.region";

fn zone_row(r: &Row<'_>) -> rusqlite::Result<ZoneRecord> {
    Ok(ZoneRecord {
        region: r.get(0)?,
        zone: r.get(1)?,
        created_at: r.get(2)?,
        decommissioned_at: r.get(3)?,
        has_identity: r.get(4)?,
        live_identity: r.get(5)?,
    })
}

pub(super) fn zones(c: &Connection) -> rusqlite::Result<Vec<ZoneRecord>> {
    let mut stmt = c.prepare(&format!(
        "{ZONE_SELECT} ORDER BY z.region, z.zone <> r.zone, z.created_at, z.zone"
    ))?;
    let rows = stmt.query_map([], zone_row)?;
    rows.collect()
}

pub(super) fn region_zones(c: &Connection, region: &str) -> rusqlite::Result<Vec<ZoneRecord>> {
    let mut stmt = c.prepare(&format!(
        "{ZONE_SELECT} WHERE z.region = ?1 ORDER BY z.zone <> r.zone, z.created_at, z.zone"
    ))?;
    let rows = stmt.query_map([region], zone_row)?;
    rows.collect()
}

pub(super) fn add_zone(c: &mut Connection, region: &str, zone: &str) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let active_region: bool = tx.query_row(
        "SELECT EXISTS(SELECT 1 FROM regions WHERE name = ?1 AND decommissioned_at IS NULL)",
        [region],
        |r| r.get(0),
    )?;
    if !active_region {
        return Ok(false);
    }
    let n = tx.execute(
        "INSERT INTO zones (region, zone, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(region, zone) DO UPDATE SET decommissioned_at = NULL,
             created_at = excluded.created_at
         WHERE zones.decommissioned_at IS NOT NULL",
        params![region, zone, now_ms()],
    )?;
    tx.commit()?;
    Ok(n == 1)
}

pub(super) fn decommission_zone(
    c: &mut Connection,
    region: &str,
    zone: &str,
) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let now = now_ms();
    let n = tx.execute(
        "UPDATE zones SET decommissioned_at = ?3
         WHERE region = ?1 AND zone = ?2 AND decommissioned_at IS NULL",
        params![region, zone, now],
    )?;
    tx.execute(
        "UPDATE identities SET revoked_at = ?3
         WHERE region = ?1 AND zone = ?2 AND revoked_at IS NULL",
        params![region, zone, now],
    )?;
    tx.execute(
        "UPDATE bootstrap_tokens SET revoked_at = ?3
         WHERE region = ?1 AND zone = ?2 AND revoked_at IS NULL",
        params![region, zone, now],
    )?;
    tx.commit()?;
    Ok(n == 1)
}

fn region_row(r: &Row<'_>) -> rusqlite::Result<RegionRecord> {
    Ok(RegionRecord {
        name: r.get(0)?,
        zone: r.get(1)?,
        created_at: r.get(2)?,
        decommissioned_at: r.get(3)?,
        has_identity: r.get(4)?,
    })
}

pub(super) fn create_region(
    c: &mut Connection,
    region: &str,
    zone: &str,
) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let existing: Option<Option<i64>> = tx
        .query_row(
            "SELECT decommissioned_at FROM regions WHERE name = ?1",
            [region],
            |r| r.get(0),
        )
        .optional()?;
    let created = match existing {
        Some(None) => false,
        Some(Some(_)) => {
            tx.execute(
                "UPDATE regions SET zone = ?2, decommissioned_at = NULL, created_at = ?3 WHERE name = ?1",
                params![region, zone, now_ms()],
            )?;
            // Re-created: its first zone only; other zones are added again explicitly.
            tx.execute(
                "UPDATE zones SET decommissioned_at = COALESCE(decommissioned_at, ?2)
                 WHERE region = ?1",
                params![region, now_ms()],
            )?;
            tx.execute(
                "INSERT INTO zones (region, zone, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(region, zone) DO UPDATE SET decommissioned_at = NULL,
                     created_at = excluded.created_at",
                params![region, zone, now_ms()],
            )?;
            true
        }
        None => {
            let now = now_ms();
            tx.execute(
                "INSERT INTO regions (name, zone, created_at) VALUES (?1, ?2, ?3)",
                params![region, zone, now],
            )?;
            tx.execute(
                "INSERT OR REPLACE INTO zones (region, zone, created_at) VALUES (?1, ?2, ?3)",
                params![region, zone, now],
            )?;
            true
        }
    };
    tx.commit()?;
    Ok(created)
}

pub(super) fn region(c: &Connection, name: &str) -> rusqlite::Result<Option<RegionRecord>> {
    c.query_row(
        &format!("{REGION_SELECT} WHERE r.name = ?1"),
        [name],
        region_row,
    )
    .optional()
}

pub(super) fn regions(c: &Connection) -> rusqlite::Result<Vec<RegionRecord>> {
    let mut stmt = c.prepare(&format!("{REGION_SELECT} ORDER BY r.name"))?;
    let rows = stmt.query_map([], region_row)?;
    rows.collect()
}

pub(super) fn decommission(c: &mut Connection, region: &str) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let now = now_ms();
    let n = tx.execute(
        "UPDATE regions SET decommissioned_at = ?2 WHERE name = ?1 AND decommissioned_at IS NULL",
        params![region, now],
    )?;
    tx.execute(
        "UPDATE identities SET revoked_at = ?2 WHERE region = ?1 AND revoked_at IS NULL",
        params![region, now],
    )?;
    tx.execute(
        "UPDATE bootstrap_tokens SET revoked_at = ?2 WHERE region = ?1 AND revoked_at IS NULL",
        params![region, now],
    )?;
    tx.execute(
        "UPDATE zones SET decommissioned_at = ?2 WHERE region = ?1 AND decommissioned_at IS NULL",
        params![region, now],
    )?;
    tx.commit()?;
    Ok(n == 1)
}

pub(super) fn add_bootstrap(
    c: &mut Connection,
    region: &str,
    zone: &str,
    hash: &[u8; 32],
    salt: &[u8; 32],
    expires_at: i64,
) -> rusqlite::Result<i64> {
    let tx = c.transaction()?;
    let now = now_ms();
    tx.execute(
        "UPDATE bootstrap_tokens SET revoked_at = ?3
         WHERE region = ?1 AND zone = ?2 AND revoked_at IS NULL",
        params![region, zone, now],
    )?;
    tx.execute(
        "INSERT INTO bootstrap_tokens (region, zone, hash, salt, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![region, zone, &hash[..], &salt[..], now, expires_at],
    )?;
    let id = tx.last_insert_rowid();
    tx.commit()?;
    Ok(id)
}

/// Looks the hash up as an identity, then as a bootstrap token, and decides at `now`.
pub(super) fn check(
    c: &Connection,
    hash: &[u8; 32],
    now: i64,
) -> rusqlite::Result<Result<Credential, Refusal>> {
    let identity = c
        .query_row(
            "SELECT i.region, i.zone, i.revoked_at IS NOT NULL OR r.decommissioned_at IS NOT NULL
                        OR z.decommissioned_at IS NOT NULL,
                    i.expires_at, i.valid_until
             FROM identities i JOIN regions r ON r.name = i.region
             LEFT JOIN zones z ON z.region = i.region AND z.zone = i.zone
             WHERE i.hash = ?1",
            [&hash[..]],
            |r| {
                Ok(crate::store::IdentityFacts {
                    region: r.get(0)?,
                    zone: r.get(1)?,
                    revoked: r.get(2)?,
                    expires_at: r.get(3)?,
                    valid_until: r.get(4)?,
                })
            },
        )
        .optional()?;
    if let Some(facts) = identity {
        return Ok(facts.decide(now));
    }
    let bootstrap = c
        .query_row(
            "SELECT t.id, t.region, t.zone, t.salt, t.expires_at, t.used_at IS NOT NULL,
                    t.revoked_at IS NOT NULL,
                    r.decommissioned_at IS NOT NULL OR z.decommissioned_at IS NOT NULL,
                    i.id IS NOT NULL AND i.first_used_at IS NULL AND i.revoked_at IS NULL
                        AND i.valid_until IS NULL
             FROM bootstrap_tokens t JOIN regions r ON r.name = t.region
             LEFT JOIN zones z ON z.region = t.region AND z.zone = t.zone
             LEFT JOIN identities i ON i.bootstrap_id = t.id
             WHERE t.hash = ?1",
            [&hash[..]],
            |r| {
                let salt: Vec<u8> = r.get(3)?;
                Ok(crate::store::BootstrapFacts {
                    id: r.get(0)?,
                    region: r.get(1)?,
                    zone: r.get(2)?,
                    salt: salt
                        .try_into()
                        .map_err(|_| conversion(3, "a bootstrap salt is not 32 bytes".into()))?,
                    expires_at: r.get(4)?,
                    used: r.get(5)?,
                    superseded: r.get(6)?,
                    decommissioned: r.get(7)?,
                    identity_unused: r.get(8)?,
                })
            },
        )
        .optional()?;
    Ok(match bootstrap {
        Some(facts) => facts.decide(now),
        None => Err(Refusal::Unknown),
    })
}

pub(super) fn exchange(
    c: &mut Connection,
    bootstrap_id: i64,
    region: &str,
    identity_hash: &[u8; 32],
    expires_at: i64,
) -> rusqlite::Result<Exchange> {
    let tx = c.transaction()?;
    let now = now_ms();
    let n = tx.execute(
        "UPDATE bootstrap_tokens SET used_at = ?3
         WHERE id = ?1 AND region = ?2 AND used_at IS NULL AND revoked_at IS NULL",
        params![bootstrap_id, region, now],
    )?;
    let outcome = if n == 1 {
        tx.execute(
            "INSERT INTO identities (region, zone, hash, created_at, expires_at, bootstrap_id)
             SELECT ?1, t.zone, ?2, ?3, ?4, ?5 FROM bootstrap_tokens t WHERE t.id = ?5",
            params![region, &identity_hash[..], now, expires_at, bootstrap_id],
        )?;
        Exchange::Issued
    } else {
        let again: Option<Option<i64>> = tx
            .query_row(
                "SELECT i.expires_at FROM bootstrap_tokens t JOIN identities i ON i.bootstrap_id = t.id
                 WHERE t.id = ?1 AND t.region = ?2 AND i.hash = ?3 AND t.revoked_at IS NULL
                   AND i.first_used_at IS NULL AND i.revoked_at IS NULL AND i.valid_until IS NULL",
                params![bootstrap_id, region, &identity_hash[..]],
                |r| r.get(0),
            )
            .optional()?;
        match again {
            Some(expires_at) => Exchange::AlreadyIssuedUnused { expires_at },
            None => Exchange::Used,
        }
    };
    tx.commit()?;
    Ok(outcome)
}

pub(super) fn mark_identity_used(
    c: &Connection,
    hash: &[u8; 32],
    now: i64,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE identities SET first_used_at = ?2 WHERE hash = ?1 AND first_used_at IS NULL",
        params![&hash[..], now],
    )?;
    Ok(())
}

pub(super) fn rotate_identity(
    c: &mut Connection,
    region: &str,
    old: &[u8; 32],
    new: &[u8; 32],
    now: i64,
    new_expires_at: i64,
    old_valid_until: i64,
) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let n = tx.execute(
        "UPDATE identities
         SET valid_until = MIN(COALESCE(valid_until, ?4), ?4),
             first_used_at = COALESCE(first_used_at, ?3)
         WHERE region = ?1 AND hash = ?2 AND revoked_at IS NULL
           AND (expires_at IS NULL OR expires_at > ?3)
           AND (valid_until IS NULL OR valid_until > ?3)
           AND EXISTS(SELECT 1 FROM regions r WHERE r.name = ?1 AND r.decommissioned_at IS NULL)",
        params![region, &old[..], now, old_valid_until],
    )?;
    if n != 1 {
        return Ok(false);
    }
    // The new identity belongs to the old one's zone.
    tx.execute(
        "INSERT INTO identities (region, zone, hash, created_at, expires_at)
         SELECT ?1, zone, ?2, ?3, ?4 FROM identities WHERE hash = ?5",
        params![region, &new[..], now_ms(), new_expires_at, &old[..]],
    )?;
    tx.commit()?;
    Ok(true)
}
