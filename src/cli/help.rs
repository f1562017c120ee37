//! `holon completions SHELL` and `holon man`: generated from the clap definitions, so they
//! never drift from the flags they describe.

use clap::CommandFactory;

use super::{Cli, exit, out};

/// Writes the completion script for `shell` to standard output.
pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "holon", &mut script);
    out::text(format_args!("{}", String::from_utf8_lossy(&script)))?;
    Ok(exit::OK)
}

/// Writes the manual (roff) to standard output: the page of `holon`, then one page per
/// verb (`holon-mandate-check`, …) with its arguments, flags and exit codes, as `git`'s
/// manual names its verbs.
pub(super) fn man() -> anyhow::Result<u8> {
    let mut page = Vec::new();
    let cmd = Cli::command();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    render_verbs(&cmd, "holon", &mut page)?;
    out::text(format_args!("{}", String::from_utf8_lossy(&page)))?;
    Ok(exit::OK)
}

fn render_verbs(cmd: &clap::Command, prefix: &str, page: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("{prefix}-{}", sub.get_name());
        // A page's name must outlive the command; the process prints once and exits.
        let leaked: &'static str = Box::leak(name.clone().into_boxed_str());
        clap_mangen::Man::new(sub.clone().name(leaked)).render(page)?;
        render_verbs(sub, &name, page)?;
    }
    Ok(())
}
