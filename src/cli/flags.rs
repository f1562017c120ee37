//! The value parsers of the numeric flags, each with its range (`range`): a value
//! outside it, NaN, infinity or a non-number is refused with exit 2 and a sentence; and
//! the parsers of the money flags (`--max-cost`, `--spent-*`, `--parent-spent`); and of
//! `--store` and `--node`, which every command that takes them checks with the library's
//! one rule before anything runs (their defaults and help differ by command on purpose).

use anyhow::Context;
use holon::money::Amount;

/// The range of every numeric flag; a value outside it is refused with exit 2.
pub(crate) mod range {
    /// `demo --seconds`: seconds of load (the hot-mandate run gets half).
    pub(crate) const DEMO_LOAD_S_MIN: f64 = 0.1;
    pub(crate) const DEMO_LOAD_S_MAX: f64 = 600.0;
    /// `loadtest --duration-s`.
    pub(crate) const LOADTEST_DURATION_S_MIN: f64 = 0.01;
    pub(crate) const LOADTEST_DURATION_S_MAX: f64 = 86_400.0;
    /// `loadtest --calls`: at ten million calls a second, about a quarter of an hour.
    pub(crate) const LOADTEST_CALLS_MAX: u64 = 10_000_000_000;
    /// `loadtest --publish-every-ms` (0: never). The publisher sleeps this long between
    /// snapshots and the run waits for it to wake, so the interval bounds the run's end.
    pub(crate) const LOADTEST_PUBLISH_EVERY_MS_MAX: u64 = 10_000;
    /// `loadtest --sub-mandates`: sub-mandates of the hot mandate, at most.
    pub(crate) const LOADTEST_SUB_MANDATES_MAX: u64 = 16;
    /// `loadtest --time-every`: one call timed in this many, at most.
    pub(crate) use super::super::loadtest::TIME_EVERY_MAX as LOADTEST_TIME_EVERY_MAX;
    pub(crate) use super::super::loadtest::{AGENTS_MAX, MANDATES_MAX, THREADS_MAX};
}

/// `--store`: a URL the library can open (`holon::store::kind_of`, the one reading of it).
pub(super) fn store_url(text: &str) -> Result<String, String> {
    holon::store::kind_of(text).map(|_| text.to_owned()).map_err(|e| e.to_string())
}

/// `--node`: a name the store can keep (`holon::node::check_node_name`).
pub(super) fn node_name(text: &str) -> Result<String, String> {
    holon::node::check_node_name(text).map(|()| text.to_owned()).map_err(|e| match e {
        holon::node::NodeError::BadConfig(why) => why,
        other => other.to_string(),
    })
}

/// A finite number of seconds within `[min, max]`.
fn seconds(text: &str, min: f64, max: f64) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds; give one from {min} to {max}"))?;
    if value.is_finite() && (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} seconds is outside {min} to {max}; give a finite number in that range"))
    }
}

/// A whole number within `[min, max]`.
fn count<T: TryFrom<u64>>(text: &str, min: u64, max: u64) -> Result<T, String> {
    let t = text.trim();
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let value: u64 = match t.parse() {
        Ok(v) => v,
        Err(_) if t.strip_prefix('-').is_some_and(digits) => {
            return Err(format!("{t} is below {min}; give a whole number from {min} to {max}"));
        }
        Err(_) if digits(t) => return Err(format!("{t} is above {max}; give a whole number from {min} to {max}")),
        Err(_) => return Err(format!("`{text}` is not a whole number; give one from {min} to {max}")),
    };
    if !(min..=max).contains(&value) {
        return Err(format!("{value} is outside {min} to {max}"));
    }
    T::try_from(value).map_err(|_| format!("{value} is too large for this machine"))
}

pub(super) fn demo_seconds(text: &str) -> Result<f64, String> {
    seconds(text, range::DEMO_LOAD_S_MIN, range::DEMO_LOAD_S_MAX)
}
pub(super) fn loadtest_duration_s(text: &str) -> Result<f64, String> {
    seconds(text, range::LOADTEST_DURATION_S_MIN, range::LOADTEST_DURATION_S_MAX)
}
pub(super) fn loadtest_threads(text: &str) -> Result<usize, String> {
    count(text, 1, range::THREADS_MAX as u64)
}
pub(super) fn loadtest_mandates(text: &str) -> Result<usize, String> {
    count(text, 1, range::MANDATES_MAX as u64)
}
pub(super) fn loadtest_agents(text: &str) -> Result<usize, String> {
    count(text, 10, range::AGENTS_MAX as u64)
}
pub(super) fn loadtest_calls(text: &str) -> Result<u64, String> {
    count(text, 1, range::LOADTEST_CALLS_MAX)
}
/// Seconds `holon serve` gives open reservations to settle at shutdown.
#[cfg(feature = "serve")]
pub(super) const SERVE_GRACE_S_MAX: u64 = 3_600;
/// Longest a request to `holon serve` may take, in ms.
#[cfg(feature = "serve")]
pub(super) const SERVE_REQUEST_MS_MAX: u64 = 600_000;
/// Requests `holon serve` handles at once.
#[cfg(feature = "serve")]
pub(super) const SERVE_CONCURRENT_MAX: u64 = 65_536;
#[cfg(feature = "serve")]
pub(super) fn serve_grace_s(text: &str) -> Result<u64, String> {
    count(text, 0, SERVE_GRACE_S_MAX)
}
#[cfg(feature = "serve")]
pub(super) fn serve_request_ms(text: &str) -> Result<u64, String> {
    count(text, 1, SERVE_REQUEST_MS_MAX)
}
#[cfg(feature = "serve")]
pub(super) fn serve_concurrent_max(text: &str) -> Result<usize, String> {
    count(text, 1, SERVE_CONCURRENT_MAX)
}
/// `holon serve --header-read-timeout-ms` and `--idle-timeout-ms`, in ms.
#[cfg(feature = "serve")]
pub(super) const SERVE_TIMEOUT_MS_MIN: u64 = 100;
#[cfg(feature = "serve")]
pub(super) const SERVE_HEADER_READ_TIMEOUT_MS_MAX: u64 = 600_000;
#[cfg(feature = "serve")]
pub(super) const SERVE_IDLE_TIMEOUT_MS_MAX: u64 = 3_600_000;
/// `holon serve --connections-max` and `--connections-per-address-max`.
#[cfg(feature = "serve")]
pub(super) const SERVE_CONNECTIONS_MAX: u64 = 1_000_000;
#[cfg(feature = "serve")]
pub(super) fn serve_header_read_timeout_ms(text: &str) -> Result<u64, String> {
    count(text, SERVE_TIMEOUT_MS_MIN, SERVE_HEADER_READ_TIMEOUT_MS_MAX)
}
#[cfg(feature = "serve")]
pub(super) fn serve_idle_timeout_ms(text: &str) -> Result<u64, String> {
    count(text, SERVE_TIMEOUT_MS_MIN, SERVE_IDLE_TIMEOUT_MS_MAX)
}
#[cfg(feature = "serve")]
pub(super) fn serve_connections_max(text: &str) -> Result<usize, String> {
    count(text, 1, SERVE_CONNECTIONS_MAX)
}
/// `holon serve --idempotency-keep-s` (a week at most) and `--idempotency-keys-max`.
#[cfg(feature = "serve")]
pub(super) const SERVE_IDEMPOTENCY_KEEP_S_MAX: u64 = 604_800;
#[cfg(feature = "serve")]
pub(super) const SERVE_IDEMPOTENCY_KEYS_MIN: u64 = 1_000;
#[cfg(feature = "serve")]
pub(super) const SERVE_IDEMPOTENCY_KEYS_MAX: u64 = 100_000_000;
#[cfg(feature = "serve")]
pub(super) fn serve_idempotency_keep_s(text: &str) -> Result<u64, String> {
    count(text, 1, SERVE_IDEMPOTENCY_KEEP_S_MAX)
}
#[cfg(feature = "serve")]
pub(super) fn serve_idempotency_keys_max(text: &str) -> Result<u64, String> {
    count(text, SERVE_IDEMPOTENCY_KEYS_MIN, SERVE_IDEMPOTENCY_KEYS_MAX)
}
pub(super) fn loadtest_publish_every_ms(text: &str) -> Result<u64, String> {
    count(text, 0, range::LOADTEST_PUBLISH_EVERY_MS_MAX)
}
pub(super) fn loadtest_time_every(text: &str) -> Result<u64, String> {
    count(text, 1, range::LOADTEST_TIME_EVERY_MAX)
}

pub(super) fn loadtest_sub_mandates(text: &str) -> Result<usize, String> {
    count(text, 0, range::LOADTEST_SUB_MANDATES_MAX)
}
pub(super) fn flush_ms(text: &str) -> Result<u64, String> {
    count(text, holon::node::FLUSH_MS_MIN, holon::node::FLUSH_MS_MAX)
}

/// A money flag (`--max-cost`, `--spent-total`, `--spent-today`, `--total`, `--per-day`):
/// a decimal string, read by the one reading of money (`Amount::parse`) as clap parses it,
/// so a typo is refused with exit 2 before anything is opened or written. Each such flag
/// takes values that start with `-` (`allow_negative_numbers`), so that `-1` is refused as
/// an amount rather than taken for a flag.
pub(super) fn money(text: &str) -> Result<Amount, String> {
    Amount::parse(text).map_err(|e| e.to_string())
}

/// `--parent-spent ID=TOTAL[,TODAY]` values.
pub(super) fn parent_spent(values: &[String]) -> anyhow::Result<Vec<(String, Amount, Amount)>> {
    values
        .iter()
        .map(|v| {
            let usage = || format!("--parent-spent {v}: expected ID=TOTAL or ID=TOTAL,TODAY (decimal amounts), e.g. alice/m-2026-11=19.997,19.997");
            let (id, figures) = v.split_once('=').with_context(usage)?;
            let (total, today) = figures.split_once(',').unwrap_or((figures, "0"));
            let parse = |s: &str| Amount::parse(s).with_context(usage);
            Ok((id.to_owned(), parse(total)?, parse(today)?))
        })
        .collect()
}
