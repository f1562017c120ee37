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

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::call::{self, Aspect, EXEMPT_TOOL, Family, ToolCall};
use super::mandate::{self, Checker, Evidence, Evidenced, Failure, JobMandate};
use super::propose::{self, Observation};
use super::redact::redact;
use crate::time::Timestamp;

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
        .filter(|n| n != name && (edit_distance(n, name) <= 2 || n.starts_with(name) || name.starts_with(n.as_str())))
        .take(64)
        .collect();
    out.sort();
    out.truncate(5);
    out
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row.first().copied().unwrap_or(0);
        if let Some(first) = row.first_mut() {
            *first = i + 1;
        }
        for (j, cb) in b.iter().enumerate() {
            let above = row.get(j + 1).copied().unwrap_or(usize::MAX);
            let left = row.get(j).copied().unwrap_or(usize::MAX);
            let next = (prev + usize::from(ca != *cb)).min(above.saturating_add(1)).min(left.saturating_add(1));
            prev = above;
            if let Some(cell) = row.get_mut(j + 1) {
                *cell = next;
            }
        }
    }
    row.last().copied().unwrap_or(usize::MAX)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io { path: path.display().to_string(), source }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Observe,
    Enforce,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub version: u32,
    pub sha256: String,
    pub at: String,
}

/// `meta.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub mode: Mode,
    pub active: Option<u32>,
    pub pending: Option<u32>,
    /// Every approval ever given, oldest first.
    #[serde(default)]
    pub approvals: Vec<Approval>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_id: Option<u64>,
}

impl Decision {
    fn allow() -> Self {
        Decision { decision: "allow", reason: None, family: None, drift_id: None }
    }
    fn block(family: Family, reason: String) -> Self {
        Decision { decision: "block", reason: Some(reason), family: Some(family), drift_id: None }
    }
    pub fn blocks(&self) -> bool {
        self.decision == "block"
    }
}

/// The state directory: `--state DIR`, else `HOLON_STATE`, else `.holon`.
pub fn root(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("HOLON_STATE").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from(".holon"))
}

/// One job's state.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    dir: PathBuf,
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync,
/// rename over the target, fsync of the directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let tmp = dir.join(format!(".{name}.tmp-{}-{nonce}", std::process::id()));
    {
        // Created exclusively: never through a symlink or over another file.
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc_nofollow())
            .open(&tmp)
            .map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
    }
    fs::rename(&tmp, path).map_err(io(path))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// `O_NOFOLLOW`: a state file that is a symlink is refused, not followed.
fn libc_nofollow() -> i32 {
    const O_NOFOLLOW: i32 = 0o400_000; // Linux, every architecture Rust supports there
    O_NOFOLLOW
}

/// Opens a state file for reading: never through a symlink, only a regular file
/// (a FIFO or a device is refused before it can block or stream forever).
fn open_regular(path: &Path) -> Result<Option<File>, StateError> {
    let f = match OpenOptions::new().read(true).custom_flags(libc_nofollow() | O_NONBLOCK).open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        other => other.map_err(io(path))?,
    };
    let meta = f.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(StateError::Damaged { path: path.display().to_string(), message: "not a regular file".into() });
    }
    Ok(Some(f))
}
const O_NONBLOCK: i32 = 0o4_000;

fn read_bounded(path: &Path) -> Result<Option<String>, StateError> {
    let Some(f) = open_regular(path)? else { return Ok(None) };
    let mut text = String::new();
    f.take(STATE_BYTES_MAX + 1).read_to_string(&mut text).map_err(io(path))?;
    if text.len() as u64 > STATE_BYTES_MAX {
        return Err(StateError::Damaged {
            path: path.display().to_string(),
            message: format!("more than {STATE_BYTES_MAX} bytes"),
        });
    }
    Ok(Some(text))
}

fn read_json<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> Result<T, StateError> {
    match read_bounded(path)? {
        None => Ok(T::default()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| StateError::Damaged { path: path.display().to_string(), message: e.to_string() }),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StateError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| StateError::Damaged { path: path.display().to_string(), message: e.to_string() })?;
    atomic_write(path, text.as_bytes())
}

pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A held lock on a job; released when dropped.
pub struct Locked(#[allow(dead_code)] File);

impl Job {
    pub fn open(root: &Path, name: &str) -> Result<Job, StateError> {
        if !mandate::valid_job_name(name) {
            return Err(StateError::BadJobName(name.to_owned()));
        }
        Ok(Job { name: name.to_owned(), dir: root.join("jobs").join(name) })
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn version_path(&self, v: u32) -> PathBuf {
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

    /// Takes the job's lock. Only `observe` may create the job (`create`); every other
    /// verb on a job that was never started is refused.
    fn lock_for(&self, exclusive: bool, create: bool) -> Result<Locked, StateError> {
        if create {
            fs::create_dir_all(self.dir.join("versions")).map_err(io(&self.dir))?;
        } else if !self.dir.is_dir() {
            return Err(self.unknown());
        }
        let path = self.path("lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc_nofollow())
            .open(&path)
            .map_err(io(&path))?;
        if exclusive { f.lock() } else { f.lock_shared() }.map_err(io(&path))?;
        Ok(Locked(f))
    }

    fn lock(&self, exclusive: bool) -> Result<Locked, StateError> {
        self.lock_for(exclusive, false)
    }

    /// `meta.json`. A job without one was never started, or lost it: either way there is
    /// no mode to trust.
    pub fn meta(&self) -> Result<Meta, StateError> {
        let path = self.path("meta.json");
        match read_bounded(&path)? {
            None if self.dir.join("versions").read_dir().is_ok_and(|mut d| d.next().is_some()) => {
                Err(StateError::Damaged { path: path.display().to_string(), message: "the file is missing".into() })
            }
            None => Err(self.unknown()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| StateError::Damaged { path: path.display().to_string(), message: e.to_string() }),
        }
    }

    pub fn version_text(&self, v: u32) -> Result<String, StateError> {
        let path = self.version_path(v);
        read_bounded(&path)?.ok_or_else(|| StateError::Damaged {
            path: path.display().to_string(),
            message: "the version's file is missing".into(),
        })
    }

    pub fn drift(&self) -> Result<Vec<Drift>, StateError> {
        self.meta()?;
        read_json(&self.path("drift.json"))
    }

    /// Appends observed calls (made relative to their workdir) to the log.
    /// The only verb that starts a job.
    pub fn observe(&self, observations: &[Observation]) -> Result<(), StateError> {
        let _lock = self.lock_for(true, true)?;
        if !self.exists() {
            write_json(&self.path("meta.json"), &Meta::default())?;
        }
        let path = self.path("observations.jsonl");
        let mut text = String::new();
        for o in observations {
            if let Ok(line) = serde_json::to_string(o) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(libc_nofollow())
            .open(&path)
            .map_err(io(&path))?;
        let size = f.metadata().map_err(io(&path))?;
        if !size.is_file() {
            return Err(StateError::Damaged { path: path.display().to_string(), message: "not a regular file".into() });
        }
        if size.len().saturating_add(text.len() as u64) > OBSERVATIONS_BYTES_MAX {
            return Err(StateError::Refused(format!(
                "{} would pass {OBSERVATIONS_BYTES_MAX} bytes: propose and approve from what was observed, or start a new job",
                path.display()
            )));
        }
        f.write_all(text.as_bytes()).map_err(io(&path))?;
        f.sync_all().map_err(io(&path))
    }

    /// Calls `each` on every readable observation, streaming: a torn, over-long or
    /// damaged line (bad UTF-8 included) is skipped, never the lines after it.
    pub fn each_observation(&self, mut each: impl FnMut(Observation)) -> Result<(), StateError> {
        let path = self.path("observations.jsonl");
        let Some(f) = open_regular(&path)? else { return Ok(()) };
        let mut seen = 0usize;
        super::lines::for_each_line(BufReader::new(f), OBSERVATION_LINE_BYTES_MAX, OBSERVATIONS_BYTES_MAX, |line| {
            if let Some(o) = line.and_then(|l| serde_json::from_str::<Observation>(l).ok()) {
                seen += 1;
                each(o);
            }
            seen < OBSERVATIONS_MAX
        })
        .map_err(io(&path))
    }

    /// Every readable observation (see [`Job::each_observation`]).
    pub fn observations(&self) -> Result<Vec<Observation>, StateError> {
        let mut out = Vec::new();
        self.each_observation(|o| out.push(o))?;
        Ok(out)
    }

    /// Compiles the observations into a new pending version; returns it and its text.
    pub fn propose(&self) -> Result<(u32, String), StateError> {
        let _lock = self.lock(true)?;
        let _ = self.meta()?;
        let mut proposal = propose::Proposal::default();
        self.each_observation(|o| proposal.add(&o))?;
        if proposal.is_empty() {
            return Err(StateError::Refused(format!(
                "no observed calls for `{}`: run `holon job observe {} --run RUN` on its tool calls first",
                self.name, self.name
            )));
        }
        let (m, ev) = proposal.finish(&self.name);
        let text = mandate::to_yaml(&m, &ev, &propose::header(&self.name, m.observed_runs));
        let v = self.add_pending(&text)?;
        Ok((v, text))
    }

    fn add_pending(&self, text: &str) -> Result<u32, StateError> {
        let mut meta = self.meta()?;
        let v = meta.next_version.max(1);
        atomic_write(&self.version_path(v), text.as_bytes())?;
        meta.pending = Some(v);
        meta.next_version = v + 1;
        write_json(&self.path("meta.json"), &meta)?;
        Ok(v)
    }

    /// Activates the pending version and records its SHA-256; the job enforces it.
    pub fn approve(&self) -> Result<Approval, StateError> {
        let _lock = self.lock(true)?;
        let mut meta = self.meta()?;
        let v = meta.pending.ok_or_else(|| {
            StateError::Refused(format!("nothing to approve: `holon job propose {}` or `widen` first", self.name))
        })?;
        let text = self.version_text(v)?;
        if let Err(e) = mandate::from_yaml(&text) {
            return Err(StateError::Refused(format!("version {v} is not a valid job mandate, not approved: {e}")));
        }
        let approval = Approval { version: v, sha256: sha256_hex(&text), at: Timestamp::now().to_string() };
        meta.approvals.push(approval.clone());
        meta.history.push(v);
        meta.active = Some(v);
        meta.pending = None;
        meta.mode = Mode::Enforce;
        write_json(&self.path("meta.json"), &meta)?;
        Ok(approval)
    }

    /// Reactivates the previously approved version; back past the first approved one
    /// to observe mode (enforcement off) only with `to_observe`.
    pub fn undo(&self, to_observe: bool) -> Result<Meta, StateError> {
        let _lock = self.lock(true)?;
        let mut meta = self.meta()?;
        if meta.history.len() == 1 && !to_observe {
            return Err(StateError::Refused(format!(
                "`{}` is on its first approved version: undoing it turns enforcement OFF (observe mode never blocks). Run `holon job undo {} --to-observe` if that is what you want",
                self.name, self.name
            )));
        }
        if meta.history.pop().is_none() {
            return Err(StateError::Refused(format!("nothing to undo: `{}` has no approved version", self.name)));
        }
        meta.active = meta.history.last().copied();
        if meta.active.is_none() {
            meta.mode = Mode::Observe;
        }
        write_json(&self.path("meta.json"), &meta)?;
        Ok(meta)
    }

    /// The active version's mandate, after verifying its text against its approval hash.
    pub fn active(&self, meta: &Meta) -> Result<Option<(u32, String, JobMandate)>, String> {
        let Some(v) = meta.active else { return Ok(None) };
        let text = self.version_text(v).map_err(|e| e.to_string())?;
        let approved =
            meta.approvals.iter().rev().find(|a| a.version == v).ok_or("the active version has no approval")?;
        let actual = sha256_hex(&text);
        if actual != approved.sha256 {
            return Err(format!(
                "version {v} no longer hashes to its approval (sha256 {} approved, {} now): the mandate file was changed",
                short(&approved.sha256),
                short(&actual)
            ));
        }
        let m = mandate::from_yaml(&text)?;
        Ok(Some((v, text, m)))
    }

    /// The fail-closed check of one call (see the module and docs/job.md).
    pub fn check(&self, call_text: &str, run: Option<&str>, scope: Scope, ask_interactive: bool) -> Decision {
        let call = match call::parse(call_text) {
            Ok(c) => c,
            Err(e) => {
                // Cannot read the call: allowed only when the job is known to observe.
                return match self.meta() {
                    Ok(m) if m.mode == Mode::Observe => Decision::allow(),
                    _ if scope == Scope::Interactive && !self.exists() => Decision::allow(),
                    _ => Decision::block(Family::Integrity, format!("the call cannot be evaluated: {e}")),
                };
            }
        };
        if call.tool == EXEMPT_TOOL {
            return Decision::allow();
        }
        let run =
            run.map(str::to_owned).or(call.run.clone()).or(call.session.clone()).unwrap_or_else(|| "unknown".into());
        let meta = match self.meta() {
            Ok(m) => m,
            // No job (a typo, a wrong state directory) or its mode cannot be told: block
            // what is or may be a cron run.
            Err(e @ StateError::UnknownJob { .. }) => {
                return match scope {
                    Scope::Interactive => Decision::allow(),
                    _ => Decision::block(Family::Integrity, e.to_string()),
                };
            }
            Err(e) => {
                return match scope {
                    Scope::Interactive => Decision::allow(),
                    _ => Decision::block(Family::Integrity, format!("the job's mode cannot be read ({e})")),
                };
            }
        };
        if meta.mode == Mode::Observe {
            // Observe mode never blocks, not even on its own errors.
            let here = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
            let _ = self.observe(&[Observation::of(call, Some(&run), &here)]);
            return Decision::allow();
        }
        match self.enforce(&call, &run) {
            Ok((d, _)) if !d.blocks() => d,
            Ok((d, failures)) => self.record_drift(&call, &run, d, &failures, scope, ask_interactive),
            Err(e) => {
                let d = Decision::block(Family::Integrity, format!("evaluation failed: {e}"));
                self.record_drift(&call, &run, d, &[], scope, false)
            }
        }
    }

    fn enforce(&self, call: &ToolCall, run: &str) -> Result<(Decision, Vec<Failure>), String> {
        let _lock = self.lock(true).map_err(|e| e.to_string())?;
        let meta = self.meta().map_err(|e| e.to_string())?;
        let Some((_, _, m)) = self.active(&meta)? else {
            return Ok((Decision::block(Family::Integrity, "enforce mode without an active version".into()), vec![]));
        };
        let checker = Checker::compile(&m)?;
        let call = call.clone().relative_to(&m.workdir);
        let failures = checker.failures(&call);
        let writes = call.writes() as u64;
        let path = self.path("writes.json");
        let mut counts: BTreeMap<String, (u64, String)> = read_json(&path).map_err(|e| e.to_string())?;
        let done = counts.get(run).map_or(0, |(n, _)| *n);
        let mut all = failures;
        if let Some(max) = checker.max_writes_per_run.filter(|_| writes > 0)
            && done + writes > max
        {
            all.push(Failure {
                family: Family::Limits,
                aspect: None,
                reason: format!("run `{run}` already wrote {done} time(s); the budget is {max} per run"),
            });
        }
        if let Some(first) = all.first() {
            let reason = all.iter().map(|f| f.reason.clone()).collect::<Vec<_>>().join("; ");
            let mut d = Decision::block(first.family, reason);
            d.reason = d.reason.map(|r| format!("{r} [{}]", families(&all).join(", ")));
            return Ok((d, all));
        }
        if writes > 0 {
            counts.insert(run.to_owned(), (done + writes, Timestamp::now().to_string()));
            if counts.len() > RUNS_MAX {
                // Drop the run written longest ago.
                if let Some(oldest) = counts.iter().min_by(|a, b| a.1.1.cmp(&b.1.1)).map(|(k, _)| k.clone()) {
                    counts.remove(&oldest);
                }
            }
            write_json(&path, &counts).map_err(|e| e.to_string())?;
        }
        Ok((Decision::allow(), vec![]))
    }

    fn record_drift(
        &self,
        call: &ToolCall,
        run: &str,
        mut d: Decision,
        failures: &[Failure],
        scope: Scope,
        ask: bool,
    ) -> Decision {
        let escalate = ask && scope == Scope::Interactive;
        let families: Vec<Family> = {
            let mut f: Vec<Family> = failures.iter().map(|f| f.family).collect();
            f.extend(d.family);
            f.sort();
            f.dedup();
            f
        };
        let record = |id| Drift {
            id,
            time: Timestamp::now().to_string(),
            run: clip(&redact(run)),
            family: d.family.unwrap_or(Family::Integrity),
            families: families.clone(),
            call: clip(&redact(&format!("{}: {}", call.tool, call.shown))),
            reason: clip(&redact(d.reason.as_deref().unwrap_or_default())),
            status: if escalate { DriftStatus::Escalated } else { DriftStatus::Open },
            subjects: failures
                .iter()
                .filter_map(|f| f.aspect.clone())
                .map(Aspect::redacted)
                .filter(|a| a.subject().len() <= DRIFT_TEXT_BYTES_MAX)
                .take(DRIFT_SUBJECTS_MAX)
                .collect(),
            widened_in: None,
        };
        // Recording is best effort: the call is blocked whether or not it is recorded.
        if let Ok(_lock) = self.lock(true)
            && let Ok(mut meta) = self.meta()
        {
            let path = self.path("drift.json");
            let mut drift: Vec<Drift> = match read_json(&path) {
                Ok(d) => d,
                // Damaged history is set aside for a person to read, never overwritten.
                Err(_) => {
                    let aside = self.path(&format!("drift.json.damaged-{}", Timestamp::now().unix()));
                    let _ = fs::rename(&path, aside);
                    Vec::new()
                }
            };
            let id = meta.next_drift_id.max(drift.last().map_or(1, |r| r.id + 1));
            meta.next_drift_id = id + 1;
            drift.push(record(id));
            let excess = drift.len().saturating_sub(DRIFT_MAX);
            drift.drain(..excess);
            if write_json(&self.path("meta.json"), &meta).is_ok() && write_json(&path, &drift).is_ok() {
                d.drift_id = Some(id);
            }
        }
        if escalate {
            d.decision = "ask";
        }
        d
    }

    /// Compiles a new pending version that allows every failing aspect of drift `id`:
    /// the exact subject, or with `pattern` a broader rule. Never activates it.
    pub fn widen(&self, id: u64, pattern: bool) -> Result<Widened, StateError> {
        let _lock = self.lock(true)?;
        let meta = self.meta()?;
        let path = self.path("drift.json");
        let mut drift: Vec<Drift> = read_json(&path)?;
        let record = drift.iter().find(|r| r.id == id).cloned().ok_or_else(|| {
            StateError::Refused(format!("no drift #{id} for `{}`: see `holon job drift {}`", self.name, self.name))
        })?;
        let base_v = meta.pending.or(meta.active).ok_or_else(|| {
            StateError::Refused(format!(
                "`{}` has no version to widen: `holon job propose {}` first",
                self.name, self.name
            ))
        })?;
        let base_text = self.version_text(base_v)?;
        let base = mandate::from_yaml(&base_text)
            .map_err(|e| StateError::Damaged { path: self.version_path(base_v).display().to_string(), message: e })?;
        let mut ev = mandate::evidence_of(&base_text, &base);
        let mut next = base.clone();
        let mut added = Vec::new();
        for aspect in &record.subjects {
            let rule = if pattern { broader(aspect) } else { exact(aspect) };
            let (list, evl) = match aspect {
                Aspect::Tool(_) => (&mut next.tools, &mut ev.tools),
                Aspect::Read(_) => (&mut next.paths.read, &mut ev.read),
                Aspect::Write(_) => (&mut next.paths.write, &mut ev.write),
                Aspect::Command(_) | Aspect::Opaque(_) => (&mut next.commands, &mut ev.commands),
                Aspect::Host(_) => (&mut next.hosts, &mut ev.hosts),
            };
            if !list.contains(&rule) {
                list.push(rule.clone());
                list.sort();
                evl.push(Evidence { value: rule.clone(), evidence: 1 });
                added.push(rule);
            }
        }
        if record.families.contains(&Family::Limits) {
            let needed = next.limits.max_writes_per_run.map(|m| m + 1);
            next.limits.max_writes_per_run = needed;
            added.push(format!("limits.max_writes_per_run: {}", needed.map_or("null".into(), |n| n.to_string())));
        }
        let header = format!(
            "Mandate for {}: version {base_v} widened for drift #{id}.\nReview every rule. Nothing is enforced until `holon job approve {}`.",
            self.name, self.name
        );
        let text = mandate::to_yaml(&next, &ev, &header);
        let preview = if pattern { self.preview(&base, &next)? } else { Preview::default() };
        let v = self.add_pending(&text)?;
        if let Some(r) = drift.iter_mut().find(|r| r.id == id) {
            r.status = DriftStatus::Widened;
            r.widened_in = Some(v);
        }
        write_json(&path, &drift)?;
        Ok(Widened { version: v, added, preview, text })
    }

    /// How many past observed calls `next` allows that `base` did not, with examples.
    fn preview(&self, base: &JobMandate, next: &JobMandate) -> Result<Preview, StateError> {
        let (Ok(before), Ok(after)) = (Checker::compile(base), Checker::compile(next)) else {
            return Ok(Preview::default());
        };
        let mut p = Preview::default();
        self.each_observation(|o| {
            let call = o.call.relative_to(&next.workdir);
            if !before.failures(&call).is_empty() && after.failures(&call).is_empty() {
                p.newly_allowed += 1;
                if p.examples.len() < PREVIEW_EXAMPLES_MAX {
                    p.examples.push(redact(&format!("{}: {}", call.tool, call.shown)));
                }
            }
        })?;
        Ok(p)
    }
}

/// At most [`DRIFT_TEXT_BYTES_MAX`] bytes of `text`, cut at a character boundary.
fn clip(text: &str) -> String {
    if text.len() <= DRIFT_TEXT_BYTES_MAX {
        return text.to_owned();
    }
    let mut end = DRIFT_TEXT_BYTES_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", text.get(..end).unwrap_or_default())
}

fn families(failures: &[Failure]) -> Vec<&'static str> {
    let mut f: Vec<&str> = failures.iter().map(|f| f.family.as_str()).collect();
    f.sort();
    f.dedup();
    f
}

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

/// The rule that allows exactly this aspect.
fn exact(a: &Aspect) -> String {
    match a {
        Aspect::Read(p) | Aspect::Write(p) => globset::escape(p),
        other => other.subject(),
    }
}

/// A broader rule: the parent directory (`dir/**` for reads, `dir/*.ext` for writes), any
/// flags for a command, every subdomain of the parent domain for a host.
fn broader(a: &Aspect) -> String {
    match a {
        Aspect::Read(p) => {
            let dir = p.trim_end_matches("/**").rsplit_once('/').map(|(d, _)| d);
            call::recursive(dir.unwrap_or("."))
        }
        Aspect::Write(p) => {
            let (dir, name) = p.rsplit_once('/').map_or((None, p.as_str()), |(d, n)| (Some(d), n));
            let star = name.rsplit_once('.').map_or("*".to_owned(), |(_, e)| format!("*.{}", globset::escape(e)));
            dir.map_or(star.clone(), |d| format!("{}/{star}", globset::escape(d)))
        }
        // Any flags, and any arguments where they were pinned.
        Aspect::Command(c) => {
            let base = super::shell::CommandUse { flags: vec![], args: vec![], ..c.clone() }.rule();
            format!("{base} -*{}", if c.args.is_empty() { "" } else { " -- **" })
        }
        Aspect::Host(h) => match h.split_once('.') {
            Some((_, parent)) if parent.contains('.') => format!("*.{parent}"),
            _ => h.clone(),
        },
        other => other.subject(),
    }
}

/// What a `--pattern` widening newly allows among past observed calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Preview {
    pub newly_allowed: u64,
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Widened {
    pub version: u32,
    pub added: Vec<String>,
    pub preview: Preview,
    #[serde(skip)]
    pub text: String,
}

/// Everything `status` and `export` show about a job.
#[derive(Debug, Clone)]
pub struct Overview {
    pub job: String,
    pub meta: Meta,
    pub version: Option<u32>,
    pub sha256: Option<String>,
    pub mandate: Option<JobMandate>,
    pub evidence: Evidenced,
    /// Rules of the pending version not in the active one, per family.
    pub pending_rules: BTreeMap<Family, usize>,
    pub drift: Vec<Drift>,
    pub observed_runs: usize,
    /// Set when the active version fails its hash check.
    pub integrity_error: Option<String>,
}

impl Job {
    pub fn overview(&self) -> Result<Overview, StateError> {
        let _lock = self.lock(false)?;
        let meta = self.meta()?;
        let (mut version, mut sha256, mut mandate, mut evidence, mut integrity_error) =
            (None, None, None, Evidenced::default(), None);
        match self.active(&meta) {
            Ok(Some((v, text, m))) => {
                evidence = mandate::evidence_of(&text, &m);
                sha256 = Some(sha256_hex(&text));
                version = Some(v);
                mandate = Some(m);
            }
            Ok(None) => {}
            Err(e) => integrity_error = Some(e),
        }
        let mut pending_rules = BTreeMap::new();
        if let Some(p) = meta.pending
            && let Ok(m) = self.version_text(p).map_err(|e| e.to_string()).and_then(|t| mandate::from_yaml(&t))
        {
            let empty = JobMandate { tools: vec![], commands: vec![], hosts: vec![], ..m.clone() };
            let base = mandate.as_ref().unwrap_or(&empty);
            let new = |a: &[String], b: &[String]| a.iter().filter(|r| !b.contains(r)).count();
            pending_rules.insert(Family::Tools, new(&m.tools, &base.tools));
            pending_rules
                .insert(Family::Paths, new(&m.paths.read, &base.paths.read) + new(&m.paths.write, &base.paths.write));
            pending_rules.insert(Family::Commands, new(&m.commands, &base.commands));
            pending_rules.insert(Family::Hosts, new(&m.hosts, &base.hosts));
            if mandate.is_none() {
                evidence = mandate::evidence_of(&self.version_text(p)?, &m);
                version = Some(p);
                mandate = Some(m);
            }
        }
        let mut runs = std::collections::BTreeSet::new();
        self.each_observation(|o| {
            runs.insert(o.run);
        })?;
        let observed_runs = runs.len();
        Ok(Overview {
            job: self.name.clone(),
            meta,
            version,
            sha256,
            mandate,
            evidence,
            pending_rules,
            drift: self.drift()?,
            observed_runs,
            integrity_error,
        })
    }
}
