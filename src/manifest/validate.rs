//! Every rule of the manifest (docs/manifest.md) that the schema cannot express: rules that relate
//! fields to each other or need real parsers (SPDX, JSON Schema 2020-12, URLs).
//! Each violation names its JSON Pointer and says how to fix it.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::model::*;
use crate::doc::Violation;
use crate::money::Fixed6;

/// Codes the gateway reports itself. An agent cannot declare them, so they are never billed.
pub const RESERVED_ERROR_CODES: [&str; 7] = [
    "timeout",
    "invalid_output",
    "agent_crashed",
    "agent_error",
    "runtime_unavailable",
    "gateway_error",
    "invalid_input",
];

/// `uniqueItems: true` compares every pair of items; bound the list.
pub const UNIQUE_ITEMS_MAX: u64 = 1000;
/// Most subschema applications one interface schema may ask for on its deepest example
/// (each `anyOf`/`oneOf`/`allOf` branch, `$ref`, `not`, `if`/`then`/`else` and property or
/// item schema counts one). A fan-out of `anyOf` through `$ref` doubles the work per
/// level (docs/PERFORMANCE.md, "Hostile input").
pub const SCHEMA_APPLICATIONS_MAX: u64 = 100_000;
/// Longest chain of subschemas (through `$ref` and combinators) counted; bounds the stack.
pub const SCHEMA_CHAIN_MAX: usize = 256;
/// Highest royalty an upstream author may demand of forks.
pub const MIN_ROYALTY_MAX: Fixed6 = Fixed6::from_millionths(500_000);

/// Checks a typed manifest; empty means valid.
pub fn validate(m: &Manifest) -> Vec<Violation> {
    let mut out = Vec::new();
    check_license(&m.license, &mut out);
    check_source(&m.source, &mut out);
    let input_depth = m.examples.iter().map(|e| value_depth(&e.input)).max().unwrap_or(0);
    let output_depth = m.examples.iter().filter_map(|e| e.output.as_ref()).map(value_depth).max().unwrap_or(0);
    let input = check_interface_schema(&m.interface.input, input_depth, "/interface/input", &mut out);
    let output = check_interface_schema(&m.interface.output, output_depth, "/interface/output", &mut out);
    check_errors(m, &mut out);
    check_modes(&m.interface, &mut out);
    check_capabilities(&m.capabilities, &mut out);
    check_pricing(m, &mut out);
    check_runtime(&m.runtime, &mut out);
    check_data(&m.data, &mut out);
    check_lineage(m, &mut out);
    check_examples(m, input.as_ref(), output.as_ref(), &mut out);
    out
}

fn check_license(license: &str, out: &mut Vec<Violation>) {
    let expr = match spdx::Expression::parse(license) {
        Ok(e) => e,
        Err(_) => {
            out.push(Violation::new(
                "/license",
                format!("`{license}` is not an SPDX license identifier; use one such as MIT or Apache-2.0"),
            ));
            return;
        }
    };
    for req in expr.requirements() {
        let approved = matches!(&req.req.license, spdx::LicenseItem::Spdx { id, .. } if id.is_osi_approved());
        if !approved {
            out.push(Violation::new(
                "/license",
                format!(
                    "`{}` is not an OSI-approved license; agents that are not open source cannot be listed",
                    req.req.license
                ),
            ));
        }
    }
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `http(s)://host[...]` with a non-empty host and no spaces.
fn is_http_url(s: &str) -> bool {
    let rest = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://"));
    match rest {
        Some(rest) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            !host.is_empty() && !s.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn check_source(source: &Source, out: &mut Vec<Violation>) {
    let r = &source.git_ref;
    if !((r.len() == 40 || r.len() == 64) && is_hex(r)) {
        out.push(Violation::new(
            "/source/ref",
            format!("`{r}` is not a full commit hash: give the 40 (or 64) lower-case hex digits of the commit; branch and tag names are refused so callers know exactly which code runs"),
        ));
    }
    if !is_http_url(&source.repository) {
        out.push(Violation::new("/source/repository", "must be an http(s) URL of the source repository"));
    }
}

/// Checks that an interface schema is valid JSON Schema 2020-12 and compiles without
/// network access; returns the compiled validator for the examples.
fn check_interface_schema(
    schema: &Value,
    instance_depth: usize,
    path: &str,
    out: &mut Vec<Violation>,
) -> Option<jsonschema::Validator> {
    if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
        out.push(Violation::new(
            format!("{path}{}", e.instance_path()),
            format!("not a valid JSON Schema 2020-12: {e}"),
        ));
        return None;
    }
    check_unique_items(schema, path, out);
    if let Err(message) = schema_work(schema, instance_depth) {
        out.push(Violation::new(path, message));
        return None;
    }
    match jsonschema::draft202012::new(schema) {
        Ok(v) => Some(v),
        Err(e) => {
            out.push(Violation::new(path, format!("the schema cannot be compiled (remote $ref are not fetched): {e}")));
            None
        }
    }
}

/// How many levels of arrays and objects a value nests (a scalar is 0).
fn value_depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Keywords whose subschemas apply to the same value as the schema holding them.
const SAME_VALUE: [&str; 4] = ["not", "if", "then", "else"];
const SAME_VALUE_LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
/// Keywords whose subschemas apply to the value's items or properties.
const CHILD_VALUE: [&str; 6] =
    ["additionalProperties", "items", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"];
const CHILD_VALUE_MAPS: [&str; 2] = ["properties", "patternProperties"];
/// Keywords holding data, not schemas: never searched for `$ref`, `$id` or `$anchor`.
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];

/// Bounds the work of validating a value at most `instance_depth` deep against `schema`
/// before the schema is compiled: counts subschema applications, following local `$ref`s,
/// up to [`SCHEMA_APPLICATIONS_MAX`]. References that this count cannot follow (remote,
/// `$dynamicRef`, `$id` below the root) are refused rather than trusted.
fn schema_work(schema: &Value, instance_depth: usize) -> Result<u64, String> {
    let mut anchors = HashMap::new();
    collect_anchors(schema, true, &mut anchors)?;
    let mut work = SchemaWork { root: schema, anchors, memo: HashMap::new(), active: HashSet::new(), chain: 0 };
    work.cost(schema, instance_depth)
}

fn collect_anchors<'a>(node: &'a Value, root: bool, anchors: &mut HashMap<&'a str, &'a Value>) -> Result<(), String> {
    match node {
        Value::Object(map) => {
            if !root && map.get("$id").is_some_and(Value::is_string) {
                return Err("`$id` below the root of an interface schema is not supported: write the subschema under `$defs` and refer to it with `$ref: \"#/$defs/NAME\"`".into());
            }
            if map.get("$dynamicRef").is_some_and(Value::is_string) {
                return Err(
                    "`$dynamicRef` is not supported in interface schemas: use `$ref` to a local `#/$defs/NAME`".into(),
                );
            }
            if let Some(Value::String(name)) = map.get("$anchor") {
                anchors.insert(name.as_str(), node);
            }
            for (key, value) in map {
                if !DATA_KEYWORDS.contains(&key.as_str()) {
                    collect_anchors(value, false, anchors)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|v| collect_anchors(v, false, anchors)),
        _ => Ok(()),
    }
}

struct SchemaWork<'a> {
    root: &'a Value,
    anchors: HashMap<&'a str, &'a Value>,
    memo: HashMap<(*const Value, usize), u64>,
    /// Schemas being counted for the same value: meeting one again is a loop.
    active: HashSet<(*const Value, usize)>,
    /// Schemas on the current chain, bounded by [`SCHEMA_CHAIN_MAX`].
    chain: usize,
}

impl<'a> SchemaWork<'a> {
    fn cost(&mut self, node: &'a Value, depth: usize) -> Result<u64, String> {
        let key = (node as *const Value, depth);
        if let Some(known) = self.memo.get(&key) {
            return Ok(*known);
        }
        let Value::Object(map) = node else { return Ok(1) };
        if self.chain >= SCHEMA_CHAIN_MAX {
            return Err(format!(
                "subschemas nest (through `$ref` and combinators) more than {SCHEMA_CHAIN_MAX} levels deep; flatten the schema"
            ));
        }
        if !self.active.insert(key) {
            return Err("the schema refers to itself without descending into the value (a `$ref` loop through `allOf`/`anyOf`/`oneOf`/`not`/`if`): such a schema never finishes; break the loop".into());
        }
        let mut total: u64 = 1;
        let mut same: Vec<&'a Value> = Vec::new();
        let mut child: Vec<&'a Value> = Vec::new();
        for (keyword, value) in map {
            let k = keyword.as_str();
            if SAME_VALUE.contains(&k) {
                same.push(value);
            } else if SAME_VALUE_LISTS.contains(&k) {
                same.extend(value.as_array().into_iter().flatten());
            } else if k == "dependentSchemas" {
                same.extend(value.as_object().into_iter().flat_map(|m| m.values()));
            } else if k == "$ref" {
                same.push(self.resolve(value)?);
            } else if CHILD_VALUE.contains(&k) {
                child.push(value);
            } else if CHILD_VALUE_MAPS.contains(&k) {
                child.extend(value.as_object().into_iter().flat_map(|m| m.values()));
            } else if k == "prefixItems" {
                child.extend(value.as_array().into_iter().flatten());
            }
        }
        self.chain += 1;
        let counted = self.add_all(total, &same, depth).and_then(|total| match depth.checked_sub(1) {
            Some(below) => self.add_all(total, &child, below),
            None => Ok(total),
        });
        self.chain -= 1;
        total = counted?;
        self.active.remove(&key);
        self.memo.insert(key, total);
        Ok(total)
    }

    fn add_all(&mut self, mut total: u64, subs: &[&'a Value], depth: usize) -> Result<u64, String> {
        for sub in subs {
            total = total.saturating_add(self.cost(sub, depth)?);
            if total > SCHEMA_APPLICATIONS_MAX {
                return Err(format!(
                    "validating the examples against this schema would take more than {SCHEMA_APPLICATIONS_MAX} subschema applications: `anyOf`/`oneOf`/`allOf` branches that `$ref` other branches multiply; simplify the schema"
                ));
            }
        }
        Ok(total)
    }

    fn resolve(&self, reference: &Value) -> Result<&'a Value, String> {
        let Some(text) = reference.as_str() else { return Err("`$ref` must be a string".into()) };
        let found = match text.strip_prefix('#') {
            Some("") => Some(self.root),
            Some(pointer) if pointer.starts_with('/') => percent_decode(pointer).and_then(|p| self.root.pointer(&p)),
            Some(anchor) => self.anchors.get(anchor).copied(),
            None => None,
        };
        found.ok_or_else(|| {
            format!("`$ref: {text}` does not lead to a subschema of this schema: only local references (`#/$defs/NAME` or `#ANCHOR`) are accepted, remote ones are never fetched")
        })
    }
}

/// Decodes `%XX` escapes of a URI fragment; `None` if malformed.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn check_unique_items(schema: &Value, path: &str, out: &mut Vec<Violation>) {
    match schema {
        Value::Object(map) => {
            if map.get("uniqueItems") == Some(&Value::Bool(true)) {
                let bounded = map.get("maxItems").and_then(Value::as_u64).is_some_and(|n| n <= UNIQUE_ITEMS_MAX);
                if !bounded {
                    out.push(Violation::new(
                        format!("{path}/uniqueItems"),
                        format!("`uniqueItems: true` needs `maxItems` of at most {UNIQUE_ITEMS_MAX} beside it: checking uniqueness compares every pair of items"),
                    ));
                }
            }
            for (key, value) in map {
                check_unique_items(value, &format!("{path}/{}", crate::doc::pointer_escape(key)), out);
            }
        }
        Value::Array(items) => {
            for (i, value) in items.iter().enumerate() {
                check_unique_items(value, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn check_errors(m: &Manifest, out: &mut Vec<Violation>) {
    let mut seen = HashSet::new();
    for (i, e) in m.interface.errors.iter().enumerate() {
        let path = format!("/interface/errors/{i}");
        if !seen.insert(e.code.as_str()) {
            out.push(Violation::new(format!("{path}/code"), format!("error code `{}` is declared twice", e.code)));
        }
        if RESERVED_ERROR_CODES.contains(&e.code.as_str()) {
            out.push(Violation::new(
                format!("{path}/code"),
                format!(
                    "`{}` is reserved for the gateway and cannot be declared (reserved: {})",
                    e.code,
                    RESERVED_ERROR_CODES.join(", ")
                ),
            ));
        }
        if e.billed && m.pricing.charge_on() != ChargeOn::Attempt {
            out.push(Violation::new(
                format!("{path}/billed"),
                "`billed: true` only applies with `pricing.charge_on: attempt`; under `success` a failure is never billed",
            ));
        }
    }
}

fn check_modes(interface: &Interface, out: &mut Vec<Violation>) {
    if interface.clarification && !interface.modes.iter().any(|m| matches!(m, Mode::Async | Mode::Stream)) {
        out.push(Violation::new(
            "/interface/clarification",
            "`clarification: true` needs `async` or `stream` in `modes`: a sync call cannot pause to ask a question",
        ));
    }
}

fn check_capabilities(capabilities: &[Capability], out: &mut Vec<Violation>) {
    let mut seen = HashSet::new();
    for (i, c) in capabilities.iter().enumerate() {
        if !seen.insert(c.class.as_str()) {
            out.push(Violation::new(
                format!("/capabilities/{i}/class"),
                format!("class `{}` is listed twice", c.class),
            ));
        }
    }
}

fn check_pricing(m: &Manifest, out: &mut Vec<Violation>) {
    let p = &m.pricing;
    let need = |field: &str, present: bool, why: &str, out: &mut Vec<Violation>| {
        if !present {
            out.push(Violation::new(format!("/pricing/{field}"), format!("missing: {why}")));
        }
    };
    let forbid = |field: &str, present: bool, why: &str, out: &mut Vec<Violation>| {
        if present {
            out.push(Violation::new(format!("/pricing/{field}"), why.to_owned()));
        }
    };
    match p.model {
        PricingModel::Free => {
            forbid("amount", p.amount.is_some(), "a free agent has no `amount`; use `per_run` to charge", out);
            forbid("max", p.max.is_some(), "a free agent has no `max`", out);
            forbid("unit", p.unit.is_some(), "`unit` applies to `per_unit` pricing only", out);
        }
        PricingModel::PerRun => {
            need("amount", p.amount.is_some(), "`per_run` pricing needs `amount`, the price of one run", out);
            forbid("unit", p.unit.is_some(), "`unit` applies to `per_unit` pricing only", out);
            forbid(
                "max",
                p.max.is_some(),
                "`per_run` is bounded by `amount`; `max` applies to `per_unit` and `quote`",
                out,
            );
        }
        PricingModel::PerUnit => {
            need("unit", p.unit.is_some(), "`per_unit` pricing needs `unit` (what is counted, e.g. `page`)", out);
            need("max", p.max.is_some(), "`per_unit` pricing needs `max`: every paid model is bounded", out);
            if let (Some(amount), Some(max)) = (p.amount, p.max)
                && amount > max
            {
                out.push(Violation::new(
                    "/pricing/amount",
                    format!("the unit price {amount} is above the bound `max` {max}"),
                ));
            }
        }
        PricingModel::Quote => {
            need("max", p.max.is_some(), "`quote` pricing needs `max`: every paid model is bounded", out);
            forbid("unit", p.unit.is_some(), "`unit` applies to `per_unit` pricing only", out);
        }
    }
    let paid = p.model != PricingModel::Free || p.passthrough_cap().is_some();
    if paid && p.currency.is_none() {
        out.push(Violation::new(
            "/pricing/currency",
            "missing: a priced agent must say its currency, e.g. `currency: EUR`",
        ));
    }
    match &p.downstream {
        None if !m.calls.is_empty() => out.push(Violation::new(
            "/pricing/downstream",
            "missing: an agent with `calls` must declare how downstream costs are paid (`mode: included` or `mode: passthrough` with a `cap`)",
        )),
        Some(Downstream { mode: DownstreamMode::Passthrough, cap: None }) => {
            out.push(Violation::new("/pricing/downstream/cap", "missing: `passthrough` must have a `cap` so the caller's worst case is bounded"));
        }
        Some(Downstream { mode: DownstreamMode::Included, cap: Some(_) }) => {
            out.push(Violation::new("/pricing/downstream/cap", "`cap` applies to `passthrough` only; `included` costs are inside the price"));
        }
        _ => {}
    }
}

fn check_runtime(r: &Runtime, out: &mut Vec<Violation>) {
    match r.kind {
        RuntimeKind::Container => {
            let pinned = r
                .image
                .as_deref()
                .and_then(|img| img.rsplit_once("@sha256:"))
                .is_some_and(|(name, digest)| !name.is_empty() && digest.len() == 64 && is_hex(digest));
            if !pinned {
                out.push(Violation::new(
                    "/runtime/image",
                    "a container runtime needs `image` pinned by digest: `registry/name@sha256:` followed by 64 hex digits",
                ));
            }
            if r.endpoint.is_some() {
                out.push(Violation::new(
                    "/runtime/endpoint",
                    "`endpoint` applies to `mcp` and `a2a` runtimes; a container is hosted by the platform",
                ));
            }
        }
        RuntimeKind::Mcp | RuntimeKind::A2a => {
            if !r.endpoint.as_deref().is_some_and(is_http_url) {
                out.push(Violation::new(
                    "/runtime/endpoint",
                    format!("a `{}` runtime needs `endpoint`, the http(s) URL the gateway proxies", r.kind.as_str()),
                ));
            }
            if r.image.is_some() {
                out.push(Violation::new("/runtime/image", "`image` applies to `container` runtimes only"));
            }
        }
    }
}

fn check_data(d: &DataPolicy, out: &mut Vec<Violation>) {
    for (i, host) in d.egress.iter().enumerate() {
        let ok = host.split('.').all(|label| {
            !label.is_empty() && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        }) || host.strip_prefix("*.").is_some_and(|h| !h.is_empty() && !h.contains('*'));
        if !ok {
            out.push(Violation::new(
                format!("/data/egress/{i}"),
                format!("`{host}` is not a host name: list hosts like `api.example.com`, without scheme or path"),
            ));
        }
    }
}

fn check_lineage(m: &Manifest, out: &mut Vec<Violation>) {
    if let Some(l) = &m.lineage {
        if l.royalty > Fixed6::ONE {
            out.push(Violation::new("/lineage/royalty", "a royalty is a share between 0 and 1"));
        }
        if l.forked_from.id == m.id {
            out.push(Violation::new("/lineage/forked_from", "an agent cannot be a fork of itself"));
        }
    }
    if let Some(p) = &m.fork_policy
        && p.min_royalty > MIN_ROYALTY_MAX
    {
        out.push(Violation::new(
            "/fork_policy/min_royalty",
            format!("at most {MIN_ROYALTY_MAX}: upstream authors may not demand more than half"),
        ));
    }
}

fn check_examples(
    m: &Manifest,
    input: Option<&jsonschema::Validator>,
    output: Option<&jsonschema::Validator>,
    out: &mut Vec<Violation>,
) {
    let declared: HashSet<&str> = m.interface.errors.iter().map(|e| e.code.as_str()).collect();
    if !m.examples.iter().any(|e| e.error.is_none()) {
        out.push(Violation::new("/examples", "at least one successful example (one without `error`) is required"));
    }
    for (i, ex) in m.examples.iter().enumerate() {
        let path = format!("/examples/{i}");
        if let Some(v) = input {
            for e in v.iter_errors(&ex.input).take(5) {
                out.push(Violation::new(
                    format!("{path}/input{}", e.instance_path()),
                    format!("does not match `interface.input`: {e}"),
                ));
            }
        }
        if let (Some(v), Some(o)) = (output, &ex.output) {
            for e in v.iter_errors(o).take(5) {
                out.push(Violation::new(
                    format!("{path}/output{}", e.instance_path()),
                    format!("does not match `interface.output`: {e}"),
                ));
            }
        }
        if let Some(code) = &ex.error {
            if !declared.contains(code.as_str()) {
                out.push(Violation::new(
                    format!("{path}/error"),
                    format!("`{code}` is not declared in `interface.errors`"),
                ));
            }
            if ex.output.is_some() {
                out.push(Violation::new(
                    format!("{path}/output"),
                    "an example has either `output` or `error`, not both",
                ));
            }
        }
    }
}
