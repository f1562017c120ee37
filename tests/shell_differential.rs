//! The shell analysis against an independent parser (brush-parser, the parser of the
//! brush shell): for a generated corpus of command lines, every simple command brush
//! finds, at any depth of the statement structure, is either judged by a rule (a
//! segment with that command head) or lies inside an opaque segment. Zero misses. And the
//! rule learned from every segment re-matches it (quoting and pinned arguments round-trip).
//! The generated lines are only parsed, never executed.
#![cfg(feature = "job")]

mod common;
use common::rng::Rng;

use holon::job::call::Aspect;
use holon::job::mandate::CommandMatcher;
use holon::job::shell;
use serde_json::Value;

const HEADS: &[&str] = &[
    "ls",
    "cat",
    "rm",
    "git",
    "curl",
    "echo",
    "grep",
    "sudo",
    "env",
    "timeout 5",
    "nice -n 2",
    "cd",
    "make",
    "python3",
    "bash",
    "sh -c",
    "xargs",
    "find",
    "cp",
    "mv",
    "sed",
    "ssh",
    "'rm'",
    "\"ls\"",
    "r\\m",
    "X=1",
    "A=b c=d",
    "command",
    "exec",
    "time",
    "nohup",
    "!",
    "eval",
    "{",
    "(",
    "if true; then",
    "for i in a b; do",
    "while false; do",
    "case x in x)",
    "f()",
    "[[ -f x ]] &&",
    "declare",
    "export",
    "alias",
    "./run.sh",
];
const ARGS: &[&str] = &[
    "-la",
    "-rf",
    "src",
    "/etc/passwd",
    "'a b'",
    "\"c d\"",
    "'x;y'",
    "\"a && b\"",
    "a\\ b",
    "$HOME",
    "${X}",
    "${v@P}",
    "$(id)",
    "`id`",
    "$((1+2))",
    "$[1+1]",
    "~",
    "~/x",
    "*.rs",
    "a?",
    "[ab]",
    "{a,b}",
    "$'\\x41'",
    "\"$(id)\"",
    "'$(id)'",
    "\"${x:-y}\"",
    "#",
    "#c",
    "a#b",
    "--flag=v",
    "-o",
    "out.txt",
    "origin",
    "main",
    "https://a.b/c",
    "http:evil",
    "127.0.0.1:80",
    "\\;",
    "\\|",
    "'\\''",
    "\"\\\"\"",
    "x=1",
    "--",
    "-",
    "\\\n",
    "<(ls)",
    ">(cat)",
    "2>&1",
    "> out",
    ">> log",
    "< in",
    "&> all",
    "<<< s",
    "<> rw",
    ">| f",
];
const OPERATORS: &[&str] = &[" ; ", " && ", " || ", " | ", " & ", "\n", " |& ", ";\n", " # note\n"];
const CLOSERS: &[&str] = &["", " }", " )", "; fi", "; done", ";;  esac", " { ls; }"];

fn generate(rng: &mut Rng) -> String {
    let mut line = String::new();
    let statements = 1 + rng.next() % 4;
    for s in 0..statements {
        if s > 0 {
            line.push_str(rng.pick_str(OPERATORS));
        }
        line.push_str(rng.pick_str(HEADS));
        for _ in 0..rng.next() % 5 {
            line.push(' ');
            line.push_str(rng.pick_str(ARGS));
        }
        if rng.chance(15) {
            line.push_str(rng.pick_str(CLOSERS));
        }
    }
    if rng.chance(5) {
        line.push_str(" <<EOF\nrm -rf /\nEOF");
    }
    line
}

/// Every simple command's name brush finds, at any depth of the AST.
fn names(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(name) = m.get("word_or_name").and_then(|w| w.get("value")).and_then(Value::as_str) {
                out.push(name.to_owned());
            }
            for x in m.values() {
                names(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| names(x, out)),
        _ => {}
    }
}

fn brush_names(line: &str) -> Option<Vec<String>> {
    let options = brush_parser::ParserOptions::default();
    let mut parser = brush_parser::Parser::new(std::io::BufReader::new(line.as_bytes()), &options);
    let program = parser.parse_program().ok()?;
    let mut out = Vec::new();
    names(&serde_json::to_value(&program).ok()?, &mut out);
    Some(out)
}

#[test]
fn every_command_brush_finds_is_judged_or_opaque() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut lines, mut parsed, mut commands, mut judged, mut misses) = (0, 0, 0, 0, Vec::new());
    for _ in 0..6_000 {
        let line = generate(&mut rng);
        lines += 1;
        let Some(found) = brush_names(&line) else { continue };
        parsed += 1;
        let segments = shell::parse(&line);
        // The rule learned from each segment parses and allows that segment again.
        for seg in &segments {
            let (rule, aspect) = match &seg.command {
                Some(c) => (c.rule(), Aspect::Command(c.clone())),
                None => (format!("={}", seg.text), Aspect::Opaque(seg.text.clone())),
            };
            let round_trips = CommandMatcher::parse(&rule).is_ok_and(|m| m.allows(&aspect));
            if !round_trips {
                misses.push(format!("{line:?}: the learned rule {rule:?} does not allow its own segment"));
            }
        }
        for name in found {
            commands += 1;
            let literal = brush_parser::unquote_str(&name);
            let is_judged = segments.iter().any(|s| s.command.as_ref().is_some_and(|c| c.head == literal));
            let in_opaque = segments.iter().any(|s| s.command.is_none() && s.text.contains(name.as_str()));
            if is_judged {
                judged += 1;
            } else if !in_opaque {
                misses.push(format!("{line:?}: `{name}` is neither judged nor opaque: {segments:?}"));
            }
        }
    }
    eprintln!("{lines} lines, {parsed} parsed by brush, {commands} simple commands, {judged} judged by a rule");
    // The corpus must exercise both outcomes, or the test proves nothing.
    assert!(parsed > 2_000 && commands > 4_000 && judged > 500, "{parsed} {commands} {judged}");
    assert!(
        misses.is_empty(),
        "{} miss(es):\n{}",
        misses.len(),
        misses.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
