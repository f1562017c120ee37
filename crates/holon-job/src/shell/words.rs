//! A second reading of the line, the way Bash splits it into words, for the small subset
//! a plain command may use (literal words, quotes, escapes, redirects, separators and
//! comments). The grammar's units are kept only when this reading agrees with them byte
//! for byte: the text between statements is only blanks, separators and comments as Bash
//! reads them, and every plain command's text gives the same words, assignments and
//! redirects. Where they disagree (a backslash-escaped blank before `#`, which the grammar
//! takes for a blank and Bash keeps in the word) the whole line is opaque.
//! `tests/bash_differential.rs` holds both readings to Bash itself.

/// One redirect of a plain command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub read: bool,
    pub write: bool,
    /// The file; `None` for an fd duplication or close (`2>&1`, `>&-`).
    pub target: Option<String>,
}

/// A plain command as Bash splits it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Lexed {
    pub env: Vec<String>,
    pub words: Vec<String>,
    pub redirects: Vec<Redirect>,
}

/// Characters an unquoted word may hold (the grammar's whitelist, restated here on purpose:
/// two readings that share nothing).
fn plain_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '-' | '_' | '.' | '/' | ',' | ':' | '=' | '@' | '%' | '+' | '^')
        || (!c.is_ascii()
            && !c.is_control()
            && !c.is_whitespace()
            && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'))
}

/// One word: its value, and whether it began with an unquoted `NAME=` (an assignment
/// when it comes before the command name).
struct Word {
    value: String,
    assignment: Option<String>,
}

/// Reads one word starting at `chars`; `None` when it holds anything outside the subset.
fn word(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<Word> {
    let mut value = String::new();
    // The literal, unquoted prefix, to tell `NAME=value` from `"NAME=value"`.
    let mut unquoted_prefix = String::new();
    let mut quoted = false;
    while let Some(&c) = chars.peek() {
        match c {
            ' ' | '\t' | ';' | '&' | '|' | '<' | '>' | '\n' => break,
            '\\' => {
                chars.next();
                let e = chars.next()?;
                if e == '\n' || (e.is_control() && e != '\t') {
                    return None;
                }
                value.push(e);
                quoted = true;
            }
            '\'' => {
                chars.next();
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c if c.is_control() && c != '\n' && c != '\t' => return None,
                        c => value.push(c),
                    }
                }
                quoted = true;
            }
            '"' => {
                chars.next();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.peek().copied() {
                            Some(e @ ('$' | '`' | '"' | '\\')) => {
                                chars.next();
                                value.push(e);
                            }
                            Some('\n') => return None,
                            _ => value.push('\\'),
                        },
                        '$' | '`' => return None,
                        c if c.is_control() && c != '\n' && c != '\t' => return None,
                        c => value.push(c),
                    }
                }
                quoted = true;
            }
            '#' if value.is_empty() && !quoted => return None,
            c if plain_char(c) || (c == '#' && (!value.is_empty() || quoted)) => {
                chars.next();
                value.push(c);
                if !quoted {
                    unquoted_prefix.push(c);
                }
            }
            _ => return None,
        }
    }
    let assignment = unquoted_prefix.split_once('=').map(|(n, _)| n.to_owned()).filter(|n| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !n.as_bytes().first().is_some_and(u8::is_ascii_digit)
    });
    Some(Word { value, assignment })
}

/// A redirect operator at `chars` (after an optional fd number already read).
fn operator(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<&'static str> {
    let first = chars.next()?;
    let next = chars.peek().copied();
    let op = match (first, next) {
        ('<', Some('>')) => "<>",
        ('<', Some('&')) => "<&",
        ('<', Some('<')) => return None,
        ('<', _) => return Some("<"),
        ('>', Some('>')) => ">>",
        ('>', Some('|')) => ">|",
        ('>', Some('&')) => ">&",
        ('>', _) => return Some(">"),
        ('&', Some('>')) => {
            chars.next();
            return if chars.next_if_eq(&'>').is_some() { Some("&>>") } else { Some("&>") };
        }
        _ => return None,
    };
    chars.next();
    Some(op)
}

/// Bash's words, assignments and redirects for the text of one plain command.
pub(super) fn lex(text: &str) -> Option<Lexed> {
    let mut out = Lexed { env: Vec::new(), words: Vec::new(), redirects: Vec::new() };
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        let Some(&c) = chars.peek() else { break };
        if matches!(c, ';' | '|' | '\n') || (c == '&' && !text_has_redirect_after(&chars)) {
            return None;
        }
        let is_redirect = matches!(c, '<' | '>') || (c == '&' && text_has_redirect_after(&chars));
        let op = if is_redirect {
            operator(&mut chars)?
        } else {
            let w = word(&mut chars)?;
            // Digits directly before `<` or `>` are the redirect's descriptor.
            if matches!(chars.peek(), Some('<' | '>'))
                && w.value.bytes().all(|b| b.is_ascii_digit())
                && !w.value.is_empty()
            {
                operator(&mut chars)?
            } else {
                match w.assignment {
                    Some(name) if out.words.is_empty() => out.env.push(name),
                    _ => out.words.push(w.value),
                }
                continue;
            }
        };
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        let target = word(&mut chars)?.value;
        if target.is_empty() {
            return None;
        }
        let read = matches!(op, "<" | "<>" | "<&");
        let write = !matches!(op, "<" | "<&");
        let dup = matches!(op, ">&" | "<&") && (target == "-" || target.bytes().all(|b| b.is_ascii_digit()));
        out.redirects.push(Redirect { read, write, target: (!dup).then_some(target) });
    }
    (!out.words.is_empty()).then_some(out)
}

fn text_has_redirect_after(chars: &std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let mut ahead = chars.clone();
    ahead.next();
    ahead.peek() == Some(&'>')
}

/// Whether `gap` (the text of `line` from `start` to `end`, between two statements or at
/// either end) holds only what Bash reads as blanks, separators and comments. A `#`
/// starts a comment only at the start of a word: after the line's start, a blank, a
/// newline or a separator that is not escaped.
pub(super) fn gap_ok(line: &str, start: usize, end: usize) -> bool {
    let Some(gap) = line.get(start..end) else { return false };
    let mut previous = line.get(..start).and_then(|b| b.chars().last());
    let mut chars = gap.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | ';' | '&' | '|' => {}
            '#' if previous.is_none_or(|p| matches!(p, ' ' | '\t' | '\n' | ';' | '&' | '|')) => {
                // To the end of the line; the newline ends the comment.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                previous = Some('\n');
                continue;
            }
            _ => return false,
        }
        previous = Some(c);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(t: &str) -> Option<Vec<String>> {
        lex(t).map(|l| l.words)
    }

    #[test]
    fn words_as_bash_splits_them() {
        assert_eq!(
            words("ls a\\ b 'c d' \"e\\\"f\""),
            Some(vec!["ls".into(), "a b".into(), "c d".into(), "e\"f".into()])
        );
        assert_eq!(words("ls \\ #"), Some(vec!["ls".into(), " #".into()]));
        assert_eq!(words("echo a#b"), Some(vec!["echo".into(), "a#b".into()]));
        assert_eq!(words("ls $HOME"), None);
        assert_eq!(words("ls #c"), None);
        let l = lex("A=1 \"B=2\" x 2>&1 >out <in &>>all").unwrap();
        assert_eq!(l.env, ["A"]);
        assert_eq!(l.words, ["B=2", "x"]);
        assert_eq!(l.redirects.len(), 4);
        assert_eq!(l.redirects[0].target, None);
        assert_eq!(l.redirects[1].target.as_deref(), Some("out"));
        assert!(lex("cat <<EOF").is_none());
    }

    #[test]
    fn gaps_hold_only_separators_and_comments() {
        let line = "ls \\ #; rm -rf data";
        // The grammar's `ls` ends at byte 2; the rest it took for a comment.
        assert!(!gap_ok(line, 2, line.len()));
        assert!(gap_ok("ls # note\nrm", 2, 10));
        assert!(gap_ok("a;#x", 1, 4));
        assert!(!gap_ok("a#x", 1, 3));
    }
}
