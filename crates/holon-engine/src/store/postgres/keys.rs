//! Idempotency keys in PostgreSQL (`holon_request_keys`): the rule of `store::keys` on the
//! key's row. A claim inserts the row if it is missing (`ON CONFLICT DO NOTHING` waits for
//! a concurrent claim of the same key to commit, then does nothing), then locks it
//! (`FOR UPDATE`): two nodes claiming one key at once are serialised, and one of them finds
//! the other's claim.

use postgres::Transaction;

use super::super::keys::{self, KeyAnswer, KeyClaim, KeyRow, KeyState};
use super::super::sql::int;
use super::{StoreError, unavailable};

pub(super) fn claim(tx: &mut Transaction<'_>, claim: &KeyClaim<'_>) -> Result<KeyState, StoreError> {
    let fresh = claim.row();
    let inserted = tx
        .execute(
            "INSERT INTO holon_request_keys (scope, key, digest, node, status, body, created, expires)
             VALUES ($1, $2, $3, $4, NULL, NULL, $5, $6) ON CONFLICT (scope, key) DO NOTHING",
            &[&claim.scope, &claim.key, &fresh.digest, &fresh.node, &fresh.created_unix, &fresh.expires_unix],
        )
        .map_err(unavailable)?;
    if inserted == 1 {
        return Ok(KeyState::Claimed);
    }
    let found = tx
        .query_opt(
            "SELECT digest, node, status, body, created, expires FROM holon_request_keys
             WHERE scope = $1 AND key = $2 FOR UPDATE",
            &[&claim.scope, &claim.key],
        )
        .map_err(unavailable)?;
    let row = found
        .map(|r| {
            let answer = match (r.get::<_, Option<i32>>(2), r.get::<_, Option<String>>(3)) {
                (Some(status), Some(body)) => Some(KeyAnswer {
                    status: u16::try_from(status)
                        .map_err(|_| StoreError::Unavailable(format!("a key's status {status} is not HTTP's")))?,
                    body,
                }),
                _ => None,
            };
            Ok::<_, StoreError>(KeyRow {
                digest: r.get(0),
                node: r.get(1),
                answer,
                created_unix: r.get(4),
                expires_unix: r.get(5),
            })
        })
        .transpose()?;
    let state = keys::judge(row.as_ref(), claim);
    if state == KeyState::Claimed {
        // An expired key, claimed anew.
        tx.execute(
            "UPDATE holon_request_keys SET digest = $3, node = $4, status = NULL, body = NULL, created = $5, expires = $6
             WHERE scope = $1 AND key = $2",
            &[&claim.scope, &claim.key, &fresh.digest, &fresh.node, &fresh.created_unix, &fresh.expires_unix],
        )
        .map_err(unavailable)?;
    }
    Ok(state)
}

pub(super) fn answer(tx: &mut Transaction<'_>, scope: &str, key: &str, answer: &KeyAnswer) -> Result<(), StoreError> {
    keys::keepable(answer)?;
    tx.execute(
        "UPDATE holon_request_keys SET status = $3, body = $4 WHERE scope = $1 AND key = $2 AND status IS NULL",
        &[&scope, &key, &i32::from(answer.status), &answer.body],
    )
    .map_err(unavailable)?;
    Ok(())
}

pub(super) fn forget(tx: &mut Transaction<'_>, scope: &str, key: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM holon_request_keys WHERE scope = $1 AND key = $2 AND status IS NULL", &[&scope, &key])
        .map_err(unavailable)?;
    Ok(())
}

pub(super) fn forget_node(tx: &mut Transaction<'_>, node: &str) -> Result<u64, StoreError> {
    tx.execute("DELETE FROM holon_request_keys WHERE node = $1 AND status IS NULL", &[&node]).map_err(unavailable)
}

pub(super) fn prune(tx: &mut Transaction<'_>, now_unix: i64, keys_max: u64) -> Result<u64, StoreError> {
    let expired = tx.execute("DELETE FROM holon_request_keys WHERE expires < $1", &[&now_unix]).map_err(unavailable)?;
    // The oldest answered keys past the bound (never one in flight).
    let over = tx
        .execute(
            "DELETE FROM holon_request_keys WHERE (scope, key) IN (
                SELECT scope, key FROM holon_request_keys WHERE status IS NOT NULL ORDER BY created
                LIMIT GREATEST(0, (SELECT count(*) FROM holon_request_keys) - $1))",
            &[&int(keys_max)?],
        )
        .map_err(unavailable)?;
    Ok(expired + over)
}
