//! The committed JSON Schemas and the Rust validator never drift apart:
//! - every example validates against its schema alone and against the full validator;
//! - every invalid fixture is refused by the validator at the pointer it names, and the
//!   schema alone refuses exactly the fixtures whose rule is structural (`# schema: rejects`).

use std::path::{Path, PathBuf};

use holon::doc::{self, Limits, schema};
use holon::documents;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

fn header<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
        .unwrap_or_else(|| panic!("missing `# {key}:` header"))
}

#[test]
fn examples_pass_schema_and_validator() {
    let mut files = Vec::new();
    yaml_files(Path::new("examples/agents"), &mut files);
    yaml_files(Path::new("examples/mandates"), &mut files);
    assert!(files.len() >= 10, "examples went missing: {files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let value = doc::yaml::parse(&text, &Limits::default()).unwrap();
        let kind = doc::detect_kind(&value).unwrap();
        assert_eq!(schema::check(kind, &value), vec![], "{} against the schema", path.display());
        let checked = documents::check_value(&value).unwrap();
        assert!(checked.result.is_ok(), "{}: {:?}", path.display(), checked.result.err());
    }
}

#[test]
fn invalid_fixtures_are_refused() {
    let mut files = Vec::new();
    yaml_files(Path::new("testdata/invalid"), &mut files);
    assert!(files.len() >= 10);
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = header(&text, "expect");
        let structural = match header(&text, "schema") {
            "rejects" => true,
            "accepts" => false,
            other => panic!("{}: bad schema header {other}", path.display()),
        };
        let value = doc::yaml::parse(&text, &Limits::default()).unwrap();
        let kind = doc::detect_kind(&value).unwrap();
        let shape = schema::check(kind, &value);
        assert_eq!(!shape.is_empty(), structural, "{}: schema said {shape:?}", path.display());
        let violations = documents::check_value(&value).unwrap().result.unwrap_err();
        assert!(
            violations.iter().any(|v| v.path == expect),
            "{}: expected a violation at {expect}, got {violations:?}",
            path.display()
        );
        // `# says:` pins the advice a newcomer reads (issue #15): the specific rule, not
        // "the wrong form", and no internal type names.
        if let Some(says) = text.lines().find_map(|l| l.strip_prefix("# says: ")) {
            let shown: Vec<String> = schema::check(kind, &value).into_iter().map(|v| v.message).collect();
            assert!(
                shown.iter().any(|m| m.contains(says)),
                "{}: expected advice {says:?}, got {shown:?}",
                path.display()
            );
        }
        for v in &violations {
            assert!(!v.message.contains("single(") && !v.message.contains("multiple("), "{}: {v:?}", path.display());
        }
    }
}

#[test]
fn unreadable_fixtures_are_parse_errors() {
    let mut files = Vec::new();
    yaml_files(Path::new("testdata/unreadable"), &mut files);
    for path in files {
        assert!(documents::check_file(&path, &Limits::default()).is_err(), "{}", path.display());
    }
}

/// `schema/openapi.yaml` describes exactly the routes `holon serve` has: a route added to
/// the server without the document (or the reverse) fails here; schemathesis
/// (`.ci/schemathesis`) then holds each route's answers to the document.
#[test]
fn the_openapi_document_has_every_route_of_the_server() {
    let text = std::fs::read_to_string("schema/openapi.yaml").unwrap();
    let value = doc::yaml::parse(&text, &Limits::default()).unwrap();
    let mut documented: Vec<String> = value["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| ops.as_object().unwrap().keys().map(move |m| format!("{} {path}", m.to_uppercase())))
        .collect();
    let http = std::fs::read_to_string("src/serve/http.rs").unwrap();
    let mut served: Vec<String> = http
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".route(\""))
        .map(|rest| {
            let (path, handler) = rest.split_once("\", ").unwrap();
            let method = handler.split_once('(').unwrap().0.to_uppercase();
            format!("{method} {path}")
        })
        .collect();
    documented.sort();
    served.sort();
    assert!(served.len() >= 11, "the route parser went blind: {served:?}");
    assert_eq!(documented, served);
}

/// The bundled scenario passes `schema/holon-scenario.schema.json` and loads; the
/// schema's limits are the loader's (`CALLS_MAX`).
#[test]
fn the_scenario_schema_and_the_loader_agree() {
    let path = Path::new("examples/worked-example/scenario.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let value = doc::yaml::parse(&text, &Limits::default()).unwrap();
    assert_eq!(schema::check_scenario(&value), vec![]);
    assert!(holon::scenario::load(path, None).is_ok());
    let schema: serde_json::Value = serde_json::from_str(schema::SCENARIO_SCHEMA).unwrap();
    assert_eq!(schema["properties"]["calls"]["maxItems"], holon::scenario::CALLS_MAX);
    assert_eq!(schema["$defs"]["topCall"]["properties"]["sub_calls"]["maxItems"], holon::scenario::CALLS_MAX);
    // One call over the limit is refused by the schema, at its pointer.
    let mut many = value.clone();
    let call = many["calls"][0].clone();
    many["calls"] = serde_json::Value::Array(vec![call; holon::scenario::CALLS_MAX + 1]);
    let out = schema::check_scenario(&many);
    assert!(out.iter().any(|v| v.path == "/calls" && v.message.contains("more than 100")), "{out:?}");
}
