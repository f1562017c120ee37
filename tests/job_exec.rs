//! `holon job exec` against the real kernel: a command the check allows but that does more
//! than its text says is stopped by Landlock (EACCES, EXDEV for a link), the files are
//! compared byte for byte afterwards, and each attack is also run unconfined to show it
//! would have worked; the calls a job learned still work confined (their output compared
//! with an unconfined run); every bypass vector of the check, approved exactly as if the
//! check had been fooled, leaves everything outside `paths.write` untouched; a kernel
//! without enough Landlock refuses a cron run; the Claude Code hook recipe of docs/job.md,
//! run as its settings file runs it.
//!
//! These tests need Landlock (ABI 4 or later): on a kernel without it they fail, saying so.
#![cfg(feature = "cli")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::job_state::{holon_bin, install_programs, output_of_job};

const JOB: &str = "j";

struct Fixture {
    base: PathBuf,
    work: PathBuf,
    out: PathBuf,
    state: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let base = std::env::temp_dir().join(format!("holon-exec-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for d in ["w/reports", "w/src", "outside", "state", "tmp", "home"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        let base = std::fs::canonicalize(base).unwrap();
        std::fs::write(base.join("w/notes.txt"), "notes\n").unwrap();
        std::fs::write(base.join("w/README.md"), "a title\nabc\nTODO: more\n").unwrap();
        std::fs::write(base.join("w/src/main.rs"), "fn main() {} // TODO\n").unwrap();
        std::fs::write(base.join("outside/secret.txt"), "secret\n").unwrap();
        std::fs::write(base.join("outside/target.txt"), "target\n").unwrap();
        Fixture { work: base.join("w"), out: base.join("outside"), state: base.join("state"), base }
    }

    /// `holon job --state STATE ARGS` in the workdir, with `env`: (code, stdout, stderr).
    fn holon(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
        let mut cmd = Command::new(holon_bin());
        cmd.arg("job").arg("--state").arg(&self.state).args(args);
        self.run(cmd, stdin, env)
    }

    fn run(&self, mut cmd: Command, stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
        cmd.current_dir(&self.work).env("TMPDIR", self.base.join("tmp")).env("HOME", self.base.join("home"));
        output_of_job(cmd, stdin, env)
    }

    /// Approves `body` (the mandate after its `workdir:` line) as the job's first version.
    fn approve(&self, body: &str) {
        let call = format!(r#"{{"tool":"terminal","args":{{"command":"ls"}},"cwd":"{}"}}"#, self.work.display());
        let w = self.work.display().to_string();
        let (code, _, err) = self.holon(&["observe", JOB, "--run", "r0", "--workdir", &w], &(call + "\n"), &[]);
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = self.holon(&["propose", JOB], "", &[]);
        assert_eq!(code, 0, "{err}");
        let text = format!(
            "mandate: 1\njob: \"{JOB}\"\nworkdir: {}\nobserved_runs: 1\n{body}",
            serde_json::to_string(&w).unwrap()
        );
        std::fs::write(self.state.join("jobs").join(JOB).join("versions").join("v1.yaml"), text).unwrap();
        let (code, _, err) = self.holon(&["approve", JOB], "", &[]);
        assert_eq!(code, 0, "{err}");
    }

    /// `exec --shell LINE` in cron scope, run by `program` (a copy of holon's program).
    fn exec_as(&self, program: &Path, line: &str) -> (i32, String, String) {
        let mut c = Command::new(program);
        self.exec_args(&mut c, line);
        self.run(c, "", &[])
    }

    /// The arguments of `holon job exec --shell LINE` in cron scope, after whatever `c`
    /// starts with (holon's program, or a wrapper and then holon's program).
    fn exec_args(&self, c: &mut Command, line: &str) {
        c.args(["job", "--state"])
            .arg(&self.state)
            .args(["exec", JOB, "--run", "r1", "--scope", "cron", "--shell", line]);
    }

    fn exec(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let mut all = vec!["exec", JOB, "--run", "r1", "--scope", "cron"];
        all.extend_from_slice(args);
        self.holon(&all, "", env)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Every file beneath `dir` with its bytes (`skip`: subtrees left out).
/// `exec.jsonl` is written by `holon job exec` itself, before the command starts.
fn snapshot(dir: &Path, skip: &[PathBuf]) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = all_files(dir, skip);
    files.retain(|p, _| !p.ends_with("exec.jsonl"));
    files
}

fn all_files(dir: &Path, skip: &[PathBuf]) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if skip.iter().any(|s| d.starts_with(s)) {
            continue;
        }
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else if !skip.iter().any(|s| p.starts_with(s)) {
                files.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    files
}

/// Probes the kernel once per test binary: tests run in parallel, and a fixture of one name
/// per call was removed by one test while another used it (`no job j` in a loaded run).
fn require_landlock() {
    static PROBED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let out = PROBED.get_or_init(|| {
        let probe = Fixture::new("probe");
        probe
            .approve("tools: [\"terminal\"]\npaths:\n  read: [\"**\"]\n  write: []\ncommands: [\"true\"]\nhosts: []\n");
        probe.holon(&["exec", JOB, "--explain"], "", &[]).1
    });
    assert!(
        out.contains("verdict: commands run confined"),
        "this kernel cannot confine a job (Landlock ABI 4 or later is needed; CI machines have it):\n{out}"
    );
}

const SCRIPT_MANDATE: &str = "tools: [\"terminal\"]\npaths:\n  read: [\"**\"]\n  write: [\"reports/*.md\"]\ncommands: [\"=bash ./attack.sh\"]\nhosts: []\nlimits:\n  max_writes_per_run: null\n";

#[test]
fn a_script_the_check_allows_cannot_do_more_than_the_mandate() {
    require_landlock();
    let f = Fixture::new("script");
    f.approve(SCRIPT_MANDATE);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (out, state) = (f.out.display().to_string(), f.state.display().to_string());
    let attacks: Vec<(&str, String, &[&str])> = vec![
        ("write outside paths.write", format!("echo pwned > {out}/target.txt"), &["Permission denied"]),
        ("write in the workdir outside paths.write", "echo pwned > notes.txt".into(), &["Permission denied"]),
        ("read outside paths.read", format!("cat {out}/secret.txt"), &["Permission denied"]),
        ("TCP connect with hosts: []", format!("exec 3<>/dev/tcp/127.0.0.1/{port}"), &["Permission denied"]),
        ("write into the state directory", format!("echo x >> {state}/jobs/{JOB}/meta.json"), &["Permission denied"]),
        ("remove the state directory", format!("rm -rf {state}/jobs"), &["Permission denied"]),
        (
            "hard link of a read-only file into paths.write",
            "ln notes.txt reports/l.md".into(),
            &["Permission denied", "Invalid cross-device link"],
        ),
        (
            "hard link of an unreadable file",
            format!("ln {out}/secret.txt reports/s.md"),
            &["Permission denied", "Invalid cross-device link"],
        ),
    ];
    let watched = |f: &Fixture| {
        let mut s = snapshot(&f.out, &[]);
        s.extend(snapshot(&f.state, &[]));
        s.extend(snapshot(&f.work, &[f.work.join("attack.sh")]));
        s
    };
    for (name, body, expected) in &attacks {
        std::fs::write(f.work.join("attack.sh"), format!("set -e\n{body}\necho done\n")).unwrap();
        let before = watched(&f);
        let (code, stdout, err) = f.exec(&["--shell", "bash ./attack.sh"], &[]);
        assert!(
            !err.contains("holon: blocked") && !err.contains("holon: refused"),
            "{name}: the check or the plan stopped it, not the kernel: {err}"
        );
        assert_ne!(code, 0, "{name}: the kernel let it through: {stdout}{err}");
        assert!(expected.iter().any(|e| err.contains(e)), "{name}: {err}");
        assert!(!stdout.contains("done"), "{name}: {stdout}");
        assert_eq!(before, watched(&f), "{name}: a file changed");
        assert!(listener.accept().is_err(), "{name}: a connection reached the listener");
        // Unconfined, the same script does what it says (so the test can fail).
        let (code, _, err) = f.run(
            {
                let mut c = Command::new("bash");
                c.arg("./attack.sh");
                c
            },
            "",
            &[],
        );
        assert_eq!(code, 0, "{name}: the attack does not work even unconfined: {err}");
        for (path, bytes) in &before {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        for extra in ["reports/l.md", "reports/s.md"] {
            let _ = std::fs::remove_file(f.work.join(extra));
        }
        while listener.accept().is_ok() {}
    }
    // What the mandate allows still works: a write into reports.
    std::fs::write(f.work.join("attack.sh"), "echo fine > reports/ok.md\n").unwrap();
    let (code, _, err) = f.exec(&["--shell", "bash ./attack.sh"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(f.work.join("reports/ok.md")).unwrap(), "fine\n");
    let (_, status, _) = f.holon(&["status", JOB], "", &[]);
    assert!(status.contains("ran confined") && status.contains("confined, full"), "{status}");
}

/// The calls of an ordinary job, learned by observing them.
const LEARNED: &[&str] = &[
    "ls",
    "cat README.md",
    "wc -l src/main.rs",
    "grep -rn TODO src",
    "git status -s",
    "git log --oneline -n 5",
    "mkdir -p reports/2026",
    "sort -o reports/sorted.md README.md",
    "sed -i s/a/b/ reports/sorted.md",
    "tar -czf reports/src.tar.gz src",
    "find src -name main.rs",
    "head -n 2 README.md > reports/head.md",
    "diff README.md reports/sorted.md",
    "cat > reports/h.md <<'EOF'\nhello\nEOF",
];

fn git_repo(f: &Fixture) {
    let _ = std::fs::remove_dir_all(f.work.join("reports"));
    std::fs::create_dir_all(f.work.join("reports")).unwrap();
    let _ = std::fs::remove_dir_all(f.work.join(".git"));
    let env = [
        ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"),
        ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"),
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@x"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@x"),
    ];
    for args in [&["init", "-q"][..], &["add", "README.md", "src"], &["commit", "-qm", "first"]] {
        let mut c = Command::new("git");
        c.args(args);
        assert_eq!(f.run(c, "", &env).0, 0);
    }
}

#[test]
fn the_calls_a_job_learned_still_work_confined() {
    require_landlock();
    let f = Fixture::new("learned");
    git_repo(&f);
    let calls: Vec<String> = LEARNED
        .iter()
        .map(|c| serde_json::json!({"tool": "terminal", "args": {"command": c}, "cwd": f.work}).to_string())
        .collect();
    let w = f.work.display().to_string();
    assert_eq!(f.holon(&["observe", JOB, "--run", "r0", "--workdir", &w], &(calls.join("\n") + "\n"), &[]).0, 0);
    assert_eq!(f.holon(&["propose", JOB], "", &[]).0, 0);
    assert_eq!(f.holon(&["approve", JOB], "", &[]).0, 0);
    let unconfined: Vec<(i32, String)> = LEARNED
        .iter()
        .map(|c| {
            let mut b = Command::new("bash");
            b.arg("-c").arg(c);
            let (code, out, _) = f.run(b, "", &[]);
            (code, out)
        })
        .collect();
    let unconfined_files = snapshot(&f.work.join("reports"), &[]);
    git_repo(&f);
    let mut failures = Vec::new();
    for (c, (code, out)) in LEARNED.iter().zip(&unconfined) {
        let (got, got_out, err) = f.exec(&["--shell", c], &[]);
        if (got, &got_out) != (*code, out) || err.contains("holon:") {
            failures.push(format!("{c:?}: confined exit {got} {got_out:?} {err}, unconfined exit {code} {out:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let confined_files = snapshot(&f.work.join("reports"), &[]);
    assert_eq!(
        unconfined_files.keys().collect::<Vec<_>>(),
        confined_files.keys().collect::<Vec<_>>(),
        "the same files written"
    );
    for (p, bytes) in &unconfined_files {
        if p.extension().is_some_and(|e| e == "md") {
            assert_eq!(bytes, &confined_files[p], "{}", p.display());
        }
    }
}

/// Every shell attack of the check's bypass vectors, approved exactly as `bash -c 'LINE'`
/// (as if the check had been fooled into allowing it), run confined: nothing outside
/// `paths.write` changes. Run inside tests/sandbox/confine.bash (every mount read-only but
/// the fixture, no network), so a kernel that failed to confine could not harm the machine.
/// A line of the test's own among the vectors' lines: it writes outside `paths.write`.
const PLANTED: &str = "echo pwned > notes.txt";

#[test]
fn the_kernel_holds_where_the_check_is_fooled() {
    require_landlock();
    let f = Fixture::new("fooled");
    let vectors: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string("testdata/job/bypasses.json").unwrap()).unwrap();
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut lines = Vec::new();
    for v in &vectors {
        for a in v["attacks"].as_array().unwrap() {
            let args = a.get("args").or_else(|| a.get("tool_input")).cloned().unwrap_or(Value::Null);
            if let Some(c) = args.get("command").and_then(Value::as_str) {
                lines.push((v["name"].as_str().unwrap().to_owned(), format!("bash -c {}", quote(c))));
            }
        }
    }
    assert!(lines.len() >= 150, "the vectors lost shell attacks: {}", lines.len());
    lines.push(("planted".to_owned(), format!("bash -c {}", quote(PLANTED))));
    let rules: String =
        lines.iter().map(|(_, l)| format!("  - {}\n", serde_json::to_string(&format!("={l}")).unwrap())).collect();
    f.approve(&format!(
        "tools: [\"terminal\"]\npaths:\n  read: [\"**\"]\n  write: [\"reports/**\"]\ncommands:\n{rules}hosts: []\nlimits:\n  max_writes_per_run: null\n"
    ));
    // One confined shell runs every line through `holon job exec`, its answers kept in tmp/
    // (it changes into the workdir again: the one it inherits is the read-only mount).
    // Some lines wait for a network the kernel refuses (npm retrying a registry, ssh waiting
    // on a proxy shell that waits on it): each is cut after 10 s. A cut line has run confined
    // (its record is written before it starts) and what it did is in the comparison; a slow
    // machine can only make it do less, never make the test fail.
    let list = f.base.join("lines");
    std::fs::write(&list, lines.iter().map(|(_, l)| format!("{l}\0")).collect::<String>()).unwrap();
    let driver = format!(
        "cd {} && while IFS= read -r -d '' line; do timeout 10 {} job --state {} exec {JOB} --run r1 --scope cron --shell \"$line\" </dev/null >/dev/null 2>>{}/tmp/answers || true; done < {}",
        f.work.display(),
        holon_bin().display(),
        f.state.display(),
        f.base.display(),
        list.display()
    );
    let keep = [f.work.join("reports"), f.base.join("tmp")];
    let before = snapshot(&f.base, &keep);
    let mut c = Command::new("bash");
    c.args([concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sandbox/confine.bash"), "bash", "-c", &driver]);
    c.env("WRITABLE", &f.base);
    let (code, _, err) = f.run(c, "", &[]);
    assert_eq!(code, 0, "{err}");
    let answers = std::fs::read_to_string(f.base.join("tmp/answers")).unwrap_or_default();
    let stopped: Vec<&str> =
        answers.lines().filter(|l| l.contains("holon: blocked") || l.contains("holon: refused")).collect();
    assert!(stopped.is_empty(), "lines the check or the plan stopped (so the kernel was not tested): {stopped:?}");
    let confined = std::fs::read_to_string(f.state.join("jobs").join(JOB).join("exec.jsonl")).unwrap();
    assert_eq!(confined.matches("\"confined\":true").count(), lines.len(), "every line ran confined");
    let now = snapshot(&f.base, &keep);
    let changed: Vec<_> = now.keys().chain(before.keys()).filter(|k| now.get(*k) != before.get(*k)).collect();
    assert!(changed.is_empty(), "files outside paths.write changed: {changed:?}");
    let names: std::collections::BTreeSet<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.len() >= 40, "{} vectors", names.len());
    // Without holon (still in confine.bash), the planted line changes a file: the
    // comparison can fail.
    let mut c = Command::new("bash");
    // `cd` again inside: the working directory inherited is the read-only mount beneath.
    let planted = format!("cd {} && {PLANTED}", f.work.display());
    c.args([concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sandbox/confine.bash"), "bash", "-c", &planted]);
    c.env("WRITABLE", &f.base);
    f.run(c, "", &[]);
    assert_ne!(before, snapshot(&f.base, &keep), "unconfined, the lines change nothing: the test proves nothing");
}

#[test]
fn a_kernel_without_enough_landlock_refuses_a_cron_run() {
    let f = Fixture::new("refuse");
    f.approve("tools: [\"terminal\"]\npaths:\n  read: [\"**\"]\n  write: [\"reports/*.md\"]\ncommands: [\"touch\"]\nhosts: []\n");
    let ran = f.work.join("reports/ran.md");
    for level in ["0", "3", "bogus"] {
        let (code, _, err) = f.exec(&["--", "touch", "reports/ran.md"], &[("HOLON_TEST_LANDLOCK_ABI", level)]);
        assert_eq!(code, 2, "{level}: {err}");
        assert!(err.contains("holon: refused") && err.contains("needs 4"), "{level}: {err}");
        assert!(!ran.exists(), "{level}: the command ran");
    }
    let (code, _, err) =
        f.exec(&["--allow-unconfined", "--", "touch", "reports/ran.md"], &[("HOLON_TEST_LANDLOCK_ABI", "3")]);
    assert_eq!(code, 2, "--allow-unconfined is refused in cron scope: {err}");
    assert!(err.contains("interactive"), "{err}");
    let args =
        ["exec", JOB, "--run", "r1", "--scope", "interactive", "--allow-unconfined", "--", "touch", "reports/ran.md"];
    let (code, _, err) = f.holon(&args, "", &[("HOLON_TEST_LANDLOCK_ABI", "3")]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning") && err.contains("check alone"), "{err}");
    assert!(ran.exists());
    let (_, explain, _) = f.holon(&["exec", JOB, "--explain"], "", &[("HOLON_TEST_LANDLOCK_ABI", "3")]);
    assert!(explain.contains("does not hold: TCP connect"), "{explain}");
    assert!(explain.contains("cron commands are refused"), "{explain}");
    let (_, status, _) = f.holon(&["status", JOB], "", &[]);
    assert!(status.contains("0 of the last"), "{status}");
}

/// The command holds no capability, even run as root (found by an attack round: with
/// `CAP_MKNOD` a confined root command made a block device node in its `TMPDIR` and wrote
/// the disk beneath every grant; with `CAP_NET_RAW` it sent ICMP with `hosts: []`).
#[test]
fn a_confined_command_holds_no_capability_even_as_root() {
    require_landlock();
    let f = Fixture::new("caps");
    f.approve("tools: [\"terminal\"]\npaths:\n  read: [\"**\"]\n  write: [\"reports/*.md\"]\ncommands: [\"=bash caps.sh\"]\nhosts: []\n");
    std::fs::write(
        f.work.join("caps.sh"),
        "while read -r name value; do case $name in Cap*) echo \"$name $value\";; esac; done </proc/self/status >reports/caps.md\n",
    )
    .unwrap();
    let (code, _, err) = f.exec(&["--", "bash", "caps.sh"], &[]);
    assert_eq!(code, 0, "{err}");
    let caps = std::fs::read_to_string(f.work.join("reports/caps.md")).unwrap();
    for set in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        let line = caps.lines().find(|l| l.starts_with(set)).unwrap_or_else(|| panic!("no {set} in {caps}"));
        let bits = u64::from_str_radix(line[set.len()..].trim(), 16).unwrap();
        assert_eq!(bits, 0, "the command holds capabilities: {caps}");
    }
}

#[test]
fn a_state_directory_inside_a_writable_one_is_refused() {
    let f = Fixture::new("statein");
    let inner = f.work.join(".holon");
    let g = Fixture { base: f.base.clone(), work: f.work.clone(), out: f.out.clone(), state: inner };
    g.approve(
        "tools: [\"terminal\"]\npaths:\n  read: [\"**\"]\n  write: [\"notes.txt\"]\ncommands: [\"ls\"]\nhosts: []\n",
    );
    let (code, _, err) = g.exec(&["--", "ls"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("state directory") && err.contains("HOLON_STATE"), "{err}");
    std::mem::forget(g);
}

/// The `.claude/settings.json` of docs/job.md, run as Claude Code runs a hook command:
/// `sh -c COMMAND` with the PreToolUse payload on standard input.
#[test]
fn the_hook_recipe_of_the_docs_confines_shell_calls() {
    let doc = std::fs::read_to_string("docs/job.md").unwrap();
    let start = doc.find("```json\n{\n  \"hooks\"").expect("docs/job.md shows a .claude/settings.json") + 8;
    let settings: Value = serde_json::from_str(&doc[start..start + doc[start..].find("```").unwrap()]).unwrap();
    let hook = &settings["hooks"]["PreToolUse"][0];
    assert_eq!(hook["matcher"], "*");
    let command = hook["hooks"][0]["command"].as_str().unwrap().to_owned();
    let f = Fixture::new("hook");
    let bin = holon_bin().parent().unwrap().display().to_string();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    let state = f.state.display().to_string();
    let env = [("PATH", path.as_str()), ("HOLON_STATE", state.as_str())];
    let command = command.replace("/var/lib/holon", &state).replace("nightly-report", JOB);
    let hook_run = |payload: &Value| {
        let mut c = Command::new("sh");
        c.arg("-c").arg(&command);
        f.run(c, &payload.to_string(), &env)
    };
    let bash = |cmd: &str| {
        serde_json::json!({"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": f.work, "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": cmd, "description": "x"}, "tool_use_id": "toolu_1"})
    };
    // Before the first observe, every call is blocked.
    let (code, _, err) = hook_run(&bash("cat notes.txt"));
    assert_eq!(code, 2, "{err}");
    // From the first observed run, the same hook records (through exec) and allows.
    let w = f.work.display().to_string();
    assert_eq!(f.holon(&["observe", JOB, "--run", "s0", "--workdir", &w], "", &[]).0, 0);
    let (code, out, err) = hook_run(&bash("cat notes.txt"));
    assert_eq!(code, 0, "{err}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    let wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap().to_owned();
    assert_eq!(answer["hookSpecificOutput"]["updatedInput"]["description"], "x", "the rest of the input is kept");
    let run_wrapped = |wrapped: &str| {
        let mut c = Command::new("sh");
        c.arg("-c").arg(wrapped);
        f.run(c, "", &env)
    };
    let (code, out, err) = run_wrapped(&wrapped);
    assert_eq!((code, out.as_str()), (0, "notes\n"), "{err}");
    assert!(err.contains("observe mode"), "{err}");
    assert_eq!(f.holon(&["propose", JOB], "", &[]).0, 0);
    assert_eq!(f.holon(&["approve", JOB], "", &[]).0, 0);
    // Enforcing: a learned call runs confined, another is denied by the hook itself.
    let (code, out, err) = hook_run(&bash("cat notes.txt"));
    assert_eq!(code, 0, "{err}");
    let wrapped: Value = serde_json::from_str(&out).unwrap();
    let (code, out, err) = run_wrapped(wrapped["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap());
    assert_eq!((code, out.as_str()), (0, "notes\n"), "{err}");
    let (code, out, err) = hook_run(&bash("cat /etc/passwd"));
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("holon: blocked") && err.contains("drift #"), "{err}");
    // A session id that looks like an option stays the run's id (the wrapped line attaches
    // every value with `=`).
    let mut odd = bash("cat notes.txt");
    odd["session_id"] = "--tool=mandate_status".into();
    let (code, out, err) = hook_run(&odd);
    assert_eq!(code, 0, "{err}");
    let wrapped: Value = serde_json::from_str(&out).unwrap();
    let (code, out, err) = run_wrapped(wrapped["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap());
    assert_eq!((code, out.as_str()), (0, "notes\n"), "{err}");
    // Another tool is checked as `holon job check` checks it.
    let read = serde_json::json!({"session_id": "s1", "cwd": f.work, "hook_event_name": "PreToolUse", "tool_name": "Read",
        "tool_input": {"file_path": format!("{}/secret.txt", f.out.display())}});
    assert_eq!(hook_run(&read).0, 2);
}

// The holes an attack review of `holon job exec` found, each closed; every test below
// failed before its fix.

/// A call under another tool's name (the exempt status tool, a file tool) would be allowed
/// without its command being judged: `exec` refuses it, and refuses to run unconfined
/// anything but an observing job's command.
#[test]
fn a_tool_whose_command_is_not_judged_does_not_run() {
    let f = Fixture::new("tool");
    f.approve(SCRIPT_MANDATE);
    let target = f.out.join("target.txt");
    let attack = format!("echo pwned > {}", target.display());
    for tool in ["mandate_status", "read_file", "Write"] {
        let (code, _, err) = f.exec(&["--tool", tool, "--shell", &attack], &[]);
        assert_eq!(code, 2, "{tool}: {err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "target\n", "{tool}: {err}");
    }
    // An interactive scope on a job never observed is allowed by the check, with nothing
    // to confine the command with.
    let args = ["exec", "never-observed", "--scope", "interactive", "--shell", attack.as_str()];
    let (code, _, err) = f.holon(&args, "", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no approved version to confine"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "target\n");
}

/// `holon-sandbox` (what `exec` starts) with a hand-written plan.
fn sandboxed(f: &Fixture, plan: &Value, sha: Option<&str>, line: &str) -> (i32, String, String) {
    let text = plan.to_string();
    let file = f.base.join("tmp/plan.json");
    std::fs::write(&file, &text).unwrap();
    let sha = sha.map_or_else(|| holon::job::state::sha256_hex(&text), str::to_owned);
    let mut c = Command::new(holon_bin().with_file_name("holon-sandbox"));
    c.arg("--plan").arg(&file).args(["--plan-sha256", &sha, "--", "bash", "-c", line]);
    f.run(c, "", &[])
}

fn plan_writing(f: &Fixture, dir: &Path) -> Value {
    serde_json::json!({
        "plan": {"read": [{"path": "/usr", "why": "system"}, {"path": "/etc", "why": "system"}],
                 "write": [{"path": dir, "why": "paths.write[0]"}],
                 "devices": [[{"path": "/dev/null", "why": "device"}, true]],
                 "tcp_connect": null, "skipped": [], "state": f.state},
        "temp": f.base.join("tmp"),
        "level": 6,
        "exec_pid": std::process::id()
    })
}

/// A write grant swapped for a link after the plan was compiled (a confined command's
/// `rename(RENAME_EXCHANGE)` race) is refused when the ruleset is built; a changed plan
/// file (beneath a `/tmp/**` grant another job may write) is refused by its hash.
#[test]
fn a_grant_moved_or_a_plan_changed_after_the_check_is_refused() {
    require_landlock();
    let f = Fixture::new("moved");
    let target = f.out.join("target.txt");
    let attack = format!("echo pwned > {}", target.display());
    // The real directory: the plan holds, and writes beneath it work.
    let (code, _, err) = sandboxed(&f, &plan_writing(&f, &f.out), None, &attack);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "pwned\n");
    std::fs::write(&target, "target\n").unwrap();
    // The same grant reached through a link (reports -> outside): refused, nothing written.
    std::os::unix::fs::symlink(&f.out, f.work.join("reports/link")).unwrap();
    let (code, _, err) = sandboxed(&f, &plan_writing(&f, &f.work.join("reports/link")), None, &attack);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not where the plan found it"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "target\n");
    // A plan whose text is not what exec hashed: refused.
    let (code, _, err) = sandboxed(&f, &plan_writing(&f, &f.out), Some(&"0".repeat(64)), &attack);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("changed"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "target\n");
}

/// A confined run that replaces a write directory by a link (`mv reports x; ln -s
/// OUTSIDE reports`) does not widen the next run's grant.
#[test]
fn a_write_directory_replaced_by_a_link_is_not_granted() {
    require_landlock();
    let f = Fixture::new("relink");
    f.approve(SCRIPT_MANDATE);
    std::fs::remove_dir_all(f.work.join("reports")).unwrap();
    std::os::unix::fs::symlink(&f.out, f.work.join("reports")).unwrap();
    std::fs::write(f.work.join("attack.sh"), "echo tampered > reports/target.txt\n").unwrap();
    let (code, _, err) = f.exec(&["--shell", "bash ./attack.sh"], &[]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(std::fs::read_to_string(f.out.join("target.txt")).unwrap(), "target\n");
    let (_, explain, _) = f.holon(&["exec", JOB, "--explain"], "", &[]);
    assert!(explain.contains("symbolic link"), "{explain}");
}

/// Other terminals are neither readable nor writable (no `/dev/pts`, no device ioctls: a
/// job could read a person's keystrokes or push commands into their shell with TIOCSTI).
#[test]
fn another_terminal_cannot_be_opened() {
    require_landlock();
    let f = Fixture::new("pty");
    f.approve(SCRIPT_MANDATE);
    let mut pty = Command::new("python3")
        .args(["-c", "import os,pty,time; m,s=pty.openpty(); print(os.ttyname(s), flush=True); time.sleep(120)"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut name = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(pty.stdout.take().unwrap()), &mut name).unwrap();
    let name = name.trim();
    assert!(name.starts_with("/dev/pts/"), "{name}");
    std::fs::write(f.work.join("attack.sh"), format!("set -e\n: < {name}\n: > {name}\necho done\n")).unwrap();
    let (code, out, err) = f.exec(&["--shell", "bash ./attack.sh"], &[]);
    let mut unconfined = Command::new("bash");
    unconfined.arg("./attack.sh");
    let (control, control_out, _) = f.run(unconfined, "", &[]);
    let _ = pty.kill();
    let _ = pty.wait();
    assert!(code != 0 && err.contains("Permission denied") && !out.contains("done"), "{code} {out} {err}");
    assert_eq!((control, control_out.as_str()), (0, "done\n"), "unconfined the terminal opens");
}

/// holon's own program beneath a write grant (a cargo job's `target/**`) would let a
/// command replace what confines the next one: refused.
#[test]
fn holon_beneath_a_write_grant_is_refused() {
    let f = Fixture::new("exe");
    f.approve(SCRIPT_MANDATE);
    install_programs(&f.work.join("reports"));
    std::fs::write(f.work.join("attack.sh"), "true\n").unwrap();
    let (code, _, err) = f.exec_as(&f.work.join("reports/holon"), "bash ./attack.sh");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holon's own program"), "{err}");
    // `holon-job` beneath the grant: the same refusal, of its own program.
    let mut c = Command::new(f.work.join("reports/holon-job"));
    c.arg("--state").arg(&f.state).args(["exec", JOB, "--run", "r1", "--scope", "cron", "--shell", "bash ./attack.sh"]);
    let (code, _, err) = f.run(c, "", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holon's own program") && err.contains("reports/holon-job"), "{err}");
    // The helper alone beneath the grant (holon outside it): refused as well.
    std::fs::create_dir_all(f.base.join("bin")).unwrap();
    std::fs::copy(holon_bin(), f.base.join("bin/holon")).unwrap();
    std::os::unix::fs::symlink(f.work.join("reports/holon-sandbox"), f.base.join("bin/holon-sandbox")).unwrap();
    let (code, _, err) = f.exec_as(&f.base.join("bin/holon"), "bash ./attack.sh");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holon-sandbox") && err.contains("reports"), "{err}");
}

/// Without its helper beside it, holon confines nothing and runs nothing: the refusal
/// says how to install both.
#[test]
fn a_missing_helper_refuses_the_command() {
    let f = Fixture::new("nohelper");
    f.approve(SCRIPT_MANDATE);
    std::fs::create_dir_all(f.base.join("bin")).unwrap();
    let alone = f.base.join("bin/holon");
    std::fs::copy(holon_bin(), &alone).unwrap();
    std::fs::write(f.work.join("attack.sh"), "echo ran > reports/ran.txt\n").unwrap();
    let (code, _, err) = f.exec_as(&alone, "bash ./attack.sh");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holon-sandbox") && err.contains("cargo install --locked --path ."), "{err}");
    assert!(!f.work.join("reports/ran.txt").exists(), "nothing ran");
}

/// The test variable can only make `exec` refuse: a level it names at or above the
/// required one is ignored, never a weaker ruleset.
#[test]
fn the_test_level_cannot_weaken_a_ruleset() {
    require_landlock();
    let f = Fixture::new("weaken");
    f.approve(SCRIPT_MANDATE);
    std::fs::write(f.work.join("attack.sh"), "true\n").unwrap();
    for level in ["4", "5"] {
        let (code, _, err) = f.exec(&["--shell", "bash ./attack.sh"], &[("HOLON_TEST_LANDLOCK_ABI", level)]);
        assert_eq!(code, 0, "{err}");
        assert!(!err.contains("partial"), "{level}: {err}");
    }
    let (_, status, _) = f.holon(&["status", JOB], "", &[]);
    assert!(status.contains("confined, full"), "{status}");
}

/// A hard link of holon's program can be beneath a write grant without its path showing
/// it: a program with more than one link is refused beside a write grant on its file system.
#[test]
fn a_linked_holon_beside_a_write_grant_is_refused() {
    let f = Fixture::new("linked");
    f.approve(SCRIPT_MANDATE);
    std::fs::create_dir_all(f.base.join("bin")).unwrap();
    install_programs(&f.base.join("bin"));
    let own = f.base.join("bin/holon");
    std::fs::hard_link(&own, f.base.join("bin/second-link")).unwrap();
    std::fs::write(f.work.join("attack.sh"), "true\n").unwrap();
    let (code, _, err) = f.exec_as(&own, "bash ./attack.sh");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hard links"), "{err}");
}

/// The command's private temporary directory (and the plan `exec` writes there) lies in
/// the state directory, where no confined command can plant a link for `exec` to follow.
#[test]
fn the_private_temporary_directory_is_in_the_state() {
    require_landlock();
    let f = Fixture::new("temp");
    f.approve(SCRIPT_MANDATE);
    std::fs::write(f.work.join("attack.sh"), "echo \"$TMPDIR\"; echo x > \"$TMPDIR/own\" && echo wrote\n").unwrap();
    let (code, out, err) = f.exec(&["--shell", "bash ./attack.sh"], &[]);
    assert_eq!(code, 0, "{err}");
    let tmp = out.lines().next().unwrap();
    assert!(tmp.starts_with(&format!("{}/tmp/holon-exec-", f.state.display())), "{out}");
    assert!(out.contains("wrote"), "the command writes its own temporary directory: {out}");
    assert!(!Path::new(tmp).exists(), "removed after the command");
}

/// A command cannot keep its temporary directory on disk: not with a tree deeper than the
/// remover's descriptors (std's recursive `remove_dir_all` ran out of them at this depth
/// under `ulimit -n 256`, and a deeper tree overflowed its stack), not with a link out of
/// it, not with an immutable file (CAP_LINUX_IMMUTABLE is taken from the command, root
/// included).
#[test]
fn a_command_cannot_keep_its_temporary_directory() {
    require_landlock();
    let f = Fixture::new("keep-temp");
    f.approve(SCRIPT_MANDATE);
    let script = concat!(
        "echo \"$TMPDIR\"\n",
        "ln -s \"$OUTSIDE\" \"$TMPDIR/out-link\"\n",
        "touch \"$TMPDIR/pinned\"\n",
        "if chattr +i \"$TMPDIR/pinned\" 2>/dev/null; then echo immutable; fi\n",
        "/usr/bin/python3 -c 'import os\nos.chdir(os.environ[\"TMPDIR\"])\nfor _ in range(3000):\n    os.mkdir(\"d\"); os.chdir(\"d\")\nopen(\"leaf\", \"w\").write(\"x\")\nprint(\"deep\")'\n",
    );
    std::fs::write(f.work.join("attack.sh"), script).unwrap();
    let mut c = Command::new("bash");
    c.args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""]).arg(holon_bin()).args(["job", "--state"]).arg(&f.state);
    c.args(["exec", JOB, "--run", "r1", "--scope", "cron", "--shell", "bash ./attack.sh"]);
    let (code, out, err) = f.run(c, "", &[("OUTSIDE", &f.out.display().to_string())]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("deep"), "the tree was made: {out} {err}");
    assert!(!out.contains("immutable"), "chattr +i must fail under holon-sandbox: {out}");
    let tmp = out.lines().next().unwrap();
    assert!(!Path::new(tmp).exists(), "{tmp} was left: {err}");
    assert!(!err.contains("left on disk"), "{err}");
    assert_eq!(
        std::fs::read_to_string(f.out.join("target.txt")).unwrap(),
        "target\n",
        "the link was removed, never followed"
    );
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: chattr +i fails without CAP_LINUX_IMMUTABLE anyway; run as root to test the drop");
    }
}

/// A process the command leaves running (`setsid`, out of its session and process group)
/// ends with it: `exec` is its subreaper, kills it and reaps it before removing the
/// temporary directory it keeps writing in. Before, it lived on (reparented to init) and
/// raced the removal.
#[test]
fn a_process_the_command_leaves_running_ends_with_it() {
    require_landlock();
    let f = Fixture::new("leftover");
    f.approve(SCRIPT_MANDATE);
    let script = concat!(
        "echo \"$TMPDIR\"\n",
        "setsid sleep 600 </dev/null >/dev/null 2>&1 &\n",
        "echo $!\n",
        "setsid bash -c 'while :; do mkdir -p \"$TMPDIR/a/b\"; touch \"$TMPDIR/a/f\"; done' </dev/null >/dev/null 2>&1 &\n",
        "echo $!\n",
        // A program whose name is not UTF-8: /proc/PID/stat shows it raw (a scan that read
        // the file as text skipped the process, and exec then waited for it forever).
        "odd=\"$TMPDIR/$(printf 'x\\377')\"; cp /usr/bin/sleep \"$odd\"\n",
        "setsid \"$odd\" 600 </dev/null >/dev/null 2>&1 &\n",
        "echo $!\n",
    );
    std::fs::write(f.work.join("attack.sh"), script).unwrap();
    let (code, out, err) = f.exec(&["--shell", "bash ./attack.sh"], &[]);
    assert_eq!(code, 0, "{out} {err}");
    let lines: Vec<&str> = out.lines().collect();
    let [tmp, sleeper, writer, odd] = lines[..] else { panic!("{out}") };
    for pid in [sleeper, writer, odd] {
        // Reaped by exec: no process, not even a zombie, has the number (unless it was
        // reused since, by something that is not the command's).
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !cmdline.contains("sleep") && !cmdline.contains("mkdir") && !cmdline.contains("600"),
            "{pid} still runs: {cmdline}"
        );
    }
    // The two, and a child the writer had running when it was killed (how many depends on
    // the moment).
    let killed = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("holon: ")?.strip_suffix(" process(es) the command left behind were ended and reaped")
        })
        .and_then(|n| n.parse::<u32>().ok());
    assert!(killed.is_some_and(|n| n >= 3), "{err}");
    assert!(!Path::new(tmp).exists(), "{tmp} was left: {err}");
}

/// A command that stops itself is continued: nothing else would (no job control in a
/// cron run), and `exec` waited for it forever. `timeout` bounds the test, far above what
/// it takes.
#[test]
fn a_command_that_stops_itself_is_continued() {
    require_landlock();
    let f = Fixture::new("stopped");
    f.approve(SCRIPT_MANDATE);
    std::fs::write(f.work.join("attack.sh"), "kill -STOP $$\necho resumed\n").unwrap();
    let mut c = Command::new("timeout");
    c.arg("600").arg(holon_bin());
    f.exec_args(&mut c, "bash ./attack.sh");
    let (code, out, err) = f.run(c, "", &[]);
    assert_eq!((code, out.as_str()), (0, "resumed\n"), "{err}");
}

/// A command without root's capabilities cannot keep its temporary directory by taking
/// its owner's permissions away (`chmod 000` on a subdirectory, `chmod 500` on the
/// directory itself): the removal gives them back first. As root the test runs `exec` as
/// the user nobody (setpriv), where the permissions hold.
#[test]
fn a_command_cannot_lock_its_temporary_directory_by_its_permissions() {
    require_landlock();
    let f = Fixture::new("locked-temp");
    f.approve(SCRIPT_MANDATE);
    let script = concat!(
        "echo \"$TMPDIR\"\n",
        "mkdir -p \"$TMPDIR/sub/inner\" && touch \"$TMPDIR/sub/inner/f\" \"$TMPDIR/sub/g\"\n",
        "chmod 000 \"$TMPDIR/sub/inner\" && chmod 000 \"$TMPDIR/sub\" && chmod 500 \"$TMPDIR\" && echo locked\n",
    );
    std::fs::write(f.work.join("attack.sh"), script).unwrap();
    let mut c;
    if rustix::process::geteuid().is_root() {
        // The copy of holon, the fixture and the state become nobody's.
        let chown = |p: &Path| Command::new("chown").args(["-R", "65534:65534"]).arg(p).status().unwrap().success();
        assert!(chown(&f.base));
        c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(holon_bin());
    } else {
        c = Command::new(holon_bin());
    }
    f.exec_args(&mut c, "bash ./attack.sh");
    let (code, out, err) = f.run(c, "", &[]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("locked"), "{out} {err}");
    let tmp = out.lines().next().unwrap();
    assert!(!Path::new(tmp).exists(), "{tmp} was left: {err}");
    assert!(!err.contains("left on disk"), "{err}");
}

/// What `/proc` shows of processes outside the sandbox that only a tracer may read (their
/// environment, memory maps and memory, what their descriptors are) is closed to the
/// command (the numbers of their descriptors can be listed, as the kernel allows anyone of
/// the same user): Landlock denies a
/// confined process ptrace access to any process outside its domain, `exec` itself (its
/// parent, unconfined, holding the caller's environment) included. `/proc` is in the
/// system list, so the denial is the kernel's ptrace rule, not a missing grant.
#[test]
fn processes_outside_the_sandbox_cannot_be_read_through_proc() {
    require_landlock();
    let f = Fixture::new("proc");
    f.approve(SCRIPT_MANDATE);
    let script = concat!(
        "for what in environ maps mem; do\n",
        "  if head -c 1 /proc/$PPID/$what >/dev/null 2>&1; then echo \"read parent $what\"; fi\n",
        "done\n",
        "for n in $(ls /proc/$PPID/fd/); do\n",
        "  if readlink /proc/$PPID/fd/$n >/dev/null 2>&1; then echo \"followed parent fd $n\"; fi\n",
        "done\n",
        "if head -c 1 /proc/1/environ >/dev/null 2>&1; then echo 'read init environ'; fi\n",
        "if head -c 1 /proc/$$/environ >/dev/null 2>&1; then echo 'read own environ'; fi\n",
        "cat /proc/$PPID/comm\n",
    );
    std::fs::write(f.work.join("attack.sh"), script).unwrap();
    let (code, out, err) = f.exec(&["--shell", "bash ./attack.sh"], &[("HOLON_SECRET", "s3cret")]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(out, "read own environ\nholon\n", "{err}");
}

/// A scheduler that kills `holon job exec` (SIGKILL, which `exec` cannot pass on) ends the
/// command with it: the helper asks the kernel for SIGKILL when its parent ends, before it
/// becomes the command. Before, the command lived on, unwatched, its temporary directory
/// never removed.
#[test]
fn the_command_ends_when_exec_is_killed() {
    require_landlock();
    let f = Fixture::new("killed");
    f.approve(SCRIPT_MANDATE);
    std::fs::write(f.work.join("attack.sh"), "echo $$\nexec sleep 600\n").unwrap();
    let mut c = Command::new(holon_bin());
    f.exec_args(&mut c, "bash ./attack.sh");
    c.current_dir(&f.work).env("TMPDIR", f.base.join("tmp")).env_remove("HOLON_TEST_LANDLOCK_ABI");
    let mut exec = common::job_state::spawn_when_not_busy(c.stdout(std::process::Stdio::piped()));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(exec.stdout.take().unwrap()), &mut line).unwrap();
    let pid = line.trim().to_owned();
    assert!(!pid.is_empty(), "the command printed its number");
    exec.kill().unwrap();
    exec.wait().unwrap();
    // The signal is sent as exec ends; the command is then a zombie or gone. The bound is
    // for a machine that does not run the test at all, far above what it takes.
    let ended = |pid: &str| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            !stat.contains("(sleep)") || stat.rsplit_once(')').is_some_and(|(_, s)| s.trim_start().starts_with('Z'))
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !ended(&pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(ended(&pid), "the command {pid} outlived exec");
}

/// A SIGTERM sent to `holon job exec` (a scheduler stopping the job) is passed on to the
/// command, which may end in its own way; `exec` then ends what it left, removes its
/// temporary directory and answers the command's exit code. Before, `exec` died of the
/// signal, the command was killed by its parent-death signal, and its children lived on.
#[test]
fn a_sigterm_to_exec_is_passed_on_and_exec_still_cleans_up() {
    require_landlock();
    let f = Fixture::new("sigterm");
    f.approve(SCRIPT_MANDATE);
    let script = "trap 'echo got-term; exit 7' TERM\necho \"$TMPDIR\"\nsleep 600 &\nwait\n";
    std::fs::write(f.work.join("attack.sh"), script).unwrap();
    let mut c = Command::new(holon_bin());
    f.exec_args(&mut c, "bash ./attack.sh");
    c.current_dir(&f.work).env("TMPDIR", f.base.join("tmp")).env_remove("HOLON_TEST_LANDLOCK_ABI");
    let mut exec = common::job_state::spawn_when_not_busy(
        c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()),
    );
    let mut stdout = std::io::BufReader::new(exec.stdout.take().unwrap());
    let mut tmp = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut tmp).unwrap();
    let tmp = tmp.trim().to_owned();
    assert!(Path::new(&tmp).exists(), "{tmp}");
    // The command has printed, so its trap is set; exec took the signal before it started.
    assert!(Command::new("kill").arg("-TERM").arg(exec.id().to_string()).status().unwrap().success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = exec.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut exec.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!((status.code(), rest.as_str()), (Some(7), "got-term\n"), "{err}");
    assert!(!Path::new(&tmp).exists(), "{tmp} was left: {err}");
}
