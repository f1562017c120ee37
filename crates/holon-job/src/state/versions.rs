//! Versions: a proposal becomes pending, approval pins its SHA-256 and enforces it,
//! undo walks back, and the active version is read only when it still hashes to its
//! approval.

use super::store::{atomic_write, sha256_hex, write_json};
use super::{Job, JobMode, Meta, StateError, VersionApproval};
use crate::mandate::{self, JobMandate};
use crate::propose;
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

/// Which version `holon job show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The approved version being enforced (only while it still hashes to its approval).
    Active,
    /// The version waiting for approval.
    Pending,
}

/// One version of a job mandate as stored: its number, its file and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionText {
    pub version: u32,
    pub path: std::path::PathBuf,
    pub text: String,
}

impl Job {
    /// The file version `v` is stored in (to tell a reviewer where to read it).
    pub fn version_file(&self, v: u32) -> std::path::PathBuf {
        self.version_path(v)
    }

    /// The active or the pending version, `None` when the job has none. An active
    /// version that no longer hashes to its approval is refused, as `check` blocks on it:
    /// what is shown is always what is enforced.
    pub fn version(&self, which: Which) -> Result<Option<VersionText>, StateError> {
        let _lock = self.lock(false)?;
        let meta = self.meta()?;
        let shown = |version: u32, text: String| VersionText { version, path: self.version_path(version), text };
        match which {
            Which::Active => match self.active(&meta) {
                Ok(found) => Ok(found.map(|(v, text, _)| shown(v, text))),
                Err(ActiveError::Unreadable(e)) => Err(e),
                Err(e) => Err(StateError::Refused(format!(
                    "{e}; every call of `{}` is blocked until the file is restored or another version approved",
                    self.name
                ))),
            },
            Which::Pending => match meta.pending {
                Some(v) => Ok(Some(shown(v, self.version_text(v)?))),
                None => Ok(None),
            },
        }
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
        let (mut m, ev) = proposal.finish(&self.name);
        // The sandbox's settings are a person's, not learned: a new proposal keeps the
        // active version's.
        m.sandbox = self.meta().ok().and_then(|meta| self.active(&meta).ok().flatten()).and_then(|(_, _, a)| a.sandbox);
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
    /// Activates the pending version; also the active version it replaces when their texts
    /// are identical.
    pub fn approve(&self) -> Result<(VersionApproval, Option<u32>), StateError> {
        let _lock = self.lock(true)?;
        let mut meta = self.meta()?;
        let v = meta.pending.ok_or_else(|| {
            StateError::Refused(format!("nothing to approve: `holon job propose {}` or `widen` first", self.name))
        })?;
        let text = self.version_text(v)?;
        if let Err(e) = mandate::from_yaml(&text) {
            return Err(StateError::Refused(format!("version {v} is not a valid job mandate, not approved: {e}")));
        }
        let approval = VersionApproval {
            version: v,
            sha256: sha256_hex(&text),
            at: Timestamp::now().to_string(),
            schema_sha256: Some(SCHEMA_SHA256.to_owned()),
        };
        // The version it replaces, when the text is the same (`widen` of a drift already
        // allowed elsewhere, a proposal of nothing new): said, so nobody reviews it twice.
        let same_as = meta
            .active
            .and_then(|a| meta.approvals.iter().rev().find(|x| x.version == a))
            .filter(|x| x.sha256 == approval.sha256)
            .map(|x| x.version);
        meta.approvals.push(approval.clone());
        meta.history.push(v);
        meta.active = Some(v);
        meta.pending = None;
        meta.mode = JobMode::Enforce;
        write_json(&self.path("meta.json"), &meta)?;
        Ok((approval, same_as))
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
            meta.mode = JobMode::Observe;
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
        // The same text passed the same schema at its approval: its typing and rules are
        // checked again, the schema's pass is not (an approval by a build with another
        // schema, or older than the record, gets the whole check).
        let m = if approved.schema_sha256.as_deref() == Some(SCHEMA_SHA256) {
            mandate::from_yaml_shape_known(&text)?
        } else {
            mandate::from_yaml(&text)?
        };
        Ok(Some((v, text, m)))
    }
}

/// The SHA-256 of this build's job mandate schema (`schema/holon-job-mandate.schema.json`),
/// computed by build.rs from the file rather than in every process (138 k instructions of
/// each `job check` and `exec`).
pub(super) const SCHEMA_SHA256: &str = env!("HOLON_JOB_SCHEMA_SHA256");

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

#[cfg(test)]
mod tests {
    /// build.rs hashed the bytes the documents crate compiles in.
    #[test]
    fn the_schema_digest_is_the_schema_s() {
        assert_eq!(super::SCHEMA_SHA256, super::sha256_hex(crate::doc::schema::JOB_MANDATE_SCHEMA));
    }
}
