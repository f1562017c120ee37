//! Secrets masked before a call is shown or stored in a drift record: `KEY=value`
//! assignments, URL credentials and secret-looking query parameters, `Bearer` tokens and
//! `Authorization:` headers, and the values of secret-looking flags.

/// Names that mark a value as secret (matched case-insensitively as substrings).
const SECRET_WORDS: &[&str] =
    &["token", "secret", "password", "passwd", "pwd", "key", "auth", "sig", "credential", "session", "cookie"];

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

/// Masks one URL: credentials and secret query values.
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
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = query.split_once('#').map_or((query, None), |(q, f)| (q, Some(f)));
            let masked: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if secret_name(k) => format!("{k}={MASK}"),
                    _ => pair.to_owned(),
                })
                .collect();
            let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
            format!("{path}?{}{fragment}", masked.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// The text with secrets masked. Works word by word, keeping the spacing.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut mask_next = false;
    let mut mask_password_next = false;
    for piece in text.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end_matches(char::is_whitespace);
        let space = piece.get(word.len()..).unwrap_or_default();
        let (lead, core) = word.split_at(word.len() - word.trim_start_matches(['\'', '"']).len());
        let scheme = ["bearer", "basic", "authorization:"].iter().any(|w| core.eq_ignore_ascii_case(w));
        let was_user_flag = std::mem::take(&mut mask_password_next);
        let masked = if scheme {
            mask_next = true;
            word.to_owned()
        } else if was_user_flag && core.contains(':') {
            password_masked(word)
        } else if matches!(core, "-u" | "--user" | "--proxy-user") {
            mask_password_next = true;
            word.to_owned()
        } else if mask_next && !core.is_empty() {
            mask_next = false;
            let trail = core.len() - core.trim_end_matches(['\'', '"']).len();
            format!("{lead}{MASK}{}", core.get(core.len() - trail..).unwrap_or_default())
        } else if core.contains("://") {
            let start = core.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
            let (pre, url) = core.split_at(start);
            format!("{lead}{pre}{}", redact_url(url))
        } else if let Some((name, _)) = core.split_once('=').filter(|(n, _)| is_env_name(n)) {
            format!("{lead}{name}={MASK}")
        } else if let Some(flag) = core.strip_prefix("--").or_else(|| core.strip_prefix('-')) {
            match flag.split_once('=') {
                Some((f, _)) if secret_name(f) => {
                    format!("{lead}-{}{f}={MASK}", if core.starts_with("--") { "-" } else { "" })
                }
                None if secret_name(flag) => {
                    mask_next = true;
                    word.to_owned()
                }
                _ => word.to_owned(),
            }
        } else {
            word.to_owned()
        };
        out.push_str(&masked);
        out.push_str(space);
    }
    out
}

/// `user:password` (in quotes or not) with the password masked.
fn password_masked(word: &str) -> String {
    match word.split_once(':') {
        Some((user, rest)) => {
            let trail = rest.len() - rest.trim_end_matches(['\'', '"']).len();
            format!("{user}:{MASK}{}", rest.get(rest.len() - trail..).unwrap_or_default())
        }
        None => word.to_owned(),
    }
}

/// Arguments with secret values masked, word by word, for pinned command rules: URL
/// credentials and secret query values, `NAME=value` and `--flag=value` where the name
/// looks secret, and the word after `Bearer`, `Basic`, `Authorization:` or a secret-looking
/// flag. Other values are kept, so a pinned argument still pins them.
pub fn redact_words(words: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut mask_next = false;
    let mut mask_password_next = false;
    for w in words {
        let lower = w.trim().to_ascii_lowercase();
        let was_user_flag = std::mem::take(&mut mask_password_next);
        mask_password_next = matches!(w.as_str(), "-u" | "--user" | "--proxy-user");
        let masked = if mask_next {
            MASK.to_owned()
        } else if was_user_flag && w.contains(':') {
            password_masked(w)
        } else if lower.starts_with("bearer ")
            || lower.starts_with("basic ")
            || lower.starts_with("authorization:")
            || w.contains("://")
        {
            redact(w)
        } else if let Some((name, _)) = w.split_once('=').filter(|(n, _)| secret_name(n.trim_start_matches('-'))) {
            format!("{name}={MASK}")
        } else {
            w.clone()
        };
        let flag = w.strip_prefix("--").or_else(|| w.strip_prefix('-'));
        mask_next = !mask_next
            && (matches!(lower.as_str(), "bearer" | "basic" | "authorization:")
                || flag.is_some_and(|f| !f.contains('=') && secret_name(f)));
        out.push(masked);
    }
    out
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
    use super::redact;

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
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want, "{input}");
        }
    }
}
