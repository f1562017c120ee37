//! The gateway conformance suite (issue #50; testdata/conformance/README.md): every scenario
//! of `testdata/conformance/*.yaml` through the library (`holon::gateway` with the engine
//! and its node), `holon serve`'s HTTP/JSON and its Envoy ext_authz `Check`, each on fresh
//! state; every step's answer normalized, checked against the scenario's expectations, and
//! compared across the surfaces field by field (only the differences the README's table
//! names are allowed). The library's transcripts go to `target/conformance/` for the Python
//! runner (`bindings/python/tests/test_conformance.py`) to compare its own with.
#![cfg(feature = "serve")]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

#[path = "conformance/library.rs"]
mod library;
#[path = "conformance/wire.rs"]
mod wire;

/// A normalized answer (the README's fields); `None`: the surface has no word for the step.
pub(crate) type Answer = Option<Map<String, Value>>;

/// One step: its operation (the YAML's one key besides `as` and `expect`), its arguments,
/// the name its reservation or held call takes, and what its answer must be.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub op: String,
    pub args: Value,
    pub name: Option<String>,
    pub expect: Map<String, Value>,
}

impl Step {
    pub(crate) fn arg(&self, key: &str) -> Option<&str> {
        self.args.get(key).and_then(Value::as_str)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub file: String,
    pub name: String,
    /// `litellm`: the LiteLLM plug-in's documents in place of the bundled examples.
    pub documents: Option<String>,
    /// Text replaced in files of the examples' copy, and files dropped from it.
    pub edits: Vec<(String, Vec<(String, String)>)>,
    pub drops: Vec<String>,
    pub steps: Vec<Step>,
}

impl Scenario {
    /// Applies the scenario's edits to a copy of the examples at `docs`.
    pub(crate) fn edit(&self, docs: &Path) {
        if let Some(documents) = &self.documents {
            assert_eq!(documents, "litellm", "{}: no documents `{documents}`", self.name);
            std::fs::remove_dir_all(docs).unwrap();
            common::copy_tree(Path::new(LITELLM_DOCS), docs);
        }
        for (file, replacements) in &self.edits {
            let path = docs.join(file);
            let mut text = std::fs::read_to_string(&path).unwrap();
            for (from, to) in replacements {
                assert!(text.contains(from), "{}: `{from}` is not in {file}", self.name);
                text = text.replace(from, to);
            }
            std::fs::write(&path, text).unwrap();
        }
        for file in &self.drops {
            std::fs::remove_file(docs.join(file)).unwrap();
        }
    }
}

/// Ids a surface gave, by the step names they were given under (and back).
#[derive(Debug, Default)]
pub(crate) struct Names {
    by_id: HashMap<String, String>,
    by_name: HashMap<String, String>,
}

impl Names {
    pub(crate) fn note(&mut self, id: &str, name: &str) {
        self.by_id.entry(id.to_owned()).or_insert_with(|| name.to_owned());
        self.by_name.entry(name.to_owned()).or_insert_with(|| id.to_owned());
    }

    /// The step name of `id`, naming it under `fresh` the first time it is seen.
    pub(crate) fn name_of(&mut self, id: &str, fresh: Option<&str>) -> Value {
        if let Some(name) = self.by_id.get(id) {
            return json!(name);
        }
        let name = fresh.unwrap_or(id).to_owned();
        self.note(id, &name);
        json!(name)
    }

    pub(crate) fn id(&self, name: &str) -> String {
        self.by_name.get(name).cloned().unwrap_or_else(|| format!("never-given-{name}"))
    }

    /// `text` with every id in backticks said by its step name (ids differ by surface), and
    /// a sentence's reading of the clock (`it is now 2026-12-08T00:09:11Z`) as `<now>`: the
    /// surfaces run a second apart.
    pub(crate) fn in_text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (id, name) in &self.by_id {
            out = out.replace(&format!("`{id}`"), &format!("`{name}`"));
        }
        const NOW: &str = "it is now ";
        if let Some(at) = out.find(NOW).map(|i| i + NOW.len())
            && out.get(at..at + 20).is_some_and(|t| t.ends_with('Z'))
        {
            out.replace_range(at..at + 20, "<now>");
        }
        out
    }
}

/// The LiteLLM plug-in's documents (a scenario's `documents: litellm`).
const LITELLM_DOCS: &str = "bindings/python/tests/litellm/docs";

/// A surface runs a scenario's steps on state of its own.
pub(crate) trait Surface {
    fn step(&mut self, step: &Step, names: &mut Names) -> Answer;
}

fn scenarios() -> Vec<Scenario> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("testdata/conformance")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let limits = holon::doc::Limits::default();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let list = holon::doc::yaml::parse(&text, &limits).unwrap();
        for s in list.as_array().unwrap() {
            out.push(scenario(&file.file_name().unwrap().to_string_lossy(), s));
        }
    }
    out
}

fn scenario(file: &str, s: &Value) -> Scenario {
    let name = s["name"].as_str().unwrap().to_owned();
    let edit = s.get("edit").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut edits = Vec::new();
    let mut drops = Vec::new();
    for (file, what) in edit {
        if file == "drop" {
            drops = what.as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect();
            continue;
        }
        let pairs = what.as_object().unwrap().iter().map(|(a, b)| (a.clone(), b.as_str().unwrap().to_owned()));
        edits.push((file, pairs.collect()));
    }
    let steps = s["steps"].as_array().unwrap().iter().map(step).collect();
    let documents = s.get("documents").and_then(Value::as_str).map(str::to_owned);
    Scenario { file: file.to_owned(), name, documents, edits, drops, steps }
}

fn step(s: &Value) -> Step {
    let map = s.as_object().unwrap();
    let (op, args) = map.iter().find(|(k, _)| !matches!(k.as_str(), "as" | "expect")).expect("an operation");
    Step {
        op: op.clone(),
        args: args.clone(),
        name: map.get("as").and_then(Value::as_str).map(str::to_owned),
        expect: map.get("expect").and_then(Value::as_object).cloned().unwrap_or_default(),
    }
}

/// The step's answer against its expectations: every field named must be as said (a `null`
/// expectation: absent); with `only`, the fields among those alone (what a surface carries).
fn check_expected(
    scenario: &Scenario,
    n: usize,
    surface: &str,
    answer: &Map<String, Value>,
    only: Option<&[&str]>,
) -> Vec<String> {
    let step = &scenario.steps[n];
    let mut out = Vec::new();
    for (key, want) in step.expect.iter().filter(|(k, _)| only.is_none_or(|f| f.contains(&k.as_str()))) {
        let got = answer.get(key).unwrap_or(&Value::Null);
        if got != want {
            out.push(format!(
                "{} / {}, step {} ({}), {surface}: `{key}` is {got}, expected {want}; the answer: {}",
                scenario.file,
                scenario.name,
                n + 1,
                step.op,
                Value::Object(answer.clone())
            ));
        }
    }
    out
}

/// What `surface` may give differently from the library for this step (the README's
/// table); `None`: nothing, the whole answers must be equal.
fn allowed_difference(surface: &str, step: &Step, library: &Map<String, Value>) -> Option<&'static [&'static str]> {
    let admit = step.op == "admit";
    if surface == "grpc" && admit && library.get("decision") == Some(&json!("allowed")) {
        // Envoy forwards an allowed request: only the reservation comes back.
        return Some(&["decision", "reservation"]);
    }
    if surface == "grpc" && step.op == "request" && library.get("decision") == Some(&json!("allowed")) {
        // The same, and the settle that followed over HTTP.
        return Some(&["decision", "reservation", "kept"]);
    }
    None
}

fn compare(
    scenario: &Scenario,
    n: usize,
    surface: &str,
    library: &Map<String, Value>,
    other: &Map<String, Value>,
) -> Vec<String> {
    let step = &scenario.steps[n];
    let fields: Vec<&str> = match allowed_difference(surface, step, library) {
        Some(fields) => fields.to_vec(),
        None => library.keys().chain(other.keys()).map(String::as_str).collect(),
    };
    let mut out = Vec::new();
    for field in fields {
        let (a, b) = (library.get(field).unwrap_or(&Value::Null), other.get(field).unwrap_or(&Value::Null));
        if a != b {
            out.push(format!(
                "{} / {}, step {} ({}): `{field}` differs: library {a}, {surface} {b}",
                scenario.file,
                scenario.name,
                n + 1,
                step.op
            ));
        }
    }
    out
}

/// Runs one scenario on one surface: every step's normalized answer.
fn run(surface: &mut dyn Surface, scenario: &Scenario) -> Vec<Answer> {
    let mut names = Names::default();
    scenario.steps.iter().enumerate().map(|(n, step)| one_step(surface, step, n, &mut names)).collect()
}

/// One step; a `request` (what a proxy does for one request) is an admit, and for an
/// allowed one its settle at the request's `cost`: its answer the admit's with `kept`.
fn one_step(surface: &mut dyn Surface, step: &Step, n: usize, names: &mut Names) -> Answer {
    if step.op != "request" {
        return surface.step(step, names);
    }
    let name = step.name.clone().unwrap_or_else(|| format!("request-{}", n + 1));
    let admit = Step { op: "admit".to_owned(), name: Some(name.clone()), ..step.clone() };
    let mut answer = surface.step(&admit, names)?;
    if answer.get("decision") == Some(&json!("allowed")) {
        let args = json!({ "reservation": name, "actual": step.arg("cost").unwrap(), "outcome": "success" });
        let settle = Step { op: "settle".to_owned(), args, name: None, expect: Map::new() };
        let settled = surface.step(&settle, names)?;
        answer.insert("kept".to_owned(), settled.get("kept").cloned().unwrap_or(Value::Null));
    }
    Some(answer)
}

#[test]
fn every_scenario_gives_the_same_answers_on_every_surface() {
    let scenarios = scenarios();
    assert!(scenarios.len() >= 40, "at least 40 scenarios: {}", scenarios.len());
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../conformance");
    std::fs::create_dir_all(&out).unwrap();
    let mut failures = Vec::new();
    let mut steps = 0;
    for scenario in &scenarios {
        let lib = run(&mut library::Library::start(scenario), scenario);
        let server = wire::Wire::start(scenario);
        let http = run(&mut server.http(), scenario);
        let server = wire::Wire::start(scenario);
        let grpc = run(&mut server.grpc(), scenario);
        for (n, answer) in lib.iter().enumerate() {
            let answer = answer.as_ref().expect("the library has a word for every step");
            steps += 1;
            failures.extend(check_expected(scenario, n, "library", answer, None));
            for (surface, answers) in [("http", &http), ("grpc", &grpc)] {
                if let Some(other) = &answers[n] {
                    // On the fields the surface carries (the README's table).
                    let carried = allowed_difference(surface, &scenario.steps[n], answer);
                    failures.extend(check_expected(scenario, n, surface, other, carried));
                    failures.extend(compare(scenario, n, surface, answer, other));
                }
            }
        }
        let transcript = json!({ "file": scenario.file, "name": scenario.name, "answers": lib });
        let file = out.join(format!("{}.json", slug(&scenario.name)));
        std::fs::write(file, serde_json::to_string_pretty(&transcript).unwrap()).unwrap();
    }
    let summary = format!(
        "conformance: {} scenarios, {steps} steps, 3 surfaces (library, http, grpc): {} differences\n",
        scenarios.len(),
        failures.len()
    );
    print!("{summary}");
    // .ci/run prints it after the tests (cargo test shows a passing test's output to nobody).
    std::fs::write(out.join("summary.txt"), &summary).unwrap();
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
}

/// A scenario's name as a file name.
pub(crate) fn slug(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect()
}
