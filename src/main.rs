//! The `holon` command line. Library errors are typed; only this binary uses `anyhow`.
#![forbid(unsafe_code)]

mod cli;
#[cfg(feature = "serve")]
mod serve;

use std::process::ExitCode;

/// mimalloc for the binary that has the server (Cargo.toml says why).
#[cfg(feature = "serve")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::run()
}
