//! `holon-job`: the `holon job` verbs as a program of their own (src/cli/job_front.rs says
//! why and how).
#![forbid(unsafe_code)]

#[path = "../cli/job_front.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
