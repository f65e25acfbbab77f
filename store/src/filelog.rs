//! Filelogs: one revlog per tracked path. A filelog text may begin with a metadata block
//! `\1\n key: value\n ... \1\n` (copy source, or an escape for content that itself starts
//! with `\1\n`); this module separates the file's content from that header.

use crate::error::{Result, StoreError};
use crate::node::{Node, Rev, NULL_REV};
use crate::revlog::Revlog;
use std::io::Write;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

const META_MARK: &[u8] = b"\x01\n";

/// The content of one file revision: the raw text with its metadata header skipped.
#[derive(Clone)]
pub struct FileText {
    raw: Arc<[u8]>,
    content_start: usize,
}

impl FileText {
    /// The metadata block (without the markers), empty when there is none.
    pub fn metadata(&self) -> &[u8] {
        if self.content_start == 0 {
            &[]
        } else {
            &self.raw[2..self.content_start - 2]
        }
    }

    /// The value of one metadata key (`copy`, `copyrev`, ...).
    pub fn meta_value(&self, key: &[u8]) -> Option<&[u8]> {
        self.metadata().split(|&b| b == b'\n').find_map(|line| {
            let rest = line.strip_prefix(key)?;
            rest.strip_prefix(b": ")
        })
    }
}

impl Deref for FileText {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.raw[self.content_start..]
    }
}

/// Where a copied or renamed file revision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySource {
    pub path: Vec<u8>,
    pub node: Node,
}

/// Splits a raw filelog text into metadata and content; returns the content offset.
pub(crate) fn content_start(raw: &[u8]) -> Option<usize> {
    if !raw.starts_with(META_MARK) {
        return Some(0);
    }
    raw[2..]
        .windows(2)
        .position(|w| w == META_MARK)
        .map(|i| i + 4)
}

/// Where [`SkipMeta`] is in the raw text.
enum MetaState {
    /// At the start: up to two bytes kept to tell whether a metadata block opens.
    Start(Vec<u8>),
    /// In the metadata block; `one`: the last byte seen was `\1`.
    Meta { one: bool },
    /// In the content: everything goes through.
    Content,
}

/// A writer that drops a filelog text's metadata block (`\1\n ... \1\n`) and passes the
/// content on, whatever the boundaries of the writes.
struct SkipMeta<'a> {
    out: &'a mut dyn Write,
    state: MetaState,
    written: u64,
}

impl Write for SkipMeta<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while !rest.is_empty() {
            match &mut self.state {
                MetaState::Start(head) => {
                    let take = (2 - head.len()).min(rest.len());
                    head.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if head.len() == 2 {
                        if head.as_slice() == META_MARK {
                            self.state = MetaState::Meta { one: false };
                        } else {
                            let head = std::mem::take(head);
                            self.out.write_all(&head)?;
                            self.written += 2;
                            self.state = MetaState::Content;
                        }
                    }
                }
                MetaState::Meta { one } => {
                    let mut end = None;
                    for (i, &b) in rest.iter().enumerate() {
                        if *one && b == b'\n' {
                            end = Some(i + 1);
                            break;
                        }
                        *one = b == 1;
                    }
                    match end {
                        Some(i) => {
                            rest = &rest[i..];
                            self.state = MetaState::Content;
                        }
                        None => rest = &[],
                    }
                }
                MetaState::Content => {
                    self.out.write_all(rest)?;
                    self.written += rest.len() as u64;
                    rest = &[];
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// One file's revlog.
pub struct Filelog {
    path: Vec<u8>,
    revlog: Revlog,
}

impl Filelog {
    pub fn new(path: Vec<u8>, revlog: Revlog) -> Filelog {
        Filelog { path, revlog }
    }

    /// The repository path this filelog tracks.
    pub fn path(&self) -> &[u8] {
        &self.path
    }

    pub fn revlog(&self) -> &Revlog {
        &self.revlog
    }

    /// The revision holding `node`.
    pub fn rev_of(&self, node: &Node) -> Result<Rev> {
        self.revlog
            .rev_of(node)
            .ok_or_else(|| StoreError::UnknownNode {
                revlog: self.revlog.name().to_owned(),
                node: node.to_hex(),
            })
    }

    /// The content of `rev`, metadata removed.
    pub fn read(&self, rev: Rev) -> Result<FileText> {
        self.read_with(rev, true)
    }

    /// The content of `rev`, not kept in the text cache (for texts read once).
    pub fn read_uncached(&self, rev: Rev) -> Result<FileText> {
        self.read_with(rev, false)
    }

    fn read_with(&self, rev: Rev, keep: bool) -> Result<FileText> {
        if rev == NULL_REV {
            return Ok(FileText {
                raw: Arc::from(&[][..]),
                content_start: 0,
            });
        }
        let raw = if keep {
            self.revlog.revision(rev)?
        } else {
            self.revlog.revision_uncached(rev)?
        };
        let start = content_start(&raw).ok_or_else(|| {
            StoreError::corrupt_rev(
                self.revlog.name(),
                rev as u32,
                "unterminated metadata header",
            )
        })?;
        Ok(FileText {
            raw,
            content_start: start,
        })
    }

    /// Writes the content of `rev` (metadata removed) to `out`, rebuilt with memory bounded
    /// by its deltas, not its size ([`Revlog::write_revision`]); returns the content's
    /// length. For texts too big to hold.
    pub fn write_content(&self, rev: Rev, scratch: &Path, out: &mut dyn Write) -> Result<u64> {
        let mut skip = SkipMeta {
            out,
            state: MetaState::Start(Vec::with_capacity(2)),
            written: 0,
        };
        self.revlog.write_revision(rev, scratch, &mut skip)?;
        match std::mem::replace(&mut skip.state, MetaState::Content) {
            // A text shorter than the marker is all content.
            MetaState::Start(head) => {
                skip.out
                    .write_all(&head)
                    .map_err(|e| StoreError::io(scratch, e))?;
                skip.written += head.len() as u64;
            }
            MetaState::Meta { .. } => {
                return Err(StoreError::corrupt_rev(
                    self.revlog.name(),
                    rev as u32,
                    "unterminated metadata header",
                ))
            }
            MetaState::Content => {}
        }
        Ok(skip.written)
    }

    /// The copy source of `rev`, as hg's `renamed()` reports it: only when p1 is null and
    /// both `copy` and `copyrev` are present.
    pub fn copy_source(&self, rev: Rev) -> Result<Option<CopySource>> {
        if self.revlog.entry(rev)?.p1 != NULL_REV {
            return Ok(None);
        }
        let text = self.read(rev)?;
        let (Some(path), Some(node)) = (text.meta_value(b"copy"), text.meta_value(b"copyrev"))
        else {
            return Ok(None);
        };
        Ok(Node::from_hex(node).map(|node| CopySource {
            path: path.to_vec(),
            node,
        }))
    }

    /// The content size of `rev`. From the index alone when the text has no metadata
    /// header, which is checked by peeking at the first two bytes of the text.
    pub fn size(&self, rev: Rev) -> Result<u64> {
        if rev == NULL_REV {
            return Ok(0);
        }
        if let Some(len) = self.revlog.raw_len(rev)? {
            if len < 2 || self.revlog.text_prefix(rev, 2)? != META_MARK {
                return Ok(len as u64);
            }
            // A metadata block (a copy source) is short: its end is in the first bytes,
            // without rebuilding a big text.
            for n in [1 << 10, 64 << 10] {
                let head = self.revlog.text_prefix(rev, n)?;
                if let Some(start) = content_start(&head) {
                    return Ok((len as u64).saturating_sub(start as u64));
                }
                if head.len() < n {
                    break;
                }
            }
        }
        Ok(self.read(rev)?.len() as u64)
    }

    /// The length of the raw text of `rev` (metadata included), from the index.
    pub fn raw_len(&self, rev: Rev) -> Result<Option<u64>> {
        Ok(self.revlog.raw_len(rev)?.map(|l| l as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_headers_are_split_from_content() {
        assert_eq!(content_start(b"plain"), Some(0));
        assert_eq!(content_start(b"\x01\n\x01\n\x01\nabc"), Some(4));
        let raw = b"\x01\ncopy: a.txt\ncopyrev: 0123\n\x01\nbody";
        let start = content_start(raw).unwrap();
        let t = FileText {
            raw: Arc::from(&raw[..]),
            content_start: start,
        };
        assert_eq!(&*t, b"body");
        assert_eq!(t.meta_value(b"copy"), Some(&b"a.txt"[..]));
        assert_eq!(t.meta_value(b"copyrev"), Some(&b"0123"[..]));
        assert_eq!(t.meta_value(b"cop"), None);
        assert_eq!(content_start(b"\x01\nunterminated"), None);
    }
}

#[cfg(test)]
mod skip_meta_tests {
    use super::*;

    /// What `SkipMeta` passes on of `raw` written in pieces of `step` bytes.
    fn through(raw: &[u8], step: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut s = SkipMeta {
            out: &mut out,
            state: MetaState::Start(Vec::new()),
            written: 0,
        };
        for piece in raw.chunks(step.max(1)) {
            s.write_all(piece).unwrap();
        }
        let state = std::mem::replace(&mut s.state, MetaState::Content);
        match state {
            MetaState::Start(head) => s.out.write_all(&head).unwrap(),
            MetaState::Meta { .. } => return None,
            MetaState::Content => {}
        }
        Some(out)
    }

    #[test]
    fn metadata_is_dropped_whatever_the_write_boundaries() {
        let cases: [&[u8]; 7] = [
            b"",
            b"a",
            b"\x01",
            b"plain\ntext\n",
            b"\x01\ncopy: a\ncopyrev: 0123\n\x01\ncontent\n",
            b"\x01\n\x01\n\x01\nstarts with the marker\n",
            b"\x01\nkey: v\x01x\n\x01\n",
        ];
        for raw in cases {
            let want = content_start(raw).map(|i| raw[i..].to_vec());
            for step in 1..=raw.len().max(1) {
                assert_eq!(through(raw, step), want, "{raw:?} in steps of {step}");
            }
        }
        assert_eq!(through(b"\x01\nunterminated", 3), None);
    }
}
