//! Prometheus metrics (`GET /metrics`, text exposition format), with `prometheus-client`.
//! Counters and the latency histogram are updated by the handlers; the gauges read the
//! engine, the node and the reservation table at scrape time.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DecisionLabels {
    pub decision: &'static str,
    /// One of the decision's codes (`none` for an allowed call); a denial with two codes
    /// counts once under each.
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MandateLabels {
    pub mandate: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ConnLabels {
    /// Why a connection was refused (`connections_max`, `connections_per_address_max`) or
    /// closed (`header_read_timeout`, `idle_timeout`).
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ApiLabels {
    /// `http` or `grpc`.
    pub api: &'static str,
}

pub(crate) struct Metrics {
    registry: Registry,
    pub admissions: Family<DecisionLabels, Counter>,
    /// `holon_admission_seconds`' `api="http"` and `api="grpc"` members, looked up once (a
    /// lookup hashes the labels).
    pub admission_seconds_http: Histogram,
    pub admission_seconds_grpc: Histogram,
    pub settlements: Family<OutcomeLabels, Counter>,
    /// Requests answered with the first answer of their Idempotency-Key.
    pub idempotent_replays: Counter,
    /// Retries of an allowed answer refused because its reservation had ended (409).
    pub replays_refused: Counter,
    /// Keyed requests whose answer the store could not keep (their retries get 409).
    pub idempotency_store_errors: Counter,
    /// Settlements whose actual (plus passthrough) was above the reservation: billed at it.
    pub settlements_clamped: Counter,
    /// What a shadowed server would have decided, by decision and code.
    pub shadow_decisions: Family<DecisionLabels, Counter>,
    /// 1 when the server runs in shadow mode.
    pub shadow: Gauge,
    /// Each mandate's shadow tally, settled, in micro-units.
    pub shadow_settled_micros: Family<MandateLabels, Gauge>,
    pub reloads: Counter,
    pub reload_failures: Counter,
    /// Tokens the server accepts now.
    pub tokens: Gauge,
    /// Reloads that left no token (the file emptied or deleted: nobody authenticates).
    pub tokens_withdrawn: Counter,
    pub connections_open: Gauge,
    pub connections_refused: Family<ConnLabels, Counter>,
    pub connections_closed: Family<ConnLabels, Counter>,
    pub in_flight: Gauge,
    pub held: Gauge,
    pub receipts_dropped: Gauge,
    pub store_round_trips: Gauge,
    pub store_errors: Gauge,
    pub generation: Gauge,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("holon");
        let admissions = Family::<DecisionLabels, Counter>::default();
        registry.register("admissions", "Admission decisions, by decision and code", admissions.clone());
        // 1 µs to about 16 s, doubling: an admission decides in well under a microsecond; the
        // rest is the request's own handling.
        let admission_seconds = Family::<ApiLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_001, 2.0, 24))
        });
        registry.register("admission_seconds", "Time to handle an admission request", admission_seconds.clone());
        // A prometheus-client Histogram is a handle on shared state: these clones observe
        // into the family's members.
        let admission_seconds_http = admission_seconds.get_or_create(&ApiLabels { api: "http" }).clone();
        let admission_seconds_grpc = admission_seconds.get_or_create(&ApiLabels { api: "grpc" }).clone();
        let settlements = Family::<OutcomeLabels, Counter>::default();
        registry.register("settlements", "Reservations ended, by outcome", settlements.clone());
        let idempotent_replays = Counter::default();
        registry.register(
            "idempotent_replays",
            "Requests answered with the first answer of their Idempotency-Key (nothing done again)",
            idempotent_replays.clone(),
        );
        let replays_refused = Counter::default();
        registry.register(
            "idempotent_replays_refused",
            "Retries of an allowed answer refused because its reservation had ended (a replay never authorises a call)",
            replays_refused.clone(),
        );
        let idempotency_store_errors = Counter::default();
        registry.register(
            "idempotency_store_errors",
            "Keyed requests whose answer the store could not keep (their retries get 409 until the key expires)",
            idempotency_store_errors.clone(),
        );
        let settlements_clamped = Counter::default();
        registry.register(
            "settlements_clamped",
            "Settlements above the reservation (a gateway fault): billed at the reservation",
            settlements_clamped.clone(),
        );
        let shadow_decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "shadow_decisions",
            "Shadow mode: what the rules decided (the gateway was told allowed), by decision and code",
            shadow_decisions.clone(),
        );
        let shadow = Gauge::default();
        registry.register("shadow", "1 when the server runs in shadow mode (it denies nothing)", shadow.clone());
        let shadow_settled_micros = Family::<MandateLabels, Gauge>::default();
        registry.register(
            "shadow_settled_micros",
            "Shadow mode: what calls the rules would have denied or held settled, per mandate, in micro-units (never in the budget)",
            shadow_settled_micros.clone(),
        );
        let reloads = Counter::default();
        registry.register("reloads", "Snapshots published by a reload", reloads.clone());
        let reload_failures = Counter::default();
        registry.register(
            "reload_failures",
            "Reloads refused (the old snapshot kept serving)",
            reload_failures.clone(),
        );
        let tokens = Gauge::default();
        registry.register("tokens", "Bearer tokens the server accepts now", tokens.clone());
        let tokens_withdrawn = Counter::default();
        registry.register(
            "tokens_withdrawn",
            "Reloads of the tokens file that left no token (emptied or deleted: nobody authenticates)",
            tokens_withdrawn.clone(),
        );
        let connections_open = Gauge::default();
        registry.register("connections_open", "Connections open on both listeners", connections_open.clone());
        let connections_refused = Family::<ConnLabels, Counter>::default();
        registry.register(
            "connections_refused",
            "Connections refused at once: too many open, or from one address",
            connections_refused.clone(),
        );
        let connections_closed = Family::<ConnLabels, Counter>::default();
        registry.register(
            "connections_closed",
            "Connections closed by the server: headers too slow, or idle too long",
            connections_closed.clone(),
        );
        let in_flight = Gauge::default();
        registry.register("reservations_in_flight", "Reservations open through this server", in_flight.clone());
        let held = Gauge::default();
        registry.register("held_calls", "Calls held for their issuer's approval on this node", held.clone());
        let receipts_dropped = Gauge::default();
        registry.register("receipts_dropped", "Receipts the sink could not take (total)", receipts_dropped.clone());
        let store_round_trips = Gauge::default();
        registry.register("store_round_trips", "Round trips to the ledger store (total)", store_round_trips.clone());
        let store_errors = Gauge::default();
        registry.register("store_errors", "Ledger store operations that failed (total)", store_errors.clone());
        let generation = Gauge::default();
        registry.register("snapshot_generation", "Generation of the snapshot being served", generation.clone());
        Metrics {
            registry,
            admissions,
            admission_seconds_http,
            admission_seconds_grpc,
            settlements,
            idempotent_replays,
            replays_refused,
            idempotency_store_errors,
            settlements_clamped,
            shadow_decisions,
            shadow,
            shadow_settled_micros,
            reloads,
            reload_failures,
            tokens,
            tokens_withdrawn,
            connections_open,
            connections_refused,
            connections_closed,
            in_flight,
            held,
            receipts_dropped,
            store_round_trips,
            store_errors,
            generation,
        }
    }

    /// The text exposition.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// A value that is a count for a gauge (gauges are i64).
pub(crate) fn as_gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The content type of the OpenMetrics exposition (`prometheus-client`'s own format).
pub(crate) const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the Prometheus text format.
pub(crate) const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header prefers OpenMetrics to the text format, as Prometheus asks
/// (`application/openmetrics-text;version=1.0.0;q=0.5,…,text/plain;version=0.0.4;q=0.3`):
/// OpenMetrics when it is listed with a weight at least that of `text/plain` (or of `*/*`
/// when `text/plain` is not listed).
pub(crate) fn wants_openmetrics(accept: &str) -> bool {
    let weight = |wanted: &str| {
        accept
            .split(',')
            .filter_map(|item| {
                let mut parts = item.split(';').map(str::trim);
                let kind = parts.next()?;
                (kind == wanted).then(|| {
                    parts.find_map(|p| p.strip_prefix("q=")).and_then(|q| q.parse::<f64>().ok()).unwrap_or(1.0)
                })
            })
            .fold(None, |best: Option<f64>, q| Some(best.map_or(q, |b| b.max(q))))
    };
    match weight("application/openmetrics-text") {
        Some(om) if om > 0.0 => om >= weight("text/plain").or_else(|| weight("*/*")).unwrap_or(0.0),
        _ => false,
    }
}

/// The OpenMetrics exposition in the Prometheus text format 0.0.4: a counter family is
/// named by its samples (`holon_admissions_total`, as 0.0.4 parsers read it), and the
/// OpenMetrics-only lines (`# UNIT`, `# EOF`) are left out.
pub(crate) fn text_format(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len() + 64 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# TYPE ", "# HELP "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{tag}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_names_counters_by_their_samples_and_prometheus_gets_openmetrics() {
        let m = Metrics::new();
        m.reloads.inc();
        let om = m.encode();
        assert!(
            om.contains("# TYPE holon_reloads counter")
                && om.contains("holon_reloads_total 1")
                && om.ends_with("# EOF\n")
        );
        let text = text_format(&om);
        assert!(text.contains("# TYPE holon_reloads_total counter\nholon_reloads_total 1"), "{text}");
        assert!(text.contains("# HELP holon_reloads_total "), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
        // Every sample is named by a TYPE line before it (or a histogram's parts).
        let mut typed = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.push(rest.split(' ').next().unwrap().to_owned());
            } else if !line.starts_with('#') && !line.is_empty() {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
                assert!(typed.iter().any(|t| t == name || t == family), "{name} has no TYPE line: {text}");
            }
        }
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert!(wants_openmetrics(prometheus));
        assert!(wants_openmetrics("application/openmetrics-text"));
        for other in
            ["", "*/*", "text/plain", "text/plain;version=0.0.4", "application/openmetrics-text;q=0, text/plain"]
        {
            assert!(!wants_openmetrics(other), "{other}");
        }
        assert!(!wants_openmetrics("text/plain;q=0.9,application/openmetrics-text;q=0.5"));
    }
}
