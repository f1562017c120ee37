//! The words of a command rule: plain words separated by spaces, or JSON-quoted words
//! (`"rm -rf -*"` is one word, never the any-flags wildcard `-*`). A word is quoted when
//! it is empty, holds a space, a quote, a backslash or a control character, or could be
//! read as rule syntax (`*`, `**`, `-*`, `--`, `NAME=*`, a leading `=`).

/// One word of a rule, with whether it was quoted (a quoted word is always literal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleWord {
    pub text: String,
    pub quoted: bool,
}

fn needs_quotes(w: &str) -> bool {
    w.is_empty()
        || w.starts_with('"')
        || w.chars().any(|c| c.is_whitespace() || c.is_control() || c == '\\')
        || matches!(w, "*" | "**" | "-*" | "--")
        || w.ends_with("=*")
}

fn json(w: &str) -> String {
    serde_json::to_string(w).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A flag or subcommand word.
pub(super) fn quote_word(w: &str) -> String {
    if needs_quotes(w) { json(w) } else { w.to_owned() }
}

/// The head: also quoted when it starts with `=` (an exact rule) .
pub(super) fn quote_head(w: &str) -> String {
    if needs_quotes(w) || w.starts_with('=') { json(w) } else { w.to_owned() }
}

/// A pinned argument.
pub(super) fn quote_arg(w: &str) -> String {
    quote_word(w)
}

/// The shape of a command rule, told with every error about one.
pub const RULE_SHAPE: &str = "a rule is `[NAME=* ...] command [subcommand] [-flags...] [-- arguments...]`, `-*` for any flags, `*`/`**` for any argument(s), or `=exact text`";

/// Why a command rule cannot be read; each names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("`{rule}`: a quoted word is not closed")]
    UnclosedQuote { rule: String },
    #[error("`{rule}`: bad quoted word {word}: {message}")]
    BadQuotedWord { rule: String, word: String, message: String },
    #[error("`{rule}`: a space must follow a quoted word")]
    NoSpaceAfterQuote { rule: String },
    #[error("`{rule}` names no command")]
    NoCommand { rule: String },
    #[error("`{rule}`: `**` must be the last argument")]
    RestNotLast { rule: String },
    #[error("`{rule}`: `{word}` is neither a flag nor the subcommand; {RULE_SHAPE}")]
    Misplaced { rule: String, word: String },
}

/// Splits a rule into words. `Err` names what is wrong.
pub fn rule_words(rule: &str) -> Result<Vec<RuleWord>, RuleError> {
    let mut words = Vec::new();
    let mut rest = rule.trim_start();
    while !rest.is_empty() {
        if rest.starts_with('"') {
            // The closing quote: the first `"` not escaped by a backslash.
            let bytes = rest.as_bytes();
            let mut end = None;
            let mut i = 1;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'\\' => i += 2,
                    b'"' => {
                        end = Some(i);
                        break;
                    }
                    _ => i += 1,
                }
            }
            let end = end.ok_or_else(|| RuleError::UnclosedQuote { rule: rule.to_owned() })?;
            let quoted = rest.get(..=end).unwrap_or_default();
            let text: String = serde_json::from_str(quoted).map_err(|e| RuleError::BadQuotedWord {
                rule: rule.to_owned(),
                word: quoted.to_owned(),
                message: e.to_string(),
            })?;
            words.push(RuleWord { text, quoted: true });
            rest = rest.get(end + 1..).unwrap_or_default();
            if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
                return Err(RuleError::NoSpaceAfterQuote { rule: rule.to_owned() });
            }
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let word = rest.get(..end).unwrap_or_default();
            words.push(RuleWord { text: word.to_owned(), quoted: false });
            rest = rest.get(end..).unwrap_or_default();
        }
        rest = rest.trim_start();
    }
    Ok(words)
}
