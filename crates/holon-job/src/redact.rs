//! Secrets masked before a call is shown or stored in a drift record: `KEY=value`
//! assignments, URL credentials and secret-looking query and fragment parameters,
//! `Bearer` tokens and secret-looking headers (`Authorization:`, `X-Api-Key:`,
//! `PRIVATE-TOKEN:`, `Cookie:`), the values of secret-looking flags and of bare
//! secret-looking names (`aws_secret_access_key VALUE`), and `-pVALUE` / `-p VALUE` for
//! the commands where `-p` is a password.
//!
//! Pinned arguments ([`redact_words`]) are masked as `***` followed by a hash of the whole
//! original word, so a masked word still pins its value (a different value never
//! matches) while the secret is never written.

/// Names that mark a value as secret (matched case-insensitively as substrings).
const SECRET_WORDS: &[&str] =
    &["token", "secret", "password", "passwd", "pass", "pwd", "key", "auth", "sig", "credential", "session", "cookie"];

/// Flags whose name looks secret but that take no value: the word after them is kept.
/// (Flags starting with `--no-` take no value either.)
const NO_VALUE_FLAGS: &[&str] = &[
    "--anyauth",
    "--proxy-anyauth",
    "--keep-session-cookies",
    "--auth-no-challenge",
    "--signed",
    "--sign",
    "--gpg-sign",
    "--password-stdin",
    "--show-signature",
    "--verify-signatures",
];

/// Commands whose `-p` takes a password (`-pVALUE` or `-p VALUE`); elsewhere `-p` is
/// usually a port or a path and is kept.
const PASSWORD_P_COMMANDS: &[&str] = &[
    "mysql",
    "mysqladmin",
    "mysqldump",
    "mysqlimport",
    "mysqlshow",
    "mysqlcheck",
    "mariadb",
    "mariadb-dump",
    "sshpass",
];

/// Hex characters of the SHA-256 of the original word kept after a mask in pinned
/// arguments (128 bits).
const PIN_HASH_HEX_CHARS: usize = 32;

const MASK: &str = "***";

fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| lower.contains(w))
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

/// A header name (`X-Api-Key`, `PRIVATE-TOKEN`): letters, digits, `-` and `_`.
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn takes_no_value(flag: &str) -> bool {
    NO_VALUE_FLAGS.contains(&flag) || flag.starts_with("--no-")
}

fn password_p_command(head: &str) -> bool {
    let base = head.rsplit('/').next().unwrap_or(head);
    PASSWORD_P_COMMANDS.contains(&base)
}

/// `k=v&k2=v2` with secret-looking values masked.
fn redact_pairs(pairs: &str) -> String {
    let masked: Vec<String> = pairs
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if secret_name(k) => format!("{k}={MASK}"),
            _ => pair.to_owned(),
        })
        .collect();
    masked.join("&")
}

/// Masks one URL: credentials, secret query values and secret fragment values.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("{MASK}@{host}"),
        None => authority.to_owned(),
    };
    let (tail, fragment) = tail.split_once('#').map_or((tail, None), |(t, f)| (t, Some(f)));
    let tail = match tail.split_once('?') {
        Some((path, query)) => format!("{path}?{}", redact_pairs(query)),
        None => tail.to_owned(),
    };
    let fragment = fragment.map(|f| format!("#{}", redact_pairs(f))).unwrap_or_default();
    format!("{scheme}://{authority}{tail}{fragment}")
}

/// The word-by-word masking shared by [`redact`] and [`redact_words`]: what the previous
/// words said about the next one.
#[derive(Default)]
struct Masker {
    /// The next word is a secret value.
    mask_next: bool,
    /// The next word may be `user:password`.
    user_next: bool,
    /// `-p` is a password here.
    password_p: bool,
    /// Display text: every `NAME=value` is masked, not only secret-looking names.
    display: bool,
}

impl Masker {
    /// The word (without its quotes) masked with plain `***`, or `None` when it is kept.
    fn word(&mut self, core: &str) -> Option<String> {
        if core.is_empty() {
            return None;
        }
        let mask_now = std::mem::take(&mut self.mask_next);
        let user_now = std::mem::take(&mut self.user_next);
        let lower = core.to_ascii_lowercase();
        if matches!(lower.as_str(), "bearer" | "basic" | "token") && mask_now {
            // `Authorization: Bearer X`: the scheme is kept, the value after it masked.
            self.mask_next = true;
            return None;
        }
        if mask_now {
            return Some(MASK.to_owned());
        }
        if password_p_command(core) {
            // A command (`sshpass`, not a secret-looking name): its `-p` is a password.
            self.password_p = true;
            return None;
        }
        if matches!(lower.as_str(), "bearer" | "basic") {
            self.mask_next = true;
            return None;
        }
        for scheme in ["bearer ", "basic "] {
            if lower.starts_with(scheme) {
                return Some(format!("{}{MASK}", core.get(..scheme.len()).unwrap_or_default()));
            }
        }
        if user_now && core.contains(':') && !core.contains("://") {
            return Some(password_masked(core));
        }
        if matches!(core, "-u" | "--user" | "--proxy-user") {
            self.user_next = true;
            return None;
        }
        if core.contains("://") {
            let start = core.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
            let (pre, url) = core.split_at(start);
            let masked = format!("{pre}{}", redact_url(url));
            return (masked != core).then_some(masked);
        }
        // A header, `Name: value` in one word, or `Name:` with the value in the next.
        if let Some((name, value)) = core.split_once(':')
            && is_header_name(name)
            && secret_name(name)
        {
            let value = value.trim_start();
            if value.is_empty() {
                self.mask_next = true;
                return None;
            }
            let scheme = ["bearer ", "basic ", "token "]
                .iter()
                .find(|s| value.to_ascii_lowercase().starts_with(**s))
                .and_then(|s| value.get(..s.len()))
                .unwrap_or_default();
            return Some(format!("{name}: {scheme}{MASK}"));
        }
        if let Some(flag) = core.strip_prefix("--").or_else(|| core.strip_prefix('-')).filter(|f| !f.is_empty()) {
            if let Some((f, _)) = flag.split_once('=') {
                let dashes = if core.starts_with("--") { "--" } else { "-" };
                return secret_name(f).then(|| format!("{dashes}{f}={MASK}"));
            }
            if self.password_p && !core.starts_with("--") {
                if core == "-p" {
                    self.mask_next = true;
                    return None;
                }
                if core.strip_prefix("-p").is_some_and(|v| !v.is_empty()) {
                    return Some(format!("-p{MASK}"));
                }
            }
            if secret_name(flag) && !takes_no_value(core) {
                self.mask_next = true;
            }
            return None;
        }
        if let Some((name, _)) = core.split_once('=') {
            let masked = if self.display { is_env_name(name) } else { secret_name(name) };
            return masked.then(|| format!("{name}={MASK}"));
        }
        // A bare secret-looking name (`aws_secret_access_key VALUE`, `password VALUE`).
        if is_env_name(core) && secret_name(core) {
            self.mask_next = true;
        }
        None
    }
}

/// The text with secrets masked. Works word by word, keeping the spacing.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut m = Masker { display: true, ..Masker::default() };
    for piece in text.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end_matches(char::is_whitespace);
        let space = piece.get(word.len()..).unwrap_or_default();
        let (lead, quoted) = word.split_at(word.len() - word.trim_start_matches(['\'', '"']).len());
        let core = quoted.trim_end_matches(['\'', '"']);
        let trail = quoted.get(core.len()..).unwrap_or_default();
        match m.word(core) {
            Some(masked) => {
                out.push_str(lead);
                out.push_str(&masked);
                out.push_str(trail);
            }
            None => out.push_str(word),
        }
        out.push_str(space);
    }
    out
}

/// `user:password` (in quotes or not) with the password masked.
fn password_masked(word: &str) -> String {
    match word.split_once(':') {
        Some((user, _)) => format!("{user}:{MASK}"),
        None => word.to_owned(),
    }
}

/// The first [`PIN_HASH_HEX_CHARS`] hex characters of the SHA-256 of `word`.
fn pin_hash(word: &str) -> String {
    let hex = crate::hex::sha256(word.as_bytes());
    hex.get(..PIN_HASH_HEX_CHARS).unwrap_or(&hex).to_owned()
}

/// Arguments of command `head` with secret values masked, word by word, for pinned
/// command rules: URL credentials and secret query or fragment values, `NAME=value` and
/// `--flag=value` where the name looks secret, secret-looking headers, `-pVALUE` for the
/// commands where `-p` is a password, and the word after `Bearer`, `Basic`, a
/// secret-looking header name, flag or bare name. Each mask is `***` followed by a hash
/// of the whole original word, so a masked argument still pins its value; other words
/// are kept.
pub fn redact_words(head: &str, words: &[String]) -> Vec<String> {
    let mut m = Masker { password_p: password_p_command(head), ..Masker::default() };
    words
        .iter()
        .map(|w| match m.word(w) {
            Some(masked) => {
                let pinned = format!("{MASK}{}", pin_hash(w));
                if masked.contains(MASK) { masked.replace(MASK, &pinned) } else { pinned }
            }
            None => w.clone(),
        })
        .collect()
}

/// The text safe to print on a reviewer's terminal: every control character (escape
/// sequences, carriage returns, bells, newlines) written as a visible `\u{…}` escape.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{PIN_HASH_HEX_CHARS, redact, redact_words};

    #[test]
    fn secrets_are_masked_and_the_rest_kept() {
        let cases = [
            ("GITHUB_TOKEN=ghp_abc git push", "GITHUB_TOKEN=*** git push"),
            ("env API_KEY=s3cr3t make deploy", "env API_KEY=*** make deploy"),
            ("curl https://user:pw@api.x.com/v1?token=abc&page=2", "curl https://***@api.x.com/v1?token=***&page=2"),
            ("curl -H 'Authorization: Bearer abc.def' https://x", "curl -H 'Authorization: Bearer ***' https://x"),
            ("deploy --token abc --verbose", "deploy --token *** --verbose"),
            ("deploy --password=hunter2", "deploy --password=***"),
            ("curl -u admin:pw https://x", "curl -u admin:*** https://x"),
            ("curl --user 'admin:pw' https://x", "curl --user 'admin:***' https://x"),
            ("git status --short", "git status --short"),
            ("cargo build --message-format=json", "cargo build --message-format=json"),
            ("curl -H 'X-Api-Key: k1' https://x", "curl -H 'X-Api-Key: ***' https://x"),
            ("curl -H PRIVATE-TOKEN:glpat-1 https://x", "curl -H PRIVATE-TOKEN: *** https://x"),
            ("curl -H 'Cookie: a=b' https://x", "curl -H 'Cookie: ***' https://x"),
            ("mysql -ppw -h db -p 3306", "mysql -p*** -h db -p ***"),
            ("sshpass -p pw ssh host", "sshpass -p *** ssh host"),
            ("ssh -p 2222 host", "ssh -p 2222 host"),
            ("aws configure set aws_secret_access_key s3", "aws configure set aws_secret_access_key ***"),
            ("curl https://x/cb#access_token=t&state=1", "curl https://x/cb#access_token=***&state=1"),
            ("curl --anyauth https://x", "curl --anyauth https://x"),
            ("git push -u https://github.com/org/r.git main", "git push -u https://github.com/org/r.git main"),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want, "{input}");
        }
    }

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn pinned_masks_keep_a_hash_of_the_value_and_never_the_value() {
        let a = redact_words("deploy", &words(&["--token", "s3cr3t-a", "prod"]));
        let b = redact_words("deploy", &words(&["--token", "s3cr3t-b", "prod"]));
        assert_eq!(a, redact_words("deploy", &words(&["--token", "s3cr3t-a", "prod"])), "deterministic");
        assert_ne!(a, b, "a different value is a different argument");
        for (masked, secret) in [(&a, "s3cr3t-a"), (&b, "s3cr3t-b")] {
            assert!(masked.iter().all(|w| !w.contains(secret)), "{masked:?}");
            assert!(masked.get(1).is_some_and(|w| w.starts_with("***") && w.len() == 3 + PIN_HASH_HEX_CHARS));
        }
        let header = redact_words("curl", &words(&["-H", "X-Api-Key: k1", "https://x"]));
        assert!(header.get(1).is_some_and(|w| w.starts_with("X-Api-Key: ***") && !w.contains("k1")), "{header:?}");
        // `-p` is a password only for the commands that say so.
        assert_eq!(redact_words("ssh", &words(&["-p", "2222", "host"])), words(&["-p", "2222", "host"]));
        assert!(redact_words("mysql", &words(&["-ppw"])).iter().all(|w| !w.contains("pw")));
        // Flags that take no value hide nothing.
        for w in [&["--anyauth", "https://x"][..], &["--signed", "origin"], &["--password-stdin", "ghcr.io"]] {
            assert_eq!(redact_words("x", &words(w)), words(w));
        }
    }
}
