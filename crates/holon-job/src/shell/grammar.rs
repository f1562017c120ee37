//! Step 1 of shell analysis: the command line parsed with a real Bash grammar
//! (tree-sitter-bash), then reduced to *units*: plain simple commands whose every word is
//! a literal, or opaque units kept as their source text.
//!
//! This is a whitelist (the approach of OpenAI's Codex CLI `bash.rs`): a simple command
//! is plain only when every word is an unquoted word of safe characters, a single-quoted
//! string, a double-quoted string without expansions, or a concatenation of those; every
//! assignment value likewise; every redirect a plain `<`, `>`, `>>`, `&>`, `&>>`, `>|`,
//! `<>` or fd duplication to a plain word. Statements are joined only by `;`, `&`,
//! newlines, `&&`, `||`, `|` and `|&`. Anything else (any `$`, backtick, `~`, glob or
//! brace character, ANSI-C quoting, arithmetic, subshells, groups, control flow,
//! functions, declarations, here-documents, process substitution, negation, a parse
//! error) makes its statement opaque; a parse error, a here-document or an over-deep tree
//! makes the whole line opaque.

use tree_sitter::{Node, Parser};

/// Deepest syntax tree walked; a deeper one makes the whole line opaque.
pub const TREE_DEPTH_MAX: usize = 64;

pub use super::words::Redirect;

/// A statement of the line, reduced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit {
    /// A simple command of literal words.
    Plain {
        text: String,
        /// `NAME` of each `NAME=value` prefix.
        env: Vec<String>,
        words: Vec<String>,
        redirects: Vec<Redirect>,
    },
    /// Anything the whitelist does not accept, as written.
    Opaque { text: String },
    /// Commands joined by `|`: data flows from one to the next, so one that cannot be
    /// judged makes the whole pipeline opaque (`echo /etc | xargs rm`).
    Pipeline { text: String, units: Vec<Unit> },
}

/// Parses `line` into units, in order. `None` when the whole line must be opaque.
pub fn units(line: &str) -> Option<Vec<Unit>> {
    // Characters the grammar and Bash split differently: tree-sitter takes a vertical tab,
    // form feed or carriage return for a blank (so a `#` after one starts a comment that
    // hides the rest of the line) and a backslash-newline for a word break, where Bash
    // keeps them inside the word. A line holding any of them is not reasoned about.
    if line.chars().any(|c| c.is_control() && c != '\n' && c != '\t') || line.contains("\\\n") {
        return None;
    }
    let mut parser = Parser::new();
    parser.set_language(&tree_sitter_bash::LANGUAGE.into()).ok()?;
    let tree = parser.parse(line, None)?;
    let root = tree.root_node();
    if root.has_error() || root.kind() != "program" {
        return None;
    }
    let mut out = Vec::new();
    let mut spans = Vec::new();
    let mut cursor = root.walk();
    for child in root.children(&mut cursor) {
        statement(child, line, 0, &mut out, &mut spans)?;
    }
    agrees(line, &out, &spans).then_some(out)
}

/// Where one leaf unit stands in the line, and whether it is plain.
type Span = (usize, usize);

/// Whether Bash's own word splitting ([`super::words`]) agrees with the units: the text
/// around them is only blanks, separators and comments, and every plain command's text
/// splits into the same words, assignments and redirects.
fn agrees(line: &str, units: &[Unit], spans: &[Span]) -> bool {
    let mut plain = Vec::new();
    fn leaves<'a>(units: &'a [Unit], out: &mut Vec<&'a Unit>) {
        for u in units {
            match u {
                Unit::Pipeline { units, .. } => leaves(units, out),
                other => out.push(other),
            }
        }
    }
    leaves(units, &mut plain);
    if plain.len() != spans.len() {
        return false;
    }
    let mut at = 0;
    for (unit, (start, end)) in plain.iter().zip(spans) {
        if *start < at || !super::words::gap_ok(line, at, *start) {
            return false;
        }
        at = *end;
        if let Unit::Plain { env, words, redirects, .. } = unit {
            let Some(text) = line.get(*start..*end) else { return false };
            match super::words::lex(text) {
                Some(l) if &l.env == env && &l.words == words && &l.redirects == redirects => {}
                _ => return false,
            }
        }
    }
    super::words::gap_ok(line, at, line.len())
}

fn text<'a>(node: Node, src: &'a str) -> &'a str {
    src.get(node.start_byte()..node.end_byte()).unwrap_or_default()
}

fn opaque(node: Node, src: &str, out: &mut Vec<Unit>, spans: &mut Vec<Span>) {
    out.push(Unit::Opaque { text: text(node, src).trim().to_owned() });
    spans.push((node.start_byte(), node.end_byte()));
}

/// One statement (or a separator between statements). `None`: the whole line is opaque.
fn statement(node: Node, src: &str, depth: usize, out: &mut Vec<Unit>, spans: &mut Vec<Span>) -> Option<()> {
    if depth > TREE_DEPTH_MAX {
        return None;
    }
    match node.kind() {
        // Separators and comments run nothing.
        ";" | "&" | "\n" | "&&" | "||" | "|" | "|&" | "comment" => {}
        // A here-document's body is text that a desynchronised reader would take for
        // commands: never reason about a line that has one.
        "heredoc_redirect" | "heredoc_body" | "heredoc_start" | "heredoc_end" => return None,
        "list" => {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                statement(child, src, depth + 1, out, spans)?;
            }
        }
        "pipeline" => {
            let mut units = Vec::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                statement(child, src, depth + 1, &mut units, spans)?;
            }
            out.push(Unit::Pipeline { text: text(node, src).trim().to_owned(), units });
        }
        "command" => {
            out.push(
                command(node, src, &[]).unwrap_or_else(|| Unit::Opaque { text: text(node, src).trim().to_owned() }),
            );
            spans.push((node.start_byte(), node.end_byte()));
        }
        "redirected_statement" => {
            let body = node.child_by_field_name("body");
            let mut redirects = Vec::new();
            let mut plain = body.is_some_and(|b| b.kind() == "command");
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                if Some(child) == body {
                    continue;
                }
                if has_heredoc(child, 0) {
                    return None;
                }
                match redirect(child, src) {
                    Some(r) => redirects.push(r),
                    None => plain = false,
                }
            }
            let unit = match body {
                Some(b) if plain => command(b, src, &redirects),
                _ => None,
            };
            // The statement's own text, redirects included, is what an exact rule names.
            out.push(match unit {
                Some(Unit::Plain { env, words, redirects, .. }) => {
                    Unit::Plain { text: text(node, src).trim().to_owned(), env, words, redirects }
                }
                _ => Unit::Opaque { text: text(node, src).trim().to_owned() },
            });
            spans.push((node.start_byte(), node.end_byte()));
        }
        _ => {
            if has_heredoc(node, 0) {
                return None;
            }
            opaque(node, src, out, spans);
        }
    }
    Some(())
}

fn has_heredoc(node: Node, depth: usize) -> bool {
    if depth > TREE_DEPTH_MAX || node.kind().starts_with("heredoc") {
        return true;
    }
    let mut cursor = node.walk();
    node.children(&mut cursor).any(|c| has_heredoc(c, depth + 1))
}

/// A plain simple command, or `None` when any part is outside the whitelist.
fn command(node: Node, src: &str, outer: &[Redirect]) -> Option<Unit> {
    let mut env = Vec::new();
    let mut words = Vec::new();
    let mut redirects = outer.to_vec();
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        match child.kind() {
            "variable_assignment" => env.push(assignment(child, src)?),
            "command_name" => {
                let name = child.named_child(0)?;
                if child.named_child_count() != 1 {
                    return None;
                }
                words.push(literal(name, src, 0)?);
            }
            "file_redirect" => redirects.push(redirect(child, src)?),
            _ if child.is_named() => words.push(literal(child, src, 0)?),
            _ => return None,
        }
    }
    if words.is_empty() {
        return None;
    }
    Some(Unit::Plain { text: text(node, src).trim().to_owned(), env, words, redirects })
}

/// `NAME=plain-value` → `NAME`.
fn assignment(node: Node, src: &str) -> Option<String> {
    let mut name = None;
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        match child.kind() {
            "variable_name" => name = Some(text(child, src).to_owned()),
            "=" => {}
            _ if child.is_named() => {
                literal(child, src, 0)?;
            }
            _ => return None, // `+=`, subscripts, arrays
        }
    }
    let name = name?;
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes().first().is_some_and(u8::is_ascii_digit);
    ok.then_some(name)
}

fn redirect(node: Node, src: &str) -> Option<Redirect> {
    if node.kind() != "file_redirect" {
        return None;
    }
    let mut op = None;
    let mut target = None;
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        match child.kind() {
            "file_descriptor" => {
                if !text(child, src).bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
            }
            k @ (">" | ">>" | "<" | "&>" | "&>>" | ">|" | "<>" | ">&" | "<&" | ">&-" | "<&-") => op = Some(k),
            _ if child.is_named() => {
                if target.is_some() {
                    return None;
                }
                target = Some(literal(child, src, 0)?);
            }
            _ => return None,
        }
    }
    let op = op?;
    let read = matches!(op, "<" | "<>" | "<&");
    let write = !matches!(op, "<" | "<&");
    let target = match (op, target) {
        (">&-" | "<&-", None) => None,
        // Duplicating or closing a descriptor opens no file.
        (">&" | "<&", Some(t)) if t == "-" || t.bytes().all(|b| b.is_ascii_digit()) => None,
        (_, Some(t)) => Some(t),
        (_, None) => return None,
    };
    Some(Redirect { read, write, target })
}

/// Characters an unquoted word may hold without Bash expanding it into something else.
fn safe_unquoted(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ',' | ':' | '=' | '@' | '%' | '+' | '^') || {
        // Other letters, but no spacing, control or bidirectional-format character that a
        // reader and a shell could split or show differently.
        !c.is_ascii()
            && !c.is_control()
            && !c.is_whitespace()
            && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    }
}

/// The literal value of a word-like node, or `None` when Bash would expand it.
fn literal(node: Node, src: &str, depth: usize) -> Option<String> {
    if depth > TREE_DEPTH_MAX {
        return None;
    }
    let raw = text(node, src);
    match node.kind() {
        "word" | "number" => unescape_unquoted(raw),
        "raw_string" => {
            let inner = raw.strip_prefix('\'')?.strip_suffix('\'')?;
            (!inner.chars().any(|c| c.is_control() && c != '\n' && c != '\t')).then(|| inner.to_owned())
        }
        "string" => {
            let mut value = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                match child.kind() {
                    "\"" => {}
                    "string_content" => value.push_str(&unescape_double(text(child, src))?),
                    _ => return None,
                }
            }
            Some(value)
        }
        "concatenation" => {
            let mut value = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                value.push_str(&literal(child, src, depth + 1)?);
            }
            Some(value)
        }
        _ => None,
    }
}

fn unescape_unquoted(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if e.is_ascii_graphic() || e == ' ' => out.push(e),
                _ => return None,
            },
            c if safe_unquoted(c) => out.push(c),
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Inside double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and a newline.
fn unescape_double(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek().copied() {
                Some(e @ ('$' | '`' | '"' | '\\')) => {
                    chars.next();
                    out.push(e);
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            },
            // An expansion the grammar did not mark is still an expansion.
            '$' | '`' => return None,
            c if c.is_control() && c != '\n' && c != '\t' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}
