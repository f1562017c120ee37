//! `holon records build`: agent records from receipt files (the measuring is
//! `holon::measure`; here the files are read, streamed, and the records written).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use holon::doc;
use holon::measure::{Builder, LINE_BYTES_MAX, MeasureError};
use holon::time::Timestamp;
use serde_json::json;

use super::exit;
use super::out::outln;
use super::style::Style;

#[derive(clap::Subcommand)]
pub(super) enum RecordsCommand {
    /// One `holon_record` per agent version from receipt files: success rate (declared
    /// failures apart), p50/p95 latency, runs, cost per success, distinct payers, the share
    /// of agent callers, and evaluation scores.
    #[command(
        after_help = "EXIT CODES: 0 built, 2 bad input (an unreadable receipts or evals file, a line that is not one, a bad --at or --window, a non-empty --out, a closed output pipe).\n\nEXAMPLES:\n  holon loadtest --calls 100000 --receipts receipts.jsonl\n  holon records build --receipts receipts.jsonl --at 2026-11-30T00:00:00Z --out records/\n  holon search table --mandate my-mandate.yaml --agents agents/ --records records/"
    )]
    Build {
        /// Receipt files, JSON lines (`holon serve --receipts`, `loadtest --receipts`,
        /// `demo --receipts`); read one line at a time, in any order.
        #[arg(long, required = true, num_args = 1..)]
        receipts: Vec<PathBuf>,
        /// The end of the window (RFC 3339). Required: the same receipts give the same
        /// records whatever day it is.
        #[arg(long)]
        at: String,
        /// The window's length in days, 1d to 30d.
        #[arg(long, default_value = "30d")]
        window: String,
        /// Evaluation scores, JSON lines {"agent", "version", "score"}: averaged per
        /// version into `eval_score`; not counted as runs.
        #[arg(long)]
        evals: Option<PathBuf>,
        /// The directory to write records to (`NS/NAME@VERSION.yaml`); new or empty.
        #[arg(long)]
        out: PathBuf,
        /// Print {"counts": {...}, "records": [paths]}.
        #[arg(long)]
        json: bool,
    },
    /// Print RECORD with its publisher's provenance signature over MANIFEST (the whole
    /// manifest, canonical form): what an engine that requires signatures admits.
    #[command(
        after_help = "EXIT CODES: 0 signed (printed, or written to --out), 2 bad input (an unreadable or invalid file, a record of another agent or version, a key that is not the namespace's, a closed output pipe).\n\nEXAMPLES:\n  holon records sign examples/agents/fx-convert/record.yaml --manifest examples/agents/fx-convert/holon.yaml --key examples/trust/holon-labs.key"
    )]
    Sign {
        /// The agent's record (a YAML file).
        record: PathBuf,
        /// The agent's manifest (its holon.yaml), exactly as published.
        #[arg(long)]
        manifest: PathBuf,
        /// The publisher's private key: the account of the agent's namespace.
        #[arg(long)]
        key: PathBuf,
        /// Write the signed record here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `holon records sign`: the record with its publisher's provenance signature over the
/// manifest (docs/trust.md).
pub(crate) fn sign(record: &Path, manifest: &Path, key: &Path, out: Option<&Path>) -> anyhow::Result<u8> {
    let mut r = holon::documents::load_record(record)?;
    let m = holon::documents::load_manifest(manifest)?;
    let key = super::trust::load_private(key)?;
    if r.agent != m.id || r.version.as_ref().is_some_and(|v| v != &m.version) {
        bail!(
            "{} is the record of {}{}, not of {}@{}: sign each version's record with its own manifest",
            record.display(),
            r.agent,
            r.version.as_ref().map(|v| format!("@{v}")).unwrap_or_default(),
            m.id,
            m.version
        );
    }
    if key.account.as_str() != m.id.namespace() {
        bail!(
            "the key is {}'s, and only the account `{}` publishes in that namespace: sign with its key",
            key.account,
            m.id.namespace()
        );
    }
    r.provenance = holon::trust::provenance::sign(&m, &key);
    let mut keys = holon::trust::TrustedKeys::default();
    keys.add(key.account.clone(), key.public_key());
    holon::trust::provenance::verify(&m, Some(&r), &keys)
        .map_err(|e| anyhow::anyhow!("the signed record does not verify; this is a bug, please report it: {e}"))?;
    let text = doc::to_yaml(&r)?;
    match out {
        Some(path) => std::fs::write(path, text).with_context(|| path.display().to_string())?,
        None => super::out::text(format_args!("{text}"))?,
    }
    Ok(exit::OK)
}

pub(crate) struct BuildArgs {
    pub receipts: Vec<PathBuf>,
    pub at: String,
    pub window: String,
    pub evals: Option<PathBuf>,
    pub out: PathBuf,
    pub json: bool,
}

/// `30d` (or `7d`, `1d`) as days.
fn window_days(text: &str) -> anyhow::Result<u32> {
    let days = text
        .strip_suffix('d')
        .and_then(|n| n.parse::<u32>().ok())
        .with_context(|| format!("--window {text}: write a number of days like 30d"))?;
    if !(1..=holon::measure::WINDOW_DAYS_MAX).contains(&days) {
        bail!("--window {text}: {}", MeasureError::Window);
    }
    Ok(days)
}

pub(crate) fn build(args: &BuildArgs, style: &Style) -> anyhow::Result<u8> {
    let at = Timestamp::parse(&args.at).context("--at")?;
    let mut builder = Builder::new(at, window_days(&args.window)?)?;
    if args.out.exists() && std::fs::read_dir(&args.out).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!(
            "--out {}: not an empty directory: records are written afresh, so that none is left from an earlier build; choose a new directory",
            args.out.display()
        );
    }
    let total_bytes: u64 = args.receipts.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let bar = if !args.json && super::loadtest::progress_wanted() {
        indicatif::ProgressBar::new(total_bytes)
    } else {
        indicatif::ProgressBar::hidden()
    };
    if let Ok(s) = indicatif::ProgressStyle::with_template("  {bar:30} {bytes}/{total_bytes} of receipts  {elapsed}") {
        bar.set_style(s);
    }
    for path in &args.receipts {
        each_line(path, &bar, |text, n| builder.add_receipt(text, n))?;
    }
    bar.finish_and_clear();
    if let Some(path) = &args.evals {
        each_line(path, &indicatif::ProgressBar::hidden(), |text, n| builder.add_eval(text, n))?;
    }
    let counts = builder.counts();
    let records = builder.finish()?;
    // Written into a new directory beside --out and renamed into place at the end: a
    // failure part-way leaves nothing at --out (and the temporary directory is removed).
    let staging = staging_dir(&args.out)?;
    let written = write_all(&records, &staging, &args.out);
    let written = match written {
        Ok(w) => w,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    if args.out.exists() {
        // Empty (checked above): replaced by the staged records.
        std::fs::remove_dir(&args.out).with_context(|| args.out.display().to_string())?;
    }
    if let Err(e) = std::fs::rename(&staging, &args.out) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e).with_context(|| args.out.display().to_string());
    }
    if args.json {
        let body = json!({
            "counts": counts,
            "records": written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&body)?)?;
    } else {
        outln!(
            "{} {} record(s) in {} from {} receipt(s): {} run(s) counted, {} not runs (decisions, releases, unreported outcomes), {} outside the window, {} without the agent's version; {} evaluation(s)",
            style.good("built"),
            records.len(),
            args.out.display(),
            counts.lines,
            counts.runs,
            counts.not_runs,
            counts.outside_window,
            counts.unattributed,
            counts.evals
        )?;
    }
    Ok(exit::OK)
}

/// A new directory beside `out` with a random name.
fn staging_dir(out: &Path) -> anyhow::Result<PathBuf> {
    let parent = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| parent.display().to_string())?;
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|e| anyhow::anyhow!("the operating system's random source: {e}"))?;
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = parent.join(format!(".{name}.building-{}", u64::from_le_bytes(nonce)));
    std::fs::create_dir(&dir).with_context(|| dir.display().to_string())?;
    Ok(dir)
}

/// Writes each record to `staging/NS/NAME@VERSION.yaml`; returns the paths they will have
/// under `out`.
fn write_all(records: &[holon::record::AgentRecord], staging: &Path, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for r in records {
        let version = r.version.as_ref().map(ToString::to_string).unwrap_or_default();
        let ns = r.agent.namespace();
        let name = r.agent.as_str().split_once('/').map_or(r.agent.as_str(), |(_, n)| n);
        let file = format!("{name}@{version}.yaml");
        let dir = staging.join(ns);
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        std::fs::write(dir.join(&file), doc::to_yaml(r)?).with_context(|| dir.join(&file).display().to_string())?;
        written.push(out.join(ns).join(file));
    }
    Ok(written)
}

/// Calls `f` on every line of `path`, numbered from 1, reading at most
/// [`LINE_BYTES_MAX`] bytes per line; blank lines are passed over.
fn each_line(
    path: &Path,
    bar: &indicatif::ProgressBar,
    mut f: impl FnMut(&str, u64) -> Result<(), MeasureError>,
) -> anyhow::Result<()> {
    let (file, _) = doc::file::open_regular(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        let limit = u64::try_from(LINE_BYTES_MAX + 1).unwrap_or(u64::MAX);
        let read = (&mut reader).take(limit).read_until(b'\n', &mut buf).with_context(|| path.display().to_string())?;
        if read == 0 {
            return Ok(());
        }
        number += 1;
        bar.inc(read as u64);
        if buf.len() > LINE_BYTES_MAX {
            bail!("{}: line {number} is longer than {LINE_BYTES_MAX} bytes: not a receipts file", path.display());
        }
        let text = std::str::from_utf8(&buf)
            .map_err(|_| anyhow::anyhow!("{}: line {number} is not UTF-8", path.display()))?
            .trim();
        if text.is_empty() {
            continue;
        }
        f(text, number).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
}
