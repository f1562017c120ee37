//! The `sqlite:PATH` store: the escrow rules on rows of one SQLite file (rusqlite, bundled
//! SQLite, WAL). Every operation is one `BEGIN IMMEDIATE` transaction: it takes the file's
//! write lock first, so steps of several processes sharing the file are serialised and
//! each sees the rows the previous one committed. Waiting for the lock is bounded
//! ([`busy`]: SQLite's busy wait of `BUSY_TIMEOUT_MS` a try, then tries again with a
//! backoff, for at most `BUSY_WAIT_MS_MAX` in all); past it the step fails
//! [`StoreError::Unavailable`], saying how long it waited, and nothing is written.

mod busy;
mod keys;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::escrow::{self, DayRow, LeaseRow, MandateRow};
use super::sql::{
    HELD_COLUMNS, HeldColumns, LEASE_COLUMNS, LeaseColumns, held_columns, held_row, int, lease_row, uint,
};
use super::steps::{self, NewLease, OpenLeases, RowTx};
use super::{
    FlushEntry, FlushOutcome, GrantRequest, HELD_KEEP_S, HeldCall, Lease, LedgerStore, MANDATE_ID_BYTES_MAX,
    MandateStatus, NODE_NAME_BYTES_MAX, NodeLeases, Reconciled, StoreError, StoreLimits, check_flush, check_name,
};

/// The schema this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 3;
pub use busy::{BUSY_BACKOFF_MS_MAX, BUSY_BACKOFF_MS_MIN, BUSY_TIMEOUT_MS, BUSY_WAIT_MS_MAX};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS mandates (
    id TEXT PRIMARY KEY, total_limit INTEGER NOT NULL, day_limit INTEGER,
    spent INTEGER NOT NULL, leased INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS days (
    mandate TEXT NOT NULL, day INTEGER NOT NULL, spent INTEGER NOT NULL, leased INTEGER NOT NULL,
    PRIMARY KEY (mandate, day));
CREATE TABLE IF NOT EXISTS leases (
    id INTEGER PRIMARY KEY, node TEXT NOT NULL, mandate TEXT NOT NULL, day INTEGER,
    outstanding INTEGER NOT NULL, settled INTEGER NOT NULL, expires INTEGER NOT NULL, state TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS leases_by_node ON leases (node, state);
CREATE INDEX IF NOT EXISTS leases_by_mandate ON leases (mandate, state);
CREATE TABLE IF NOT EXISTS held_calls (
    id TEXT PRIMARY KEY, mandate TEXT NOT NULL, agent TEXT NOT NULL, at INTEGER NOT NULL,
    max_cost INTEGER, by_capability INTEGER NOT NULL, worst INTEGER NOT NULL, expires INTEGER NOT NULL,
    taken INTEGER NOT NULL DEFAULT 0);
";

/// A store in one SQLite file.
pub struct SqliteStore {
    conn: parking_lot::Mutex<Connection>,
    /// How long a step may wait for the write lock in all, in milliseconds.
    busy_wait_ms_max: u64,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

fn unavailable(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// Why one try at opening the file failed: SQLite's error (a busy one is tried again) or
/// the store's.
enum OpenFailure {
    Sql(rusqlite::Error),
    Store(StoreError),
}

impl From<rusqlite::Error> for OpenFailure {
    fn from(e: rusqlite::Error) -> Self {
        OpenFailure::Sql(e)
    }
}

/// One try at opening the file: the schema version checked, WAL, `synchronous = FULL`, the
/// schema written when the file is older. (SQLite may answer a journal-mode change busy
/// without its busy handler: two nodes starting together on a fresh file once failed
/// "database is locked" in `.ci/store-bench`; such a try is tried again like any other.)
fn try_open(path: &Path) -> Result<Connection, OpenFailure> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(OpenFailure::Store(StoreError::NewerSchema { found: version, known: SCHEMA_VERSION }));
    }
    let mode = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenFailure::Store(StoreError::Unavailable(format!(
            "the file stays in journal mode `{mode}`, not WAL"
        ))));
    }
    // Every commit reaches the disk before it is acknowledged.
    conn.pragma_update(None, "synchronous", "FULL")?;
    if version < SCHEMA_VERSION {
        let keys = keys::SCHEMA;
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} {keys} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))?;
    }
    Ok(conn)
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`. A file written by a newer schema
    /// is refused before anything is written.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        SqliteStore::open_with_busy_wait(path, BUSY_WAIT_MS_MAX)
    }

    /// [`SqliteStore::open`], each step (opening included) waiting at most
    /// `busy_wait_ms_max` in all for another process's write lock.
    pub fn open_with_busy_wait(path: &Path, busy_wait_ms_max: u64) -> Result<Self, StoreError> {
        let mut patience = busy::Patience::new(busy_wait_ms_max);
        loop {
            match try_open(path) {
                Ok(conn) => return Ok(SqliteStore { conn: parking_lot::Mutex::new(conn), busy_wait_ms_max }),
                Err(OpenFailure::Sql(e)) if busy::is_busy(&e) => patience.busy(&e)?,
                Err(OpenFailure::Sql(e)) => return Err(unavailable(e)),
                Err(OpenFailure::Store(e)) => return Err(e),
            }
        }
    }

    /// Runs `step` in one write transaction: committed whole when it returns `Ok`, rolled
    /// back otherwise. A try that finds the write lock busy (taking it, or committing) is
    /// rolled back and made again, within the store's patience (`busy`).
    fn write<T>(
        &self,
        mut step: impl FnMut(&rusqlite::Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock();
        let mut patience = busy::Patience::new(self.busy_wait_ms_max);
        loop {
            let tried = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
                Ok(tx) => {
                    let out = step(&tx)?;
                    tx.commit().map(|()| out)
                }
                Err(e) => Err(e),
            };
            match tried {
                Ok(out) => return Ok(out),
                Err(e) if busy::is_busy(&e) => patience.busy(&e)?,
                Err(e) => return Err(unavailable(e)),
            }
        }
    }
}

/// One step's row I/O, inside the step's `BEGIN IMMEDIATE` transaction (the file's write
/// lock is held for the whole step: no row lock to take).
struct Tx<'a, 'c>(&'a rusqlite::Transaction<'c>);

impl RowTx for Tx<'_, '_> {
    fn ensure_mandate(&mut self, id: &str, limits: StoreLimits) -> Result<(), StoreError> {
        self.0
            .execute(
                "INSERT INTO mandates (id, total_limit, day_limit, spent, leased) VALUES (?1, ?2, ?3, 0, 0)
                 ON CONFLICT (id) DO NOTHING",
                params![id, int(limits.total_micros)?, limits.per_day_micros.map(int).transpose()?],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn load_mandate(&mut self, id: &str) -> Result<MandateRow, StoreError> {
        let row = self
            .0
            .query_row("SELECT total_limit, day_limit, spent, leased FROM mandates WHERE id = ?1", [id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
            })
            .optional()
            .map_err(unavailable)?
            .ok_or_else(|| StoreError::UnknownMandate(id.to_owned()))?;
        Ok(MandateRow {
            limits: StoreLimits { total_micros: uint(row.0)?, per_day_micros: row.1.map(uint).transpose()? },
            spent_micros: uint(row.2)?,
            leased_micros: uint(row.3)?,
        })
    }

    fn save_mandate(&mut self, id: &str, m: &MandateRow) -> Result<(), StoreError> {
        self.0
            .execute(
                "INSERT INTO mandates (id, total_limit, day_limit, spent, leased) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET total_limit = ?2, day_limit = ?3, spent = ?4, leased = ?5",
                params![
                    id,
                    int(m.limits.total_micros)?,
                    m.limits.per_day_micros.map(int).transpose()?,
                    int(m.spent_micros)?,
                    int(m.leased_micros)?
                ],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn load_day(&mut self, mandate: &str, day: u64) -> Result<DayRow, StoreError> {
        let row = self
            .0
            .query_row(
                "SELECT spent, leased FROM days WHERE mandate = ?1 AND day = ?2",
                params![mandate, int(day)?],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )
            .optional()
            .map_err(unavailable)?;
        match row {
            Some((spent, leased)) => Ok(DayRow { spent_micros: uint(spent)?, leased_micros: uint(leased)? }),
            None => Ok(DayRow::default()),
        }
    }

    fn save_day(&mut self, mandate: &str, day: u64, d: &DayRow) -> Result<(), StoreError> {
        self.0
            .execute(
                "INSERT INTO days (mandate, day, spent, leased) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (mandate, day) DO UPDATE SET spent = ?3, leased = ?4",
                params![mandate, int(day)?, int(d.spent_micros)?, int(d.leased_micros)?],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn purge_closed(&mut self, mandate: &str, expired_before_unix: i64) -> Result<(), StoreError> {
        self.0
            .execute(
                "DELETE FROM leases WHERE mandate = ?1 AND state = 'closed' AND expires < ?2",
                params![mandate, expired_before_unix],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn open_leases(&mut self, mandate: &str, node: &str) -> Result<OpenLeases, StoreError> {
        let (others, held): (i64, i64) = self
            .0
            .query_row(
                "SELECT COUNT(DISTINCT CASE WHEN node <> ?2 THEN node END),
                        COALESCE(SUM(CASE WHEN node = ?2 THEN outstanding ELSE 0 END), 0)
                 FROM leases WHERE mandate = ?1 AND state = 'open'",
                params![mandate, node],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(unavailable)?;
        Ok(OpenLeases { other_nodes: uint(others)?, held_micros: uint(held)? })
    }

    fn insert_lease(&mut self, new: &NewLease<'_>) -> Result<u64, StoreError> {
        self.0
            .execute(
                "INSERT INTO leases (node, mandate, day, outstanding, settled, expires, state)
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, 'open')",
                params![
                    new.node,
                    new.mandate,
                    new.day.map(int).transpose()?,
                    int(new.amount_micros)?,
                    new.expires_unix
                ],
            )
            .map_err(unavailable)?;
        uint(self.0.last_insert_rowid())
    }

    fn load_lease(&mut self, id: u64) -> Result<(MandateRow, LeaseRow), StoreError> {
        let found = self
            .0
            .query_row(&format!("SELECT {LEASE_COLUMNS} FROM leases WHERE id = ?1"), [int(id)?], lease_of)
            .optional()
            .map_err(unavailable)?;
        let lease = lease_row(found.ok_or(StoreError::UnknownLease(id))?)?;
        Ok((self.load_mandate(&lease.mandate)?, lease))
    }

    fn save_lease(&mut self, l: &LeaseRow) -> Result<(), StoreError> {
        // Closed and reconciled leases are kept: a late or repeated flush finds them and
        // moves nothing (closed ones are purged `CLOSED_LEASE_KEEP_S` after their expiry,
        // on a grant).
        self.0
            .execute(
                "UPDATE leases SET outstanding = ?2, settled = ?3, expires = ?4, state = ?5 WHERE id = ?1",
                params![
                    int(l.id)?,
                    int(l.outstanding_micros)?,
                    int(l.settled_micros)?,
                    l.expires_unix,
                    l.state.as_str()
                ],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn open_lease_ids(&mut self, node: &str, expired_by_unix: Option<i64>) -> Result<Vec<u64>, StoreError> {
        let mut stmt = self
            .0
            .prepare(
                "SELECT id FROM leases WHERE node = ?1 AND state = 'open' AND (?2 = 0 OR expires <= ?3) ORDER BY id",
            )
            .map_err(unavailable)?;
        let (expired_only, by) = (i64::from(expired_by_unix.is_some()), expired_by_unix.unwrap_or(0));
        let ids = stmt
            .query_map(params![node, expired_only, by], |r| r.get::<_, i64>(0))
            .map_err(unavailable)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(unavailable)?;
        ids.into_iter().map(uint).collect()
    }
}

fn lease_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseColumns> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
}

fn held_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<HeldColumns> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
}

impl LedgerStore for SqliteStore {
    fn publish_limits(&self, mandate: &str, limits: StoreLimits, raise: bool) -> Result<StoreLimits, StoreError> {
        check_name("a mandate id", mandate, MANDATE_ID_BYTES_MAX)?;
        self.write(|tx| steps::publish_limits(&mut Tx(tx), mandate, limits, raise))
    }

    fn grant(&self, request: &GrantRequest) -> Result<Option<Lease>, StoreError> {
        check_name("a node name", &request.node, NODE_NAME_BYTES_MAX)?;
        self.write(|tx| steps::grant(&mut Tx(tx), request))
    }

    fn flush(&self, node: &str, entries: &[FlushEntry], now_unix: i64) -> Result<Vec<FlushOutcome>, StoreError> {
        check_flush(entries)?;
        self.write(|tx| steps::flush(&mut Tx(tx), node, entries, now_unix))
    }

    fn reconcile(&self, node: &str, now_unix: i64, expired_only: bool) -> Result<Reconciled, StoreError> {
        self.write(|tx| steps::reconcile(&mut Tx(tx), node, now_unix, expired_only, &escrow::reconcile))
    }

    fn status(&self, mandate: Option<&str>) -> Result<Vec<MandateStatus>, StoreError> {
        // A read in a write transaction, so the figures are one consistent moment.
        self.write(|tx| {
            let mut stmt =
                tx.prepare("SELECT id FROM mandates WHERE (?1 IS NULL OR id = ?1) ORDER BY id").map_err(unavailable)?;
            let ids = stmt
                .query_map([mandate], |r| r.get::<_, String>(0))
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            drop(stmt);
            if let Some(m) = mandate
                && ids.is_empty()
            {
                return Err(StoreError::UnknownMandate(m.to_owned()));
            }
            let mut out = Vec::new();
            for id in ids {
                let row = Tx(tx).load_mandate(&id)?;
                let mut stmt = tx
                    .prepare(
                        "SELECT node, SUM(outstanding), MAX(expires) FROM leases
                         WHERE mandate = ?1 AND state = 'open' GROUP BY node ORDER BY node",
                    )
                    .map_err(unavailable)?;
                let nodes = stmt
                    .query_map([&id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))
                    .map_err(unavailable)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(unavailable)?;
                let nodes = nodes
                    .into_iter()
                    .map(|(node, leased, expires)| {
                        Ok(NodeLeases { node, leased_micros: uint(leased)?, lease_expires_unix: expires })
                    })
                    .collect::<Result<Vec<_>, StoreError>>()?;
                out.push(MandateStatus {
                    mandate: id,
                    limits: row.limits,
                    spent_micros: row.spent_micros,
                    leased_micros: row.leased_micros,
                    nodes,
                });
            }
            Ok(out)
        })
    }

    fn hold(&self, call: &HeldCall) -> Result<(), StoreError> {
        call.check()?;
        let c = held_columns(call)?;
        self.write(|tx| {
            tx.execute(
                &format!("INSERT OR IGNORE INTO held_calls ({HELD_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                params![c.0, c.1, c.2, c.3, c.4, c.5, c.6, c.7],
            )
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn take_held(&self, id: &str, now_unix: i64) -> Result<Option<HeldCall>, StoreError> {
        self.write(|tx| {
            // Taken ids stay as tombstones (a copy sent again cannot bring a call back);
            // rows expired long ago are purged.
            tx.execute("DELETE FROM held_calls WHERE expires < ?1", [now_unix.saturating_sub(HELD_KEEP_S)])
                .map_err(unavailable)?;
            let row: Option<HeldColumns> = tx
                .query_row(
                    &format!("UPDATE held_calls SET taken = 1 WHERE id = ?1 AND taken = 0 RETURNING {HELD_COLUMNS}"),
                    [id],
                    held_of,
                )
                .optional()
                .map_err(unavailable)?;
            row.map(held_row).transpose().map(|c| c.filter(|c| c.expires_unix >= now_unix))
        })
    }

    fn release_held(&self, id: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute("UPDATE held_calls SET taken = 0 WHERE id = ?1", [id]).map_err(unavailable)?;
            Ok(())
        })
    }

    fn held_calls(&self, mandate: Option<&str>, now_unix: i64) -> Result<Vec<HeldCall>, StoreError> {
        self.write(|tx| {
            let mut stmt = tx
                .prepare(&format!(
                    "SELECT {HELD_COLUMNS} FROM held_calls WHERE (?1 IS NULL OR mandate = ?1) AND expires >= ?2 AND taken = 0 ORDER BY id"
                ))
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![mandate, now_unix], held_of)
                .map_err(unavailable)?
                .collect::<Result<Vec<HeldColumns>, _>>()
                .map_err(unavailable)?;
            rows.into_iter().map(held_row).collect()
        })
    }

    fn claim_key(&self, claim: &super::KeyClaim<'_>) -> Result<super::KeyState, StoreError> {
        self.write(|tx| keys::claim(tx, claim))
    }

    fn answer_key(&self, scope: &str, key: &str, answer: super::KeyAnswer) -> Result<(), StoreError> {
        self.write(|tx| keys::answer(tx, scope, key, &answer))
    }

    fn forget_key(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.write(|tx| keys::forget(tx, scope, key))
    }

    fn forget_node_keys(&self, node: &str) -> Result<u64, StoreError> {
        self.write(|tx| keys::forget_node(tx, node))
    }

    fn prune_keys(&self, now_unix: i64, keys_max: u64) -> Result<u64, StoreError> {
        self.write(|tx| keys::prune(tx, now_unix, keys_max))
    }
}
