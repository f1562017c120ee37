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
