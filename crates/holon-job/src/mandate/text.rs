//! The job mandate as text: its deterministic YAML with evidence and notes, the evidence
//! read back, and parsing through the document layer.

use std::collections::BTreeMap;

use super::checker::ArgPattern;
use super::{CommandMatcher, Evidence, Evidenced, JobMandate};
use crate::doc::{self, DocError, DocKind, Violation};

/// The YAML of a job mandate with its evidence, byte for byte deterministic: lists in
/// byte order, every string double-quoted, one evidence comment per rule.
pub fn to_yaml(m: &JobMandate, evidence: &Evidenced, header: &str) -> String {
    let q = yaml_quoted;
    let find = |list: &[Evidence], v: &str| list.iter().find(|e| e.value == v).cloned();
    let mut out = String::new();
    for line in header.lines() {
        out.push_str(&format!("# {line}\n"));
    }
    out.push_str("mandate: 1\n");
    out.push_str(&format!("job: {}\n", q(&m.job)));
    out.push_str(&format!("workdir: {}\n", q(&m.workdir)));
    out.push_str(&format!("observed_runs: {}\n", m.observed_runs));
    let list = |out: &mut String, indent: &str, key: &str, values: &[String], ev: &[Evidence]| {
        if values.is_empty() {
            out.push_str(&format!("{indent}{key}: []\n"));
        } else {
            out.push_str(&format!("{indent}{key}:\n"));
            for v in values {
                let note = if key == "commands" { command_note(v) } else { String::new() };
                let e = find(ev, v);
                let broader = e.as_ref().and_then(|e| e.broader.as_deref()).map(|b| format!("{BROADER}{b}"));
                let n = e.map_or(0, |e| e.evidence);
                out.push_str(&format!("{indent}  - {}  # seen {n}x{}{note}\n", q(v), broader.unwrap_or_default()));
            }
        }
    };
    list(&mut out, "", "tools", &m.tools, &evidence.tools);
    out.push_str("paths:\n");
    list(&mut out, "  ", "read", &m.paths.read, &evidence.read);
    list(&mut out, "  ", "write", &m.paths.write, &evidence.write);
    list(&mut out, "", "commands", &m.commands, &evidence.commands);
    list(&mut out, "", "hosts", &m.hosts, &evidence.hosts);
    out.push_str("limits:\n");
    match m.limits.max_writes_per_run {
        Some(n) => out.push_str(&format!("  max_writes_per_run: {n}\n")),
        None => out.push_str("  max_writes_per_run: null\n"),
    }
    if let Some(s) = &m.sandbox {
        out.push_str("sandbox:\n");
        list(&mut out, "  ", "system_read", &s.system_read, &[]);
    }
    out
}

/// Marks, in a rule's comment, a rule that allows more than the calls it was learned
/// from; what follows it (up to the next ` · `) says how much more.
const BROADER: &str = " · BROADER than seen: ";

/// A double-quoted YAML scalar: JSON escaping, plus `\uXXXX` for the control characters
/// JSON leaves raw (DEL, C1) and YAML refuses, so any observed text can be approved.
fn yaml_quoted(s: &str) -> String {
    let json = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned());
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// What a command rule allows, for the reviewer reading the proposal: `rm -f -r` is not
/// "rm -rf anything", its paths are judged by `paths.write`.
fn command_note(rule: &str) -> String {
    use crate::shell::kinds::{self, ArgsKind};
    match CommandMatcher::parse(rule) {
        Ok(CommandMatcher::Exact(_)) => " · exactly this text".to_owned(),
        Ok(CommandMatcher::Rule { head, subcommand, args, any_flags, .. }) => {
            use crate::shell::options::Operands;
            let kind = match kinds::kind(&head, subcommand.as_deref(), &[]) {
                _ if args.contains(&ArgPattern::Rest) || args.contains(&ArgPattern::One) => {
                    return " · arguments as pinned, * = any one, ** = any".to_owned();
                }
                ArgsKind::Pinned => " · exactly these arguments",
                ArgsKind::Table(spec) => match spec.operands {
                    Operands::Write | Operands::Copy | Operands::Move | Operands::Link | Operands::Tar => {
                        " · its paths must match paths.write"
                    }
                    Operands::Read => " · its paths must match paths.read",
                    Operands::PathLike => " · arguments shaped like paths must match paths.read",
                    Operands::Sed => " · script pinned; files must match paths.read (paths.write with -i)",
                    Operands::Pinned => " · exactly these arguments",
                    Operands::Words | Operands::Wrapper => "",
                },
                ArgsKind::Dd => " · its paths must match paths.write",
                ArgsKind::Find => " · its paths must match paths.read",
                ArgsKind::Wrapper(_) => " · the command it runs is judged as its own segment",
                ArgsKind::Cd => " · its directory must match paths.read; later paths are judged from there",
                _ => "",
            };
            // What the program opens on its own (git's repository) is part of the rule.
            let own = kinds::spec_of(&head, subcommand.as_deref())
                .filter(|s| !(s.implicit_reads.is_empty() && s.implicit_writes.is_empty()))
                .map(|s| {
                    let mut parts = Vec::new();
                    if !s.implicit_reads.is_empty() {
                        parts.push(format!("reads {}", s.implicit_reads.join(" and ")));
                    }
                    if !s.implicit_writes.is_empty() {
                        parts.push(format!("writes {}", s.implicit_writes.join(" and ")));
                    }
                    format!(" · on its own it {}", parts.join(" and "))
                })
                .unwrap_or_default();
            // What `-*` still refuses has to be said, or it reads as "anything".
            match (any_flags, kind) {
                (true, " · exactly these arguments") | (false, _) => format!("{kind}{own}"),
                (true, _) => {
                    format!(
                        "{kind}{own} · -* allows only options that take no value and change no file, host or program"
                    )
                }
            }
        }
        Err(_) => String::new(),
    }
}

/// Reads the `# seen Nx` comments back from a job mandate's YAML (a rule without one has
/// evidence 0). Only list items of the five rule lists are read.
pub fn evidence_of(yaml: &str, m: &JobMandate) -> Evidenced {
    let mut seen: BTreeMap<(&'static str, String), (u64, Option<String>)> = BTreeMap::new();
    let mut section = "";
    for line in yaml.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match (indent, trimmed) {
            (0, t) if t.starts_with("tools:") => section = "tools",
            (0, t) if t.starts_with("commands:") => section = "commands",
            (0, t) if t.starts_with("hosts:") => section = "hosts",
            (0, t) if t.starts_with("paths:") => section = "paths",
            (2, t) if section.starts_with("paths") && t.starts_with("read:") => section = "paths.read",
            (2, t) if section.starts_with("paths") && t.starts_with("write:") => section = "paths.write",
            (0, t) if !t.starts_with('-') && !t.starts_with('#') => section = "",
            (_, t) if t.starts_with("- ") => {
                let item = t.get(2..).unwrap_or_default();
                let (value, comment) = match item.rsplit_once("  # seen ") {
                    Some((v, c)) => (v, Some(c)),
                    None => (item, None),
                };
                let value = serde_json::from_str::<String>(value.trim()).unwrap_or_else(|_| value.trim().to_owned());
                let n =
                    comment.and_then(|c| c.split('x').next()).and_then(|n| n.trim().parse::<u64>().ok()).unwrap_or(0);
                let key: &'static str = match section {
                    "tools" => "tools",
                    "commands" => "commands",
                    "hosts" => "hosts",
                    "paths.read" => "read",
                    "paths.write" => "write",
                    _ => continue,
                };
                let broader = comment
                    .and_then(|c| c.split_once(BROADER))
                    .map(|(_, rest)| rest.split(" · ").next().unwrap_or_default().to_owned());
                seen.insert((key, value), (n, broader));
            }
            _ => {}
        }
    }
    let pick = |key: &'static str, values: &[String]| -> Vec<Evidence> {
        values
            .iter()
            .map(|v| {
                let (evidence, broader) = seen.get(&(key, v.clone())).cloned().unwrap_or_default();
                Evidence { value: v.clone(), evidence, broader }
            })
            .collect()
    };
    Evidenced {
        tools: pick("tools", &m.tools),
        read: pick("read", &m.paths.read),
        write: pick("write", &m.paths.write),
        commands: pick("commands", &m.commands),
        hosts: pick("hosts", &m.hosts),
    }
}

/// Why a job mandate's text is not a valid job mandate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Unreadable(#[from] DocError),
    #[error("the document is not a job mandate (`mandate: 1`)")]
    NotAJobMandate,
    #[error("{}", .0.iter().map(|v| format!("{}: {}", v.path, v.message)).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Violation>),
}

/// [`from_yaml`] for a text that passed the job mandate schema of this build before (its
/// approval recorded the schema's SHA-256, and the text's own SHA-256 was checked): the
/// limits, the typing and the rules, without the schema's pass.
pub fn from_yaml_shape_known(text: &str) -> Result<JobMandate, ReadError> {
    doc::validated_shape_known(&job_mandate_value(text)?, super::validate).map_err(ReadError::Invalid)
}

/// Parses a job mandate's YAML through the document layer (limits, schema, rules).
pub fn from_yaml(text: &str) -> Result<JobMandate, ReadError> {
    doc::validated(DocKind::JobMandate, &job_mandate_value(text)?, super::validate).map_err(ReadError::Invalid)
}

/// The YAML of `text` within the document limits, when it is a job mandate.
fn job_mandate_value(text: &str) -> Result<serde_json::Value, ReadError> {
    let value = doc::yaml::parse(text, &doc::Limits::default())?;
    if doc::detect_kind(&value)? != DocKind::JobMandate {
        return Err(ReadError::NotAJobMandate);
    }
    Ok(value)
}
