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
