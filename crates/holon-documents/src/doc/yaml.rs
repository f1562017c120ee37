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

/// The one reading both lexical scans (anchors, depth) make of YAML's quotes, flow
/// brackets and comments: they must agree, since a scan that believes it is inside a quote
/// skips what it would refuse. A quote opens a quoted scalar only where a node starts: at
/// the start of a line's content, after a flow bracket or (in flow) a comma, after a block
/// indicator (`- `, `? `, `: `) or, in flow, after the `:` that follows a quoted key;
/// elsewhere (`x 'y`, `it's`, `a - 'b`, `[a:'b]`) it is text of a plain scalar. Inside
/// single quotes `''` is a quote character, inside double quotes `\` escapes the next
/// character. A bracket opens a flow collection where a node starts, or anywhere in flow.
/// A `#` after a blank, outside quotes, starts a comment.
/// `the_anchor_scan_agrees_with_the_parser` holds this reading to the parser itself.
#[derive(Debug, Clone, Copy)]
struct Scanner {
    single: bool,
    double: bool,
    /// Open flow collections.
    flow: usize,
    /// A node may start at the next character.
    node_start: bool,
    /// The character before, on this line (a blank at its start).
    prev: char,
    /// The previous character closed a quoted scalar.
    closed_quote: bool,
}

/// What one character is to a scan.
#[derive(Debug, PartialEq, Eq)]
enum Lexeme {
    /// Inside a quoted scalar, or the quote that opens or closes it.
    Quoted,
    /// Outside quotes and comments: the scan looks at it.
    Plain,
    /// Starts a comment: the rest of the line is not YAML.
    Comment,
}

impl Scanner {
    fn new() -> Scanner {
        Scanner { single: false, double: false, flow: 0, node_start: true, prev: ' ', closed_quote: false }
    }

    fn in_quotes(&self) -> bool {
        self.single || self.double
    }

    /// A new line: it starts at a node (or continues a quoted scalar or a flow collection).
    fn line(&mut self) {
        self.prev = ' ';
        self.closed_quote = false;
        if !self.in_quotes() {
            self.node_start = true;
        }
    }

    /// Reads `c`; `rest` is the line after it (an escaped or doubled quote is taken from
    /// it, an indicator looks at the character that follows).
    fn step(&mut self, c: char, rest: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Lexeme {
        let lexeme = self.read(c, rest);
        self.prev = c;
        lexeme
    }

    fn read(&mut self, c: char, rest: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Lexeme {
        let closed_quote = std::mem::take(&mut self.closed_quote);
        if self.double {
            if c == '\\' {
                rest.next();
            } else if c == '"' {
                self.double = false;
                self.closed_quote = true;
            }
            return Lexeme::Quoted;
        }
        if self.single {
            if c == '\'' && rest.next_if_eq(&'\'').is_none() {
                self.single = false;
                self.closed_quote = true;
            }
            return Lexeme::Quoted;
        }
        let blank_after = rest.peek().is_none_or(|n| n.is_whitespace());
        match c {
            '#' if self.prev.is_whitespace() => return Lexeme::Comment,
            ' ' | '\t' => {}
            '"' | '\'' if self.node_start => {
                if c == '"' {
                    self.double = true;
                } else {
                    self.single = true;
                }
                self.node_start = false;
                return Lexeme::Quoted;
            }
            '[' | '{' if self.node_start || self.flow > 0 => {
                self.flow += 1;
                self.node_start = true;
            }
            ']' | '}' if self.flow > 0 => {
                self.flow -= 1;
                self.node_start = false;
            }
            ',' if self.flow > 0 => self.node_start = true,
            '-' | '?' if self.node_start && blank_after => {}
            ':' if blank_after || (self.flow > 0 && closed_quote) => self.node_start = true,
            _ => self.node_start = false,
        }
        Lexeme::Plain
    }
}

/// Finds an anchor (`&name`) or alias (`*name`) token outside quotes and comments.
/// A conservative lexical scan: a `&` or `*` that starts a token. Each line starts outside
/// quotes and flow (a quote the scan misread hides at most the rest of its line; a quoted
/// scalar that spans lines has its next lines scanned, and refused on a `&x` there).
fn find_anchor_or_alias(text: &str) -> Option<usize> {
    for (index, line) in text.lines().enumerate() {
        let mut scan = Scanner::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            let prev = scan.prev;
            let next_is_name = chars.peek().is_some_and(|n| !n.is_whitespace());
            match scan.step(c, &mut chars) {
                Lexeme::Comment => break,
                Lexeme::Quoted => {}
                // `&name` / `*name`: a name must follow at once (`R & D` is text).
                Lexeme::Plain if matches!(c, '&' | '*') && is_token_start(prev) && next_is_name => {
                    return Some(index + 1);
                }
                Lexeme::Plain => {}
            }
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
    // Quotes and flow collections may span lines: the scanner's state is carried.
    let mut scan = Scanner::new();
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
        scan.line();
        let block = scan.flow == 0 && !scan.in_quotes();
        let body = line.trim_start_matches(' ');
        let starts_node = body.starts_with("- ")
            || body == "-"
            || body.starts_with("? ")
            || body.contains(": ")
            || body.trim_end().ends_with(':');
        if block && !body.is_empty() && !body.starts_with('#') && starts_node {
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
        if block {
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
        while let Some(c) = chars.next() {
            match scan.step(c, &mut chars) {
                Lexeme::Comment => break,
                Lexeme::Quoted => {}
                Lexeme::Plain if compact.saturating_add(scan.flow) > depth_max => return Some(index + 1),
                Lexeme::Plain => {}
            }
        }
        if compact > depth_max {
            return Some(index + 1);
        }
        if scan.flow == 0 && !scan.in_quotes() && ends_with_block_scalar_header(line) {
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

    /// Against the real parser: where the anchor scan finds no `&name` or `*name`, every
    /// `&` and `*` of the text is text, so writing them as `A` and `B` changes only the
    /// parsed strings, in the same way. A real anchor the scan missed would vanish from the
    /// parsed value (and `Ax 1` parses as a string, not as `1`): a difference.
    #[test]
    fn the_anchor_scan_agrees_with_the_parser() {
        fn text_of(y: &Yaml) -> Yaml {
            match y {
                Yaml::String(s) => Yaml::String(s.replace('&', "A").replace('*', "B")),
                Yaml::Sequence(items) => Yaml::Sequence(items.iter().map(text_of).collect()),
                Yaml::Mapping(m) => Yaml::Mapping(m.iter().map(|(k, v)| (text_of(k), text_of(v))).collect()),
                other => other.clone(),
            }
        }
        const PIECES: [&str; 16] = ["a", "x", " ", "'", "''", "\"", "&", "*", ":", ": ", ",", "[", "]", "#", "-", "\\"];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut compared, mut refused) = (0u32, 0u32);
        for case in 0..40_000u32 {
            let len = 1 + next() % 10;
            let body: String = (0..len).map(|_| PIECES[(next() % 16) as usize]).collect();
            let text = match case % 3 {
                0 => format!("k: {body}\n"),
                1 => format!("k: [{body}]\n"),
                _ => format!("- {body}\n"),
            };
            if find_anchor_or_alias(&text).is_some() {
                refused += 1;
                continue;
            }
            let plain = text.replace('&', "A").replace('*', "B");
            let (Ok(real), Ok(as_text)) = (serde_yaml::from_str::<Yaml>(&text), serde_yaml::from_str::<Yaml>(&plain))
            else {
                continue;
            };
            assert_eq!(text_of(&real), as_text, "the scan saw no anchor or alias in {text:?}, the parser did");
            compared += 1;
        }
        // Both sides must be exercised, or the test proves nothing.
        assert!(compared > 5_000 && refused > 5_000, "compared {compared}, refused {refused}");
    }

    /// The two lexical scans read quotes by one rule (issue #27: they disagreed).
    #[test]
    fn quotes_are_read_as_yaml_reads_them() {
        // `''` is a quote inside a single-quoted scalar: what follows is still quoted.
        assert_eq!(p("a: 'it''s &x'\n").unwrap()["a"], "it's &x");
        assert_eq!(p("a: ['it''s *y', 'b''c']\n").unwrap()["a"][0], "it's *y");
        // A quote inside a plain scalar opens nothing: in flow context the scalar ends at
        // the comma, and the anchor and alias after it are real (they were hidden).
        assert!(matches!(p("a: {k: x 'y, b: &z [1], c: *z}\n"), Err(DocError::Anchor { line: 1 })));
        assert!(matches!(p("a: [x 'y, *z]\n"), Err(DocError::Anchor { line: 1 })));
        // A quote mid-scalar in block context is text too.
        assert_eq!(p("a: it 's fine\n").unwrap()["a"], "it 's fine");
        // The depth scan reads the same quotes: brackets inside `'…''…'` are text.
        let limits = Limits { depth_max: 2, ..Limits::default() };
        assert!(parse("a: 'x''[[[['\n", &limits).is_ok());
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
