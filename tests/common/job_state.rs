//! A throwaway `holon job` state directory and the binary run against it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub(crate) struct State(pub PathBuf);

/// Runs `cmd` with `stdin` on its standard input: (exit code, or -1 for a signal; stdout;
/// stderr).
pub(crate) fn output_of(mut cmd: Command, stdin: &str) -> (i32, String, String) {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn_when_not_busy(&mut cmd);
    // A process that does not read its input is fine: ignore a closed pipe.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// How many times a spawn is tried while its program is "text file busy".
const SPAWN_BUSY_TRIES_MAX: u32 = 1_000;

/// Spawns `cmd`, trying again while the kernel says its program is busy (ETXTBSY): a test
/// that has just copied a program may be exec'ing it while another test thread forked with
/// the copy's write descriptor open (closed on that child's exec, which under load can take
/// a while). Up to `SPAWN_BUSY_TRIES_MAX` tries 10 ms apart; any other error at once.
pub(crate) fn spawn_when_not_busy(cmd: &mut Command) -> std::process::Child {
    for _ in 0..SPAWN_BUSY_TRIES_MAX {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other.unwrap(),
        }
    }
    panic!("{cmd:?} stayed text-file-busy for {SPAWN_BUSY_TRIES_MAX} tries");
}

/// Runs a `holon job` command with `stdin`, in an environment without the job variables
/// (the caller's `HOLON_*` must not choose the run, scope or state) except `env`.
pub(crate) fn output_of_job(mut cmd: Command, stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    cmd.env("NO_COLOR", "1");
    for k in ["HOLON_SCOPE", "HOLON_RUN", "HOLON_STATE", "HOLON_TEST_LANDLOCK_ABI"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_of(cmd, stdin)
}

/// The programs of a build: holon, the helper it confines each command with, and the job
/// verbs' own program.
const BUILT: [&str; 3] =
    [env!("CARGO_BIN_EXE_holon"), env!("CARGO_BIN_EXE_holon-sandbox"), env!("CARGO_BIN_EXE_holon-job")];

/// holon (with its helper and `holon-job` beside it) as files of their own: cargo's
/// `target/debug/holon` is a second hard link of `deps/holon-<hash>`, and `exec` refuses a
/// linked program beside a write grant on its file system. One copy per build, replaced
/// when the build changes.
pub(crate) fn holon_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let stamp: Vec<String> = BUILT
            .iter()
            .map(|b| std::fs::metadata(b).unwrap())
            .map(|m| format!("{}-{:?}", m.len(), m.modified().unwrap()))
            .collect();
        let stamp = stamp.join(" ");
        let dir = std::env::temp_dir().join("holon-exec-test-bin");
        if std::fs::read_to_string(dir.join("stamp")).ok().as_deref() != Some(stamp.as_str()) {
            std::fs::create_dir_all(&dir).unwrap();
            install_programs(&dir);
            std::fs::write(dir.join("stamp"), &stamp).unwrap();
        }
        dir.join("holon")
    })
}

/// `holon-job`, beside [`holon_bin`].
pub(crate) fn holon_job_bin() -> PathBuf {
    holon_bin().with_file_name("holon-job")
}

/// Copies the programs into `dir` (each replaced whole, never half-written).
pub(crate) fn install_programs(dir: &Path) {
    for built in BUILT {
        let built = Path::new(built);
        let fresh = dir.join(format!(".fresh-{}", std::process::id()));
        std::fs::copy(built, &fresh).unwrap();
        std::fs::rename(&fresh, dir.join(built.file_name().unwrap())).unwrap();
    }
}

impl State {
    /// Every file under the state directory, as (path, text).
    pub(crate) fn files(&self) -> Vec<(String, String)> {
        let mut files = Vec::new();
        let mut stack = vec![self.0.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                    files.push((p.display().to_string(), text));
                }
            }
        }
        files
    }

    pub(crate) fn new(name: &str) -> State {
        let dir = std::env::temp_dir().join(format!("holon-job-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        State(dir)
    }

    /// `holon job --state DIR ARGS...` with `stdin`, in an environment without the job
    /// variables except `env`: (exit code, stdout, stderr).
    pub(crate) fn holon_env(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_holon"));
        cmd.arg("job").arg("--state").arg(&self.0).args(args);
        output_of_job(cmd, stdin, env)
    }

    pub(crate) fn holon(&self, args: &[&str], stdin: &str) -> (i32, String, String) {
        self.holon_env(args, stdin, &[])
    }

    /// Observes `calls` as run `r1` (and `run2` as `r2`) of `job` in `/work/repo`, or feeds
    /// them to `check` in observe mode with `by_check`; then proposes and approves.
    pub(crate) fn learn_job(&self, job: &str, calls: &[String], run2: &[String], by_check: bool) {
        self.learn_job_with(job, calls, run2, by_check, &[]);
    }

    /// [`State::learn_job`], with `extra` command rules added to the proposal before it is
    /// approved (as a person widening by hand or by `widen --pattern` would).
    pub(crate) fn learn_job_with(
        &self,
        job: &str,
        calls: &[String],
        run2: &[String],
        by_check: bool,
        extra: &[String],
    ) {
        if by_check {
            assert_eq!(self.holon(&["observe", job, "--run", "r1"], "").0, 0);
            for c in calls {
                assert_eq!(self.holon(&["check", job, "--run", "r1", "--scope", "cron"], c).0, 0, "observe mode: {c}");
            }
        } else {
            let (code, _, err) =
                self.holon(&["observe", job, "--run", "r1", "--workdir", "/work/repo"], &(calls.join("\n") + "\n"));
            assert_eq!(code, 0, "{err}");
            if !run2.is_empty() {
                let (code, _, err) =
                    self.holon(&["observe", job, "--run", "r2", "--workdir", "/work/repo"], &(run2.join("\n") + "\n"));
                assert_eq!(code, 0, "{err}");
            }
        }
        let (code, out, err) = self.holon(&["propose", job], "");
        assert_eq!(code, 0, "{err}");
        if !extra.is_empty() {
            let version = self.0.join("jobs").join(job).join("versions").join("v1.yaml");
            let text = std::fs::read_to_string(&version).unwrap();
            let rules: String = extra.iter().map(|r| format!("  - {}\n", serde_json::to_string(r).unwrap())).collect();
            let text = match text.find("commands:\n") {
                Some(i) => format!("{}commands:\n{rules}{}", &text[..i], &text[i + "commands:\n".len()..]),
                None => text.replace("hosts:", &format!("commands:\n{rules}hosts:")),
            };
            std::fs::write(&version, text).unwrap();
        }
        let (code, _, err) = self.holon(&["approve", job], "");
        assert_eq!(code, 0, "{err}\n{out}");
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
