//! Regions, bootstrap tokens and identities in SQLite. The statements PostgreSQL shares are in
//! [`crate::store::sql`]; the ones here are SQLite's own.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::bytes32;
use crate::store::sql::{self, REGION_SELECT, ZONE_ORDER, ZONE_SELECT};
use crate::store::{Credential, Exchange, Refusal, RegionRecord, ZoneRecord, now_ms};

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
        "{} ORDER BY z.region, {ZONE_ORDER}",
        ZONE_SELECT.sqlite
    ))?;
    let rows = stmt.query_map([], zone_row)?;
    rows.collect()
}

pub(super) fn region_zones(c: &Connection, region: &str) -> rusqlite::Result<Vec<ZoneRecord>> {
    let mut stmt = c.prepare(&format!(
        "{} WHERE z.region = ?1 ORDER BY {ZONE_ORDER}",
        ZONE_SELECT.sqlite
    ))?;
    let rows = stmt.query_map([region], zone_row)?;
    rows.collect()
}

pub(super) fn add_zone(c: &mut Connection, region: &str, zone: &str) -> rusqlite::Result<bool> {
    // SQLite's own: a read, then the upsert (PostgreSQL inserts from the region's row).
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
    let n = tx.execute(sql::DECOMMISSION_ZONE.sqlite, params![region, zone, now])?;
    tx.execute(
        sql::REVOKE_ZONE_IDENTITIES.sqlite,
        params![region, zone, now],
    )?;
    tx.execute(
        sql::REVOKE_ZONE_BOOTSTRAP_TOKENS.sqlite,
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
    // SQLite's own: a read, then a write (PostgreSQL upserts the region's row).
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
            tx.execute(sql::RETIRE_REGION_ZONES.sqlite, params![region, now_ms()])?;
            tx.execute(sql::COMMISSION_ZONE.sqlite, params![region, zone, now_ms()])?;
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
    let mut stmt = c.prepare(sql::REGIONS.sqlite)?;
    let rows = stmt.query_map([], region_row)?;
    rows.collect()
}

pub(super) fn decommission(c: &mut Connection, region: &str) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let now = now_ms();
    let n = tx.execute(sql::DECOMMISSION_REGION.sqlite, params![region, now])?;
    tx.execute(sql::REVOKE_REGION_IDENTITIES.sqlite, params![region, now])?;
    tx.execute(
        sql::REVOKE_REGION_BOOTSTRAP_TOKENS.sqlite,
        params![region, now],
    )?;
    tx.execute(sql::DECOMMISSION_REGION_ZONES.sqlite, params![region, now])?;
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
        sql::REVOKE_ZONE_BOOTSTRAP_TOKENS.sqlite,
        params![region, zone, now],
    )?;
    tx.execute(
        sql::INSERT_BOOTSTRAP_TOKEN.sqlite,
        params![region, zone, &hash[..], &salt[..], now, expires_at],
    )?;
    // SQLite's own: the id from the connection (PostgreSQL's statement returns it).
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
        .query_row(sql::IDENTITY_FACTS.sqlite, [&hash[..]], |r| {
            Ok(crate::store::IdentityFacts {
                region: r.get(0)?,
                zone: r.get(1)?,
                revoked: r.get(2)?,
                expires_at: r.get(3)?,
                valid_until: r.get(4)?,
                used: r.get(6)?,
            })
        })
        .optional()?;
    if let Some(facts) = identity {
        return Ok(facts.decide(now));
    }
    let bootstrap = c
        .query_row(sql::BOOTSTRAP_FACTS.sqlite, [&hash[..]], |r| {
            Ok(crate::store::BootstrapFacts {
                id: r.get(0)?,
                region: r.get(1)?,
                zone: r.get(2)?,
                salt: bytes32(r, 3, "a bootstrap salt")?,
                expires_at: r.get(4)?,
                used: r.get(5)?,
                superseded: r.get(6)?,
                decommissioned: r.get(7)?,
                identity_unused: r.get(8)?,
            })
        })
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
        sql::USE_BOOTSTRAP_TOKEN.sqlite,
        params![bootstrap_id, region, now],
    )?;
    let outcome = if n == 1 {
        tx.execute(
            sql::ISSUE_IDENTITY.sqlite,
            params![region, &identity_hash[..], now, expires_at, bootstrap_id],
        )?;
        Exchange::Issued
    } else {
        let again: Option<Option<i64>> = tx
            .query_row(
                sql::UNUSED_IDENTITY_OF_TOKEN.sqlite,
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
    c.execute(sql::MARK_IDENTITY_USED.sqlite, params![&hash[..], now])?;
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
        sql::RETIRE_IDENTITY.sqlite,
        params![region, &old[..], now, old_valid_until],
    )?;
    if n != 1 {
        return Ok(false);
    }
    // The new identity belongs to the old one's zone.
    tx.execute(
        sql::ROTATED_IDENTITY.sqlite,
        params![region, &new[..], now_ms(), new_expires_at, &old[..]],
    )?;
    tx.commit()?;
    Ok(true)
}
