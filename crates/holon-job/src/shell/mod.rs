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
mod custom;
pub mod grammar;
mod hosts;
pub mod kinds;
pub mod options;
mod rule;
mod words;

use args::Judged;
pub use args::recursive;
use hosts::network_hosts;
pub use hosts::{url_host, url_hosts};

use grammar::{Redirect, Unit};
use kinds::ArgsKind;

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
    let (subcommand, rest, kind) = command_kind(head, args);
    let moved = current.len() != 1 || current.first().is_some_and(|d| !d.is_empty());
    // Variables that change which program runs, how it reads its options, or what it
    // loads (`PATH=…`, `LD_PRELOAD=…`, `POSIXLY_CORRECT=1`, `TAR_OPTIONS=…`).
    if env.iter().any(|e| kinds::opaque_env(e)) {
        out.push(opaque(text));
        *dirs = None;
        return;
    }
    let mut cmd = CommandUse { head: head.clone(), subcommand, env, ..CommandUse::default() };
    let judged = match kind {
        ArgsKind::Code => None,
        // Pinned words name files relative to where the command runs.
        ArgsKind::Pinned if moved => None,
        ArgsKind::Pinned => {
            cmd.args = rest.to_vec();
            if kinds::NETWORK.contains(&kinds::base(head)) {
                network_hosts(head, rest).map(|(hosts, writes)| Judged { hosts, writes, ..Judged::default() })
            } else {
                Some(Judged::default())
            }
        }
        ArgsKind::Wrapper(spec) => {
            wrapper(text, spec, cmd, rest, seg, dirs, out, depth);
            return;
        }
        ArgsKind::Cd => {
            cd(head, rest, &current, &mut cmd, &mut seg, dirs);
            Some(Judged::default())
        }
        ArgsKind::Lookup => {
            Some(Judged { flags: rest.iter().filter(|a| is_flag(a)).cloned().collect(), ..Judged::default() })
        }
        ArgsKind::Test => Some(custom::test(rest)),
        ArgsKind::Dd => custom::dd(rest),
        ArgsKind::Find => custom::find(rest),
        // What a program opens on its own (git's repository) is found from where it runs,
        // which after a `cd` the text no longer tells.
        ArgsKind::Table(spec) if moved && !(spec.implicit_reads.is_empty() && spec.implicit_writes.is_empty()) => None,
        ArgsKind::Table(spec) => args::judge(spec, rest),
    };
    let Some(judged) = judged else {
        out.push(opaque(text));
        *dirs = None;
        return;
    };
    record(judged, cmd, &mut seg, resolve);
    finish(&mut seg);
    out.push(seg);
}

/// The subcommand a command names (`git push`: only for the heads that have them, and
/// only as the first word), the words after it, and how those words are judged.
fn command_kind<'w>(head: &str, args: &'w [String]) -> (Option<String>, &'w [String], ArgsKind) {
    let subcommand = (kinds::SUBCOMMAND_HEADS.contains(&kinds::base(head))
        && args.first().is_some_and(|a| !a.starts_with('-')))
    .then(|| args.first().cloned())
    .flatten();
    let rest = if subcommand.is_some() { args.get(1..).unwrap_or_default() } else { args };
    let mut kind = kinds::kind(head, subcommand.as_deref(), args);
    // Flags before a subcommand (`docker -H host run`): the words cannot be told apart.
    if subcommand.is_none() && kinds::SUBCOMMAND_HEADS.contains(&kinds::base(head)) && !args.is_empty() {
        kind = match kind {
            ArgsKind::Code => ArgsKind::Code,
            _ => ArgsKind::Pinned,
        };
    }
    (subcommand, rest, kind)
}

/// What the judge found, into the command's use (flags and pinned words, sorted, once
/// each) and the segment's files (resolved from where it runs) and hosts.
fn record(judged: Judged, mut cmd: CommandUse, seg: &mut Segment, resolve: impl Fn(&str) -> Vec<String>) {
    cmd.flags.extend(judged.flags);
    cmd.args.extend(judged.pinned);
    for p in judged.reads {
        seg.reads.extend(resolve(&p));
    }
    for p in judged.writes {
        seg.writes.extend(resolve(&p));
    }
    seg.hosts.extend(judged.hosts);
    cmd.flags.sort();
    cmd.flags.dedup();
    cmd.env.sort();
    cmd.env.dedup();
    seg.command = Some(cmd);
}

fn finish(seg: &mut Segment) {
    for list in [&mut seg.reads, &mut seg.writes, &mut seg.hosts] {
        list.sort();
        list.dedup();
    }
}

/// `cd`/`pushd`/`popd`: the target is read, and later relative paths are judged from
/// every directory the line may be in (a `cd` that fails leaves it where it was).
fn cd(head: &str, args: &[String], current: &[String], cmd: &mut CommandUse, seg: &mut Segment, dirs: &mut Dirs) {
    let target = args.iter().find(|a| !is_flag(a));
    let known = matches!(head, "cd" | "pushd") && target.is_some_and(|t| t != "-");
    cmd.flags = args.iter().filter(|a| is_flag(a)).cloned().collect();
    match (known, target) {
        (true, Some(t)) => {
            let at: Vec<String> = current.iter().map(|d| join(d, t)).collect();
            seg.reads.extend(at.iter().cloned());
            let mut next = current.to_vec();
            next.extend(at);
            next.sort();
            next.dedup();
            *dirs = (next.len() <= DIRECTORIES_MAX).then_some(next);
        }
        _ => *dirs = None,
    }
}

/// Looks through a wrapper: the wrapper with its options is one segment (their values
/// pinned), the wrapped command is judged as its own segment.
#[allow(clippy::too_many_arguments)]
fn wrapper(
    text: &str,
    spec: &options::Spec,
    mut cmd: CommandUse,
    args: &[String],
    mut seg: Segment,
    dirs: &mut Dirs,
    out: &mut Vec<Segment>,
    depth: usize,
) {
    let give_up = |out: &mut Vec<Segment>, dirs: &mut Dirs| {
        out.push(opaque(text));
        *dirs = None;
    };
    // Bash's `time` keyword knows only `-p`: `time --` runs a command named `--`.
    if depth >= WRAPPER_DEPTH_MAX || (cmd.head == "time" && args.first().is_some_and(|a| is_flag(a) && a != "-p")) {
        return give_up(out, dirs);
    }
    let Some(judged) = args::judge(spec, args) else { return give_up(out, dirs) };
    let Ok(parsed) = spec.parse(args) else { return give_up(out, dirs) };
    cmd.flags = judged.flags;
    cmd.args = judged.pinned;
    let mut rest = parsed.operands.as_slice();
    for _ in 0..spec.lead {
        let Some((operand, tail)) = rest.split_first() else { break };
        if spec.lead_writes {
            seg.writes.push(operand.clone());
        }
        cmd.args.push(operand.clone());
        rest = tail;
    }
    seg.writes.extend(judged.writes);
    seg.reads.extend(judged.reads);
    // `env NAME=value cmd`, and Bash's `time NAME=value cmd` (a reserved word before an
    // ordinary simple command): the names are the wrapped command's.
    let mut inner_env = Vec::new();
    if kinds::base(&cmd.head) == "env" || cmd.head == "time" {
        while let Some((w, tail)) = rest.split_first() {
            let Some(name) = grammar_assignment(w) else { break };
            inner_env.push(name.to_owned());
            rest = tail;
        }
    }
    // Where the wrapped command goes, a word starting with `-` is an option of the
    // wrapper's own reading (`flock FILE -c COMMAND`), no command.
    if rest.first().is_some_and(|w| w.starts_with('-')) {
        return give_up(out, dirs);
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
