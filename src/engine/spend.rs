//! Spend state export and import (bincode), so a restarted process resumes from what it
//! had spent. Reservations in flight are exported as spent: the restarted process cannot
//! know whether those calls ran, so it assumes they did (conservative).

use serde::{Deserialize, Serialize};

use super::ledger::{DAY_MICROS_MAX, DAY_NUMBER_MAX};
use super::{Engine, EngineError};

/// The version of the format below.
pub const SPEND_FORMAT: u32 = 1;
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
            .root_keys
            .iter()
            .filter_map(|e| {
                let mandate = self.names.mandates.name(*e.key())?.to_string();
                let ledger = &e.value().1;
                // Leases back first, so that at rest what is written is exactly reserved +
                // settled; while calls run, the claimed words are an upper bound of it.
                ledger.return_all_leases();
                let (day, day_micros) = ledger.claimed_day_word();
                Some(LedgerSpend { mandate, spent_micros: ledger.claimed_micros(), day, day_micros })
            })
            .collect();
        ledgers.sort_by(|a, b| a.mandate.cmp(&b.mandate));
        SpendState { format: SPEND_FORMAT, ledgers }
    }

    /// [`Engine::spend_state`] as bincode bytes.
    pub fn export_spend(&self) -> Result<Vec<u8>, EngineError> {
        bincode::serde::encode_to_vec(self.spend_state(), config()).map_err(|e| EngineError::SpendDecode(e.to_string()))
    }

    /// Adds exported spend to this engine's ledgers (creating them for mandates it has not
    /// seen yet, so they apply when the mandate is published). Validates everything first:
    /// on any error nothing is imported. Returns how many ledgers were restored.
    pub fn import_spend(&self, bytes: &[u8]) -> Result<usize, EngineError> {
        if bytes.len() > SPEND_BYTES_MAX {
            return Err(EngineError::SpendDecode(format!("{} bytes is more than {SPEND_BYTES_MAX}", bytes.len())));
        }
        let (state, read): (SpendState, usize) =
            bincode::serde::decode_from_slice(bytes, config()).map_err(|e| EngineError::SpendDecode(e.to_string()))?;
        if read != bytes.len() {
            return Err(EngineError::SpendDecode(format!("{} trailing bytes", bytes.len() - read)));
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
        }
        let syms =
            state.ledgers.iter().map(|l| self.names.mandates.intern(&l.mandate)).collect::<Result<Vec<_>, _>>()?;
        for (l, sym) in state.ledgers.iter().zip(syms) {
            self.root_ledger(sym).0.absorb(l.spent_micros, l.day, l.day_micros);
        }
        Ok(state.ledgers.len())
    }
}
