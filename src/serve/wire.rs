//! The JSON the HTTP API speaks (schema/openapi.yaml describes it): request bodies read
//! strictly (unknown keys refused, money as decimal strings, every failure naming its
//! field), and the response bodies.

use holon::money::Amount;
use holon::time::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The request fields that carry money (a decimal string each).
const MONEY_FIELDS: [&str; 2] = ["/max_cost", "/actual"];

/// Largest request body read, in bytes.
pub(crate) const BODY_BYTES_MAX: usize = 64 * 1024;

/// A 4xx answer: what is wrong, and which field (a JSON Pointer) when one is at fault.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ErrorBody {
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The gateway protocol's code, where the error has one (`replay_reservation_ended`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
}

impl ErrorBody {
    pub(crate) fn new(error: impl Into<String>) -> ErrorBody {
        ErrorBody { error: error.into(), field: None, code: None }
    }
    pub(crate) fn field(field: &str, error: impl Into<String>) -> ErrorBody {
        ErrorBody { error: error.into(), field: Some(field.to_owned()), code: None }
    }
}

/// Reads a JSON body of type `T`; a syntax, type or unknown-key error names its field.
/// A good body is read once; only a bad one is read again to find the field at fault.
pub(crate) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ErrorBody> {
    if let Ok(value) = serde_json::from_slice(body) {
        return Ok(value);
    }
    // Not an object at all (an array, a string): said as such, not as the first thing a
    // field's parser met inside it.
    if let Ok(other) = serde_json::from_slice::<serde_json::Value>(body)
        && !other.is_object()
    {
        return Err(ErrorBody::field(
            "/",
            "the request body must be a JSON object, such as {\"mandate\": \"…\", \"agent\": \"…\"}; see schema/openapi.yaml",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        // A missing field is the field's fault, not the body's (`missing field `agent``).
        let missing = inner.strip_prefix("missing field `").and_then(|rest| rest.split('`').next());
        let field = match (missing, path.as_str()) {
            (Some(name), ".") => format!("/{name}"),
            (Some(name), path) => format!("/{}/{name}", path.replace('.', "/")),
            (None, ".") => "/".to_owned(),
            (None, path) => format!("/{}", path.replace('.', "/")),
        };
        // Money as a JSON number (`"max_cost": 0.6`): the documents' own hint.
        let number = ["invalid type: floating point `", "invalid type: integer `"]
            .iter()
            .find_map(|p| inner.strip_prefix(p))
            .and_then(|rest| rest.split('`').next())
            .filter(|_| MONEY_FIELDS.contains(&field.as_str()));
        match number {
            Some(n) => ErrorBody::field(&field, Amount::written_as_number(n)),
            None => ErrorBody::field(&field, format!("the request body: {inner}")),
        }
    })?;
    // What the fast path refused with a good value: something after it.
    de.end().map_err(|e| ErrorBody::field("/", format!("the request body: {e}")))?;
    Ok(value)
}

/// An optional body (approve, release): empty means the defaults.
pub(crate) fn parse_optional<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, ErrorBody> {
    if body.iter().all(u8::is_ascii_whitespace) { Ok(T::default()) } else { parse(body) }
}

/// The `at` of an optional `{"at"?}` body (approve, refuse, release): checked as [`at`]
/// checks it; an empty body means the server's clock.
pub(crate) fn optional_at(body: &[u8]) -> Result<Timestamp, ErrorBody> {
    parse_optional::<AtRequest>(body).and_then(|b| at("/at", b.at.as_deref()))
}

/// A money field: a decimal string in the mandate's currency.
pub(crate) fn money(field: &str, text: &str) -> Result<Amount, ErrorBody> {
    Amount::parse(text).map_err(|e| {
        ErrorBody::field(
            field,
            format!("`{field}` must be a decimal string such as \"0.25\" (at most 6 decimals): {e}"),
        )
    })
}

/// How far a call's `at` may be from the server's clock, in seconds. A caller's time
/// decides the mandate's validity window and the reservation's deadline: one far off would
/// pass an expired mandate or keep a slot for ever.
pub(crate) const AT_SKEW_S_MAX: i64 = 300;

/// The call's time: the `at` field (RFC 3339, within [`AT_SKEW_S_MAX`] of the server's
/// clock) or the server's clock.
pub(crate) fn at(field: &str, text: Option<&str>) -> Result<Timestamp, ErrorBody> {
    let now = Timestamp::now();
    let Some(t) = text else { return Ok(now) };
    let at = Timestamp::parse(t).map_err(|_| {
        ErrorBody::field(field, format!("`{field}` must be an RFC 3339 time such as \"2026-11-20T10:00:00Z\""))
    })?;
    if at.unix().abs_diff(now.unix()) > AT_SKEW_S_MAX.unsigned_abs() {
        return Err(ErrorBody::field(
            field,
            format!(
                "`{field}` is more than {AT_SKEW_S_MAX} s from the server's clock ({now}); leave it out to use the clock"
            ),
        ));
    }
    Ok(at)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AdmitRequest {
    pub mandate: String,
    pub agent: String,
    pub max_cost: Option<String>,
    /// The capability the gateway picked `agent` for (the caller asked for the capability).
    pub capability: Option<String>,
    pub at: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubCallRequest {
    pub agent: Option<String>,
    pub capability: Option<String>,
    pub max_cost: Option<String>,
    pub at: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    #[default]
    Success,
    Error,
    DeclaredFailure,
}

impl Outcome {
    /// The engine's outcome, for the receipt.
    pub(crate) fn engine(self) -> holon::engine::Outcome {
        match self {
            Outcome::Success => holon::engine::Outcome::Success,
            Outcome::Error => holon::engine::Outcome::Error,
            Outcome::DeclaredFailure => holon::engine::Outcome::DeclaredFailure,
        }
    }

    /// The engine's word for it (`holon::engine::Outcome::as_str`, the one spelling).
    pub(crate) fn as_str(self) -> &'static str {
        self.engine().as_str()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SettleRequest {
    pub actual: String,
    pub outcome: Option<Outcome>,
    #[serde(default, deserialize_with = "whole_number")]
    pub latency_ms: Option<u64>,
}

impl SettleRequest {
    /// What the receipt carries (records are built from it). A settle that says nothing is
    /// `unreported` there, though the metrics count it as a success.
    pub(crate) fn report(&self) -> holon::engine::RunReport {
        holon::engine::RunReport {
            outcome: self.outcome.map_or(holon::engine::Outcome::Unreported, Outcome::engine),
            latency_ms: self.latency_ms.and_then(|l| u32::try_from(l).ok()).unwrap_or(0),
        }
    }
}

/// A JSON number that is a whole number: `250` or `250.0` (JSON, and the OpenAPI
/// document's `integer`, do not tell them apart; many JSON encoders write the second).
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the cast is of a whole, non-negative f64 below 2^53, which u64 holds exactly"
)]
fn whole_number<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    let Some(n) = Option::<serde_json::Number>::deserialize(de)? else { return Ok(None) };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    match n.as_f64() {
        // Below 2^53 every whole f64 is exact, so the cast loses nothing.
        Some(f) if f.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&f) => Ok(Some(f as u64)),
        _ => Err(D::Error::custom(format!("expected a whole number of milliseconds, not {n}"))),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AtRequest {
    pub at: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReasonBody {
    pub code: &'static str,
    pub message: String,
}

/// The decision on a call (admit, sub-call, approve): always 200.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DecisionBody {
    pub decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    /// An allowed call's: the server (its node name) that holds the reservation, where it
    /// is settled or released (a retry answered by another server replays this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The agent the decision is about (for a sub-call by capability, the one picked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub worst_case: String,
    /// What an allowed orchestrator's sub-calls may spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_budget: Option<String>,
    /// The mandate's currency (absent when the call names a mandate the server does not
    /// hold).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Every reason for a denial or a hold, and on a shadowed server those of the decision
    /// it would have made.
    pub codes: Vec<&'static str>,
    pub reasons: Vec<ReasonBody>,
    /// For a call under a sub-mandate that an ancestor refused: that ancestor's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// The server runs in shadow mode (`--shadow`): `decision` is what the gateway acts on,
    /// `shadow_decision` what the rules decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow_decision: Option<&'static str>,
    /// Whether a retry with the same idempotency key gets this answer again
    /// (`holon::gateway::keep_answer`); not sent.
    #[serde(skip)]
    pub keep: bool,
}

/// A settlement's answer. Every amount is in the mandate's currency (docs/serve.md, "What
/// a settle answers").
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SettledBody {
    /// The id of the call's receipt (the reservation's id).
    pub receipt: String,
    /// What was reserved for the call: its own worst case plus, for an orchestrator, its
    /// sub-calls' budget.
    pub worst_case: String,
    /// Kept against the mandate for this call: the actual plus the sub-calls' passthrough,
    /// at most `worst_case`.
    pub kept: String,
    /// What the caller is billed for the call: `kept` (never above what was reserved).
    pub billed: String,
    /// Of `billed`, what the delegated run's sub-calls took.
    pub passthrough: String,
    /// The call's own cost as the gateway reported it (`actual` of the request).
    pub actual: String,
    /// The actual plus the passthrough was above `worst_case`: the bill was clamped to it
    /// (a gateway fault; counted in `holon_settlements_clamped_total`).
    pub clamped: bool,
    /// The reservation had expired and was reclaimed; this settle reconciled it.
    pub late: bool,
    pub outcome: &'static str,
    /// A shadow reservation (a call the rules would have denied or held): its money went
    /// into the mandate's shadow tally, not its budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReleasedBody {
    pub receipt: String,
    pub released: bool,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RefusedBody {
    pub pending: String,
    pub refused: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_written_as_a_number_gets_the_documents_hint() {
        let e = parse::<SettleRequest>(br#"{"actual": 100.0}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/actual"), "{e:?}");
        assert_eq!(e.error, "money must be a quoted decimal string, not a number: write \"100.0\"");
        let e = parse::<AdmitRequest>(br#"{"mandate": "m", "agent": "a/b", "max_cost": 2}"#).unwrap_err();
        assert!(e.error.ends_with("write \"2\""), "{e:?}");
        let e = parse::<AdmitRequest>(br#"{"mandate": 2, "agent": "a/b"}"#).unwrap_err();
        assert!(e.error.starts_with("the request body: invalid type"), "not money: {e:?}");
    }

    #[test]
    fn a_bad_body_names_its_field() {
        let e = parse::<SettleRequest>(br#"{"actual": 1}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/actual"), "{e:?}");
        let e = parse::<SettleRequest>(br#"{"actual": "1", "tip": "2"}"#).unwrap_err();
        assert!(e.error.contains("tip"), "{e:?}");
        let e = parse::<SettleRequest>(br#"{"actual": "1", "latency_ms": 1e400}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/latency_ms"), "{e:?}");
        let whole = parse::<SettleRequest>(br#"{"actual": "1", "latency_ms": 250.0}"#).unwrap();
        assert_eq!(whole.latency_ms, Some(250));
        for bad in ["250.5", "-1", "-1.0", "\"250\"", "1e300"] {
            let body = format!(r#"{{"actual": "1", "latency_ms": {bad}}}"#);
            let e = parse::<SettleRequest>(body.as_bytes()).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("/latency_ms"), "{bad}: {e:?}");
        }
        assert_eq!(parse::<SettleRequest>(br#"{"actual": "1", "latency_ms": null}"#).unwrap().latency_ms, None);
        assert!(parse::<SettleRequest>(b"{").is_err());
        // A missing field names itself; a body that is not an object says so.
        let e = parse::<SettleRequest>(br#"{"outcome": "success"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/actual"), "{e:?}");
        let e = parse::<AdmitRequest>(br#"{"mandate": "alice/m"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/agent"), "{e:?}");
        let e = parse::<SettleRequest>(b"[0]").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/"), "{e:?}");
        assert!(e.error.contains("must be a JSON object"), "{e:?}");
        // Nothing may follow the value (both paths agree).
        let e = parse::<SettleRequest>(br#"{"actual": "1"} {"actual": "2"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("/"), "{e:?}");
        assert!(parse::<SettleRequest>(b"{\"actual\": \"1\"}  \n").is_ok());
        assert_eq!(money("/actual", "NaN").unwrap_err().field.as_deref(), Some("/actual"));
        assert!(money("/actual", "-1").is_err() && money("/actual", "1e3").is_err());
        assert!(at("/at", Some("yesterday")).is_err());
        assert!(parse_optional::<AtRequest>(b"  ").unwrap().at.is_none());
    }
}
