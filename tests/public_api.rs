//! The library's public API as a text snapshot (`tests/public_api.txt`), held to the source:
//! a change to what a gateway can name (a new public item, a changed signature, a field
//! made public) fails this test until the snapshot changes with it, so every such change is
//! seen in review. Refresh it with
//!
//! ```text
//! HOLON_BLESS_PUBLIC_API=1 cargo test --test public_api
//! ```
//!
//! How the API is read (with a Rust parser, `syn`, on the four library packages' sources;
//! the binary's `src/cli/` and `src/serve/` are not the library): every item declared `pub`
//! outside `#[cfg(test)]`, with its signature. A `pub` item in a private module is public
//! only if something re-exports it, and the workspace's `unreachable_pub` lint (denied in
//! CI) warns on any that nothing re-exports, so "declared `pub`" is the public API. Items
//! under `#[doc(hidden)]` or there only with the `internals` feature (holon's own loom models
//! and stress tests; the ledger's module allows `unreachable_pub` without it) are listed with
//! `hidden` in front: public to holon's tests, not promised to a gateway.
//! Trait impls are listed by their header (`impl Display for Amount`), methods of inherent
//! impls by their signature.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

#[path = "common/source_tree.rs"]
mod source_tree;
use source_tree::{PACKAGES, files_under, has_attr, is_cfg_test};

use quote::ToTokens;

/// The files of the `holon` package that are not the library (the binary's).
const NOT_THE_LIBRARY: [&str; 4] = ["cli/", "serve/", "bin/", "main.rs"];

const SNAPSHOT: &str = "tests/public_api.txt";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `a::b` for `a/b.rs` and `a/b/mod.rs`; the crate's name for `lib.rs`.
fn module_of(krate: &str, relative: &str) -> String {
    let mut parts = vec![krate.to_owned()];
    parts.extend(relative.trim_end_matches(".rs").split('/').map(str::to_owned));
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// Public but not promised: `#[doc(hidden)]`, or there only with the `internals` feature.
fn is_hidden(attrs: &[syn::Attribute]) -> bool {
    has_attr(attrs, "doc", "hidden") || has_attr(attrs, "cfg", "feature = \"internals\"")
}

/// A module whose `pub` items are public only with the `internals` feature (it allows
/// `unreachable_pub` without it), so everything in it and under it is listed as hidden.
fn internals_only(file: &syn::File) -> bool {
    file.attrs.iter().any(|a| {
        a.path().is_ident("cfg_attr") && {
            let t = text(&a.meta);
            t.contains("feature = \"internals\"") && t.contains("unreachable_pub")
        }
    })
}

/// The modules a file declares `#[doc(hidden)] pub mod name;` (their items live in files of
/// their own, so the mark must reach them from here): holon's support code for its binary
/// and tests, public to them and not promised to a gateway.
fn hidden_file_modules(module: &str, items: &[syn::Item]) -> Vec<String> {
    let mut out = Vec::new();
    for item in items {
        if let syn::Item::Mod(m) = item {
            let inner = format!("{module}::{}", m.ident);
            if m.content.is_none() && is_pub(&m.vis) && is_hidden(&m.attrs) {
                out.push(inner);
            } else if let Some((_, items)) = &m.content {
                out.extend(hidden_file_modules(&inner, items));
            }
        }
    }
    out
}

fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

/// Tokens as one line, with the spaces the printer puts around punctuation taken out.
fn text(tokens: &impl ToTokens) -> String {
    let raw = tokens.to_token_stream().to_string();
    let mut s = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" : ", ": "),
        (" < ", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
        (" [", "["),
        ("[ ", "["),
        (" ]", "]"),
        (" ;", ";"),
        ("' ", "'"),
        ("# [", "#["),
        (" !", "!"),
    ] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s
}

/// A function's signature without its attributes and body.
fn signature(sig: &syn::Signature) -> String {
    text(sig)
}

/// Lines for a module's items, in module `module`; `hidden` when an enclosing item is
/// doc(hidden).
fn items_lines(module: &str, items: &[syn::Item], hidden: bool, out: &mut BTreeSet<String>) {
    let private = private_names(items);
    for item in items {
        item_lines(module, item, hidden, &private, out);
    }
}

/// The types and traits a module declares without `pub`: an impl of or for one of them is
/// not part of the API (`impl RowTx for Tx` of a store's private transaction).
fn private_names(items: &[syn::Item]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for item in items {
        let (vis, ident) = match item {
            syn::Item::Struct(s) => (&s.vis, &s.ident),
            syn::Item::Enum(e) => (&e.vis, &e.ident),
            syn::Item::Trait(t) => (&t.vis, &t.ident),
            syn::Item::Type(t) => (&t.vis, &t.ident),
            _ => continue,
        };
        if !is_pub(vis) {
            names.insert(ident.to_string());
        }
    }
    names
}

/// Lines for one item, in module `module`; `hidden` when an enclosing item is doc(hidden);
/// `private`: the module's private type and trait names.
fn item_lines(module: &str, item: &syn::Item, hidden: bool, private: &BTreeSet<String>, out: &mut BTreeSet<String>) {
    let line = |out: &mut BTreeSet<String>, attrs: &[syn::Attribute], what: String| {
        let mark = if hidden || is_hidden(attrs) { "hidden " } else { "" };
        out.insert(format!("{mark}{module}: {what}"));
    };
    match item {
        syn::Item::Fn(f) if is_pub(&f.vis) && !is_cfg_test(&f.attrs) => line(out, &f.attrs, signature(&f.sig)),
        syn::Item::Const(c) if is_pub(&c.vis) && !is_cfg_test(&c.attrs) => {
            line(out, &c.attrs, format!("const {}: {}", c.ident, text(&c.ty)));
        }
        syn::Item::Static(s) if is_pub(&s.vis) && !is_cfg_test(&s.attrs) => {
            line(out, &s.attrs, format!("static {}: {}", s.ident, text(&s.ty)));
        }
        syn::Item::Type(t) if is_pub(&t.vis) && !is_cfg_test(&t.attrs) => {
            line(out, &t.attrs, format!("type {}{} = {}", t.ident, text(&t.generics), text(&t.ty)));
        }
        syn::Item::Struct(s) if is_pub(&s.vis) && !is_cfg_test(&s.attrs) => {
            line(out, &s.attrs, format!("struct {}{}", s.ident, text(&s.generics)));
            for (i, f) in s.fields.iter().enumerate() {
                if is_pub(&f.vis) {
                    let name = f.ident.as_ref().map_or_else(|| i.to_string(), ToString::to_string);
                    line(out, &s.attrs, format!("field {}.{name}: {}", s.ident, text(&f.ty)));
                }
            }
        }
        syn::Item::Enum(e) if is_pub(&e.vis) && !is_cfg_test(&e.attrs) => {
            line(out, &e.attrs, format!("enum {}{}", e.ident, text(&e.generics)));
            for v in &e.variants {
                let cfg = v.attrs.iter().find(|a| a.path().is_ident("cfg")).map(|a| format!(" {}", text(a)));
                line(
                    out,
                    &e.attrs,
                    format!("variant {}::{}{}{}", e.ident, v.ident, text(&v.fields), cfg.unwrap_or_default()),
                );
            }
        }
        syn::Item::Trait(t) if is_pub(&t.vis) && !is_cfg_test(&t.attrs) => {
            line(out, &t.attrs, format!("trait {}{}", t.ident, text(&t.generics)));
            for ti in &t.items {
                if let syn::TraitItem::Fn(f) = ti {
                    line(out, &t.attrs, format!("trait fn {}::{}", t.ident, signature(&f.sig)));
                }
            }
        }
        syn::Item::Mod(m) if is_pub(&m.vis) && !is_cfg_test(&m.attrs) => {
            line(out, &m.attrs, format!("mod {}", m.ident));
            if let Some((_, items)) = &m.content {
                items_lines(&format!("{module}::{}", m.ident), items, hidden || is_hidden(&m.attrs), out);
            }
        }
        syn::Item::Use(u) if is_pub(&u.vis) && !is_cfg_test(&u.attrs) => {
            line(out, &u.attrs, format!("use {}", text(&u.tree)))
        }
        syn::Item::Impl(i) if !is_cfg_test(&i.attrs) && !of_private(i, private) => impl_lines(module, i, hidden, out),
        syn::Item::Macro(m) if has_attr_path(&m.attrs, "macro_export") => {
            line(out, &m.attrs, format!("macro {}", m.ident.as_ref().map(ToString::to_string).unwrap_or_default()));
        }
        _ => {}
    }
}

fn has_attr_path(attrs: &[syn::Attribute], name: &str) -> bool {
    attrs.iter().any(|a| a.path().is_ident(name))
}

/// Whether an impl is of a private trait or for a private type of its module.
fn of_private(i: &syn::ItemImpl, private: &BTreeSet<String>) -> bool {
    let last = |path: &syn::Path| path.segments.last().map(|s| s.ident.to_string());
    let ty = match &*i.self_ty {
        syn::Type::Path(p) => last(&p.path),
        _ => None,
    };
    let trait_ = i.trait_.as_ref().and_then(|(_, path, _)| last(path));
    [ty, trait_].into_iter().flatten().any(|name| private.contains(&name))
}

/// A trait impl by its header; an inherent impl by its public methods and constants.
fn impl_lines(module: &str, i: &syn::ItemImpl, hidden: bool, out: &mut BTreeSet<String>) {
    let mark = if hidden || is_hidden(&i.attrs) { "hidden " } else { "" };
    let ty = text(&i.self_ty);
    if let Some((_, path, _)) = &i.trait_ {
        out.insert(format!("{mark}{module}: impl{} {} for {ty}", text(&i.generics), text(path)));
        return;
    }
    for item in &i.items {
        match item {
            syn::ImplItem::Fn(f) if is_pub(&f.vis) && !is_cfg_test(&f.attrs) => {
                let m = if is_hidden(&f.attrs) { "hidden " } else { mark };
                out.insert(format!("{m}{module}: {ty}::{}", signature(&f.sig)));
            }
            syn::ImplItem::Const(c) if is_pub(&c.vis) && !is_cfg_test(&c.attrs) => {
                out.insert(format!("{mark}{module}: {ty}::const {}: {}", c.ident, text(&c.ty)));
            }
            _ => {}
        }
    }
}

/// The public API of the library, one line per item, sorted.
fn public_api() -> String {
    let mut files = Vec::new();
    for (package, dir) in PACKAGES {
        let krate = package.replace('-', "_");
        let src = root().join(dir);
        let mut paths = Vec::new();
        files_under(&src, Some("rs"), &mut paths);
        for p in paths {
            let relative = p.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            if NOT_THE_LIBRARY.iter().any(|n| relative.starts_with(n)) {
                continue;
            }
            let file = syn::parse_file(&std::fs::read_to_string(&p).unwrap()).unwrap();
            files.push((module_of(&krate, &relative), file));
        }
    }
    let mut internal: Vec<String> = files.iter().filter(|(_, f)| internals_only(f)).map(|(m, _)| m.clone()).collect();
    internal.extend(files.iter().flat_map(|(m, f)| hidden_file_modules(m, &f.items)));
    let mut lines = BTreeSet::new();
    for (module, file) in &files {
        let hidden = internal.iter().any(|m| module == m || module.starts_with(&format!("{m}::")));
        items_lines(module, &file.items, hidden, &mut lines);
    }
    let mut out = String::new();
    for l in lines {
        writeln!(out, "{l}").unwrap();
    }
    out
}

#[test]
fn the_public_api_is_the_committed_snapshot() {
    let now = public_api();
    let path = root().join(SNAPSHOT);
    if std::env::var_os("HOLON_BLESS_PUBLIC_API").is_some() {
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == now {
        return;
    }
    let before: BTreeSet<&str> = committed.lines().collect();
    let after: BTreeSet<&str> = now.lines().collect();
    let mut diff = String::new();
    for gone in before.difference(&after) {
        writeln!(diff, "- {gone}").unwrap();
    }
    for new in after.difference(&before) {
        writeln!(diff, "+ {new}").unwrap();
    }
    panic!(
        "the library's public API is not {SNAPSHOT} ({} lines removed or added):\n{diff}\nIf the change is meant, refresh the snapshot with `HOLON_BLESS_PUBLIC_API=1 cargo test --test public_api` and commit it with the change; if not, make the item private (`pub(crate)`).",
        diff.lines().count()
    );
}

/// The reader sees what it is for: a new public function, a field made public, a changed
/// signature, and nothing private or under `#[cfg(test)]`.
#[test]
fn the_reader_sees_public_items_and_their_signatures_only() {
    let read = |src: &str| {
        let file = syn::parse_file(src).unwrap();
        let mut lines = BTreeSet::new();
        items_lines("k", &file.items, false, &mut lines);
        lines.into_iter().collect::<Vec<_>>()
    };
    let base = "pub struct A { pub x: u64, y: u64 } impl A { pub fn f(&self, n: u32) -> Option<u64> { None } fn g(&self) {} } fn h() {} #[cfg(test)] pub fn t() {}";
    assert_eq!(read(base), ["k: A::fn f(&self, n: u32) -> Option<u64>", "k: field A.x: u64", "k: struct A"]);
    assert_eq!(read(&base.replace("y: u64", "pub y: u64")).len(), 4, "a field made public");
    assert!(read(&base.replace("n: u32", "n: u64")).contains(&"k: A::fn f(&self, n: u64) -> Option<u64>".to_owned()));
    assert_eq!(
        read("#[doc(hidden)] pub mod internals { pub use super::A; }"),
        ["hidden k: mod internals", "hidden k::internals: use super::A"]
    );
    let hidden_files = |src: &str| hidden_file_modules("k", &syn::parse_file(src).unwrap().items);
    assert_eq!(
        hidden_files("#[doc(hidden)] pub mod files; pub mod doc; pub mod engine { #[doc(hidden)] pub mod synthetic; }"),
        ["k::files", "k::engine::synthetic"],
        "a hidden module declared here, whose items live in a file of its own"
    );
    assert_eq!(read("impl std::fmt::Display for A {}"), ["k: impl std::fmt::Display for A"]);
    assert!(read("struct P; impl std::fmt::Display for P {}").is_empty(), "an impl for a private type");
    assert!(read("trait T {} impl T for A {}").is_empty(), "an impl of a private trait");
}

/// No two public types share a name (four `Outcome`s and two `Limits` once did: a gateway
/// importing both had to rename one, and a reader could not tell which a signature meant).
/// Hidden items do not count: they are not promised.
#[test]
fn no_two_public_types_share_a_name() {
    let api = public_api();
    let mut seen: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for line in api.lines().filter(|l| !l.starts_with("hidden ")) {
        let Some((module, what)) = line.split_once(": ") else { continue };
        for kind in ["struct ", "enum ", "trait ", "type "] {
            if let Some(rest) = what.strip_prefix(kind).filter(|r| !r.starts_with("fn ")) {
                let name = rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or(rest);
                seen.entry(name).or_default().push(module);
            }
        }
    }
    let twice: Vec<String> =
        seen.iter().filter(|(_, m)| m.len() > 1).map(|(n, m)| format!("{n} in {}", m.join(", "))).collect();
    assert!(twice.is_empty(), "public types that share a name (give each its own):\n{}", twice.join("\n"));
}
