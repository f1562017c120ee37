//! The option grammar of each known command, read the way the program itself reads its
//! arguments (GNU `getopt_long`, `getopt` stopping at the first operand, exact long
//! options, bash's builtins), and every option classified by what it does: a switch that
//! changes no file, host or program, or a value that is a path read or written, a target
//! directory, a URL, a program or a configuration (opaque), a value pinned as learned.
//!
//! The table is data: `commands.txt` (in `crates/holon-job/src/shell/`) (its header says how to read it and
//! how to add a command). An option the table does not know, an ambiguous abbreviation, a
//! missing value or a value given to an option that takes none makes the segment opaque:
//! the program would do something the table does not describe, or refuse to run.
//! `tests/option_grammar.rs` holds the table to the real programs' parsers.

use smallvec::SmallVec;

mod table_text;

pub use table_text::{Lookup, Table, table};

/// How a program reads its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parser {
    /// GNU `getopt_long`: short options in clusters with values attached or separate, long
    /// options with `=value` or a separate value, any unique prefix of a long option,
    /// options after operands (permutation), `--` ends options.
    Gnu,
    /// `getopt_long` with `+`: the first operand ends the options (the wrappers: what
    /// follows is the wrapped command).
    GnuStop,
    /// Short clusters and long options written in full only (clap, git's subcommands as
    /// the table holds them, jq, curl): an abbreviation is an unknown option.
    Exact,
    /// [`Parser::Exact`], stopping at the first operand (sudo).
    ExactStop,
    /// Bash's builtins (`internal_getopt`): short options only, stopping at the first operand.
    Builtin,
    /// Bash's `echo`: a word made only of `-` and the option letters is options, anything
    /// else (from the first such word on) is text.
    Echo,
}

/// What an option's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Names no file, host or program: a count, a pattern, a format.
    Free,
    /// Kept in the rule's pinned arguments, exactly as learned (`sudo -u root`).
    Pin,
    Read,
    Write,
    /// The directory copies, moves and links go into (written below).
    Target,
    /// curl's data: `@FILE` reads FILE (`@-` is standard input).
    Data,
    /// curl's form fields: `name=@FILE` and `name=<FILE` read FILE.
    Form,
    /// A cookie string, or (without `=`) a file read.
    Cookie,
    /// curl's `--data-urlencode`: `name@FILE` and `@FILE` read FILE.
    UrlEncode,
    /// A URL whose host is judged.
    Url,
    /// tar's archive: read or written by the mode.
    Archive,
    /// A program, code, a configuration, a list of files or a directory change: the
    /// segment is opaque.
    Opaque,
}

/// What a switch (or an option with a value) changes beyond its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Descends into directories (`rm -r`, `grep -r`, `diff -r`, `cp -a`).
    Recurse,
    /// Changes which files, hosts or programs are used, in a way the kind judges or that
    /// needs a person's approval (`cp -L`, `curl -L`): only a rule naming it allows it.
    Effect,
    /// The segment is opaque (`jq -f`: the filter comes from a file).
    Opaque,
    /// `cp -l`: makes hard links, so the sources are written too.
    HardLink,
    /// `ln -s`: makes symbolic links (without it `ln` makes hard links).
    SymLink,
    /// `sed -i`: edits its files in place.
    InPlace,
    /// grep's `-e`/`-f`: the pattern is given, so every operand is a file.
    Pattern,
    /// chmod's `-x` or `--reference`: the mode is given, so every operand is a file.
    Mode,
    /// `-NUM` (`head -5`, `diff -3`): digits that form a number.
    Number,
    /// `install -d`: every operand is a directory created.
    Dirs,
    /// `mkdir -p`, `install -D`: the missing parent directories are created too.
    Parents,
    /// tar's modes.
    Create,
    Extract,
    List,
    Append,
    /// `cp -T`: the last operand is the target itself, never a directory to copy into.
    NoTargetDir,
    /// wget's `-O`: the program writes where the call says (see [`Spec::needs_output`]).
    Output,
}

/// One option of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    /// Every spelling: `-r`, `-R`, `--recursive`; the first is the canonical one rules use.
    /// (Borrowed from the table's text, which is compiled in: reading the table allocates
    /// no string per spelling.)
    pub spellings: SmallVec<[&'static str; 2]>,
    /// The classes of its values, in order (most take one; jq's `--arg` takes two).
    pub values: SmallVec<[Class; 2]>,
    /// The value may only be attached (`-iSUFFIX`, `--color=always`).
    pub optional: bool,
    pub marks: SmallVec<[Mark; 2]>,
}

impl Opt {
    /// The spelling a rule names this option by.
    pub fn name(&self) -> &str {
        if self.has(Mark::Number) {
            return "-NUM";
        }
        self.spellings.first().copied().unwrap_or_default()
    }
    /// A switch that takes no value and changes no file, host or program: the only kind
    /// of option a `-*` rule allows.
    pub fn is_plain_switch(&self) -> bool {
        self.values.is_empty() && self.marks.is_empty()
    }
    pub fn has(&self, mark: Mark) -> bool {
        self.marks.contains(&mark)
    }
}

/// How a command's operands are judged (the kinds of docs/job.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operands {
    /// Not paths (`echo`, `seq`).
    Words,
    /// Paths read, after the first `lead` (grep's pattern, jq's filter: pinned).
    Read,
    /// Paths written or deleted, after the first `lead` (chmod's mode).
    Write,
    /// `cp`, `install`: sources read, the last operand (or the target directory) written.
    Copy,
    /// `mv`: sources and target written, whole trees.
    Move,
    /// `ln`, `link`: the link written; a hard link's source written too.
    Link,
    /// `sed SCRIPT FILE...`.
    Sed,
    /// `tar`: by its mode.
    Tar,
    /// Subcommands known to stay local (`git log`): path-shaped operands read, others pinned.
    PathLike,
    /// Every word pinned as learned; the options only classified (network commands).
    Pinned,
    /// A wrapper: options, then `operands` words, then the wrapped command.
    Wrapper,
}

/// One command (or `head subcommand`) of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub names: Vec<String>,
    pub parser: Parser,
    pub operands: Operands,
    /// Leading operands that are not paths (grep's pattern, chmod's mode, a wrapper's
    /// duration).
    pub lead: usize,
    /// The operand when none is given (`ls`: `.`).
    pub default: Option<String>,
    /// Reads every operand recursively whatever its flags (`du`).
    pub always_recursive: bool,
    /// The `lead` operands are pinned in the rule (jq's filter is code), not free.
    pub lead_pinned: bool,
    /// The `lead` operands are files written (flock's lock file).
    pub lead_writes: bool,
    /// Without an option marked `output` the program names its output file itself
    /// (wget): the call is opaque.
    pub needs_output: bool,
    /// Paths the program reads or writes on its own, relative to where it runs
    /// (`git`: its repository).
    pub implicit_reads: Vec<String>,
    pub implicit_writes: Vec<String>,
    /// Programs it runs on its own (tar's compressors), approved with it.
    pub programs: Vec<String>,
    pub opts: Vec<Opt>,
}

/// An option as used in a call, with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Used<'a> {
    pub opt: &'a Opt,
    pub values: Vec<String>,
}

/// A call's words read the way the program reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub used: Vec<Used<'a>>,
    pub operands: Vec<String>,
}

impl Parsed<'_> {
    pub fn any(&self, mark: Mark) -> bool {
        self.used.iter().any(|u| u.opt.has(mark))
    }
    /// The values of every used option of class `class`.
    pub fn values_of(&self, class: Class) -> impl Iterator<Item = &String> {
        self.used
            .iter()
            .flat_map(move |u| u.opt.values.iter().zip(&u.values).filter(move |(c, _)| **c == class).map(|(_, v)| v))
    }
}

/// Why the words cannot be read as the program reads them (the segment is opaque).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    Unknown(String),
    Ambiguous(String),
    MissingValue(String),
    UnexpectedValue(String),
    /// Digits clustered with letters (`head -5c`): programs read these their own way.
    MixedNumber(String),
}

impl Spec {
    fn short(&self, c: char) -> Option<&Opt> {
        let mut buf = [0u8; 5];
        let c = c.encode_utf8(&mut buf);
        self.opts.iter().find(|o| o.spellings.iter().any(|s| s.strip_prefix('-') == Some(c)))
    }

    /// The option a rule's flag word names (its spelling exactly).
    pub fn by_spelling(&self, word: &str) -> Option<&Opt> {
        if word == "-NUM" {
            return self.opts.iter().find(|o| o.has(Mark::Number));
        }
        self.opts.iter().find(|o| o.spellings.contains(&word))
    }

    /// The long option `name` (without `--`): an exact spelling, or for a GNU parser the
    /// only option that any spelling starting with `name` belongs to.
    fn long(&self, name: &str) -> Result<&Opt, Unreadable> {
        let full = format!("--{name}");
        if let Some(o) = self.opts.iter().find(|o| o.spellings.iter().any(|s| s.strip_prefix("--") == Some(name))) {
            return Ok(o);
        }
        if !matches!(self.parser, Parser::Gnu | Parser::GnuStop) || name.is_empty() {
            return Err(Unreadable::Unknown(full));
        }
        let mut found: Option<&Opt> = None;
        for o in &self.opts {
            if o.spellings.iter().any(|s| s.strip_prefix("--").is_some_and(|l| l.starts_with(name))) {
                match found {
                    Some(f) if f != o => return Err(Unreadable::Ambiguous(full)),
                    _ => found = Some(o),
                }
            }
        }
        found.ok_or(Unreadable::Unknown(full))
    }

    /// Reads `args` the way the program does.
    pub fn parse<'a>(&'a self, args: &[String]) -> Result<Parsed<'a>, Unreadable> {
        let mut parsed = Parsed { used: Vec::new(), operands: Vec::new() };
        let mut words = args.iter();
        if self.parser == Parser::Echo {
            return Ok(self.echo(args));
        }
        let stops = matches!(self.parser, Parser::GnuStop | Parser::ExactStop | Parser::Builtin);
        while let Some(w) = words.next() {
            if w == "--" {
                parsed.operands.extend(words.cloned());
                break;
            }
            if let Some(long) = w.strip_prefix("--").filter(|l| self.parser != Parser::Builtin && !l.is_empty()) {
                let (name, attached) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_owned())),
                    None => (long, None),
                };
                let opt = self.long(name)?;
                let values = values_of(opt, attached, &mut words, w)?;
                parsed.used.push(Used { opt, values });
            } else if let Some(cluster) = w.strip_prefix('-').filter(|c| !c.is_empty()) {
                self.cluster(cluster, w, &mut words, &mut parsed)?;
            } else {
                parsed.operands.push(w.clone());
                if stops {
                    parsed.operands.extend(words.cloned());
                    break;
                }
            }
        }
        Ok(parsed)
    }

    /// Bash's `echo`: leading words of `-` and known letters only are options.
    fn echo(&self, args: &[String]) -> Parsed<'_> {
        let mut parsed = Parsed { used: Vec::new(), operands: Vec::new() };
        let mut words = args.iter();
        for w in words.by_ref() {
            let opts: Option<Vec<&Opt>> =
                w.strip_prefix('-').filter(|c| !c.is_empty()).and_then(|c| c.chars().map(|c| self.short(c)).collect());
            match opts {
                Some(opts) => parsed.used.extend(opts.into_iter().map(|opt| Used { opt, values: Vec::new() })),
                None => {
                    parsed.operands.push(w.clone());
                    break;
                }
            }
        }
        parsed.operands.extend(words.cloned());
        parsed
    }

    /// A cluster of short options (`-rf`, `-ofile`, `-n5`, `-20`).
    fn cluster<'a>(
        &'a self,
        cluster: &str,
        word: &str,
        words: &mut std::slice::Iter<'_, String>,
        parsed: &mut Parsed<'a>,
    ) -> Result<(), Unreadable> {
        let number = self.opts.iter().find(|o| o.has(Mark::Number));
        if let Some(opt) = number
            && cluster.starts_with(|c: char| c.is_ascii_digit())
        {
            if !cluster.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Unreadable::MixedNumber(word.to_owned()));
            }
            parsed.used.push(Used { opt, values: Vec::new() });
            return Ok(());
        }
        for (i, c) in cluster.char_indices() {
            if c.is_ascii_digit() && number.is_some() {
                return Err(Unreadable::MixedNumber(word.to_owned()));
            }
            let opt = self.short(c).ok_or_else(|| Unreadable::Unknown(format!("-{c}")))?;
            if opt.values.is_empty() {
                parsed.used.push(Used { opt, values: Vec::new() });
                continue;
            }
            let rest = cluster.get(i + c.len_utf8()..).unwrap_or_default();
            let attached = (!rest.is_empty()).then(|| rest.to_owned());
            let values = values_of(opt, attached, words, word)?;
            parsed.used.push(Used { opt, values });
            return Ok(());
        }
        Ok(())
    }
}

/// The values of `opt`: the attached one, else (when required) the next words.
fn values_of(
    opt: &Opt,
    attached: Option<String>,
    words: &mut std::slice::Iter<'_, String>,
    word: &str,
) -> Result<Vec<String>, Unreadable> {
    if opt.values.is_empty() {
        return match attached {
            Some(_) => Err(Unreadable::UnexpectedValue(word.to_owned())),
            None => Ok(Vec::new()),
        };
    }
    let mut out = Vec::with_capacity(opt.values.len());
    match attached {
        Some(v) => out.push(v),
        None if opt.optional => return Ok(out),
        None => out.push(words.next().ok_or_else(|| Unreadable::MissingValue(word.to_owned()))?.clone()),
    }
    while out.len() < opt.values.len() {
        out.push(words.next().ok_or_else(|| Unreadable::MissingValue(word.to_owned()))?.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn spec(name: &str) -> &'static Spec {
        table().unwrap().get(name, None).unwrap()
    }

    fn names(p: &Parsed<'_>) -> Vec<String> {
        p.used
            .iter()
            .map(|u| format!("{}{}", u.opt.name(), u.values.iter().map(|v| format!("={v}")).collect::<String>()))
            .collect()
    }

    #[test]
    fn getopt_long_reads_clusters_attached_values_abbreviations_and_permutation() {
        let sort = spec("sort");
        let p = sort.parse(&words("-uo out in --outp=x --rev -k2")).unwrap();
        assert_eq!(names(&p), ["-u", "-o=out", "-o=x", "-r", "-k=2"]);
        assert_eq!(p.operands, ["in"]);
        let p = sort.parse(&words("in -- -o")).unwrap();
        assert_eq!(p.operands, ["in", "-o"]);
        assert!(matches!(sort.parse(&words("--s x")), Err(Unreadable::Ambiguous(_))));
        assert!(matches!(sort.parse(&words("--nonesuch")), Err(Unreadable::Unknown(_))));
        assert!(matches!(sort.parse(&words("-o")), Err(Unreadable::MissingValue(_))));
        assert!(matches!(sort.parse(&words("--reverse=x")), Err(Unreadable::UnexpectedValue(_))));
        let grep = spec("grep");
        let p = grep.parse(&words("-ne. x")).unwrap();
        assert_eq!(names(&p), ["-n", "-e=."]);
        assert_eq!(p.operands, ["x"]);
        let head = spec("head");
        assert_eq!(names(&head.parse(&words("-20 f")).unwrap()), ["-NUM"]);
        assert!(matches!(head.parse(&words("-5c f")), Err(Unreadable::MixedNumber(_))));
    }

    #[test]
    fn optional_values_are_attached_only_and_stop_parsers_stop() {
        let sed = spec("sed");
        let p = sed.parse(&words("-i.bak s/a/b/ f")).unwrap();
        assert_eq!(names(&p), ["-i=.bak"]);
        let p = sed.parse(&words("-i s/a/b/ f")).unwrap();
        assert_eq!(p.operands, ["s/a/b/", "f"]);
        let env = spec("env");
        let p = env.parse(&words("-i ls -l")).unwrap();
        assert_eq!(p.operands, ["ls", "-l"]);
    }
}
