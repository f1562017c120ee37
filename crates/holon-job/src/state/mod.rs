//! The state directory of `holon job` and every operation on it.
//!
//! ```text
//! <state>/jobs/<job>/
//!   lock                 advisory file lock: exclusive for changes, shared for reads
//!   meta.json            mode, active and pending versions, approvals (SHA-256), history
//!   versions/v<N>.yaml   every proposed or widened version, as approved text
//!   observations.jsonl   observed calls (an append-only log; a torn last line is skipped)
//!   drift.json           blocked and escalated calls, newest last (bounded)
//!   writes.json          writes per run, for the write budget (bounded)
//! ```
//!
//! Every file but the observation log is replaced atomically (temporary file, fsync,
//! rename, fsync of the directory), so a crash never leaves a half-written mandate or
//! approval. Every change happens under the exclusive lock, so several processes checking
//! one job at once are safe.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::call::{Aspect, Family};
use super::mandate;

mod check;
mod confined;
mod overview;
mod store;
mod versions;
mod widen;

pub use check::{CheckOutcome, Judged, StateView, Unusable, decide};
pub use confined::{
    EXEC_COMMAND_BYTES_MAX, EXEC_HOW_BYTES_MAX, EXEC_LINE_BYTES_MAX, EXEC_LOG_BYTES_MAX, EXEC_RECORDS_MAX,
    EXEC_RUN_BYTES_MAX, ExecRecord,
};
pub use overview::Overview;
pub use store::{Locked, atomic_write, sha256_hex};
pub use versions::{ActiveError, VersionText, Which};
pub use widen::{Preview, Widened};

/// Most drift records kept per job (the oldest are dropped; ids are never reused).
pub const DRIFT_MAX: usize = 4_096;
/// Most bytes of the text fields of one drift record (the call shown, the reason).
pub const DRIFT_TEXT_BYTES_MAX: usize = 2_048;
/// Most failing subjects kept in one drift record.
pub const DRIFT_SUBJECTS_MAX: usize = 64;
/// Most bytes of the observation log; `observe` records nothing more past it.
pub const OBSERVATIONS_BYTES_MAX: u64 = 256 << 20;
/// Most bytes of one observation line read back (a longer line is skipped).
pub const OBSERVATION_LINE_BYTES_MAX: usize = 1 << 20;
/// Most runs whose write counts are kept (the oldest are dropped).
pub const RUNS_MAX: usize = 10_000;
/// Most observations read for a proposal or a preview.
pub const OBSERVATIONS_MAX: usize = 1_000_000;
/// Most bytes of one state file read (the observation log excepted).
pub const STATE_BYTES_MAX: u64 = 64 << 20;
/// Most examples a widen preview lists.
pub const PREVIEW_EXAMPLES_MAX: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} is damaged ({message}); restore it or remove the job's state to start again")]
    Damaged { path: String, message: String },
    #[error("`{0}` is not a job name: use 1 to 128 of A-Z a-z 0-9 . _ - not starting with `.`")]
    BadJobName(String),
    #[error("{0}")]
    Refused(String),
    #[error("{}", unknown_job_message(.name, .root, .similar))]
    UnknownJob { name: String, root: String, similar: Vec<String> },
}

fn unknown_job_message(name: &str, root: &str, similar: &[String]) -> String {
    let mut m = format!(
        "no job `{name}` in the state directory {root} (set by --state, else HOLON_STATE, else .holon): only `holon job observe {name}` starts a job"
    );
    if !similar.is_empty() {
        m.push_str(&format!(
            "; did you mean {}?",
            similar.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    m
}

/// Job names in `root` close to `name` (edit distance at most 2, or one a prefix of the
/// other), for "did you mean".
fn similar_jobs(root: &Path, name: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(root.join("jobs")) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n != name && (strsim::levenshtein(n, name) <= 2 || n.starts_with(name) || name.starts_with(n.as_str()))
        })
        .take(64)
        .collect();
    out.sort();
    out.truncate(5);
    out
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io { path: path.display().to_string(), source }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum JobMode {
    #[default]
    Observe,
    Enforce,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionApproval {
    pub version: u32,
    pub sha256: String,
    pub at: String,
    /// The SHA-256 of the job mandate schema the version passed when it was approved
    /// (absent in approvals older than it): a check by a build with the same schema does
    /// not run the schema's pass again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_sha256: Option<String>,
}

/// `meta.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub mode: JobMode,
    pub active: Option<u32>,
    pub pending: Option<u32>,
    /// Every approval ever given, oldest first.
    #[serde(default)]
    pub approvals: Vec<VersionApproval>,
    /// Versions activated by approval, oldest first; `undo` walks back through it.
    #[serde(default)]
    pub history: Vec<u32>,
    #[serde(default)]
    pub next_version: u32,
    /// The id the next drift record gets; ids are never reused, even when drift.json
    /// was damaged and set aside.
    #[serde(default)]
    pub next_drift_id: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftStatus {
    Open,
    Escalated,
    Widened,
}

/// A blocked or escalated call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub id: u64,
    pub time: String,
    pub run: String,
    /// The first failing family.
    pub family: Family,
    pub families: Vec<Family>,
    /// `tool: arguments`, secrets masked.
    pub call: String,
    pub reason: String,
    pub status: DriftStatus,
    /// The failing aspects, exactly (for `widen`). Kept only in the local state directory.
    pub subjects: Vec<Aspect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widened_in: Option<u32>,
}

/// Whether the caller is a scheduled (cron) run or a person's interactive session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Cron,
    Interactive,
    /// Not known: treated as cron where that matters (fail closed).
    Unknown,
}

/// The answer to one `check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// `allow`, `block` or `ask` (an interactive scope escalating to its person).
    pub decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// Every family that failed (`family` is the first of them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub families: Vec<Family>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_id: Option<u64>,
    /// Something the caller should fix that did not change the decision (a call without
    /// a run id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

pub use crate::call::UNKNOWN_RUN;

/// Said whenever a call has no run id: it is then counted in one shared run.
pub const NO_RUN_WARNING: &str = "the call has no run id (--run, HOLON_RUN, or the call's `session_id`/`run`): every such call is counted in one run, `unknown`, which shares one write budget; pass the run's id";

impl Decision {
    pub(crate) fn allow() -> Self {
        Decision { decision: "allow", reason: None, family: None, families: Vec::new(), drift_id: None, warning: None }
    }
    pub fn block(family: Family, reason: String) -> Self {
        Decision {
            decision: "block",
            reason: Some(reason),
            family: Some(family),
            families: vec![family],
            drift_id: None,
            warning: None,
        }
    }
    pub fn blocks(&self) -> bool {
        self.decision == "block"
    }
}

/// One job's state.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    dir: PathBuf,
}

impl Job {
    pub fn open(root: &Path, name: &str) -> Result<Job, StateError> {
        if !mandate::valid_job_name(name) {
            return Err(StateError::BadJobName(name.to_owned()));
        }
        Ok(Job { name: name.to_owned(), dir: root.join("jobs").join(name) })
    }

    pub(super) fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub(super) fn version_path(&self, v: u32) -> PathBuf {
        self.dir.join("versions").join(format!("v{v}.yaml"))
    }

    /// The state directory this job lives in.
    pub fn root(&self) -> PathBuf {
        self.dir.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default()
    }

    fn unknown(&self) -> StateError {
        let root = self.root();
        StateError::UnknownJob {
            name: self.name.clone(),
            root: root.display().to_string(),
            similar: similar_jobs(&root, &self.name),
        }
    }

    /// Whether the job was started (`observe` writes its `meta.json`).
    pub fn exists(&self) -> bool {
        fs::symlink_metadata(self.path("meta.json")).is_ok()
    }
}
