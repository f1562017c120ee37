//! Shell command lines, judged the way Bash would run them.
//!
//! 1. [`grammar`]: the line is parsed with tree-sitter-bash and reduced to plain simple
//!    commands of literal words, or opaque statements (a whitelist: anything with an
//!    expansion, substitution, glob, control flow, here-document… is opaque).
//! 2. [`kinds`]: each plain command's arguments are judged by the command-kind table:
//!    paths read or written, arguments pinned as learned, hosts, wrappers looked through,
//!    code-running commands opaque.
//!    `args` splits a path kind's arguments into flags, paths read and written and
//!    pinned words.
//! 3. Here: `cd`/`pushd`/`popd` are tracked (later relative paths are judged from every
//!    directory the line may be in), and each command becomes a [`Segment`].
//!
//! An opaque segment is allowed only by an exact `=text` rule.

mod args;
mod flags;
pub mod grammar;
mod hosts;
pub mod kinds;
mod rule;

use args::judge;
use hosts::network_hosts;
pub use hosts::{url_host, url_hosts};

use grammar::{Redirect, Unit};
use kinds::Kind;

pub use rule::{RULE_SHAPE, RuleError, RuleWord, rule_words};

/// Most bytes of one command line we analyse; a longer one is opaque as a whole.
pub const COMMAND_BYTES_MAX: usize = 16 * 1024;
/// Most wrappers looked through in one segment (`sudo nice timeout 5 …`).
pub const WRAPPER_DEPTH_MAX: usize = 4;
/// Most directories a line may be in after its `cd`s before what follows is opaque.
pub const DIRECTORIES_MAX: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segment {
    /// The statement as written (trimmed), for `=exact` rules and drift records.
    pub text: String,
    /// `None` for an opaque segment.
    pub command: Option<CommandUse>,
    /// Files written or deleted (redirects and write arguments).
    pub writes: Vec<String>,
    /// Files read (redirects and path arguments).
    pub reads: Vec<String>,
    /// Hosts named by URLs and network arguments.
    pub hosts: Vec<String>,
}

/// What a command rule judges about one simple command.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct CommandUse {
    pub head: String,
    #[serde(default)]
    pub subcommand: Option<String>,
    /// Sorted, unique; `--name=value` is `--name`.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Environment names set by `NAME=value` prefixes or `env NAME=value`.
    #[serde(default)]
    pub env: Vec<String>,
    /// Arguments pinned exactly, in order (commands of a pinned kind); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

impl CommandUse {
    /// The rule text that allows exactly this use:
    /// `[NAME=* ...] head [sub] [flags...] [-- args...]`, words quoted where needed.
    pub fn rule(&self) -> String {
        let mut parts: Vec<String> = self.env.iter().map(|e| format!("{e}=*")).collect();
        parts.push(rule::quote_head(&self.head));
        parts.extend(self.subcommand.as_deref().map(rule::quote_word));
        parts.extend(self.flags.iter().map(|f| rule::quote_word(f)));
        if !self.args.is_empty() {
            parts.push("--".to_owned());
            parts.extend(self.args.iter().map(|a| rule::quote_arg(a)));
        }
        parts.join(" ")
    }
}

/// The directories a line may be in: relative to where it started (`""`), or absolute.
/// `None` once a `cd` goes somewhere that cannot be told.
type Dirs = Option<Vec<String>>;

fn join(dir: &str, path: &str) -> String {
    if path.starts_with('/') || dir.is_empty() { path.to_owned() } else { format!("{dir}/{path}") }
}

/// Splits a command line into segments and judges each (see the module).
pub fn parse(line: &str) -> Vec<Segment> {
    let trimmed = line.trim();
    let opaque_all = || vec![opaque(trimmed)];
    if trimmed.len() > COMMAND_BYTES_MAX {
        return opaque_all();
    }
    let Some(units) = grammar::units(trimmed) else { return opaque_all() };
    let mut dirs: Dirs = Some(vec![String::new()]);
    let mut out = Vec::new();
    for unit in units {
        segments_of(unit, &mut dirs, &mut out);
    }
    out
}

fn segments_of(unit: Unit, dirs: &mut Dirs, out: &mut Vec<Segment>) {
    match unit {
        // An opaque statement may change the directory (`cd "$HOME"`, `eval …`): what
        // follows cannot be judged relative to anything known.
        Unit::Opaque { text } => {
            out.push(opaque(&text));
            *dirs = None;
        }
        Unit::Plain { text, env, words, redirects } => {
            let before = out.len();
            plain(&text, env, &words, &redirects, dirs, out, 0);
            debug_assert!(out.len() > before, "every plain unit yields a segment");
        }
        Unit::Pipeline { text, units } => {
            let mut inner = Vec::new();
            for u in units {
                segments_of(u, dirs, &mut inner);
            }
            // What flows into a command that runs its input (`| sh`, `| xargs rm`) is
            // judged with it: the whole pipeline needs its exact rule.
            if inner.iter().any(|s| s.command.is_none()) {
                out.push(opaque(&text));
            } else {
                out.extend(inner);
            }
        }
    }
}

fn opaque(text: &str) -> Segment {
    Segment { text: text.to_owned(), ..Segment::default() }
}

pub(super) fn is_flag(w: &str) -> bool {
    w.starts_with('-') && w.len() > 1
}

/// A word that names a file by its shape: it has a `/` or starts with `.`.
fn path_like(w: &str) -> bool {
    w.contains('/') || w.starts_with('.')
}

fn plain(
    text: &str,
    env: Vec<String>,
    words: &[String],
    redirects: &[Redirect],
    dirs: &mut Dirs,
    out: &mut Vec<Segment>,
    depth: usize,
) {
    let Some(current) = dirs.clone() else {
        // After a `cd` to somewhere unknown, nothing that follows can be judged.
        out.push(opaque(text));
        return;
    };
    let mut seg = Segment { text: text.to_owned(), ..Segment::default() };
    let resolve = |p: &str| -> Vec<String> { current.iter().map(|d| join(d, p)).collect() };
    for r in redirects {
        // `/dev/null` discards: it is no file of the job's, from any directory.
        if let Some(t) = r.target.as_ref().filter(|t| *t != "/dev/null") {
            if r.write {
                seg.writes.extend(resolve(t));
            }
            if r.read {
                seg.reads.extend(resolve(t));
            }
        }
    }
    for w in words.iter().filter(|w| w.contains("://")) {
        seg.hosts.extend(url_hosts(w));
    }
    let Some((head, args)) = words.split_first() else {
        out.push(opaque(text));
        *dirs = None;
        return;
    };
    let subcommand = (kinds::SUBCOMMAND_HEADS.contains(&kinds::base(head))
        && args.first().is_some_and(|a| !a.starts_with('-')))
    .then(|| args.first().cloned())
    .flatten();
    let rest = if subcommand.is_some() { args.get(1..).unwrap_or_default() } else { args };
    let mut kind = kinds::kind(head, subcommand.as_deref(), args);
    // Flags before a subcommand (`docker -H host run`): the words cannot be told apart.
    if subcommand.is_none() && kinds::SUBCOMMAND_HEADS.contains(&kinds::base(head)) && !args.is_empty() {
        kind = match kind {
            Kind::Code => Kind::Code,
            _ => Kind::Pinned,
        };
    }
    let moved = current.len() != 1 || current.first().is_some_and(|d| !d.is_empty());
    let mut cmd = CommandUse { head: head.clone(), subcommand, env, ..CommandUse::default() };
    match kind {
        Kind::Code => {
            out.push(opaque(text));
            *dirs = None;
            return;
        }
        Kind::Pinned => {
            // Pinned words name files relative to where the command runs.
            if moved {
                out.push(opaque(text));
                *dirs = None;
                return;
            }
            cmd.args = rest.to_vec();
            if kinds::NETWORK.contains(&kinds::base(head)) {
                match network_hosts(head, rest) {
                    Some((hosts, writes)) => {
                        seg.hosts.extend(hosts);
                        seg.writes.extend(writes.iter().flat_map(|w| resolve(w)));
                    }
                    None => {
                        out.push(opaque(text));
                        *dirs = None;
                        return;
                    }
                }
            }
        }
        Kind::Wrapper => {
            wrapper(text, cmd, rest, seg, dirs, out, depth);
            return;
        }
        Kind::Cd => {
            let target = rest.iter().find(|a| !is_flag(a));
            let known = matches!(head.as_str(), "cd" | "pushd") && target.is_some_and(|t| t != "-");
            cmd.flags = rest.iter().filter(|a| is_flag(a)).cloned().collect();
            match (known, target) {
                (true, Some(t)) => {
                    seg.reads.extend(resolve(t));
                    // A `cd` that fails leaves the directory as it was: keep both.
                    let mut next = current.clone();
                    next.extend(resolve(t));
                    next.sort();
                    next.dedup();
                    *dirs = (next.len() <= DIRECTORIES_MAX).then_some(next);
                }
                _ => *dirs = None,
            }
        }
        _ => {
            let (flags, reads, writes, pinned) = judge(head, cmd.subcommand.as_deref(), kind, rest);
            cmd.flags = flags;
            cmd.args = pinned;
            for p in reads {
                seg.reads.extend(resolve(&p));
            }
            for p in writes {
                seg.writes.extend(resolve(&p));
            }
        }
    }
    cmd.flags.sort();
    cmd.flags.dedup();
    cmd.env.sort();
    cmd.env.dedup();
    seg.command = Some(cmd);
    finish(&mut seg);
    out.push(seg);
}

fn finish(seg: &mut Segment) {
    for list in [&mut seg.reads, &mut seg.writes, &mut seg.hosts] {
        list.sort();
        list.dedup();
    }
}

/// Looks through a wrapper: the wrapper's own flags are one segment, the wrapped command
/// is judged as its own segment.
fn wrapper(
    text: &str,
    mut cmd: CommandUse,
    args: &[String],
    mut seg: Segment,
    dirs: &mut Dirs,
    out: &mut Vec<Segment>,
    depth: usize,
) {
    if depth >= WRAPPER_DEPTH_MAX {
        out.push(opaque(text));
        *dirs = None;
        return;
    }
    let head = cmd.head.clone();
    let value_flags = kinds::wrapper_value_flags(&head);
    let opaque_flags = kinds::wrapper_opaque_flags(&head);
    let mut rest = args;
    let mut inner_env = Vec::new();
    while let Some((w, tail)) = rest.split_first() {
        let name = w.split_once('=').map_or(w.as_str(), |(n, _)| n);
        // Bash's `time` keyword knows only `-p`: `time --` runs a command named `--`.
        if head == "time" && is_flag(w) && w != "-p" {
            out.push(opaque(text));
            *dirs = None;
            return;
        }
        if w == "--" {
            rest = tail;
            break;
        }
        if is_flag(w) {
            if opaque_flags.iter().any(|f| name == *f || (f.len() == 2 && !f.starts_with("--") && w.starts_with(f))) {
                out.push(opaque(text));
                *dirs = None;
                return;
            }
            cmd.flags.push(name.to_owned());
            rest = tail;
            // A value (`-u root`, `--user=root`) is pinned: `sudo -u postgres` is not
            // `sudo -u root`. (`-uroot` is a flag of its own.)
            if value_flags.contains(&w.as_str()) {
                cmd.args.extend(rest.first().cloned());
                rest = rest.get(1..).unwrap_or_default();
            } else if let Some((n, v)) = w.split_once('=')
                && value_flags.contains(&n)
            {
                cmd.args.push(v.to_owned());
            }
            continue;
        }
        if head.ends_with("env") && grammar_assignment(w).is_some() {
            inner_env.extend(grammar_assignment(w).map(str::to_owned));
            rest = tail;
            continue;
        }
        break;
    }
    for _ in 0..kinds::wrapper_operands(&head) {
        let Some((operand, tail)) = rest.split_first() else { break };
        if head.ends_with("flock") {
            seg.writes.push(operand.clone());
        }
        cmd.args.push(operand.clone());
        rest = tail;
    }
    cmd.flags.sort();
    cmd.flags.dedup();
    seg.command = Some(cmd);
    finish(&mut seg);
    out.push(seg);
    if !rest.is_empty() {
        plain(text, inner_env, rest, &[], dirs, out, depth + 1);
    }
}

fn grammar_assignment(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes().first().is_some_and(u8::is_ascii_digit);
    ok.then_some(name)
}

#[cfg(test)]
mod tests;
