//! The `holon-job` program's command line (src/bin/holon-job.rs): the verbs of `holon job`
//! alone, from the same files as `holon`'s (each included below, none copied), so that an
//! agent runtime's hook, which starts a process for every tool call, does not start the
//! whole `holon` binary (the server, the stores, 38 verbs' arguments, its allocator) each
//! time. `holon-job VERB …` is `holon job VERB …`, flag for flag and byte for byte
//! (`tests/job_front.rs` runs both); docs/job.md "holon-job" says when to use which.

// `HELD` is `holon mandate check`'s.
#[allow(dead_code)]
#[path = "exit.rs"]
pub(crate) mod exit;
#[path = "job.rs"]
mod job;
#[path = "job_env.rs"]
mod job_env;
#[path = "job_exec.rs"]
mod job_exec;
#[path = "job_review.rs"]
mod job_review;
#[path = "out.rs"]
pub(crate) mod out;
// `stderr_color` is `holon serve`'s log.
#[allow(dead_code)]
#[path = "style.rs"]
mod style;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// How `holon-job` is named on a command line it writes (the hook's `updatedInput`): the
/// program, then the verb.
pub(crate) const JOB_WORDS: &[&str] = &[];

#[derive(Parser)]
#[command(
    name = "holon-job",
    version,
    about = "The `holon job` verbs as a program of their own, for the hooks that start one on every tool call (`holon-job VERB` is `holon job VERB`)"
)]
struct Cli {
    /// Never colour the output (also: NO_COLOR in the environment, or a pipe).
    #[arg(long, global = true)]
    no_color: bool,
    /// The state directory (default: HOLON_STATE, else .holon).
    #[arg(long, global = true)]
    state: Option<PathBuf>,
    #[command(subcommand)]
    command: job::JobCommand,
}

pub(crate) fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::BAD_INPUT } else { exit::OK });
        }
    };
    let style = style::Style::detect(cli.no_color);
    out::exit_code(job::run(cli.state, cli.command, &style))
}
