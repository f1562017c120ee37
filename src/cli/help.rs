//! `holon completions SHELL` and `holon man`: generated from the clap definitions, so they
//! never drift from the flags they describe.

use clap::CommandFactory;

use super::{Cli, exit, out};

/// Writes the completion script for `shell` to standard output.
pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "holon", &mut script);
    document(&script)
}

/// Prints a document (a completion script, a manual page). A reader that stops early
/// (`| head`) is a normal end for it, said nowhere: it carries no verdict, unlike a check
/// whose answer a closed pipe cut short (exit 2, `out::exit_code`).
fn document(bytes: &[u8]) -> anyhow::Result<u8> {
    match out::text(format_args!("{}", String::from_utf8_lossy(bytes))) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        written => written.map(|()| exit::OK).map_err(Into::into),
    }
}

/// The manual (roff): `holon(1)`, and one page per verb (`holon-mandate-check(1)`, …) as
/// `git`'s manual names its verbs. With `dir`, every page is written to a file of its own
/// there (`DIR/holon-mandate-check.1`, …), so that `man -M` or `MANPATH` finds the pages
/// the others name; without, `holon(1)` alone goes to standard output (38 pages in one file
/// left their cross-references nowhere to be found).
pub(super) fn man(dir: Option<&std::path::Path>) -> anyhow::Result<u8> {
    // No page lists a `help` verb: it has no page of its own (`--help` is on every verb).
    let cmd = Cli::command().disable_help_subcommand(true);
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut page)?;
        return document(&page);
    };
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("--dir {}: {e}", dir.display()))?;
    let mut pages = vec![("holon".to_owned(), cmd.clone())];
    verbs(&cmd, "holon", &mut pages);
    for (name, page_cmd) in &pages {
        let mut page = Vec::new();
        clap_mangen::Man::new(page_cmd.clone()).render(&mut page)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, page).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    // `man -M ROOT` looks for section 1 in `ROOT/man1`.
    let how = match (dir.file_name().and_then(|n| n.to_str()), dir.parent()) {
        (Some("man1"), Some(root)) => {
            let root = if root.as_os_str().is_empty() { std::path::Path::new(".") } else { root };
            format!("read one with `man -M {} holon-mandate-check`, or add that directory to MANPATH", root.display())
        }
        _ => format!(
            "`man` looks for them in a directory named man1: write them to {} instead to read them with `man -M {}`",
            dir.join("man1").display(),
            dir.display()
        ),
    };
    out::text(format_args!("{} manual pages written to {} ({how})\n", pages.len(), dir.display()))?;
    Ok(exit::OK)
}

/// Every verb below `cmd`, named as its page is (`holon-mandate-check`), with its command.
fn verbs(cmd: &clap::Command, prefix: &str, pages: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("{prefix}-{}", sub.get_name());
        // A page's name must outlive the command; the process writes its pages and exits.
        let leaked: &'static str = Box::leak(name.clone().into_boxed_str());
        pages.push((name.clone(), sub.clone().name(leaked).disable_help_subcommand(true)));
        verbs(sub, &name, pages);
    }
}
