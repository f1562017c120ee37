//! Exact money: decimal strings in, whole micro-units (10^-6) inside.
//!
//! Rules (docs/rulings.md, "Money"):
//! - an amount is a decimal string: digits, optionally `.` and 1 to 6 digits; no sign,
//!   exponent, spaces or thousands separators;
//! - inside, it is a `u64` count of micro-units; every operation is checked and an overflow
//!   is an error, never a wrap;
//! - FX conversion multiplies by a rate and rounds **up** to the next micro-unit, so a
//!   converted price is never smaller than its true value (in favour of budget safety).
//!
//! Ratios and measured figures that are not money ([`Fixed6`]: success rates, scores,
//! seconds) share the same fixed-point grammar but also accept a YAML number.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Micro-units in one whole unit of a currency.
pub const MICROS_PER_UNIT: u64 = 1_000_000;
/// Decimal places an amount may carry.
pub const DECIMALS_MAX: usize = 6;
/// Longest accepted decimal string: 20 integer digits overflow anyway; this bounds work.
const TEXT_BYTES_MAX: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MoneyError {
    #[error(
        "`{0}` is not a decimal string: use digits with an optional `.` and at most 6 decimals, like \"0.03\" (no sign, exponent or spaces)"
    )]
    Syntax(String),
    #[error("`{0}` has more than 6 decimal places; amounts are exact to the micro-unit (0.000001)")]
    TooPrecise(String),
    #[error("`{0}` is too large: amounts are limited to 18446744073709.551615")]
    TooLarge(String),
    #[error("money arithmetic overflowed")]
    Overflow,
    #[error("`{0}` is not a currency code: use three upper-case letters (ISO 4217), like EUR")]
    Currency(String),
    #[error("an exchange rate must be greater than zero")]
    ZeroRate,
}

/// Parses the shared fixed-point grammar into a count of 10^-6 units.
fn parse_fixed6(text: &str) -> Result<u64, MoneyError> {
    let syntax = || MoneyError::Syntax(text.chars().take(TEXT_BYTES_MAX).collect());
    if text.is_empty() || text.len() > TEXT_BYTES_MAX {
        return Err(syntax());
    }
    let (int_part, frac_part) = match text.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (text, None),
    };
    if int_part.is_empty() || !int_part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    let frac = frac_part.unwrap_or("");
    if frac_part.is_some() && frac.is_empty() {
        return Err(syntax());
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    if frac.len() > DECIMALS_MAX {
        return Err(MoneyError::TooPrecise(text.to_owned()));
    }
    let too_large = || MoneyError::TooLarge(text.to_owned());
    let mut whole: u64 = 0;
    for b in int_part.bytes() {
        whole = whole.checked_mul(10).and_then(|w| w.checked_add(u64::from(b - b'0'))).ok_or_else(too_large)?;
    }
    let mut micros: u64 = 0;
    for b in frac.bytes().chain(std::iter::repeat(b'0')).take(DECIMALS_MAX) {
        micros = micros * 10 + u64::from(b - b'0');
    }
    whole.checked_mul(MICROS_PER_UNIT).and_then(|w| w.checked_add(micros)).ok_or_else(too_large)
}

/// Writes a micro-unit count with at least `min_decimals` and at most 6 decimals,
/// trimming trailing zeros beyond `min_decimals`: built in a buffer on the stack and written
/// once (a `write!` per digit was 4% of a server request's instructions: every answer
/// carries several amounts).
fn fmt_fixed6(value: u64, min_decimals: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    // u64::MAX micro-units: 14 whole digits, a point, 6 decimals.
    const SHOWN_BYTES_MAX: usize = 24;
    let mut decimals = value % MICROS_PER_UNIT;
    let mut kept = DECIMALS_MAX;
    while kept > min_decimals && decimals.is_multiple_of(10) {
        decimals /= 10;
        kept -= 1;
    }
    let mut text = [0u8; SHOWN_BYTES_MAX];
    // From the last character back.
    let mut slots = text.iter_mut().rev();
    let mut put = |b: u8| {
        let slot = slots.next();
        debug_assert!(slot.is_some(), "{value} micro-units take more than {SHOWN_BYTES_MAX} bytes");
        if let Some(slot) = slot {
            *slot = b;
        }
    };
    for _ in 0..kept {
        put(b'0' + (decimals % 10) as u8);
        decimals /= 10;
    }
    if kept > 0 {
        put(b'.');
    }
    let mut whole = value / MICROS_PER_UNIT;
    loop {
        put(b'0' + (whole % 10) as u8);
        whole /= 10;
        if whole == 0 {
            break;
        }
    }
    // The text starts where the slots not written end.
    let start = slots.len();
    let digits = text.get(start..).unwrap_or_default();
    f.write_str(std::str::from_utf8(digits).unwrap_or_default())
}

/// An amount of money in micro-units of some currency (the currency travels beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Amount(u64);

impl Amount {
    pub const ZERO: Amount = Amount(0);
    pub const MAX: Amount = Amount(u64::MAX);

    #[inline]
    pub const fn from_micros(micros: u64) -> Self {
        Amount(micros)
    }
    #[inline]
    pub const fn micros(self) -> u64 {
        self.0
    }
    /// The one sentence for money written as a number (`100.0` where `"100.0"` is meant),
    /// in a document or a request body alike: `number` as it was written.
    pub fn written_as_number(number: &str) -> String {
        format!("money must be a quoted decimal string, not a number: write \"{number}\"")
    }

    /// Parses a decimal money string such as `"0.03"`.
    pub fn parse(text: &str) -> Result<Self, MoneyError> {
        parse_fixed6(text).map(Amount)
    }
    #[inline]
    pub fn checked_add(self, other: Amount) -> Result<Amount, MoneyError> {
        self.0.checked_add(other.0).map(Amount).ok_or(MoneyError::Overflow)
    }
    #[inline]
    pub fn checked_sub(self, other: Amount) -> Result<Amount, MoneyError> {
        self.0.checked_sub(other.0).map(Amount).ok_or(MoneyError::Overflow)
    }
    #[inline]
    pub fn saturating_sub(self, other: Amount) -> Amount {
        Amount(self.0.saturating_sub(other.0))
    }
    /// Converts into the rate's target currency, rounding **up** to the next micro-unit.
    pub fn convert(self, rate: FxRate) -> Result<Amount, MoneyError> {
        if rate.0 == MICROS_PER_UNIT {
            return Ok(self);
        }
        // Fast path without 128-bit division (the engine converts on every call).
        if let Some(product) = self.0.checked_mul(rate.0) {
            return Ok(Amount(product / MICROS_PER_UNIT + u64::from(product % MICROS_PER_UNIT != 0)));
        }
        let product = u128::from(self.0) * u128::from(rate.0);
        let div = u128::from(MICROS_PER_UNIT);
        let rounded_up = product / div + u128::from(product % div != 0);
        u64::try_from(rounded_up).map(Amount).map_err(|_| MoneyError::Overflow)
    }
}

impl fmt::Display for Amount {
    /// At least two decimals (`3.10`), more only when they carry value (`0.118`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_fixed6(self.0, 2, f)
    }
}

impl std::str::FromStr for Amount {
    type Err = MoneyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Amount::parse(s)
    }
}

/// An ISO 4217-shaped currency code: three upper-case ASCII letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency([u8; 3]);

impl Currency {
    pub fn parse(text: &str) -> Result<Self, MoneyError> {
        let bytes = text.as_bytes();
        match bytes {
            [a, b, c] if bytes.iter().all(u8::is_ascii_uppercase) => Ok(Currency([*a, *b, *c])),
            _ => Err(MoneyError::Currency(text.chars().take(TEXT_BYTES_MAX).collect())),
        }
    }
    pub fn as_str(&self) -> &str {
        // The constructor admits only ASCII upper-case letters, so this cannot fail;
        // the fallback keeps the decision path free of panics regardless.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl std::str::FromStr for Currency {
    type Err = MoneyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Currency::parse(s)
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `budget.fx` entry: one unit of the foreign currency is worth this many units of the
/// mandate's currency, exact to 10^-6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FxRate(u64);

impl FxRate {
    /// The identity rate (a currency into itself).
    pub const ONE: FxRate = FxRate(MICROS_PER_UNIT);

    pub fn parse(text: &str) -> Result<Self, MoneyError> {
        match parse_fixed6(text)? {
            0 => Err(MoneyError::ZeroRate),
            micros => Ok(FxRate(micros)),
        }
    }
    #[inline]
    pub const fn micros(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FxRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_fixed6(self.0, 0, f)
    }
}

/// A non-money fixed-point figure with 6 decimals: ratios in [0, 1] (success rate,
/// eval score, royalty) and durations in seconds (latency). Stored as a count of 10^-6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Value", into = "String")]
pub struct Fixed6(u64);

impl Fixed6 {
    pub const ONE: Fixed6 = Fixed6(MICROS_PER_UNIT);
    #[inline]
    pub const fn from_millionths(v: u64) -> Self {
        Fixed6(v)
    }
    #[inline]
    pub const fn millionths(self) -> u64 {
        self.0
    }
    pub fn parse(text: &str) -> Result<Self, MoneyError> {
        parse_fixed6(text).map(Fixed6)
    }
    /// Accepts a JSON/YAML number or a decimal string. A number goes through its
    /// shortest decimal representation, so `0.97` is exactly 970000 millionths.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, MoneyError> {
        match value {
            serde_json::Value::String(s) => Fixed6::parse(s),
            serde_json::Value::Number(n) => Fixed6::parse(&number_text(n)),
            other => Err(MoneyError::Syntax(other.to_string().chars().take(TEXT_BYTES_MAX).collect())),
        }
    }
}

/// serde_json prints very small and very large floats in exponent form (`1e-6`); shift the
/// decimal point of the shortest representation exactly, so that the fixed-point grammar
/// sees the number's own digits (and refuses more than 6 decimals) instead of a rounding.
fn number_text(n: &serde_json::Number) -> String {
    let text = n.to_string();
    let Some((mantissa, exponent)) = text.split_once(['e', 'E']) else { return text };
    let Ok(exponent) = exponent.parse::<i32>() else { return text };
    if mantissa.starts_with('-') || !(-40..=40).contains(&exponent) {
        return text;
    }
    let (int_digits, frac_digits) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int_digits}{frac_digits}");
    let point = i32::try_from(int_digits.len()).unwrap_or(0) + exponent;
    let plain = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(usize::try_from(-point).unwrap_or(0)))
    } else {
        let point = usize::try_from(point).unwrap_or(0);
        if point >= digits.len() {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", digits.get(..point).unwrap_or(""), digits.get(point..).unwrap_or(""))
        }
    };
    let plain = if plain.contains('.') { plain.trim_end_matches('0').trim_end_matches('.').to_owned() } else { plain };
    if plain.is_empty() { "0".to_owned() } else { plain }
}

impl fmt::Display for Fixed6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_fixed6(self.0, 0, f)
    }
}

macro_rules! string_conversions {
    ($($ty:ident),*) => {$(
        impl TryFrom<String> for $ty {
            type Error = MoneyError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                $ty::parse(&s)
            }
        }
        impl From<$ty> for String {
            fn from(v: $ty) -> String {
                v.to_string()
            }
        }
    )*};
}
string_conversions!(Amount, Currency, FxRate);

impl TryFrom<serde_json::Value> for Fixed6 {
    type Error = MoneyError;
    fn try_from(v: serde_json::Value) -> Result<Self, Self::Error> {
        Fixed6::from_json(&v)
    }
}
impl From<Fixed6> for String {
    fn from(v: Fixed6) -> String {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_valid_amounts() {
        assert_eq!(Amount::parse("0.03").unwrap().micros(), 30_000);
        assert_eq!(Amount::parse("3").unwrap().micros(), 3_000_000);
        assert_eq!(Amount::parse("0.000001").unwrap().micros(), 1);
        assert_eq!(Amount::parse("18446744073709.551615").unwrap(), Amount::MAX);
    }

    #[test]
    fn rejects_bad_amounts() {
        for bad in ["", " 1", "1 ", "-1", "+1", "1e3", "1.", ".5", "1.0000001", "1,00", "0x10", "1.2.3", "١"] {
            assert!(Amount::parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(matches!(Amount::parse("18446744073709.551616"), Err(MoneyError::TooLarge(_))));
        assert!(matches!(Amount::parse("99999999999999999999"), Err(MoneyError::TooLarge(_))));
        assert!(matches!(Amount::parse("0.1234567"), Err(MoneyError::TooPrecise(_))));
    }

    #[test]
    fn displays_like_the_documents() {
        let show = |s: &str| Amount::parse(s).unwrap().to_string();
        assert_eq!(Amount::MAX.to_string(), "18446744073709.551615", "the longest amount");
        assert_eq!(Amount::ZERO.to_string(), "0.00");
        assert_eq!(Fixed6::from_millionths(0).to_string(), "0", "every decimal trimmed");
        assert_eq!(Fixed6::from_millionths(u64::MAX).to_string(), "18446744073709.551615");
        assert_eq!(show("3.1"), "3.10");
        assert_eq!(show("0.118"), "0.118");
        assert_eq!(show("2"), "2.00");
        assert_eq!(show("0.000001"), "0.000001");
    }

    #[test]
    fn conversion_rounds_up() {
        let rate = FxRate::parse("0.92").unwrap();
        // 0.000001 USD * 0.92 = 0.00000092 EUR -> 0.000001
        assert_eq!(Amount::from_micros(1).convert(rate).unwrap().micros(), 1);
        assert_eq!(Amount::parse("0.03").unwrap().convert(rate).unwrap(), Amount::parse("0.0276").unwrap());
        assert!(Amount::MAX.convert(FxRate::parse("2").unwrap()).is_err());
        assert!(FxRate::parse("0").is_err());
    }

    #[test]
    fn overflow_is_an_error() {
        assert_eq!(Amount::MAX.checked_add(Amount::from_micros(1)), Err(MoneyError::Overflow));
        assert_eq!(Amount::ZERO.checked_sub(Amount::from_micros(1)), Err(MoneyError::Overflow));
    }

    #[test]
    fn currency_codes() {
        assert!(Currency::parse("EUR").is_ok());
        for bad in ["eur", "EU", "EURO", "E1R", ""] {
            assert!(Currency::parse(bad).is_err());
        }
    }

    #[test]
    fn fixed6_from_numbers() {
        let j = |v: serde_json::Value| Fixed6::from_json(&v);
        assert_eq!(j(serde_json::json!(0.97)).unwrap().millionths(), 970_000);
        assert_eq!(j(serde_json::json!("0.9")).unwrap().millionths(), 900_000);
        assert_eq!(j(serde_json::json!(30)).unwrap().millionths(), 30_000_000);
        assert!(j(serde_json::json!(-0.5)).is_err());
        assert!(j(serde_json::json!(0.00000001)).is_err());
        assert_eq!(j(serde_json::json!(0.000001)).unwrap().millionths(), 1);
        assert_eq!(j(serde_json::json!(0.000025)).unwrap().millionths(), 25);
        assert!(j(serde_json::json!(1e20)).is_err(), "overflows u64 micro-units");
        assert!(j(serde_json::json!(true)).is_err());
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(micros in any::<u64>()) {
            let a = Amount::from_micros(micros);
            prop_assert_eq!(Amount::parse(&a.to_string()).unwrap(), a);
        }

        /// The writer against `format!`'s: six decimals, trailing zeros trimmed down to
        /// two for an amount, to none for a rate.
        #[test]
        fn display_writes_six_decimals_trimmed_as_format_would(micros in prop_oneof![any::<u64>(), 0u64..10_000_000]) {
            let six = format!("{}.{:06}", micros / MICROS_PER_UNIT, micros % MICROS_PER_UNIT);
            let trimmed = |keep: usize| {
                let (whole, decimals) = six.split_once('.').unwrap();
                let cut = decimals.trim_end_matches('0');
                let decimals = if cut.len() < keep { &decimals[..keep] } else { cut };
                if decimals.is_empty() { whole.to_owned() } else { format!("{whole}.{decimals}") }
            };
            prop_assert_eq!(Amount::from_micros(micros).to_string(), trimmed(2));
            prop_assert_eq!(Fixed6::from_millionths(micros).to_string(), trimmed(0));
        }

        #[test]
        fn conversion_never_rounds_down(micros in 0u64..=u64::MAX / 4, rate in 1u64..4_000_000) {
            let rate = FxRate(rate);
            let converted = Amount::from_micros(micros).convert(rate).unwrap();
            let exact = u128::from(micros) * u128::from(rate.micros());
            let back = u128::from(converted.micros()) * u128::from(MICROS_PER_UNIT);
            // Never below the exact value, and less than one micro-unit above it.
            prop_assert!(back >= exact);
            prop_assert!(back - exact < u128::from(MICROS_PER_UNIT));
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = Amount::parse(&s);
            let _ = FxRate::parse(&s);
            let _ = Currency::parse(&s);
        }
    }
}
