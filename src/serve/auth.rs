//! Bearer tokens: a tokens file maps the SHA-256 of each token (never the token) to a
//! principal's role; `holon token new` appends one and prints the plain token once.
//!
//! The file is text, one token a line: `sha256:<64 hex> <role>`, where the role is
//! `gateway` (admit, settle, release, sub-calls) or `account:<name>` (approve or refuse the
//! held calls of mandates `<name>` issued, read those mandates). `#` starts a comment.
//! A presented token is hashed and compared with every entry in constant time.

use std::io::Write;
use std::path::Path;

use holon::pattern::Principal;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Largest tokens file read, in bytes.
pub(crate) const TOKENS_FILE_BYTES_MAX: usize = 1 << 20;
/// Most tokens one file holds.
pub(crate) const TOKENS_MAX: usize = 10_000;
/// Longest bearer token accepted in a request, in bytes (ours are 70).
pub(crate) const TOKEN_BYTES_MAX: usize = 256;
/// Random bytes in a new token.
const TOKEN_RANDOM_BYTES: usize = 32;

/// Who a token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Role {
    /// The gateway: admits, settles and releases calls, makes sub-calls.
    Gateway,
    /// A mandate issuer: approves or refuses its own mandates' held calls, reads them.
    Account(Principal),
}

impl Role {
    pub(crate) fn parse(text: &str) -> Result<Role, String> {
        if text == "gateway" {
            return Ok(Role::Gateway);
        }
        match text.strip_prefix("account:").map(Principal::parse) {
            Some(Ok(p)) => Ok(Role::Account(p)),
            Some(Err(e)) => Err(format!("role `{text}`: {e}")),
            None => Err(format!("role `{text}`: expected `gateway` or `account:NAME` (NAME as a mandate's issuer)")),
        }
    }

    pub(crate) fn name(&self) -> String {
        match self {
            Role::Gateway => "gateway".to_owned(),
            Role::Account(p) => format!("account:{}", p.as_str()),
        }
    }
}

/// The tokens the server accepts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens {
    entries: Vec<([u8; 32], Role)>,
}

impl Tokens {
    /// Reads a tokens file; any line that is not a valid entry refuses the file, naming it.
    pub(crate) fn load(path: &Path) -> Result<Tokens, String> {
        let bytes = holon::doc::file::read_bounded(path, TOKENS_FILE_BYTES_MAX).map_err(|e| {
            format!(
                "tokens file {}: {e} (create one with `holon token new --role gateway --tokens {}`)",
                path.display(),
                path.display()
            )
        })?;
        let text = String::from_utf8(bytes).map_err(|_| format!("tokens file {}: not UTF-8", path.display()))?;
        Tokens::parse(&text).map_err(|e| format!("tokens file {}: {e}", path.display()))
    }

    fn parse(text: &str) -> Result<Tokens, String> {
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str| format!("line {}: {what}", n + 1);
            let (hash, role) = line.split_once(' ').ok_or_else(|| bad("expected `sha256:<64 hex> <role>`"))?;
            let hex = hash.strip_prefix("sha256:").ok_or_else(|| bad("the hash must start with `sha256:`"))?;
            let digest = parse_hex32(hex).ok_or_else(|| bad("the hash must be 64 hex digits"))?;
            let role = Role::parse(role.trim()).map_err(|e| bad(&e))?;
            if entries.len() >= TOKENS_MAX {
                return Err(bad(&format!("more than {TOKENS_MAX} tokens")));
            }
            entries.push((digest, role));
        }
        Ok(Tokens { entries })
    }

    /// The role of a presented token, if it is one of ours. Every entry is compared, in
    /// constant time, whatever matched, so the time taken says nothing of the token.
    pub(crate) fn role_of(&self, token: &str) -> Option<Role> {
        if token.len() > TOKEN_BYTES_MAX {
            return None;
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (hash, role) in &self.entries {
            if bool::from(hash.ct_eq(&digest)) && found.is_none() {
                found = Some(role.clone());
            }
        }
        found
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

fn parse_hex32(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let s = std::str::from_utf8(pair).ok()?;
        *slot = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// `holon token new`: a new random token for `role`, its hash appended to `path` (created
/// with mode 0600 if missing). Returns the plain token, which is stored nowhere.
pub(crate) fn new_token(role: &Role, path: &Path) -> Result<String, String> {
    let mut random = [0u8; TOKEN_RANDOM_BYTES];
    getrandom::fill(&mut random).map_err(|e| format!("no randomness from the operating system: {e}"))?;
    let token = format!("holon_{}", holon::hex::lower(&random));
    let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    // The file must stay readable by the server: check the existing one first.
    if path.exists() {
        let existing = Tokens::load(path)?;
        if existing.len() >= TOKENS_MAX {
            return Err(format!("tokens file {}: already {TOKENS_MAX} tokens", path.display()));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(file, "sha256:{} {}", holon::hex::lower(&digest), role.name())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.sync_all().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_is_accepted_by_its_hash_only_and_carries_its_role() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let gateway = new_token(&Role::Gateway, &path).unwrap();
        let alice = new_token(&Role::parse("account:alice").unwrap(), &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&gateway) && !text.contains(&alice), "plain tokens are never stored");
        let tokens = Tokens::load(&path).unwrap();
        assert_eq!(tokens.role_of(&gateway), Some(Role::Gateway));
        assert_eq!(tokens.role_of(&alice), Some(Role::Account(Principal::parse("alice").unwrap())));
        assert_eq!(tokens.role_of("holon_wrong"), None);
        assert_eq!(tokens.role_of(&"x".repeat(TOKEN_BYTES_MAX + 1)), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn a_bad_line_or_role_refuses_the_file() {
        for bad in [
            "sha256:00 gateway",
            "md5:0000000000000000000000000000000000000000000000000000000000000000 gateway",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000 admin",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000 account:",
            "sha256:000000000000000000000000000000000000000000000000000000000000000g gateway",
            "justoneword",
        ] {
            assert!(Tokens::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Tokens::parse("# only a comment\n\n").unwrap().len(), 0);
    }
}
