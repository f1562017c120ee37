//! How the job's recent commands ran under `holon job exec`: confined by the kernel or
//! not, and why (`holon job status` shows them).

use serde::{Deserialize, Serialize};

use super::store::{Durability, read_json, write_json_as};
use super::{Job, StateError};
use crate::redact::redact;
use crate::time::Timestamp;

/// Most records kept (the oldest go first).
pub const EXEC_RECORDS_MAX: usize = 200;
/// Most bytes of a command kept in a record.
pub const EXEC_COMMAND_BYTES_MAX: usize = 512;

/// One command `holon job exec` started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRecord {
    pub time: String,
    pub run: String,
    /// The approved version it was confined with (none in observe mode).
    pub version: Option<u32>,
    pub confined: bool,
    /// The Landlock level the kernel enforced (0 when not confined).
    pub level: u8,
    /// `full`, `partial: …` or why it ran unconfined.
    pub how: String,
    pub command: String,
}

impl ExecRecord {
    pub fn new(run: &str, version: Option<u32>, level: u8, how: &str, command: &str) -> ExecRecord {
        let mut command = redact(command);
        if command.len() > EXEC_COMMAND_BYTES_MAX {
            let mut end = EXEC_COMMAND_BYTES_MAX;
            while !command.is_char_boundary(end) {
                end -= 1;
            }
            command.truncate(end);
            command.push('…');
        }
        ExecRecord {
            time: Timestamp::now().to_string(),
            run: run.to_owned(),
            version,
            confined: level > 0,
            level,
            how: how.to_owned(),
            command,
        }
    }
}

impl Job {
    /// Appends `record` (before the command starts: once confined, the state is not
    /// writable).
    pub fn record_exec(&self, record: ExecRecord) -> Result<(), StateError> {
        let _lock = self.lock(true)?;
        let path = self.path("exec.json");
        let mut records: Vec<ExecRecord> = read_json(&path)?;
        records.push(record);
        let over = records.len().saturating_sub(EXEC_RECORDS_MAX);
        records.drain(..over);
        // Shown to a person, never decided on: atomic, not synced (store::Durability).
        write_json_as(&path, &records, Durability::Unsynced)
    }

    /// The recorded commands, oldest first.
    pub fn exec_records(&self) -> Result<Vec<ExecRecord>, StateError> {
        read_json(&self.path("exec.json"))
    }
}
