//! `holon-sandbox --plan FILE --plan-sha256 HEX -- COMMAND [ARGS…]`: started by `holon job
//! exec` only. Confines itself to the plan `exec` handed on and becomes the command
//! (`holon::job::sandbox::handoff`). Kept to the handoff alone, so that it starts in a
//! fraction of the time the `holon` binary takes.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    ExitCode::from(holon::job::sandbox::handoff::enter(&args))
}
