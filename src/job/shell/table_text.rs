//! Reading `commands.txt`, the option table (its header describes the format).

use super::options::{Class, Mark, Operands, Opt, Parser, Spec, Table, build};

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

fn option(line: &str, n: usize) -> Result<Opt, String> {
    let mut opt = Opt { spellings: Vec::new(), values: Vec::new(), optional: false, marks: Vec::new() };
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
            opt.spellings.push(w.to_owned());
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

/// The table from its text; `Err` names the line that is wrong.
pub(super) fn read(text: &str) -> Result<Table, String> {
    let mut specs: Vec<Spec> = Vec::new();
    // The spellings of the command being read (a set: git and curl have hundreds, and a
    // scan of every earlier option per spelling was most of a `holon job check`'s time).
    let mut spelled: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.split(" #").next().unwrap_or_default().trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("==") {
            specs.push(header(rest, n)?);
            spelled.clear();
            continue;
        }
        let opt = option(line, n)?;
        let spec = specs.last_mut().ok_or_else(|| format!("line {n}: an option before any command"))?;
        for s in &opt.spellings {
            if !spelled.insert(s.clone()) {
                return Err(format!("line {n}: `{s}` is listed twice for {}", spec.names.join(", ")));
            }
        }
        spec.opts.push(opt);
    }
    build(specs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_reads_and_bad_lines_name_themselves() {
        super::super::options::table().unwrap();
        for (bad, says) in [
            ("-x", "before any command"),
            ("== a : gnu words\n-x =nope", "unknown value class"),
            ("== a : gnu words\n-x bogus", "unknown mark"),
            ("== a : gnu words\n-x\n-x", "listed twice"),
            ("== a : gnu words\n== a : gnu words", "described twice"),
            ("== a : magic words", "no parser"),
            ("== a : gnu words\n-abc", "no option spelling"),
        ] {
            let err = super::read(bad).err().unwrap();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }
}
