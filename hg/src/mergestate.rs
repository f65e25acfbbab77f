//! hg's merge state (`.hg/merge/state2`, written by Mercurial 6.3.2's `mergestate`): which
//! files a merge or an update with conflicts left unresolved, so that revfs refuses what hg
//! refuses while they are (`outstanding merge conflicts`).
//!
//! Format (version 2): records of one type byte, a big-endian u32 length and that many
//! bytes; a `t` record holds another record whose type is its first byte (hg writes the
//! change/delete and path conflicts so). File records (`F`, `C`, `P`, and `D` of older
//! versions) start with the file name and its state, each ended by a NUL; the states `u`
//! and `pu` are unresolved. Other records are skipped.

use std::path::{Path, PathBuf};

/// The merge state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MergeStateError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: merge state is corrupt (record at byte {at})", path.display())]
    Corrupt { path: PathBuf, at: usize },
}

/// The number of unresolved files in the merge state of the `.hg` at `dot_hg` (0 when
/// there is none).
pub fn unresolved(dot_hg: &Path) -> Result<usize, MergeStateError> {
    let path = dot_hg.join("merge").join("state2");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(MergeStateError::Io { path, source }),
    };
    unresolved_in(&bytes).map_err(|at| MergeStateError::Corrupt { path, at })
}

/// [`unresolved`] of a state2 file's bytes; `Err(offset)` of a record cut short.
fn unresolved_in(bytes: &[u8]) -> Result<usize, usize> {
    let mut n = 0;
    let mut at = 0;
    while at < bytes.len() {
        let head = bytes.get(at..at + 5).ok_or(at)?;
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut data = bytes.get(at + 5..at + 5 + len).ok_or(at)?;
        let mut kind = head[0];
        if kind == b't' {
            // hg's override record: the record type is the first byte of the data.
            let (&k, rest) = data.split_first().ok_or(at)?;
            (kind, data) = (k, rest);
        }
        if matches!(kind, b'F' | b'C' | b'P' | b'D') {
            let mut fields = data.split(|&b| b == 0);
            let _name = fields.next();
            if matches!(fields.next(), Some(b"u" | b"pu")) {
                n += 1;
            }
        }
        at += 5 + len;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u8, data: &[u8]) -> Vec<u8> {
        let mut v = vec![kind];
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn unresolved_files_are_counted_and_resolved_ones_are_not() {
        let mut b = record(b'L', b"0123");
        b.extend(record(b'F', b"a\0u\0hash\0a\0"));
        b.extend(record(b'F', b"b\0r\0hash\0b\0"));
        b.extend(record(b'C', b"c\0pu\0x\0"));
        b.extend(record(b't', b"Cd\0u\0x\0"));
        b.extend(record(b'f', b"a\0extra\0"));
        assert_eq!(unresolved_in(&b), Ok(3));
        assert_eq!(unresolved_in(&b[..b.len() - 1]), Err(b.len() - 13));
        assert_eq!(unresolved_in(b""), Ok(0));
    }
}
