//! Bounded line reading, for the observation log and `observe`'s input: at most
//! `total_bytes_max` bytes read, each line at most `line_bytes_max`. An over-long line
//! is skipped whole (the reader moves to its end without keeping it), and a line that is
//! not UTF-8 is handed over as `None`: one bad line never hides the lines after it.

use std::io::{BufRead, Read};

/// Calls `each` with every line (without its newline), `None` for a line that is over
/// long or not UTF-8. Stops early when `each` returns `false`.
pub fn for_each_line<R: BufRead>(
    reader: R,
    line_bytes_max: usize,
    total_bytes_max: u64,
    mut each: impl FnMut(Option<&str>) -> bool,
) -> std::io::Result<()> {
    let mut reader = reader.take(total_bytes_max);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader).take(line_bytes_max as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let complete = line.last() == Some(&b'\n');
        if !complete && n > line_bytes_max {
            // Move past the rest of the over-long line, a bounded piece at a time.
            loop {
                line.clear();
                let m = (&mut reader).take(line_bytes_max as u64).read_until(b'\n', &mut line)?;
                if m == 0 || line.last() == Some(&b'\n') {
                    break;
                }
            }
            if !each(None) {
                return Ok(());
            }
            continue;
        }
        let text = std::str::from_utf8(&line).ok().map(|t| t.trim_end_matches(['\n', '\r']));
        if !each(text) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::for_each_line;

    fn lines(input: &[u8], line_max: usize, total: u64) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for_each_line(input, line_max, total, |l| {
            out.push(l.map(str::to_owned));
            true
        })
        .unwrap();
        out
    }

    #[test]
    fn long_and_broken_lines_are_skipped_alone() {
        let input = b"a\n0123456789abc\n\xff\xfe\nb\nlast";
        assert_eq!(lines(input, 5, 1 << 20), vec![Some("a".into()), None, None, Some("b".into()), Some("last".into())]);
        // The total bound stops reading, whatever the input.
        assert_eq!(lines(input, 5, 2), vec![Some("a".into())]);
        let zeros = std::io::repeat(0).take(10_000);
        use std::io::Read;
        let mut n = 0;
        for_each_line(std::io::BufReader::new(zeros), 100, 10_000, |_| {
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 1, "one over-long line of NULs");
    }
}
