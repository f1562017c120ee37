//! Command-line front end: argument parsing (clap) and dispatch. Each verb lives in its
//! own module; they share `style` for terminal output.

mod demo;
mod demo_chain;
mod flags;
mod help;
#[cfg(test)]
mod help_test;
pub(crate) mod job;
mod job_env;
mod job_exec;
mod job_review;
mod ledger;
mod load_report;
mod loadtest;
mod loadtest_command;
mod mandate;
mod mandate_check;
pub(crate) mod node;
mod out;
mod records;
mod search;
#[cfg(feature = "serve")]
mod serve;
mod style;
mod trust;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use out::errln;

pub(crate) mod exit;

/// How `holon` is named on a command line it writes (the hook's `updatedInput`): the
/// program, then these words, then the job verb (`holon-job` has none).
pub(crate) const JOB_WORDS: &[&str] = &["job"];

use flags::demo_seconds;
pub(crate) use flags::range;

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
    #[command(
        after_help = "EXIT CODES: 0 every document valid, 1 some invalid (with --strict: or warned about, as an expired mandate), 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon validate examples/\n  holon validate --strict examples/mandates/\n  holon validate --json examples/mandates/alice-root.yaml"
    )]
    Validate {
        /// Files or directories (searched recursively for .yaml/.yml).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print {"files":[{"path","kind","valid","errors":[{"path","message"}]}],"skipped":[{"path","reason"}]}.
        #[arg(long)]
        json: bool,
        /// A trusted keys file: also check what an engine that requires signatures would
        /// refuse: every mandate's signature chain (parents among PATHS), every manifest's
        /// provenance signature (its record among PATHS).
        #[arg(long)]
        keys: Option<PathBuf>,
        /// Fail (exit 1) on warnings too: a valid document that will not do what its
        /// writer may expect, as a mandate that has expired and admits nothing.
        #[arg(long)]
        strict: bool,
    },
    /// The main job on the bundled examples: validate them, replay the worked example
    /// through the engine, and load-test admission with a budget audit.
    #[command(
        after_help = "EXIT CODES: 0 the demo passed, 1 a step failed (a document invalid, the worked example not reproduced, a budget overrun), 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon demo\n  holon demo --seconds 1 --store sqlite:/tmp/demo.db --node demo"
    )]
    Demo {
        /// The examples directory.
        #[arg(long, default_value = "examples")]
        examples: PathBuf,
        /// Seconds of load, 0.1 to 600 (the hot-mandate run gets half).
        #[arg(long, default_value_t = 2.0, value_parser = demo_seconds, allow_negative_numbers = true)]
        seconds: f64,
        /// Keep the budgets in this ledger store: `memory`, `sqlite:PATH` or
        /// `postgres://USER@HOST:PORT/DB` (default: a fresh SQLite file in a temporary
        /// directory, removed at the end, so every run starts the same).
        #[arg(long, value_parser = flags::store_url)]
        store: Option<String>,
        /// This node's name in the store (default: demo-PID; the load runs add -load and -hot).
        #[arg(long, value_parser = flags::node_name)]
        node: Option<String>,
        /// A revocation list (`holon_revocations`) published with the worked example's
        /// documents: revoking alice's mandate denies every call (`mandate_revoked`).
        #[arg(long)]
        revocations: Option<PathBuf>,
        /// Write every receipt of the run (the worked example and both loads) to FILE as
        /// JSON lines, losing none: `holon records build` reads them.
        #[arg(long)]
        receipts: Option<PathBuf>,
    },
    /// Hammer the engine from N threads over a synthetic network and audit every budget.
    #[command(
        after_help = "EXIT CODES: 0 no mandate overran its budget, 1 an overrun, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon loadtest --threads 2 --duration-s 3\n  holon loadtest --hot --allowed-only --total 1000000 --agents 100 --json"
    )]
    Loadtest(loadtest_command::LoadtestArgs),
    /// Agent records measured from receipts (docs/records.md).
    #[command(subcommand)]
    Records(records::RecordsCommand),
    /// Signing keys: who may issue a signed mandate or publish an agent (docs/trust.md).
    #[command(subcommand)]
    Key(trust::KeyCommand),
    /// Decide, narrow, derive, simulate, sign and verify caller mandates.
    #[command(subcommand)]
    Mandate(mandate::MandateCommand),
    /// Job mandates: learn a scheduled job's tool calls, approve, enforce, review drift.
    Job {
        /// The state directory (default: HOLON_STATE, else .holon).
        #[arg(long, global = true)]
        state: Option<PathBuf>,
        #[command(subcommand)]
        command: job::JobCommand,
    },
    /// The ledger store that budgets are drawn from across nodes (docs/store.md).
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// Print a shell completion script, e.g. `holon completions bash > ~/.local/share/bash-completion/completions/holon`.
    #[command(
        after_help = "EXIT CODES: 0 printed (a reader that stops early, as `| head`, is a normal end), 2 bad input (a bad flag).\n\nEXAMPLES:\n  holon completions bash > ~/.local/share/bash-completion/completions/holon\n  holon completions zsh > ~/.zfunc/_holon"
    )]
    Completions {
        /// The shell: bash, elvish, fish, powershell or zsh.
        shell: clap_complete::Shell,
    },
    /// The manual (roff): every page, one file per verb, into a directory (`--dir`), or
    /// `holon(1)` alone to standard output.
    #[command(
        after_help = "EXIT CODES: 0 written (a reader that stops early, as `| head`, is a normal end), 2 an unwritable directory.\n\nEXAMPLES:\n  holon man --dir man/man1 && man -M man holon-mandate-check\n  holon man > holon.1 && man ./holon.1"
    )]
    Man {
        /// Write every page (holon.1, holon-mandate-check.1, …) into this directory.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Serve admission over HTTP/JSON to gateways in any language (docs/serve.md).
    #[cfg(feature = "serve")]
    #[command(
        after_help = "EXIT CODES: 0 stopped cleanly (SIGTERM or SIGINT), 2 could not start (documents, tokens, store or address).\n\nEXAMPLES:\n  holon token new --role gateway --tokens .holon/tokens\n  holon serve --documents examples --listen 127.0.0.1:8844 --grpc 127.0.0.1:8845"
    )]
    Serve(serve::ServeArgs),
    /// Bearer tokens for `holon serve`.
    #[cfg(feature = "serve")]
    #[command(subcommand)]
    Token(serve::TokenCommand),
    /// Rank only the agents a mandate permits.
    #[command(
        after_help = "EXIT CODES: 0 ranked (even when nothing matched), 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon search table --mandate examples/mandates/alice-research.yaml --agents examples/agents\n  holon search --mandate examples/mandates/alice-root.yaml --agents examples/agents --json"
    )]
    Search {
        /// Words to match against ids, classes, names and descriptions.
        query: Option<String>,
        /// The caller mandate whose permitted agents are ranked (a YAML file).
        #[arg(long)]
        mandate: PathBuf,
        /// The directory of agent manifests to search.
        #[arg(long)]
        agents: PathBuf,
        /// Agent records (files or directories) for ranking and `require` thresholds.
        #[arg(long)]
        records: Option<PathBuf>,
        /// The decision time (RFC 3339); default now.
        #[arg(long)]
        at: Option<String>,
        /// Print the ranked and excluded agents as JSON.
        #[arg(long)]
        json: bool,
        /// A revocation list (`holon_revocations`): under a revoked mandate nothing ranks
        /// (every agent excluded `mandate_revoked`).
        #[arg(long)]
        revocations: Option<PathBuf>,
    },
}

/// `holon job JOB status`: the job named where the verb goes (clap says only that `JOB` is
/// no subcommand); the order to use.
fn order_hint(e: &clap::Error, args: &[String]) -> Option<String> {
    if e.kind() != clap::error::ErrorKind::InvalidSubcommand {
        return None;
    }
    let words: Vec<&str> = args.iter().skip(1).map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    let (group, first, verb) = (words.first()?, words.get(1)?, words.get(2)?);
    // The verbs whose groups take a name after the verb.
    if *group != "job" {
        return None;
    }
    let cmd = <Cli as clap::CommandFactory>::command();
    let verbs = cmd.find_subcommand(group)?;
    verbs.find_subcommand(verb)?;
    Some(format!("  hint: the verb comes first, then the {group}'s name: swap them: holon {group} {verb} {first}"))
}

pub(crate) fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            if let Some(hint) = order_hint(&e, &std::env::args().collect::<Vec<_>>()) {
                errln!("{hint}");
            }
            return ExitCode::from(if e.use_stderr() { exit::BAD_INPUT } else { exit::OK });
        }
    };
    let style = style::Style::detect(cli.no_color);
    let code = match cli.command {
        Command::Demo { examples, seconds, store, node, revocations, receipts } => demo::run(
            &demo::DemoArgs {
                examples: &examples,
                seconds,
                revocations: revocations.as_deref(),
                receipts: receipts.as_deref(),
            },
            store,
            node,
            &style,
        ),
        Command::Job { state, command } => job::run(state, command, &style),
        Command::Loadtest(args) => loadtest_command::command(args, &style),
        Command::Validate { paths, json, keys, strict } => validate::run(&paths, keys.as_deref(), json, strict, &style),
        Command::Completions { shell } => help::completions(shell),
        Command::Man { dir } => help::man(dir.as_deref()),
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::serve(args, style::Style::stderr_color(cli.no_color)),
        #[cfg(feature = "serve")]
        Command::Token(serve::TokenCommand::New { role, tokens }) => serve::token_new(&role, &tokens),
        Command::Ledger(ledger::LedgerCommand::Status { store, mandate, json, documents }) => {
            ledger::status(&store, mandate.as_deref(), json, documents.as_deref(), &style)
        }
        Command::Ledger(ledger::LedgerCommand::Reconcile { store, node, json }) => {
            ledger::reconcile(&store, &node, json)
        }
        Command::Ledger(ledger::LedgerCommand::Raise { store, mandate, total, per_day, no_per_day, json }) => {
            let per_day = if no_per_day { ledger::PerDay::Remove } else { ledger::PerDay::Set(per_day) };
            ledger::raise(&store, &mandate, total, per_day, json)
        }
        Command::Search { query, mandate, agents, records, at, json, revocations } => search::run(
            &search::SearchArgs {
                query: query.as_deref().unwrap_or(""),
                mandate: &mandate,
                agents: &agents,
                records: records.as_deref(),
                at: at.as_deref(),
                revocations: revocations.as_deref(),
                json,
            },
            &style,
        ),
        Command::Mandate(mandate::MandateCommand::Check(args)) => mandate_check::check(&args, &style),
        Command::Mandate(mandate::MandateCommand::Attenuate { parent, child, agents, json }) => {
            mandate::attenuate(&parent, &child, &agents, json, &style)
        }
        Command::Mandate(mandate::MandateCommand::Derive { parent, agent, max_cost, json }) => {
            mandate::derive(&parent, &agent, max_cost, json, &style)
        }
        Command::Mandate(mandate::MandateCommand::Simulate {
            mandate,
            scenario,
            json,
            revocations,
            parents,
            parent_spent,
        }) => mandate::simulate(&mandate, &scenario, (revocations.as_deref(), &parents, &parent_spent), json, &style),
        Command::Mandate(mandate::MandateCommand::Sign { mandate, key, out }) => {
            trust::sign(&mandate, &key, out.as_deref())
        }
        Command::Mandate(mandate::MandateCommand::Verify { mandate, keys, parents, agents, json }) => {
            trust::verify(&trust::VerifyArgs { mandate, keys, parents, agents, json }, &style)
        }
        Command::Mandate(mandate::MandateCommand::Digest { mandate }) => trust::digest(&mandate),
        Command::Records(records::RecordsCommand::Sign { record, manifest, key, out }) => {
            records::sign(&record, &manifest, &key, out.as_deref())
        }
        Command::Records(records::RecordsCommand::Build { receipts, at, window, evals, out, json }) => {
            records::build(&records::BuildArgs { receipts, at, window, evals, out, json }, &style)
        }
        Command::Key(trust::KeyCommand::New { account, out, keys }) => trust::key_new(&account, &out, &keys),
    };
    out::exit_code(code)
}
