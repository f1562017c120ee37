//! The command kinds: how the arguments of each command are judged. Commands of the
//! option table (`commands.txt`, [`super::options`]) are judged by their options and
//! operands; `cd`, `dd`, `find` and `test` here; a command that runs code given as an
//! argument is [`ArgsKind::Code`] (opaque: only an exact `=text` rule allows it); every other
//! command is [`ArgsKind::Pinned`] (its arguments must be exactly as learned). docs/job.md
//! lists the kinds for reviewers.

use super::options::{self, Lookup, Operands, Spec};

/// How one command's arguments are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsKind {
    /// A command of the option table (`commands.txt`): its options read as the program
    /// reads them, its operands judged by the table's kind.
    Table(&'static Spec),
    /// A wrapper of the table: judged itself, then the wrapped command as its own segment.
    Wrapper(&'static Spec),
    /// `command -v NAME`: looks a name up, runs nothing.
    Lookup,
    /// `test`/`[`: path-shaped operands are probed (read), the others pinned.
    Test,
    /// `dd if=… of=…`.
    Dd,
    /// `find START... EXPRESSION`: start paths read; `-exec` and friends opaque.
    Find,
    /// Every argument after the head (and subcommand) pinned exactly as learned; hosts of
    /// network commands judged too. The default for commands not in the table.
    Pinned,
    /// Runs code given in its arguments: opaque.
    Code,
    /// Changes the directory later segments run in.
    Cd,
}

/// `python3.11` → `python`) and other commands whose arguments are code.
#[rustfmt::skip]
const CODE: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "python", "pypy", "perl", "ruby",
    "irb", "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "r", "rscript", "awk", "gawk", "mawk", "nawk",
    "osascript", "tclsh", "wish", "expect", "pwsh", "powershell", "jshell", "groovy", "scala", "julia", "guile",
    "racket", "sbcl", "ocaml", "ghci", "runghc", "swift", "eval", "source", ".", "xargs", "parallel", "watch",
    "trap", "su", "script", "nsenter", "unshare", "chroot", "alias", "unalias", "set", "shopt", "enable", "hash",
    "declare", "typeset", "local", "export", "readonly", "unset", "let", "read", "mapfile", "readarray", "function",
    "coproc", "exec", "fc", "history", "bind", "complete", "compgen",
];
/// Commands whose first non-flag word is a subcommand.
#[rustfmt::skip]
pub const SUBCOMMAND_HEADS: &[&str] = &[
    "apt", "apt-get", "brew", "cargo", "docker", "podman", "gem", "gh", "git", "go", "helm", "make", "nix", "npm",
    "pip", "pip3", "pnpm", "poetry", "rustup", "systemctl", "terraform", "uv", "yarn",
];
/// Subcommands that send data elsewhere, change remote state or install code: pinned.
#[rustfmt::skip]
const PINNED_SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "git",
        &[
            "push",
            "fetch",
            "pull",
            "clone",
            "remote",
            "ls-remote",
            "send-email",
            "request-pull",
            "archive",
            "submodule",
        ],
    ),
    (
        "npm",
        &[
            "publish",
            "unpublish",
            "login",
            "adduser",
            "deprecate",
            "dist-tag",
            "owner",
            "access",
            "exec",
            "install",
            "i",
            "add",
            "ci",
        ],
    ),
    ("pnpm", &["publish", "add", "install", "i", "dlx", "exec"]),
    ("yarn", &["publish", "add", "install", "dlx", "npm"]),
    ("docker", &["push", "pull", "login", "run", "exec", "build", "create", "cp", "compose", "buildx"]),
    ("podman", &["push", "pull", "login", "run", "exec", "build", "create", "cp"]),
    ("cargo", &["publish", "login", "owner", "yank", "install"]),
    ("helm", &["install", "upgrade", "uninstall", "push", "repo"]),
    ("terraform", &["apply", "destroy", "import", "state"]),
    ("pip", &["install", "download", "uninstall"]),
    ("pip3", &["install", "download", "uninstall"]),
    ("uv", &["pip", "publish", "add", "run", "tool"]),
    ("poetry", &["publish", "add", "install", "run"]),
    ("gem", &["push", "install"]),
    ("brew", &["install", "uninstall", "tap"]),
    ("apt", &["install", "remove", "purge"]),
    ("apt-get", &["install", "remove", "purge"]),
    ("go", &["install", "get", "run", "generate"]),
    ("gh", &["api", "pr", "issue", "release", "repo", "gist", "secret", "workflow", "run"]),
    ("systemctl", &["start", "stop", "restart", "enable", "disable", "kill", "edit", "mask"]),
    ("nix", &["run", "shell", "develop", "profile"]),
    ("rustup", &["install", "default", "toolchain", "run"]),
];
/// Subcommands that run code named in their arguments or configuration: opaque.
const CODE_SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("git", &["config", "filter-branch", "bisect", "difftool", "mergetool", "daemon", "instaweb"]),
    ("npm", &["run", "run-script", "x", "explore", "set-script"]),
];
/// Arguments of a subcommand head that make it run arbitrary code (prefix match).
#[rustfmt::skip]
const CODE_ARGUMENTS: &[(&str, &[&str])] = &[
    (
        "git",
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "-C",
            "--git-dir",
            "--work-tree",
            "--upload-pack",
            "--receive-pack",
            "--exec",
            "-x",
            "--ext-diff",
            "--extcmd",
            "--open-files-in-pager",
            "-O",
            "--template",
            // Files written or read by name: `git log --output=F`, `format-patch -o D`,
            // `blame --contents=F`.
            "--output",
            "--output-directory",
            "-o",
            "--contents",
        ],
    ),
    ("cargo", &["--config", "-Z", "--manifest-path"]),
    // A program run for every tool or test binary, or files that replace the sources.
    ("go", &["-toolexec", "--toolexec", "-exec", "--exec", "-overlay", "--overlay", "-modfile", "--modfile"]),
    (
        "make",
        &[
            "-f",
            "--file",
            "--makefile",
            "--eval",
            "-E",
            "-e",
            "--environment-overrides",
            "-C",
            "--directory",
            "-I",
            "--include-dir",
        ],
    ),
];
/// Commands whose arguments name hosts (URLs, `[user@]host[:path]`, or a host operand).
#[rustfmt::skip]
pub const NETWORK: &[&str] = &[
    "curl", "wget", "http", "https", "xh", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "rsync",
    "ftp", "lftp", "git",
];

/// Environment names that change which program runs, what it loads, or how it reads its
/// options: a call setting one is opaque (an exact rule only).
#[rustfmt::skip]
const OPAQUE_ENV: &[&str] = &[
    "PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "POSIXLY_CORRECT",
    "TAR_OPTIONS", "GREP_OPTIONS", "CURL_HOME", "WGETRC", "SYSTEM_WGETRC", "EDITOR", "VISUAL", "PAGER",
    "LESSOPEN", "LESSCLOSE", "MANPAGER", "SIMPLE_BACKUP_SUFFIX", "VERSION_CONTROL", "TMPDIR", "HOME",
    "XDG_CONFIG_HOME", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT", "JQ_LIBRARY_PATH",
];

/// Whether setting `name` makes a call opaque: [`OPAQUE_ENV`], the loader's `LD_*`, git's
/// `GIT_*` (its directory, configuration, programs) and the shells' `BASH_FUNC_*`.
pub fn opaque_env(name: &str) -> bool {
    OPAQUE_ENV.contains(&name) || name.starts_with("LD_") || name.starts_with("GIT_") || name.starts_with("BASH_FUNC")
}

/// A command's name without its directory (`/usr/bin/git` → `git`).
pub fn base(head: &str) -> &str {
    head.rsplit('/').next().unwrap_or(head)
}

/// A command's name without a directory and a version suffix, lower-cased
/// (`/usr/bin/python3.11` → `python`).
pub fn family(head: &str) -> String {
    let base = head.rsplit('/').next().unwrap_or(head);
    base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-' || c == '_').to_ascii_lowercase()
}

/// The kind of `head` with subcommand `sub`, given all its arguments.
pub fn kind(head: &str, sub: Option<&str>, args: &[String]) -> ArgsKind {
    let base = head.rsplit('/').next().unwrap_or(head);
    let fam = family(head);
    if CODE.contains(&base) || CODE.contains(&fam.as_str()) {
        return ArgsKind::Code;
    }
    if let Some((_, code_args)) = CODE_ARGUMENTS.iter().find(|(h, _)| *h == base) {
        // Exact, with a value attached (`-cX`, `--exec=…`), or a long option abbreviated
        // the way git's and GNU's option parsers accept (`--open` for
        // `--open-files-in-pager`).
        let hit = args.iter().any(|a| {
            let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
            code_args.iter().any(|c| {
                a == c
                    || name == *c
                    || (a.starts_with(c) && (c.starts_with("--") || c.len() == 2))
                    || (c.starts_with("--") && name.len() >= 3 && name.starts_with("--") && c.starts_with(name))
            })
        });
        // `make VAR=value` overrides variables such as SHELL and .SHELLFLAGS.
        if hit || (base == "make" && args.iter().any(|a| a.contains('='))) {
            return ArgsKind::Code;
        }
    }
    if let Some(sub) = sub {
        if CODE_SUBCOMMANDS.iter().any(|(h, subs)| *h == base && subs.contains(&sub)) {
            return ArgsKind::Code;
        }
        if PINNED_SUBCOMMANDS.iter().any(|(h, subs)| *h == base && subs.contains(&sub)) {
            return ArgsKind::Pinned;
        }
    }
    if base == "git" && sub == Some("rebase") && args.iter().any(|a| a == "-x" || a.starts_with("--exec")) {
        return ArgsKind::Code;
    }
    // `command -v NAME` only looks NAME up; `command NAME -v` runs NAME.
    if base == "command" && args.first().is_some_and(|a| a == "-v" || a == "-V") {
        return ArgsKind::Lookup;
    }
    match base {
        "cd" | "pushd" | "popd" => return ArgsKind::Cd,
        "dd" => return ArgsKind::Dd,
        "find" => return ArgsKind::Find,
        // `test -f FILE` probes files: its path-shaped operands are reads.
        "test" | "[" => return ArgsKind::Test,
        _ => {}
    }
    // A subcommand head without a described subcommand is pinned: `docker container run`,
    // `gh auth token`, `git checkout -- FILE`, `cargo test` (a build runs code; its words
    // are approved exactly).
    // An unreadable table, or entry, is our bug: the call is opaque (fail closed).
    match lookup(head, sub) {
        Lookup::Found(s) if s.operands == Operands::Wrapper => ArgsKind::Wrapper(s),
        Lookup::Found(s) => ArgsKind::Table(s),
        Lookup::Absent => ArgsKind::Pinned,
        Lookup::Unreadable(_) => ArgsKind::Code,
    }
}

/// The option table's entry for `head` (its directory ignored) and `sub`: a subcommand
/// head's entry is its subcommand's (`git log`), never the head's alone. `None` when there
/// is none or it cannot be read ([`kind`] makes the latter opaque).
pub fn spec_of(head: &str, sub: Option<&str>) -> Option<&'static Spec> {
    lookup(head, sub).spec()
}

fn lookup(head: &str, sub: Option<&str>) -> Lookup<'static> {
    let base = base(head);
    let table = match options::table() {
        Ok(t) => t,
        Err(e) => return Lookup::Unreadable(e),
    };
    if SUBCOMMAND_HEADS.contains(&base) {
        match sub.filter(|s| table.has(&format!("{base} {s}"))) {
            Some(s) => table.lookup(base, Some(s)),
            None => Lookup::Absent,
        }
    } else {
        table.lookup(base, None)
    }
}

/// `find` expression words that run commands, delete or write files.
pub const FIND_OPAQUE: &[&str] =
    &["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"];
