//! `holon validate PATH...`: exit 0 all valid, 1 some invalid (or, with `--strict`, some
//! warned about: an expired mandate), 2 some unreadable.

use std::path::{Path, PathBuf};

use holon::doc::{self, DocError, Limits, Violation};
use holon::documents::{self, Document};
use holon::lookup::RecordOrigin;
use holon::mandate::Mandate;
use holon::manifest::Manifest;
use holon::record::AgentRecord;
use holon::trust::{TrustedKeys, provenance};
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
    /// What is valid but will not do what its writer may expect (an expired mandate).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Violation>,
    #[serde(skip)]
    unreadable: bool,
    /// The document, when valid (for `--keys`' checks across files).
    #[serde(skip)]
    document: Option<Document>,
}

/// A YAML file a directory walk met that is not a document `validate` judges.
#[derive(Serialize)]
struct Skipped {
    path: String,
    reason: String,
}

#[derive(Serialize)]
struct Report {
    files: Vec<FileReport>,
    skipped: Vec<Skipped>,
}

/// What a scenario file is, for the reports: `validate` checks one named on the command
/// line by loading it as `holon mandate simulate` does.
const SCENARIO: &str = "scenario";

pub(super) fn run(
    paths: &[PathBuf],
    keys: Option<&Path>,
    json: bool,
    strict: bool,
    style: &Style,
) -> anyhow::Result<u8> {
    let keys = keys.map(documents::load_keys).transpose()?;
    let mut files = Vec::new();
    let mut reports = Vec::new();
    for path in paths {
        if path.is_dir() {
            // Walk errors (too deep, too many files) are bad input: exit 2 via anyhow.
            let found = doc::yaml_files(path)?;
            // Nothing checked is not a pass: a wrong directory in CI must not go green.
            if found.is_empty() {
                anyhow::bail!("{}: no .yaml or .yml file in it or below it: nothing to validate", path.display());
            }
            files.extend(found.into_iter().map(|p| (p, false)));
        } else if path.extension().is_some_and(|e| !matches!(e.to_str(), Some("yaml" | "yml" | "json"))) {
            // `holon validate README.md` read Markdown as YAML and blamed its `**bold**`.
            anyhow::bail!("{}: not a .yaml, .yml or .json file: holon documents are YAML", path.display());
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
        match classify_foreign(&path, &limits) {
            // Checked as `mandate simulate` loads it, in a walk too: its shape, then the
            // mandate and agents it names (relative to it, within the walk limits).
            Foreign::Scenario => reports.push(check_scenario(&path)),
            // A misspelt kind, or two kinds: a broken document, not someone else's YAML.
            Foreign::Unclear(problem) => reports.push(FileReport {
                errors: vec![problem],
                kind: Some(MISSPELT_KIND),
                unreadable: false,
                ..report
            }),
            Foreign::NotOurs if named => reports.push(report),
            // In a directory walk, YAML that is not a holon document is not ours to judge,
            // but the reader is told it was seen and passed over.
            Foreign::NotOurs => {
                skipped.push(Skipped { path: path.display().to_string(), reason: DocError::UnknownKind.to_string() });
            }
        }
    }
    if let Some(keys) = &keys {
        trust_checks(&mut reports, keys);
    }
    // Every file passed over: nothing was validated, which is not a pass.
    if reports.is_empty() {
        anyhow::bail!(
            "none of the {} YAML file(s) found is a holon document ({}): nothing validated",
            skipped.len(),
            DocError::UnknownKind
        );
    }
    let code = if reports.iter().any(|r| r.unreadable) {
        exit::BAD_INPUT
    } else if reports.iter().any(|r| !r.valid || (strict && !r.warnings.is_empty())) {
        // With `--strict`, a warning fails too: a CI gate must not pass a mandate that
        // admits nothing (an expired one).
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

/// A scenario checked as `holon mandate simulate` loads it: its own shape, the mandate and
/// the agents it names.
fn check_scenario(path: &Path) -> FileReport {
    let shown = path.display().to_string();
    match holon::scenario::load(path, None) {
        Ok(_) => FileReport {
            path: shown,
            kind: Some(SCENARIO),
            valid: true,
            errors: Vec::new(),
            warnings: Vec::new(),
            unreadable: false,
            document: None,
        },
        Err(e) => FileReport {
            path: shown,
            kind: Some(SCENARIO),
            valid: false,
            errors: match e {
                // Each shape violation at its own pointer, as for the documents.
                holon::scenario::ScenarioError::Load(holon::doc::LoadError::Invalid { violations, .. }) => violations,
                other => vec![Violation::new("", other.to_string())],
            },
            warnings: Vec::new(),
            unreadable: false,
            document: None,
        },
    }
}

/// The kind shown for a file whose kind key is misspelt or doubled.
const MISSPELT_KIND: &str = "unclear kind";

/// What a YAML file of no document kind is, by its top-level keys (read once).
enum Foreign {
    /// A simulation scenario (`holon_scenario`).
    Scenario,
    /// Meant as a holon document, but with two kind keys or one misspelt.
    Unclear(Violation),
    /// Someone else's YAML.
    NotOurs,
}

fn classify_foreign(path: &Path, limits: &Limits) -> Foreign {
    let Ok(value) = doc::read_text(path, limits).and_then(|text| doc::yaml::parse(&text, limits)) else {
        return Foreign::NotOurs;
    };
    let keys = doc::kind_keys_in(&value);
    if keys.len() > 1 {
        let named: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
        let message = format!(
            "{} name two kinds of document in one file: a document has exactly one; keep one and move the rest to a file of its own",
            named.join(" and ")
        );
        return Foreign::Unclear(Violation::new("/", message));
    }
    if keys == ["holon_scenario"] {
        return Foreign::Scenario;
    }
    match doc::kind_key_typo(&value) {
        Some((key, near)) => Foreign::Unclear(Violation::new(
            format!("/{}", doc::pointer_escape(&key)),
            format!(
                "`{key}` is not a document kind: did you mean `{near}`? (a file with a misspelt kind would otherwise be passed over as not a holon document)"
            ),
        )),
        None => Foreign::NotOurs,
    }
}

/// What is valid but will not do what its writer may expect, at `now`: a mandate that has
/// expired admits nothing (said, and `validate` still exits 0: it is a valid document;
/// `--strict` exits 1).
fn warnings(document: &Document, now: holon::time::Timestamp) -> Vec<Violation> {
    match document {
        Document::Mandate(m) if m.valid.until < now => vec![Violation::new(
            "/valid/until",
            format!(
                "the mandate expired at {} (it is now {now}): it admits no call; issue a new one to use it",
                m.valid.until
            ),
        )],
        _ => Vec::new(),
    }
}

fn check_one(path: &Path, limits: &Limits) -> FileReport {
    let shown = path.display().to_string();
    let checked = doc::read_text(path, limits).and_then(|text| documents::check_str(&text, limits));
    match checked {
        Ok(c) => {
            let kind = Some(c.kind.as_str());
            match c.result {
                Ok(document) => FileReport {
                    path: shown,
                    kind,
                    valid: true,
                    errors: Vec::new(),
                    warnings: warnings(&document, holon::time::Timestamp::now()),
                    unreadable: false,
                    document: Some(document),
                },
                Err(errors) => FileReport {
                    path: shown,
                    kind,
                    valid: false,
                    errors,
                    warnings: Vec::new(),
                    unreadable: false,
                    document: None,
                },
            }
        }
        Err(e) => FileReport {
            path: shown,
            kind: None,
            valid: false,
            errors: vec![Violation::new("", e.to_string())],
            warnings: Vec::new(),
            unreadable: true,
            document: None,
        },
    }
}

/// `--keys`: what an engine that requires signatures would refuse. Every mandate's chain
/// must hold (its parents among the files given), and every manifest needs a record among
/// them with its publisher's valid provenance signature (reported on the record when
/// there is one, else on the manifest).
fn trust_checks(reports: &mut [FileReport], keys: &TrustedKeys) {
    let mandates: Vec<Mandate> = reports
        .iter()
        .filter_map(|r| match &r.document {
            Some(Document::Mandate(m)) => Some((**m).clone()),
            _ => None,
        })
        .collect();
    let records: Vec<(usize, AgentRecord)> = reports
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match &r.document {
            Some(Document::Record(rec)) => Some((i, (**rec).clone())),
            _ => None,
        })
        .collect();
    let manifests: Vec<Manifest> = reports
        .iter()
        .filter_map(|r| match &r.document {
            Some(Document::Manifest(m)) => Some((**m).clone()),
            _ => None,
        })
        .collect();
    let catalog = holon::catalog::Catalog {
        entries: manifests
            .into_iter()
            .map(|manifest| holon::catalog::Entry { manifest, record: None, path: PathBuf::new() })
            .collect(),
    };
    let mut found: Vec<(usize, Violation)> = Vec::new();
    for (i, report) in reports.iter().enumerate() {
        match &report.document {
            Some(Document::Mandate(m)) => {
                let parent = |d: &holon::trust::Digest| mandates.iter().find(|p| p.digest().as_ref() == Some(d));
                if let Err(e) = holon::trust::verify_chain(m, &parent, keys, &catalog) {
                    found.push((i, Violation::new("/signature", e.to_string())));
                }
            }
            Some(Document::Manifest(m)) => {
                // The record the engine would compile with (the one rule, `lookup::record_for`).
                let here = Path::new(&report.path);
                let origin = |j: usize| {
                    reports.get(j).map_or(RecordOrigin::Elsewhere, |r| RecordOrigin::of(Path::new(&r.path), here))
                };
                let chosen = holon::lookup::record_for(m, records.iter().map(|(j, r)| (origin(*j), r)));
                let chosen = records.iter().find(|(_, r)| chosen.is_some_and(|c| std::ptr::eq(c, r)));
                match chosen.map(|(j, r)| (*j, provenance::verify(m, Some(r), keys))) {
                    Some((_, Ok(()))) => {}
                    Some((j, Err(e))) => found.push((j, Violation::new("/provenance", e.to_string()))),
                    None => found.push((
                        i,
                        Violation::new(
                            "/",
                            format!("{}@{}: no record among these files carries its publisher's provenance signature: pass the agent's record too", m.id, m.version),
                        ),
                    )),
                }
            }
            _ => {}
        }
    }
    for (i, violation) in found {
        if let Some(report) = reports.get_mut(i) {
            report.valid = false;
            if !report.errors.contains(&violation) {
                report.errors.push(violation);
            }
        }
    }
}

fn print_human(reports: &[FileReport], style: &Style) -> std::io::Result<()> {
    for r in reports {
        let kind = r.kind.unwrap_or("unreadable");
        if r.valid {
            outln!("{} {} {}", style.good("ok"), r.path, style.dim(&format!("({kind})")))?;
            for w in &r.warnings {
                outln!("    {} {} {}", style.warn("warning"), style.bold(&w.path), w.message)?;
            }
        } else {
            let mark = if r.unreadable { style.bad("unreadable") } else { style.bad("invalid") };
            // "unreadable x.yaml (unreadable)" said it twice.
            let shown_kind = if r.kind.is_some() { style.dim(&format!(" ({kind})")) } else { String::new() };
            outln!("{mark} {}{shown_kind}", r.path)?;
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
