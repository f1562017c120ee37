//! The docs say what the code is, and tests keep them so (issue #27: ten of fifteen
//! statements checked by hand were false):
//!
//! - every constant a doc quotes with its value, `` `NAME` (value) ``, has that value in
//!   the code (`const NAME: … = …;` in `src/`, `crates/` or the Python binding's
//!   `bindings/python/src/`, read with a Rust parser, its expression evaluated: literals,
//!   `<<`, `*`, `+`, `-`, parentheses and other constants);
//!   a value in seconds quoted for a `_MS` constant is converted, `2^62` is a power;
//! - every repository path a doc names in backticks (`src/…`, `tests/…`, `docs/…`,
//!   `.ci/…`, `schema/…`, `examples/…`, `benches/…`, `fuzz/…`, `loom-tests/…`,
//!   `bindings/…`, `testdata/…`) exists.

use std::collections::BTreeMap;
use std::path::PathBuf;

#[path = "common/source_tree.rs"]
mod source_tree;
use source_tree::files_under;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The docs a reader is sent to: `docs/*.md` and the README.
fn docs() -> Vec<(String, String)> {
    let mut paths = vec![root().join("README.md")];
    files_under(&root().join("docs"), Some("md"), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root()).unwrap().display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// The given sources parsed.
fn parsed(sources: &[(String, String)]) -> Vec<syn::File> {
    sources.iter().map(|(name, text)| syn::parse_file(text).unwrap_or_else(|e| panic!("{name}: {e}"))).collect()
}

/// Every `const NAME: T = EXPR;` in the parsed sources, by name: the expressions as
/// written (one name may be defined in several modules).
fn constants(files: &[syn::File]) -> Consts<'_> {
    struct Collect<'a>(Consts<'a>);
    impl<'a> syn::visit::Visit<'a> for Collect<'a> {
        fn visit_item_const(&mut self, c: &'a syn::ItemConst) {
            self.0.entry(c.ident.to_string()).or_default().push(&c.expr);
            syn::visit::visit_item_const(self, c);
        }
        fn visit_impl_item_const(&mut self, c: &'a syn::ImplItemConst) {
            self.0.entry(c.ident.to_string()).or_default().push(&c.expr);
        }
    }
    let mut all = Collect(BTreeMap::new());
    for file in files {
        syn::visit::Visit::visit_file(&mut all, file);
    }
    all.0
}

type Consts<'a> = BTreeMap<String, Vec<&'a syn::Expr>>;

/// The value of a constant expression, where it is arithmetic on integers; `None` for
/// anything else (a string, a call, a name defined twice with different values).
fn eval(e: &syn::Expr, consts: &Consts<'_>, depth: u32) -> Option<u128> {
    if depth > 16 {
        return None;
    }
    match e {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse::<u128>().ok(),
        syn::Expr::Paren(p) => eval(&p.expr, consts, depth + 1),
        syn::Expr::Group(g) => eval(&g.expr, consts, depth + 1),
        syn::Expr::Cast(c) => eval(&c.expr, consts, depth + 1),
        syn::Expr::Binary(b) => {
            let (l, r) = (eval(&b.left, consts, depth + 1)?, eval(&b.right, consts, depth + 1)?);
            match b.op {
                syn::BinOp::Shl(_) => l.checked_shl(u32::try_from(r).ok()?),
                syn::BinOp::Mul(_) => l.checked_mul(r),
                syn::BinOp::Add(_) => l.checked_add(r),
                syn::BinOp::Sub(_) => l.checked_sub(r),
                syn::BinOp::Div(_) => l.checked_div(r),
                _ => None,
            }
        }
        syn::Expr::Path(p) => value_of(&p.path.segments.last()?.ident.to_string(), consts, depth + 1),
        _ => None,
    }
}

/// A constant's value, if every definition of the name has the same one.
fn value_of(name: &str, consts: &Consts<'_>, depth: u32) -> Option<u128> {
    let values: Vec<Option<u128>> = consts.get(name)?.iter().map(|e| eval(e, consts, depth)).collect();
    let first = (*values.first()?)?;
    values.iter().all(|v| *v == Some(first)).then_some(first)
}

/// What a doc quotes, as a number in the constant's own unit: `10,000`, `2^62`,
/// `3,600 s`, `250 ms`, `1 s` for a `_MS` constant (1,000). `None`: not a figure.
fn quoted(name: &str, text: &str) -> Option<u128> {
    let text = text.trim();
    let (number, unit) = match text.split_once(' ') {
        Some((n, u)) => (n, u.trim()),
        None => (text, ""),
    };
    let value = if let Some((base, exp)) = number.split_once('^') {
        base.parse::<u128>().ok()?.checked_pow(exp.parse().ok()?)?
    } else {
        let digits = number.replace(',', "");
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()?
    };
    match unit {
        "" => Some(value),
        "ms" if name.ends_with("_MS") || name.ends_with("_MS_MAX") || name.ends_with("_MS_MIN") => Some(value),
        "s" if name.contains("_MS") => value.checked_mul(1_000),
        "s" if name.ends_with("_S") || name.contains("_S_") => Some(value),
        // A unit the name does not carry (bytes, calls, …): the figure as it is.
        _ => Some(value),
    }
}

/// Every `` `NAME` (value) `` of the docs whose NAME is a constant of the code, checked;
/// answers the mismatches and how many quotes were checked.
fn check_constants(docs: &[(String, String)], consts: &Consts<'_>) -> (Vec<String>, usize) {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (doc, text) in docs {
        let mut rest = text.as_str();
        while let Some(start) = rest.find('`') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('`') else { break };
            let name = &after[..end];
            rest = &after[end + 1..];
            let is_const = name.len() > 2
                && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                && name.bytes().next().is_some_and(|b| b.is_ascii_uppercase());
            let Some(inner) = rest.strip_prefix(" (").and_then(|r| r.split_once(')')).map(|(i, _)| i) else { continue };
            if !is_const || !consts.contains_key(name) {
                continue;
            }
            let Some(said) = quoted(name, inner) else { continue };
            checked += 1;
            match value_of(name, consts, 0) {
                Some(v) if v == said => {}
                Some(v) => wrong.push(format!("{doc}: `{name}` ({inner}), but the code says {v}")),
                None => wrong.push(format!(
                    "{doc}: `{name}` ({inner}), but the code's value cannot be read (defined twice with different values, or not arithmetic)"
                )),
            }
        }
    }
    (wrong, checked)
}

const PATH_ROOTS: [&str; 12] = [
    "src/",
    "crates/",
    "tests/",
    "docs/",
    ".ci/",
    "schema/",
    "examples/",
    "benches/",
    "fuzz/",
    "loom-tests/",
    "bindings/",
    "testdata/",
];

/// Every backticked repository path of the docs that does not exist: `src/x.rs`,
/// `src/x.rs::item`, `tests/foo.rs::test`; globs and placeholders are not paths.
fn missing_paths(docs: &[(String, String)], exists: impl Fn(&str) -> bool) -> (Vec<String>, usize) {
    let mut missing = Vec::new();
    let mut checked = 0;
    for (doc, text) in docs {
        for (i, piece) in text.split('`').enumerate() {
            if i % 2 == 0 || !PATH_ROOTS.iter().any(|r| piece.starts_with(r)) {
                continue;
            }
            let path = piece.split("::").next().unwrap_or(piece);
            let path = path.split([' ', ':', '#']).next().unwrap_or(path);
            if path.contains(['*', '<', '{', '$', '…']) || path.contains("...") {
                continue;
            }
            checked += 1;
            if !exists(path) {
                missing.push(format!("{doc}: `{piece}` names {path}, which does not exist"));
            }
        }
    }
    (missing, checked)
}

/// The library's and binary's sources (the root package and the layer crates), and the
/// Python binding's (docs/python.md quotes its constants).
fn sources() -> Vec<(String, String)> {
    let mut paths = Vec::new();
    files_under(&root().join("src"), Some("rs"), &mut paths);
    files_under(&root().join("crates"), Some("rs"), &mut paths);
    files_under(&root().join("bindings/python/src"), Some("rs"), &mut paths);
    paths.sort();
    paths.iter().map(|p| (p.display().to_string(), std::fs::read_to_string(p).unwrap())).collect()
}

#[test]
fn every_constant_a_doc_quotes_has_that_value_in_the_code() {
    let files = parsed(&sources());
    let (wrong, checked) = check_constants(&docs(), &constants(&files));
    assert!(wrong.is_empty(), "{} quotes disagree with the code:\n{}", wrong.len(), wrong.join("\n"));
    eprintln!("{checked} quoted constants checked");
    // The docs quote some 30 constants this way; far fewer means the reader broke.
    assert!(checked >= 20, "only {checked} quoted constants were found: has the quoting style changed?");
}

#[test]
fn every_path_a_doc_names_exists() {
    let (missing, checked) = missing_paths(&docs(), |p| root().join(p).exists());
    assert!(missing.is_empty(), "{} paths in the docs do not exist:\n{}", missing.len(), missing.join("\n"));
    eprintln!("{checked} paths checked");
    assert!(checked >= 200, "only {checked} paths were found in the docs: has the reader broken?");
}

/// The checks catch what they are for: a wrong figure, a unit, a power, a constant built
/// from another, a missing path.
#[test]
fn the_checks_catch_planted_offenders() {
    let src = vec![(
        "a.rs".to_owned(),
        "const A_MAX: usize = 1_024; const B_MS: u64 = 2_000; const C_MAX: u64 = 1 << 62; const D_MAX: u64 = A_MAX * 2; \
         struct S; impl S { const E_S: u64 = 3_600; }"
            .to_owned(),
    )];
    let files = parsed(&src);
    let consts = constants(&files);
    let doc = |t: &str| vec![("d.md".to_owned(), t.to_owned())];
    let good = "`A_MAX` (1,024), `B_MS` (2 s), `B_MS` (2,000 ms), `C_MAX` (2^62), `D_MAX` (2,048), `E_S` (3,600 s), `NOT_A_CONST` (7)";
    assert_eq!(check_constants(&doc(good), &consts), (vec![], 6));
    let (wrong, _) = check_constants(&doc("`A_MAX` (1,000) and `B_MS` (3 s)"), &consts);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("`A_MAX` (1,000), but the code says 1024"), "{wrong:?}");

    let exists = |p: &str| p == "src/a.rs";
    assert_eq!(missing_paths(&doc("`src/a.rs`, `src/a.rs::f`, `src/*.rs`, `docs/<x>.md`"), exists), (vec![], 2));
    let (missing, _) = missing_paths(&doc("see `src/b.rs::g`"), exists);
    assert_eq!(missing, vec!["d.md: `src/b.rs::g` names src/b.rs, which does not exist".to_owned()]);
}
