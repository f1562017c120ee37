//! The unit tests of tool calls: hook payloads, plain calls, working directories.
use super::*;

#[test]
fn hook_payloads_and_plain_calls_map_to_aspects() {
    let c = parse(r#"{"tool_name":"Bash","tool_input":{"command":"git status --short > out.txt"},"session_id":"s1","cwd":"/w","hook_event_name":"PreToolUse"}"#).unwrap();
    assert_eq!(c.session.as_deref(), Some("s1"));
    assert!(c.aspects.contains(&Aspect::Write("out.txt".into())));
    let c = parse(r#"{"tool":"search_files","args":{"path":"src/"}}"#).unwrap();
    assert_eq!(c.aspects[1], Aspect::Read("src/**".into()));
    let c = parse(r#"{"tool_name":"WebFetch","tool_input":{"url":"https://Docs.rs/x?token=1"}}"#).unwrap();
    assert_eq!(c.aspects[1], Aspect::Host("docs.rs".into()));
    assert!(matches!(parse(r#"{"tool":"Read","args":{}}"#), Err(CallError::MissingArgument { .. })));
    assert!(matches!(parse("[1]"), Err(CallError::NoTool)));
    assert!(matches!(parse("{"), Err(CallError::Json(_))));
}

#[test]
fn argv_forms_become_the_quoted_line_and_other_forms_are_refused() {
    let line = |v: Value| command_line("t", &v);
    let argv = serde_json::json!({ "command": ["bash", "-lc", "it's"] });
    assert_eq!(line(argv), Ok(Some("'bash' '-lc' 'it'\\''s'".to_owned())));
    let with_args = serde_json::json!({ "command": "git", "args": ["log", "-n 1"] });
    assert_eq!(line(with_args), Ok(Some("git 'log' '-n 1'".to_owned())));
    for bad in [
        serde_json::json!({ "command": 1 }),
        serde_json::json!({ "cmd": [] }),
        serde_json::json!({ "cmd": ["ls", null] }),
        serde_json::json!({ "command": "git", "args": [true] }),
    ] {
        assert!(matches!(line(bad), Err(CallError::NotText { .. })));
    }
    assert_eq!(line(serde_json::json!({ "path": "x" })), Ok(None));
    let both = serde_json::json!({ "command": ["git"], "args": ["push"] });
    assert_eq!(line(both), Err(CallError::Ambiguous("command", "args")));
}

#[test]
fn glob_patterns_join_their_directory() {
    assert_eq!(glob_subject("Glob", "**/*.rs", "src/"), Ok("src/**/*.rs".to_owned()));
    assert_eq!(glob_subject("Glob", "/etc/*", "src"), Ok("/etc/*".to_owned()));
    assert_eq!(glob_subject("Glob", "../x/*", "src"), Ok("src/../x/*".to_owned()));
    assert!(glob_subject("Glob", "**/../../etc", "src").is_err());
}

#[test]
fn paths_are_made_relative_and_lexically_normal() {
    assert_eq!(normalize_path("/w/src/a.rs", "/w"), "src/a.rs");
    assert_eq!(normalize_path("./src/../lib/x", "/w"), "lib/x");
    assert_eq!(normalize_path("../etc/passwd", "/w"), "/etc/passwd");
    assert_eq!(normalize_path("/etc/passwd", "/w"), "/etc/passwd");
    assert_eq!(normalize_path(".", "/w"), ".");
    assert_eq!(normalize_path("/w2/x", "/w"), "/w2/x");
}
