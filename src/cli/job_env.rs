//! What the job verbs read from the environment when a flag does not say it, in one place
//! for every verb (`observe`, `check`, `exec`, `hook`): the run and the scope.

use holon::job::state::Scope;

/// The run a call is given (`--run`, else `HOLON_RUN`), the one rule for every verb: an
/// empty value names no run (the call's own `run` or `session_id` then decide), whether
/// it comes from the flag or the environment.
pub(super) fn run_of(flag: Option<String>) -> Option<String> {
    flag.filter(|r| !r.is_empty()).or_else(|| std::env::var("HOLON_RUN").ok().filter(|r| !r.is_empty()))
}

/// `--scope`, else `HOLON_SCOPE`: cron, interactive, or unknown (treated as cron).
pub(super) fn scope_of(flag: Option<String>) -> Scope {
    match flag.or_else(|| std::env::var("HOLON_SCOPE").ok()).as_deref() {
        Some("cron") => Scope::Cron,
        Some("interactive") => Scope::Interactive,
        _ => Scope::Unknown,
    }
}
