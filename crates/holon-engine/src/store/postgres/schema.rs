//! The PostgreSQL store's tables, created when missing, and its schema version: a database
//! written by a newer schema is refused before anything is written.

use postgres::Client;

use super::super::StoreError;
use super::{SCHEMA_VERSION, unavailable};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS holon_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS holon_mandates (
    id TEXT PRIMARY KEY, total_limit BIGINT NOT NULL, day_limit BIGINT,
    spent BIGINT NOT NULL, leased BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS holon_days (
    mandate TEXT NOT NULL, day BIGINT NOT NULL, spent BIGINT NOT NULL, leased BIGINT NOT NULL,
    PRIMARY KEY (mandate, day));
CREATE TABLE IF NOT EXISTS holon_leases (
    id BIGSERIAL PRIMARY KEY, node TEXT NOT NULL, mandate TEXT NOT NULL, day BIGINT,
    outstanding BIGINT NOT NULL, settled BIGINT NOT NULL, expires BIGINT NOT NULL, state TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS holon_leases_by_node ON holon_leases (node, state);
CREATE INDEX IF NOT EXISTS holon_leases_by_mandate ON holon_leases (mandate, state);
CREATE TABLE IF NOT EXISTS holon_held_calls (
    id TEXT PRIMARY KEY, mandate TEXT NOT NULL, agent TEXT NOT NULL, at BIGINT NOT NULL,
    max_cost BIGINT, by_capability BIGINT NOT NULL, worst BIGINT NOT NULL, expires BIGINT NOT NULL,
    taken BIGINT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS holon_request_keys (
    scope TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL, node TEXT NOT NULL,
    status INTEGER, body TEXT, created BIGINT NOT NULL, expires BIGINT NOT NULL,
    PRIMARY KEY (scope, key));
CREATE INDEX IF NOT EXISTS holon_request_keys_by_expiry ON holon_request_keys (expires);
CREATE INDEX IF NOT EXISTS holon_request_keys_by_node ON holon_request_keys (node, status);
";

/// Creates the tables if they are missing, and refuses a database written by a newer
/// schema before anything is written.
pub(super) fn create(client: &mut Client) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(unavailable)?;
    // One creator at a time: a transaction-scoped advisory lock around the schema.
    tx.execute("SELECT pg_advisory_xact_lock(7306540006)", &[]).map_err(unavailable)?;
    tx.batch_execute(SCHEMA).map_err(unavailable)?;
    let found: Option<i32> =
        tx.query_opt("SELECT max(version) FROM holon_schema", &[]).map_err(unavailable)?.and_then(|r| r.get(0));
    match found {
        Some(v) if v > SCHEMA_VERSION => {
            return Err(StoreError::NewerSchema { found: i64::from(v), known: i64::from(SCHEMA_VERSION) });
        }
        Some(v) if v == SCHEMA_VERSION => {}
        // An older schema: its tables were all created `IF NOT EXISTS` above, now say so.
        Some(_) | None => {
            tx.execute("INSERT INTO holon_schema (version) VALUES ($1)", &[&SCHEMA_VERSION]).map_err(unavailable)?;
        }
    }
    tx.commit().map_err(unavailable)
}
