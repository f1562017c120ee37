//! Versions: a proposal becomes pending, approval pins its SHA-256 and enforces it,
//! undo walks back, and the active version is read only when it still hashes to its
//! approval.

use super::store::{atomic_write, sha256_hex, write_json};
use super::{Approval, Job, Meta, Mode, StateError};
use crate::job::mandate::{self, JobMandate};
use crate::job::propose;
use crate::time::Timestamp;

/// Why the active version cannot be used: enforce mode then blocks every call.
#[derive(Debug, thiserror::Error)]
pub enum ActiveError {
    #[error(transparent)]
    Unreadable(#[from] StateError),
    #[error("the active version has no approval")]
    NoApproval,
    #[error(
        "version {version} no longer hashes to its approval (sha256 {approved} approved, {actual} now): the mandate file was changed"
    )]
    Changed { version: u32, approved: String, actual: String },
    #[error(transparent)]
    Invalid(#[from] mandate::ReadError),
}

impl Job {
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

    pub(super) fn add_pending(&self, text: &str) -> Result<u32, StateError> {
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
    pub fn active(&self, meta: &Meta) -> Result<Option<(u32, String, JobMandate)>, ActiveError> {
        let Some(v) = meta.active else { return Ok(None) };
        let text = self.version_text(v)?;
        let approved = meta.approvals.iter().rev().find(|a| a.version == v).ok_or(ActiveError::NoApproval)?;
        let actual = sha256_hex(&text);
        if actual != approved.sha256 {
            return Err(ActiveError::Changed {
                version: v,
                approved: short(&approved.sha256).to_owned(),
                actual: short(&actual).to_owned(),
            });
        }
        let m = mandate::from_yaml(&text)?;
        Ok(Some((v, text, m)))
    }
}

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}
