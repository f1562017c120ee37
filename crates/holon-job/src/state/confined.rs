//! How the job's recent commands ran under `holon job exec`: confined by the kernel or
//! not, and why (`holon job status` shows them).
//!
//! The log is `exec.jsonl`, one record per line, appended: a call writes its one line and
//! never reads the others, so its cost does not grow with the history (rewriting a JSON
//! array of the last 200 records was 1.6 M instructions of each `exec`, more than its
//! check; docs/PERFORMANCE.md "holon job exec overhead"). When the file would pass
//! [`EXEC_LOG_BYTES_MAX`] it is rewritten once with the newest [`EXEC_RECORDS_MAX`].

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::store::{Durability, libc_nofollow, open_regular, read_json};
use super::{Job, StateError, io};
use crate::redact::redact;
use crate::time::Timestamp;

/// Most records kept and shown (the oldest go first).
pub const EXEC_RECORDS_MAX: usize = 200;
/// Most bytes of a command kept in a record.
pub const EXEC_COMMAND_BYTES_MAX: usize = 512;
/// Most bytes of a record's run id kept.
pub const EXEC_RUN_BYTES_MAX: usize = 128;
/// Most bytes of a record's `how` (why it ran unconfined or was refused) kept.
pub const EXEC_HOW_BYTES_MAX: usize = 1_024;
/// Most bytes of one line of the log: the three fields above escaped as JSON at worst
/// (six bytes a byte) with room for the rest. A longer line is skipped when read.
pub const EXEC_LINE_BYTES_MAX: usize = 16_384;
/// Past this many bytes the log is rewritten with its newest [`EXEC_RECORDS_MAX`] records
/// (about 4,000 commands of a usual length between two rewrites).
pub const EXEC_LOG_BYTES_MAX: u64 = 1 << 20;
/// Most bytes read from the end of the log: enough for the newest records of a log that
/// was at its bound when its last line was added.
const EXEC_READ_BYTES_MAX: u64 = EXEC_LOG_BYTES_MAX + ((EXEC_RECORDS_MAX + 1) * EXEC_LINE_BYTES_MAX) as u64;

/// The log's file name in the job's directory.
const EXEC_LOG: &str = "exec.jsonl";
/// Where holon kept the records before the log (a JSON array, rewritten whole).
const EXEC_LEGACY: &str = "exec.json";

/// One command `holon job exec` started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRecord {
    pub time: String,
    pub run: String,
    /// The approved version it was confined with (none in observe mode).
    pub version: Option<u32>,
    pub confined: bool,
    /// The Landlock level the kernel enforced (0 when not confined).
    pub level: u8,
    /// `full`, `partial: …` or why it ran unconfined.
    pub how: String,
    pub command: String,
}

impl ExecRecord {
    pub fn new(run: &str, version: Option<u32>, level: u8, how: &str, command: &str) -> ExecRecord {
        ExecRecord {
            time: Timestamp::now().to_string(),
            run: cut(run.to_owned(), EXEC_RUN_BYTES_MAX),
            version,
            confined: level > 0,
            level,
            how: cut(how.to_owned(), EXEC_HOW_BYTES_MAX),
            command: cut(redact(command), EXEC_COMMAND_BYTES_MAX),
        }
    }
}

/// `text` cut to at most `bytes_max` bytes at a character boundary, marked `…` when cut.
fn cut(mut text: String, bytes_max: usize) -> String {
    if text.len() > bytes_max {
        let mut end = bytes_max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

impl Job {
    /// Appends `record` (before the command starts: once confined, the state is not
    /// writable): one line, the others neither read nor rewritten, when the log is one
    /// holon wrote; otherwise the log is rewritten (see [`Job::append_exec`]).
    pub fn record_exec(&self, record: ExecRecord) -> Result<(), StateError> {
        let _lock = self.lock(true)?;
        let path = self.path(EXEC_LOG);
        let mut line = serde_json::to_string(&record)
            .map_err(|e| StateError::Damaged { path: path.display().to_string(), message: e.to_string() })?;
        line.push('\n');
        if self.append_exec(&path, &line)? {
            return Ok(());
        }
        self.rewrite_exec(&path, record)
    }

    /// Appends `line` when that is safe, and answers whether it did: the log is a regular
    /// file of one link (a second link, planted while an observing job's commands ran
    /// unconfined, would have holon write beneath it to a file the job may not write),
    /// writable, under [`EXEC_LOG_BYTES_MAX`] with the line, and empty (with no
    /// `exec.json` of an older holon to take in) or ending with a whole record (a file
    /// moved in from elsewhere, or a torn line, is not appended to).
    fn append_exec(&self, path: &Path, line: &str) -> Result<bool, StateError> {
        let mut f = match OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .custom_flags(libc_nofollow() | libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => f,
            // Made read-only: rewritten as a new file, as the log always was before.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(false),
            Err(e) => return Err(io(path)(e)),
        };
        let meta = f.metadata().map_err(io(path))?;
        if !meta.is_file() {
            return Err(StateError::Damaged { path: path.display().to_string(), message: "not a regular file".into() });
        }
        let fits = meta.len().saturating_add(line.len() as u64) <= EXEC_LOG_BYTES_MAX;
        let whole = if meta.len() == 0 { !self.path(EXEC_LEGACY).exists() } else { ends_with_a_record(&f, meta.len()) };
        if meta.nlink() != 1 || !fits || !whole {
            return Ok(false);
        }
        // Shown to a person, never decided on: not synced (store::Durability).
        f.write_all(line.as_bytes()).map_err(io(path))?;
        Ok(true)
    }

    /// Writes the log anew (a new file renamed over it) with its newest records and
    /// `record`; the records of an older holon's `exec.json` are taken in (and that file
    /// removed) when there is no log yet. A log that is not one holon wrote (a whole line
    /// that is no record) is left alone and the record refused, as a damaged state file.
    fn rewrite_exec(&self, path: &Path, record: ExecRecord) -> Result<(), StateError> {
        let legacy = self.path(EXEC_LEGACY);
        let mut kept = if std::fs::symlink_metadata(path).is_ok_and(|m| m.len() > 0) {
            read_exec(path, true)?
        } else {
            read_json::<Vec<ExecRecord>>(&legacy).unwrap_or_default()
        };
        kept.push(record);
        let over = kept.len().saturating_sub(EXEC_RECORDS_MAX);
        let mut text = String::new();
        for r in kept.iter().skip(over) {
            text.push_str(&serde_json::to_string(r).unwrap_or_default());
            text.push('\n');
        }
        crate::files::replace(path, text.as_bytes(), Durability::Unsynced, crate::files::FileMode::New)
            .map_err(io(path))?;
        // Taken in, or older than the log: either way no longer read.
        let _ = std::fs::remove_file(&legacy);
        Ok(())
    }

    /// The newest recorded commands (at most [`EXEC_RECORDS_MAX`]), oldest first. Read
    /// from the end of the log; a torn, over-long or damaged line is skipped alone. Before
    /// the first record of this holon, an older holon's `exec.json`.
    pub fn exec_records(&self) -> Result<Vec<ExecRecord>, StateError> {
        let path = self.path(EXEC_LOG);
        if std::fs::symlink_metadata(&path).is_err() {
            return read_json(&self.path(EXEC_LEGACY));
        }
        read_exec(&path, false)
    }
}

/// Whether the log `f` (of `len` bytes) ends with a newline after a line that is a record.
fn ends_with_a_record(f: &std::fs::File, len: u64) -> bool {
    let from = len.saturating_sub(EXEC_LINE_BYTES_MAX as u64 + 1);
    let mut tail = vec![0; usize::try_from(len - from).unwrap_or(0)];
    if f.read_exact_at(&mut tail, from).is_err() || tail.pop() != Some(b'\n') {
        return false;
    }
    let start = match memchr::memrchr(b'\n', &tail) {
        Some(i) => i + 1,
        // No line before it in what was read: the whole file is the line, or it is too long.
        None if from == 0 => 0,
        None => return false,
    };
    tail.get(start..).is_some_and(|l| serde_json::from_slice::<ExecRecord>(l).is_ok())
}

/// The newest records of the log at `path`, oldest first, read from its end. Lenient, a
/// torn, over-long or damaged line is skipped alone; `strict`, any whole line that is not a
/// record (or a log longer than holon writes) makes the log damaged, and only a last line
/// without its newline (a write cut short) is dropped.
fn read_exec(path: &Path, strict: bool) -> Result<Vec<ExecRecord>, StateError> {
    let damaged = |message: String| StateError::Damaged { path: path.display().to_string(), message };
    let Some(mut f) = open_regular(path)? else { return Ok(Vec::new()) };
    let len = f.metadata().map_err(io(path))?.len();
    let from = len.saturating_sub(EXEC_READ_BYTES_MAX);
    if strict && from > 0 {
        return Err(damaged(format!("more than {EXEC_READ_BYTES_MAX} bytes: not a log holon wrote; remove it")));
    }
    let torn = len > 0 && !ends_with_newline(&f, len);
    f.seek(SeekFrom::Start(from)).map_err(io(path))?;
    let mut kept = VecDeque::with_capacity(EXEC_RECORDS_MAX + 1);
    // Read from the middle of the file, the first line is a piece of one: skipped.
    let mut first = from > 0;
    let (mut lines, mut bad) = (0usize, None);
    crate::lines::for_each_line(BufReader::new(f), EXEC_LINE_BYTES_MAX, EXEC_READ_BYTES_MAX, |line| {
        lines += 1;
        if std::mem::take(&mut first) {
            return true;
        }
        match line.and_then(|l| serde_json::from_str::<ExecRecord>(l).ok()) {
            Some(r) => {
                if kept.len() == EXEC_RECORDS_MAX {
                    kept.pop_front();
                }
                kept.push_back(r);
            }
            None => bad = bad.or(Some(lines)),
        }
        true
    })
    .map_err(io(path))?;
    match bad {
        Some(n) if strict && !(torn && n == lines) => {
            Err(damaged(format!("line {n} is not a record of holon job exec: not a log holon wrote; remove it")))
        }
        _ => Ok(kept.into()),
    }
}

fn ends_with_newline(f: &std::fs::File, len: u64) -> bool {
    let mut last = [0u8];
    f.read_exact_at(&mut last, len - 1).is_ok() && last[0] == b'\n'
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn job() -> (tempfile::TempDir, Job) {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("jobs/j")).unwrap();
        let job = Job::open(root.path(), "j").unwrap();
        (root, job)
    }

    fn record(n: usize) -> ExecRecord {
        ExecRecord::new(&format!("r{n}"), Some(1), 7, "full", &format!("echo {n}"))
    }

    fn runs(job: &Job) -> Vec<String> {
        job.exec_records().unwrap().into_iter().map(|r| r.run).collect()
    }

    #[test]
    fn a_record_is_appended_and_the_others_are_neither_read_nor_rewritten() {
        let (_root, job) = job();
        job.record_exec(record(0)).unwrap();
        let path = job.path(EXEC_LOG);
        let (inode, before) = (std::fs::metadata(&path).unwrap().ino(), std::fs::read(&path).unwrap());
        job.record_exec(record(1)).unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "the same file, appended to (not replaced)");
        assert!(after.starts_with(&before) && after.len() > before.len());
        assert_eq!(runs(&job), ["r0", "r1"]);
    }

    #[test]
    fn at_its_bound_the_log_keeps_its_newest_records() {
        let (_root, job) = job();
        let line = format!("{}\n", serde_json::to_string(&record(0)).unwrap());
        let mut text = String::new();
        let mut n = 0;
        while (text.len() + line.len()) as u64 <= EXEC_LOG_BYTES_MAX {
            text.push_str(&serde_json::to_string(&record(n)).unwrap());
            text.push('\n');
            n += 1;
        }
        std::fs::write(job.path(EXEC_LOG), &text).unwrap();
        assert_eq!(runs(&job).len(), EXEC_RECORDS_MAX, "only the newest are shown");
        job.record_exec(record(n)).unwrap();
        let kept = runs(&job);
        assert_eq!(kept.len(), EXEC_RECORDS_MAX);
        assert_eq!(kept.last().unwrap(), &format!("r{n}"));
        assert_eq!(kept.first().unwrap(), &format!("r{}", n + 1 - EXEC_RECORDS_MAX));
        let size = std::fs::metadata(job.path(EXEC_LOG)).unwrap().len();
        assert!(size < EXEC_LOG_BYTES_MAX / 4, "rewritten with the newest only ({size} bytes)");
    }

    /// A hard link planted as the log (an observing job's commands run unconfined) is
    /// never appended to: a log of records is replaced (the file it shared left as it was),
    /// any other file refused as damaged and left as it was.
    #[test]
    fn a_log_with_a_second_link_is_never_appended_to() {
        let (root, job) = job();
        let victim = root.path().join("victim");
        std::fs::write(&victim, "untouched\n").unwrap();
        std::fs::hard_link(&victim, job.path(EXEC_LOG)).unwrap();
        assert!(matches!(job.record_exec(record(0)), Err(StateError::Damaged { .. })));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
        std::fs::remove_file(job.path(EXEC_LOG)).unwrap();
        let records = format!("{}\n", serde_json::to_string(&record(0)).unwrap());
        std::fs::write(&victim, &records).unwrap();
        std::fs::hard_link(&victim, job.path(EXEC_LOG)).unwrap();
        job.record_exec(record(1)).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), records);
        assert_eq!(std::fs::metadata(job.path(EXEC_LOG)).unwrap().nlink(), 1);
        assert_eq!(runs(&job), ["r0", "r1"]);
    }

    /// A file moved in as the log (one link; a user's file an observing command put there
    /// and links to from where it was) is not appended to: its last line is no record.
    #[test]
    fn a_file_that_is_not_a_log_is_left_alone() {
        let (_root, job) = job();
        std::fs::write(job.path(EXEC_LOG), "# my bashrc\nalias ll='ls -l'\n").unwrap();
        assert!(matches!(job.record_exec(record(0)), Err(StateError::Damaged { .. })));
        assert_eq!(std::fs::read_to_string(job.path(EXEC_LOG)).unwrap(), "# my bashrc\nalias ll='ls -l'\n");
    }

    /// A line cut short (a crash during an append, or one planted) is dropped by a
    /// rewrite, never glued to the next record.
    #[test]
    fn a_torn_last_line_does_not_swallow_the_next_record() {
        let (_root, job) = job();
        job.record_exec(record(0)).unwrap();
        let mut f = OpenOptions::new().append(true).open(job.path(EXEC_LOG)).unwrap();
        f.write_all(b"{\"time\":").unwrap();
        job.record_exec(record(1)).unwrap();
        job.record_exec(record(2)).unwrap();
        assert_eq!(runs(&job), ["r0", "r1", "r2"]);
    }

    /// The records of an older holon (`exec.json`, an array) are shown until the first
    /// record of this one, which takes them in.
    #[test]
    fn an_older_holons_records_are_taken_in() {
        let (_root, job) = job();
        std::fs::write(job.path(EXEC_LEGACY), serde_json::to_string(&vec![record(0), record(1)]).unwrap()).unwrap();
        assert_eq!(runs(&job), ["r0", "r1"]);
        job.record_exec(record(2)).unwrap();
        assert_eq!(runs(&job), ["r0", "r1", "r2"]);
        assert!(!job.path(EXEC_LEGACY).exists());
    }

    #[test]
    fn a_torn_or_damaged_line_is_skipped_alone_and_a_huge_log_is_read_from_its_end() {
        let (_root, job) = job();
        let good = |n| serde_json::to_string(&record(n)).unwrap();
        let long = "x".repeat(EXEC_LINE_BYTES_MAX + 10);
        // A log far past what is read: only its end is read, and still gives the newest.
        let filler = "not a record\n".repeat(usize::try_from(EXEC_READ_BYTES_MAX / 13 + 1000).unwrap());
        let text =
            format!("{}\n{filler}{}\n{{\"broken\n{long}\n\u{ff}\n{}\n{{\"time\":\"torn", good(0), good(1), good(2));
        std::fs::write(job.path(EXEC_LOG), text).unwrap();
        assert_eq!(runs(&job), ["r1", "r2"]);
    }

    #[test]
    fn a_record_holds_each_field_to_its_bound() {
        let r = ExecRecord::new(&"é".repeat(1_000), None, 0, &"h".repeat(5_000), &"c".repeat(5_000));
        assert!(r.run.len() <= EXEC_RUN_BYTES_MAX + '…'.len_utf8() && r.run.ends_with('…'));
        assert!(r.how.len() <= EXEC_HOW_BYTES_MAX + '…'.len_utf8());
        assert!(r.command.len() <= EXEC_COMMAND_BYTES_MAX + '…'.len_utf8());
        let worst = ExecRecord::new(&"\u{1}".repeat(999), None, 0, &"\u{1}".repeat(9_999), &"\u{1}".repeat(9_999));
        assert!(serde_json::to_string(&worst).unwrap().len() < EXEC_LINE_BYTES_MAX, "the worst line fits");
    }
}
