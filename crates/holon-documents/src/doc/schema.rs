//! The committed JSON Schemas (`schema/*.json`), compiled once, reporting every shape
//! violation of a document with its JSON Pointer and a sentence a person can act on.

use std::sync::OnceLock;

use jsonschema::Validator;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::{DocKind, Violation};

pub const MANIFEST_SCHEMA: &str = include_str!("../../../../schema/holon-manifest.schema.json");
pub const MANDATE_SCHEMA: &str = include_str!("../../../../schema/holon-mandate.schema.json");
pub const RECORD_SCHEMA: &str = include_str!("../../../../schema/holon-record.schema.json");
pub const KEYS_SCHEMA: &str = include_str!("../../../../schema/holon-keys.schema.json");
pub const REVOCATIONS_SCHEMA: &str = include_str!("../../../../schema/holon-revocations.schema.json");
#[cfg(feature = "job")]
pub const JOB_MANDATE_SCHEMA: &str = include_str!("../../../../schema/holon-job-mandate.schema.json");
/// A simulation scenario (`holon mandate simulate`): not a document of the pipeline (it
/// names files, read relative to it), but checked against its schema the same way.
pub const SCENARIO_SCHEMA: &str = include_str!("../../../../schema/holon-scenario.schema.json");

/// What a schema is checked for: a document kind, or a simulation scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Doc(DocKind),
    Scenario,
}

impl Target {
    fn text(self) -> &'static str {
        match self {
            Target::Doc(kind) => text(kind),
            Target::Scenario => SCENARIO_SCHEMA,
        }
    }
    fn slot(self) -> usize {
        match self {
            Target::Doc(kind) => slot(kind),
            Target::Scenario => KIND_SLOTS,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Target::Doc(kind) => kind.as_str(),
            Target::Scenario => "scenario",
        }
    }
}

/// The document kinds' slots, and one for the scenario.
const SLOTS: usize = KIND_SLOTS + 1;

/// Most violations reported for one document; past that the rest are summarised.
const VIOLATIONS_MAX: usize = 100;

/// The schema text of a document kind.
pub fn text(kind: DocKind) -> &'static str {
    match kind {
        DocKind::Manifest => MANIFEST_SCHEMA,
        DocKind::Mandate => MANDATE_SCHEMA,
        DocKind::Record => RECORD_SCHEMA,
        DocKind::Keys => KEYS_SCHEMA,
        DocKind::Revocations => REVOCATIONS_SCHEMA,
        #[cfg(feature = "job")]
        DocKind::JobMandate => JOB_MANDATE_SCHEMA,
    }
}

/// A committed schema that does not compile: our bug, reported as a violation (kept as
/// text: the cell caches it and the validator's error is not `Clone`).
#[derive(Debug, Clone, thiserror::Error)]
enum SchemaBug {
    #[error("no schema slot")]
    NoSlot,
    #[error("{0}")]
    NotJson(String),
    #[error("{0}")]
    NotASchema(String),
}

/// A kind's slot in the per-kind caches below.
const KIND_SLOTS: usize = 6;
fn slot(kind: DocKind) -> usize {
    match kind {
        DocKind::Manifest => 0,
        DocKind::Mandate => 1,
        DocKind::Record => 2,
        DocKind::Keys => 3,
        DocKind::Revocations => 4,
        #[cfg(feature = "job")]
        DocKind::JobMandate => 5,
    }
}

fn compiled(target: Target) -> Result<&'static Validator, SchemaBug> {
    static CELLS: [OnceLock<Result<Validator, SchemaBug>>; SLOTS] = [const { OnceLock::new() }; SLOTS];
    let cell = CELLS.get(target.slot()).ok_or(SchemaBug::NoSlot)?;
    cell.get_or_init(|| {
        let schema: Value = serde_json::from_str(target.text()).map_err(|e| SchemaBug::NotJson(e.to_string()))?;
        jsonschema::draft202012::new(&schema).map_err(|e| SchemaBug::NotASchema(e.to_string()))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Every shape violation of `value` against the schema of `kind`.
pub fn check(kind: DocKind, value: &Value) -> Vec<Violation> {
    examine(Target::Doc(kind), value).violations
}

/// Every shape violation of a simulation scenario.
pub fn check_scenario(value: &Value) -> Vec<Violation> {
    examine(Target::Scenario, value).violations
}

/// What one pass of the schema over a value finds.
pub(super) struct Examined {
    /// Every shape violation, as advice.
    pub violations: Vec<Violation>,
    /// Where the schema failed, as places to cut out of the value so the rest can be
    /// typed: the failing nodes, or for unknown keys those keys; and the objects missing
    /// a required key (nothing to cut: their problem is already reported). `None` when
    /// the root itself failed (or the schema did not compile), so nothing can be cut.
    pub places: Option<(Vec<String>, Vec<String>)>,
}

/// The shape violations of `value` and where they are, in one pass over the schema's
/// errors.
pub(super) fn examine_doc(kind: DocKind, value: &Value) -> Examined {
    examine(Target::Doc(kind), value)
}

fn examine(target: Target, value: &Value) -> Examined {
    let validator = match compiled(target) {
        Ok(v) => v,
        // A committed schema that does not compile is our bug; fail closed, loudly.
        Err(e) => {
            let message = format!("internal error: the {} schema does not compile: {e}", target.name());
            return Examined { violations: vec![Violation::new("/", message)], places: None };
        }
    };
    let mut out: Vec<Violation> = Vec::new();
    let (mut cut, mut missing, mut root_failed) = (Vec::new(), Vec::new(), false);
    for error in validator.iter_errors(value) {
        if out.len() == VIOLATIONS_MAX {
            out.push(Violation::new("/", "more violations not shown; fix the ones above first"));
            break;
        }
        let at = error.instance_path().to_string();
        match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                cut.extend(unexpected.iter().map(|k| format!("{at}/{}", super::pointer_escape(k))));
            }
            ValidationErrorKind::Required { .. } => missing.push(at.clone()),
            _ if at.is_empty() => root_failed = true,
            _ => cut.push(at.clone()),
        }
        let schema_path = error.schema_path().to_string();
        out.push(Violation::new(at, humanize(target, error.kind(), &schema_path, error.instance())));
    }
    out.sort();
    out.dedup();
    Examined { violations: out, places: (!root_failed).then_some((cut, missing)) }
}

/// Turns a schema error into advice. Money and patterns get specific words.
fn humanize(doc: Target, kind: &ValidationErrorKind, schema_path: &str, instance: &Value) -> String {
    let is_money = schema_path.contains("/$defs/money/");
    match kind {
        ValidationErrorKind::Type { .. } if is_money && instance.is_number() => {
            crate::money::Amount::written_as_number(&instance.to_string())
        }
        // YAML reads an unquoted 1.0 or 2026 as a number where the document wants text.
        ValidationErrorKind::Type { kind } if instance.is_number() && expected_types(kind) == "a string" => {
            let example = if schema_path.contains("/$defs/semver/") || schema_path.ends_with("/version/type") {
                "\"1.0.0\"".to_owned()
            } else {
                format!("\"{instance}\"")
            };
            format!("{instance} must be text, but YAML read it as a number: quote it, like {example}")
        }
        ValidationErrorKind::Type { kind } => {
            format!("{} has the wrong type: expected {}", short(instance), expected_types(kind))
        }
        ValidationErrorKind::OneOfNotValid { .. } if schema_path.contains("/$defs/ratio/") => {
            format!("{} must be between 0 and 1, as a number or a decimal string like \"0.97\"", short(instance))
        }
        ValidationErrorKind::OneOfNotValid { .. } if schema_path.contains("/$defs/seconds/") => {
            format!("{} must be a number of seconds of at least 0, like 2.5 or \"2.5\"", short(instance))
        }
        ValidationErrorKind::Pattern { .. } if is_money => {
            format!(
                "{instance} is not a decimal amount: use digits with an optional `.` and at most 6 decimals, like \"0.03\""
            )
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let keys: Vec<String> = unexpected.iter().map(|k| format!("`{k}`")).collect();
            let hints: Vec<String> = unexpected
                .iter()
                .filter_map(|k| {
                    nearest_key(doc, k).map(|near| {
                        if unexpected.len() == 1 { format!("`{near}`") } else { format!("`{near}` for `{k}`") }
                    })
                })
                .collect();
            let hint = if hints.is_empty() { String::new() } else { format!(" (did you mean {}?)", hints.join(", ")) };
            format!(
                "unknown key {}{hint}: check the spelling; unknown keys are refused so that a typo cannot be ignored",
                keys.join(", ")
            )
        }
        ValidationErrorKind::Required { property } => format!("missing required key {property}"),
        // A key of a map that fails the map's key rule (`fx: { usd: … }`).
        ValidationErrorKind::PropertyNames { error } => {
            let inner = humanize(doc, error.kind(), &error.schema_path().to_string(), error.instance());
            format!("key {}: {inner}", error.instance())
        }
        // `holon_scenario: 0.1` unquoted: YAML read the version as a number.
        ValidationErrorKind::Constant { expected_value } if instance.is_number() && expected_value.is_string() => {
            format!("{instance} must be text, but YAML read it as a number: quote it, like {expected_value}")
        }
        ValidationErrorKind::Constant { expected_value } => format!("must be {expected_value}"),
        ValidationErrorKind::Enum { options } => format!("{instance} is not one of {options}"),
        // The regular expression only where no words say the form.
        ValidationErrorKind::Pattern { pattern } => match pattern_hint(schema_path) {
            Some(hint) => format!("{instance} is not {hint}"),
            None => format!("{instance} is not in the expected form (pattern {pattern})"),
        },
        ValidationErrorKind::OneOfNotValid { .. }
            if schema_path.contains("/calls/") || schema_path.contains("/$defs/subCall/") =>
        {
            "a call names exactly one of `capability` or `agent`".to_owned()
        }
        _ => {
            let text = match kind {
                // The value shortened: a long list cut at 300 characters lost the rule.
                ValidationErrorKind::OneOfNotValid { .. } | ValidationErrorKind::OneOfMultipleValid { .. } => {
                    format!("{} has the wrong form", short(instance))
                }
                _ => format!("{} {}", short(instance), kind_text(kind)),
            };
            text.chars().take(300).collect()
        }
    }
}

/// The key of the kind's schema closest to `key` (at most 2 edits), for "did you mean".
/// Every key the schema names anywhere is a candidate: a near miss is a typo wherever it is.
fn nearest_key(doc: Target, key: &str) -> Option<&'static str> {
    static KEYS: [OnceLock<Vec<String>>; SLOTS] = [const { OnceLock::new() }; SLOTS];
    fn collect(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    out.extend(props.keys().cloned());
                }
                map.values().for_each(|v| collect(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }
    let keys = KEYS.get(doc.slot())?.get_or_init(|| {
        let mut out = Vec::new();
        if let Ok(schema) = serde_json::from_str::<Value>(doc.text()) {
            collect(&schema, &mut out);
        }
        out.sort();
        out.dedup();
        out
    });
    // Ties go to the key of the same length (a letter mistyped rather than one missing:
    // `agentz` is `agents`, not `agent`), then to byte order.
    let len = key.chars().count();
    keys.iter()
        .map(|k| (strsim::levenshtein(k, key), k.chars().count().abs_diff(len), k))
        .filter(|(d, _, k)| *d <= 2 && *d < len && k.as_str() != key)
        .min()
        .map(|(_, _, k)| k.as_str())
}

/// The JSON types a schema wanted, in words: "a string", "a string or null".
fn expected_types(kind: &jsonschema::error::TypeKind) -> String {
    let word = |t: jsonschema::JsonType| match t.to_string().as_str() {
        "object" => "a mapping".to_owned(),
        "array" => "a list".to_owned(),
        "integer" => "an integer".to_owned(),
        other => format!("a {other}"),
    };
    match kind {
        jsonschema::error::TypeKind::Single(t) => word(*t),
        jsonschema::error::TypeKind::Multiple(set) => set.iter().map(word).collect::<Vec<_>>().join(" or "),
    }
}

/// A value as it appears in a message: at most 60 characters of its JSON.
fn short(instance: &Value) -> String {
    let text = instance.to_string();
    if text.chars().count() > 60 { format!("{}…", text.chars().take(60).collect::<String>()) } else { text }
}

fn kind_text(kind: &ValidationErrorKind) -> String {
    match kind {
        ValidationErrorKind::Type { kind } => format!("has the wrong type: expected {}", expected_types(kind)),
        ValidationErrorKind::MinItems { limit } => format!("needs at least {limit} item(s)"),
        ValidationErrorKind::MaxItems { limit } => format!("has more than {limit} items"),
        ValidationErrorKind::MaxLength { limit } => format!("is longer than {limit} characters"),
        ValidationErrorKind::MinLength { limit } => format!("is shorter than {limit} characters"),
        ValidationErrorKind::Minimum { limit } => format!("is below the minimum {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("is above the maximum {limit}"),
        ValidationErrorKind::UniqueItems => "has duplicate items".to_owned(),
        other => format!("is invalid ({other:?})").chars().take(200).collect(),
    }
}

fn pattern_hint(schema_path: &str) -> Option<&'static str> {
    const HINTS: [(&str, &str); 12] = [
        ("/$defs/agentId/", "an agent id `namespace/name` in lower case"),
        ("/$defs/className/", "a capability class such as `extraction.table`"),
        ("/$defs/semver/", "a SemVer version such as 1.2.3"),
        ("/$defs/currency/", "a three-letter upper-case currency code such as EUR"),
        ("/$defs/retention/", "`none` or an ISO-8601 duration such as P7D"),
        ("/$defs/classPattern/", "a class pattern (`extraction.table`, `extraction.*` or `*`)"),
        ("/$defs/agentPattern/", "an agent pattern (`ns/name`, `ns/*` or `*`)"),
        ("/$defs/principal/", "an account (`alice`) or agent (`alice/assistant`)"),
        ("/$defs/mandateId/", "a mandate id such as `alice/m-2026-11`"),
        ("/implements/", "an interface reference such as `holon/extraction.table@1`"),
        ("/agent/", "an agent and version range such as `acme/company-lookup@^1`"),
        ("/$defs/outcome/", "an outcome: `success`, `invalid_output`, `error:CODE` or `gateway:CODE`"),
    ];
    HINTS.iter().find(|(key, _)| schema_path.contains(key)).map(|(_, hint)| *hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_schemas_compile() {
        for kind in [DocKind::Manifest, DocKind::Mandate, DocKind::Record, DocKind::Keys, DocKind::Revocations] {
            assert!(compiled(Target::Doc(kind)).is_ok(), "{kind:?}");
        }
        assert!(compiled(Target::Scenario).is_ok());
    }

    #[test]
    fn money_numbers_get_a_specific_message() {
        let v = serde_json::json!({"holon_record": "0.1", "agent": "a/b", "runs_30d": "x"});
        let out = check(DocKind::Record, &v);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].path, "/runs_30d");
    }
}
