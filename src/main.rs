//! The `holon` command line. Library errors are typed; only this binary uses `anyhow`.
#![forbid(unsafe_code)]

mod cli;
#[cfg(feature = "serve")]
mod serve;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
