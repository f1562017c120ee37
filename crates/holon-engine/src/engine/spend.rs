//! Spend state export and import (bincode), so a restarted process resumes from what it
//! had spent. Reservations in flight are exported as spent: the restarted process cannot
//! know whether those calls ran, so it assumes they did (conservative).
//!
//! The bytes are `MAGIC (8) | version (u32, little endian) | payload | SHA-256 (32)`,
//! the digest over everything before it. Corrupted bytes that still decode once lowered
//! a mandate's spend on import; now every change is refused before anything is decoded.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ledger::{DAY_MICROS_MAX, DAY_NUMBER_MAX};
use super::{Engine, EngineError};

/// The version of the format below (1: bincode without magic or digest, no longer read).
pub const SPEND_FORMAT: u32 = 2;
/// The first bytes of a spend state.
pub const SPEND_MAGIC: [u8; 8] = *b"HOLONSPD";
const HEADER_BYTES: usize = SPEND_MAGIC.len() + 4;
const DIGEST_BYTES: usize = 32;
/// Largest spend state accepted (bytes): bounds the decoder against hostile input.
pub const SPEND_BYTES_MAX: usize = 64 << 20;
/// Most ledgers in one spend state.
pub const SPEND_LEDGERS_MAX: usize = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendState {
    pub format: u32,
    pub ledgers: Vec<LedgerSpend>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerSpend {
    pub mandate: String,
    /// Settled plus in flight, in micro-units.
    pub spent_micros: u64,
    /// The UTC day number of `day_micros`.
    pub day: u64,
    pub day_micros: u64,
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<SPEND_BYTES_MAX>()
}

impl Engine {
    /// The spend of every mandate this engine has a ledger for.
    pub fn spend_state(&self) -> SpendState {
        let mut ledgers: Vec<LedgerSpend> = self
            .ledgers
            .iter()
            .filter_map(|(sym, ledger)| {
                let mandate = self.names.mandates.name(sym)?.to_string();
                // Leases refunded first, so that at rest what is written is exactly reserved +
                // settled; while calls run, the claimed words are an upper bound of it.
                ledger.refund_all_leases();
                let (day, day_micros) = ledger.claimed_day_word();
                Some(LedgerSpend { mandate, spent_micros: ledger.claimed_micros(), day, day_micros })
            })
            .collect();
        ledgers.sort_by(|a, b| a.mandate.cmp(&b.mandate));
        SpendState { format: SPEND_FORMAT, ledgers }
    }

    /// [`Engine::spend_state`] as bytes: magic, version, bincode payload, SHA-256.
    pub fn export_spend(&self) -> Result<Vec<u8>, EngineError> {
        let payload = bincode::serde::encode_to_vec(self.spend_state(), config())
            .map_err(|e| EngineError::SpendDecode(e.to_string()))?;
        let mut bytes = Vec::with_capacity(HEADER_BYTES + payload.len() + DIGEST_BYTES);
        bytes.extend_from_slice(&SPEND_MAGIC);
        bytes.extend_from_slice(&SPEND_FORMAT.to_le_bytes());
        bytes.extend_from_slice(&payload);
        let digest = Sha256::digest(&bytes);
        bytes.extend_from_slice(&digest);
        Ok(bytes)
    }

    /// Adds exported spend to this engine's ledgers (creating them for mandates it has not
    /// seen yet, so they apply when the mandate is published). Validates everything first:
    /// on any error nothing is imported. Returns how many ledgers were restored.
    pub fn import_spend(&self, bytes: &[u8]) -> Result<usize, EngineError> {
        if self.config.store_backed {
            return Err(EngineError::SpendInvalid(
                "this engine keeps its budgets in a ledger store, which is their source of truth; \
                 an exported copy cannot be added to it"
                    .to_owned(),
            ));
        }
        if bytes.len() > SPEND_BYTES_MAX {
            return Err(EngineError::SpendDecode(format!("{} bytes is more than {SPEND_BYTES_MAX}", bytes.len())));
        }
        let payload = checked_payload(bytes)?;
        let (state, read): (SpendState, usize) = bincode::serde::decode_from_slice(payload, config())
            .map_err(|e| EngineError::SpendDecode(e.to_string()))?;
        if read != payload.len() {
            return Err(EngineError::SpendDecode(format!("{} trailing bytes", payload.len() - read)));
        }
        if state.format != SPEND_FORMAT {
            return Err(EngineError::SpendInvalid(format!(
                "format {} is not the supported {SPEND_FORMAT}",
                state.format
            )));
        }
        if state.ledgers.len() > SPEND_LEDGERS_MAX {
            return Err(EngineError::SpendInvalid(format!("more than {SPEND_LEDGERS_MAX} ledgers")));
        }
        let mut seen = std::collections::HashSet::new();
        for l in &state.ledgers {
            if l.mandate.is_empty() || l.mandate.len() > 1024 {
                return Err(EngineError::SpendInvalid("a mandate id is empty or longer than 1024 bytes".into()));
            }
            if !seen.insert(l.mandate.as_str()) {
                return Err(EngineError::SpendInvalid(format!("mandate `{}` appears twice", l.mandate)));
            }
            if l.day > DAY_NUMBER_MAX || l.day_micros > DAY_MICROS_MAX {
                return Err(EngineError::SpendInvalid(format!("the day word of `{}` is out of range", l.mandate)));
            }
            // A day's spend is part of the total (the ledger's words keep day <= total).
            if l.day_micros > l.spent_micros {
                return Err(EngineError::SpendInvalid(format!(
                    "`{}` spent more on day {} than in total",
                    l.mandate, l.day
                )));
            }
        }
        let syms =
            state.ledgers.iter().map(|l| self.names.mandates.intern(&l.mandate)).collect::<Result<Vec<_>, _>>()?;
        for (l, sym) in state.ledgers.iter().zip(syms) {
            self.ledgers.root_ledger(sym).0.absorb(l.spent_micros, l.day, l.day_micros);
        }
        Ok(state.ledgers.len())
    }
}

/// The payload of a spend state after its magic, version and digest are checked.
fn checked_payload(bytes: &[u8]) -> Result<&[u8], EngineError> {
    let (Some(magic), Some(version), Some(split)) = (
        bytes.get(..SPEND_MAGIC.len()),
        bytes.get(SPEND_MAGIC.len()..HEADER_BYTES),
        bytes.len().checked_sub(DIGEST_BYTES).filter(|n| *n >= HEADER_BYTES),
    ) else {
        return Err(EngineError::SpendDecode(format!("{} bytes is too short for a spend state", bytes.len())));
    };
    if magic != SPEND_MAGIC {
        return Err(EngineError::SpendDecode("not a holon spend state (its first bytes are not HOLONSPD)".into()));
    }
    let version = u32::from_le_bytes(version.try_into().map_err(|_| EngineError::SpendDecode("no version".into()))?);
    if version > SPEND_FORMAT {
        return Err(EngineError::SpendInvalid(format!(
            "spend state version {version} is newer than this engine's {SPEND_FORMAT}; import it with a newer engine"
        )));
    }
    if version != SPEND_FORMAT {
        return Err(EngineError::SpendInvalid(format!(
            "spend state version {version} is not the supported {SPEND_FORMAT}"
        )));
    }
    let (Some(signed), Some(digest)) = (bytes.get(..split), bytes.get(split..)) else {
        return Err(EngineError::SpendDecode("no digest".into()));
    };
    if Sha256::digest(signed).as_slice() != digest {
        return Err(EngineError::SpendCorrupt);
    }
    signed.get(HEADER_BYTES..).ok_or_else(|| EngineError::SpendDecode("no payload".into()))
}
