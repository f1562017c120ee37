//! The review verbs of `holon job`: `status` (the Leash Line, and how the job's recent
//! commands ran under `holon job exec`), `drift` and `export`.

use std::path::PathBuf;

use holon::job::leash;
use holon::job::redact::printable;
use holon::job::state;
use serde_json::json;

use super::exit;
use super::job_env::job;
use super::out::{out, outln};
use super::style::Style;

pub(super) fn drift(state_dir: Option<PathBuf>, name: &str, json_out: bool, style: &Style) -> anyhow::Result<u8> {
    let mut records = job(state_dir, name)?.drift()?;
    records.reverse();
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&json!({ "job": name, "drift": records }))?)?;
        return Ok(exit::OK);
    }
    if records.is_empty() {
        outln!("no drift for `{name}`")?;
    }
    let open = records.iter().find(|d| d.status != state::DriftStatus::Widened).map(|d| d.id);
    for d in records {
        let status = match d.status {
            state::DriftStatus::Open => style.bad("open"),
            state::DriftStatus::Escalated => style.warn("escalated"),
            state::DriftStatus::Widened => style.warn("widened"),
        };
        outln!(
            "#{} {} {} run {} {}",
            d.id,
            style.dim(&d.time),
            status,
            printable(&d.run),
            style.bold(d.family.as_str())
        )?;
        outln!("    {}", printable(&d.call))?;
        outln!("    {}", style.dim(&printable(&d.reason)))?;
    }
    // The next step, for the person reading (never in `check`'s answer, which the agent
    // being guarded reads).
    if let Some(id) = open {
        outln!(
            "{}",
            style.dim(&format!(
                "to allow one: holon job widen {name} ID (exactly) or add --pattern (a broader rule, previewed); nothing changes until `holon job approve {name}` (e.g. ID {id})"
            ))
        )?;
    }
    Ok(exit::OK)
}

pub(super) fn status(state_dir: Option<PathBuf>, name: &str, style: &Style) -> anyhow::Result<u8> {
    let job = job(state_dir, name)?;
    let overview = job.overview()?;
    out!("{}", leash::render(&overview, style.color))?;
    if let Some(line) = confinement_line(&job.exec_records()?) {
        outln!("{line}")?;
    }
    Ok(exit::OK)
}

/// Whether the job's recent commands ran confined (`holon job exec`), in one line.
fn confinement_line(records: &[state::ExecRecord]) -> Option<String> {
    let last = records.last()?;
    let confined = records.iter().filter(|r| r.confined).count();
    Some(format!(
        "kernel: {confined} of the last {} commands run by `holon job exec` ran confined; the latest ({}, run {}) {}",
        records.len(),
        last.time,
        printable(&last.run),
        if last.confined { format!("confined, {}", last.how) } else { printable(&last.how) }
    ))
}

pub(super) fn export(state_dir: Option<PathBuf>, name: &str) -> anyhow::Result<u8> {
    let o = job(state_dir, name)?.overview()?;
    let ev = &o.evidence;
    let out = json!({
        "job": name,
        "version": o.version,
        "mode": o.meta.mode,
        "sha256": o.sha256,
        "tools": ev.tools,
        "paths": { "read": ev.read, "write": ev.write },
        "commands": ev.commands,
        "hosts": ev.hosts,
        "max_writes_per_run": o.mandate.as_ref().and_then(|m| m.limits.max_writes_per_run),
    });
    outln!("{}", serde_json::to_string_pretty(&out)?)?;
    Ok(exit::OK)
}
