//! Idempotency keys in the SQLite file (`request_keys`): the rule of `store::keys` on the
//! key's row, inside the step's `BEGIN IMMEDIATE` transaction (which serialises claims of
//! every process sharing the file).

use rusqlite::{OptionalExtension, Transaction, params};

use super::super::keys::{self, KeyAnswer, KeyClaim, KeyRow, KeyState};
use super::super::sql::int;
use super::{StoreError, unavailable};

/// The table, created with the rest of the schema (version 3).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS request_keys (
    scope TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, node TEXT NOT NULL,
    status INTEGER, body TEXT, created INTEGER NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (scope, key));
CREATE INDEX IF NOT EXISTS request_keys_by_expiry ON request_keys (expires);
CREATE INDEX IF NOT EXISTS request_keys_by_node ON request_keys (node, status);
";

fn row(tx: &Transaction<'_>, scope: &str, key: &str) -> Result<Option<KeyRow>, StoreError> {
    let found = tx
        .query_row(
            "SELECT digest, node, status, body, created, expires FROM request_keys WHERE scope = ?1 AND key = ?2",
            params![scope, key],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                ))
            },
        )
        .optional()
        .map_err(unavailable)?;
    found
        .map(|(digest, node, status, body, created_unix, expires_unix)| {
            let answer = match (status, body) {
                (Some(status), Some(body)) => Some(KeyAnswer {
                    status: u16::try_from(status)
                        .map_err(|_| StoreError::Unavailable(format!("a key's status {status} is not HTTP's")))?,
                    body,
                }),
                _ => None,
            };
            Ok(KeyRow { digest, node, answer, created_unix, expires_unix })
        })
        .transpose()
}

pub(super) fn claim(tx: &Transaction<'_>, claim: &KeyClaim<'_>) -> Result<KeyState, StoreError> {
    claim.check()?;
    let state = keys::judge(row(tx, claim.scope, claim.key)?.as_ref(), claim);
    if state == KeyState::Claimed {
        let r = claim.row();
        tx.execute(
            "INSERT INTO request_keys (scope, key, digest, node, status, body, created, expires)
             VALUES (?1, ?2, ?3, ?4, NULL, NULL, ?5, ?6)
             ON CONFLICT (scope, key) DO UPDATE SET digest = ?3, node = ?4, status = NULL, body = NULL, created = ?5, expires = ?6",
            params![claim.scope, claim.key, r.digest, r.node, r.created_unix, r.expires_unix],
        )
        .map_err(unavailable)?;
    }
    Ok(state)
}

pub(super) fn answer(tx: &Transaction<'_>, scope: &str, key: &str, answer: &KeyAnswer) -> Result<(), StoreError> {
    keys::keepable(answer)?;
    tx.execute(
        "UPDATE request_keys SET status = ?3, body = ?4 WHERE scope = ?1 AND key = ?2 AND status IS NULL",
        params![scope, key, i64::from(answer.status), answer.body],
    )
    .map_err(unavailable)?;
    Ok(())
}

pub(super) fn forget(tx: &Transaction<'_>, scope: &str, key: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM request_keys WHERE scope = ?1 AND key = ?2 AND status IS NULL", params![scope, key])
        .map_err(unavailable)?;
    Ok(())
}

pub(super) fn forget_node(tx: &Transaction<'_>, node: &str) -> Result<u64, StoreError> {
    let n = tx.execute("DELETE FROM request_keys WHERE node = ?1 AND status IS NULL", [node]).map_err(unavailable)?;
    Ok(n as u64)
}

pub(super) fn prune(tx: &Transaction<'_>, now_unix: i64, keys_max: u64) -> Result<u64, StoreError> {
    let expired = tx.execute("DELETE FROM request_keys WHERE expires < ?1", [now_unix]).map_err(unavailable)?;
    // The oldest answered keys past the bound (never one in flight).
    let over = tx
        .execute(
            "DELETE FROM request_keys WHERE rowid IN (
                SELECT rowid FROM request_keys WHERE status IS NOT NULL ORDER BY created
                LIMIT max(0, (SELECT count(*) FROM request_keys) - ?1))",
            [int(keys_max)?],
        )
        .map_err(unavailable)?;
    Ok((expired + over) as u64)
}
