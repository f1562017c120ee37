//! The `holon` command line. Library errors are typed; only this binary uses `anyhow`.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
