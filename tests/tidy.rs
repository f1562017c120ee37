//! The project stands alone: no file cites documents that are not in the repository (the
//! rulings and the four specifications are in `docs/rulings.md`), and every relative link
//! in the Markdown docs leads to a file, and a heading, that exists.

use std::path::{Path, PathBuf};

/// Words that cite documents outside the repository.
const OUTSIDE_REFERENCES: [&str; 10] = [
    "DECISIONS.md",
    "seeds/",
    "000_72cc6f68",
    "001_02c93336",
    "002_6d08a2af",
    "003_e8da12f7",
    "delegation document",
    "job-mandate document",
    "mandate document §",
    "manifest document §",
];

/// Files whose owners have still to replace their outside references (the list handed
/// over with the change that added this test). Empty it as they do: the test fails both
/// on an offender missing here and on a file listed here that no longer offends.
const PENDING: [&str; 0] = [];

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn text_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    for dir in ["src", "docs", "tests"] {
        files_under(Path::new(dir), &mut files);
    }
    files.retain(|p| p != Path::new("tests/tidy.rs"));
    files
}

#[test]
fn no_reference_leaves_the_repository() {
    let mut offenders = Vec::new();
    for path in text_files() {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let name = path.to_string_lossy().replace('\\', "/");
        for (n, line) in text.lines().enumerate() {
            for word in OUTSIDE_REFERENCES {
                if line.contains(word) {
                    offenders.push((name.clone(), format!("{name}:{}: `{word}`: {}", n + 1, line.trim())));
                }
            }
        }
    }
    let unexpected: Vec<_> = offenders.iter().filter(|(f, _)| !PENDING.contains(&f.as_str())).map(|(_, l)| l).collect();
    assert!(
        unexpected.is_empty(),
        "cite docs/rulings.md (or the doc where the rule lives) instead:\n{}",
        unexpected.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n")
    );
    let done: Vec<_> = PENDING.iter().filter(|f| !offenders.iter().any(|(o, _)| o == *f)).collect();
    assert!(done.is_empty(), "no outside reference left in {done:?}: remove them from PENDING");
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of the `[text](target)` links outside code blocks and code spans.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let mut in_code = false;
    let mut out = Vec::new();
    for (n, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Drop code spans: a `](` inside backticks is not a link.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].to_owned()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn relative_links_resolve() {
    let mut docs = vec![PathBuf::from("README.md")];
    files_under(Path::new("docs"), &mut docs);
    docs.retain(|p| p.extension().is_some_and(|e| e == "md"));
    let mut broken = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() { doc.clone() } else { doc.parent().unwrap().join(file) };
            if !resolved.exists() {
                broken.push(format!("{}:{line}: {target}: no file {}", doc.display(), resolved.display()));
                continue;
            }
            if let (Some(fragment), true) = (fragment, resolved.extension().is_some_and(|e| e == "md")) {
                let headings = anchors(&std::fs::read_to_string(&resolved).unwrap());
                if !headings.iter().any(|h| h == fragment) {
                    broken.push(format!("{}:{line}: {target}: no heading #{fragment}", doc.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "\n{}", broken.join("\n"));
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert_eq!(slug(" Ranking (`holon search`)"), "ranking-holon-search");
    assert_eq!(links("see [a](b.md#c) and `[x](y)`"), vec![(1, "b.md#c".to_owned())]);
    assert_eq!(anchors("# A b\n```\n# not\n```\n## C"), vec!["a-b", "c"]);
}
