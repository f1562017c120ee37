//! Keys: the trusted keys document (`holon_keys`), which maps accounts (and agents, which
//! issue sub-mandates) to the ed25519 public keys trusted to sign for them, and the private
//! key file `holon key new` writes. Keys and signatures are standard base64 (RFC 4648,
//! padded) in YAML.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use crate::doc::Violation;
use crate::pattern::Principal;

/// Most keys in one trusted keys document (the schema says so too).
pub const TRUSTED_KEYS_MAX: usize = 10_000;
/// The version of the trusted keys document this build reads.
pub const KEYS_VERSION: &str = "0.1";
/// The version of the private key file this build reads.
pub const PRIVATE_KEY_VERSION: &str = "0.1";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    #[error("`{0}` is not base64 (RFC 4648, with padding): copy the key again, whole")]
    NotBase64(String),
    #[error("an ed25519 {what} is {expected} bytes; this one is {found}: copy the key again, whole")]
    WrongLength { what: &'static str, expected: usize, found: usize },
    #[error(
        "this is not an ed25519 public key (not a point of the curve, or a weak key): generate one with `holon key new`"
    )]
    NotAKey,
}

/// Decodes base64 into exactly `N` bytes.
pub(crate) fn decode<const N: usize>(text: &str, what: &'static str) -> Result<[u8; N], KeyError> {
    let short: String = text.chars().take(24).collect();
    let bytes = STANDARD.decode(text.trim()).map_err(|_| KeyError::NotBase64(short))?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| KeyError::WrongLength { what, expected: N, found: bytes.len() })
}

pub(crate) fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// An ed25519 public key that is a valid, non-weak point.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(pub(crate) VerifyingKey);

impl PublicKey {
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let bytes = decode::<32>(text, "public key")?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::NotAKey)?;
        if key.is_weak() {
            return Err(KeyError::NotAKey);
        }
        Ok(PublicKey(key))
    }

    pub fn to_base64(&self) -> String {
        encode(self.0.as_bytes())
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.to_base64())
    }
}

impl Serialize for PublicKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PublicKey::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The trusted keys document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedKeys {
    pub holon_keys: String,
    #[serde(default)]
    pub keys: Vec<TrustedKey>,
}

impl Default for TrustedKeys {
    fn default() -> Self {
        TrustedKeys { holon_keys: KEYS_VERSION.into(), keys: Vec::new() }
    }
}

/// One account's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedKey {
    pub account: Principal,
    pub public_key: PublicKey,
}

impl TrustedKeys {
    /// Whether `key` is trusted to sign for `account`.
    pub fn trusts(&self, account: &Principal, key: &PublicKey) -> bool {
        self.keys.iter().any(|k| &k.account == account && &k.public_key == key)
    }

    /// Adds `key` for `account`; false when it was there already.
    pub fn add(&mut self, account: Principal, key: PublicKey) -> bool {
        if self.trusts(&account, &key) {
            return false;
        }
        self.keys.push(TrustedKey { account, public_key: key });
        true
    }
}

/// The rules of a trusted keys document beyond its shape.
pub fn validate(keys: &TrustedKeys) -> Vec<Violation> {
    let mut out = Vec::new();
    if keys.keys.len() > TRUSTED_KEYS_MAX {
        out.push(Violation::new("/keys", format!("at most {TRUSTED_KEYS_MAX} keys in one document")));
    }
    for (i, key) in keys.keys.iter().enumerate() {
        if keys.keys.iter().take(i).any(|k| k == key) {
            out.push(Violation::new(
                format!("/keys/{i}"),
                format!("the same key for `{}` is listed twice; keep one", key.account),
            ));
        }
    }
    out
}

/// The private key file: one account's ed25519 secret key. Written with mode 0600.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivateKeyFile {
    pub holon_private_key: String,
    pub account: Principal,
    pub secret_key: String,
}

/// A signing key and the account it signs for.
pub struct PrivateKey {
    pub account: Principal,
    pub(crate) key: SigningKey,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateKey")
            .field("account", &self.account)
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

impl PrivateKey {
    /// The key whose secret is `seed` (32 random bytes from the operating system).
    pub fn from_seed(account: Principal, seed: [u8; 32]) -> Self {
        PrivateKey { account, key: SigningKey::from_bytes(&seed) }
    }

    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.key.verifying_key())
    }

    pub fn to_file(&self) -> PrivateKeyFile {
        PrivateKeyFile {
            holon_private_key: PRIVATE_KEY_VERSION.into(),
            account: self.account.clone(),
            secret_key: encode(self.key.as_bytes()),
        }
    }

    pub fn from_file(file: &PrivateKeyFile) -> Result<Self, KeyError> {
        let seed = decode::<32>(&file.secret_key, "secret key")?;
        Ok(PrivateKey::from_seed(file.account.clone(), seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_keys_are_clear_errors() {
        assert!(matches!(PublicKey::parse("not base64!"), Err(KeyError::NotBase64(_))));
        assert_eq!(
            PublicKey::parse(&encode(&[7u8; 31])),
            Err(KeyError::WrongLength { what: "public key", expected: 32, found: 31 })
        );
        // The identity point is a weak key: any signature "verifies" under it.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(PublicKey::parse(&encode(&identity)), Err(KeyError::NotAKey));
        let key = PrivateKey::from_seed(Principal::parse("alice").unwrap(), [9u8; 32]);
        let round = PublicKey::parse(&key.public_key().to_base64()).unwrap();
        assert_eq!(round, key.public_key());
        let back = PrivateKey::from_file(&key.to_file()).unwrap();
        assert_eq!(back.public_key(), key.public_key());
    }
}
