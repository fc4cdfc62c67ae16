//! Regions, zones, bootstrap tokens and identities.
//!
//! Left in the adapters, because the dialects do them differently: creating a region and adding
//! a zone (one upsert in PostgreSQL, a read then a write in SQLite), storing a bootstrap token
//! (PostgreSQL adds `RETURNING id` to [`INSERT_BOOTSTRAP_TOKEN`], SQLite asks for the last rowid),
//! and PostgreSQL's batched reads (`ANY($1)`).

use super::Sql;

/// The columns of a `RegionRecord`, from `regions r`. Whether the region has a live identity
/// is `$has` ... `$end` around the identity's condition: see [`REGION_SELECT_PROBED`].
macro_rules! region_select {
    () => {
        region_select!("EXISTS(SELECT 1", ")")
    };
    ($has:literal, $end:literal) => {
        concat!(
            "SELECT r.name, r.zone, r.created_at, r.decommissioned_at,
        ",
            $has,
            " FROM identities i WHERE i.region = r.name AND i.zone = r.zone
            AND i.revoked_at IS NULL",
            $end,
            "
     FROM regions r"
        )
    };
}

/// The columns of a `ZoneRecord`, from `zones z JOIN regions r`; `$now` is the database's
/// clock in milliseconds since the epoch, the one part the dialects write differently.
/// Whether a zone has a live identity is `$has` ... `$end` around the identity's condition:
/// see [`ZONE_SELECT_PROBED`].
macro_rules! zone_select {
    ($now:expr) => {
        zone_select!($now, "EXISTS(SELECT 1", ")")
    };
    ($now:expr, $has:literal, $end:literal) => {
        concat!(
            "SELECT z.region, z.zone, z.created_at,
        COALESCE(z.decommissioned_at, r.decommissioned_at),
        ",
            $has,
            " FROM identities i WHERE i.region = z.region AND i.zone = z.zone
            AND i.revoked_at IS NULL",
            $end,
            ",
        ",
            $has,
            " FROM identities i WHERE i.region = z.region AND i.zone = z.zone
            AND i.revoked_at IS NULL
            AND (i.expires_at IS NULL OR i.expires_at > ",
            $now,
            ")
            AND (i.valid_until IS NULL OR i.valid_until > ",
            $now,
            ")",
            $end,
            "
     FROM zones z JOIN regions r ON r.name = z.region"
        )
    };
}

/// The database's clock in milliseconds since the epoch, in PostgreSQL.
macro_rules! postgres_now {
    () => {
        "(extract(epoch from now()) * 1000)::bigint"
    };
}

/// Ends identity `$2` of region `$1` at `$4` (the earlier end when it already has one) if it is
/// valid at `$3` in a live region, recording `$3` as its first use when it has none. `$least`
/// (the smaller of two values) is the one word the dialects spell differently.
macro_rules! retire_identity {
    ($least:literal) => {
        concat!(
            "UPDATE identities
             SET valid_until = ",
            $least,
            "(COALESCE(valid_until, $4), $4),
                 first_used_at = COALESCE(first_used_at, $3)
             WHERE region = $1 AND hash = $2 AND revoked_at IS NULL
               AND (expires_at IS NULL OR expires_at > $3)
               AND (valid_until IS NULL OR valid_until > $3)
               AND EXISTS(SELECT 1 FROM regions r WHERE r.name = $1 AND r.decommissioned_at IS NULL)"
        )
    };
}

/// `SELECT` of a `RegionRecord`'s columns from `regions r`, for a `WHERE` and an `ORDER BY` to
/// follow.
pub(crate) const REGION_SELECT: &str = region_select!();

/// [`REGION_SELECT`] for a few regions named (PostgreSQL's batched reads, `= ANY($1)`): the same
/// columns, but whether a region has a live identity is a probe of the `identities_by_zone`
/// index per row (a scalar subquery with `LIMIT 1`). An `EXISTS` there may be planned as one
/// hashed scan of every identity, the better plan for listing every region and the worse by far
/// for ten: at 12,000 regions, with statistics a fast-growing table had not caught up with,
/// the zones of ten regions took 12.9 ms that way and 2.4 ms with probes.
pub(crate) const REGION_SELECT_PROBED: &str =
    region_select!("(SELECT true", " LIMIT 1) IS NOT NULL");

/// `SELECT` of a `ZoneRecord`'s columns from `zones z JOIN regions r`, for a `WHERE` and an
/// `ORDER BY` to follow. Whether a zone has a live identity is decided on the database's clock,
/// which the dialects read differently; the rest is the same text.
pub(crate) const ZONE_SELECT: Sql = Sql {
    postgres: zone_select!(postgres_now!()),
    sqlite: zone_select!("CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"),
};

/// [`ZONE_SELECT`]'s PostgreSQL form for the zones of a few regions named (batched reads): each
/// identity condition a probe per row, as in [`REGION_SELECT_PROBED`].
pub(crate) const ZONE_SELECT_PROBED: &str =
    zone_select!(postgres_now!(), "(SELECT true", " LIMIT 1) IS NOT NULL");

/// How a region's zones are ordered (after the region, when there are several): its first zone
/// first, then by creation.
pub(crate) const ZONE_ORDER: &str = "z.zone <> r.zone, z.created_at, z.zone";

/// Ends identity `$2` of region `$1` at `$4` (see `rotate_identity`): `LEAST` in PostgreSQL,
/// the two-argument `MIN` in SQLite; the rest is the same text.
pub(crate) const RETIRE_IDENTITY: Sql = Sql {
    postgres: retire_identity!("LEAST"),
    sqlite: to_sqlite!(retire_identity!("MIN")),
};

/// The columns of `IdentityFacts` (region, zone, whether it, its region or its zone was
/// revoked, its expiry and its overlap end), then the identity's hash, then whether its first
/// use is recorded, for a `WHERE` on `i`.
macro_rules! identity_facts_select {
    () => {
        "SELECT i.region, i.zone, i.revoked_at IS NOT NULL OR r.decommissioned_at IS NOT NULL
                        OR z.decommissioned_at IS NOT NULL,
                    i.expires_at, i.valid_until, i.hash, i.first_used_at IS NOT NULL
             FROM identities i JOIN regions r ON r.name = i.region
             LEFT JOIN zones z ON z.region = i.region AND z.zone = i.zone"
    };
}
pub(crate) use identity_facts_select;

statements! {
    /// Every region, by name.
    REGIONS = concat!(region_select!(), " ORDER BY r.name");
    /// Marks zone `$2` of region `$1` decommissioned at `$3`, unless it already is.
    DECOMMISSION_ZONE = "UPDATE zones SET decommissioned_at = $3
             WHERE region = $1 AND zone = $2 AND decommissioned_at IS NULL";
    /// Revokes at `$3` the identities of zone `$2` of region `$1` not yet revoked.
    REVOKE_ZONE_IDENTITIES = "UPDATE identities SET revoked_at = $3
         WHERE region = $1 AND zone = $2 AND revoked_at IS NULL";
    /// Revokes at `$3` the bootstrap tokens of zone `$2` of region `$1` not yet revoked.
    REVOKE_ZONE_BOOTSTRAP_TOKENS = "UPDATE bootstrap_tokens SET revoked_at = $3
         WHERE region = $1 AND zone = $2 AND revoked_at IS NULL";
    /// Marks every zone of a re-created region `$1` decommissioned (at `$2` unless it already
    /// was): only its first zone comes back, with [`COMMISSION_ZONE`].
    RETIRE_REGION_ZONES = "UPDATE zones SET decommissioned_at = COALESCE(decommissioned_at, $2)
             WHERE region = $1";
    /// Adds zone `$2` to region `$1`, created at `$3`, or commissions it again.
    COMMISSION_ZONE = "INSERT INTO zones (region, zone, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (region, zone) DO UPDATE
               SET decommissioned_at = NULL, created_at = EXCLUDED.created_at";
    /// Marks region `$1` decommissioned at `$2`, unless it already is.
    DECOMMISSION_REGION =
        "UPDATE regions SET decommissioned_at = $2 WHERE name = $1 AND decommissioned_at IS NULL";
    /// Revokes at `$2` the identities of region `$1` not yet revoked.
    REVOKE_REGION_IDENTITIES =
        "UPDATE identities SET revoked_at = $2 WHERE region = $1 AND revoked_at IS NULL";
    /// Revokes at `$2` the bootstrap tokens of region `$1` not yet revoked.
    REVOKE_REGION_BOOTSTRAP_TOKENS =
        "UPDATE bootstrap_tokens SET revoked_at = $2 WHERE region = $1 AND revoked_at IS NULL";
    /// Marks at `$2` every zone of region `$1` decommissioned, unless it already is.
    DECOMMISSION_REGION_ZONES =
        "UPDATE zones SET decommissioned_at = $2 WHERE region = $1 AND decommissioned_at IS NULL";
    /// Stores a bootstrap token of zone `$2` of region `$1`: its hash `$3`, salt `$4`, created at
    /// `$5`, expiring at `$6`.
    INSERT_BOOTSTRAP_TOKEN = "INSERT INTO bootstrap_tokens (region, zone, hash, salt, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)";
    /// What decides an identity with hash `$1` (the columns of `IdentityFacts`): its region,
    /// zone, whether it, its region or its zone was revoked, its expiry and its overlap end.
    IDENTITY_FACTS = concat!(identity_facts_select!(), " WHERE i.hash = $1");
    /// What decides a bootstrap token with hash `$1` (the columns of `BootstrapFacts`), with
    /// whether the identity it gave was never used.
    BOOTSTRAP_FACTS = "SELECT t.id, t.region, t.zone, t.salt, t.expires_at, t.used_at IS NOT NULL,
                    t.revoked_at IS NOT NULL,
                    r.decommissioned_at IS NOT NULL OR z.decommissioned_at IS NOT NULL,
                    COALESCE(i.id IS NOT NULL AND i.first_used_at IS NULL AND i.revoked_at IS NULL
                        AND i.valid_until IS NULL, FALSE)
             FROM bootstrap_tokens t JOIN regions r ON r.name = t.region
             LEFT JOIN zones z ON z.region = t.region AND z.zone = t.zone
             LEFT JOIN identities i ON i.bootstrap_id = t.id
             WHERE t.hash = $1";
    /// Marks bootstrap token `$1` of region `$2` used at `$3`, if it is neither used nor
    /// revoked (one row: the exchange won).
    USE_BOOTSTRAP_TOKEN = "UPDATE bootstrap_tokens SET used_at = $3
             WHERE id = $1 AND region = $2 AND used_at IS NULL AND revoked_at IS NULL";
    /// Stores identity `$2` of region `$1`, in the zone of bootstrap token `$5` that gave it,
    /// created at `$3`, expiring at `$4`.
    ISSUE_IDENTITY = "INSERT INTO identities (region, zone, hash, created_at, expires_at, bootstrap_id)
             SELECT $1, t.zone, $2, $3, $4, $5 FROM bootstrap_tokens t WHERE t.id = $5";
    /// The expiry of identity `$3`, when bootstrap token `$1` of region `$2` gave it and it was
    /// never used, revoked or rotated (a lost `welcome` repaired): no row otherwise.
    UNUSED_IDENTITY_OF_TOKEN = "SELECT i.expires_at FROM bootstrap_tokens t JOIN identities i ON i.bootstrap_id = t.id
                 WHERE t.id = $1 AND t.region = $2 AND i.hash = $3 AND t.revoked_at IS NULL
                   AND i.first_used_at IS NULL AND i.revoked_at IS NULL AND i.valid_until IS NULL";
    /// Records `$2` as the first use of identity `$1`, unless it was used before.
    MARK_IDENTITY_USED =
        "UPDATE identities SET first_used_at = $2 WHERE hash = $1 AND first_used_at IS NULL";
    /// Stores identity `$2` of region `$1` in place of identity `$5` (in its zone), created at
    /// `$3`, expiring at `$4`.
    ROTATED_IDENTITY = "INSERT INTO identities (region, zone, hash, created_at, expires_at)
         SELECT $1, zone, $2, $3, $4 FROM identities WHERE hash = $5";
}
