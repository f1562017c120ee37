//! The one module that knows YAML. `serde_yaml` 0.9 is deprecated upstream: swapping the
//! parser means rewriting this file only. Everything above it sees `serde_json::Value`.
//!
//! Our own limits apply whatever the parser does (TIGER_STYLE: a limit on everything):
//! input size, nesting depth, node count (which also defuses alias "billion laughs"
//! bombs, since aliases are expanded into nodes), and no anchors or aliases at all in
//! permission documents — they are the bomb's only tool and a reviewer's blind spot.

use serde_json::{Map, Number, Value};
use serde_yaml::Value as Yaml;

use super::{DocError, Limits};

/// Parses YAML text into a JSON value, enforcing `limits`.
pub fn parse(text: &str, limits: &Limits) -> Result<Value, DocError> {
    if text.len() > limits.bytes_max {
        return Err(DocError::TooLarge { bytes: text.len(), bytes_max: limits.bytes_max });
    }
    if let Some(line) = find_anchor_or_alias(text) {
        return Err(DocError::Anchor { line });
    }
    // Before the parser sees the text: its work grows faster than linearly with flow
    // nesting (docs/PERFORMANCE.md, "Hostile input"), long before our depth check on
    // the parsed value could run.
    if let Some(line) = find_too_deep(text, limits.depth_max) {
        return Err(DocError::TooDeep { depth_max: limits.depth_max, line: Some(line) });
    }
    let yaml: Yaml = serde_yaml::from_str(text).map_err(|e| {
        let message = strip_location(&e.to_string());
        // The parser finds most duplicate keys itself: report them as ours.
        // The message may start with the mapping's path (`a: duplicate entry ...`).
        match message.split_once("duplicate entry with key ").map(|(_, key)| key) {
            Some(key) => {
                let key = key.trim_matches('"').to_owned();
                DocError::DuplicateKey { line: duplicate_line(text, &key), key }
            }
            None => DocError::Syntax {
                line: e.location().map(|l| l.line()),
                column: e.location().map(|l| l.column()),
                message,
            },
        }
    })?;
    let mut nodes = 0usize;
    to_json(&yaml, 0, &mut nodes, limits).map_err(|e| match e {
        DocError::DuplicateKey { key, line: None } => DocError::DuplicateKey { line: duplicate_line(text, &key), key },
        other => other,
    })
}

/// The line (1-based) of the second `key:` at one indentation: where a duplicate key most
/// likely is (the parser reports only the mapping's start). `None` when the text does not
/// show one plainly (a flow mapping, a quoted key written two ways).
fn duplicate_line(text: &str, key: &str) -> Option<usize> {
    let forms = [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")];
    let mut seen: Vec<usize> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let body = body.strip_prefix("- ").unwrap_or(body);
        if forms.iter().any(|f| body.starts_with(f.as_str())) {
            if seen.contains(&indent) {
                return Some(index + 1);
            }
            seen.push(indent);
        }
    }
    None
}

/// Writes a serializable value as YAML.
pub fn to_string<T: serde::Serialize>(value: &T) -> Result<String, DocError> {
    serde_yaml::to_string(value).map_err(|e| DocError::NotJson { what: e.to_string() })
}

/// The parser's message without its ` at line N column M` parts: the location is shown
/// once, in front (a message can hold two, `… at line 2 column 1, while parsing a flow
/// sequence at line 1 column 4`).
fn strip_location(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find(" at line ") {
        out.push_str(rest.get(..i).unwrap_or_default());
        let after = rest.get(i + " at line ".len()..).unwrap_or_default();
        let after = after.trim_start_matches(|c: char| c.is_ascii_digit());
        let after =
            after.strip_prefix(" column ").map_or(after, |a| a.trim_start_matches(|c: char| c.is_ascii_digit()));
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Finds an anchor (`&name`) or alias (`*name`) token outside quotes and comments.
/// A conservative lexical scan: a `&` or `*` that starts a plain scalar position.
fn find_anchor_or_alias(text: &str) -> Option<usize> {
    for (index, line) in text.lines().enumerate() {
        let mut in_single = false;
        let mut in_double = false;
        let mut prev: char = ' ';
        let mut escaped = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            let next_is_name = chars.peek().is_some_and(|n| !n.is_whitespace());
            if in_double {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_double = false;
                }
            } else if in_single {
                if c == '\'' {
                    in_single = false;
                }
            } else {
                match c {
                    '#' if prev.is_whitespace() => break,
                    '"' if is_token_start(prev) => in_double = true,
                    '\'' if is_token_start(prev) => in_single = true,
                    // `&name` / `*name`: a name must follow at once (`R & D` is text).
                    '&' | '*' if is_token_start(prev) && next_is_name => return Some(index + 1),
                    _ => {}
                }
            }
            prev = c;
        }
    }
    None
}

/// A lexical lower bound of the nesting depth, without parsing: flow brackets (`[`, `{`)
/// outside quotes and comments, the compact block indicators (`- - - x`) at the start
/// of a line, and the block indentation levels open around a line that starts a node
/// (a key or a sequence item: every deeper indentation is one more collection). Quotes may span lines; block scalars (`|`, `>`) are skipped. Returns the
/// line where the bound first exceeds `depth_max`. Never more than the real depth, so a
/// document within the limit is never refused here (the parsed value is checked again).
fn find_too_deep(text: &str, depth_max: usize) -> Option<usize> {
    let mut flow = 0usize;
    let (mut in_single, mut in_double) = (false, false);
    // Indentation of the line that opened a block scalar: deeper lines are its content.
    let mut block_scalar: Option<usize> = None;
    // Indentations of the block collections open around the current line.
    let mut indents: Vec<usize> = Vec::new();
    for (index, line) in text.split('\n').enumerate() {
        let indent = line.chars().take_while(|c| *c == ' ').count();
        if let Some(parent) = block_scalar {
            if line.trim().is_empty() || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        let body = line.trim_start_matches(' ');
        let starts_node = body.starts_with("- ")
            || body == "-"
            || body.starts_with("? ")
            || body.contains(": ")
            || body.trim_end().ends_with(':');
        if flow == 0 && !in_single && !in_double && !body.is_empty() && !body.starts_with('#') && starts_node {
            while indents.last().is_some_and(|top| *top >= indent) {
                indents.pop();
            }
            indents.push(indent);
            if indents.len() > depth_max {
                return Some(index + 1);
            }
        }
        let mut chars = line.chars().peekable();
        let mut compact = 0usize;
        if flow == 0 && !in_single && !in_double {
            // `- - x`, `? x`: each indicator opens one more block collection.
            loop {
                while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
                let mut ahead = chars.clone();
                let indicator = ahead.next_if(|c| *c == '-' || *c == '?').is_some();
                if indicator && ahead.peek().is_none_or(|c| c.is_whitespace()) {
                    compact += 1;
                    chars = ahead;
                } else {
                    break;
                }
            }
        }
        let mut prev = ' ';
        // In block context a bracket opens a flow collection only where a value starts
        // (`key: [`, `- [`): in `note: see [1` it is text.
        let mut last_mark: Option<char> = None;
        while let Some(c) = chars.next() {
            if in_double {
                if c == '\\' {
                    chars.next();
                } else if c == '"' {
                    in_double = false;
                }
            } else if in_single {
                // `''` is a quote inside the string.
                if c == '\'' && chars.next_if_eq(&'\'').is_none() {
                    in_single = false;
                }
            } else {
                match c {
                    '#' if prev.is_whitespace() => break,
                    '"' if is_token_start(prev) => in_double = true,
                    '\'' if is_token_start(prev) => in_single = true,
                    '[' | '{' if flow > 0 || (prev.is_whitespace() && matches!(last_mark, None | Some(':'))) => {
                        flow += 1;
                    }
                    ']' | '}' => flow = flow.saturating_sub(1),
                    _ => {}
                }
                if !c.is_whitespace() {
                    last_mark = Some(c);
                }
                if compact.saturating_add(flow) > depth_max {
                    return Some(index + 1);
                }
            }
            prev = c;
        }
        if compact > depth_max {
            return Some(index + 1);
        }
        if flow == 0 && !in_single && !in_double && ends_with_block_scalar_header(line) {
            block_scalar = Some(indent);
        }
    }
    None
}

/// `key: |`, `- >-`, `key: |2 # note`: the line's last token starts a block scalar.
fn ends_with_block_scalar_header(line: &str) -> bool {
    let last = line.split_whitespace().take_while(|w| !w.starts_with('#')).last().unwrap_or("");
    let mut c = last.chars();
    matches!(c.next(), Some('|' | '>')) && c.all(|c| c.is_ascii_digit() || c == '+' || c == '-')
}

fn is_token_start(prev: char) -> bool {
    prev.is_whitespace() || matches!(prev, '[' | '{' | ',' | ':' | '-')
}

fn to_json(yaml: &Yaml, depth: usize, nodes: &mut usize, limits: &Limits) -> Result<Value, DocError> {
    if depth > limits.depth_max {
        return Err(DocError::TooDeep { depth_max: limits.depth_max, line: None });
    }
    *nodes += 1;
    if *nodes > limits.nodes_max {
        return Err(DocError::TooManyNodes { nodes_max: limits.nodes_max });
    }
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(
                    Number::from_f64(f)
                        .ok_or(DocError::NotJson { what: "a number that is not finite (.nan or .inf)".into() })?,
                )
            }
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Sequence(items) => {
            Value::Array(items.iter().map(|v| to_json(v, depth + 1, nodes, limits)).collect::<Result<_, _>>()?)
        }
        Yaml::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    // Unquoted `1: x` or `true: x` keys: keep them addressable, as JSON does.
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    _ => {
                        return Err(DocError::NotJson { what: "a mapping key that is not a scalar".into() });
                    }
                };
                if out.insert(key.clone(), to_json(v, depth + 1, nodes, limits)?).is_some() {
                    return Err(DocError::DuplicateKey { key, line: None });
                }
            }
            Value::Object(out)
        }
        Yaml::Tagged(tagged) => {
            return Err(DocError::NotJson { what: format!("a YAML tag ({})", tagged.tag) });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Value, DocError> {
        parse(text, &Limits::default())
    }

    #[test]
    fn plain_documents_parse() {
        let v = p("a: 1\nb: [x, 'y']\nc: {d: \"e\"}\n").unwrap();
        assert_eq!(v["a"], 1);
        assert_eq!(v["b"][1], "y");
    }

    #[test]
    fn anchors_and_aliases_are_refused() {
        assert!(matches!(p("a: &x 1\nb: *x\n"), Err(DocError::Anchor { line: 1 })));
        assert!(matches!(p("a: [*x]\n"), Err(DocError::Anchor { line: 1 })));
        // Inside quotes and comments they are just text.
        assert!(p("a: \"&x *y\"\nb: 'R&D * 2'\nc: 1 # &z\nd: a&b\ne: R & D\n").is_ok());
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let err = p("a: 1\na: 2\n").unwrap_err();
        assert!(err.to_string().contains("duplicate"), "{err}");
        // Reported at the duplicate's own line (the parser says only where the mapping starts).
        let err = p("holon_mandate: \"0.1\"\nid: a/b\nissuer: x\nid: a/c\n").unwrap_err();
        assert!(err.to_string().starts_with("line 4: duplicate key `id`"), "{err}");
        let err = p("a:\n  b: 1\n  c: 2\n  b: 3\n").unwrap_err();
        assert!(err.to_string().starts_with("line 4: duplicate key `b`"), "{err}");
    }

    #[test]
    fn limits_hold() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(p(&deep).is_err());
        let big = "a: ".to_owned() + &"x".repeat(2 << 20);
        assert!(matches!(p(&big), Err(DocError::TooLarge { .. })));
        let many: String = (0..200_000).map(|i| format!("- {i}\n")).collect::<String>();
        let limits = Limits { bytes_max: 8 << 20, ..Limits::default() };
        assert!(matches!(parse(&many, &limits), Err(DocError::TooManyNodes { .. })));
    }

    #[test]
    fn syntax_errors_carry_a_line() {
        match p("a: 1\nb: [\n") {
            Err(DocError::Syntax { line: Some(_), .. }) => {}
            other => panic!("{other:?}"),
        }
        assert!(p(".nan_key: .nan\n").is_err());
        assert!(p("a: !custom 1\n").is_err());
    }
}
