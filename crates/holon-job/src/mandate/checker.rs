//! A job mandate compiled for checking calls: command matchers (with pinned arguments)
//! and path rules per place.

use globset::{GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use super::{JobMandate, glob};
use crate::call::{Aspect, Family, ToolCall};
use crate::shell::RuleError;

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
        /// Canonical option names (a rule may spell an option any way the program does:
        /// `--recursive` is `-r`).
        flags: Vec<String>,
        /// `-*`: any plain switch of the option table (no value, no effect on which
        /// files, hosts or programs are used) besides `flags`.
        any_flags: bool,
        args: Vec<ArgPattern>,
    },
}

impl CommandMatcher {
    pub fn parse(rule: &str) -> Result<Self, RuleError> {
        if let Some(exact) = rule.strip_prefix('=') {
            return Ok(CommandMatcher::Exact(exact.to_owned()));
        }
        let words = crate::shell::rule_words(rule)?;
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
        let head = words.next().ok_or_else(|| RuleError::NoCommand { rule: rule.to_owned() })?.text;
        let (mut subcommand, mut flags, mut any_flags, mut args) = (None, Vec::new(), false, None::<Vec<ArgPattern>>);
        for w in words {
            if let Some(list) = &mut args {
                if list.last() == Some(&ArgPattern::Rest) {
                    return Err(RuleError::RestNotLast { rule: rule.to_owned() });
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
                return Err(RuleError::Misplaced { rule: rule.to_owned(), word: w.text });
            }
        }
        // Flags by the option they spell, so that `rm --recursive` in a rule is `rm -r`.
        if let Some(spec) = crate::shell::kinds::spec_of(&head, subcommand.as_deref()) {
            for f in &mut flags {
                if let Some(opt) = spec.by_spelling(f) {
                    *f = opt.name().to_owned();
                }
            }
        }
        Ok(CommandMatcher::Rule { env, head, subcommand, flags, any_flags, args: args.unwrap_or_default() })
    }

    pub fn allows(&self, aspect: &Aspect) -> bool {
        match (self, aspect) {
            (CommandMatcher::Exact(t), Aspect::Opaque(text)) => t == text,
            (CommandMatcher::Rule { env, head, subcommand, flags, any_flags, args }, Aspect::Command(c)) => {
                if head != &c.head || subcommand != &c.subcommand {
                    return false;
                }
                // `-*` allows only switches that take no value and change no file, host or
                // program; a command outside the table has none it could allow. The table is
                // read only for a `-*` rule of this very command.
                let spec = if *any_flags { crate::shell::kinds::spec_of(head, subcommand.as_deref()) } else { None };
                let plain = |f: &String| spec.and_then(|s| s.by_spelling(f)).is_some_and(|o| o.is_plain_switch());
                c.flags.iter().all(|f| flags.contains(f) || plain(f))
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
    // `~` and `$` name places a runtime may expand: never the relative tree.
    if path.starts_with('/') || path.starts_with('~') || path.starts_with('$') {
        Place::Absolute
    } else if path == ".." || path.starts_with("../") {
        Place::Above
    } else {
        Place::Inside
    }
}

/// A file name no rule spells out (it holds a control character, which observed paths
/// never put in a rule unescaped): a rule matches it only through a wildcard.
const PROBE: &str = "\u{1}holon-probe";

/// Path rules compiled, one glob set per place.
#[derive(Debug)]
struct PathSet {
    absolute: GlobSet,
    above: GlobSet,
    inside: GlobSet,
}

impl PathSet {
    fn compile(rules: &[String]) -> Result<PathSet, globset::Error> {
        let mut builders = [GlobSetBuilder::new(), GlobSetBuilder::new(), GlobSetBuilder::new()];
        for r in rules {
            let i = match place(r) {
                Place::Absolute => 0,
                Place::Above => 1,
                Place::Inside => 2,
            };
            if let Some(b) = builders.get_mut(i) {
                b.add(glob(r)?);
            }
        }
        let [a, b, c] = builders;
        let build = |b: GlobSetBuilder| b.build();
        Ok(PathSet { absolute: build(a)?, above: build(b)?, inside: build(c)? })
    }

    /// Whether the rules allow `path`. A recursive subject (`dir/**`, `**`, `/**`) stands
    /// for everything below its directory: a rule allows one only if it matches paths
    /// below, one level down and several, named so that no rule spells them out. Matched
    /// as text, `*` would match the subject `**` itself and let `rm -rf .` (the workdir
    /// `.` and everything below it, `**`) through a rule for one name. The workdir `.`
    /// alone (`ls .`, `touch .`) is a name like any other.
    fn is_match(&self, path: &str) -> bool {
        let below = match path {
            "**" => Some(String::new()),
            _ => path.strip_suffix("/**").map(|dir| format!("{dir}/")),
        };
        match below {
            Some(dir) => {
                let shallow = format!("{dir}{PROBE}");
                let deep = format!("{dir}{PROBE}/{PROBE}/{PROBE}/{PROBE}");
                self.is_match_one(&shallow) && self.is_match_one(&deep)
            }
            None => self.is_match_one(path),
        }
    }

    /// Whether reading `path` is allowed: the rules match it, or it is a directory whose
    /// every entry they allow (a listing of `src` tells nothing `src/**` does not).
    fn is_listing(&self, path: &str) -> bool {
        if self.is_match(path) {
            return true;
        }
        if path.ends_with("/**") || path == "**" {
            return false;
        }
        let below = match path.trim_end_matches('/') {
            "" if path.starts_with('/') => format!("/{PROBE}"),
            "" | "." => PROBE.to_owned(),
            dir => format!("{dir}/{PROBE}"),
        };
        self.is_match_one(&below)
    }

    fn is_match_one(&self, path: &str) -> bool {
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

/// Why a job mandate cannot be compiled (a valid one always can: its rules were checked).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Glob(#[from] globset::Error),
    #[error(transparent)]
    Rule(#[from] RuleError),
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
    pub fn compile(m: &JobMandate) -> Result<Checker, CompileError> {
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
            Aspect::Read(p) => self.read.is_listing(p) || self.write.is_listing(p),
            // `/dev/null` as a redirect target never reaches here (it is no file of the
            // job's); named as an operand (`rm -f /dev/null`) it is a path like any other.
            Aspect::Write(p) => self.write.is_match(p),
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
