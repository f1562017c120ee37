//! `holon-job VERB …` is `holon job VERB …`: one job's whole life (observe, propose,
//! approve, checks allowed and blocked, drift, widen, undo, exec confined and blocked,
//! the hook's answers, status, show, export, bad input) run through each program in a
//! state of its own, and every answer (exit code, standard output, standard error)
//! compared, with only the paths and times that differ by construction put aside.
#![cfg(feature = "cli")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::job_state::{holon_bin, holon_job_bin, output_of_job};

const JOB: &str = "nightly";

/// A throwaway job world: a workdir with files, a state outside it, a home and a TMPDIR.
struct World {
    base: PathBuf,
}

impl World {
    fn new(name: &str) -> World {
        let base = std::env::temp_dir().join(format!("holon-front-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for d in ["w/reports", "outside", "state", "tmp", "home"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        let base = std::fs::canonicalize(base).unwrap();
        std::fs::write(base.join("w/notes.txt"), "notes\n").unwrap();
        std::fs::write(base.join("outside/secret.txt"), "secret\n").unwrap();
        World { base }
    }

    fn work(&self) -> PathBuf {
        self.base.join("w")
    }

    /// `program` with the words that name the job verbs (`holon job`, or `holon-job`),
    /// `--state`, then `args`, in the workdir: (code, stdout, stderr).
    fn run(&self, front: &[&Path], args: &[&str], stdin: &str) -> (i32, String, String) {
        let (program, words) = front.split_first().unwrap();
        let mut cmd = Command::new(program);
        cmd.args(words.iter().map(|w| w.as_os_str()));
        cmd.arg("--state").arg(self.base.join("state")).args(args);
        cmd.current_dir(self.work()).env("TMPDIR", self.base.join("tmp")).env("HOME", self.base.join("home"));
        output_of_job(cmd, stdin, &[])
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// What differs by construction: the world's directory, the program's path, the times.
fn normalized(text: &str, world: &World, program: &Path) -> String {
    let mut text = text.replace(&program.display().to_string(), "PROGRAM");
    // The hook names the program and then the verb, each word quoted: `holon job exec` or
    // `holon-job exec`.
    text = text.replace("'PROGRAM' 'job' 'exec'", "'PROGRAM' 'exec'");
    text = text.replace(&world.base.display().to_string(), "BASE");
    // RFC 3339 times (drift records, status): each digit of a time put aside.
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let time = bytes.len() - i >= 20
            && bytes[i..i + 4].iter().all(u8::is_ascii_digit)
            && bytes[i + 4] == b'-'
            && bytes[i + 10] == b'T'
            && bytes[i + 13] == b':';
        if time {
            out.push_str("TIME");
            i += 19;
        } else {
            out.push(char::from(bytes[i]));
            i += 1;
        }
    }
    out
}

/// The life of one job, each step's answer normalized.
fn life(front: &[&Path]) -> Vec<(String, i32, String, String)> {
    // One directory for both programs in turn: the workdir is in the approved text (and its
    // hash), so both lives approve the same bytes.
    let world = World::new("life");
    let w = world.work().display().to_string();
    let call = |cmd: &str| format!(r#"{{"tool":"terminal","args":{{"command":"{cmd}"}},"cwd":"{w}"}}"#);
    let bash = |cmd: &str| {
        format!(
            r#"{{"session_id":"s1","cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"{cmd}","description":"x"}}}}"#
        )
    };
    let read = format!(
        r#"{{"session_id":"s1","cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{{"file_path":"{}/outside/secret.txt"}}}}"#,
        world.base.display()
    );
    let observed =
        format!("{}\n{}\n{}\n", call("cat notes.txt"), call("ls reports"), call("ls").replace("terminal", "Bash"));
    let steps: Vec<(&str, Vec<&str>, String)> = vec![
        ("check before observe", vec!["check", JOB, "--run", "r0", "--scope", "cron"], call("ls")),
        ("observe", vec!["observe", JOB, "--run", "r1", "--workdir", &w], observed),
        ("propose", vec!["propose", JOB], String::new()),
        ("show pending", vec!["show", JOB, "--pending"], String::new()),
        ("approve", vec!["approve", JOB], String::new()),
        ("show", vec!["show", JOB], String::new()),
        ("check allowed", vec!["check", JOB, "--run", "r2", "--scope", "cron", "--json"], call("cat notes.txt")),
        ("check blocked", vec!["check", JOB, "--run", "r2", "--scope", "cron"], call("cat ../outside/secret.txt")),
        ("drift", vec!["drift", JOB, "--json"], String::new()),
        ("exec confined", vec!["exec", JOB, "--run", "r3", "--scope", "cron", "--", "cat", "notes.txt"], String::new()),
        (
            "exec blocked",
            vec!["exec", JOB, "--run", "r3", "--scope", "cron", "--shell", "cat /etc/hostname"],
            String::new(),
        ),
        ("exec explain", vec!["exec", JOB, "--explain"], String::new()),
        ("exec no command", vec!["exec", JOB, "--run", "r3"], String::new()),
        ("hook shell", vec!["hook", JOB, "--scope", "cron"], bash("cat notes.txt")),
        ("hook shell blocked", vec!["hook", JOB, "--scope", "cron"], bash("rm -rf reports")),
        ("hook other tool", vec!["hook", JOB, "--scope", "cron"], read),
        ("status", vec!["status", JOB], String::new()),
        ("export", vec!["export", JOB], String::new()),
        ("widen", vec!["widen", JOB, "1", "--json"], String::new()),
        ("undo", vec!["undo", JOB], String::new()),
        ("unknown job", vec!["status", "nobody"], String::new()),
        ("bad flag", vec!["check", JOB, "--nope"], String::new()),
    ];
    let program = front[0];
    steps
        .into_iter()
        .map(|(name, args, stdin)| {
            let (code, out, err) = world.run(front, &args, &stdin);
            (name.to_owned(), code, normalized(&out, &world, program), normalized(&err, &world, program))
        })
        .collect()
}

#[test]
fn holon_job_answers_as_holon_job_does() {
    let holon = holon_bin();
    let lean = holon_job_bin();
    let by_holon = life(&[holon, Path::new("job")]);
    let by_lean = life(&[&lean]);
    for (a, b) in by_holon.iter().zip(&by_lean) {
        // Usage lines name the program: `holon job check` against `holon-job check`.
        let b_err = b.3.replace("holon-job check", "holon job check");
        assert_eq!((a.0.as_str(), a.1, &a.2, &a.3), (b.0.as_str(), b.1, &b.2, &b_err), "{}", a.0);
    }
    assert_eq!(by_holon.len(), by_lean.len());
    // The life did what it says (so agreeing is not agreeing on nothing).
    let code = |name: &str| by_holon.iter().find(|s| s.0 == name).unwrap().1;
    assert_eq!(code("check before observe"), 2);
    assert_eq!(code("check allowed"), 0);
    assert_eq!(code("check blocked"), 2);
    assert_eq!(code("exec blocked"), 2);
    assert_eq!(code("hook shell blocked"), 2);
    assert_eq!(code("hook other tool"), 2);
    assert_eq!(code("bad flag"), 2);
    let confined = by_holon.iter().find(|s| s.0 == "exec confined").unwrap();
    assert_eq!((confined.1, confined.2.as_str()), (0, "notes\n"), "{}", confined.3);
    let hook = by_holon.iter().find(|s| s.0 == "hook shell").unwrap();
    assert!(hook.2.contains("'PROGRAM' 'exec' 'nightly'"), "{}", hook.2);
}

/// The hook's wrapped line starts the program that wrote it: `holon-job exec` from
/// `holon-job hook`, so a runtime's shell calls never start the whole `holon`.
#[test]
fn holon_job_wraps_shell_calls_in_itself() {
    let world = World::new("wrap");
    let lean = holon_job_bin();
    let w = world.work().display().to_string();
    assert_eq!(world.run(&[&lean], &["observe", JOB, "--run", "r1", "--workdir", &w], "").0, 0);
    let payload = format!(
        r#"{{"session_id":"s1","cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"ls"}}}}"#
    );
    let (code, out, err) = world.run(&[&lean], &["hook", JOB, "--scope", "cron"], &payload);
    assert_eq!(code, 0, "{err}");
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    let wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap();
    let program = lean.display().to_string();
    assert!(wrapped.starts_with(&format!("'{program}' 'exec' 'nightly' ")), "{wrapped}");
    // Without a scope (judged as cron), the line says cron: the environment it runs in
    // cannot make it interactive.
    let (code, out, err) = world.run(&[&lean], &["hook", JOB], &payload);
    assert_eq!(code, 0, "{err}");
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    let wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap();
    assert!(wrapped.contains("'--scope=cron'"), "{wrapped}");
}
