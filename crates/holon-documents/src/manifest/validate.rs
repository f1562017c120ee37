//! Every rule of the manifest (docs/manifest.md) that the schema cannot express: rules that relate
//! fields to each other or need real parsers (SPDX, JSON Schema 2020-12, URLs).
//! Each violation names its JSON Pointer and says how to fix it.

use std::collections::HashSet;

use super::interface_schema::{check_interface_schema, value_depth};
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

/// Highest royalty an upstream author may demand of forks.
pub(super) const MIN_ROYALTY_MAX: Fixed6 = Fixed6::from_millionths(500_000);

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
