//! Filelogs: one revlog per tracked path. A filelog text may begin with a metadata block
//! `\1\n key: value\n ... \1\n` (copy source, or an escape for content that itself starts
//! with `\1\n`); this module separates the file's content from that header.

use crate::error::{Result, StoreError};
use crate::node::{Node, Rev, NULL_REV};
use crate::revlog::Revlog;
use std::ops::Deref;
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
fn content_start(raw: &[u8]) -> Option<usize> {
    if !raw.starts_with(META_MARK) {
        return Some(0);
    }
    raw[2..]
        .windows(2)
        .position(|w| w == META_MARK)
        .map(|i| i + 4)
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
        }
        Ok(self.read(rev)?.len() as u64)
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
