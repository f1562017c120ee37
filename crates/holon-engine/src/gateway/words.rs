//! The written forms a gateway reads from its callers, each parsed by one function with one
//! sentence for what is wrong: a reservation id, an approver's account, a settlement's
//! outcome and its reported latency.

use crate::engine::Outcome;
use crate::pattern::Principal;

/// The longest latency a settlement may report, in ms (a day).
pub const LATENCY_MS_MAX: u64 = 86_400_000;

/// Why a caller's word cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WordError {
    #[error("no reservation `{0}`: ids are decimal numbers as the engine gave them (no sign, no leading zero)")]
    ReservationId(String),
    #[error(
        "`{0}` is not an account: give the mandate's issuer as `account:NAME` or `NAME` (NAME as the mandate's `issuer`, without a `/`: an agent approves nothing)"
    )]
    Account(String),
    #[error("`outcome` is one of success, error, declared_failure, unreported; not `{0}`")]
    Outcome(String),
    #[error("`latency_ms` is at most {LATENCY_MS_MAX} ms, not {0}")]
    Latency(u64),
}

/// A reservation id: a decimal number written as the engine wrote it (no sign, no leading
/// zero), so one reservation has one name.
pub fn reservation_id(text: &str) -> Result<u64, WordError> {
    text.parse::<u64>().ok().filter(|n| n.to_string() == text).ok_or_else(|| WordError::ReservationId(text.to_owned()))
}

/// An approver's account, as `account:NAME` (a token's role, the form every message asks
/// for) or as `NAME` (a mandate's `issuer`): the same principal either way.
pub fn account(text: &str) -> Result<Principal, WordError> {
    let name = text.strip_prefix("account:").unwrap_or(text);
    match Principal::parse(name) {
        Ok(p) if !p.is_agent() => Ok(p),
        _ => Err(WordError::Account(text.to_owned())),
    }
}

/// The sentence of a call naming a mandate or agent the live snapshot does not hold
/// (`unknown_mandate`, `unknown_agent`): `what` is `mandate` or `agent`.
pub fn unknown_name(what: &str, name: &str) -> String {
    format!("no {what} `{name}` in the documents this engine holds")
}

/// A settlement's outcome word (`None`: not said, `unreported` on the receipt).
pub fn outcome(text: Option<&str>) -> Result<Outcome, WordError> {
    match text {
        None | Some("unreported") => Ok(Outcome::Unreported),
        Some("success") => Ok(Outcome::Success),
        Some("error") => Ok(Outcome::Error),
        Some("declared_failure") => Ok(Outcome::DeclaredFailure),
        Some(other) => Err(WordError::Outcome(other.to_owned())),
    }
}

/// A settlement's reported latency, in ms, as the receipt keeps it.
pub fn latency_ms(reported: Option<u64>) -> Result<u32, WordError> {
    match reported {
        None => Ok(0),
        Some(ms) if ms <= LATENCY_MS_MAX => Ok(u32::try_from(ms).unwrap_or(u32::MAX)),
        Some(ms) => Err(WordError::Latency(ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_has_one_written_form() {
        assert_eq!(reservation_id("65538"), Ok(65_538));
        for bad in ["", "+1", "01", "-1", " 1", "1 ", "x", "18446744073709551616"] {
            assert_eq!(reservation_id(bad), Err(WordError::ReservationId(bad.to_owned())), "{bad:?}");
        }
    }

    #[test]
    fn an_account_is_read_in_both_forms_and_an_agent_is_refused() {
        assert_eq!(account("account:alice").unwrap().as_str(), "alice");
        assert_eq!(account("alice").unwrap().as_str(), "alice");
        for bad in ["", "account:", "alice/assistant", "account:alice/assistant", "a b"] {
            assert_eq!(account(bad), Err(WordError::Account(bad.to_owned())), "{bad:?}");
        }
    }

    #[test]
    fn outcome_words_and_latency() {
        assert_eq!(outcome(Some("declared_failure")), Ok(Outcome::DeclaredFailure));
        assert_eq!(outcome(None), Ok(Outcome::Unreported));
        assert!(matches!(outcome(Some("ok")), Err(WordError::Outcome(w)) if w == "ok"));
        assert_eq!(latency_ms(Some(LATENCY_MS_MAX)), Ok(86_400_000));
        assert_eq!(latency_ms(Some(LATENCY_MS_MAX + 1)), Err(WordError::Latency(LATENCY_MS_MAX + 1)));
    }
}
