//! The command-kind table: how the arguments of each known command are judged. It is a
//! whitelist: a command not in it is [`Kind::Pinned`] (its arguments must be exactly as
//! learned), and a command that runs code given as an argument is [`Kind::Code`] (opaque:
//! only an exact `=text` rule allows it). docs/job.md lists the table for reviewers.

/// How one command's arguments are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Flags judged as a set; positionals are not paths (`echo`, `date`).
    Words,
    /// Flags judged as a set; positionals shaped like paths (a `/`, a leading `.`) are
    /// read (`cargo test`, `git log`: subcommand heads whose subcommand is not pinned).
    PathLike,
    /// Flags judged as a set; positionals after the first `lead` are paths read
    /// (`cat`, `ls`, `grep PATTERN FILE...`).
    Read { lead: usize },
    /// Flags judged as a set; positionals after the first `lead` are paths written or
    /// deleted (`rm`, `touch`, `chmod MODE FILE...`).
    Write { lead: usize },
    /// `cp`/`ln`/`install` (`move_` false: sources read) and `mv` (sources written):
    /// the last positional (or `-t DIR`) is written.
    Copy { move_: bool },
    /// `sed SCRIPT FILE...`: the script pinned, files read (written with `-i`).
    Sed,
    /// `dd if=… of=…`.
    Dd,
    /// `find START... EXPRESSION`: start paths read; `-exec` and friends opaque.
    Find,
    /// Every argument after the head (and subcommand) pinned exactly as learned; hosts of
    /// network commands judged too. The default for commands not in the table.
    Pinned,
    /// Runs code given in its arguments: opaque.
    Code,
    /// Runs another command: judged itself (its flags), then the wrapped command as its
    /// own segment.
    Wrapper,
    /// Changes the directory later segments run in.
    Cd,
}

/// Interpreters and shells (matched on the name with a version suffix removed:
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
#[rustfmt::skip]
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "nice", "nohup", "timeout", "time", "stdbuf", "setsid", "flock", "command", "builtin",
    "ionice",
];
/// Commands that open no file named by an argument (`date -f`, `uniq IN OUT`, `xxd IN
/// OUT`, `less` (`-o`, `!cmd`), `file -C`, `yq -i` would: they are pinned instead).
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "echo", "printf", "true", "false", "sleep", "whoami", "id", "uname", "pwd", "seq", "basename", "dirname", "expr",
    "which", "type", "tr", "nproc", "uptime",
];
/// Commands whose operands are files they only read.
#[rustfmt::skip]
const READ: &[&str] = &[
    "cat", "head", "tail", "wc", "diff", "cmp", "comm", "ls", "stat", "du", "df", "tree", "md5sum", "sha1sum",
    "sha256sum", "sha512sum", "b2sum", "cksum", "od", "hexdump", "strings", "nl", "cut", "paste", "join", "fold",
    "fmt", "column", "rev", "tac", "realpath", "readlink", "sort",
];
/// Read commands whose first positional is a pattern or filter, not a file.
const READ_AFTER_ONE: &[&str] = &["grep", "egrep", "fgrep", "rg", "jq"];
/// Write commands: every operand is written or deleted.
const WRITE: &[&str] = &["rm", "rmdir", "unlink", "shred", "touch", "mkdir", "truncate", "tee"];
/// Write commands whose first positional is a mode or owner.
const WRITE_AFTER_ONE: &[&str] = &["chmod", "chown", "chgrp"];
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
/// Subcommands that only read, build or test in the working tree: their flags are a set,
/// path-shaped arguments reads, other arguments pinned.
#[rustfmt::skip]
const PATHLIKE_SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("git", &["status", "log", "diff", "show", "add", "commit", "rev-parse", "ls-files", "ls-tree", "blame",
              "describe", "shortlog", "cat-file", "grep", "merge-base", "reflog"]),
    ("cargo", &["build", "test", "check", "clippy", "fmt", "doc", "bench", "metadata", "tree", "run"]),
    ("npm", &["test", "ls", "outdated", "audit"]),
    ("pnpm", &["test", "ls", "outdated", "audit"]),
    ("yarn", &["test", "audit"]),
    ("docker", &["ps", "images", "logs", "version", "info", "inspect"]),
    ("podman", &["ps", "images", "logs", "version", "info", "inspect"]),
    ("go", &["build", "test", "vet", "fmt", "list", "version"]),
    ("pip", &["list", "show", "freeze", "check"]),
    ("pip3", &["list", "show", "freeze", "check"]),
    ("uv", &["sync", "lock", "tree"]),
    ("poetry", &["check", "show", "lock"]),
    ("rustup", &["show"]),
    ("helm", &["lint", "template", "list"]),
    ("terraform", &["fmt", "validate", "plan", "show"]),
    ("systemctl", &["status", "list-units", "is-active"]),
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
    // A program run on every input or for compression.
    ("rg", &["--pre"]),
    ("sort", &["--compress-program"]),
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
pub fn kind(head: &str, sub: Option<&str>, args: &[String]) -> Kind {
    let base = head.rsplit('/').next().unwrap_or(head);
    let fam = family(head);
    if CODE.contains(&base) || CODE.contains(&fam.as_str()) {
        return Kind::Code;
    }
    if let Some((_, code_args)) = CODE_ARGUMENTS.iter().find(|(h, _)| *h == base) {
        // Exact, with a value attached (`-cX`, `--exec=…`), or a long option abbreviated
        // the way git's and GNU's option parsers accept (`--open` for
        // `--open-files-in-pager`).
        let hit = args.iter().any(|a| {
            let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
            code_args.iter().any(|c| {
                a == c
                    || (a.starts_with(c) && (c.starts_with("--") || c.len() == 2))
                    || (c.starts_with("--") && name.len() >= 3 && name.starts_with("--") && c.starts_with(name))
            })
        });
        // `make VAR=value` overrides variables such as SHELL and .SHELLFLAGS.
        if hit || (base == "make" && args.iter().any(|a| a.contains('='))) {
            return Kind::Code;
        }
    }
    if let Some(sub) = sub {
        if CODE_SUBCOMMANDS.iter().any(|(h, subs)| *h == base && subs.contains(&sub)) {
            return Kind::Code;
        }
        if PINNED_SUBCOMMANDS.iter().any(|(h, subs)| *h == base && subs.contains(&sub)) {
            return Kind::Pinned;
        }
    }
    if base == "git" && sub == Some("rebase") && args.iter().any(|a| a == "-x" || a.starts_with("--exec")) {
        return Kind::Code;
    }
    // `command -v NAME` only looks NAME up; `command NAME -v` runs NAME.
    if base == "command" && args.first().is_some_and(|a| a == "-v" || a == "-V") {
        return Kind::Words;
    }
    if base == "sed" {
        // `-e`/`-f` also inside a cluster (`-ne`, `-nf`); a suffix of `-i` holding
        // an `e` or `f` is taken for one too (opaque: the safe side).
        let code = args.iter().any(|a| {
            a.starts_with("--expression")
                || a.starts_with("--file")
                || a.strip_prefix('-').is_some_and(|c| !c.starts_with('-') && (c.contains('e') || c.contains('f')))
        });
        return if code { Kind::Code } else { Kind::Sed };
    }
    match base {
        "cd" | "pushd" | "popd" => Kind::Cd,
        "cp" | "ln" | "install" => Kind::Copy { move_: false },
        "mv" => Kind::Copy { move_: true },
        "dd" => Kind::Dd,
        "find" if args.iter().any(|a| FIND_OPAQUE.contains(&a.as_str())) => Kind::Code,
        "find" => Kind::Find,
        // `test -f FILE` probes files: its path-shaped operands are reads.
        "test" | "[" => Kind::PathLike,
        _ if WRAPPERS.contains(&base) => Kind::Wrapper,
        _ if WORDS.contains(&base) => Kind::Words,
        _ if READ.contains(&base) => Kind::Read { lead: 0 },
        _ if READ_AFTER_ONE.contains(&base) => {
            let pattern_given = args.iter().any(|a| {
                matches!(a.as_str(), "-e" | "-f" | "--regexp" | "--file" | "--from-file")
                    || a.starts_with("--regexp=")
                    || a.starts_with("--file=")
            });
            Kind::Read { lead: usize::from(!pattern_given) }
        }
        _ if WRITE.contains(&base) => Kind::Write { lead: 0 },
        _ if WRITE_AFTER_ONE.contains(&base) => Kind::Write { lead: 1 },
        // Make targets and variables come from a Makefile the job may change: pinned.
        "make" => Kind::Pinned,
        // Subcommands known to only read, build or test locally; every other subcommand of
        // these heads (`docker container run`, `gh auth token`, `git checkout -- FILE`)
        // is pinned.
        _ if SUBCOMMAND_HEADS.contains(&base) => {
            let local =
                sub.is_some_and(|sub| PATHLIKE_SUBCOMMANDS.iter().any(|(h, subs)| *h == base && subs.contains(&sub)));
            if local { Kind::PathLike } else { Kind::Pinned }
        }
        _ => Kind::Pinned,
    }
}

/// `find` expression words that run commands, delete or write files.
pub const FIND_OPAQUE: &[&str] =
    &["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"];

/// A wrapper's flags that take the next word as a value (before the wrapped command).
pub fn wrapper_value_flags(head: &str) -> &'static [&'static str] {
    match head.rsplit('/').next().unwrap_or(head) {
        "sudo" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group"],
        "doas" => &["-u"],
        "env" => &["-u", "--unset"],
        "nice" => &["-n", "--adjustment"],
        "timeout" => &["-s", "--signal", "-k", "--kill-after"],
        "stdbuf" => &["-i", "-o", "-e"],
        "flock" => &["-w", "--timeout", "-E", "--conflict-exit-code"],
        "ionice" => &["-c", "-n", "--class", "--classdata"],
        "time" => &["-f", "--format"],
        _ => &[],
    }
}

/// A wrapper's flags that make it run something other than the next command (a shell,
/// a string split into a command, a new directory): opaque.
pub fn wrapper_opaque_flags(head: &str) -> &'static [&'static str] {
    match head.rsplit('/').next().unwrap_or(head) {
        "sudo" => &["-s", "-i", "--shell", "--login", "-e", "--edit", "-D", "--chdir", "-R", "--chroot"],
        "doas" => &["-s", "-C"],
        "env" => &["-S", "--split-string", "-C", "--chdir", "-P"],
        "flock" => &["-c", "--command"],
        "time" => &["-o", "--output"],
        "ionice" => &["-p", "-P", "-u"],
        _ => &[],
    }
}

/// Wrappers whose first positional is an operand, not the wrapped command.
pub fn wrapper_operands(head: &str) -> usize {
    match head.rsplit('/').next().unwrap_or(head) {
        "timeout" | "flock" => 1,
        _ => 0,
    }
}
