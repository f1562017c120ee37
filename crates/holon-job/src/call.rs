//! One tool call of an agent job, from the JSON a runtime hands us, reduced to the
//! *aspects* the job mandate judges: the tool, paths read and written, command segments,
//! hosts.
//!
//! Accepted inputs (one JSON object per line):
//! - `{"tool": "terminal", "args": {"command": "git status"}}` (plus optional `"run"`);
//! - a PreToolUse hook payload as runtimes send it: `{"tool_name": "Bash", "tool_input":
//!   {"command": "…"}, "session_id": "…", "cwd": "…", …}` (other keys are ignored).
//!
//! | tools | argument | aspects |
//! |---|---|---|
//! | `terminal`, `Bash`, `bash`, `shell`, `run_command`, `execute_command`, any other tool with a `command` | `command` / `cmd` | command segments; redirect targets as reads/writes; URL hosts |
//! | `read_file`, `Read`, `view`, `NotebookRead` | `path`, `file_path`, `filePath`, `filepath`, `notebook_path` | read path |
//! | `write_file`, `Write`, `create_file`, `edit_file`, `Edit`, `MultiEdit`, `str_replace`, `patch`, `NotebookEdit` | same | write path |
//! | `list_files`, `list_directory`, `LS` | `path` (default `.`) | read of the directory |
//! | `search_files`, `Grep`, `grep`, `Glob`, `glob` | `path` (default `.`) | read of `dir/**` (searched recursively); for `Glob`/`glob` also the read of `pattern` joined to `dir` |
//! | `WebFetch`, `web_fetch`, `fetch_url`, `browser_navigate` | `url` | host |
//! | `mandate_status` | — | exempt: never recorded, never checked |
//! | anything else (MCP and plugin tools included) | `url`/`uri`, the path keys | the tool name; the URL's host; the path as a write |
//!
//! A command is a string, a string with an `args` array (`{"command": "git", "args":
//! ["status"]}`), or an array of words (argv form, `{"command": ["bash", "-lc", "…"]}`):
//! the words are single-quoted and joined into the line they mean, then parsed like any
//! command line. A command in any other form cannot be judged: the call is refused.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::redact::{redact, redact_words};
pub use super::shell::recursive;
use super::shell::{self, CommandUse};

/// The run a call without any run id is counted in.
pub const UNKNOWN_RUN: &str = "unknown";

/// The tool a status query uses; never recorded or checked.
pub const EXEMPT_TOOL: &str = "mandate_status";
/// Most bytes of one call's JSON.
pub const CALL_BYTES_MAX: usize = 256 * 1024;

const COMMAND_TOOLS: &[&str] = &["terminal", "Bash", "bash", "shell", "run_command", "execute_command"];
const READ_TOOLS: &[&str] = &["read_file", "Read", "view", "NotebookRead"];
const WRITE_TOOLS: &[&str] =
    &["write_file", "Write", "create_file", "edit_file", "Edit", "MultiEdit", "str_replace", "patch", "NotebookEdit"];
const LIST_TOOLS: &[&str] = &["list_files", "list_directory", "LS"];
const SEARCH_TOOLS: &[&str] = &["search_files", "Grep", "grep", "Glob", "glob"];
const FETCH_TOOLS: &[&str] = &["WebFetch", "web_fetch", "fetch_url", "browser_navigate"];

/// The rule families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Tools,
    Paths,
    Commands,
    Hosts,
    /// The per-run write budget.
    Limits,
    /// The approved text no longer hashes to its approval, or the state is unreadable.
    Integrity,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Tools => "tools",
            Family::Paths => "paths",
            Family::Commands => "commands",
            Family::Hosts => "hosts",
            Family::Limits => "limits",
            Family::Integrity => "integrity",
        }
    }
}

/// One thing about a call that a rule must allow.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Aspect {
    Tool(String),
    Read(String),
    Write(String),
    Command(CommandUse),
    /// A segment the parser refuses to reason about: allowed only by `=text`.
    Opaque(String),
    Host(String),
}

impl Aspect {
    /// The aspect as it may be written to disk: secrets masked in opaque texts and paths
    /// (command arguments are masked when parsed).
    pub fn redacted(self) -> Aspect {
        match self {
            Aspect::Opaque(t) => Aspect::Opaque(redact(&t)),
            Aspect::Read(t) => Aspect::Read(redact(&t)),
            Aspect::Write(t) => Aspect::Write(redact(&t)),
            other => other,
        }
    }

    pub fn family(&self) -> Family {
        match self {
            Aspect::Tool(_) => Family::Tools,
            Aspect::Read(_) | Aspect::Write(_) => Family::Paths,
            Aspect::Command(_) | Aspect::Opaque(_) => Family::Commands,
            Aspect::Host(_) => Family::Hosts,
        }
    }
    /// The subject as a rule would name it exactly.
    pub fn subject(&self) -> String {
        match self {
            Aspect::Tool(s) | Aspect::Read(s) | Aspect::Write(s) | Aspect::Host(s) => s.clone(),
            Aspect::Command(c) => c.rule(),
            Aspect::Opaque(t) => format!("={t}"),
        }
    }
}

/// A normalised tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool: String,
    /// The call as received (its arguments), for drift records (redacted when shown).
    pub shown: String,
    pub aspects: Vec<Aspect>,
    /// From the hook payload, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The payload's `cwd`: where the runtime runs (observe takes it for the workdir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// A command's own working directory (`workdir`, `directory`, `dir_path`, `cwd` among
    /// its arguments), resolved against the payload's `cwd` when relative: where its
    /// relative paths resolve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_in: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

impl ToolCall {
    /// The call as it may be written to disk: secrets masked in what is shown, in opaque
    /// texts and in paths (command arguments are masked when parsed). An exact rule
    /// learned from a masked text never matches a call that holds the secret: keep
    /// secrets in the environment, not on command lines.
    pub fn redacted(mut self) -> ToolCall {
        self.shown = redact(&self.shown);
        self.aspects = self.aspects.into_iter().map(Aspect::redacted).collect();
        self
    }

    pub fn is_exempt(&self) -> bool {
        self.tool == EXEMPT_TOOL
    }
    /// The run this call belongs to: `given` (`--run`, `HOLON_RUN`), else the call's own
    /// `run` or `session_id`; `None` when it has none (it is then counted in
    /// [`UNKNOWN_RUN`]).
    pub fn run_id(&self, given: Option<&str>) -> Option<String> {
        given.map(str::to_owned).or_else(|| self.run.clone()).or_else(|| self.session.clone())
    }

    /// Files written, for the write budget (a redirect to `/dev/null` is no file and never
    /// an aspect).
    pub fn writes(&self) -> usize {
        // `rm -r dir` counts two (`dir` and `dir/**`), when learned as when checked: a
        // discount for the pair would also discount a file literally named `**`.
        self.aspects.iter().filter(|a| matches!(a, Aspect::Write(_))).count()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("the call is not JSON: {0}")]
    Json(String),
    #[error("the call is {0} bytes; at most {CALL_BYTES_MAX} are read")]
    TooLarge(usize),
    #[error(
        "the call names no tool: expected {{\"tool\": NAME, \"args\": {{…}}}} or a hook payload {{\"tool_name\": NAME, \"tool_input\": {{…}}}}"
    )]
    NoTool,
    #[error("`{tool}` needs a string `{field}` argument")]
    MissingArgument { tool: String, field: &'static str },
    #[error("`{tool}`: `{field}` must be a string or an array of strings; this call cannot be evaluated")]
    NotText { tool: String, field: &'static str },
    #[error("`{tool}`: the pattern `{pattern}` climbs with `..` after a wildcard; this call cannot be evaluated")]
    GlobClimbs { tool: String, pattern: String },
    #[error(
        "the call is ambiguous: it has both `{0}` and `{1}` with different values, and runtimes differ in which they use"
    )]
    Ambiguous(&'static str, &'static str),
    #[error(
        "the call is ambiguous: its argument `{0}` looks like a working directory that is not one of {WORKDIR_KEYS:?}, so where its paths resolve cannot be told"
    )]
    UnknownDirectory(String),
    #[error("`{tool}`: the working directory `{field}` must be a string; this call cannot be evaluated")]
    DirectoryNotText { tool: String, field: &'static str },
}

fn string_arg<'a>(args: &'a Value, names: &[&'static str]) -> Option<&'a str> {
    names.iter().find_map(|n| args.get(*n).and_then(Value::as_str))
}

/// The keys a path may be given under, in order of preference.
const PATH_KEYS: &[&str] = &["path", "file_path", "filePath", "filepath", "notebook_path"];
/// The keys a command line may be given under.
const COMMAND_KEYS: &[&str] = &["command", "cmd"];
/// The keys under which runtimes give a command's working directory (Codex's `shell`
/// `workdir`, Gemini CLI's `run_shell_command` `directory`/`dir_path`, `cwd`).
pub const WORKDIR_KEYS: &[&str] = &["workdir", "cwd", "directory", "dir_path"];

/// Whether an argument's name says it is a directory (`working_dir`, `folder`): a command
/// call with one that is not in [`WORKDIR_KEYS`] is ambiguous.
fn names_directory(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["dir", "cwd", "folder", "working", "chdir"].iter().any(|w| k.contains(w))
}

/// Where a command call runs: its argument's working directory, resolved against the
/// payload's `cwd` when relative; the payload's `cwd` without one.
fn command_cwd(tool: &str, args: &Value, payload_cwd: Option<&str>) -> Result<Option<String>, CallError> {
    unambiguous(args, WORKDIR_KEYS)?;
    if let Value::Object(m) = args
        && let Some(k) = m.keys().find(|k| names_directory(k) && !WORKDIR_KEYS.contains(&k.as_str()))
    {
        return Err(CallError::UnknownDirectory(k.clone()));
    }
    let Some((field, dir)) = WORKDIR_KEYS.iter().find_map(|k| args.get(*k).map(|v| (*k, v))) else {
        return Ok(None);
    };
    let dir = dir.as_str().ok_or_else(|| CallError::DirectoryNotText { tool: tool.to_owned(), field })?;
    Ok(Some(match payload_cwd {
        Some(c) if !dir.starts_with('/') && !c.is_empty() => format!("{}/{dir}", c.trim_end_matches('/')),
        _ => dir.to_owned(),
    }))
}
/// Tools whose `pattern` is a path glob (for `Grep` it is a regular expression).
const GLOB_TOOLS: &[&str] = &["Glob", "glob"];

/// One word quoted for a POSIX shell: `'…'`, with `'` written `'\''`.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// Words as the shell line that runs them: every word single-quoted, joined by spaces.
fn argv_line<'a>(words: impl IntoIterator<Item = &'a Value>) -> Option<String> {
    let quoted: Option<Vec<String>> = words.into_iter().map(|w| w.as_str().map(shell_quote)).collect();
    quoted.map(|q| q.join(" "))
}

/// The command line a call carries, if any: `command`/`cmd` as a string (followed by
/// the quoted words of an `args` array when there is one), or as an array of words
/// (argv form). `Err` when it is there but is neither, so it cannot be judged.
fn command_line(tool: &str, args: &Value) -> Result<Option<String>, CallError> {
    let Some((field, value)) = COMMAND_KEYS.iter().find_map(|k| args.get(*k).map(|v| (*k, v))) else {
        return Ok(None);
    };
    let not_text = |field| CallError::NotText { tool: tool.to_owned(), field };
    match value {
        Value::String(command) => match args.get("args") {
            None => Ok(Some(command.clone())),
            Some(Value::Array(words)) => {
                let rest = argv_line(words).ok_or_else(|| not_text("args"))?;
                Ok(Some(if rest.is_empty() { command.clone() } else { format!("{command} {rest}") }))
            }
            Some(_) => Err(not_text("args")),
        },
        // Words and an `args` array too: which one the runtime runs cannot be known.
        Value::Array(_) if args.get("args").is_some() => Err(CallError::Ambiguous(field, "args")),
        Value::Array(words) if !words.is_empty() => argv_line(words).map(Some).ok_or_else(|| not_text(field)),
        _ => Err(not_text(field)),
    }
}

/// The read subject of a glob `pattern` searched from `dir`: the pattern joined to the
/// directory (an absolute pattern stays absolute). A `..` after a wildcard cannot be
/// resolved lexically (`**` may match no directory at all), so it is refused.
fn glob_subject(tool: &str, pattern: &str, dir: &str) -> Result<String, CallError> {
    // A brace alternative is a pattern of its own: `{/etc,src}/*` reaches `/etc`. An
    // alternative that starts absolute, at home, in a variable or above is refused.
    let mut depth = 0usize;
    let mut chars = pattern.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        let starts_alternative = c == '{' || (c == ',' && depth > 0);
        let rest = pattern.get(i + c.len_utf8()..).unwrap_or_default();
        if starts_alternative && (rest.starts_with(['/', '~', '$']) || rest.starts_with("..")) {
            return Err(CallError::GlobClimbs { tool: tool.to_owned(), pattern: pattern.to_owned() });
        }
    }
    let mut wild = false;
    for part in pattern.split('/') {
        if part == ".." && wild {
            return Err(CallError::GlobClimbs { tool: tool.to_owned(), pattern: pattern.to_owned() });
        }
        wild |= part.contains(['*', '?', '[', ']', '{', '}']);
    }
    let dir = dir.trim_end_matches('/');
    Ok(if pattern.starts_with('/') || dir.is_empty() { pattern.to_owned() } else { format!("{dir}/{pattern}") })
}

/// Refuses a payload where two of `names` are present with different values (`path` and
/// `file_path`, `command` and `cmd`): which one the runtime acts on cannot be known.
fn unambiguous(v: &Value, names: &[&'static str]) -> Result<(), CallError> {
    let present: Vec<(&'static str, &Value)> = names.iter().filter_map(|n| v.get(*n).map(|x| (*n, x))).collect();
    if let Some((first, value)) = present.first()
        && let Some((other, _)) = present.iter().find(|(_, x)| *x != *value)
    {
        return Err(CallError::Ambiguous(first, other));
    }
    Ok(())
}

/// Parses one call from its JSON text.
pub fn parse(text: &str) -> Result<ToolCall, CallError> {
    if text.len() > CALL_BYTES_MAX {
        return Err(CallError::TooLarge(text.len()));
    }
    let v: Value = serde_json::from_str(text).map_err(|e| CallError::Json(e.to_string()))?;
    from_value(&v)
}

/// Whether a call of `tool` (carrying a command or not) has its command judged: a shell
/// tool, or a tool outside the table that carries a command (a shell by another name).
/// `holon job exec` runs only calls judged so.
pub fn judged_as_command(tool: &str, carries_command: bool) -> bool {
    COMMAND_TOOLS.contains(&tool) || (!known_tool(tool) && carries_command)
}

/// Whether `tool` is in the table of tool families.
fn known_tool(tool: &str) -> bool {
    [COMMAND_TOOLS, READ_TOOLS, WRITE_TOOLS, LIST_TOOLS, SEARCH_TOOLS, FETCH_TOOLS].iter().any(|l| l.contains(&tool))
}

/// Normalises a call given as a JSON value.
pub fn from_value(v: &Value) -> Result<ToolCall, CallError> {
    unambiguous(v, &["tool", "tool_name"])?;
    unambiguous(v, &["args", "tool_input"])?;
    let tool = string_arg(v, &["tool", "tool_name"]).ok_or(CallError::NoTool)?.to_owned();
    let null = Value::Null;
    let args = v.get("args").or_else(|| v.get("tool_input")).unwrap_or(&null);
    unambiguous(args, COMMAND_KEYS)?;
    unambiguous(args, PATH_KEYS)?;
    unambiguous(args, &["path", "dir"])?;
    let mut aspects = vec![Aspect::Tool(tool.clone())];
    let t = tool.as_str();
    let missing = |field| CallError::MissingArgument { tool: tool.clone(), field };
    // A command in a form we cannot read is refused whatever the tool.
    let command = command_line(t, args)?;
    let is_command = judged_as_command(t, command.is_some());
    let payload_cwd = string_arg(v, &["cwd"]);
    let runs_in = if is_command { command_cwd(t, args, payload_cwd)? } else { None };
    if is_command {
        let command = command.as_deref().ok_or_else(|| missing("command"))?;
        for seg in shell::parse(command) {
            match seg.command {
                // Secret values are never pinned or stored: they are `***` and a hash of the word.
                Some(c) => aspects.push(Aspect::Command(CommandUse { args: redact_words(&c.head, &c.args), ..c })),
                None => aspects.push(Aspect::Opaque(seg.text)),
            }
            aspects.extend(seg.reads.into_iter().map(Aspect::Read));
            aspects.extend(seg.writes.into_iter().map(Aspect::Write));
            aspects.extend(seg.hosts.into_iter().map(Aspect::Host));
        }
    } else if READ_TOOLS.contains(&t) {
        let p = string_arg(args, PATH_KEYS).ok_or_else(|| missing("path"))?;
        aspects.push(Aspect::Read(p.to_owned()));
    } else if WRITE_TOOLS.contains(&t) {
        let p = string_arg(args, PATH_KEYS).ok_or_else(|| missing("path"))?;
        aspects.push(Aspect::Write(p.to_owned()));
    } else if LIST_TOOLS.contains(&t) {
        aspects.push(Aspect::Read(string_arg(args, &["path", "dir"]).unwrap_or(".").to_owned()));
    } else if SEARCH_TOOLS.contains(&t) {
        let dir = string_arg(args, &["path", "dir"]).unwrap_or(".");
        aspects.push(Aspect::Read(recursive(dir)));
        if GLOB_TOOLS.contains(&t) {
            match args.get("pattern") {
                None => {}
                Some(Value::String(pattern)) => aspects.push(Aspect::Read(glob_subject(t, pattern, dir)?)),
                Some(_) => return Err(CallError::NotText { tool: tool.clone(), field: "pattern" }),
            }
        }
    } else if FETCH_TOOLS.contains(&t) {
        let url = string_arg(args, &["url"]).ok_or_else(|| missing("url"))?;
        // A URL we cannot read a host from is judged by its text (it matches no host rule).
        aspects.push(Aspect::Host(shell::url_host(url).unwrap_or_else(|| url.to_owned())));
    } else if !known_tool(t) {
        // Any other tool (MCP, plugins) is judged by its name, and by what it names: a
        // URL's host, and a path as a write (it may write; a write rule also allows reads).
        if let Some(url) = string_arg(args, &["url", "uri"]) {
            aspects.push(Aspect::Host(shell::url_host(url).unwrap_or_else(|| url.to_owned())));
        }
        if let Some(p) = string_arg(args, PATH_KEYS) {
            aspects.push(Aspect::Write(p.to_owned()));
        }
    }
    // A command is shown as the line it runs (so `redact` reads its words, whatever
    // form it came in), followed by the other arguments, if any.
    let shown = match (args, command.filter(|_| is_command)) {
        (Value::Object(m), Some(line)) => {
            let rest: serde_json::Map<String, Value> = m
                .iter()
                .filter(|(k, _)| !COMMAND_KEYS.contains(&k.as_str()) && k.as_str() != "args")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if rest.is_empty() { line } else { format!("{line} {}", Value::Object(rest)) }
        }
        (Value::Null, _) => String::new(),
        (other, _) => other.to_string(),
    };
    Ok(ToolCall {
        tool,
        shown,
        aspects,
        session: string_arg(v, &["session_id"]).map(str::to_owned),
        cwd: payload_cwd.map(str::to_owned),
        runs_in,
        run: string_arg(v, &["run"]).map(str::to_owned),
    })
}

/// Makes `path` relative to `workdir` when it lies inside it, and removes `.` and `..`
/// lexically. Paths outside stay absolute; `..` never climbs above the start.
pub fn normalize_path(path: &str, workdir: &str) -> String {
    let joined =
        if path.starts_with('/') || workdir.is_empty() { path.to_owned() } else { format!("{workdir}/{path}") };
    let absolute = joined.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            // `..` never climbs above the start: above a relative start it is kept.
            ".." => match parts.last() {
                Some(&"..") | None if !absolute => parts.push(".."),
                _ => {
                    parts.pop();
                }
            },
            p => parts.push(p),
        }
    }
    let normal = if absolute { format!("/{}", parts.join("/")) } else { parts.join("/") };
    let root = workdir.trim_end_matches('/');
    if !root.is_empty() {
        if normal == root {
            return ".".to_owned();
        }
        if let Some(rest) = normal.strip_prefix(root).and_then(|r| r.strip_prefix('/')) {
            return rest.to_owned();
        }
    }
    normal
}

impl ToolCall {
    /// The call with every path resolved against where it runs (the command's own working
    /// directory, else the payload's `cwd`), then made relative to `workdir` (see
    /// [`normalize_path`]); without either, relative paths are the workdir's.
    pub fn relative_to(mut self, workdir: &str) -> ToolCall {
        let cwd = self.runs_in.clone().or_else(|| self.cwd.clone()).filter(|c| !c.is_empty());
        for a in &mut self.aspects {
            if let Aspect::Read(p) | Aspect::Write(p) = a {
                // `/**` is below `/`, absolutely: its directory is `/`, not the empty
                // (relative) path, which would make it the workdir's `**`.
                let recursive_dir = p
                    .strip_suffix("/**")
                    .map(|d| if d.is_empty() { "/".to_owned() } else { d.to_owned() })
                    .or((p == "**").then(|| ".".to_owned()));
                let at = |path: &str| match &cwd {
                    Some(c) if !path.starts_with('/') => normalize_path(&format!("{c}/{path}"), workdir),
                    _ => normalize_path(path, workdir),
                };
                *p = match recursive_dir {
                    Some(d) => recursive(&at(&d)),
                    None => at(p),
                };
            }
        }
        self
    }
}

#[cfg(test)]
mod tests;
