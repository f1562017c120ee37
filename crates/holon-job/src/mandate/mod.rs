//! The job mandate document (`mandate: 1`): its typed form, its deterministic YAML with
//! `# seen Nx` evidence, and the compiled checker that judges one tool call.

use globset::{Glob, GlobBuilder};
use serde::{Deserialize, Serialize};

use crate::doc::Violation;

/// Most rules in one list of a job mandate.
pub const RULES_MAX: usize = 10_000;
/// Most bytes of one rule.
pub const RULE_BYTES_MAX: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobMandate {
    pub mandate: u32,
    pub job: String,
    pub workdir: String,
    pub observed_runs: u64,
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub paths: PathRules,
    #[serde(default)]
    pub commands: Vec<String>,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub limits: JobLimits,
    /// What `holon job exec` lets the kernel grant beyond the rules (absent: the default
    /// system list, [`crate::sandbox::SYSTEM_READ_DEFAULT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxRules>,
}

/// The kernel sandbox's own settings in a job mandate (`sandbox:`), approved with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxRules {
    /// Absolute directories (or files) outside the workdir that commands may read and run
    /// from: the system's programs, libraries and configuration.
    #[serde(default)]
    pub system_read: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRules {
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobLimits {
    /// `null` (or absent) disables the write budget.
    #[serde(default)]
    pub max_writes_per_run: Option<u64>,
}

/// A rule with its evidence count, for the YAML comments, status and export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub value: String,
    pub evidence: u64,
    /// Set when the rule allows more than the calls it was learned from (a `*` standing
    /// for several observed names, flags merged from several uses): how much more, in
    /// words and numbers only (never observed text, which could break the YAML comment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broader: Option<String>,
}

/// Rules of every family with evidence, in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Evidenced {
    pub tools: Vec<Evidence>,
    pub read: Vec<Evidence>,
    pub write: Vec<Evidence>,
    pub commands: Vec<Evidence>,
    pub hosts: Vec<Evidence>,
}

pub(crate) fn glob(pattern: &str) -> Result<Glob, globset::Error> {
    // `*` stays inside one path component; `**` crosses them.
    GlobBuilder::new(pattern).literal_separator(true).build()
}

/// Every rule problem of a job mandate (empty when valid).
pub fn validate(m: &JobMandate) -> Vec<Violation> {
    let mut v = Vec::new();
    if m.mandate != 1 {
        v.push(Violation::new(
            "/mandate",
            format!("format version {} is not supported; write `mandate: 1`", m.mandate),
        ));
    }
    if !valid_job_name(&m.job) {
        v.push(Violation::new("/job", "a job name is 1 to 128 of A-Z a-z 0-9 . _ - and does not start with `.`"));
    }
    let lists: [(&str, &Vec<String>); 5] = [
        ("/tools", &m.tools),
        ("/paths/read", &m.paths.read),
        ("/paths/write", &m.paths.write),
        ("/commands", &m.commands),
        ("/hosts", &m.hosts),
    ];
    for (path, list) in lists {
        if list.len() > RULES_MAX {
            v.push(Violation::new(path, format!("{} rules; at most {RULES_MAX}", list.len())));
        }
        for (i, rule) in list.iter().enumerate() {
            if rule.is_empty() || rule.len() > RULE_BYTES_MAX {
                v.push(Violation::new(format!("{path}/{i}"), format!("a rule is 1 to {RULE_BYTES_MAX} bytes")));
            }
        }
    }
    for (path, list) in [("/paths/read", &m.paths.read), ("/paths/write", &m.paths.write)] {
        for (i, rule) in list.iter().enumerate() {
            if let Err(e) = glob(rule) {
                v.push(Violation::new(format!("{path}/{i}"), format!("`{rule}` is not a glob: {e}")));
            }
        }
    }
    if let Some(s) = &m.sandbox {
        v.extend(system_read_problems(&s.system_read));
    }
    for (i, rule) in m.commands.iter().enumerate() {
        if let Err(e) = CommandMatcher::parse(rule) {
            v.push(Violation::new(format!("/commands/{i}"), e.to_string()));
        }
    }
    v
}

/// `sandbox.system_read`: absolute, plain paths (a directory the kernel grants is a
/// hierarchy, never a glob), no `..`.
fn system_read_problems(list: &[String]) -> Vec<Violation> {
    let mut v = Vec::new();
    if list.len() > RULES_MAX {
        v.push(Violation::new("/sandbox/system_read", format!("{} paths; at most {RULES_MAX}", list.len())));
    }
    for (i, p) in list.iter().enumerate() {
        let plain = p.starts_with('/')
            && p.len() <= RULE_BYTES_MAX
            && !p.contains(['*', '?', '[', ']', '{', '}', '\\', '\0'])
            && !p.split('/').any(|c| c == ".." || c == ".");
        if !plain {
            v.push(Violation::new(
                format!("/sandbox/system_read/{i}"),
                format!("`{p}` is not an absolute plain path: write a directory such as /usr (no globs, no `.` or `..`, at most {RULE_BYTES_MAX} bytes)"),
            ));
        }
    }
    v
}

pub fn valid_job_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

mod checker;
mod text;

pub use checker::{ArgPattern, Checker, CommandMatcher, CompileError, Failure, host_matches};
pub use text::{ReadError, evidence_of, from_yaml, from_yaml_shape_known, to_yaml};
