//! Everything the binary prints goes through here, never through `println!`/`eprintln!`
//! (which panic when the other end of a pipe has gone).
//!
//! `outln!(...)`/`out!(...)` write to standard output and return `io::Result<()>`: a verb
//! propagates the error with `?`, and [`super::run`] turns a closed pipe into the end of
//! the command: a note on stderr (if stderr is still there) and exit 2, since an answer
//! nobody received cannot count as given. `errln!(...)` writes to standard error and
//! ignores failure: there is nowhere left to report it.
//!
//! ```ignore
//! use super::out::{errln, outln};
//! outln!("{} {}", style.good("ok"), path)?;
//! errln!("holon: {reason}");
//! ```

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

/// Writes `args` and a newline to standard output.
pub(super) fn line(args: fmt::Arguments<'_>) -> io::Result<()> {
    let mut lock = io::stdout().lock();
    lock.write_fmt(args)?;
    lock.write_all(b"\n")?;
    // Standard output is line-buffered on a terminal only; flush so that a closed pipe
    // is seen here, at the write, and not in an exit handler that cannot report it.
    lock.flush()
}

/// Writes `args` to standard output, no newline.
pub(super) fn text(args: fmt::Arguments<'_>) -> io::Result<()> {
    let mut lock = io::stdout().lock();
    lock.write_fmt(args)?;
    lock.flush()
}

/// Writes `args` and a newline to standard error; failures are ignored.
pub(super) fn err_line(args: fmt::Arguments<'_>) {
    let mut lock = io::stderr().lock();
    let _ = lock.write_fmt(args).and_then(|()| lock.write_all(b"\n")).and_then(|()| lock.flush());
}

/// Did this error chain start with a write to a closed pipe?
pub(super) fn is_closed_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
}

/// The process's exit code for a command's result: its own, or 2 with the error said (a
/// closed pipe said as such).
pub(super) fn exit_code(code: anyhow::Result<u8>) -> ExitCode {
    let code = code.and_then(|code| {
        text(format_args!(""))?;
        Ok(code)
    });
    match code {
        Ok(code) => ExitCode::from(code),
        // The reader went away: stop there. Exit 2 all the same, since an answer that
        // could not be written was not given (a pre-tool hook must not read it as a pass).
        Err(e) if is_closed_pipe(&e) => {
            errln!("holon: standard output was closed before the whole answer was written");
            ExitCode::from(super::exit::BAD_INPUT)
        }
        Err(e) => {
            errln!("holon: {}", sentence(&e));
            ExitCode::from(super::exit::BAD_INPUT)
        }
    }
}

/// An error and its causes as one line, `outer: cause: …`, each cause said once: a library
/// error that quotes its source in its own message (`the store at URL: {source}`) is not
/// followed by the same words again.
fn sentence(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// `outln!("...", args)`: a line on standard output; `io::Result<()>`.
macro_rules! outln {
    () => {
        $crate::cli::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::cli::out::line(format_args!($($arg)*))
    };
}

/// `out!("...", args)`: text on standard output, no newline; `io::Result<()>`.
#[allow(unused_macros)]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::text(format_args!($($arg)*))
    };
}

/// `errln!("...", args)`: a line on standard error; never fails.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::out::err_line(format_args!($($arg)*))
    };
}

#[allow(unused_imports)]
pub(crate) use {errln, out, outln};
