//! Shell command lines, judged the way Bash would run them.
//!
//! 1. [`grammar`]: the line is parsed with tree-sitter-bash and reduced to plain simple
//!    commands of literal words, or opaque statements (a whitelist: anything with an
//!    expansion, substitution, glob, control flow, here-document… is opaque).
//! 2. [`kinds`]: each plain command's arguments are judged by the command-kind table:
//!    paths read or written, arguments pinned as learned, hosts, wrappers looked through,
//!    code-running commands opaque.
//! 3. Here: `cd`/`pushd`/`popd` are tracked (later relative paths are judged from every
//!    directory the line may be in), and each command becomes a [`Segment`].
//!
//! An opaque segment is allowed only by an exact `=text` rule.

pub mod grammar;
pub mod kinds;
mod rule;

use grammar::{Redirect, Unit};
use kinds::{Kind, Value};

pub use rule::{RuleWord, rule_words};

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
        match unit {
            Unit::Opaque { text } => out.push(opaque(&text)),
            Unit::Plain { text, env, words, redirects } => {
                let before = out.len();
                plain(&text, env, &words, &redirects, &mut dirs, &mut out, 0);
                debug_assert!(out.len() > before, "every plain unit yields a segment");
            }
        }
    }
    out
}

fn opaque(text: &str) -> Segment {
    Segment { text: text.to_owned(), ..Segment::default() }
}

fn is_flag(w: &str) -> bool {
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
        return;
    };
    let subcommand = (kinds::SUBCOMMAND_HEADS.contains(&kinds::base(head))
        && args.first().is_some_and(|a| !is_flag(a)))
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
            return;
        }
        Kind::Pinned => {
            // Pinned words name files relative to where the command runs.
            if moved {
                out.push(opaque(text));
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
            let (flags, reads, writes, pinned) = judge(head, kind, rest);
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

/// Flags, paths read, paths written and pinned words of a command of a path kind.
fn judge(head: &str, kind: Kind, args: &[String]) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
    let mut pinned = Vec::new();
    let (mut flags, mut reads, mut writes, mut positionals) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut target_dir = None;
    let mut words = args.iter();
    let mut dashdash = false;
    let find_expr = |w: &str| w.starts_with('-') || w == "(" || w == "!" || w == ")";
    let mut in_find_expr = false;
    while let Some(w) = words.next() {
        if kind == Kind::Find {
            in_find_expr |= find_expr(w);
            if in_find_expr {
                if is_flag(w) {
                    flags.push(w.clone());
                    if kinds::value_of(head, w) == Some(Value::Read) {
                        reads.extend(words.next().cloned());
                    } else if kinds::value_of(head, w).is_some() {
                        words.next();
                    }
                }
                continue;
            }
        }
        if dashdash || !is_flag(w) {
            positionals.push(w.clone());
            continue;
        }
        if w == "--" {
            dashdash = true;
            continue;
        }
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (w.as_str(), None),
        };
        flags.push(name.to_owned());
        let value = match inline {
            Some(v) => Some(v.to_owned()),
            None if kinds::value_of(head, name).is_some() => words.next().cloned(),
            None => None,
        };
        match (kinds::value_of(head, name), value) {
            (Some(Value::Write), Some(v)) if matches!(kind, Kind::Copy { .. }) => target_dir = Some(v),
            (Some(Value::Write), Some(v)) => writes.push(v),
            (Some(Value::Read), Some(v)) => reads.push(v),
            (Some(Value::Other), _) => {}
            // An unknown `--name=value`: its value is judged like an argument.
            (None, Some(v)) if path_like(&v) => reads.push(v),
            _ => {}
        }
    }
    match kind {
        Kind::Read { lead } => reads.extend(positionals.into_iter().skip(lead)),
        Kind::Write { lead } => writes.extend(positionals.into_iter().skip(lead)),
        Kind::Words => {}
        Kind::Find => reads.extend(positionals),
        Kind::Copy { move_ } => {
            let target = target_dir.or_else(|| positionals.pop());
            writes.extend(target);
            if move_ { writes.extend(positionals) } else { reads.extend(positionals) }
        }
        Kind::Sed => {
            let in_place = flags.iter().any(|f| f.starts_with("-i") || f == "--in-place");
            let mut files = positionals.into_iter();
            // The script can write files (`w`) and run commands (`e`): pinned.
            pinned.extend(files.next());
            if in_place { writes.extend(files) } else { reads.extend(files) }
        }
        Kind::Dd => {
            for p in positionals {
                match p.split_once('=') {
                    Some(("if", f)) => reads.push(f.to_owned()),
                    Some(("of", f)) => writes.push(f.to_owned()),
                    _ => {}
                }
            }
        }
        _ => reads.extend(positionals.into_iter().filter(|p| path_like(p))),
    }
    (flags, reads, writes, pinned)
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
            return;
        }
        if w == "--" {
            rest = tail;
            break;
        }
        if is_flag(w) {
            if opaque_flags.iter().any(|f| name == *f || (f.len() == 2 && !f.starts_with("--") && w.starts_with(f))) {
                out.push(opaque(text));
                return;
            }
            cmd.flags.push(name.to_owned());
            rest = tail;
            // `-u root`, but not `-uroot` or `--user=root`.
            if value_flags.contains(&w.as_str()) {
                rest = rest.get(1..).unwrap_or_default();
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

/// Hosts named by a network command's arguments, and files a fetcher writes (`-o`);
/// `None` when an option makes it run a local command or read a configuration that can
/// (`ssh -o ProxyCommand=…`, `rsync -e`, `curl -K`).
fn network_hosts(head: &str, args: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let base = kinds::base(head);
    let mut hosts = Vec::new();
    let mut writes = Vec::new();
    let positionals: Vec<&String> = args.iter().filter(|a| !is_flag(a)).collect();
    match base {
        "ssh" | "sftp" => {
            if args.iter().any(|a| a.starts_with("-o") || a.starts_with("-F") || a.starts_with("-J")) {
                return None;
            }
            const SSH_VALUES: &[&str] = &[
                "-p", "-i", "-l", "-L", "-R", "-D", "-b", "-c", "-E", "-e", "-I", "-m", "-O", "-Q", "-S", "-W", "-w",
                "-B",
            ];
            let mut words = args.iter();
            let mut destination = None;
            while let Some(w) = words.next() {
                if SSH_VALUES.contains(&w.as_str()) {
                    words.next();
                } else if !is_flag(w) {
                    destination = Some(w);
                    break;
                }
            }
            let d = destination?;
            match url_hosts(d) {
                h if h.is_empty() => hosts.push(ssh_host(d)),
                h => hosts.extend(h),
            }
            // A remote command is a shell line run elsewhere: not reasoned about.
            if words.next().is_some() {
                return None;
            }
        }
        "scp" | "rsync" => {
            if args.iter().any(|a| a == "-e" || a.starts_with("--rsh") || a.starts_with("-o") || a.starts_with("-F")) {
                return None;
            }
            for p in positionals {
                if p.contains("://") {
                    hosts.extend(url_hosts(p));
                } else if let Some((host, _)) = p.split_once(':')
                    && !host.contains('/')
                {
                    hosts.push(ssh_host(host));
                }
            }
        }
        "curl" | "wget" | "http" | "https" | "xh" => {
            const NOT_URL: &[&str] = &[
                "-X",
                "-d",
                "--data",
                "--data-raw",
                "--data-binary",
                "-H",
                "--header",
                "-o",
                "--output",
                "-u",
                "--user",
                "-A",
                "-e",
                "-b",
                "-c",
                "-F",
                "--form",
                "-T",
                "-w",
                "-m",
                "--max-time",
                "-O",
                "--connect-timeout",
                "--retry",
                "-P",
            ];
            if args.iter().any(|a| matches!(a.as_str(), "-K" | "--config" | "-e" | "--execute")) {
                return None;
            }
            let mut words = args.iter();
            while let Some(w) = words.next() {
                let curl_write =
                    matches!(w.as_str(), "-o" | "--output" | "-D" | "--dump-header" | "-c" | "--cookie-jar");
                if (base != "wget" && curl_write) || (base == "wget" && matches!(w.as_str(), "-O" | "-o")) {
                    writes.extend(words.next().cloned());
                } else if let Some(f) = w.strip_prefix("--output=").or_else(|| w.strip_prefix("--output-document=")) {
                    writes.push(f.to_owned());
                } else if NOT_URL.contains(&w.as_str()) {
                    words.next();
                } else if w == "--url" {
                    hosts.extend(words.next().map(|u| fetcher_hosts(u)).unwrap_or_default());
                } else if !is_flag(w) {
                    hosts.extend(fetcher_hosts(w));
                }
            }
        }
        "nc" | "ncat" | "netcat" | "telnet" | "ftp" | "lftp" => {
            hosts.extend(positionals.first().map(|h| ssh_host(h)));
        }
        "git" => {
            for p in positionals {
                if p.contains("://") {
                    hosts.extend(url_hosts(p));
                } else if let Some((user_host, _)) = p.split_once(':')
                    && user_host.contains('@')
                    && !user_host.contains('/')
                {
                    hosts.push(ssh_host(user_host));
                }
            }
        }
        _ => {}
    }
    Some((hosts, writes))
}

/// `user@host` → `host`, lower-cased.
fn ssh_host(destination: &str) -> String {
    destination.rsplit('@').next().unwrap_or(destination).to_ascii_lowercase()
}

/// The hosts a fetcher (curl, wget) may contact for `arg`: a URL, or a bare
/// `host[:port][/…]` taken as `http://`. What cannot be parsed is kept whole (it matches
/// no host rule).
fn fetcher_hosts(arg: &str) -> Vec<String> {
    let with_scheme = if arg.contains("://") || arg.to_ascii_lowercase().starts_with("http:") {
        arg.to_owned()
    } else {
        format!("http://{arg}")
    };
    match url_hosts(&with_scheme) {
        h if h.is_empty() => vec![arg.to_ascii_lowercase()],
        h => h,
    }
}

/// The hosts a URL may reach: as the WHATWG URL Standard parses it (browsers; `\` is `/`
/// in special schemes, `http:host` has host `host`) and as an RFC 3986 reader splits its
/// authority (curl and most tools). Both are judged when they differ.
pub fn url_hosts(text: &str) -> Vec<String> {
    let mut hosts: Vec<String> = url_host(text).into_iter().collect();
    if let Some((_, rest)) = text.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let host = match host_port.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => host_port.split(':').next().unwrap_or_default(),
        };
        if !host.is_empty() {
            hosts.push(host.to_ascii_lowercase());
        }
    }
    hosts.sort();
    hosts.dedup();
    hosts
}

/// The lower-cased host of a URL as the WHATWG URL Standard parses it, IPv6 without
/// brackets.
pub fn url_host(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    let host = url.host_str()?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (line, [(rule or `=opaque text`, writes, reads, hosts)]).
    fn shape(line: &str) -> Vec<String> {
        parse(line)
            .into_iter()
            .map(|s| {
                let mut out = match &s.command {
                    Some(c) => c.rule(),
                    None => format!("={}", s.text),
                };
                for w in &s.writes {
                    out.push_str(&format!(" >{w}"));
                }
                for r in &s.reads {
                    out.push_str(&format!(" <{r}"));
                }
                for h in &s.hosts {
                    out.push_str(&format!(" @{h}"));
                }
                out
            })
            .collect()
    }

    #[test]
    fn a_table_of_tricky_lines() {
        let cases: &[(&str, &[&str])] = &[
            ("git status --short", &["git status --short"]),
            ("git log --oneline -n 5", &["git log --oneline -n"]),
            ("grep -r -n TODO src", &["grep -n -r <src"]),
            ("git commit -m 'fix: a | b; c'", &["git commit -m"]),
            ("echo \"a && b\" && ls -la", &["echo", "ls -la"]),
            ("cat a.txt | grep -v x | wc -l", &["cat <a.txt", "grep -v", "wc -l"]),
            ("env CI=1 RUST_LOG=debug cargo test --release", &["env", "CI=* RUST_LOG=* cargo test --release"]),
            ("FOO=bar ./run.sh", &["FOO=* ./run.sh"]),
            ("cargo build --message-format=json", &["cargo build --message-format"]),
            ("pytest -q > reports/out.txt 2>&1", &["pytest -- -q >reports/out.txt"]),
            ("sort < in.txt >> out.txt", &["sort >out.txt <in.txt"]),
            ("cmd &> all.log", &["cmd >all.log"]),
            ("grep x file 2>/dev/null", &["grep <file"]),
            ("bash -c 'make test'", &["=bash -c 'make test'"]),
            ("sh -c \"rm -rf /\"", &["=sh -c \"rm -rf /\""]),
            ("python3 -c 'import os'", &["=python3 -c 'import os'"]),
            ("python3.11 -c 'import os'", &["=python3.11 -c 'import os'"]),
            ("echo $(whoami)", &["=echo $(whoami)"]),
            ("echo `id`", &["=echo `id`"]),
            ("echo \"$(id)\"", &["=echo \"$(id)\""]),
            ("eval \"$CMD\"", &["=eval \"$CMD\""]),
            ("ls | xargs rm", &["ls", "=xargs rm"]),
            ("find . -name '*.py' -exec rm {} +", &["=find . -name '*.py' -exec rm {} +"]),
            ("find . -name '*.py'", &["find -name <."]),
            ("(cd src && ls)", &["=(cd src && ls)"]),
            ("cat <<EOF\nx\nEOF", &["=cat <<EOF\nx\nEOF"]),
            ("echo 'unterminated", &["=echo 'unterminated"]),
            (
                "wget http://User:pw@Mirror.Example.org:8080/x",
                &["wget -- http://User:pw@Mirror.Example.org:8080/x @mirror.example.org"],
            ),
            ("echo hi # > not-a-file", &["echo"]),
            ("echo a\\ b 'c d' \"e\\\"f\"", &["echo"]),
            ("$EDITOR file", &["=$EDITOR file"]),
            ("env -i ls", &["env -i", "ls"]),
            ("env -S 'rm -rf /'", &["=env -S 'rm -rf /'"]),
            ("X=1", &["=X=1"]),
            ("sleep 1 &", &["sleep"]),
            ("ls\ncat x", &["ls", "cat <x"]),
            ("docker compose up -d", &["docker compose -- up -d"]),
            ("cat <(ls)", &["=cat <(ls)"]),
            // A comment ends its line, not the input.
            ("git status # ok\nrm -rf /", &["git status", "rm -rf >/"]),
            ("rm -rf build/tmp", &["rm -rf >build/tmp"]),
            ("cat /etc/shadow", &["cat </etc/shadow"]),
            ("git push origin main", &["git push -- origin main"]),
            ("ssh build-host 'rm -rf /'", &["=ssh build-host 'rm -rf /'"]),
            ("ssh build-host", &["ssh -- build-host @build-host"]),
            ("sudo -u root rm -rf /", &["sudo -u", "rm -rf >/"]),
            ("timeout 5 nice -n 3 make test", &["timeout -- 5", "nice -n", "make test"]),
            ("cd /etc && cat shadow", &["cd </etc", "cat </etc/shadow <shadow"]),
            ("cd - && cat shadow", &["cd", "=cat shadow"]),
            ("echo ${v@P}", &["=echo ${v@P}"]),
            ("echo $[1+1]", &["=echo $[1+1]"]),
            ("cat out/${X:-..}/x", &["=cat out/${X:-..}/x"]),
            ("cat $'\\x2e\\x2e'/x", &["=cat $'\\x2e\\x2e'/x"]),
            ("cat ~/x", &["=cat ~/x"]),
            ("cat > ~/x", &["=cat > ~/x"]),
            ("curl 127.0.0.1:8765/x", &["curl -- 127.0.0.1:8765/x @127.0.0.1"]),
            ("curl http:evil.com", &["curl -- http:evil.com @evil.com"]),
            (
                "curl 'https://good.com\\@evil.com/'",
                &["curl -- \"https://good.com\\\\@evil.com/\" @evil.com @good.com"],
            ),
            ("make .SHELLFLAGS=-c", &["=make .SHELLFLAGS=-c"]),
            ("node -p 1", &["=node -p 1"]),
            ("perl -le 1", &["=perl -le 1"]),
            ("bash -ec 'x'", &["=bash -ec 'x'"]),
            ("sudo bash -c 'x'", &["sudo", "=sudo bash -c 'x'"]),
            ("echo *.rs", &["=echo *.rs"]),
            ("ls {a,b}", &["=ls {a,b}"]),
            ("git -C repo status", &["=git -C repo status"]),
            ("git -c core.pager=sh log", &["=git -c core.pager=sh log"]),
            ("cp a.txt b/c.txt", &["cp >b/c.txt <a.txt"]),
            ("mv x y", &["mv >x >y"]),
            ("sed -i 's/a/b/' f.txt", &["sed -i -- s/a/b/ >f.txt"]),
            ("sed -e 'e rm -rf /' f.txt", &["=sed -e 'e rm -rf /' f.txt"]),
            ("cat > x <<< hi", &["=cat > x <<< hi"]),
            ("rm \"-rf -*\"", &["rm \"-rf -*\""]),
            ("if true; then rm -rf /; fi", &["=if true; then rm -rf /; fi"]),
            ("f() { rm -rf /; }; f", &["=f() { rm -rf /; }", "f"]),
            ("! rm x", &["=! rm x"]),
            ("a=1 b=$(id) ls", &["=a=1 b=$(id) ls"]),
        ];
        for (line, want) in cases {
            assert_eq!(shape(line), want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "line: {line}");
        }
    }

    #[test]
    fn hosts_from_urls() {
        assert_eq!(url_host("https://a.b/c"), Some("a.b".into()));
        assert_eq!(url_host("HTTP://[::1]:80/"), Some("::1".into()));
        assert_eq!(url_host("ftp://x"), Some("x".into()));
        assert_eq!(url_host("https://good.com\\@evil.com/"), Some("good.com".into()));
        assert_eq!(url_hosts("https://good.com\\@evil.com/"), vec!["evil.com".to_owned(), "good.com".to_owned()]);
        assert_eq!(url_host("https://"), None);
    }
}
