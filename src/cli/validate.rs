//! `holon validate PATH...`: exit 0 all valid, 1 some invalid, 2 some unreadable.

use std::path::{Path, PathBuf};

use holon::doc::{self, DocError, Limits, Violation};
use holon::documents;
use serde::Serialize;

use super::exit;
use super::out::outln;
use super::style::Style;

#[derive(Serialize)]
struct FileReport {
    path: String,
    kind: Option<&'static str>,
    valid: bool,
    errors: Vec<Violation>,
    #[serde(skip)]
    unreadable: bool,
}

/// A YAML file a directory walk met that is not a document `validate` judges.
#[derive(Serialize)]
struct Skipped {
    path: String,
    reason: &'static str,
}

#[derive(Serialize)]
struct Report {
    files: Vec<FileReport>,
    skipped: Vec<Skipped>,
}

/// What a scenario file is, for the reports: `validate` checks one named on the command
/// line by loading it as `holon mandate simulate` does.
const SCENARIO: &str = "scenario";

pub(super) fn run(paths: &[PathBuf], json: bool, style: &Style) -> anyhow::Result<u8> {
    let mut files = Vec::new();
    let mut reports = Vec::new();
    for path in paths {
        if path.is_dir() {
            // Walk errors (too deep, too many files) are bad input: exit 2 via anyhow.
            files.extend(doc::yaml_files(path)?.into_iter().map(|p| (p, false)));
        } else {
            files.push((path.clone(), true));
        }
    }
    let limits = Limits::default();
    let mut skipped = Vec::new();
    for (path, named) in files {
        let report = check_one(&path, &limits);
        let foreign = report.kind.is_none()
            && report.errors.first().is_some_and(|e| e.message == DocError::UnknownKind.to_string());
        if !foreign {
            reports.push(report);
            continue;
        }
        let scenario = is_scenario(&path);
        if named && scenario {
            reports.push(check_scenario(&path));
        } else if named {
            reports.push(report);
        } else {
            // In a directory walk, YAML that is not a holon document is not ours to judge,
            // but the reader is told it was seen and passed over.
            let reason = if scenario {
                "a scenario: name it on the command line to check it (with the mandate and agents it names)"
            } else {
                "not a holon document (no top-level `holon`, `holon_mandate` or `holon_record` key)"
            };
            skipped.push(Skipped { path: path.display().to_string(), reason });
        }
    }
    let code = if reports.iter().any(|r| r.unreadable) {
        exit::BAD_INPUT
    } else if reports.iter().any(|r| !r.valid) {
        exit::FAILED
    } else {
        exit::OK
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&Report { files: reports, skipped })?)?;
    } else {
        print_human(&reports, style)?;
        for s in &skipped {
            outln!("{} {} {}", style.dim("skipped"), s.path, style.dim(&format!("({})", s.reason)))?;
        }
    }
    Ok(code)
}

/// Whether the file's top level has `holon_scenario:` (read as text: the file was already
/// found not to be a holon document).
fn is_scenario(path: &Path) -> bool {
    doc::read_text(path, &Limits::default()).is_ok_and(|text| text.lines().any(|l| l.starts_with("holon_scenario:")))
}

/// A scenario checked as `holon mandate simulate` loads it: its own shape, the mandate and
/// the agents it names.
fn check_scenario(path: &Path) -> FileReport {
    let shown = path.display().to_string();
    match holon::scenario::load(path, None) {
        Ok(_) => FileReport { path: shown, kind: Some(SCENARIO), valid: true, errors: Vec::new(), unreadable: false },
        Err(e) => FileReport {
            path: shown,
            kind: Some(SCENARIO),
            valid: false,
            errors: vec![Violation::new("", e.to_string())],
            unreadable: false,
        },
    }
}

fn check_one(path: &Path, limits: &Limits) -> FileReport {
    let shown = path.display().to_string();
    let checked = doc::read_text(path, limits).and_then(|text| documents::check_str(&text, limits));
    match checked {
        Ok(c) => {
            let errors = c.result.err().unwrap_or_default();
            FileReport { path: shown, kind: Some(c.kind.as_str()), valid: errors.is_empty(), errors, unreadable: false }
        }
        Err(e) => FileReport {
            path: shown,
            kind: None,
            valid: false,
            errors: vec![Violation::new("", e.to_string())],
            unreadable: true,
        },
    }
}

fn print_human(reports: &[FileReport], style: &Style) -> std::io::Result<()> {
    for r in reports {
        let kind = r.kind.unwrap_or("unreadable");
        if r.valid {
            outln!("{} {} {}", style.good("ok"), r.path, style.dim(&format!("({kind})")))?;
        } else {
            let mark = if r.unreadable { style.bad("unreadable") } else { style.bad("invalid") };
            outln!("{mark} {} {}", r.path, style.dim(&format!("({kind})")))?;
            for e in &r.errors {
                if e.path == "/" && (r.unreadable || r.kind == Some(SCENARIO)) {
                    outln!("    {}", e.message)?;
                } else {
                    outln!("    {} {}", style.bold(&e.path), e.message)?;
                }
            }
        }
    }
    let invalid = reports.iter().filter(|r| !r.valid).count();
    let summary = format!("{} file(s), {} valid, {invalid} with problems", reports.len(), reports.len() - invalid);
    outln!("{}", if invalid == 0 { style.good(&summary) } else { style.warn(&summary) })
}
