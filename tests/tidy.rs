//! The project stands alone: no file cites documents that are not in the repository (the
//! rulings and the four specifications are in `docs/rulings.md`), and every relative link
//! in the Markdown docs leads to a file, and a heading, that exists.

use std::path::{Path, PathBuf};

#[path = "common/source_tree.rs"]
mod source_tree;
use source_tree::{files_under, is_cfg_test};

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

fn text_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    for dir in ["src", "crates", "docs", "tests"] {
        files_under(Path::new(dir), None, &mut files);
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
    files_under(Path::new("docs"), None, &mut docs);
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

// ---------------------------------------------------------------------------------------
// Architecture invariants (docs/ARCHITECTURE.md, "Architecture invariants"). Each check is
// a function of (path, text) pairs, so the test at the end can show it fails on a
// made-up offender.

/// Longest source file in `src/` and `crates/*/src/`, in lines.
const SOURCE_LINES_MAX: usize = 800;

/// Files allowed over [`SOURCE_LINES_MAX`] for a while (none now): the test fails both on a
/// long file missing here and on a file listed here that is no longer long.
const LONG_FILES_PENDING: [&str; 0] = [];

/// Longest function outside tests, in lines (from `fn` to its closing brace).
const FUNCTION_LINES_MAX: usize = 100;

/// Functions allowed over [`FUNCTION_LINES_MAX`] (`path: name`): two tables (one sentence
/// per denial code; one registration per metric) that read best whole. The test fails both
/// on a long function missing here and on one listed here that is no longer long, so the
/// list only shrinks.
const LONG_FUNCTIONS_PENDING: [&str; 2] =
    ["crates/holon-engine/src/admission/explain.rs: sentence", "src/serve/metrics.rs: new"];

/// Files allowed orderings explained further away than three lines, for a while (none now):
/// the test fails both on an offender missing here and on a file listed here that no
/// longer offends.
const ORDERINGS_PENDING: [&str; 0] = [];

/// The one module that imports `serde_yaml`.
const YAML_MODULE: &str = "crates/holon-documents/src/doc/yaml.rs";
/// The one module that writes bytes as hex.
const HEX_MODULE: &str = "crates/holon-documents/src/hex.rs";
/// The one library module that imports atomics, thread-locals and the snapshot cell.
const SYNC_MODULE: &str = "crates/holon-engine/src/sync.rs";
/// Code-map rows that may name a directory for every file under it (the binary's modules
/// are one row); every other source file has a row of its own.
const CODE_MAP_DIRECTORY_ROWS: [&str; 1] = ["src/cli/"];

/// Every `.rs` file under `dir` with its text, paths with `/`.
fn sources(dir: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    files_under(Path::new(dir), None, &mut files);
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| (p.to_string_lossy().replace('\\', "/"), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

/// The project's Rust sources: the `holon` package's `src/` and each layer crate's
/// `crates/*/src/` (docs/ARCHITECTURE.md, "Layers").
fn code() -> Vec<(String, String)> {
    let mut files = sources("src");
    let mut crates: Vec<PathBuf> = std::fs::read_dir("crates").unwrap().map(|e| e.unwrap().path()).collect();
    crates.sort();
    for krate in crates {
        files.extend(sources(&format!("{}/src", krate.to_string_lossy().replace('\\', "/"))));
    }
    files
}

/// Lines (file:line: text) that mention `word` outside comments.
fn code_mentions(files: &[(String, String)], word: &str, except: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| !except.contains(&p.as_str())) {
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains(word) {
                out.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    out
}

fn yaml_outside_its_module(files: &[(String, String)]) -> Vec<String> {
    code_mentions(files, "serde_yaml", &[YAML_MODULE])
}

/// Hex written anywhere but [`HEX_MODULE`]: a `{:02x}` format, or a table of the digits.
fn hex_outside_its_module(files: &[(String, String)]) -> Vec<String> {
    let mut found = code_mentions(files, ":02x}", &[HEX_MODULE]);
    found.extend(code_mentions(files, "b\"0123456789abcdef\"", &[HEX_MODULE]));
    found
}

/// The surfaces over the gateway protocol: the sidecar and the Python binding (its Rust and
/// its LiteLLM callback). docs/ARCHITECTURE.md, "Which layer owns which rule".
fn surfaces() -> Vec<(String, String)> {
    let mut files = sources("src/serve");
    files.extend(sources("bindings/python/src"));
    let litellm = "bindings/python/holon_litellm/__init__.py";
    files.push((litellm.to_owned(), std::fs::read_to_string(litellm).unwrap()));
    files
}

/// What only `holon::gateway` (or a layer below it) may hold, written in a surface: the
/// protocol's constants defined again, the lease codes that a wait loop or a keep rule
/// matches on, an outcome word spelled out.
fn protocol_rules_in_surfaces(files: &[(String, String)]) -> Vec<String> {
    let owned = [
        "const LEASE_WAIT_MS",
        "const LATENCY_MS_MAX",
        "const KEEP_S",
        "const KEYS_MAX",
        "const KEY_BYTES_MAX",
        "const IDEMPOTENCY_KEY_BYTES_MAX",
        "Code::LeasePending",
        "Code::StoreUnavailable",
        "\"lease_pending\"",
        "\"store_unavailable\"",
        "\"declared_failure\"",
        "\"unreported\"",
    ];
    let mut found = Vec::new();
    for word in owned {
        found.extend(code_mentions(files, word, &[]));
    }
    found.extend(code_mentions(files, "idempotency_key=f", &[]));
    found
}

/// The library's files (the binary, `src/cli/`, `src/serve/` and `src/main.rs`, is not the
/// engine).
fn library(files: &[(String, String)]) -> Vec<(String, String)> {
    files
        .iter()
        .filter(|(p, _)| !p.starts_with("src/cli/") && !p.starts_with("src/serve/") && p != "src/main.rs")
        .cloned()
        .collect()
}

fn sync_outside_its_module(files: &[(String, String)]) -> Vec<String> {
    let library = library(files);
    let mut found: Vec<String> =
        ["std::sync::atomic", "core::sync::atomic", "loom::", "thread_local!", "arc_swap", "ArcSwap"]
            .iter()
            .flat_map(|word| code_mentions(&library, word, &[SYNC_MODULE]))
            .collect();
    found.sort();
    found.dedup();
    found
}

/// Atomic orderings without a comment on their line or on one of the three lines above.
fn orderings_without_a_reason(files: &[(String, String)]) -> Vec<String> {
    const ORDERINGS: [&str; 5] =
        ["Ordering::Relaxed", "Ordering::Acquire", "Ordering::Release", "Ordering::AcqRel", "Ordering::SeqCst"];
    let mut out = Vec::new();
    for (path, text) in files {
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if !ORDERINGS.iter().any(|o| code.contains(o)) || code.trim_start().starts_with("use ") {
                continue;
            }
            let explained = lines[n.saturating_sub(3)..=n].iter().any(|l| l.contains("//"));
            if !explained {
                out.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    out
}

fn long_files(files: &[(String, String)]) -> Vec<String> {
    files.iter().filter(|(_, text)| text.lines().count() > SOURCE_LINES_MAX).map(|(p, _)| p.clone()).collect()
}

/// The paths named in the first cell of the code map's rows.
/// Functions (`path: name (lines)`) longer than [`FUNCTION_LINES_MAX`], outside
/// `#[cfg(test)]` items and test files (`tests.rs`, `*_test.rs`), read with a Rust parser.
fn long_functions(files: &[(String, String)]) -> Vec<String> {
    use syn::spanned::Spanned;
    struct Visit<'a> {
        path: &'a str,
        out: Vec<String>,
    }
    impl Visit<'_> {
        fn check(&mut self, name: &syn::Ident, start: proc_macro2::Span, block: &syn::Block) {
            let lines = block.span().end().line + 1 - start.start().line;
            if lines > FUNCTION_LINES_MAX {
                self.out.push(format!("{}: {name} ({lines})", self.path));
            }
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Visit<'_> {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if !is_cfg_test(&m.attrs) {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            if !is_cfg_test(&f.attrs) {
                self.check(&f.sig.ident, f.sig.fn_token.span, &f.block);
                syn::visit::visit_item_fn(self, f);
            }
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            if !is_cfg_test(&f.attrs) {
                self.check(&f.sig.ident, f.sig.fn_token.span, &f.block);
                syn::visit::visit_impl_item_fn(self, f);
            }
        }
    }
    let mut out = Vec::new();
    for (path, text) in files {
        if path.ends_with("/tests.rs") || path.ends_with("_test.rs") {
            continue;
        }
        let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut v = Visit { path, out: Vec::new() };
        syn::visit::Visit::visit_file(&mut v, &file);
        out.extend(v.out);
    }
    out
}

fn code_map_rows(architecture: &str) -> Vec<String> {
    let Some(start) = architecture.find("## Code map") else { return Vec::new() };
    let section = &architecture[start..];
    let end = section[1..].find("\n## ").map_or(section.len(), |i| i + 1);
    section[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(path, _)| path.to_owned())
        .collect()
}

/// Files in `src/` without a row of their own (or a directory row allowed to cover
/// them), and rows that name a `src/` path that does not exist.
fn code_map_gaps(files: &[(String, String)], rows: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, _) in files {
        let covered = rows
            .iter()
            .any(|r| r == path || (CODE_MAP_DIRECTORY_ROWS.contains(&r.as_str()) && path.starts_with(r.as_str())));
        if !covered {
            out.push(format!("{path}: no row in the code map"));
        }
    }
    for row in rows.iter().filter(|r| r.starts_with("src/") || r.starts_with("crates/")) {
        // A row may name a data file beside the code (an option table): it must exist.
        let data_file = !row.ends_with(".rs") && !row.ends_with('/') && std::path::Path::new(row).is_file();
        if !data_file && !files.iter().any(|(p, _)| p == row || (row.ends_with('/') && p.starts_with(row.as_str()))) {
            out.push(format!("{row}: a code-map row for a path that does not exist"));
        }
    }
    out
}

#[test]
fn only_the_yaml_module_imports_serde_yaml() {
    let mut files = code();
    for dir in ["tests", "benches", "examples", "fuzz/fuzz_targets"] {
        files.extend(sources(dir));
    }
    files.retain(|(p, _)| p != "tests/tidy.rs");
    let found = yaml_outside_its_module(&files);
    assert!(
        found.is_empty(),
        "only {YAML_MODULE} may use serde_yaml: parse with holon::doc::yaml::parse and work on serde_json::Value, or write YAML as text:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_hex_module_writes_hex() {
    let found = hex_outside_its_module(&code());
    assert!(
        found.is_empty(),
        "write hex with holon::hex::lower (or hex::sha256), the one encoding:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_sync_module_imports_atomics_thread_locals_and_the_snapshot_cell() {
    let found = sync_outside_its_module(&code());
    assert!(
        found.is_empty(),
        "only {SYNC_MODULE} may import atomics, thread-locals or the snapshot cell (loom swaps them there): add what you need to crate::sync and use it from there:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_atomic_ordering_says_why() {
    let found = orderings_without_a_reason(&code());
    let unexpected: Vec<_> =
        found.iter().filter(|l| !ORDERINGS_PENDING.iter().any(|f| l.starts_with(&format!("{f}:")))).collect();
    assert!(
        unexpected.is_empty(),
        "an atomic ordering needs a comment on its line or within the 3 lines above saying why it is enough:\n{}",
        unexpected.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n")
    );
    let done: Vec<_> =
        ORDERINGS_PENDING.iter().filter(|f| !found.iter().any(|l| l.starts_with(&format!("{f}:")))).collect();
    assert!(done.is_empty(), "every ordering in {done:?} says why now: remove them from ORDERINGS_PENDING");
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let long = long_files(&code());
    let unexpected: Vec<_> = long.iter().filter(|p| !LONG_FILES_PENDING.contains(&p.as_str())).collect();
    assert!(
        unexpected.is_empty(),
        "over {SOURCE_LINES_MAX} lines: split into submodules along the file's own steps (and add their rows to docs/ARCHITECTURE.md): {unexpected:?}"
    );
    let done: Vec<_> = LONG_FILES_PENDING.iter().filter(|f| !long.iter().any(|p| p == *f)).collect();
    assert!(done.is_empty(), "{done:?} no longer over {SOURCE_LINES_MAX} lines: remove them from LONG_FILES_PENDING");
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let long = long_functions(&code());
    let listed = |l: &String| LONG_FUNCTIONS_PENDING.iter().any(|p| l.starts_with(&format!("{p} (")));
    let unexpected: Vec<_> = long.iter().filter(|l| !listed(l)).collect();
    assert!(
        unexpected.is_empty(),
        "over {FUNCTION_LINES_MAX} lines: split along the function's own steps, each a function named for what it does: {unexpected:?}"
    );
    let done: Vec<_> =
        LONG_FUNCTIONS_PENDING.iter().filter(|p| !long.iter().any(|l| l.starts_with(&format!("{p} (")))).collect();
    assert!(
        done.is_empty(),
        "{done:?} no longer over {FUNCTION_LINES_MAX} lines: remove them from LONG_FUNCTIONS_PENDING"
    );
}

#[test]
fn every_source_file_is_in_the_code_map() {
    let architecture = std::fs::read_to_string("docs/ARCHITECTURE.md").unwrap();
    let gaps = code_map_gaps(&code(), &code_map_rows(&architecture));
    assert!(
        gaps.is_empty(),
        "docs/ARCHITECTURE.md's code map has one row per source file (only {CODE_MAP_DIRECTORY_ROWS:?} may stand for a directory): add a row saying what lives there, or drop the stale one:\n{}",
        gaps.join("\n")
    );
}

#[test]
fn no_surface_holds_a_protocol_rule() {
    let found = protocol_rules_in_surfaces(&surfaces());
    assert!(
        found.is_empty(),
        "a surface (src/serve/, bindings/) holds a rule of the gateway protocol: call holon::gateway instead (docs/ARCHITECTURE.md, \"Which layer owns which rule\"):\n{}",
        found.join("\n")
    );
}

/// The sidecar's lease wait as it was before `holon::gateway` (src/serve/service/mod.rs at
/// bf83940): put back into src/serve, the check above fails on it.
const OLD_SERVE_LEASE_WAIT: &str = r#"pub(crate) const LEASE_WAIT_MS: u64 = 2_000;
    pub(super) async fn waiting_for_lease<F, A>(&self, mut ask: F) -> Result<Admission<'static>, Refusal>
    where
        F: FnMut() -> A,
        A: std::future::Future<Output = Result<Admission<'static>, Refusal>>,
    {
        let deadline = std::time::Instant::now() + Duration::from_millis(LEASE_WAIT_MS);
        loop {
            let admission = ask().await?;
            let waiting = matches!(&admission, Admission::Denied(d)
                if !d.codes.is_empty() && d.codes.iter().all(|c| c == Code::LeasePending));
            if !waiting || std::time::Instant::now() >= deadline {
                return Ok(admission);
            }
            self.node.wake();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }"#;

#[test]
fn the_protocol_check_fails_on_the_old_lease_wait_put_back() {
    let mut files = surfaces();
    let (_, service) = files.iter_mut().find(|(p, _)| p == "src/serve/service/mod.rs").expect("the service");
    service.push_str(OLD_SERVE_LEASE_WAIT);
    let found = protocol_rules_in_surfaces(&files);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|l| l.starts_with("src/serve/service/mod.rs:")), "{found:?}");
    assert!(found[0].contains("const LEASE_WAIT_MS") && found[1].contains("Code::LeasePending"), "{found:?}");
}

#[test]
fn the_architecture_checks_catch_offenders() {
    let f = |p: &str, t: &str| vec![(p.to_owned(), t.to_owned())];
    assert_eq!(yaml_outside_its_module(&f("src/x.rs", "use serde_yaml::Value;")).len(), 1);
    assert!(yaml_outside_its_module(&f(YAML_MODULE, "use serde_yaml::Value;")).is_empty());
    assert!(yaml_outside_its_module(&f("src/x.rs", "// serde_yaml is not used here")).is_empty());
    assert_eq!(hex_outside_its_module(&f("src/x.rs", "let h = format!(\"{b:02x}\");")).len(), 1);
    assert!(hex_outside_its_module(&f(HEX_MODULE, "let h = format!(\"{b:02x}\");")).is_empty());

    assert_eq!(
        sync_outside_its_module(&f("crates/holon-engine/src/engine/x.rs", "use std::sync::atomic::AtomicU64;")).len(),
        1
    );
    assert_eq!(sync_outside_its_module(&f("src/x.rs", "thread_local! { static A: u8 = 0; }")).len(), 1);
    assert_eq!(sync_outside_its_module(&f("src/x.rs", "use arc_swap::ArcSwap;")).len(), 1);
    assert!(sync_outside_its_module(&f(SYNC_MODULE, "use std::sync::atomic::AtomicU64;")).is_empty());

    let bare =
        "fn f(a: &AtomicU64) {\n    let x = 1;\n    let y = 2;\n    let z = 3;\n    a.load(Ordering::Relaxed);\n}";
    assert_eq!(orderings_without_a_reason(&f("src/x.rs", bare)).len(), 1);
    let why = "fn f(a: &AtomicU64) {\n    // Relaxed: a hint only, the CAS decides.\n    a.load(Ordering::Relaxed);\n}";
    assert!(orderings_without_a_reason(&f("src/x.rs", why)).is_empty());
    assert!(orderings_without_a_reason(&f("src/x.rs", "a.cmp(b) == std::cmp::Ordering::Less")).is_empty());

    assert_eq!(long_files(&f("src/x.rs", &"x\n".repeat(SOURCE_LINES_MAX + 1))), vec!["src/x.rs".to_owned()]);
    assert!(long_files(&f("src/x.rs", &"x\n".repeat(SOURCE_LINES_MAX))).is_empty());
    let body = |n: usize| format!("fn long() {{\n{}}}\n", "    x();\n".repeat(n));
    assert_eq!(long_functions(&f("src/x.rs", &body(FUNCTION_LINES_MAX - 1))), ["src/x.rs: long (101)"]);
    assert!(long_functions(&f("src/x.rs", &body(FUNCTION_LINES_MAX - 2))).is_empty());
    let method = format!("impl A {{\n{}}}", body(FUNCTION_LINES_MAX));
    assert_eq!(long_functions(&f("src/x.rs", &method)).len(), 1, "a method counts too");
    let in_tests = format!("#[cfg(test)]\nmod tests {{\n{}}}", body(FUNCTION_LINES_MAX));
    assert!(long_functions(&f("src/x.rs", &in_tests)).is_empty(), "tests are not counted");

    let map = "## Code map\n| path | what |\n|---|---|\n| `src/a.rs` | A. |\n| `src/cli/` | The binary. |\n| `src/gone.rs` | Gone. |\n## Next\n| `src/b.rs` | not the code map |";
    let rows = code_map_rows(map);
    assert_eq!(rows, ["src/a.rs", "src/cli/", "src/gone.rs"]);
    let files = [f("src/a.rs", ""), f("src/b.rs", ""), f("src/cli/out.rs", "")].concat();
    assert_eq!(
        code_map_gaps(&files, &rows),
        ["src/b.rs: no row in the code map", "src/gone.rs: a code-map row for a path that does not exist"]
    );
}
