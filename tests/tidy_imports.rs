//! The layers import downwards, and no modules import each other in a circle, checked on
//! the source with a real Rust parser (`syn`), not by grep:
//!
//! - **Layers**: each top-level module of the library and the binary has a layer in the
//!   table of docs/ARCHITECTURE.md ("Layers"); a module may use modules of its own layer
//!   and the layers below, never one above.
//! - **No circles**, at every level: the children of one module (its files and
//!   directories) may use each other only one way round. A parent may use its children and
//!   a child its parent's own items; a name the parent imports from a child counts as that
//!   child (`super::Shadowed` re-exported from `shadow` is an arrow to `shadow`).
//!
//! Unit tests (`#[cfg(test)]` items) are not counted: a test may build its fixtures from any
//! layer. Paths inside macro invocations are not seen (syn does not parse them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "common/source_tree.rs"]
mod source_tree;
use source_tree::{PACKAGES, files_under, is_cfg_test};

use syn::visit::Visit;

/// A module's path from holon's root: `["engine", "ledger"]`. The layer crates and the
/// binary share one namespace, the one the facade (`src/lib.rs`) shows: `holon::x`,
/// `holon_engine::x` and `crate::x` in any of them name the top-level module `x`, except in
/// the job crate, whose root is the module `job` (`holon::job`).
type ModPath = Vec<String>;

/// The module a crate's name stands for in a path (`holon_job::x` is `job::x`).
fn crate_root(name: &str) -> Option<ModPath> {
    match name {
        "holon" | "holon_documents" | "holon_engine" => Some(Vec::new()),
        "holon_job" => Some(vec!["job".to_owned()]),
        _ => None,
    }
}

/// One use of another module: where it is written and what it names.
#[derive(Debug, Clone)]
struct Use {
    file: String,
    line: usize,
    target: ModPath,
}

/// What one source file holds, for the checks.
struct Source {
    /// The package the file belongs to (`holon-engine`).
    package: String,
    module: ModPath,
    uses: Vec<Use>,
    /// Names this file's module imports (`use a::b::Name;`), to the path they come from.
    imports: BTreeMap<String, ModPath>,
}

/// The module a file under a package's `src/` is: `engine/mod.rs` is `engine`,
/// `engine/judge.rs` is `engine::judge`, `lib.rs` and `main.rs` the package's root
/// (`mount`: empty, or `job` for the job crate).
fn module_of(mount: &str, relative: &str) -> ModPath {
    let stem = relative.trim_end_matches(".rs");
    let mut parts: Vec<String> = mount.split('/').filter(|m| !m.is_empty()).map(str::to_owned).collect();
    parts.extend(stem.split('/').map(str::to_owned));
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Collects every path that starts at `crate`, `super`, `self` or one of holon's crates.
struct Collector<'a> {
    file: &'a str,
    /// The module the file's package root is (`crate::` starts there).
    root: &'a ModPath,
    module: &'a ModPath,
    uses: Vec<Use>,
    imports: BTreeMap<String, ModPath>,
}

impl Collector<'_> {
    /// Resolves a path written in this file to a path from the crate root; `None` for a
    /// path that does not start at the crate (std, a dependency, a local name).
    fn resolve(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let (mut base, rest): (ModPath, &[String]) = match first.as_str() {
            "crate" => (self.root.clone(), segments.get(1..)?),
            name if crate_root(name).is_some() => (crate_root(name)?, segments.get(1..)?),
            "self" | "super" => (self.module.clone(), segments),
            // A name this file imported stands for where it came from.
            name if self.imports.contains_key(name) => (self.imports[name].clone(), segments.get(1..)?),
            // Otherwise a path may start at a child module (`use b::Bee;` in `low`), which
            // `arrows` keeps only if that child exists: std, a dependency or a type is dropped.
            _ => (self.module.clone(), segments),
        };
        let mut rest = rest;
        while let Some(s) = rest.first() {
            match s.as_str() {
                "self" => {}
                "super" => {
                    base.pop()?;
                }
                _ => break,
            }
            rest = rest.get(1..)?;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: &[String], line: usize) {
        if let Some(target) = self.resolve(segments) {
            self.uses.push(Use { file: self.file.to_owned(), line, target });
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut full = prefix.clone();
                if name != "self" {
                    full.push(name.clone());
                }
                self.import(&full, if name == "self" { prefix.last().cloned() } else { Some(name) }, n.ident.span());
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.import(&full, Some(r.rename.to_string()), r.ident.span());
            }
            syn::UseTree::Glob(g) => {
                let line = g.star_token.spans[0].start().line;
                let full = prefix.clone();
                self.record(&full, line);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn import(&mut self, full: &[String], name: Option<String>, span: proc_macro2::Span) {
        self.record(full, span.start().line);
        if let (Some(name), Some(target)) = (name, self.resolve(full)) {
            self.imports.insert(name, target);
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Trait(t) => &t.attrs,
            _ => &[],
        };
        if is_cfg_test(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        if u.leading_colon.is_some() {
            return;
        }
        self.use_tree(&mut prefix, &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = path.segments.first() {
            self.record(&segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, path);
    }
}

/// One file of the `holon` package (the planted trees of the last test are such files).
fn parse(relative: &str, text: &str) -> Source {
    parse_in("holon", "", relative, relative, text)
}

/// One file of `package`, whose root is the module `mount`; `shown` is its repository path.
fn parse_in(package: &str, mount: &str, relative: &str, shown: &str, text: &str) -> Source {
    let module = module_of(mount, relative);
    let root = module_of(mount, "lib.rs");
    let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{shown}: {e}"));
    let mut c = Collector { file: shown, root: &root, module: &module, uses: Vec::new(), imports: BTreeMap::new() };
    c.visit_file(&file);
    let (uses, imports) = (c.uses, c.imports);
    Source { package: package.to_owned(), module, uses, imports }
}

/// The modules that exist: every file's module and every prefix of one.
fn modules(sources: &[Source]) -> BTreeSet<ModPath> {
    let mut all = BTreeSet::new();
    for s in sources {
        for k in 0..=s.module.len() {
            all.insert(s.module[..k].to_vec());
        }
    }
    all
}

/// Follows a target through the names modules import, until it names a module (or an item
/// defined, not imported, where it points). At most 8 steps: re-exports do not go deeper.
fn canonical(
    target: &ModPath,
    known: &BTreeSet<ModPath>,
    imports: &BTreeMap<ModPath, BTreeMap<String, ModPath>>,
) -> ModPath {
    let mut t = target.clone();
    for _ in 0..8 {
        // The longest prefix that is a module; the next segment is an item in it.
        let k = (0..=t.len()).rev().find(|&k| known.contains(&t[..k].to_vec())).unwrap_or(0);
        let Some(item) = t.get(k) else { return t };
        let Some(from) = imports.get(&t[..k].to_vec()).and_then(|m| m.get(item)) else { return t };
        let mut next = from.clone();
        next.extend(t[k + 1..].iter().cloned());
        if next == t {
            return t;
        }
        t = next;
    }
    t
}

/// An arrow between two children of `parent`, with the first place that draws it.
type Arrows = BTreeMap<ModPath, BTreeMap<(String, String), String>>;

fn arrows(sources: &[Source]) -> Arrows {
    let known = modules(sources);
    let imports: BTreeMap<ModPath, BTreeMap<String, ModPath>> =
        sources.iter().map(|s| (s.module.clone(), s.imports.clone())).collect();
    let mut out: Arrows = BTreeMap::new();
    for s in sources {
        for u in &s.uses {
            let target = canonical(&u.target, &known, &imports);
            let k = s.module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let (Some(from), Some(to)) = (s.module.get(k), target.get(k)) else { continue };
            let parent = s.module[..k].to_vec();
            let mut child = parent.clone();
            child.push(to.clone());
            if !known.contains(&child) {
                continue; // an item of the parent, not a sibling module
            }
            out.entry(parent)
                .or_default()
                .entry((from.clone(), to.clone()))
                .or_insert_with(|| format!("{}:{}", u.file, u.line));
        }
    }
    out
}

/// Every circle among one parent's children, each once, as `a → b → … → a` with where each
/// arrow is drawn.
fn circles(arrows: &Arrows) -> Vec<String> {
    let mut found = Vec::new();
    for (parent, edges) in arrows {
        let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            graph.entry(a).or_default().push(b);
        }
        let mut seen_cycles = BTreeSet::new();
        for &start in graph.keys() {
            // Shortest way back to `start`, breadth first.
            let mut back: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut closed = None;
            while let Some(n) = queue.pop_front() {
                for &m in graph.get(n).map(Vec::as_slice).unwrap_or(&[]) {
                    if m == start {
                        closed = Some(n);
                        queue.clear();
                        break;
                    }
                    if !back.contains_key(m) {
                        back.insert(m, n);
                        queue.push_back(m);
                    }
                }
            }
            let Some(mut last) = closed else { continue };
            let mut ring = vec![start];
            let mut path = vec![last];
            while last != start {
                last = back.get(last).copied().unwrap_or(start);
                if last != start {
                    path.push(last);
                }
            }
            path.reverse();
            ring.extend(path);
            let mut key: Vec<&str> = ring.clone();
            key.sort_unstable();
            if !seen_cycles.insert(key) {
                continue;
            }
            ring.push(start);
            let steps: Vec<String> = ring
                .windows(2)
                .map(|w| format!("{} → {} ({})", w[0], w[1], edges[&(w[0].to_owned(), w[1].to_owned())]))
                .collect();
            let at = if parent.is_empty() { "the crate root".to_owned() } else { parent.join("::") };
            found.push(format!("a circle under {at}: {}", steps.join(", ")));
        }
    }
    found
}

/// The layer table of docs/ARCHITECTURE.md: the rows between the "Layers" heading and the
/// next heading, `| n | crate | `a`, `b` | what |`; module name to its layer and package.
fn layer_rows(architecture: &str) -> BTreeMap<String, (u32, String)> {
    let mut table = BTreeMap::new();
    let mut inside = false;
    for line in architecture.lines() {
        if line.starts_with("## ") {
            inside = line.trim() == "## Layers";
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (true, Some(n), Some(package), Some(names)) = (inside, cells.get(1), cells.get(2), cells.get(3)) else {
            continue;
        };
        let Ok(n) = n.parse::<u32>() else { continue };
        for name in names.split(',') {
            table.insert(name.trim().trim_matches('`').to_owned(), (n, package.trim_matches('`').to_owned()));
        }
    }
    table
}

/// The layer of each module the table places.
fn layer_table(architecture: &str) -> BTreeMap<String, u32> {
    layer_rows(architecture).into_iter().map(|(m, (n, _))| (m, n)).collect()
}

/// Top-level modules whose files are not in the package their row names.
fn misplaced(sources: &[Source], rows: &BTreeMap<String, (u32, String)>) -> Vec<String> {
    let mut found = BTreeSet::new();
    for s in sources {
        let Some(top) = s.module.first() else { continue };
        if let Some((_, package)) = rows.get(top)
            && *package != s.package
        {
            found.insert(format!("`{top}` is in the package {}, its row says {package}", s.package));
        }
    }
    found.into_iter().collect()
}

/// Arrows at the root that go up a layer, and top-level modules the table does not place.
fn upward(arrows: &Arrows, sources: &[Source], layers: &BTreeMap<String, u32>) -> Vec<String> {
    let mut found = Vec::new();
    let tops: BTreeSet<&String> = sources.iter().filter_map(|s| s.module.first()).collect();
    for top in tops {
        if !layers.contains_key(top) {
            found.push(format!("`{top}` has no layer in docs/ARCHITECTURE.md's table: add it to a row"));
        }
    }
    for ((from, to), at) in arrows.get(&Vec::new()).into_iter().flatten() {
        if let (Some(a), Some(b)) = (layers.get(from), layers.get(to))
            && b > a
        {
            found.push(format!("{from} (layer {a}) uses {to} (layer {b}), a layer above it: {at}"));
        }
    }
    found
}

/// The sources of holon's packages: the facade and the binary, and each layer crate
/// (`src/bin/` holds other binaries, each its own crate of one file).
fn project_sources() -> Vec<Source> {
    let mut out = Vec::new();
    for (package, dir) in PACKAGES {
        // The module the package's root is in holon's one namespace (`job` for holon-job).
        let mount = crate_root(&package.replace('-', "_")).expect("every package has a root").join("/");
        let mount = mount.as_str();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut paths = Vec::new();
        files_under(&src, Some("rs"), &mut paths);
        for p in &paths {
            let r = p.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            if r.starts_with("bin/") {
                continue;
            }
            let text = std::fs::read_to_string(p).unwrap();
            out.push(parse_in(package, mount, &r, &format!("{dir}/{r}"), &text));
        }
    }
    out
}

fn architecture() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md")).unwrap()
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let found = circles(&arrows(&project_sources()));
    assert!(found.is_empty(), "{} circles:\n{}", found.len(), found.join("\n"));
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let sources = project_sources();
    let found = upward(&arrows(&sources), &sources, &layer_table(&architecture()));
    assert!(found.is_empty(), "{} arrows up:\n{}", found.len(), found.join("\n"));
}

#[test]
fn every_module_is_in_the_crate_its_layer_row_names() {
    let found = misplaced(&project_sources(), &layer_rows(&architecture()));
    assert!(found.is_empty(), "move the module or correct its row:\n{}", found.join("\n"));
}

/// A layer crate holds a band of layers and depends only on crates below it, so that the
/// compiler refuses an arrow up between crates: the lowest layer of each crate is above
/// the highest of every crate below it in this order (`sync`, which only the engine crate
/// uses, is the one module of layer 1 outside the documents crate).
#[test]
fn the_layer_crates_hold_bands_of_layers_in_order() {
    let rows = layer_rows(&architecture());
    let band = |package: &str| {
        let layers: Vec<u32> =
            rows.iter().filter(|(m, (_, p))| p == package && m.as_str() != "sync").map(|(_, (n, _))| *n).collect();
        (*layers.iter().min().unwrap(), *layers.iter().max().unwrap())
    };
    let order = ["holon-documents", "holon-job", "holon-engine", "holon"];
    let bands: Vec<(u32, u32)> = order.iter().map(|p| band(p)).collect();
    // The job crate sits beside the typed documents (layer 4) and under the engine.
    assert!(bands[0].1 <= bands[2].0 && bands[1].1 < bands[2].0 && bands[2].1 < bands[3].0, "{order:?}: {bands:?}");
}

#[test]
fn every_layer_the_table_names_is_a_module() {
    let sources = project_sources();
    let tops: BTreeSet<String> = sources.iter().filter_map(|s| s.module.first().cloned()).collect();
    let stale: Vec<String> = layer_table(&architecture()).into_keys().filter(|m| !tops.contains(m)).collect();
    assert!(stale.is_empty(), "the layer table names modules that do not exist: {stale:?}");
}

/// The checks find what they are for: a planted circle (through a re-export, two levels
/// down) and a planted arrow up, and nothing in a clean tree or in a unit test.
#[test]
fn the_checks_catch_planted_offenders() {
    let tree = |extra_low: &str| {
        vec![
            parse("lib.rs", "pub mod low; pub mod high;"),
            parse("low/mod.rs", &format!("mod a; mod b; pub use b::Bee; {extra_low}")),
            parse("low/a.rs", "use super::Bee; pub struct Ay(Bee);"),
            parse("low/b.rs", "pub struct Bee; #[cfg(test)] mod tests { use super::super::a::Ay; }"),
            parse("high.rs", "use crate::low::Bee; pub fn f(_: Bee) {}"),
        ]
    };
    let layers: BTreeMap<String, u32> = [("low".to_owned(), 1), ("high".to_owned(), 2)].into();
    let rows: BTreeMap<String, (u32, String)> =
        [("low".to_owned(), (1, "holon".to_owned())), ("high".to_owned(), (2, "holon-engine".to_owned()))].into();
    assert_eq!(
        misplaced(&tree(""), &rows),
        vec!["`high` is in the package holon, its row says holon-engine".to_owned()]
    );

    let clean = tree("");
    assert_eq!(circles(&arrows(&clean)), Vec::<String>::new());
    assert_eq!(upward(&arrows(&clean), &clean, &layers), Vec::<String>::new());

    let mut circled = tree("");
    circled[3] = parse("low/b.rs", "pub struct Bee; pub fn g() -> super::a::Ay { todo!() }");
    let found = circles(&arrows(&circled));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("under low: a → b (low/a.rs:1), b → a (low/b.rs:1)"), "{found:?}");

    let mut up = tree("");
    up[2] = parse("low/a.rs", "use super::Bee; pub struct Ay(Bee);\nfn h() { crate::high::f(super::Bee) }");
    let found = upward(&arrows(&up), &up, &layers);
    assert_eq!(found, vec!["low (layer 1) uses high (layer 2), a layer above it: low/a.rs:2".to_owned()]);

    let unplaced = upward(&arrows(&clean), &clean, &[("low".to_owned(), 1)].into());
    assert_eq!(unplaced, vec!["`high` has no layer in docs/ARCHITECTURE.md's table: add it to a row".to_owned()]);
}
