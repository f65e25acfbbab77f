//! The content of store files, read the way their size calls for: small texts rebuilt in
//! memory (and kept in the repository's text cache), big ones rebuilt once into the
//! on-disk text cache of the state directory and read from there in bounded pieces. Every
//! path that reads a store file's content (FUSE reads, copy-up, status, update, prefetch)
//! goes through here, so none rebuilds a big text per read or holds it whole in memory.

use crate::wc::{Result, WcError, WorkingCopy};
use revfs_store::bigtext::{BigText, BIG_TEXT};
use revfs_store::filelog::FileText;
use revfs_store::{Node, Repo, StoreError};
use std::io::Read;
use std::sync::Arc;

/// The content of one store file revision.
pub enum StoreText {
    Small(FileText),
    Big(Arc<BigText>),
}

impl StoreText {
    pub fn len(&self) -> u64 {
        match self {
            StoreText::Small(t) => t.len() as u64,
            StoreText::Big(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `size` bytes from `offset`: a small text's share them (no copy).
    pub fn read(self, offset: u64, size: usize) -> std::io::Result<ReadBytes> {
        match self {
            StoreText::Small(t) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(t.len());
                let end = start.saturating_add(size).min(t.len());
                Ok(ReadBytes::Text(t, start..end))
            }
            StoreText::Big(t) => t.read(offset, size).map(ReadBytes::Owned),
        }
    }

    /// The whole content as a reader.
    pub fn reader(&self) -> Box<dyn Read + '_> {
        match self {
            StoreText::Small(t) => Box::new(&t[..]),
            StoreText::Big(t) => Box::new(t.reader()),
        }
    }
}

/// Bytes read from a file: a range of a small store text, shared with the text cache,
/// or bytes of their own (read from the overlay or the on-disk text cache).
pub enum ReadBytes {
    Owned(Vec<u8>),
    Text(FileText, std::ops::Range<usize>),
}

impl std::ops::Deref for ReadBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ReadBytes::Owned(v) => v,
            ReadBytes::Text(t, r) => &t[r.clone()],
        }
    }
}

impl From<ReadBytes> for Vec<u8> {
    fn from(b: ReadBytes) -> Vec<u8> {
        match b {
            ReadBytes::Owned(v) => v,
            ReadBytes::Text(..) => b.to_vec(),
        }
    }
}

/// A file read from its start by `pread`, whatever its descriptor's position.
pub struct FileReader<'a> {
    file: &'a std::fs::File,
    at: u64,
}

impl<'a> FileReader<'a> {
    pub fn new(file: &'a std::fs::File) -> Self {
        FileReader { file, at: 0 }
    }
}

impl Read for FileReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Whether two readers give the same bytes, compared in bounded blocks.
pub fn same_content(a: &mut dyn Read, b: &mut dyn Read) -> std::io::Result<bool> {
    const BLOCK: usize = 256 << 10;
    // Small first, so that comparing a small file costs no big zeroed buffers; grows to
    // BLOCK for big ones.
    let mut block = 16 << 10;
    let (mut x, mut y) = (vec![0u8; block], vec![0u8; block]);
    loop {
        let n = fill(a, &mut x)?;
        let m = fill(b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
        if n == block && block < BLOCK {
            block *= 4;
            x.resize(block, 0);
            y.resize(block, 0);
        }
    }
}

/// Reads until `buf` is full or the reader ends.
fn fill(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl WorkingCopy {
    /// The content of revision `node` of the file at `path`. A big text comes from the
    /// on-disk cache (rebuilt into it the first time); when that cache cannot be written
    /// (a full disk), the text is rebuilt in memory instead, with a warning.
    ///
    /// A read that fails through a handle opened before a strip (hg strip, rebase,
    /// histedit rewrote the store: the handle's revision numbers are not the files' any
    /// more) is made again through a handle opened now, which becomes the working copy's
    /// when `repo` was.
    pub fn store_text(&self, repo: &Repo, path: &[u8], node: &Node) -> Result<StoreText> {
        match self.store_text_in(repo, path, node) {
            Err(e) if repo.stripped_since_open() => {
                let fresh = match Repo::open(repo.root()) {
                    Ok(r) => Arc::new(r),
                    Err(_) => return Err(e),
                };
                tracing::info!(
                    path = %String::from_utf8_lossy(path),
                    "the store was stripped since it was opened ({e}): read again from it as it is"
                );
                let text = self.store_text_in(&fresh, path, node)?;
                let mut inner = self.write();
                if std::ptr::eq(repo, &*inner.repo)
                    && fresh.changelog().rev_of(&inner.base_node).is_some()
                {
                    inner.repo = fresh;
                }
                Ok(text)
            }
            other => other,
        }
    }

    fn store_text_in(&self, repo: &Repo, path: &[u8], node: &Node) -> Result<StoreText> {
        let fl = repo.filelog(path)?;
        let rev = fl.rev_of(node)?;
        if fl.raw_len(rev)?.unwrap_or(0) > BIG_TEXT {
            match self.texts.get(&fl, rev, *node, &crate::busy::heartbeat) {
                Ok(t) => return Ok(StoreText::Big(t)),
                Err(StoreError::Io { path: p, source }) if p.starts_with(self.texts_dir()) => {
                    tracing::warn!(
                        path = %String::from_utf8_lossy(path),
                        "the text cache cannot take this file ({}: {source}): rebuilt in memory",
                        p.display()
                    );
                }
                Err(e) => return Err(WcError::Store(e)),
            }
        }
        Ok(StoreText::Small(fl.read(rev)?))
    }
}

/// Read-ahead's builder of big texts (`readahead.rs`'s [`BigTexts`]): the same on-disk
/// cache, and the same one build per revision, as a reader's.
///
/// [`BigTexts`]: crate::readahead::BigTexts
pub(crate) struct BigTextBuilder {
    pub(crate) wc: std::sync::Weak<WorkingCopy>,
}

impl crate::readahead::BigTexts for BigTextBuilder {
    fn build(
        &self,
        repo: &Repo,
        job: &crate::readahead::Job,
    ) -> Option<Arc<revfs_store::bigtext::BigText>> {
        let wc = self.wc.upgrade()?;
        let fl = repo.filelog(&job.path).ok()?;
        let rev = fl.rev_of(&job.node).ok()?;
        wc.texts.get(&fl, rev, job.node, &|| {}).ok()
    }
}
