//! What the job verbs read from the environment when a flag does not say it, in one place
//! for every verb (`observe`, `check`, `exec`, `hook`, and the state directory of all of
//! them): the run, the scope and the state directory. Nothing else reads `HOLON_*`.

use std::path::PathBuf;

use holon::job::state::{Job, Scope};

/// The state directory: `--state DIR`, else `HOLON_STATE`, else `.holon`. An empty
/// `HOLON_STATE` is unset, as an empty `HOLON_RUN` is (it used to name the empty path); an
/// empty `--state` is kept and refused by the state layer, since it says a directory was
/// meant.
pub(super) fn state_root(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("HOLON_STATE").filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(".holon"))
}

/// The job `name` in the state directory `flag` names (see [`state_root`]).
pub(super) fn job(flag: Option<PathBuf>, name: &str) -> anyhow::Result<Job> {
    Ok(Job::open(&state_root(flag), name)?)
}

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
