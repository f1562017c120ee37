//! Command-line front end: argument parsing (clap) and dispatch. Each verb lives in its
//! own module; they share `style` for terminal output.

mod demo;
mod loadtest;
mod mandate;
mod search;
mod style;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes shared by every verb.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const HELD: u8 = 3;
}

#[derive(Parser)]
#[command(name = "holon", version, about = "Admission engine for AI agents that call and pay other agents")]
struct Cli {
    /// Never colour the output (also: NO_COLOR in the environment, or a pipe).
    #[arg(long, global = true)]
    no_color: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate manifests, mandates and agent records (files or directories, recursively).
    Validate {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print {"files":[{"path","kind","valid","errors":[{"path","message"}]}]}.
        #[arg(long)]
        json: bool,
    },
    /// The main job on the bundled examples: validate them, replay the worked example
    /// through the engine, and load-test admission with a budget audit.
    Demo {
        /// The examples directory.
        #[arg(long, default_value = "examples")]
        examples: PathBuf,
        /// Seconds of load (the hot-mandate run gets half).
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// Hammer the engine from N threads over a synthetic network and audit every budget.
    Loadtest {
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 1_000)]
        mandates: usize,
        #[arg(long, default_value_t = 1_000)]
        agents: usize,
        /// Run this long (default 3 s unless --calls is given).
        #[arg(long, conflicts_with = "calls")]
        duration_s: Option<f64>,
        /// Run this many calls in all.
        #[arg(long)]
        calls: Option<u64>,
        /// All threads on one mandate whose budget runs out.
        #[arg(long)]
        hot: bool,
        /// Only allowed calls (leaf agents), to measure the allowed path alone.
        #[arg(long)]
        allowed_only: bool,
        /// Publish a fresh snapshot this often during the run (0: never).
        #[arg(long, default_value_t = 0)]
        publish_every_ms: u64,
        /// Print {"threads","calls","ops_per_sec","latency_ns":{"p50","p99","p999"},"decisions":{..},"overrun","mandates_audited",..}.
        #[arg(long)]
        json: bool,
    },
    /// Decide, narrow, derive and simulate under caller mandates.
    #[command(subcommand)]
    Mandate(MandateCommand),
    /// Rank only the agents a mandate permits.
    Search {
        /// Words to match against ids, classes, names and descriptions.
        query: Option<String>,
        #[arg(long)]
        mandate: PathBuf,
        #[arg(long)]
        agents: PathBuf,
        #[arg(long)]
        records: Option<PathBuf>,
        /// The decision time (RFC 3339); default now.
        #[arg(long)]
        at: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum MandateCommand {
    /// May the grantee call these agents? Exit 0 all allowed, 3 some held, 1 some denied.
    Check {
        mandate: PathBuf,
        /// holon.yaml files or directories searched recursively.
        #[arg(required = true)]
        agents: Vec<PathBuf>,
        /// The caller's ceiling for the call, in the mandate's currency.
        #[arg(long)]
        max_cost: Option<String>,
        #[arg(long)]
        spent_total: Option<String>,
        #[arg(long)]
        spent_today: Option<String>,
        /// The decision time (RFC 3339); default now.
        #[arg(long)]
        at: Option<String>,
        #[arg(long)]
        records: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Is CHILD within PARENT? Exit 0 valid, 1 not.
    Attenuate {
        parent: PathBuf,
        child: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Print the sub-mandate the gateway derives for AGENT's delegated run.
    Derive {
        parent: PathBuf,
        agent: PathBuf,
        #[arg(long)]
        max_cost: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Replay a delegated call tree described in a scenario file.
    Simulate {
        mandate: PathBuf,
        scenario: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::BAD_INPUT } else { exit::OK });
        }
    };
    let style = style::Style::detect(cli.no_color);
    let code = match cli.command {
        Command::Demo { examples, seconds } => demo::run(&examples, seconds, &style),
        Command::Loadtest {
            threads,
            mandates,
            agents,
            duration_s,
            calls,
            hot,
            allowed_only,
            publish_every_ms,
            json,
        } => {
            let duration = match (duration_s, calls) {
                (Some(s), _) if !(0.0..=86_400.0).contains(&s) => {
                    eprintln!("holon: --duration-s must be 0 to 86400");
                    return ExitCode::from(exit::BAD_INPUT);
                }
                (Some(s), _) => Some(std::time::Duration::from_secs_f64(s)),
                (None, None) => Some(std::time::Duration::from_secs(3)),
                (None, Some(_)) => None,
            };
            let opts = loadtest::Options {
                threads,
                mandates,
                agents,
                duration,
                calls,
                hot,
                allowed_only,
                publish_every_ms,
                progress: !json && loadtest::progress_wanted(),
            };
            loadtest::run(&opts).and_then(|report| {
                loadtest::print(&report, json, &style)?;
                Ok(if report.overrun { exit::FAILED } else { exit::OK })
            })
        }
        Command::Validate { paths, json } => validate::run(&paths, json, &style),
        Command::Search { query, mandate, agents, records, at, json } => search::run(
            query.as_deref().unwrap_or(""),
            &mandate,
            &agents,
            records.as_deref(),
            at.as_deref(),
            json,
            &style,
        ),
        Command::Mandate(MandateCommand::Check {
            mandate,
            agents,
            max_cost,
            spent_total,
            spent_today,
            at,
            records,
            json,
        }) => mandate::check(
            &mandate::CheckArgs { mandate, agents, max_cost, spent_total, spent_today, at, records, json },
            &style,
        ),
        Command::Mandate(MandateCommand::Attenuate { parent, child, json }) => {
            mandate::attenuate(&parent, &child, json, &style)
        }
        Command::Mandate(MandateCommand::Derive { parent, agent, max_cost, json }) => {
            mandate::derive(&parent, &agent, &max_cost, json, &style)
        }
        Command::Mandate(MandateCommand::Simulate { mandate, scenario, json }) => {
            mandate::simulate(&mandate, &scenario, json, &style)
        }
    };
    match code {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("holon: {e:#}");
            ExitCode::from(exit::BAD_INPUT)
        }
    }
}
