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

/// A range of a text being rebuilt: `len` bytes at `off` of source `src` (what a source is,
/// the base text or a delta's data, is the caller's to say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub src: u32,
    pub off: u64,
    pub len: u64,
}

/// A text described as a list of pieces, so that applying a delta costs its hunks, not the
/// text: a chain of deltas is folded into one list and the text copied out once.
#[derive(Clone, Debug, Default)]
pub struct Rope {
    pieces: Vec<Piece>,
    len: u64,
}

impl Rope {
    /// The whole of source `src`, `len` bytes.
    pub fn new(src: u32, len: u64) -> Rope {
        let mut pieces = Vec::new();
        if len > 0 {
            pieces.push(Piece { src, off: 0, len });
        }
        Rope { pieces, len }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Starts applying a delta to this text: feed it the delta's hunks in order.
    pub fn patcher(&self) -> Patcher<'_> {
        Patcher {
            old: self,
            i: 0,
            at: 0,
            pos: 0,
            out: Vec::with_capacity(self.pieces.len() + 4),
        }
    }
}

/// Builds the text that a delta makes of a [`Rope`], one hunk at a time, checking hunks as
/// [`apply`] does.
pub struct Patcher<'a> {
    old: &'a Rope,
    /// The first old piece not wholly before the last range copied, and where it starts.
    i: usize,
    at: u64,
    /// The end of the last hunk, in the old text.
    pos: u64,
    out: Vec<Piece>,
}

impl Patcher<'_> {
    /// Replaces `[start, end)` of the old text by `data`.
    pub fn hunk(&mut self, start: u64, end: u64, data: Piece) -> Result<(), PatchError> {
        if start < self.pos || end < start || end > self.old.len {
            return Err(PatchError::BadHunk {
                start: start as u32,
                end: end as u32,
                old_len: self.old.len as usize,
            });
        }
        self.copy(self.pos, start);
        if data.len > 0 {
            push(&mut self.out, data);
        }
        self.pos = end;
        Ok(())
    }

    /// The new text.
    pub fn finish(mut self) -> Rope {
        self.copy(self.pos, self.old.len);
        let len = self.out.iter().map(|p| p.len).sum();
        Rope {
            pieces: self.out,
            len,
        }
    }

    /// Appends the old pieces covering `[from, to)`; `from` is never before the end of the
    /// previous call's range.
    fn copy(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let rope = &self.old.pieces;
        while self.i < rope.len() && self.at + rope[self.i].len <= from {
            self.at += rope[self.i].len;
            self.i += 1;
        }
        while self.i < rope.len() && self.at < to {
            let p = rope[self.i];
            let (s, e) = (from.max(self.at), to.min(self.at + p.len));
            if e > s {
                push(
                    &mut self.out,
                    Piece {
                        src: p.src,
                        off: p.off + (s - self.at),
                        len: e - s,
                    },
                );
            }
            if self.at + p.len <= to {
                self.at += p.len;
                self.i += 1;
            } else {
                break;
            }
        }
    }
}

/// Appends a piece, joined to the last one when it continues it.
fn push(out: &mut Vec<Piece>, p: Piece) {
    if let Some(last) = out.last_mut() {
        if last.src == p.src && last.off + last.len == p.off {
            last.len += p.len;
            return;
        }
    }
    out.push(p);
}

/// Applies a chain of deltas to `base` at once: the deltas are folded into one list of
/// pieces and the text is copied out once, so a long chain costs its hunks plus one copy
/// of the text, not one copy per delta. On error, the index of the delta at fault.
pub fn apply_chain<D: AsRef<[u8]>>(
    base: &[u8],
    deltas: &[D],
) -> Result<Vec<u8>, (usize, PatchError)> {
    let mut rope = Rope::new(0, base.len() as u64);
    for (i, delta) in deltas.iter().enumerate() {
        let delta = delta.as_ref();
        let mut patcher = rope.patcher();
        for hunk in Hunks::new(delta) {
            let hunk = hunk.map_err(|e| (i, e))?;
            let off = hunk.data.as_ptr() as usize - delta.as_ptr() as usize;
            let data = Piece {
                src: i as u32 + 1,
                off: off as u64,
                len: hunk.data.len() as u64,
            };
            patcher
                .hunk(hunk.start as u64, hunk.end as u64, data)
                .map_err(|e| (i, e))?;
        }
        rope = patcher.finish();
    }
    let mut out = Vec::with_capacity(usize::try_from(rope.len()).unwrap_or(0));
    for p in rope.pieces() {
        let src = match p.src {
            0 => base,
            n => deltas[n as usize - 1].as_ref(),
        };
        // Pieces are ranges checked against their source when their hunk was read.
        out.extend_from_slice(&src[p.off as usize..(p.off + p.len) as usize]);
    }
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

    #[test]
    fn a_folded_chain_equals_deltas_applied_one_by_one() {
        let base = b"0123456789abcdefghij".to_vec();
        let mut d1 = hunk(0, 2, b"AB");
        d1.extend(hunk(5, 5, b"xyz"));
        d1.extend(hunk(10, 20, b""));
        let mut d2 = hunk(1, 4, b"");
        d2.extend(hunk(6, 8, b"QQQQ"));
        d2.extend(hunk(13, 13, b"end"));
        let d3 = hunk(0, 0, b"");
        let step = apply(
            &apply(&apply(&base, &d1, 0).unwrap(), &d2, 0).unwrap(),
            &d3,
            0,
        );
        let chain = [d1.clone(), d2.clone(), d3];
        assert_eq!(apply_chain(&base, &chain).unwrap(), step.unwrap());
        assert_eq!(apply_chain(&base, &[] as &[Vec<u8>]).unwrap(), base);
        let bad = [d1, hunk(2, 99, b"")];
        assert!(matches!(
            apply_chain(&base, &bad),
            Err((1, PatchError::BadHunk { .. }))
        ));
        let cut = [d2[..5].to_vec()];
        assert_eq!(apply_chain(&base, &cut), Err((0, PatchError::Truncated)));
    }

    #[test]
    fn a_rope_copies_ranges_across_pieces() {
        let empty = |src| Piece {
            src,
            off: 0,
            len: 0,
        };
        let whole = Rope::new(0, 30);
        let mut p = whole.patcher();
        p.hunk(
            10,
            20,
            Piece {
                src: 1,
                off: 100,
                len: 5,
            },
        )
        .unwrap();
        let rope = p.finish();
        assert_eq!(rope.len(), 25);
        let mut p = rope.patcher();
        p.hunk(0, 2, empty(1)).unwrap();
        p.hunk(4, 8, empty(1)).unwrap();
        p.hunk(12, 14, empty(1)).unwrap();
        assert!(matches!(
            p.hunk(13, 14, empty(1)),
            Err(PatchError::BadHunk { .. })
        ));
        let rope = p.finish();
        let got: Vec<(u32, u64, u64)> = rope
            .pieces()
            .iter()
            .map(|p| (p.src, p.off, p.len))
            .collect();
        assert_eq!(
            got,
            [(0, 2, 2), (0, 8, 2), (1, 100, 2), (1, 104, 1), (0, 20, 10)]
        );
        assert_eq!(rope.len(), 17);
        let mut p = rope.patcher();
        assert!(matches!(
            p.hunk(0, 18, empty(1)),
            Err(PatchError::BadHunk { .. })
        ));
    }
}
