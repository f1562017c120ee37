//! The `holon` command line. Library errors are typed; only this binary uses `anyhow`.
#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
