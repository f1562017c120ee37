//! The canonical form of a document: the JSON Canonicalization Scheme (RFC 8785) of its
//! JSON value with the top-level `signature` block left out. Whitespace, key order, YAML
//! quoting and flow or block style do not change it; every value does.
//!
//! RFC 8785 writes numbers as IEEE doubles, so an integer beyond 2^53 would share its
//! canonical form with its neighbour. Such a document has no canonical form here (an
//! error): a signature must never cover two meanings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use thiserror::Error;

/// The key of the signature block, left out of the canonical form.
pub const SIGNATURE_KEY: &str = "signature";
/// The largest integer an IEEE double holds exactly (2^53).
const EXACT_INTEGER_MAX: u64 = 1 << 53;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CanonicalError {
    #[error(
        "{path}: the number {number} cannot be signed: the canonical form (RFC 8785) keeps numbers as IEEE doubles, exact only up to 2^53; write a smaller number or quote it"
    )]
    InexactNumber { path: String, number: String },
    #[error("cannot write the canonical form: {0}")]
    Write(String),
}

/// The canonical bytes of `value` without its top-level `signature`.
pub fn canonical_bytes(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    check_numbers(value, &mut String::new())?;
    let result = match value {
        Value::Object(map) if map.contains_key(SIGNATURE_KEY) => {
            let mut unsigned = map.clone();
            unsigned.remove(SIGNATURE_KEY);
            serde_json_canonicalizer::to_vec(&unsigned)
        }
        _ => serde_json_canonicalizer::to_vec(value),
    };
    result.map_err(|e| CanonicalError::Write(e.to_string()))
}

/// The digest of `value`'s canonical form.
pub fn digest(value: &Value) -> Result<Digest, CanonicalError> {
    canonical_bytes(value).map(|bytes| Digest::of(&bytes))
}

fn check_numbers(value: &Value, path: &mut String) -> Result<(), CanonicalError> {
    match value {
        Value::Number(n) => {
            let exact = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => u <= EXACT_INTEGER_MAX,
                (None, Some(i)) => i.unsigned_abs() <= EXACT_INTEGER_MAX,
                // A float is a double already: its canonical form is exact.
                (None, None) => n.as_f64().is_some_and(f64::is_finite),
            };
            if exact {
                Ok(())
            } else {
                Err(CanonicalError::InexactNumber {
                    path: if path.is_empty() { "/".into() } else { path.clone() },
                    number: n.to_string(),
                })
            }
        }
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| nested(path, &i.to_string(), item)),
        Value::Object(map) => map.iter().try_for_each(|(k, item)| nested(path, &crate::doc::pointer_escape(k), item)),
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

fn nested(path: &mut String, token: &str, item: &Value) -> Result<(), CanonicalError> {
    let len = path.len();
    path.push('/');
    path.push_str(token);
    let result = check_numbers(item, path);
    path.truncate(len);
    result
}

/// A typed document's canonical form as it was read: its JSON value and digest. Kept with
/// the typed value so that a signature is checked against what was read, and an edit made
/// to the typed value in code afterwards is seen ([`Canonical::still_describes`]) instead of
/// passing under the old digest.
#[derive(Debug, Clone)]
pub struct Canonical {
    value: std::sync::Arc<Value>,
    digest: Digest,
}

impl PartialEq for Canonical {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Canonical {
    /// The canonical form of `value`, a document as read.
    pub fn of(value: &Value) -> Result<Self, CanonicalError> {
        Ok(Canonical { value: std::sync::Arc::new(value.clone()), digest: digest(value)? })
    }

    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Whether `typed` is still what this value reads as: the value read again into `T`
    /// and both written out compare equal. False for a typed value edited since it was
    /// read (its digest would no longer describe it).
    pub fn still_describes<T: Serialize + serde::de::DeserializeOwned>(&self, typed: &T) -> bool {
        let Ok(again) = serde_json::from_value::<T>((*self.value).clone()) else { return false };
        match (serde_json::to_value(&again), serde_json::to_value(typed)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// A SHA-256 digest, written `sha256:<64 lower-case hex digits>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

/// The prefix of a written digest.
pub const DIGEST_PREFIX: &str = "sha256:";

impl Digest {
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DIGEST_PREFIX)?;
        f.write_str(&crate::hex::lower(&self.0))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{0}` is not a digest: write sha256: and 64 lower-case hex digits")]
pub struct DigestError(pub String);

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DigestError(s.chars().take(80).collect());
        let hex = s.strip_prefix(DIGEST_PREFIX).filter(|h| h.len() == 64).ok_or_else(bad)?;
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let text = std::str::from_utf8(pair).map_err(|_| bad())?;
            if text.bytes().any(|c| !matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(bad());
            }
            *byte = u8::from_str_radix(text, 16).map_err(|_| bad())?;
        }
        Ok(Digest(out))
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_the_signature_block_do_not_change_the_canonical_form() {
        let a = json!({"b": 1, "a": {"y": "x", "x": [1, 2.5]}});
        let b = json!({"a": {"x": [1, 2.5], "y": "x"}, "b": 1, "signature": {"value": "anything"}});
        assert_eq!(canonical_bytes(&a).unwrap(), canonical_bytes(&b).unwrap());
        assert_eq!(canonical_bytes(&a).unwrap(), br#"{"a":{"x":[1,2.5],"y":"x"},"b":1}"#);
        assert_ne!(digest(&a).unwrap(), digest(&json!({"b": 2, "a": {"y": "x", "x": [1, 2.5]}})).unwrap());
    }

    #[test]
    fn an_integer_a_double_cannot_hold_exactly_has_no_canonical_form() {
        assert!(canonical_bytes(&json!({"n": 1u64 << 53})).is_ok());
        let err = canonical_bytes(&json!({"a": [{"n": (1u64 << 53) + 1}]})).unwrap_err();
        assert_eq!(err, CanonicalError::InexactNumber { path: "/a/0/n".into(), number: "9007199254740993".into() });
        assert!(canonical_bytes(&json!({"n": -(1i64 << 54)})).is_err());
    }

    #[test]
    fn digests_round_trip_and_bad_ones_are_refused() {
        let d = Digest::of(b"holon");
        assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
        for bad in ["sha256:", "sha256:ABCD", "md5:00", &format!("sha256:{}", "G".repeat(64)), &"0".repeat(71)] {
            assert!(bad.parse::<Digest>().is_err(), "{bad}");
        }
        let upper = d.to_string().to_uppercase().replace("SHA256:", "sha256:");
        assert!(upper.parse::<Digest>().is_err() || upper == d.to_string());
    }
}
