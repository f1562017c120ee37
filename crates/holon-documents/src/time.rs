//! Instants (RFC 3339, kept as whole UTC seconds) and ISO-8601 durations for retention.
//!
//! Retention comparison is conservative (docs/rulings.md, "Admission"): a month or year in the
//! agent's duration counts at its longest (31 / 366 days), in the mandate's at its shortest
//! (28 / 365 days), so an agent duration "fits" only if it cannot be longer.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub const SECONDS_PER_DAY: i64 = 86_400;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TimeError {
    #[error("`{0}` is not an RFC 3339 timestamp: use a form like 2026-11-01T00:00:00Z")]
    Timestamp(String),
    #[error("`{0}` is not `none` or an ISO-8601 duration such as P7D, P2W, P1M or PT12H")]
    Duration(String),
}

/// A point in time, in whole seconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timestamp(i64);

impl Timestamp {
    #[inline]
    pub const fn from_unix(seconds: i64) -> Self {
        Timestamp(seconds)
    }
    #[inline]
    pub const fn unix(self) -> i64 {
        self.0
    }
    pub fn parse(s: &str) -> Result<Self, TimeError> {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| Timestamp(t.timestamp()))
            .map_err(|_| TimeError::Timestamp(s.chars().take(64).collect()))
    }
    /// The UTC calendar day number (days since 1970-01-01), for `per_day` budgets.
    #[inline]
    pub const fn utc_day(self) -> i64 {
        self.0.div_euclid(SECONDS_PER_DAY)
    }
    pub fn now() -> Self {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Timestamp(secs)
    }
}
impl TryFrom<String> for Timestamp {
    type Error = TimeError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Timestamp::parse(&s)
    }
}
impl From<Timestamp> for String {
    fn from(t: Timestamp) -> String {
        t.to_string()
    }
}
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match chrono::DateTime::from_timestamp(self.0, 0) {
            Some(t) => write!(f, "{}", t.format("%Y-%m-%dT%H:%M:%SZ")),
            None => write!(f, "@{}", self.0),
        }
    }
}

/// A data-retention period: `none`, or an ISO-8601 duration with whole-number fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Retention {
    text: String,
    /// Shortest and longest number of seconds the period can last (0, 0 for `none`).
    seconds_min: u64,
    seconds_max: u64,
}

impl Retention {
    pub fn parse(s: &str) -> Result<Self, TimeError> {
        if s == "none" {
            return Ok(Retention { text: s.to_owned(), seconds_min: 0, seconds_max: 0 });
        }
        let err = || TimeError::Duration(s.chars().take(64).collect());
        let body = s.strip_prefix('P').ok_or_else(err)?;
        if body.is_empty() || s.len() > 64 {
            return Err(err());
        }
        let (date, time) = match body.split_once('T') {
            Some((d, t)) if !t.is_empty() => (d, Some(t)),
            Some(_) => return Err(err()),
            None => (body, None),
        };
        // (designator, shortest seconds, longest seconds), in the order ISO 8601 requires.
        const DATE: [(char, u64, u64); 4] = [
            ('Y', 365 * 86_400, 366 * 86_400),
            ('M', 28 * 86_400, 31 * 86_400),
            ('W', 7 * 86_400, 7 * 86_400),
            ('D', 86_400, 86_400),
        ];
        const TIME: [(char, u64, u64); 3] = [('H', 3_600, 3_600), ('M', 60, 60), ('S', 1, 1)];
        let mut min = 0u64;
        let mut max = 0u64;
        for (part, units) in [(Some(date), &DATE[..]), (time, &TIME[..])] {
            let Some(mut rest) = part else { continue };
            let mut next_unit = 0usize;
            while !rest.is_empty() {
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                let number: u64 = rest.get(..digits).and_then(|d| d.parse().ok()).ok_or_else(err)?;
                let designator = rest.get(digits..).and_then(|r| r.chars().next()).ok_or_else(err)?;
                let offset = units.iter().skip(next_unit).position(|(c, _, _)| *c == designator).ok_or_else(err)?;
                let index = next_unit + offset;
                let (_, lo, hi) = units.get(index).copied().ok_or_else(err)?;
                min = number.checked_mul(lo).and_then(|v| v.checked_add(min)).ok_or_else(err)?;
                max = number.checked_mul(hi).and_then(|v| v.checked_add(max)).ok_or_else(err)?;
                next_unit = index + 1;
                rest = rest.get(digits + 1..).ok_or_else(err)?;
            }
        }
        Ok(Retention { text: s.to_owned(), seconds_min: min, seconds_max: max })
    }
    pub fn is_none(&self) -> bool {
        self.text == "none"
    }
    pub fn as_str(&self) -> &str {
        &self.text
    }
    pub fn seconds_min(&self) -> u64 {
        self.seconds_min
    }
    pub fn seconds_max(&self) -> u64 {
        self.seconds_max
    }
    /// An agent keeping data for `self` fits a mandate allowing `limit` when it cannot keep
    /// it longer: `none` always fits; otherwise its longest reading against the limit's
    /// shortest.
    pub fn fits_within(&self, limit: &Retention) -> bool {
        self.is_none() || self.seconds_max <= limit.seconds_min
    }
}
impl TryFrom<String> for Retention {
    type Error = TimeError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Retention::parse(&s)
    }
}
impl From<Retention> for String {
    fn from(r: Retention) -> String {
        r.text
    }
}
impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Retention {
        Retention::parse(s).unwrap()
    }

    #[test]
    fn durations_parse() {
        assert_eq!(r("P7D").seconds_max(), 7 * 86_400);
        assert_eq!(r("P2W").seconds_min(), 14 * 86_400);
        assert_eq!(r("P1M").seconds_min(), 28 * 86_400);
        assert_eq!(r("P1M").seconds_max(), 31 * 86_400);
        assert_eq!(r("PT12H").seconds_max(), 12 * 3_600);
        assert_eq!(r("P1DT1M").seconds_max(), 86_400 + 60);
        for bad in ["P", "PT", "7D", "P1.5D", "P-1D", "PD", "P1D1Y", "P1DT", "P1H", "p7d", "P99999999999999999999D"] {
            assert!(Retention::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn retention_fit_is_conservative() {
        assert!(r("none").fits_within(&r("P1D")));
        assert!(r("P7D").fits_within(&r("P7D")));
        assert!(!r("P8D").fits_within(&r("P7D")));
        assert!(r("P28D").fits_within(&r("P1M")));
        assert!(!r("P29D").fits_within(&r("P1M")));
        assert!(!r("P1M").fits_within(&r("P30D")));
        assert!(r("P1M").fits_within(&r("P31D")));
        assert!(!r("P1D").fits_within(&r("none")));
    }

    #[test]
    fn timestamps() {
        let t = Timestamp::parse("2026-11-01T00:00:00Z").unwrap();
        assert_eq!(t.to_string(), "2026-11-01T00:00:00Z");
        assert_eq!(Timestamp::parse("2026-11-01T01:00:00+01:00").unwrap(), t);
        assert_eq!(t.utc_day(), Timestamp::parse("2026-11-01T23:59:59Z").unwrap().utc_day());
        assert!(Timestamp::parse("2026-11-01").is_err());
        assert!(Timestamp::parse("yesterday").is_err());
    }
}
