//! The SQL both store adapters run, written once: [`super::sqlite`] and [`super::postgres`] take
//! every statement whose text is the same in both dialects from here.
//!
//! A statement is written with PostgreSQL's placeholders (`$1`, `$2`, ...) and each [`Sql`] holds
//! it twice: as written, and for SQLite with `?1`, `?2`, ... in their place (made at compile
//! time). SQLite cannot take the `$1` text as it is: there `$1` is a *named* parameter, numbered
//! by where it first appears, not by its digits, so `SET x = $3 WHERE id = $1` would bind the
//! wrong values. Two statements differ in one expression only, written once with each
//! dialect's: the database's clock in [`ZONE_SELECT`], `LEAST`/`MIN` in [`RETIRE_IDENTITY`].
//!
//! What stays in the adapters is what the dialects do differently: upserts that SQLite writes
//! as a read then a write or as `INSERT OR IGNORE`, `RETURNING` (PostgreSQL's statements add it
//! to the shared text), row locks (`FOR UPDATE`), `unnest` and `ANY` for batches, typed
//! parameters (`$1::TEXT`), the column types of `CREATE TABLE`, and migrations. Reading a row
//! into a record stays there too: it goes through each driver's row and error types.

/// One statement in both dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sql {
    /// PostgreSQL's text: `$1`, `$2`, ... placeholders.
    pub(crate) postgres: &'static str,
    /// SQLite's text: `?1`, `?2`, ... placeholders.
    pub(crate) sqlite: &'static str,
}

/// `sql` with SQLite's placeholders: each `$` followed by a digit becomes `?`. The text keeps
/// its length, so this runs in a constant.
const fn sqlite_placeholders<const N: usize>(sql: &str) -> [u8; N] {
    let bytes = sql.as_bytes();
    assert!(bytes.len() == N, "the output holds the whole statement");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = if bytes[i] == b'$' && i + 1 < N && bytes[i + 1].is_ascii_digit() {
            b'?'
        } else {
            bytes[i]
        };
        i += 1;
    }
    out
}

/// Text made by [`sqlite_placeholders`] (ASCII replaced by ASCII, so still UTF-8).
const fn utf8(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => panic!("a statement is UTF-8 after its placeholders change"),
    }
}

/// The SQLite text of the PostgreSQL statement `$sql` (a `&'static str` constant expression).
macro_rules! to_sqlite {
    ($sql:expr) => {{
        const POSTGRES: &str = $sql;
        const SQLITE: [u8; POSTGRES.len()] = $crate::store::sql::sqlite_placeholders(POSTGRES);
        $crate::store::sql::utf8(&SQLITE)
    }};
}

/// Defines each `NAME = "text";` as an [`Sql`] constant: `text` for PostgreSQL, the same with
/// SQLite's placeholders for SQLite. Every statement needs its doc comment. Also lists them as
/// `ALL`, for the test that prepares every one on SQLite.
macro_rules! statements {
    ($( $(#[doc = $doc:expr])+ $name:ident = $sql:expr; )+) => {
        $(
            $(#[doc = $doc])+
            pub(crate) const $name: $crate::store::sql::Sql = $crate::store::sql::Sql {
                postgres: $sql,
                sqlite: to_sqlite!($sql),
            };
        )+
        /// Every statement of this module, by name.
        #[cfg(test)]
        pub(super) const ALL: &[(&str, $crate::store::sql::Sql)] = &[$((stringify!($name), $name)),+];
    };
}

// After the macros: the statement modules use them.
mod identity;
mod requests;
mod status;
mod tenancy;

pub(crate) use identity::*;
pub(crate) use requests::*;
pub(crate) use status::*;
pub(crate) use tenancy::*;

/// Indexes, created once their tables have every column they cover (`IF NOT EXISTS`: run on
/// every start).
pub(crate) const INDEXES: &str = "
CREATE INDEX IF NOT EXISTS identities_by_region ON identities(region);
CREATE INDEX IF NOT EXISTS identities_by_bootstrap ON identities(bootstrap_id);
CREATE INDEX IF NOT EXISTS identities_by_zone ON identities(region, zone);
CREATE INDEX IF NOT EXISTS bootstrap_by_region ON bootstrap_tokens(region);
CREATE INDEX IF NOT EXISTS service_instances_by_state ON service_instances(state);
CREATE INDEX IF NOT EXISTS sessions_by_replica ON sessions(replica);
CREATE INDEX IF NOT EXISTS requests_unanswered ON requests(region, seq)
    WHERE state IN ('queued', 'sent');
CREATE INDEX IF NOT EXISTS requests_queued ON requests(region) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS requests_unanswered_by_zone ON requests(region, zone, seq)
    WHERE state IN ('queued', 'sent');
CREATE INDEX IF NOT EXISTS bootstrap_by_zone ON bootstrap_tokens(region, zone);
CREATE INDEX IF NOT EXISTS requests_finished ON requests(completed_at)
    WHERE state IN ('done', 'cancelled');
CREATE INDEX IF NOT EXISTS requests_failed ON requests(completed_at) WHERE error IS NOT NULL;
CREATE INDEX IF NOT EXISTS zone_state_history_by_zone ON zone_state_history(region, zone, n);
";

statements! {
    /// The schema version stored (`NULL` in a database that has none).
    SCHEMA_VERSION = "SELECT MAX(version) FROM schema_version";
    /// Forgets the stored schema version, before [`SET_SCHEMA_VERSION`].
    CLEAR_SCHEMA_VERSION = "DELETE FROM schema_version";
    /// Stores schema version `$1`.
    SET_SCHEMA_VERSION = "INSERT INTO schema_version (version) VALUES ($1)";
}

/// Every shared statement, by name; the dialect-specific forms ([`ZONE_SELECT`],
/// [`RETIRE_IDENTITY`]) too.
#[cfg(test)]
pub(crate) fn all() -> Vec<(&'static str, Sql)> {
    let mut out: Vec<(&'static str, Sql)> = Vec::new();
    for list in [ALL, identity::ALL, requests::ALL, status::ALL, tenancy::ALL] {
        out.extend_from_slice(list);
    }
    out.push(("ZONE_SELECT", ZONE_SELECT));
    out.push(("RETIRE_IDENTITY", RETIRE_IDENTITY));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_gets_numbered_placeholders_and_nothing_else_changes() {
        assert_eq!(
            SET_SCHEMA_VERSION.sqlite,
            "INSERT INTO schema_version (version) VALUES (?1)"
        );
        assert_eq!(
            REVOKE_TENANT_TOKEN.postgres.len(),
            REVOKE_TENANT_TOKEN.sqlite.len()
        );
        for (name, sql) in all() {
            assert!(!sql.sqlite.contains('$'), "{name}: {}", sql.sqlite);
            let back = sql.sqlite.replace('?', "$");
            if name == "ZONE_SELECT" || name == "RETIRE_IDENTITY" {
                assert_ne!(back, sql.postgres, "{name} differs between the dialects");
            } else {
                assert_eq!(back, sql.postgres, "{name}: only the placeholders differ");
            }
        }
    }
}
