//! The option table: `commands.txt` (its header describes the format), read and looked up.

use smallvec::SmallVec;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::{Class, Mark, Operands, Opt, Parser, Spec};

fn parser(word: &str) -> Option<Parser> {
    Some(match word {
        "gnu" => Parser::Gnu,
        "gnu+" => Parser::GnuStop,
        "exact" => Parser::Exact,
        "exact+" => Parser::ExactStop,
        "builtin" => Parser::Builtin,
        "echo" => Parser::Echo,
        _ => return None,
    })
}

fn operands(word: &str) -> Option<Operands> {
    Some(match word {
        "words" => Operands::Words,
        "read" => Operands::Read,
        "write" => Operands::Write,
        "copy" => Operands::Copy,
        "move" => Operands::Move,
        "link" => Operands::Link,
        "sed" => Operands::Sed,
        "tar" => Operands::Tar,
        "pathlike" => Operands::PathLike,
        "pinned" => Operands::Pinned,
        "wrapper" => Operands::Wrapper,
        _ => return None,
    })
}

fn class(word: &str) -> Option<Class> {
    Some(match word {
        "free" => Class::Free,
        "pin" => Class::Pin,
        "read" => Class::Read,
        "write" => Class::Write,
        "target" => Class::Target,
        "data" => Class::Data,
        "form" => Class::Form,
        "cookie" => Class::Cookie,
        "urlencode" => Class::UrlEncode,
        "url" => Class::Url,
        "archive" => Class::Archive,
        "opaque" => Class::Opaque,
        _ => return None,
    })
}

fn mark(word: &str) -> Option<Mark> {
    Some(match word {
        "recurse" => Mark::Recurse,
        "effect" => Mark::Effect,
        "opaque" => Mark::Opaque,
        "hardlink" => Mark::HardLink,
        "symlink" => Mark::SymLink,
        "inplace" => Mark::InPlace,
        "pattern" => Mark::Pattern,
        "mode" => Mark::Mode,
        "number" => Mark::Number,
        "dirs" => Mark::Dirs,
        "parents" => Mark::Parents,
        "create" => Mark::Create,
        "extract" => Mark::Extract,
        "list" => Mark::List,
        "append" => Mark::Append,
        "notarget" => Mark::NoTargetDir,
        "output" => Mark::Output,
        _ => return None,
    })
}

fn header(rest: &str, n: usize) -> Result<Spec, String> {
    let (names, props) =
        rest.split_once(':').ok_or_else(|| format!("line {n}: a header is `== names : parser operands [keys]`"))?;
    let names: Vec<String> = names.split('|').map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    if names.iter().any(String::is_empty) {
        return Err(format!("line {n}: an empty command name"));
    }
    let mut words = props.split_whitespace();
    let p = words
        .next()
        .and_then(parser)
        .ok_or_else(|| format!("line {n}: no parser (gnu, gnu+, exact, exact+, builtin, echo)"))?;
    let o = words.next().and_then(operands).ok_or_else(|| format!("line {n}: no operand kind"))?;
    let mut spec = Spec {
        names,
        parser: p,
        operands: o,
        lead: 0,
        default: None,
        always_recursive: false,
        lead_pinned: false,
        lead_writes: false,
        needs_output: false,
        implicit_reads: Vec::new(),
        implicit_writes: Vec::new(),
        programs: Vec::new(),
        opts: Vec::new(),
    };
    for w in words {
        let list = |v: &str| v.split(',').map(str::to_owned).collect::<Vec<_>>();
        match w.split_once('=') {
            Some(("lead", v)) => spec.lead = v.parse().map_err(|_| format!("line {n}: lead={v} is not a number"))?,
            Some(("default", v)) => spec.default = Some(v.to_owned()),
            Some(("reads", v)) => spec.implicit_reads = list(v),
            Some(("writes", v)) => spec.implicit_writes = list(v),
            Some(("runs", v)) => spec.programs = list(v),
            None if w == "recursive" => spec.always_recursive = true,
            None if w == "leadpin" => spec.lead_pinned = true,
            None if w == "leadwrites" => spec.lead_writes = true,
            None if w == "output" => spec.needs_output = true,
            _ => return Err(format!("line {n}: unknown header key `{w}`")),
        }
    }
    Ok(spec)
}

fn option(line: &'static str, n: usize) -> Result<Opt, String> {
    let mut opt = Opt { spellings: SmallVec::new(), values: SmallVec::new(), optional: false, marks: SmallVec::new() };
    for w in line.split_whitespace() {
        if let Some(classes) = w.strip_prefix("?=").or_else(|| w.strip_prefix('=')) {
            opt.optional = w.starts_with('?');
            for c in classes.split(',') {
                opt.values.push(class(c).ok_or_else(|| format!("line {n}: unknown value class `{c}`"))?);
            }
        } else if w.starts_with('-') {
            let short = w.len() == 2;
            let long = w.starts_with("--") && w.len() > 2;
            if !(short || long) || !opt.values.is_empty() || !opt.marks.is_empty() {
                return Err(format!("line {n}: `{w}` is no option spelling here"));
            }
            opt.spellings.push(w);
        } else {
            opt.marks.push(mark(w).ok_or_else(|| format!("line {n}: unknown mark `{w}`"))?);
        }
    }
    if opt.spellings.is_empty() {
        return Err(format!("line {n}: an option line names no option"));
    }
    if opt.optional && opt.values.len() != 1 {
        return Err(format!("line {n}: an optional value is one value"));
    }
    Ok(opt)
}

/// The table from its text: the headers now, each command's option lines when it is
/// first looked up ([`options_of`]); `Err` names the line that is wrong. The text is
/// compiled in (`'static`): spellings are borrowed from it.
fn read(text: &'static str) -> Result<Table, String> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut at = 0;
    // The header being read: its spec, where its body starts (byte and line).
    let mut open: Option<(Spec, usize, usize)> = None;
    for (i, raw) in lines_of(text).enumerate() {
        let n = i + 1;
        let start = at;
        at += raw.len();
        // Only a header, or a line before the first one, is looked at now (a comment
        // cannot start with `==`).
        if raw.trim_start().starts_with("==") {
            let rest = uncommented(raw).strip_prefix("==").unwrap_or_default();
            if let Some((head, from, first)) = open.take() {
                entries.push(Entry::new(head, text.get(from..start).unwrap_or_default(), first));
            }
            open = Some((header(rest, n)?, at, n + 1));
        } else if open.is_none() {
            let line = uncommented(raw);
            if !line.is_empty() && !line.starts_with('#') {
                return Err(format!("line {n}: an option before any command"));
            }
        }
    }
    if let Some((head, from, first)) = open {
        entries.push(Entry::new(head, text.get(from..).unwrap_or_default(), first));
    }
    build(entries)
}

/// A line without its end, its comment (` #` on) and the blanks around it.
/// `text`'s lines, each with its newline (the last perhaps without): `split_inclusive('\n')`
/// with a vectorised search for the newline. The whole table is scanned in every process
/// that checks a call, and the character search was 40% of reading it (callgrind of
/// `holon-job exec`, docs/PERFORMANCE.md "holon job exec overhead").
fn lines_of(text: &str) -> impl Iterator<Item = &str> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let rest = text.get(at..).filter(|r| !r.is_empty())?;
        // A newline is one byte, so the cut after it is a character boundary.
        let len = memchr::memchr(b'\n', rest.as_bytes()).map_or(rest.len(), |i| i + 1);
        at += len;
        rest.get(..len)
    })
}

fn uncommented(raw: &str) -> &str {
    // Most lines have no comment: the byte search is cheaper than the substring's.
    if raw.contains('#') { raw.split(" #").next().unwrap_or_default() } else { raw }.trim()
}

/// The whole spec of `entry`: its header's and its option lines', or the line that is
/// wrong (an unknown word, a spelling listed twice for the command).
fn options_of(entry: &Entry) -> Result<Spec, String> {
    let mut spec = entry.head.clone();
    // The spellings with their lines, sorted to find one listed twice (git and curl have
    // hundreds: a scan of every earlier option per spelling was most of a check's time).
    let mut spelled: Vec<(&'static str, usize)> = Vec::new();
    for (i, raw) in lines_of(entry.body).enumerate() {
        let n = entry.first_line + i;
        let line = uncommented(raw);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let opt = option(line, n)?;
        spelled.extend(opt.spellings.iter().map(|s| (*s, n)));
        spec.opts.push(opt);
    }
    spelled.sort_unstable();
    let twice = spelled.windows(2).find_map(|w| match w {
        [(a, _), (b, n)] if a == b => Some((*b, *n)),
        _ => None,
    });
    match twice {
        Some((s, n)) => Err(format!("line {n}: `{s}` is listed twice for {}", spec.names.join(", "))),
        None => Ok(spec),
    }
}

/// The table: `commands.txt`. Its headers are read once, when it is first used; a
/// command's options when the command is first looked up (a `holon job check` of one call
/// reads two or three of its hundred entries: reading all of them was half its work).
pub struct Table {
    entries: Vec<Entry>,
    by_name: BTreeMap<String, usize>,
}

/// One command of the table: its header read, its options' lines kept for later.
struct Entry {
    /// The header's spec, with no options.
    head: Spec,
    /// The option lines after the header, up to the next one, and the number of the first.
    body: &'static str,
    first_line: usize,
    spec: OnceLock<Result<Spec, String>>,
}

impl Entry {
    fn new(head: Spec, body: &'static str, first_line: usize) -> Entry {
        Entry { head, body, first_line, spec: OnceLock::new() }
    }

    /// The whole spec, or the line of its options that is wrong.
    fn spec(&self) -> Result<&Spec, &str> {
        self.spec.get_or_init(|| options_of(self)).as_ref().map_err(String::as_str)
    }
}

/// What the table says of a command.
#[derive(Debug, Clone, Copy)]
pub enum Lookup<'a> {
    Found(&'a Spec),
    /// Not in the table.
    Absent,
    /// In the table, with an option line that cannot be read (our bug; the call is opaque).
    Unreadable(&'a str),
}

impl<'a> Lookup<'a> {
    /// The spec found; `None` also for an entry that cannot be read.
    pub fn spec(self) -> Option<&'a Spec> {
        match self {
            Lookup::Found(s) => Some(s),
            Lookup::Absent | Lookup::Unreadable(_) => None,
        }
    }
}

impl Table {
    /// The spec of `head` (its directory ignored) with subcommand `sub`, else of `head`
    /// alone; `None` also for an entry that cannot be read ([`Table::lookup`] tells them
    /// apart).
    pub fn get(&self, head: &str, sub: Option<&str>) -> Option<&Spec> {
        self.lookup(head, sub).spec()
    }
    /// [`Table::get`], saying whether an entry that gives no spec is absent or unreadable.
    pub fn lookup(&self, head: &str, sub: Option<&str>) -> Lookup<'_> {
        let base = head.rsplit('/').next().unwrap_or(head);
        let key = sub.map(|s| format!("{base} {s}"));
        let found = key.and_then(|k| self.by_name.get(&k)).or_else(|| self.by_name.get(base));
        match found.and_then(|i| self.entries.get(*i)).map(Entry::spec) {
            None => Lookup::Absent,
            Some(Ok(s)) => Lookup::Found(s),
            Some(Err(e)) => Lookup::Unreadable(e),
        }
    }
    /// Whether a spec exists for exactly `head sub`.
    pub fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }
    /// Every spec, each read now if it was not yet, or the first line that is wrong.
    pub fn specs(&self) -> Result<Vec<&Spec>, String> {
        self.entries.iter().map(|e| e.spec().map_err(str::to_owned)).collect()
    }
}

/// The table, or why the headers of `commands.txt` cannot be read (then every command of
/// the table is opaque: fail closed; a command whose option lines cannot be read is
/// opaque alone; `tests/option_grammar.rs` keeps every line readable).
pub fn table() -> Result<&'static Table, &'static str> {
    static TABLE: OnceLock<Result<Table, String>> = OnceLock::new();
    TABLE.get_or_init(|| read(include_str!("../commands.txt"))).as_ref().map_err(String::as_str)
}

fn build(entries: Vec<Entry>) -> Result<Table, String> {
    let mut by_name = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        for name in &entry.head.names {
            if by_name.insert(name.clone(), i).is_some() {
                return Err(format!("`{name}` is described twice"));
            }
        }
    }
    Ok(Table { entries, by_name })
}

#[cfg(test)]
mod tests {
    use super::Lookup;

    #[test]
    fn the_table_reads_and_bad_lines_name_themselves() {
        super::super::table().unwrap().specs().unwrap();
        for (bad, says) in [
            ("-x", "before any command"),
            ("== a : gnu words\n-x =nope", "unknown value class"),
            ("== a : gnu words\n-x bogus", "unknown mark"),
            ("== a : gnu words\n-x\n-x", "listed twice"),
            ("== a : gnu words\n== a : gnu words", "described twice"),
            ("== a : magic words", "no parser"),
            ("== a : gnu words\n-abc", "no option spelling"),
        ] {
            let err = super::read(bad).and_then(|t| t.specs().map(|_| ())).err().unwrap();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
        // A command's option lines are read when it is looked up: a bad one makes that
        // command unreadable (opaque to the judge), the others are read as written.
        let t = super::read("== a : gnu words\n-x bogus\n== b : gnu words # b\n-y  # why\n").unwrap();
        assert!(matches!(t.lookup("a", None), Lookup::Unreadable(e) if e.contains("line 2: unknown mark")));
        assert!(matches!(t.lookup("b", None), Lookup::Found(s) if s.opts.len() == 1));
        assert!(matches!(t.lookup("c", None), Lookup::Absent));
    }

    /// The table's reader against the plainest reading: every line whose trimmed start is
    /// `==` is a header, its body the lines up to the next one. The compiled-in table and
    /// texts with `==` in comments, in option lines and at odd places.
    #[test]
    fn the_reader_finds_the_headers_a_plain_reading_finds() {
        let odd = "# a == b\n\n   == a | b : gnu words # c == d\n-x ==x\n\t==c : gnu words\n==== d : gnu words\n== e : gnu words";
        for text in [include_str!("../commands.txt"), odd, "== a : gnu words\n", "\n\n== a : gnu words\n-y\n"] {
            let t = super::read(text).unwrap();
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            assert_eq!(super::lines_of(text).collect::<Vec<_>>(), lines, "{text:?}");
            let heads: Vec<usize> = (0..lines.len()).filter(|i| lines[*i].trim_start().starts_with("==")).collect();
            assert_eq!(t.entries.len(), heads.len(), "{text:?}");
            for (k, (entry, h)) in t.entries.iter().zip(&heads).enumerate() {
                let next = heads.get(k + 1).copied().unwrap_or(lines.len());
                assert_eq!(entry.first_line, h + 2, "{text:?}");
                assert_eq!(entry.body, lines[h + 1..next].concat(), "{text:?}");
                let name = lines[*h].trim_start().strip_prefix("==").unwrap().split(':').next().unwrap();
                assert_eq!(entry.head.names.join("|"), name.split('|').map(str::trim).collect::<Vec<_>>().join("|"));
            }
        }
        for text in ["", "\n", "a", "\n\na\n\n", "é\nü"] {
            assert_eq!(super::lines_of(text).collect::<Vec<_>>(), text.split_inclusive('\n').collect::<Vec<_>>());
        }
        assert!(super::read("-x\n== a : gnu words").err().unwrap().contains("line 1: an option before any command"));
        assert!(super::read("# c\n== a : nope words").err().unwrap().contains("line 2: no parser"));
    }
}
