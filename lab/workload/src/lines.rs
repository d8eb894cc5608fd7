//! Reading a text file line by line without trusting it: each line is capped
//! in length (a file with no newline is not read whole), must be UTF-8
//! (the error names the line), and a byte-order mark before the first line
//! is dropped. Line ends are `\n` or `\r\n`.

use std::io::{BufRead, BufReader, ErrorKind, Read};

use crate::error::TraceError;

/// Lines of a reader, numbered from 1.
pub(crate) struct Lines<R> {
    reader: BufReader<R>,
    source: String,
    max: usize,
    lineno: usize,
    buf: Vec<u8>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl<R: Read> Lines<R> {
    /// Lines of `reader`, named `source` in errors, each at most `max` bytes.
    pub(crate) fn new(reader: R, source: &str, max: usize) -> Self {
        Lines {
            reader: BufReader::new(reader),
            source: source.to_string(),
            max,
            lineno: 0,
            buf: Vec::new(),
        }
    }

    /// The next line and its number, `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, TraceError> {
        self.buf.clear();
        self.lineno += 1;
        let mut any = false;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(TraceError::io(&self.source, e)),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            // `\r` of a `\r\n` may still be in the buffer: allow one byte more.
            if self.buf.len() + take > self.max + 1 {
                return Err(TraceError::line(
                    &self.source,
                    self.lineno,
                    format!(
                        "the line is longer than {} bytes, the limit (is this a trace file?)",
                        self.max
                    ),
                ));
            }
            self.buf.extend_from_slice(&chunk[..take]);
            self.reader.consume(take + usize::from(done));
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        if self.buf.len() > self.max {
            return Err(TraceError::line(
                &self.source,
                self.lineno,
                format!(
                    "the line is longer than {} bytes, the limit (is this a trace file?)",
                    self.max
                ),
            ));
        }
        let start = if self.lineno == 1 && self.buf.starts_with(BOM) {
            BOM.len()
        } else {
            0
        };
        match std::str::from_utf8(&self.buf[start..]) {
            Ok(s) => Ok(Some((self.lineno, s))),
            Err(e) => Err(TraceError::line(
                &self.source,
                self.lineno,
                format!(
                    "the line is not valid UTF-8 (byte {} of the line)",
                    start + e.valid_up_to() + 1
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8], max: usize) -> Result<Vec<(usize, String)>, String> {
        let mut l = Lines::new(bytes, "f", max);
        let mut out = Vec::new();
        loop {
            match l.next_line() {
                Ok(Some((n, s))) => out.push((n, s.to_string())),
                Ok(None) => return Ok(out),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    #[test]
    fn lines_numbers_crlf_and_bom() {
        let got = all(b"\xEF\xBB\xBFa\r\nb\n\nc", 10).unwrap();
        let want: Vec<(usize, String)> = [(1, "a"), (2, "b"), (3, ""), (4, "c")]
            .iter()
            .map(|(n, s)| (*n, s.to_string()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(all(b"", 10).unwrap(), vec![]);
        // a BOM is only dropped before the first line
        assert_eq!(all(b"x\n\xEF\xBB\xBFy", 10).unwrap()[1].1, "\u{feff}y");
    }

    #[test]
    fn long_lines_and_bad_utf8_are_errors_with_the_line() {
        assert_eq!(
            all(b"ok\n0123456789A\n", 10).unwrap_err(),
            "f:2: the line is longer than 10 bytes, the limit (is this a trace file?)"
        );
        assert!(all(b"0123456789\r\n", 10).is_ok());
        assert_eq!(
            all(b"ok\nab\xFFc\n", 10).unwrap_err(),
            "f:2: the line is not valid UTF-8 (byte 3 of the line)"
        );
    }

    #[test]
    fn an_endless_line_stops_at_the_cap() {
        let zeros = std::io::repeat(0).take(u64::MAX);
        let mut l = Lines::new(zeros, "/dev/zero", 1000);
        let e = l.next_line().unwrap_err().to_string();
        assert!(
            e.starts_with("/dev/zero:1: the line is longer than 1000 bytes"),
            "{e}"
        );
    }
}
