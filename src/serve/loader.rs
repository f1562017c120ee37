//! `--documents DIR` for `holon serve`: the directory is read by the library's one loader
//! ([`holon::documents::directory`]); the tokens file is the server's own.

use std::path::Path;

pub(crate) use holon::documents::directory::{LoadFailure, TrustFiles, load, trust_only, whole};

/// The tokens file as a reload reads it.
pub(crate) struct TokensRead {
    pub tokens: crate::serve::auth::Tokens,
    /// The file is gone (deleted): read as no token.
    pub missing: bool,
}

/// The tokens file: a file with no token, or no file at all, is a valid answer that
/// authenticates nobody (withdrawing every token must work, not fail open); only a file
/// that cannot be read or parsed is a failure (then the old tokens keep serving).
pub(crate) fn tokens(path: &Path) -> Result<TokensRead, LoadFailure> {
    // A dangling link (a secret's mount withdrawn) is a missing file too.
    match path.try_exists() {
        Ok(false) => return Ok(TokensRead { tokens: crate::serve::auth::Tokens::default(), missing: true }),
        Ok(true) => {}
        Err(e) => return Err(whole(path, &format!("cannot tell whether the tokens file exists: {e}"))),
    }
    let tokens = crate::serve::auth::Tokens::load(path).map_err(|m| whole(path, &m))?;
    Ok(TokensRead { tokens, missing: false })
}
