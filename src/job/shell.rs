//! Shell command lines, read the way a shell reads them: a quote-aware lexer (single and
//! double quotes, backslash escapes, `$(…)` and backticks, operators, redirects), then
//! each pipeline or list segment reduced to what a command rule is about: the command
//! head plus subcommand word, its flags, the environment names it sets, and the files its
//! redirects touch. Segments it refuses to reason about (`bash -c`, `eval`, command
//! substitution, `xargs`, `find -exec`, subshells, here-documents) are *opaque*: only an
//! `=exact text` rule allows them.
//!
//! Hand-written because the word-splitting crates (shlex, shell-words) drop the one thing
//! the rules need: which characters were operators and which were quoted.

/// Most bytes of one command line we analyse; a longer one is opaque as a whole.
pub const COMMAND_BYTES_MAX: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word {
        text: String,
        substitution: bool,
    },
    /// `|`, `||`, `&&`, `;`, `&`, `|&`, newline, comment: the byte range it spans.
    Separator(usize, usize),
    /// `>`, `>>`, `<`, `&>`, `2>` … with the fd-duplication forms flagged.
    Redirect {
        write: bool,
        dup: bool,
    },
    /// `(`, `)`, `<<`, or anything else that makes the line opaque.
    Opaque,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segment {
    /// The segment as written (trimmed), for `=exact` rules and drift records.
    pub text: String,
    /// `None` for an opaque segment.
    pub command: Option<CommandUse>,
    /// Files written by redirects (`>`, `>>`, `&>`).
    pub writes: Vec<String>,
    /// Files read by redirects (`<`).
    pub reads: Vec<String>,
    /// Hosts of `http(s)://` URLs among the arguments.
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
}

/// Commands whose first non-flag word is a subcommand that changes what they do.
const SUBCOMMAND_HEADS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "cargo",
    "docker",
    "gh",
    "git",
    "go",
    "helm",
    "kubectl",
    "make",
    "nix",
    "npm",
    "pip",
    "pip3",
    "pnpm",
    "poetry",
    "rustup",
    "systemctl",
    "terraform",
    "uv",
    "yarn",
];

/// Heads that run code given as an argument or read from elsewhere.
const OPAQUE_HEADS: &[&str] = &["eval", "source", ".", "exec", "xargs", "command", "builtin", "trap"];
/// Interpreters that are opaque when given code inline (`-c`, `-e`).
const INTERPRETERS: &[&str] =
    &["bash", "sh", "zsh", "dash", "ksh", "fish", "python", "python3", "perl", "ruby", "node", "deno", "php"];

fn lex(line: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = line.char_indices().map(|(i, c)| (c, i)).peekable();
    let mut word = String::new();
    let mut in_word = false;
    let mut substitution = false;
    macro_rules! end_word {
        () => {
            if in_word {
                tokens.push(Token::Word { text: std::mem::take(&mut word), substitution });
                in_word = false;
                substitution = false;
            }
        };
    }
    while let Some((c, at)) = chars.next() {
        let after = |chars: &mut std::iter::Peekable<_>| -> usize {
            let next: Option<&(char, usize)> = std::iter::Peekable::peek(chars);
            next.map_or(line.len(), |(_, i)| *i)
        };
        match c {
            ' ' | '\t' => end_word!(),
            '\n' | ';' => {
                end_word!();
                tokens.push(Token::Separator(at, after(&mut chars)));
            }
            '|' => {
                end_word!();
                if matches!(chars.peek(), Some(('|' | '&', _))) {
                    chars.next();
                }
                tokens.push(Token::Separator(at, after(&mut chars)));
            }
            '&' => {
                end_word!();
                match chars.peek().map(|(c, _)| *c) {
                    Some('&') => {
                        chars.next();
                        tokens.push(Token::Separator(at, after(&mut chars)));
                    }
                    Some('>') => {
                        chars.next();
                        if chars.peek().is_some_and(|(c, _)| *c == '>') {
                            chars.next();
                        }
                        tokens.push(Token::Redirect { write: true, dup: false });
                    }
                    _ => tokens.push(Token::Separator(at, after(&mut chars))),
                }
            }
            '>' | '<' => {
                // A word of digits right before is the fd (`2>`), not an argument.
                if in_word && word.bytes().all(|b| b.is_ascii_digit()) && !substitution {
                    word.clear();
                    in_word = false;
                }
                end_word!();
                let write = c == '>';
                match chars.peek().map(|(c, _)| *c) {
                    Some('>') if write => {
                        chars.next();
                        tokens.push(Token::Redirect { write, dup: false });
                    }
                    Some('<') if !write => return Some(vec![Token::Opaque]), // here-document
                    Some('&') => {
                        chars.next();
                        tokens.push(Token::Redirect { write, dup: true });
                    }
                    Some('(') => return Some(vec![Token::Opaque]), // process substitution
                    _ => tokens.push(Token::Redirect { write, dup: false }),
                }
            }
            '(' | ')' | '{' | '}' if !in_word => return Some(vec![Token::Opaque]),
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()?.0 {
                        '\'' => break,
                        ch => word.push(ch),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()?.0 {
                        '"' => break,
                        '\\' => match chars.next()?.0 {
                            ch @ ('"' | '\\' | '$' | '`') => word.push(ch),
                            '\n' => {}
                            ch => {
                                word.push('\\');
                                word.push(ch);
                            }
                        },
                        '`' => {
                            substitution = true;
                            word.push('`');
                        }
                        '$' if chars.peek().is_some_and(|(c, _)| *c == '(') => {
                            substitution = true;
                            word.push('$');
                        }
                        ch => word.push(ch),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next().map(|(c, _)| c) {
                    Some('\n') | None => {}
                    Some(ch) => word.push(ch),
                }
            }
            '`' => {
                in_word = true;
                substitution = true;
                word.push('`');
            }
            '$' if chars.peek().is_some_and(|(c, _)| *c == '(') => {
                in_word = true;
                substitution = true;
                word.push('$');
            }
            // A comment runs to the end of the line.
            '#' if !in_word => {
                tokens.push(Token::Separator(at, line.len()));
                break;
            }
            ch => {
                in_word = true;
                word.push(ch);
            }
        }
    }
    if in_word {
        tokens.push(Token::Word { text: word, substitution });
    }
    Some(tokens)
}

/// Splits a command line into segments and analyses each. An unbalanced quote, a
/// subshell, a here-document or an over-long line makes the whole line one opaque segment.
pub fn parse(line: &str) -> Vec<Segment> {
    let trimmed = line.trim();
    let opaque_all = || vec![Segment { text: trimmed.to_owned(), ..Segment::default() }];
    if trimmed.len() > COMMAND_BYTES_MAX {
        return opaque_all();
    }
    let Some(tokens) = lex(trimmed) else { return opaque_all() };
    if tokens.contains(&Token::Opaque) {
        return opaque_all();
    }
    let mut segments = Vec::new();
    let mut current: Vec<Token> = Vec::new();
    let mut start = 0usize;
    for token in tokens.into_iter().chain(std::iter::once(Token::Separator(trimmed.len(), trimmed.len()))) {
        if let Token::Separator(at, end) = token {
            let text = trimmed.get(start..at).unwrap_or_default().trim().to_owned();
            start = end;
            if !current.is_empty() {
                segments.push(analyse(std::mem::take(&mut current), text));
            }
        } else {
            current.push(token);
        }
    }
    segments
}

fn is_assignment(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes().first().is_some_and(u8::is_ascii_digit);
    ok.then_some(name)
}

fn analyse(tokens: Vec<Token>, text: String) -> Segment {
    let mut seg = Segment { text, ..Segment::default() };
    let mut words: Vec<String> = Vec::new();
    let mut opaque = false;
    let mut iter = tokens.into_iter();
    while let Some(t) = iter.next() {
        match t {
            Token::Word { text, substitution } => {
                opaque |= substitution;
                words.push(text);
            }
            Token::Redirect { write, dup } => {
                let target = match iter.next() {
                    Some(Token::Word { text, substitution }) => {
                        opaque |= substitution;
                        text
                    }
                    _ => {
                        opaque = true;
                        continue;
                    }
                };
                // `2>&1`, `>&2`: fd duplication, no file.
                if dup && target.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
                    continue;
                }
                if write { seg.writes.push(target) } else { seg.reads.push(target) }
            }
            Token::Separator(..) | Token::Opaque => opaque = true,
        }
    }
    for w in &words {
        if let Some(host) = url_host(w) {
            seg.hosts.push(host);
        }
    }
    if opaque {
        return seg;
    }
    // Unwrap `NAME=value` prefixes and `env [NAME=value]... cmd`.
    let mut env = Vec::new();
    let mut rest = words.as_slice();
    loop {
        match rest.split_first() {
            Some((w, tail)) if is_assignment(w).is_some() => {
                env.extend(is_assignment(w).map(str::to_owned));
                rest = tail;
            }
            Some((w, tail)) if w == "env" => {
                // `env -i`, `env -u NAME`, `env -S`: not reasoned about.
                if tail.first().is_some_and(|t| t.starts_with('-')) {
                    return seg;
                }
                rest = tail;
            }
            _ => break,
        }
    }
    let Some((head, args)) = rest.split_first() else {
        // Only assignments: they set shell variables; nothing runs.
        return seg;
    };
    if head.contains('$') || OPAQUE_HEADS.contains(&head.as_str()) {
        return seg;
    }
    let inline_code = |a: &String| matches!(a.as_str(), "-c" | "-e" | "--eval" | "-E" | "--command");
    if INTERPRETERS.contains(&base_name(head)) && args.iter().any(inline_code) {
        return seg;
    }
    if head == "find" && args.iter().any(|a| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete"))
    {
        return seg;
    }
    let mut flags = Vec::new();
    let mut subcommand = None;
    let mut after_double_dash = false;
    let mut skip_value = false;
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        if after_double_dash {
            continue;
        }
        if a == "--" {
            after_double_dash = true;
        } else if a.starts_with('-') && a.len() > 1 {
            let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
            flags.push(flag.to_owned());
            // git's global `-C dir` / `-c key=value` come before the subcommand.
            skip_value = head == "git" && subcommand.is_none() && matches!(a.as_str(), "-C" | "-c");
        } else if subcommand.is_none() && SUBCOMMAND_HEADS.contains(&head.as_str()) {
            subcommand = Some(a.clone());
        }
    }
    flags.sort();
    flags.dedup();
    env.sort();
    env.dedup();
    seg.command = Some(CommandUse { head: head.clone(), subcommand, flags, env });
    seg
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The lower-cased host of an `http://` or `https://` URL.
pub fn url_host(text: &str) -> Option<String> {
    let lower = text.get(..8).map(str::to_ascii_lowercase).unwrap_or_default();
    let rest = if lower.starts_with("https://") {
        text.get(8..)?
    } else if lower.starts_with("http://") {
        text.get(7..)?
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host =
        if let Some(v6) = host_port.strip_prefix('[') { v6.split(']').next()? } else { host_port.split(':').next()? };
    let host = host.to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

impl CommandUse {
    /// The rule text that allows exactly this use: `[NAME=* ...] head [sub] [flags...]`.
    pub fn rule(&self) -> String {
        let mut parts: Vec<String> = self.env.iter().map(|e| format!("{e}=*")).collect();
        parts.push(self.head.clone());
        parts.extend(self.subcommand.clone());
        parts.extend(self.flags.iter().cloned());
        parts.join(" ")
    }
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
            ("grep -r -n TODO src", &["grep -n -r"]),
            ("ls", &["ls"]),
            ("git -C repo status", &["git status -C"]),
            ("git commit -m 'fix: a | b; c'", &["git commit -m"]),
            ("echo \"a && b\" && ls -la", &["echo", "ls -la"]),
            ("cat a.txt | grep -v x | wc -l", &["cat", "grep -v", "wc -l"]),
            ("make test; make lint", &["make test", "make lint"]),
            ("true || false", &["true", "false"]),
            ("env CI=1 RUST_LOG=debug cargo test --release", &["CI=* RUST_LOG=* cargo test --release"]),
            ("FOO=bar ./run.sh", &["FOO=* ./run.sh"]),
            ("cargo build --message-format=json", &["cargo build --message-format"]),
            ("pytest -q > reports/out.txt 2>&1", &["pytest -q >reports/out.txt"]),
            ("sort < in.txt >> out.txt", &["sort >out.txt <in.txt"]),
            ("cmd &> all.log", &["cmd >all.log"]),
            ("grep x file 2>/dev/null", &["grep >/dev/null"]),
            ("bash -c 'make test'", &["=bash -c 'make test'"]),
            ("sh -c \"rm -rf /\"", &["=sh -c \"rm -rf /\""]),
            ("python3 -c 'import os'", &["=python3 -c 'import os'"]),
            ("echo $(whoami)", &["=echo $(whoami)"]),
            ("echo `id`", &["=echo `id`"]),
            ("echo \"$(id)\"", &["=echo \"$(id)\""]),
            ("eval \"$CMD\"", &["=eval \"$CMD\""]),
            ("ls | xargs rm", &["ls", "=xargs rm"]),
            ("find . -name '*.py' -exec rm {} +", &["=find . -name '*.py' -exec rm {} +"]),
            ("find . -name '*.py'", &["find -name"]),
            ("(cd src && ls)", &["=(cd src && ls)"]),
            ("cat <<EOF", &["=cat <<EOF"]),
            ("echo 'unterminated", &["=echo 'unterminated"]),
            ("curl -s https://api.example.com/v1?x=1 -o out.json", &["curl -o -s @api.example.com"]),
            ("wget http://User:pw@Mirror.Example.org:8080/x", &["wget @mirror.example.org"]),
            ("echo hi # > not-a-file", &["echo"]),
            ("echo a\\ b 'c d' \"e\\\"f\"", &["echo"]),
            ("$EDITOR file", &["=$EDITOR file"]),
            ("env -i ls", &["=env -i ls"]),
            ("X=1", &["=X=1"]),
            ("sleep 1 &", &["sleep"]),
            ("ls\ncat x", &["ls", "cat"]),
            ("docker compose up -d", &["docker compose -d"]),
            ("cat <(ls)", &["=cat <(ls)"]),
        ];
        for (line, want) in cases {
            assert_eq!(shape(line), want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "line: {line}");
        }
    }

    #[test]
    fn hosts_from_urls() {
        assert_eq!(url_host("https://a.b/c"), Some("a.b".into()));
        assert_eq!(url_host("HTTP://[::1]:80/"), Some("::1".into()));
        assert_eq!(url_host("ftp://x"), None);
        assert_eq!(url_host("https://"), None);
    }
}
