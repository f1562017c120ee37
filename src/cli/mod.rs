//! Command-line front end: argument parsing (clap) and dispatch. Each verb lives in its
//! own module; they share `style` for terminal output.

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
        Command::Validate { paths, json } => validate::run(&paths, json, &style),
    };
    match code {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("holon: {e:#}");
            ExitCode::from(exit::BAD_INPUT)
        }
    }
}
