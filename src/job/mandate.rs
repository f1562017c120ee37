//! The job mandate document (`mandate: 1`): its typed form, its deterministic YAML with
//! `# seen Nx` evidence, and the compiled checker that judges one tool call.

use std::collections::BTreeMap;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use super::call::{Aspect, Family, ToolCall};
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

fn glob(pattern: &str) -> Result<Glob, globset::Error> {
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
    for (i, rule) in m.commands.iter().enumerate() {
        if let Err(e) = CommandMatcher::parse(rule) {
            v.push(Violation::new(format!("/commands/{i}"), e));
        }
    }
    v
}

pub fn valid_job_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// How a rule's pinned arguments match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgPattern {
    /// This word exactly.
    Literal(String),
    /// `*`: any one word.
    One,
    /// `**` (last only): any words, or none.
    Rest,
}

/// A command rule compiled: `[NAME=* ...] head [sub] [flags...] [-- args...]`, or
/// `=exact text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandMatcher {
    Exact(String),
    Rule {
        env: Vec<String>,
        head: String,
        subcommand: Option<String>,
        flags: Vec<String>,
        any_flags: bool,
        args: Vec<ArgPattern>,
    },
}

impl CommandMatcher {
    pub fn parse(rule: &str) -> Result<Self, String> {
        if let Some(exact) = rule.strip_prefix('=') {
            return Ok(CommandMatcher::Exact(exact.to_owned()));
        }
        let shape = "a rule is `[NAME=* ...] command [subcommand] [-flags...] [-- arguments...]`, `-*` for any flags, `*`/`**` for any argument(s), or `=exact text`";
        let words = super::shell::rule_words(rule)?;
        let mut words = words.into_iter().peekable();
        let mut env = Vec::new();
        while let Some(w) = words.peek() {
            match w.text.strip_suffix("=*") {
                Some(name) if !w.quoted && !name.is_empty() => {
                    env.push(name.to_owned());
                    words.next();
                }
                _ => break,
            }
        }
        let head = words.next().ok_or_else(|| format!("`{rule}` names no command"))?.text;
        let (mut subcommand, mut flags, mut any_flags, mut args) = (None, Vec::new(), false, None::<Vec<ArgPattern>>);
        for w in words {
            if let Some(list) = &mut args {
                if list.last() == Some(&ArgPattern::Rest) {
                    return Err(format!("`{rule}`: `**` must be the last argument"));
                }
                list.push(match (w.quoted, w.text.as_str()) {
                    (false, "*") => ArgPattern::One,
                    (false, "**") => ArgPattern::Rest,
                    _ => ArgPattern::Literal(w.text),
                });
            } else if !w.quoted && w.text == "--" {
                args = Some(Vec::new());
            } else if !w.quoted && w.text == "-*" {
                any_flags = true;
            } else if w.text.starts_with('-') {
                flags.push(w.text);
            } else if subcommand.is_none() && flags.is_empty() && !any_flags {
                subcommand = Some(w.text);
            } else {
                return Err(format!("`{rule}`: `{}` is neither a flag nor the subcommand; {shape}", w.text));
            }
        }
        Ok(CommandMatcher::Rule { env, head, subcommand, flags, any_flags, args: args.unwrap_or_default() })
    }

    fn allows(&self, aspect: &Aspect) -> bool {
        match (self, aspect) {
            (CommandMatcher::Exact(t), Aspect::Opaque(text)) => t == text,
            (CommandMatcher::Rule { env, head, subcommand, flags, any_flags, args }, Aspect::Command(c)) => {
                head == &c.head
                    && subcommand == &c.subcommand
                    && (*any_flags || c.flags.iter().all(|f| flags.contains(f)))
                    && c.env.iter().all(|e| env.contains(e))
                    && args_match(args, &c.args)
            }
            _ => false,
        }
    }
}

fn args_match(pattern: &[ArgPattern], args: &[String]) -> bool {
    let mut args = args.iter();
    for p in pattern {
        match p {
            ArgPattern::Rest => return true,
            ArgPattern::One => {
                if args.next().is_none() {
                    return false;
                }
            }
            ArgPattern::Literal(l) => {
                if args.next() != Some(l) {
                    return false;
                }
            }
        }
    }
    args.next().is_none()
}

/// Where a path or a path rule lies: a rule only matches paths of its own place, so a
/// relative `**` never reaches `/etc/shadow` or `../secrets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Absolute,
    Above,
    Inside,
}

fn place(path: &str) -> Place {
    if path.starts_with('/') {
        Place::Absolute
    } else if path == ".." || path.starts_with("../") {
        Place::Above
    } else {
        Place::Inside
    }
}

/// Path rules compiled, one glob set per place.
#[derive(Debug)]
struct PathSet {
    absolute: GlobSet,
    above: GlobSet,
    inside: GlobSet,
}

impl PathSet {
    fn compile(rules: &[String]) -> Result<PathSet, String> {
        let mut builders = [GlobSetBuilder::new(), GlobSetBuilder::new(), GlobSetBuilder::new()];
        for r in rules {
            let i = match place(r) {
                Place::Absolute => 0,
                Place::Above => 1,
                Place::Inside => 2,
            };
            if let Some(b) = builders.get_mut(i) {
                b.add(glob(r).map_err(|e| e.to_string())?);
            }
        }
        let [a, b, c] = builders;
        let build = |b: GlobSetBuilder| b.build().map_err(|e| e.to_string());
        Ok(PathSet { absolute: build(a)?, above: build(b)?, inside: build(c)? })
    }

    fn is_match(&self, path: &str) -> bool {
        match place(path) {
            Place::Absolute => self.absolute.is_match(path),
            Place::Above => self.above.is_match(path),
            Place::Inside => self.inside.is_match(path),
        }
    }
}

/// Why one aspect of a call is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub family: Family,
    pub aspect: Option<Aspect>,
    pub reason: String,
}

/// A job mandate compiled for checking calls.
#[derive(Debug)]
pub struct Checker {
    tools: Vec<String>,
    read: PathSet,
    write: PathSet,
    commands: Vec<CommandMatcher>,
    hosts: Vec<String>,
    pub max_writes_per_run: Option<u64>,
}

impl Checker {
    pub fn compile(m: &JobMandate) -> Result<Checker, String> {
        let set = PathSet::compile;
        let mut tools = m.tools.clone();
        tools.sort();
        Ok(Checker {
            tools,
            read: set(&m.paths.read)?,
            write: set(&m.paths.write)?,
            commands: m.commands.iter().map(|c| CommandMatcher::parse(c)).collect::<Result<_, _>>()?,
            hosts: m.hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            max_writes_per_run: m.limits.max_writes_per_run,
        })
    }

    /// Whether one aspect is allowed.
    pub fn allows(&self, aspect: &Aspect) -> bool {
        match aspect {
            Aspect::Tool(t) => self.tools.binary_search(t).is_ok(),
            // A path that matches a write rule may also be read.
            Aspect::Read(p) => self.read.is_match(p) || self.write.is_match(p),
            Aspect::Write(p) => p == "/dev/null" || self.write.is_match(p),
            Aspect::Command(_) | Aspect::Opaque(_) => self.commands.iter().any(|c| c.allows(aspect)),
            Aspect::Host(h) => self.hosts.iter().any(|rule| host_matches(rule, h)),
        }
    }

    /// Every refused aspect of `call` (the write budget is the caller's: it needs state).
    pub fn failures(&self, call: &ToolCall) -> Vec<Failure> {
        call.aspects
            .iter()
            .filter(|a| !self.allows(a))
            .map(|a| Failure {
                family: a.family(),
                aspect: Some(a.clone()),
                reason: match a {
                    Aspect::Tool(t) => format!("tool `{t}` is not in `tools`"),
                    Aspect::Read(p) => format!("reading `{p}` matches no `paths.read` or `paths.write` rule"),
                    Aspect::Write(p) => format!("writing `{p}` matches no `paths.write` rule"),
                    Aspect::Command(c) => format!("command `{}` matches no `commands` rule", c.rule()),
                    Aspect::Opaque(t) => {
                        format!("`{t}` cannot be reasoned about (a shell, eval or substitution); only the exact rule `={t}` allows it")
                    }
                    Aspect::Host(h) => format!("host `{h}` is not in `hosts`"),
                },
            })
            .collect()
    }
}

/// `example.com` matches itself; `*.example.com` matches its subdomains.
pub fn host_matches(rule: &str, host: &str) -> bool {
    match rule.strip_prefix("*.") {
        Some(domain) => {
            host.len() > domain.len() + 1 && host.ends_with(domain) && host.ends_with(&format!(".{domain}"))
        }
        None => rule == host,
    }
}

/// The YAML of a job mandate with its evidence, byte for byte deterministic: lists in
/// byte order, every string double-quoted, one evidence comment per rule.
pub fn to_yaml(m: &JobMandate, evidence: &Evidenced, header: &str) -> String {
    let q = yaml_quoted;
    let count = |list: &[Evidence], v: &str| list.iter().find(|e| e.value == v).map_or(0, |e| e.evidence);
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
                let note = if key == "commands" { command_note(v) } else { "" };
                out.push_str(&format!("{indent}  - {}  # seen {}x{note}\n", q(v), count(ev, v)));
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
    out
}

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
fn command_note(rule: &str) -> &'static str {
    use super::shell::kinds::{self, Kind};
    match CommandMatcher::parse(rule) {
        Ok(CommandMatcher::Exact(_)) => " · exactly this text",
        Ok(CommandMatcher::Rule { head, subcommand, args, any_flags, .. }) => {
            match kinds::kind(&head, subcommand.as_deref(), &[]) {
                _ if args.contains(&ArgPattern::Rest) || args.contains(&ArgPattern::One) => {
                    " · arguments as pinned, * = any one, ** = any"
                }
                Kind::Pinned => " · exactly these arguments",
                Kind::Write { .. } | Kind::Copy { .. } | Kind::Dd => " · its paths must match paths.write",
                Kind::Read { .. } | Kind::Find => " · its paths must match paths.read",
                Kind::PathLike => " · arguments shaped like paths must match paths.read",
                Kind::Sed => " · script pinned; files must match paths.read (paths.write with -i)",
                Kind::Wrapper => " · the command it runs is judged as its own segment",
                Kind::Cd => " · its directory must match paths.read; later paths are judged from there",
                _ if any_flags => " · any flags",
                _ => "",
            }
        }
        Err(_) => "",
    }
}

/// Reads the `# seen Nx` comments back from a job mandate's YAML (a rule without one has
/// evidence 0). Only list items of the five rule lists are read.
pub fn evidence_of(yaml: &str, m: &JobMandate) -> Evidenced {
    let mut seen: BTreeMap<(&'static str, String), u64> = BTreeMap::new();
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
                seen.insert((key, value), n);
            }
            _ => {}
        }
    }
    let pick = |key: &'static str, values: &[String]| -> Vec<Evidence> {
        values
            .iter()
            .map(|v| Evidence { value: v.clone(), evidence: seen.get(&(key, v.clone())).copied().unwrap_or(0) })
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

/// Parses a job mandate's YAML through the document layer (limits, schema, rules).
pub fn from_yaml(text: &str) -> Result<JobMandate, String> {
    match crate::doc::check_str(text, &crate::doc::Limits::default()) {
        Ok(checked) => match checked.result {
            Ok(crate::doc::Document::JobMandate(m)) => Ok(*m),
            Ok(_) => Err("the document is not a job mandate (`mandate: 1`)".into()),
            Err(v) => Err(v.iter().map(|v| format!("{}: {}", v.path, v.message)).collect::<Vec<_>>().join("; ")),
        },
        Err(e) => Err(e.to_string()),
    }
}
