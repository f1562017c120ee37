//! What `holon job check` allows, against what the programs then do. A job mandate is
//! learned from ordinary calls of the programs the option table describes (coreutils,
//! grep, sed, find, diff, tar, git, jq, curl, wget) in a small workdir; command lines are
//! generated from those calls by the mutations that found holes in the check (long
//! options abbreviated or respelt, short ones clustered, values attached or separated,
//! options after operands, `--`, an option of the table added with a value of its class,
//! operands swapped for other paths, `-s` dropped from `ln`, `-l` added to `cp`); every
//! line the check allows runs **for real** in a fresh copy of the workdir under
//! `strace -f`, confined (`tests/sandbox/confine.bash`: only the copy is writable, the
//! network is the loopback device with every host name of the corpus resolving to an
//! address of its own). Then, from the trace: every file opened for writing, created,
//! renamed, linked or removed must be allowed by `paths.write`; every file under the
//! workdir opened for reading by `paths.read` (or `paths.write`); every program executed
//! must be the head of one of the line's commands (or a program the table says it runs);
//! every host connected to must be in `hosts`. Zero differences.
#![cfg(feature = "cli")] // learns through the `holon` binary

mod common;
use common::rng::Rng;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use holon::job::call::{self, Aspect};
use holon::job::mandate::{self, Checker, JobMandate};
use holon::job::shell::{self, grammar::Unit, kinds, options};
use holon::job::state::{CheckOutcome, Scope, StateView, decide};

/// The workdir the mandate is learned for (calls name it as their `cwd`).
const WORKDIR: &str = "/work/oracle";

/// Host names of the corpus and the loopback address each resolves to in the sandbox.
const HOSTS: &[(&str, &str)] =
    &[("api.example.com", "127.0.0.2"), ("evil.example.com", "127.0.0.3"), ("mirror.example.org", "127.0.0.4")];

/// Ordinary calls of the covered programs: what the mandate is learned from.
const LEARNED: &[&str] = &[
    "cat src/a.txt",
    "head -n 2 src/a.txt",
    "tail -n 1 docs/notes.md",
    "wc -l src/a.txt src/b.txt",
    "diff src/a.txt src/b.txt",
    "diff -r src docs",
    "cmp src/a.txt src/b.txt",
    "comm src/a.txt src/b.txt",
    "ls src",
    "ls -la",
    "stat src/a.txt",
    "du -sh src",
    "sort -u src/a.txt",
    "sort -o out/sorted.txt src/b.txt",
    "grep -n seed src/a.txt",
    "grep -rn seed src",
    "cut -d, -f1 data.csv",
    "nl src/a.txt",
    "od -c src/a.txt",
    "sha256sum src/a.txt",
    "md5sum src/b.txt",
    "realpath src/a.txt",
    "readlink -f src/a.txt",
    "tac src/b.txt",
    "rm -f out/old.txt",
    "touch out/stamp",
    "mkdir -p out/new/dir",
    "rmdir out/empty",
    "truncate -s 0 out/trunc.txt",
    "chmod 644 out/mode.txt",
    "cp src/a.txt out/copy.txt",
    "cp -r src out/tree",
    "ln -s ../src/a.txt out/link.txt",
    "mv out/move.txt out/moved.txt",
    "install -m 644 src/a.txt out/installed.txt",
    "sed -n 1p src/a.txt",
    "sed -i s/seed/SEED/ out/edit.txt",
    "dd if=src/a.txt of=out/dd.txt",
    "find src -name a.txt",
    "tar -czf out/src.tgz src",
    "tar -tzf in/a.tgz",
    "git status --short",
    "git log --oneline -n 1",
    "git diff",
    "git show --stat",
    "git ls-files",
    "git rev-parse --short HEAD",
    "jq -r .name src/pkg.json",
    "curl -s -o out/page.html http://api.example.com/page",
    "wget -q -O out/w.html http://api.example.com/w",
    "echo hi > out/echo.txt",
    "tee out/tee.txt < src/a.txt",
];

/// Paths a mutation may put where a path goes.
const PATHS: &[&str] = &[
    "src/a.txt",
    "src/b.txt",
    "src",
    ".",
    "..",
    "docs/notes.md",
    "out/new.txt",
    "out",
    "data.csv",
    "/etc/hostname",
    "/tmp/outside.txt",
    "../outside.txt",
    "in/a.tgz",
    ".git/config",
    "out/copy.txt",
];

fn sh(cmd: &str, dir: &Path) {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "{cmd}");
}

/// The small workdir every line runs in a copy of.
fn fixture(dir: &Path) {
    for d in ["src", "docs", "out/empty", "in"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let files: &[(&str, &str)] = &[
        ("src/a.txt", "seed one\nseed two\n"),
        ("src/b.txt", "seed two\nthree\n"),
        ("src/pkg.json", "{\"name\": \"oracle\"}\n"),
        ("docs/notes.md", "# notes\n"),
        ("data.csv", "a,b\nc,d\n"),
        ("out/old.txt", "old\n"),
        ("out/trunc.txt", "x\n"),
        ("out/mode.txt", "x\n"),
        ("out/move.txt", "x\n"),
        ("out/edit.txt", "seed\n"),
    ];
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
    }
    sh("tar -czf in/a.tgz src", dir);
    sh("git init -q && git add -A && git commit -q -m one && echo more >> src/a.txt && git commit -qam two", dir);
    // A change in the work tree, for `git status` and `git diff`.
    std::fs::write(dir.join("src/b.txt"), "seed two\nthree\nfour\n").unwrap();
}

/// One quoted shell word.
fn quote(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./,:=@%+".contains(c)) {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn value_for(class: options::Class, rng: &mut Rng) -> String {
    use options::Class::*;
    let path = *rng.pick(PATHS);
    match class {
        Free => rng.pick(&["1", "x", "a,b"]).to_string(),
        Pin => "root".to_owned(),
        Read | Write | Target | Archive | Cookie => path.to_owned(),
        Data => format!("@{path}"),
        Form => format!("f=@{path}"),
        UrlEncode => format!("q@{path}"),
        Url => "http://evil.example.com/".to_owned(),
        Opaque => "x".to_owned(),
    }
}

/// A spelling of `opt` as a program of `parser` reads it: any of its spellings, a long one
/// perhaps cut to a prefix.
fn spell(opt: &options::Opt, parser: options::Parser, rng: &mut Rng) -> String {
    let s = rng.pick(&opt.spellings).to_string();
    if s.starts_with("--") && matches!(parser, options::Parser::Gnu | options::Parser::GnuStop) && rng.chance(50) {
        let keep = 3 + rng.below(s.len().saturating_sub(3));
        return s[..keep.min(s.len())].to_owned();
    }
    s
}

/// An option of one call (spelling, values, value attached only), to be written out again.
enum Token {
    Opt(String, Vec<String>, bool),
}

fn render(tokens: &[Token], rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::new();
    for t in tokens {
        match t {
            Token::Opt(spelling, values, optional) => {
                let attach = *optional || (!values.is_empty() && rng.chance(50));
                match (values.first(), attach) {
                    (Some(v), true) if spelling.starts_with("--") => out.push(format!("{spelling}={v}")),
                    (Some(v), true) => out.push(format!("{spelling}{v}")),
                    (Some(v), false) => {
                        out.push(spelling.clone());
                        out.push(v.clone());
                    }
                    (None, _) => out.push(spelling.clone()),
                }
                out.extend(values.iter().skip(1).cloned());
            }
        }
    }
    out
}

/// Lines generated from one learned line.
fn mutations(line: &str, rng: &mut Rng, n: usize) -> Vec<String> {
    let Some(units) = shell::grammar::units(line) else { return Vec::new() };
    let Some(Unit::Plain { words, .. }) = units.first() else { return Vec::new() };
    let (head, mut args) = (words[0].clone(), words[1..].to_vec());
    let sub = (kinds::SUBCOMMAND_HEADS.contains(&head.as_str()) && !args.is_empty()).then(|| args.remove(0));
    let Some(spec) = kinds::spec_of(&head, sub.as_deref()) else { return Vec::new() };
    let Ok(parsed) = spec.parse(&args) else { return Vec::new() };
    let mut out = Vec::new();
    for _ in 0..n {
        let mut tokens: Vec<Token> = parsed
            .used
            .iter()
            .map(|u| Token::Opt(spell(u.opt, spec.parser, rng), u.values.clone(), u.opt.optional))
            .collect();
        let mut operands: Vec<String> = parsed.operands.clone();
        for _ in 0..1 + rng.below(3) {
            match rng.below(7) {
                // An option of the table with a value of its class.
                0 | 1 => {
                    let opt = rng.pick(&spec.opts);
                    let values = opt.values.iter().map(|c| value_for(*c, rng)).collect();
                    tokens.push(Token::Opt(spell(opt, spec.parser, rng), values, opt.optional));
                }
                // An operand swapped for another path.
                2 if !operands.is_empty() => {
                    let i = rng.below(operands.len());
                    operands[i] = rng.pick(PATHS).to_string();
                }
                // Options after the operands, where the parser permutes.
                3 if spec.parser == options::Parser::Gnu && !tokens.is_empty() => tokens.rotate_left(1),
                // Hard links where symbolic ones were learned, and `cp -l`.
                4 => tokens.retain(|t| !matches!(t, Token::Opt(s, ..) if s == "-s" || s.starts_with("--sym"))),
                5 if head == "cp" => tokens.push(Token::Opt("-l".into(), vec![], false)),
                _ => {
                    let extra = rng.pick(PATHS).to_string();
                    operands.insert(rng.below(operands.len() + 1), extra);
                }
            }
        }
        // Short switches clustered.
        let mut words = render(&tokens, rng);
        if rng.chance(40) {
            let (switches, rest): (Vec<String>, Vec<String>) =
                words.into_iter().partition(|w| w.len() == 2 && w.starts_with('-') && w != "--");
            words = rest;
            if !switches.is_empty() {
                words.insert(0, format!("-{}", switches.iter().map(|s| &s[1..]).collect::<String>()));
            }
        }
        if rng.chance(20) && !operands.is_empty() {
            words.push("--".into());
        }
        let permuted = spec.parser == options::Parser::Gnu && rng.chance(30);
        let mut all: Vec<String> = vec![head.clone()];
        all.extend(sub.clone());
        if permuted {
            all.extend(operands.iter().cloned());
            all.extend(words.into_iter().filter(|w| w != "--"));
        } else {
            all.extend(words);
            all.extend(operands.iter().cloned());
        }
        out.push(all.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" "));
    }
    out
}

fn holon_job(state: &Path, args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_holon"))
        .arg("job")
        .args(args)
        .arg("--state")
        .arg(state)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "holon job {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn call_json(line: &str) -> String {
    serde_json::json!({ "tool": "terminal", "args": { "command": line }, "cwd": WORKDIR }).to_string()
}

/// The mandate learned from [`LEARNED`], approved, as the check reads it.
fn learn(state: &Path) -> JobMandate {
    let calls: String = LEARNED.iter().map(|l| call_json(l) + "\n").collect();
    holon_job(state, &["observe", "oracle", "--run", "r1", "--workdir", WORKDIR], &calls);
    holon_job(state, &["propose", "oracle"], "");
    holon_job(state, &["approve", "oracle"], "");
    mandate::from_yaml(&holon_job(state, &["show", "oracle"], "")).unwrap()
}

fn allowed(line: &str, m: &JobMandate, state: &Path) -> bool {
    let Ok(c) = call::parse(&call_json(line)) else { return false };
    let view = StateView::Enforce {
        mandate: Ok(Box::new(m.clone())),
        written_in_run: 0,
        run: "r".into(),
        state_dir: Some(state.display().to_string()),
    };
    matches!(decide(Ok(&c), &view, Scope::Cron), CheckOutcome::Allow { .. })
}

/// One thing a traced process did.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Effect {
    Read(String),
    Write(String),
    Exec(String),
    Connect(String),
}

/// A syscall's arguments, split at top-level commas.
fn split_args(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quoted, mut escaped) = (Vec::new(), String::new(), 0i32, false, false);
    for c in s.chars() {
        if quoted {
            cur.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
            }
            continue;
        }
        match c {
            '"' => {
                quoted = true;
                cur.push(c);
            }
            '(' | '[' | '{' | '<' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' | '>' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur).trim().to_owned()),
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// A quoted strace string's value.
fn unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.trim_end_matches("...");
    let inner = inner.strip_suffix('"')?;
    let mut out = Vec::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut b = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            continue;
        }
        match chars.next()? {
            'n' => out.push(b'\n'),
            't' => out.push(b'\t'),
            'x' => {
                let h: String = chars.by_ref().take(2).collect();
                out.push(u8::from_str_radix(&h, 16).ok()?);
            }
            c => out.push(c as u8),
        }
    }
    String::from_utf8(out).ok()
}

/// The path a `3</a/b>` or `AT_FDCWD</a>` argument names.
fn fd_path(arg: &str) -> Option<String> {
    let start = arg.find('<')? + 1;
    arg.get(start..arg.len().checked_sub(1)?).map(str::to_owned)
}

fn join(dir: &str, path: &str) -> String {
    if path.starts_with('/') {
        call::normalize_path(path, "")
    } else {
        call::normalize_path(&format!("{dir}/{path}"), "")
    }
}

/// The effects in one process's trace, and its renames (from, to).
fn effects_of(trace: &str, run_dir: &str) -> (Vec<Effect>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut renames = Vec::new();
    // Where relative paths of calls without a directory argument resolve.
    let mut cwd = trace
        .lines()
        .find_map(|l| l.find("AT_FDCWD<").map(|i| &l[i..]).and_then(|a| a.split('>').next()).map(|a| a[9..].to_owned()))
        .unwrap_or_else(|| run_dir.to_owned());
    for line in trace.lines() {
        let Some(open) = line.find('(') else { continue };
        let name = &line[..open];
        let Some(close) = line.rfind(") = ").or_else(|| line.rfind(") ")) else { continue };
        let args = split_args(&line[open + 1..close]);
        let result = &line[close + 1..];
        let ok = !result.contains("= -1");
        let at = |dir: &str, path: &str| -> Option<String> {
            let base = fd_path(dir).unwrap_or_else(|| cwd.clone());
            Some(join(&base, &unquote(path)?))
        };
        let plain = |i: usize| args.get(i).and_then(|p| unquote(p)).map(|p| join(&cwd, &p));
        let at_i = |d: usize| args.get(d).zip(args.get(d + 1)).and_then(|(d, p)| at(d, p));
        let writes = |out: &mut Vec<Effect>, p: Option<String>| out.extend(p.map(Effect::Write));
        match name {
            "open" | "openat" | "openat2" | "creat" => {
                let (path, flags) = match name {
                    "open" => (plain(0), args.get(1).cloned().unwrap_or_default()),
                    "creat" => (plain(0), "O_WRONLY|O_CREAT".to_owned()),
                    _ => (at_i(0), args.get(2).cloned().unwrap_or_default()),
                };
                if flags.contains("O_PATH") {
                    continue;
                }
                let written =
                    ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"].iter().any(|f| flags.contains(f));
                out.extend(path.map(|p| if written { Effect::Write(p) } else { Effect::Read(p) }));
            }
            "mkdir" | "rmdir" | "unlink" | "truncate" | "chmod" | "chown" | "lchown" | "utime" | "utimes"
            | "setxattr" | "lsetxattr" | "removexattr" | "lremovexattr" | "mknod" => writes(&mut out, plain(0)),
            "mkdirat" | "unlinkat" | "fchmodat" | "fchownat" | "mknodat" | "futimesat" => writes(&mut out, at_i(0)),
            "utimensat" => match args.get(1).map(String::as_str) {
                Some("NULL") => writes(&mut out, args.first().and_then(|d| fd_path(d))),
                _ => writes(&mut out, at_i(0)),
            },
            "fchmod" | "fchown" | "ftruncate" | "fsetxattr" | "fremovexattr" => {
                writes(&mut out, args.first().and_then(|d| fd_path(d)))
            }
            "symlink" => writes(&mut out, plain(1)),
            "symlinkat" => writes(&mut out, args.get(1).zip(args.get(2)).and_then(|(d, p)| at(d, p))),
            "link" | "rename" => {
                if name == "rename"
                    && ok
                    && let (Some(from), Some(to)) = (plain(0), plain(1))
                {
                    renames.push((from, to));
                }
                writes(&mut out, plain(0));
                writes(&mut out, plain(1));
            }
            "linkat" | "renameat" | "renameat2" => {
                if name != "linkat"
                    && ok
                    && let (Some(from), Some(to)) = (at_i(0), at_i(2))
                {
                    renames.push((from, to));
                }
                writes(&mut out, at_i(0));
                writes(&mut out, at_i(2));
            }
            "execve" if ok => out.extend(plain(0).map(Effect::Exec)),
            "execveat" if ok => out.extend(at_i(0).map(Effect::Exec)),
            "chdir" if ok => {
                if let Some(p) = plain(0) {
                    cwd = p;
                }
            }
            "fchdir" if ok => {
                if let Some(p) = args.first().and_then(|d| fd_path(d)) {
                    cwd = p;
                }
            }
            "connect" => {
                let addr = args.get(1).cloned().unwrap_or_default();
                if let Some(i) = addr.find("inet_addr(\"") {
                    let ip = addr[i + 11..].split('"').next().unwrap_or_default().to_owned();
                    out.push(Effect::Connect(ip));
                } else if addr.contains("AF_INET6") {
                    out.push(Effect::Connect(addr));
                }
            }
            _ => {}
        }
    }
    (out, renames)
}

/// Files no job owns: a program may open them for writing.
fn exempt(path: &str) -> bool {
    path == "/dev/null" || path == "/dev/tty" || path.starts_with("/dev/pts/") || path.starts_with("/proc/")
}

/// Why one effect of `line` is not what the mandate allows, if it is not.
fn judge(effect: &Effect, line: &str, checker: &Checker, run_dir: &str) -> Option<String> {
    let relative = |p: &str| match p.strip_prefix(run_dir) {
        Some("") => Some(".".to_owned()),
        Some(rest) => rest.strip_prefix('/').map(str::to_owned),
        None => None,
    };
    match effect {
        Effect::Read(p) => {
            let r = relative(p)?;
            (!checker.allows(&Aspect::Read(r.clone()))).then(|| format!("read {r}"))
        }
        Effect::Write(p) if exempt(p) => None,
        Effect::Write(p) => {
            let subject = relative(p).unwrap_or_else(|| p.clone());
            (!checker.allows(&Aspect::Write(subject.clone()))).then(|| format!("wrote {subject}"))
        }
        Effect::Exec(prog) => {
            let base = prog.rsplit('/').next().unwrap_or(prog);
            let segments = shell::parse(line);
            let runs = segments.iter().filter_map(|s| s.command.as_ref()).any(|c| {
                let head = c.head.rsplit('/').next().unwrap_or(&c.head);
                head == base
                    || kinds::spec_of(&c.head, c.subcommand.as_deref())
                        .is_some_and(|s| s.programs.iter().any(|p| p == base))
            });
            (!runs).then(|| format!("ran {prog}"))
        }
        Effect::Connect(ip) => {
            let host = HOSTS.iter().find(|(_, a)| a == ip).map_or(ip.as_str(), |(h, _)| h);
            (!checker.allows(&Aspect::Host(host.to_owned()))).then(|| format!("connected to {host} ({ip})"))
        }
    }
}

fn parent(p: &str) -> &str {
    p.rsplit_once('/').map_or("", |(d, _)| d)
}

fn box_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("holon-oracle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn what_the_check_allows_the_programs_do_no_more_than() {
    let per_line: usize = std::env::var("HOLON_ORACLE_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    let top = box_dir();
    let fixture_dir = top.join("fixture");
    std::fs::create_dir_all(&fixture_dir).unwrap();
    fixture(&fixture_dir);
    let state = top.join("state");
    let m = learn(&state);
    let checker = Checker::compile(&m).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut lines: Vec<String> = LEARNED.iter().map(|l| (*l).to_owned()).collect();
    for l in LEARNED {
        lines.extend(mutations(l, &mut rng, per_line));
    }
    lines.sort();
    lines.dedup();
    let generated = lines.len();
    for l in LEARNED {
        assert!(allowed(l, &m, &state), "a learned call is blocked: {l}");
    }
    let runs: Vec<String> = lines.into_iter().filter(|l| allowed(l, &m, &state)).collect();
    let hosts = top.join("hosts");
    std::fs::write(&hosts, HOSTS.iter().map(|(h, a)| format!("{a} {h}\n")).collect::<String>()).unwrap();
    // Two sandboxes, one per core, each with its own copy of the workdir.
    let halves: Vec<(PathBuf, Vec<(usize, &String)>)> = (0..2)
        .map(|h| (top.join(format!("box{h}")), runs.iter().enumerate().filter(|(i, _)| i % 2 == h).collect()))
        .collect();
    let here = std::env::current_dir().unwrap();
    std::thread::scope(|s| {
        for (dir, cases) in &halves {
            let (here, fixture_dir, hosts) = (&here, &fixture_dir, &hosts);
            s.spawn(move || {
                for sub in ["cases", "traces", "home", "w"] {
                    std::fs::create_dir_all(dir.join(sub)).unwrap();
                }
                for (i, line) in cases {
                    std::fs::write(dir.join("cases").join(format!("{i:05}")), line).unwrap();
                }
                let out = Command::new("bash")
                    .arg(here.join("tests/sandbox/confine.bash"))
                    .arg("bash")
                    .arg(here.join("tests/sandbox/oracle-driver.bash"))
                    .env("WRITABLE", dir)
                    .env("HOSTS", hosts)
                    .env("CASES", dir.join("cases"))
                    .env("TRACES", dir.join("traces"))
                    .env("FIXTURE", fixture_dir)
                    .env("RUN", dir.join("w/run"))
                    .env("HOME_DIR", dir.join("home"))
                    .output()
                    .unwrap();
                assert!(out.status.success(), "the sandboxed driver failed: {}", String::from_utf8_lossy(&out.stderr));
            });
        }
    });
    let mut differences: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut effects_seen = 0;
    for (dir, cases) in &halves {
        let run_dir = dir.join("w/run").display().to_string();
        for (i, line) in cases {
            let traces = dir.join("traces").join(format!("{i:05}"));
            assert!(dir.join("traces").join(format!("{i:05}.done")).exists(), "{line} did not run");
            let mut files: Vec<_> = std::fs::read_dir(&traces).unwrap().map(|e| e.unwrap().path()).collect();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap();
                let (effects, renames) = effects_of(&text, &run_dir);
                for e in effects {
                    // A temporary file beside a target, renamed over it (`sed -i`, git's
                    // `index.lock`): writing it is writing the target, judged as that.
                    let e = match e {
                        Effect::Write(p) => {
                            let over = renames.iter().find(|(from, to)| *from == p && parent(from) == parent(to));
                            Effect::Write(over.map_or(p, |(_, to)| to.clone()))
                        }
                        other => other,
                    };
                    // The harness: env and bash, run by the driver to run the line.
                    if matches!(&e, Effect::Exec(p) if p == "/usr/bin/env" || p == "/bin/bash" || p == "/usr/bin/bash")
                    {
                        continue;
                    }
                    effects_seen += 1;
                    if let Some(why) = judge(&e, line, &checker, &run_dir) {
                        differences.entry((*line).clone()).or_default().push(why);
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&top);
    eprintln!(
        "{generated} lines generated from {} learned calls, {} allowed and run, {effects_seen} effects traced",
        LEARNED.len(),
        runs.len()
    );
    let report: Vec<String> = differences.iter().map(|(l, w)| format!("{l}\n    {}", w.join("; "))).collect();
    assert!(report.is_empty(), "{} line(s) did more than the mandate allows:\n{}", report.len(), report.join("\n"));
    assert!(runs.len() > LEARNED.len() * 3, "too few lines allowed to prove anything: {}", runs.len());
}
