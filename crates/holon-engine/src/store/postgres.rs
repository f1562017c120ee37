//! The `postgres://…` store, shared by many nodes: the escrow rules on rows of one
//! PostgreSQL database (the synchronous client of rust-postgres). Every operation is one
//! transaction that locks the rows it changes first (`SELECT … FOR UPDATE`, a mandate's row
//! before its day's and its leases'), so concurrent steps on one mandate are serialised by
//! the database and each sees what the previous one committed; steps on different mandates
//! run in parallel. A statement waits at most `STATEMENT_TIMEOUT_MS` (for a lock, say);
//! past it, or with the database gone, the step fails [`StoreError::Unavailable`] and
//! nothing is written.
//!
//! A store handle keeps a small pool of connections (r2d2): at most
//! `POOL_CONNECTIONS_MAX`, opened when a step needs one, each tested before a step uses it.
//! A connection that is broken (the server restarted, the network dropped it) is
//! discarded and a new one opened, so a handle recovers by itself when the server comes
//! back; until then each step waits at most `POOL_WAIT_MS` for a connection and fails
//! `Unavailable`.

use std::sync::Arc;
use std::time::Duration;

use postgres::{NoTls, Transaction};
use r2d2_postgres::{PostgresConnectionManager, r2d2};

mod keys;
mod schema;

use super::escrow::{self, DayRow, LeaseRow, MandateRow};
use super::sql::{HELD_COLUMNS, LEASE_COLUMNS, held_columns, held_row, int, lease_row, uint};
use super::steps::{self, NewLease, OpenLeases, RowTx};
use super::{
    FlushEntry, FlushOutcome, GrantRequest, HELD_KEEP_S, HeldCall, Lease, LedgerStore, MANDATE_ID_BYTES_MAX,
    MandateStatus, NODE_NAME_BYTES_MAX, NodeLeases, Reconciled, StoreError, StoreLimits, check_flush, check_name,
};

/// The schema this build writes (table `holon_schema`).
pub const SCHEMA_VERSION: i32 = 3;
/// Longest a statement may run (a lock wait included), in milliseconds.
pub const STATEMENT_TIMEOUT_MS: u64 = 5_000;
/// Longest wait to connect, in seconds: the socket and the server's greeting both.
pub const CONNECT_TIMEOUT_S: u64 = 5;
/// Most connections one store handle holds open. A node steps from one background thread,
/// so it uses one; the rest serve a handle shared by a few threads.
pub const POOL_CONNECTIONS_MAX: u32 = 4;
/// Longest a step waits for a connection (an idle one, or a new one while the server is
/// away), in milliseconds; past it the step fails `Unavailable` with nothing written.
pub const POOL_WAIT_MS: u64 = 5_000;
/// An idle connection is closed after this many seconds.
pub const POOL_IDLE_S: u64 = 600;
/// A connection is closed and replaced after this many seconds, idle or not.
pub const POOL_LIFETIME_S: u64 = 1_800;
/// Threads a handle's pool keeps to open connections and close idle ones.
const POOL_THREADS: usize = 1;

type Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;

/// A store in one PostgreSQL database.
pub struct PostgresStore {
    pool: Pool,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// A client error as the store's error, with the server's own words: the client's
/// `Display` says only "db error" for an error the server reported, which told an operator
/// (and a failed test) nothing.
fn unavailable(e: postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Unavailable(format!("{e}: {} (SQLSTATE {})", db.message(), db.code().code())),
        None => match std::error::Error::source(&e) {
            Some(cause) => StoreError::Unavailable(format!("{e}: {cause}")),
            None => StoreError::Unavailable(e.to_string()),
        },
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`) and creates the tables if they
    /// are missing. A database written by a newer schema is refused before anything is
    /// written. A server that cannot be reached is an error at once: a handle is only made
    /// for a server that answered; later steps reconnect by themselves.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let mut config: postgres::Config = url.parse().map_err(unavailable)?;
        config.connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_S));
        config.options(&format!("-c statement_timeout={STATEMENT_TIMEOUT_MS}"));
        // The schema on a connection of its own, outside the pool: the pool would retry a
        // refused connection for `POOL_WAIT_MS` where this fails at once.
        let mut client = first_connection(&config)?;
        schema::create(&mut client)?;
        drop(client);
        let threads = scheduled_thread_pool::ScheduledThreadPool::builder()
            .num_threads(POOL_THREADS)
            .thread_name_pattern("holon-store-pg-{}")
            // A dropped handle does not keep retrying a connection nobody will use.
            .on_drop_behavior(scheduled_thread_pool::OnPoolDropBehavior::DiscardPendingScheduled)
            .build();
        let pool = r2d2::Pool::builder()
            .max_size(POOL_CONNECTIONS_MAX)
            // Opened when a step needs one, not kept open for nothing.
            .min_idle(Some(0))
            .connection_timeout(Duration::from_millis(POOL_WAIT_MS))
            // No test query before each step (it would double the round trips of every
            // step): a connection the server dropped (it restarted) fails its step, which
            // writes nothing and reports `Unavailable`, and is discarded on its way back
            // (`has_broken`); the caller's next step gets a fresh one.
            .test_on_check_out(false)
            .idle_timeout(Some(Duration::from_secs(POOL_IDLE_S)))
            .max_lifetime(Some(Duration::from_secs(POOL_LIFETIME_S)))
            .thread_pool(Arc::new(threads))
            .build_unchecked(PostgresConnectionManager::new(config, NoTls));
        Ok(PostgresStore { pool })
    }

    /// Runs `step` in one transaction on a connection of the pool: committed whole when it
    /// returns `Ok`, rolled back otherwise (dropping an uncommitted transaction rolls it
    /// back). A connection that broke on the way is discarded when it returns to the pool
    /// (`has_broken`).
    fn write<T>(&self, step: impl FnOnce(&mut Transaction<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut client = self.pool.get().map_err(|e| {
            StoreError::Unavailable(format!(
                "no connection to PostgreSQL within {POOL_WAIT_MS} ms ({e}); check that the server is up and reachable: \
                 this store reconnects by itself once it is"
            ))
        })?;
        let mut tx = client.transaction().map_err(unavailable)?;
        let out = step(&mut tx)?;
        tx.commit().map_err(unavailable)?;
        Ok(out)
    }
}

/// The first connection, within [`CONNECT_TIMEOUT_S`] whole. The client's own timeout covers
/// only the socket: a peer that accepts and never greets (a hung server, a port that is not
/// PostgreSQL's) would hold the caller for ever. The connection is made on a thread of its
/// own; one that misses the deadline is left to end when its peer closes.
fn first_connection(config: &postgres::Config) -> Result<postgres::Client, StoreError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let config = config.clone();
    std::thread::Builder::new()
        .name("holon-store-pg-connect".to_owned())
        .spawn(move || {
            let _receiver_gone = tx.send(config.connect(NoTls));
        })
        .map_err(|e| StoreError::Unavailable(format!("cannot start a thread to connect: {e}")))?;
    match rx.recv_timeout(Duration::from_secs(CONNECT_TIMEOUT_S)) {
        Ok(connected) => connected.map_err(unavailable),
        Err(_) => Err(StoreError::Unavailable(format!(
            "the server accepted the connection but did not answer within {CONNECT_TIMEOUT_S} s: check that it is PostgreSQL, and up"
        ))),
    }
}

/// One step's row I/O, inside the step's transaction: a row the step writes is read with
/// `FOR UPDATE`, mandates first and in the order of their ids; a day or lease row only under
/// its mandate's lock.
struct Tx<'a, 'b>(&'a mut Transaction<'b>);

impl RowTx for Tx<'_, '_> {
    fn ensure_mandate(&mut self, id: &str, limits: StoreLimits) -> Result<(), StoreError> {
        self.0
            .execute(
                "INSERT INTO holon_mandates (id, total_limit, day_limit, spent, leased) VALUES ($1, $2, $3, 0, 0)
                 ON CONFLICT DO NOTHING",
                &[&id, &int(limits.total_micros)?, &limits.per_day_micros.map(int).transpose()?],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn load_mandate(&mut self, id: &str) -> Result<MandateRow, StoreError> {
        let row = self
            .0
            .query_opt(
                "SELECT total_limit, day_limit, spent, leased FROM holon_mandates WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .map_err(unavailable)?
            .ok_or_else(|| StoreError::UnknownMandate(id.to_owned()))?;
        Ok(MandateRow {
            limits: StoreLimits {
                total_micros: uint(row.get(0))?,
                per_day_micros: row.get::<_, Option<i64>>(1).map(uint).transpose()?,
            },
            spent_micros: uint(row.get(2))?,
            leased_micros: uint(row.get(3))?,
        })
    }

    fn save_mandate(&mut self, id: &str, m: &MandateRow) -> Result<(), StoreError> {
        let day_limit = m.limits.per_day_micros.map(int).transpose()?;
        self.0
            .execute(
                "INSERT INTO holon_mandates (id, total_limit, day_limit, spent, leased) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (id) DO UPDATE SET total_limit = $2, day_limit = $3, spent = $4, leased = $5",
                &[&id, &int(m.limits.total_micros)?, &day_limit, &int(m.spent_micros)?, &int(m.leased_micros)?],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn load_day(&mut self, mandate: &str, day: u64) -> Result<DayRow, StoreError> {
        let day = int(day)?;
        self.0
            .execute(
                "INSERT INTO holon_days (mandate, day, spent, leased) VALUES ($1, $2, 0, 0) ON CONFLICT DO NOTHING",
                &[&mandate, &day],
            )
            .map_err(unavailable)?;
        let row = self
            .0
            .query_one(
                "SELECT spent, leased FROM holon_days WHERE mandate = $1 AND day = $2 FOR UPDATE",
                &[&mandate, &day],
            )
            .map_err(unavailable)?;
        Ok(DayRow { spent_micros: uint(row.get(0))?, leased_micros: uint(row.get(1))? })
    }

    fn save_day(&mut self, mandate: &str, day: u64, d: &DayRow) -> Result<(), StoreError> {
        self.0
            .execute(
                "UPDATE holon_days SET spent = $3, leased = $4 WHERE mandate = $1 AND day = $2",
                &[&mandate, &int(day)?, &int(d.spent_micros)?, &int(d.leased_micros)?],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn purge_closed(&mut self, mandate: &str, expired_before_unix: i64) -> Result<(), StoreError> {
        self.0
            .execute(
                "DELETE FROM holon_leases WHERE mandate = $1 AND state = 'closed' AND expires < $2",
                &[&mandate, &expired_before_unix],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn open_leases(&mut self, mandate: &str, node: &str) -> Result<OpenLeases, StoreError> {
        let row = self
            .0
            .query_one(
                "SELECT COUNT(DISTINCT CASE WHEN node <> $2 THEN node END),
                        COALESCE(SUM(CASE WHEN node = $2 THEN outstanding ELSE 0 END), 0)::BIGINT
                 FROM holon_leases WHERE mandate = $1 AND state = 'open'",
                &[&mandate, &node],
            )
            .map_err(unavailable)?;
        Ok(OpenLeases { other_nodes: uint(row.get(0))?, held_micros: uint(row.get(1))? })
    }

    fn insert_lease(&mut self, new: &NewLease<'_>) -> Result<u64, StoreError> {
        let day = new.day.map(int).transpose()?;
        let id: i64 = self
            .0
            .query_one(
                "INSERT INTO holon_leases (node, mandate, day, outstanding, settled, expires, state)
                 VALUES ($1, $2, $3, $4, 0, $5, 'open') RETURNING id",
                &[&new.node, &new.mandate, &day, &int(new.amount_micros)?, &new.expires_unix],
            )
            .map_err(unavailable)?
            .get(0);
        uint(id)
    }

    fn lock_mandates_of(&mut self, ids: &[u64]) -> Result<(), StoreError> {
        let ids = ids.iter().map(|id| int(*id)).collect::<Result<Vec<_>, _>>()?;
        self.0
            .query(
                "SELECT id FROM holon_mandates WHERE id IN (SELECT mandate FROM holon_leases WHERE id = ANY($1))
                 ORDER BY id FOR UPDATE",
                &[&ids],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn load_lease(&mut self, id: u64) -> Result<(MandateRow, LeaseRow), StoreError> {
        // Which mandate: read without a lock, then lock the mandate and read the lease
        // again under its own lock.
        let mandate_id: String = self
            .0
            .query_opt("SELECT mandate FROM holon_leases WHERE id = $1", &[&int(id)?])
            .map_err(unavailable)?
            .ok_or(StoreError::UnknownLease(id))?
            .get(0);
        let mandate = self.load_mandate(&mandate_id)?;
        let found = self
            .0
            .query_opt(&format!("SELECT {LEASE_COLUMNS} FROM holon_leases WHERE id = $1 FOR UPDATE"), &[&int(id)?])
            .map_err(unavailable)?
            .ok_or(StoreError::UnknownLease(id))?;
        Ok((mandate, lease_of(&found)?))
    }

    fn save_lease(&mut self, l: &LeaseRow) -> Result<(), StoreError> {
        // Closed and reconciled leases are kept: a late or repeated flush finds them and
        // moves nothing (closed ones are purged `CLOSED_LEASE_KEEP_S` after their expiry,
        // on a grant).
        self.0
            .execute(
                "UPDATE holon_leases SET outstanding = $2, settled = $3, expires = $4, state = $5 WHERE id = $1",
                &[
                    &int(l.id)?,
                    &int(l.outstanding_micros)?,
                    &int(l.settled_micros)?,
                    &l.expires_unix,
                    &l.state.as_str(),
                ],
            )
            .map_err(unavailable)?;
        Ok(())
    }

    fn open_lease_ids(&mut self, node: &str, expired_by_unix: Option<i64>) -> Result<Vec<u64>, StoreError> {
        let (expired_only, by) = (expired_by_unix.is_some(), expired_by_unix.unwrap_or(0));
        let rows = self
            .0
            .query(
                "SELECT id FROM holon_leases WHERE node = $1 AND state = 'open' AND (NOT $2 OR expires <= $3)
                 ORDER BY id",
                &[&node, &expired_only, &by],
            )
            .map_err(unavailable)?;
        rows.iter().map(|r| uint(r.get(0))).collect()
    }

    fn still_open_lease_ids(
        &mut self,
        ids: &[u64],
        node: &str,
        expired_by_unix: Option<i64>,
    ) -> Result<Vec<u64>, StoreError> {
        let (expired_only, by) = (expired_by_unix.is_some(), expired_by_unix.unwrap_or(0));
        let ids = ids.iter().map(|id| int(*id)).collect::<Result<Vec<_>, _>>()?;
        let rows = self
            .0
            .query(
                "SELECT id FROM holon_leases WHERE id = ANY($1) AND node = $2 AND state = 'open'
                 AND (NOT $3 OR expires <= $4) ORDER BY id FOR UPDATE",
                &[&ids, &node, &expired_only, &by],
            )
            .map_err(unavailable)?;
        rows.iter().map(|r| uint(r.get(0))).collect()
    }
}

fn lease_of(r: &postgres::Row) -> Result<LeaseRow, StoreError> {
    lease_row((r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6), r.get(7)))
}

fn held_of(r: &postgres::Row) -> Result<HeldCall, StoreError> {
    held_row((r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6), r.get(7)))
}

impl LedgerStore for PostgresStore {
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
        self.write(|tx| {
            let rows = tx
                .query(
                    "SELECT id, total_limit, day_limit, spent, leased FROM holon_mandates
                     WHERE ($1::TEXT IS NULL OR id = $1) ORDER BY id",
                    &[&mandate],
                )
                .map_err(unavailable)?;
            if let Some(m) = mandate
                && rows.is_empty()
            {
                return Err(StoreError::UnknownMandate(m.to_owned()));
            }
            let mut out = Vec::new();
            for row in rows {
                let id: String = row.get(0);
                let nodes = tx
                    .query(
                        "SELECT node, SUM(outstanding)::BIGINT, MAX(expires) FROM holon_leases
                         WHERE mandate = $1 AND state = 'open' GROUP BY node ORDER BY node",
                        &[&id],
                    )
                    .map_err(unavailable)?
                    .iter()
                    .map(|r| {
                        Ok(NodeLeases { node: r.get(0), leased_micros: uint(r.get(1))?, lease_expires_unix: r.get(2) })
                    })
                    .collect::<Result<Vec<_>, StoreError>>()?;
                out.push(MandateStatus {
                    limits: StoreLimits {
                        total_micros: uint(row.get(1))?,
                        per_day_micros: row.get::<_, Option<i64>>(2).map(uint).transpose()?,
                    },
                    spent_micros: uint(row.get(3))?,
                    leased_micros: uint(row.get(4))?,
                    nodes,
                    mandate: id,
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
                &format!(
                    "INSERT INTO holon_held_calls ({HELD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                     ON CONFLICT (id) DO NOTHING"
                ),
                &[&c.0, &c.1, &c.2, &c.3, &c.4, &c.5, &c.6, &c.7],
            )
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn take_held(&self, id: &str, now_unix: i64) -> Result<Option<HeldCall>, StoreError> {
        self.write(|tx| {
            // Taken ids stay as tombstones (a copy sent again cannot bring a call back);
            // rows expired long ago are purged.
            tx.execute("DELETE FROM holon_held_calls WHERE expires < $1", &[&now_unix.saturating_sub(HELD_KEEP_S)])
                .map_err(unavailable)?;
            // Marked taken and returned in one statement: two nodes cannot both take it.
            let row = tx
                .query_opt(
                    &format!(
                        "UPDATE holon_held_calls SET taken = 1 WHERE id = $1 AND taken = 0 RETURNING {HELD_COLUMNS}"
                    ),
                    &[&id],
                )
                .map_err(unavailable)?;
            row.as_ref().map(held_of).transpose().map(|c| c.filter(|c| c.expires_unix >= now_unix))
        })
    }

    fn release_held(&self, id: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute("UPDATE holon_held_calls SET taken = 0 WHERE id = $1", &[&id]).map_err(unavailable)?;
            Ok(())
        })
    }

    fn held_calls(&self, mandate: Option<&str>, now_unix: i64) -> Result<Vec<HeldCall>, StoreError> {
        self.write(|tx| {
            let rows = tx
                .query(
                    &format!(
                        "SELECT {HELD_COLUMNS} FROM holon_held_calls
                         WHERE ($1::TEXT IS NULL OR mandate = $1) AND expires >= $2 AND taken = 0 ORDER BY id"
                    ),
                    &[&mandate, &now_unix],
                )
                .map_err(unavailable)?;
            rows.iter().map(held_of).collect()
        })
    }

    fn claim_key(&self, claim: &super::KeyClaim<'_>) -> Result<super::KeyState, StoreError> {
        claim.check()?;
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
