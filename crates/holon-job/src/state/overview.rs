//! Everything `status` and `export` show about a job.

use std::collections::BTreeMap;

use super::store::sha256_hex;
use super::{Drift, Job, Meta, StateError};
use crate::call::Family;
use crate::mandate::{self, Evidenced, JobMandate, PathRules};

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
            Err(e) => integrity_error = Some(e.to_string()),
        }
        let mut pending_rules = BTreeMap::new();
        if let Some(p) = meta.pending
            && let Ok(t) = self.version_text(p)
            && let Ok(m) = mandate::from_yaml(&t)
        {
            // Before any approval every rule of the pending version is new, paths too.
            let empty =
                JobMandate { tools: vec![], paths: PathRules::default(), commands: vec![], hosts: vec![], ..m.clone() };
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
