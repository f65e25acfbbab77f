//! Output helpers shared by commands: hg-style aborts, dates, and a writer that treats a
//! closed pipe (`revfs log | head`) as a normal end.

use std::io::{self, Write};

/// Prints `abort: <message>` for an error, with its causes, as hg does. Errors that hg
/// words differently (configuration and date parse errors) print hg's own text.
pub fn abort(err: &anyhow::Error) {
    if let Some(text) = hg_text(err) {
        eprint!("{text}");
        return;
    }
    let mut msg = err.to_string();
    for cause in err.chain().skip(1) {
        // Errors that already spell out their cause are not told twice.
        let cause = cause.to_string();
        if !msg.ends_with(&cause) {
            msg.push_str(": ");
            msg.push_str(&cause);
        }
    }
    eprintln!("abort: {msg}");
}

/// The complete stderr text of the typed errors that carry hg's wording.
fn hg_text(err: &anyhow::Error) -> Option<String> {
    if let Some(e) = err.downcast_ref::<revfs_hg::config::IdentityError>() {
        return Some(e.hg_message());
    }
    if let Some(e) = err.downcast_ref::<revfs_hg::config::ConfigError>() {
        return Some(e.hg_message());
    }
    if let Some(e) = err.downcast_ref::<revfs_hg::matcher::MatchError>() {
        return Some(e.hg_message());
    }
    if let Some(e) = err.downcast_ref::<revfs_hg::date::DateError>() {
        return Some(e.hg_message());
    }
    if let Some(e) = err.downcast_ref::<revfs_hg::template::TemplateError>() {
        return Some(e.hg_message());
    }
    if let Some(e) = err.downcast_ref::<crate::commands::NotAnswering>() {
        return Some(e.hg_message());
    }
    if let Some(e) = err.downcast_ref::<revfs_vfs::client::ClientError>() {
        return e.hg_message();
    }
    None
}

/// Formats a changeset date as hg's `{date|date}`: `Tue Nov 14 22:20:00 2023 +0000`.
/// `tz` is the offset in seconds west of UTC.
pub fn format_date(time: i64, tz: i32) -> String {
    format!(
        "{} {}",
        local_time(time, tz, "%a %b %d %H:%M:%S %Y"),
        tz_suffix(tz)
    )
}

pub use revfs_hg::date::{local_time, tz_suffix};

/// Escapes a byte string for JSON exactly as hg's `json` template filter does: control
/// characters as `\uXXXX` (or their short forms), `"` and `\` escaped, other bytes as-is.
pub fn json_string(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
    out
}

/// Standard output, buffered. Writing to a closed pipe ends the command quietly.
pub struct Out {
    inner: io::BufWriter<io::StdoutLock<'static>>,
}

impl Out {
    pub fn new() -> Out {
        Out {
            inner: io::BufWriter::with_capacity(64 << 10, io::stdout().lock()),
        }
    }

    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Turns a broken pipe into success: the reader went away, there is nothing left to do.
pub fn ignore_broken_pipe(r: io::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_in_the_committer_timezone() {
        assert_eq!(
            format_date(1700000000, -3600),
            "Tue Nov 14 23:13:20 2023 +0100"
        );
        assert_eq!(
            format_date(1700000200, 18000),
            "Tue Nov 14 17:16:40 2023 -0500"
        );
        assert_eq!(format_date(0, 0), "Thu Jan 01 00:00:00 1970 +0000");
        assert_eq!(format_date(0, -19800), "Thu Jan 01 05:30:00 1970 +0530");
    }

    #[test]
    fn json_escapes_like_hg() {
        assert_eq!(
            json_string(b"a\"b\\c\nd\x01\x7f\xc3\xa9"),
            b"\"a\\\"b\\\\c\\nd\\u0001\\u007f\xc3\xa9\"".to_vec()
        );
    }
}
