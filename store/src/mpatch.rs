//! Mercurial's binary delta format (mpatch): a sequence of hunks `>lll` (start, end, length)
//! followed by `length` bytes that replace `old[start..end]`. Offsets refer to the old text.

use std::fmt;

/// Why a delta could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// The delta ended in the middle of a hunk header or hunk data.
    Truncated,
    /// A hunk's offsets are out of order or outside the old text.
    BadHunk {
        start: u32,
        end: u32,
        old_len: usize,
    },
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::Truncated => f.write_str("patch cannot be decoded (truncated hunk)"),
            PatchError::BadHunk {
                start,
                end,
                old_len,
            } => write!(
                f,
                "patch cannot be decoded (hunk {start}..{end} outside a {old_len}-byte text or out of order)"
            ),
        }
    }
}

/// One decoded hunk of a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hunk<'a> {
    pub start: usize,
    pub end: usize,
    pub data: &'a [u8],
}

/// Iterates over the hunks of a delta, checking each header as it goes.
pub struct Hunks<'a> {
    rest: &'a [u8],
}

impl<'a> Hunks<'a> {
    pub fn new(delta: &'a [u8]) -> Self {
        Hunks { rest: delta }
    }
}

impl<'a> Iterator for Hunks<'a> {
    type Item = Result<Hunk<'a>, PatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Some((header, after)) = self.rest.split_first_chunk::<12>() else {
            self.rest = &[];
            return Some(Err(PatchError::Truncated));
        };
        let field =
            |i: usize| i32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let (start, end, len) = (field(0), field(4), field(8));
        if start < 0 || end < start || len < 0 {
            self.rest = &[];
            return Some(Err(PatchError::BadHunk {
                start: start as u32,
                end: end as u32,
                old_len: 0,
            }));
        }
        let len = len as usize;
        if after.len() < len {
            self.rest = &[];
            return Some(Err(PatchError::Truncated));
        }
        let (data, rest) = after.split_at(len);
        self.rest = rest;
        Some(Ok(Hunk {
            start: start as usize,
            end: end as usize,
            data,
        }))
    }
}

/// Applies one delta to `old`, returning the new text. `size_hint` is the expected length of
/// the result (from the revlog index), used only to size the output buffer, and never
/// beyond what the delta can produce.
pub fn apply(old: &[u8], delta: &[u8], size_hint: usize) -> Result<Vec<u8>, PatchError> {
    let mut out = Vec::with_capacity(size_hint.min(old.len().saturating_add(delta.len())));
    let mut pos = 0usize;
    for hunk in Hunks::new(delta) {
        let hunk = hunk?;
        if hunk.start < pos || hunk.end > old.len() {
            return Err(PatchError::BadHunk {
                start: hunk.start as u32,
                end: hunk.end as u32,
                old_len: old.len(),
            });
        }
        out.extend_from_slice(&old[pos..hunk.start]);
        out.extend_from_slice(hunk.data);
        pos = hunk.end;
    }
    out.extend_from_slice(&old[pos..]);
    Ok(out)
}

/// The concatenation of every hunk's inserted data (hg's `mdiff.patchtext`).
pub fn inserted_text(delta: &[u8]) -> Result<Vec<u8>, PatchError> {
    let mut out = Vec::new();
    for hunk in Hunks::new(delta) {
        out.extend_from_slice(hunk?.data);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunk(start: i32, end: i32, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&start.to_be_bytes());
        v.extend_from_slice(&end.to_be_bytes());
        v.extend_from_slice(&(data.len() as i32).to_be_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn empty_delta_keeps_the_text() {
        assert_eq!(apply(b"abc", b"", 3).unwrap(), b"abc");
    }

    #[test]
    fn hunks_replace_insert_and_delete() {
        let mut d = hunk(0, 1, b"X");
        d.extend(hunk(2, 2, b"YY"));
        d.extend(hunk(3, 5, b""));
        assert_eq!(apply(b"abcdef", &d, 0).unwrap(), b"XbYYcf");
        assert_eq!(inserted_text(&d).unwrap(), b"XYY");
    }

    #[test]
    fn out_of_order_or_out_of_range_hunks_are_rejected() {
        let mut d = hunk(3, 4, b"");
        d.extend(hunk(1, 2, b""));
        assert!(matches!(
            apply(b"abcdef", &d, 0),
            Err(PatchError::BadHunk { .. })
        ));
        assert!(matches!(
            apply(b"ab", &hunk(1, 9, b""), 0),
            Err(PatchError::BadHunk { .. })
        ));
        assert!(matches!(
            apply(b"ab", &hunk(-1, 1, b""), 0),
            Err(PatchError::BadHunk { .. })
        ));
    }

    #[test]
    fn the_size_hint_does_not_reserve_more_than_the_delta_can_produce() {
        // The hint is the index's raw_len: 4 untrusted bytes must not reserve 2 GiB.
        let out = apply(b"ab", &hunk(1, 1, b"c"), i32::MAX as usize).unwrap();
        assert_eq!(out, b"acb");
        assert!(out.capacity() <= 2 + 13);
    }

    #[test]
    fn truncated_deltas_are_rejected() {
        let d = hunk(0, 0, b"abc");
        assert_eq!(apply(b"", &d[..d.len() - 1], 0), Err(PatchError::Truncated));
        assert_eq!(apply(b"", &d[..5], 0), Err(PatchError::Truncated));
    }
}
