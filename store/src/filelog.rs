//! Filelogs: one revlog per tracked path. A filelog text may begin with a metadata block
//! `\1\n key: value\n ... \1\n` (copy source, or an escape for content that itself starts
//! with `\1\n`); this module separates the file's content from that header.

use crate::error::{Result, StoreError};
use crate::node::{Node, Rev, NULL_REV};
use crate::revlog::Revlog;
use crate::shallow::{Blob, ShallowSource};
use std::collections::HashMap;
use std::io::Write;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex};

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

/// One file's revisions: its revlog, or, in a shallow repository, the blobs of its
/// revisions (crate::shallow), numbered in the order they are first asked for.
pub struct Filelog {
    path: Vec<u8>,
    backing: Backing,
}

enum Backing {
    // Boxed: a revlog is several times the size of a shallow file's handle.
    Revlog(Box<Revlog>),
    Shallow(ShallowFile),
}

/// A shallow file's revisions: the nodes asked for so far, each given a number, read from
/// the repository's source of blobs.
struct ShallowFile {
    source: Arc<ShallowSource>,
    revs: Mutex<(Vec<Node>, HashMap<Node, Rev>)>,
}

impl ShallowFile {
    fn node(&self, path: &[u8], rev: Rev) -> Result<Node> {
        let revs = self.revs.lock().unwrap_or_else(|p| p.into_inner());
        usize::try_from(rev)
            .ok()
            .and_then(|r| revs.0.get(r).copied())
            .ok_or_else(|| StoreError::RevisionOutOfRange {
                revlog: String::from_utf8_lossy(path).into_owned(),
                rev: rev as i64,
            })
    }

    fn blob(&self, path: &[u8], rev: Rev) -> Result<Arc<Blob>> {
        let node = self.node(path, rev)?;
        self.source.get(path, &node)
    }
}

impl Filelog {
    pub fn new(path: Vec<u8>, revlog: Revlog) -> Filelog {
        Filelog {
            path,
            backing: Backing::Revlog(Box::new(revlog)),
        }
    }

    /// The filelog of `path` in a shallow repository, read from `source`.
    pub fn shallow(path: Vec<u8>, source: Arc<ShallowSource>) -> Filelog {
        Filelog {
            path,
            backing: Backing::Shallow(ShallowFile {
                source,
                revs: Mutex::new((Vec::new(), HashMap::new())),
            }),
        }
    }

    /// The repository path this filelog tracks.
    pub fn path(&self) -> &[u8] {
        &self.path
    }

    /// The revlog, unless the file's revisions are a shallow repository's blobs.
    pub fn revlog(&self) -> Option<&Revlog> {
        match &self.backing {
            Backing::Revlog(r) => Some(r),
            Backing::Shallow(_) => None,
        }
    }

    /// Memory the filelog holds (its index and maps).
    pub fn heap_bytes(&self) -> usize {
        match &self.backing {
            Backing::Revlog(r) => r.heap_bytes(),
            Backing::Shallow(s) => {
                64 + s.revs.lock().unwrap_or_else(|p| p.into_inner()).0.len() * 64
            }
        }
    }

    /// The revision holding `node`. In a shallow repository, the revision is fetched from
    /// the server first when this machine lacks it.
    pub fn rev_of(&self, node: &Node) -> Result<Rev> {
        match &self.backing {
            Backing::Revlog(revlog) => revlog.rev_of(node).ok_or_else(|| StoreError::UnknownNode {
                revlog: revlog.name().to_owned(),
                node: node.to_hex(),
            }),
            Backing::Shallow(s) => {
                if let Some(&r) = s.revs.lock().unwrap_or_else(|p| p.into_inner()).1.get(node) {
                    return Ok(r);
                }
                s.source.fetch_many(&[(&self.path, *node)])?;
                let mut revs = s.revs.lock().unwrap_or_else(|p| p.into_inner());
                let (list, map) = &mut *revs;
                Ok(*map.entry(*node).or_insert_with(|| {
                    list.push(*node);
                    (list.len() - 1) as Rev
                }))
            }
        }
    }

    /// The node of `rev`.
    pub fn node(&self, rev: Rev) -> Result<Node> {
        match &self.backing {
            Backing::Revlog(r) => r.node(rev),
            Backing::Shallow(s) => s.node(&self.path, rev),
        }
    }

    /// The changelog revision that introduced `rev` (its linkrev).
    pub fn linkrev(&self, rev: Rev, changelog: &Revlog) -> Result<Rev> {
        match &self.backing {
            Backing::Revlog(r) => r.linkrev(rev),
            Backing::Shallow(s) => {
                let link = s.blob(&self.path, rev)?.ancestors[0].linknode;
                changelog
                    .rev_of(&link)
                    .ok_or_else(|| StoreError::UnknownNode {
                        revlog: "00changelog.i".into(),
                        node: link.to_hex(),
                    })
            }
        }
    }

    /// Whether file revision `a` is an ancestor of `b` (or `b` itself).
    pub fn is_ancestor(&self, a: Rev, b: Rev) -> Result<bool> {
        match &self.backing {
            Backing::Revlog(r) => r.is_ancestor(a, b),
            Backing::Shallow(s) => {
                let (na, blob) = (s.node(&self.path, a)?, s.blob(&self.path, b)?);
                // The blob's ancestry is this file's history (copies lead to other paths,
                // whose records are not this file's revisions).
                Ok(blob
                    .ancestors
                    .iter()
                    .any(|r| r.node == na && r.copy_from.is_none())
                    || blob.ancestors[0].node == na)
            }
        }
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
        let (raw, name) = match &self.backing {
            Backing::Revlog(revlog) => {
                let raw = if keep {
                    revlog.revision(rev)?
                } else {
                    revlog.revision_uncached(rev)?
                };
                (raw, revlog.name())
            }
            Backing::Shallow(s) => (Arc::from(s.blob(&self.path, rev)?.raw_text().as_ref()), ""),
        };
        let start = content_start(&raw).ok_or_else(|| {
            StoreError::corrupt_rev(name, rev as u32, "unterminated metadata header")
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
        let revlog = match &self.backing {
            Backing::Revlog(r) => r,
            Backing::Shallow(_) => {
                let text = self.read_uncached(rev)?;
                out.write_all(&text)
                    .map_err(|e| StoreError::io(scratch, e))?;
                return Ok(text.len() as u64);
            }
        };
        let mut skip = SkipMeta {
            out,
            state: MetaState::Start(Vec::with_capacity(2)),
            written: 0,
        };
        revlog.write_revision(rev, scratch, &mut skip)?;
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
                    revlog.name(),
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
        match &self.backing {
            Backing::Revlog(revlog) => {
                if revlog.entry(rev)?.p1 != NULL_REV {
                    return Ok(None);
                }
            }
            Backing::Shallow(s) => {
                let blob = s.blob(&self.path, rev)?;
                let own = &blob.ancestors[0];
                return Ok(own.copy_from.as_ref().map(|path| CopySource {
                    path: path.clone(),
                    node: own.p1,
                }));
            }
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
        let revlog = match &self.backing {
            Backing::Revlog(r) => r,
            Backing::Shallow(s) => return Ok(s.blob(&self.path, rev)?.text.len() as u64),
        };
        if let Some(len) = revlog.raw_len(rev)? {
            if len < 2 || revlog.text_prefix(rev, 2)? != META_MARK {
                return Ok(len as u64);
            }
            // A metadata block (a copy source) is short: its end is in the first bytes,
            // without rebuilding a big text.
            for n in [1 << 10, 64 << 10] {
                let head = revlog.text_prefix(rev, n)?;
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

    /// The length of the raw text of `rev` (metadata included), from the index (in a
    /// shallow repository, from the blob).
    pub fn raw_len(&self, rev: Rev) -> Result<Option<u64>> {
        match &self.backing {
            Backing::Revlog(r) => Ok(r.raw_len(rev)?.map(|l| l as u64)),
            Backing::Shallow(s) => Ok(Some(s.blob(&self.path, rev)?.raw_len() as u64)),
        }
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
