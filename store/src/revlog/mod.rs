//! Revlog v1 reader: memory-mapped index and data files, chunk decoding, delta chains
//! (generaldelta and the legacy previous-revision layout), hash-checked texts, and node lookup.
//!
//! A [`Revlog`] is a snapshot of the files as they were when it was opened: revisions
//! appended later are not seen until the revlog is opened again.

mod cache;
mod chunk;
pub mod guarded_map;
mod index;
mod stream;
#[cfg(test)]
mod strip_tests;

pub use cache::TextCache;
pub use index::{IndexEntry, REVIDX_ELLIPSIS, REVIDX_EXTSTORED, REVIDX_ISCENSORED};

/// The private parsers of this module, for the fuzz targets in `fuzz/`: not an API.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::chunk::{decompress, decompress_prefix, decompress_shared};
    pub use super::index::{Header, Layout};
    /// The size of one index entry.
    pub const ENTRY_SIZE: usize = super::index::ENTRY_SIZE;
}

use crate::error::{Result, StoreError};
use crate::mpatch;
use crate::node::{Node, Rev, NULL_REV};
use index::{Header, Layout, ENTRY_SIZE};
use std::collections::HashMap;
use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Files below this size are read into memory: for them a map costs more system time
/// (mmap, page faults, munmap) than one read. Larger files are memory-mapped.
const MAP_THRESHOLD: u64 = 64 << 10;

/// The bytes of a file: mapped, read, or absent (an empty or missing revlog).
pub enum FileBytes {
    Empty,
    Read(Vec<u8>),
    Mapped(guarded_map::GuardedMap),
}

impl FileBytes {
    /// Maps a file; a missing file gives `Ok(None)`.
    pub fn open(path: &Path) -> Result<Option<FileBytes>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(path, e)),
        };
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        if len == 0 {
            return Ok(Some(FileBytes::Empty));
        }
        if len < MAP_THRESHOLD {
            return read_prefix(&file, len as usize)
                .map(|buf| Some(FileBytes::Read(buf)))
                .map_err(|e| StoreError::io(path, e));
        }
        // SAFETY: revlogs are append-only; the map covers the length seen at open and no
        // writer truncates a revlog below that length except a strip or a recover, whose
        // missing pages read as zeros (`guarded_map.rs`).
        let map =
            unsafe { guarded_map::GuardedMap::map(&file) }.map_err(|e| StoreError::io(path, e))?;
        Ok(Some(FileBytes::Mapped(map)))
    }
}

/// The first `len` bytes of `file` (fewer if it is shorter now), read with as few calls as
/// can be: `read_to_end` would ask the file's size and position again and read once more
/// to see its end, three system calls a filelog on a first read of every file. The buffer
/// is not zeroed first: read(2) fills it (zeroing was 1.5% of read-ahead's time).
fn read_prefix(file: &File, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    while buf.len() < len {
        let filled = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..len - filled];
        let want = spare.len();
        // SAFETY: read(2) writes at most `want` bytes into `spare`, memory this vector
        // owns and does not yet count; `file` stays open for the call.
        let n = unsafe { libc::read(file.as_raw_fd(), spare.as_mut_ptr().cast(), want) };
        match n {
            0 => break,
            n if n > 0 => {
                // SAFETY: read(2) initialized the `n` (at most `want`) bytes after `filled`.
                unsafe { buf.set_len(filled + (n as usize).min(want)) };
            }
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(buf)
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Empty => &[],
            FileBytes::Read(v) => v,
            FileBytes::Mapped(m) => m,
        }
    }
}

/// The revisions whose chunks rebuild a revision, newest first, and a cached full text to
/// start from.
type DeltaChain = (Vec<Rev>, Option<Arc<[u8]>>);

/// One open revlog.
pub struct Revlog {
    name: String,
    index_path: PathBuf,
    /// Where the last entry was in the index file when opened, and its node.
    tip_at_open: Option<(u64, Node)>,
    /// The data file of a split revlog; empty for an inline one, whose chunks are in its
    /// index.
    data_path: PathBuf,
    index: FileBytes,
    layout: Layout,
    header: Header,
    len: usize,
    data: Option<FileBytes>,
    cache: TextCache,
    cache_id: u32,
    nodemap: OnceLock<HashMap<Node, Rev>>,
    /// Texts checked against their node before (a filelog's: `Repo`'s size cache).
    checked: Option<Arc<dyn CheckedTexts>>,
}

/// What a revlog's reader remembers of texts it checked against their node (SHA-1 of the
/// parents and the text, as hg checks every revision it reads): a text rebuilt from one
/// stored chunk (a whole text, not a delta) that was checked once is not hashed again when
/// the chunk and the parents are the same (the CRC-32 of the parents' nodes and the chunk):
/// decompression is deterministic. The SHA-1 was a sixth of the CPU of a first read of a
/// tree; the CRC-32 of the compressed chunk costs a small part of its decompression.
pub trait CheckedTexts: Send + Sync {
    /// Whether `node`'s text was checked when rebuilt with these parents and chunk (their
    /// CRC-32).
    fn checked(&self, node: &Node, chunk_crc: u32) -> bool;
    /// `node`'s text, rebuilt from one chunk, matched `node` (the CRC-32 of its parents'
    /// nodes and the chunk).
    fn remember(&self, node: &Node, chunk_crc: u32, text: &[u8]);
}

impl Revlog {
    /// Opens the revlog whose index is at `index_path`. `name` is the unencoded store path of
    /// the index (e.g. `data/a.txt.i`), used in messages. A missing index is an empty revlog.
    pub fn open(
        index_path: &Path,
        data_path: &Path,
        name: String,
        cache: TextCache,
        cache_id: u32,
    ) -> Result<Revlog> {
        Self::open_with_data(index_path, || data_path.to_owned(), name, cache, cache_id)
    }

    /// [`Revlog::open`], with the data file's path made only for a revlog that has one:
    /// an inline revlog (most filelogs) never asks for it, and encoding a store path is a
    /// part of a first read of every file.
    pub fn open_with_data(
        index_path: &Path,
        data_path: impl FnOnce() -> PathBuf,
        name: String,
        cache: TextCache,
        cache_id: u32,
    ) -> Result<Revlog> {
        let index = FileBytes::open(index_path)?.unwrap_or(FileBytes::Empty);
        let corrupt = |reason: String| StoreError::CorruptIndex {
            revlog: name.clone(),
            reason,
        };
        let (header, layout, len) = match index.first_chunk::<4>() {
            None if index.is_empty() => (
                Header {
                    inline: true,
                    generaldelta: false,
                },
                Layout::Inline {
                    positions: Vec::new(),
                },
                0,
            ),
            None => return Err(corrupt(format!("{} bytes is too short", index.len()))),
            Some(first) => {
                let header = Header::parse(*first).map_err(corrupt)?;
                if header.inline {
                    let layout = Layout::scan_inline(&index).map_err(corrupt)?;
                    let len = match &layout {
                        Layout::Inline { positions } => positions.len(),
                        Layout::Split => 0,
                    };
                    (header, layout, len)
                } else {
                    let len = Layout::split_len(&index).map_err(corrupt)?;
                    (header, Layout::Split, len)
                }
            }
        };
        if len > i32::MAX as usize {
            return Err(corrupt(format!("{len} revisions")));
        }
        // The last entry as opened, to tell later whether a strip rewrote the file.
        let tip_at_open = len.checked_sub(1).and_then(|r| {
            let pos = match &layout {
                Layout::Split => r * ENTRY_SIZE,
                Layout::Inline { positions } => positions[r],
            };
            let bytes = index.get(pos..pos + ENTRY_SIZE)?;
            let entry = IndexEntry::parse(r, bytes.try_into().ok()?);
            Some((pos as u64, entry.node))
        });
        let (data, data_path) = if header.inline {
            (None, PathBuf::new())
        } else {
            let data_path = data_path();
            (FileBytes::open(&data_path)?, data_path)
        };
        Ok(Revlog {
            name,
            index_path: index_path.to_owned(),
            tip_at_open,
            data_path,
            index,
            layout,
            header,
            len,
            data,
            cache,
            cache_id,
            nodemap: OnceLock::new(),
            checked: None,
        })
    }

    /// About how many bytes of memory of its own this open revlog holds: its index and data
    /// when read rather than mapped, the positions of an inline index's entries, and the
    /// node map once built (~48 bytes a revision, counted from the start). Maps are page
    /// cache and not counted.
    pub fn heap_bytes(&self) -> usize {
        let read = |f: Option<&FileBytes>| match f {
            Some(FileBytes::Read(v)) => v.len(),
            _ => 0,
        };
        let positions = match &self.layout {
            Layout::Inline { positions } => positions.len() * std::mem::size_of::<usize>(),
            Layout::Split => 0,
        };
        256 + self.name.len()
            + read(Some(&self.index))
            + read(self.data.as_ref())
            + positions
            + self.len * 48
    }

    /// The unencoded store path of the index, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of revisions.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The last revision, or `NULL_REV` when empty.
    pub fn tip(&self) -> Rev {
        self.len as Rev - 1
    }

    pub fn is_generaldelta(&self) -> bool {
        self.header.generaldelta
    }

    fn check_rev(&self, rev: Rev) -> Result<usize> {
        if rev < 0 || rev as usize >= self.len {
            return Err(StoreError::RevisionOutOfRange {
                revlog: self.name.clone(),
                rev: rev as i64,
            });
        }
        Ok(rev as usize)
    }

    fn entry_pos(&self, r: usize) -> usize {
        match &self.layout {
            Layout::Split => r * ENTRY_SIZE,
            Layout::Inline { positions } => positions[r],
        }
    }

    /// Whether the index file on disk no longer holds, where this handle found its last
    /// entry, that entry's node: a strip truncated it (and may have appended other
    /// revisions since). Revisions appended after the open leave it as it was. One open
    /// and one read of 64 bytes; an index that cannot be read counts as rewritten.
    pub fn rewritten_on_disk(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let Some((pos, node)) = self.tip_at_open else {
            return false;
        };
        let mut bytes = [0u8; ENTRY_SIZE];
        match File::open(&self.index_path).and_then(|f| f.read_exact_at(&mut bytes, pos)) {
            Ok(()) => IndexEntry::parse(self.len - 1, &bytes).node != node,
            Err(_) => true,
        }
    }

    /// The decoded, checked index entry of `rev`.
    pub fn entry(&self, rev: Rev) -> Result<IndexEntry> {
        let r = self.check_rev(rev)?;
        let pos = self.entry_pos(r);
        let bytes = self
            .index
            .get(pos..pos + ENTRY_SIZE)
            .and_then(|b| <&[u8; ENTRY_SIZE]>::try_from(b).ok())
            .ok_or_else(|| {
                StoreError::corrupt_rev(&self.name, r as u32, "index entry truncated")
            })?;
        let entry = IndexEntry::parse(r, bytes);
        entry
            .validate(r)
            .map_err(|reason| StoreError::corrupt_rev(&self.name, r as u32, reason))?;
        Ok(entry)
    }

    /// The node of `rev`; `NULL_REV` gives the null node.
    pub fn node(&self, rev: Rev) -> Result<Node> {
        if rev == NULL_REV {
            return Ok(Node::NULL);
        }
        Ok(self.entry(rev)?.node)
    }

    /// The parent revisions of `rev`.
    pub fn parents(&self, rev: Rev) -> Result<[Rev; 2]> {
        let e = self.entry(rev)?;
        Ok([e.p1, e.p2])
    }

    /// Whether `a` is `b` or one of its ancestors (the null revision is everyone's).
    pub fn is_ancestor(&self, a: Rev, b: Rev) -> Result<bool> {
        if a == NULL_REV {
            return Ok(true);
        }
        let mut stack = vec![b];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(r) = stack.pop() {
            if r == a {
                return Ok(true);
            }
            if r < a || !seen.insert(r) {
                continue;
            }
            stack.extend(self.parents(r)?.into_iter().filter(|&p| p != NULL_REV));
        }
        Ok(false)
    }

    /// The changelog revision that introduced `rev`.
    pub fn linkrev(&self, rev: Rev) -> Result<Rev> {
        Ok(self.entry(rev)?.linkrev)
    }

    /// Length of the full raw text of `rev`, from the index alone (None when unknown).
    pub fn raw_len(&self, rev: Rev) -> Result<Option<usize>> {
        let e = self.entry(rev)?;
        Ok((e.raw_len >= 0).then_some(e.raw_len as usize))
    }

    fn nodemap(&self) -> &HashMap<Node, Rev> {
        self.nodemap.get_or_init(|| {
            let mut map = HashMap::with_capacity(self.len);
            for r in 0..self.len {
                if let Ok(e) = self.entry(r as Rev) {
                    map.entry(e.node).or_insert(r as Rev);
                }
            }
            map
        })
    }

    /// The revision with exactly this node, if any. The null node gives `NULL_REV`.
    ///
    /// The map is made once, but a mapped revlog sees its file as it is now: after a strip
    /// (hg strip, rebase, histedit truncate a revlog and append other revisions where the
    /// stripped ones were) a rev number of the map may hold another node, whose text
    /// would pass the node check of a read. The entry's node is checked: such a node is
    /// unknown here, never another revision's text.
    pub fn rev_of(&self, node: &Node) -> Option<Rev> {
        if node.is_null() {
            return Some(NULL_REV);
        }
        let rev = *self.nodemap().get(node)?;
        // An index read into memory is the map's own snapshot: nothing to check there.
        if !matches!(self.index, FileBytes::Mapped(_)) {
            return Some(rev);
        }
        match self.entry(rev) {
            Ok(e) if e.node == *node => Some(rev),
            _ => None,
        }
    }

    /// The revision whose node's hex form starts with `prefix` (lowercase hex digits).
    /// `Ok(None)` when none does; an error when several do.
    pub fn rev_of_hex_prefix(&self, prefix: &str) -> Result<Option<Rev>> {
        let lower = prefix.to_ascii_lowercase();
        let p = lower.as_bytes();
        if p.is_empty() || p.len() > 40 || !p.iter().all(u8::is_ascii_hexdigit) {
            return Ok(None);
        }
        if p.len() == 40 {
            return Ok(Node::from_hex(p).and_then(|n| self.rev_of(&n)));
        }
        let mut found = None;
        for r in 0..self.len as Rev {
            if self.entry(r)?.node.has_hex_prefix(p) {
                if found.is_some() {
                    return Err(StoreError::AmbiguousRevision(prefix.to_owned()));
                }
                found = Some(r);
            }
        }
        // hg also counts the virtual working-directory node ffff...ff as a candidate.
        if found.is_some() && p.iter().all(|&c| c == b'f') {
            return Err(StoreError::AmbiguousRevision(prefix.to_owned()));
        }
        if found.is_none() && Node::NULL.has_hex_prefix(p) {
            return Ok(Some(NULL_REV));
        }
        Ok(found)
    }

    /// The stored chunk of `rev`, still compressed.
    pub fn chunk(&self, rev: Rev) -> Result<&[u8]> {
        let e = self.entry(rev)?;
        let len = e.compressed_len as usize;
        let (bytes, start): (&[u8], u64) = match &self.layout {
            Layout::Inline { positions } => (
                &self.index,
                positions[rev as usize] as u64 + ENTRY_SIZE as u64,
            ),
            Layout::Split => match &self.data {
                Some(d) => (d, e.offset),
                None if len == 0 => return Ok(&[]),
                None => {
                    return Err(StoreError::corrupt_rev(
                        &self.name,
                        rev as u32,
                        format!("data file {} is missing", self.data_path.display()),
                    ))
                }
            },
        };
        usize::try_from(start)
            .ok()
            .and_then(|s| bytes.get(s..s.checked_add(len)?))
            .ok_or_else(|| {
                StoreError::corrupt_rev(
                    &self.name,
                    rev as u32,
                    format!(
                        "data truncated: chunk {start}+{len} beyond the {} bytes of the data file",
                        bytes.len()
                    ),
                )
            })
    }

    fn decompressed(&self, rev: Rev, hint: usize) -> Result<std::borrow::Cow<'_, [u8]>> {
        chunk::decompress(self.chunk(rev)?, hint)
            .map_err(|reason| StoreError::corrupt_rev(&self.name, rev as u32, reason))
    }

    /// hg reads the chunks of a delta chain as one span of its file: past the file's end,
    /// its "partial read" abort, with the span and what the file had of it.
    pub(super) fn check_span(&self, chain: &[Rev]) -> Result<()> {
        let (Some(&last), Some(&first)) = (chain.first(), chain.last()) else {
            return Ok(());
        };
        let (fe, le) = (self.entry(first)?, self.entry(last)?);
        let (mut start, mut end) = (fe.offset, le.offset + le.compressed_len as u64);
        let inline = matches!(self.layout, Layout::Inline { .. });
        let size = match (&self.data, inline) {
            (_, true) => {
                start += (first as u64 + 1) * ENTRY_SIZE as u64;
                end += (last as u64 + 1) * ENTRY_SIZE as u64;
                self.index.len() as u64
            }
            (Some(d), false) => d.len() as u64,
            (None, false) => return Ok(()),
        };
        if end <= size {
            return Ok(());
        }
        // Only now the file's name: this check runs on every read.
        let file = if inline {
            self.name.clone()
        } else {
            format!("{}.d", self.name.strip_suffix(".i").unwrap_or(&self.name))
        };
        Err(StoreError::PartialRead {
            file,
            expected: end - start,
            offset: start,
            got: size as i64 - start as i64,
        })
    }

    /// The revisions whose chunks rebuild `rev`, newest first, and the cached text to start
    /// from when the walk met one.
    fn delta_chain(&self, rev: Rev) -> Result<DeltaChain> {
        let mut chain = Vec::new();
        let mut cur = rev;
        loop {
            if cur != rev {
                if let Some(text) = self.cache.get((self.cache_id, cur)) {
                    return Ok((chain, Some(text)));
                }
            }
            let e = self.entry(cur)?;
            chain.push(cur);
            if e.base == cur {
                return Ok((chain, None));
            }
            if e.base == NULL_REV && self.header.generaldelta {
                return Ok((chain, Some(Arc::from(&[][..]))));
            }
            let next = if self.header.generaldelta {
                e.base
            } else {
                cur - 1
            };
            if next < 0 || next >= cur {
                return Err(StoreError::corrupt_rev(
                    &self.name,
                    cur as u32,
                    format!("bad delta base {}", e.base),
                ));
            }
            cur = next;
        }
    }

    /// This revlog remembers the texts it checked in `checked` ([`CheckedTexts`]).
    pub fn with_checked_texts(mut self, checked: Arc<dyn CheckedTexts>) -> Revlog {
        self.checked = Some(checked);
        self
    }

    /// The raw text of `rev` (for filelogs, with any metadata header), rebuilt from its delta
    /// chain, checked against its length and node, and cached.
    pub fn revision(&self, rev: Rev) -> Result<Arc<[u8]>> {
        self.reconstruct(rev, true)
    }

    /// Like [`Revlog::revision`], but the result is not kept in the cache: for texts read
    /// once (`revfs cat` of a whole tree) that would only push useful texts out.
    pub fn revision_uncached(&self, rev: Rev) -> Result<Arc<[u8]>> {
        self.reconstruct(rev, false)
    }

    /// The index entry of `rev`, refused when its text cannot be rebuilt here: a censored
    /// revision, or one stored elsewhere (narrow ellipsis, lfs).
    pub(super) fn rebuildable_entry(&self, rev: Rev) -> Result<IndexEntry> {
        let entry = self.entry(rev)?;
        if entry.flags & REVIDX_ISCENSORED != 0 {
            return Err(StoreError::corrupt_rev(
                &self.name,
                rev as u32,
                "censored node",
            ));
        }
        if entry.flags & (REVIDX_ELLIPSIS | REVIDX_EXTSTORED) != 0 {
            return Err(StoreError::corrupt_rev(
                &self.name,
                rev as u32,
                format!(
                    "unsupported revision flag {:#x} (narrow or lfs)",
                    entry.flags
                ),
            ));
        }
        Ok(entry)
    }

    fn reconstruct(&self, rev: Rev, keep: bool) -> Result<Arc<[u8]>> {
        if rev == NULL_REV {
            return Ok(Arc::from(&[][..]));
        }
        if let Some(text) = self.cache.get((self.cache_id, rev)) {
            return Ok(text);
        }
        let entry = self.rebuildable_entry(rev)?;
        let hint = entry.raw_len.max(0) as usize;
        let (chain, start) = self.delta_chain(rev)?;
        self.check_span(&chain)?;
        if let (None, &[only]) = (&start, &chain[..]) {
            // A text stored whole in one chunk (most files of a young repository):
            // decoded straight into the buffer it is shared in.
            let text = chunk::decompress_shared(self.chunk(only)?, hint)
                .map_err(|reason| StoreError::corrupt_rev(&self.name, only as u32, reason))?;
            return self.checked_text(rev, &entry, &chain, &start, text, keep);
        }
        let mut revs = chain.iter().rev();
        let base: std::borrow::Cow<'_, [u8]> = match start {
            Some(ref t) => std::borrow::Cow::Borrowed(&t[..]),
            None => match revs.next() {
                Some(&base) => self.decompressed(base, hint)?,
                None => std::borrow::Cow::Borrowed(&[][..]),
            },
        };
        let revs: Vec<Rev> = revs.copied().collect();
        let deltas = revs
            .iter()
            .map(|&r| self.decompressed(r, 0))
            .collect::<Result<Vec<_>>>()?;
        // A full text stored whole (most files of a young repository) is not patched: no
        // copy of it before the one into the shared text below.
        let text: std::borrow::Cow<'_, [u8]> = if deltas.is_empty() {
            base
        } else {
            std::borrow::Cow::Owned(mpatch::apply_chain(&base, &deltas).map_err(|(i, e)| {
                StoreError::corrupt_rev(&self.name, revs[i] as u32, e.to_string())
            })?)
        };
        let text: Arc<[u8]> = Arc::from(&*text);
        self.checked_text(rev, &entry, &chain, &start, text, keep)
    }

    /// An error unless a rebuilt text of `len` bytes has the length `rev`'s entry gives (when
    /// it gives one).
    fn check_len(&self, rev: Rev, entry: &IndexEntry, len: u64) -> Result<()> {
        if entry.raw_len >= 0 && len != entry.raw_len as u64 {
            return Err(StoreError::corrupt_rev(
                &self.name,
                rev as u32,
                format!("unpacked size is {len}, {} expected", entry.raw_len),
            ));
        }
        Ok(())
    }

    /// An error unless the rebuilt text's hash `got` is `rev`'s node.
    fn check_node(&self, rev: Rev, entry: &IndexEntry, got: Node) -> Result<()> {
        if got != entry.node {
            return Err(StoreError::IntegrityCheckFailed {
                revlog: self.name.clone(),
                rev: rev as u32,
            });
        }
        Ok(())
    }

    /// Checks the rebuilt `text` of `rev` (its size, its hash unless this very chunk was
    /// checked before), keeps it in the cache when `keep`, and returns it.
    fn checked_text(
        &self,
        rev: Rev,
        entry: &IndexEntry,
        chain: &[Rev],
        start: &Option<Arc<[u8]>>,
        text: Arc<[u8]>,
        keep: bool,
    ) -> Result<Arc<[u8]>> {
        self.check_len(rev, entry, text.len() as u64)?;
        // A whole text from one chunk: checked before, from this very chunk and with these
        // parents (which the node hashes too)?
        let one_chunk = match (&self.checked, start, chain) {
            (Some(c), None, &[only]) => {
                let mut crc = crc32fast::Hasher::new();
                crc.update(&self.node(entry.p1)?.0);
                crc.update(&self.node(entry.p2)?.0);
                crc.update(self.chunk(only)?);
                Some((c, crc.finalize()))
            }
            _ => None,
        };
        if !one_chunk.is_some_and(|(c, crc)| c.checked(&entry.node, crc)) {
            let (p1, p2) = (self.node(entry.p1)?, self.node(entry.p2)?);
            self.check_node(rev, entry, Node::hash_revision(&p1, &p2, &text))?;
            if let Some((c, crc)) = one_chunk {
                c.remember(&entry.node, crc, &text);
            }
        }
        if keep {
            self.cache.insert((self.cache_id, rev), text.clone());
        }
        Ok(text)
    }

    /// The first `n` bytes of the raw text of `rev` (fewer if the text is shorter), found
    /// without rebuilding the whole text when the deltas leave the start of the text alone.
    /// Falls back to the full text when the start is rewritten. Not hash-checked.
    pub fn text_prefix(&self, rev: Rev, n: usize) -> Result<Vec<u8>> {
        if let Some(t) = self.cache.get((self.cache_id, rev)) {
            return Ok(t[..n.min(t.len())].to_vec());
        }
        let (chain, start) = self.delta_chain(rev)?;
        // Walk from the newest delta down: as long as each delta's first hunk starts at or
        // after `n`, the first `n` bytes come unchanged from the older text.
        let (&oldest, newer) = match chain.split_last() {
            Some(x) => x,
            None => return Ok(Vec::new()),
        };
        let peek = 12 + n;
        for &r in newer.iter().chain(start.is_some().then_some(&oldest)) {
            let head = chunk::decompress_prefix(self.chunk(r)?, peek)
                .map_err(|reason| StoreError::corrupt_rev(&self.name, r as u32, reason))?;
            match mpatch::Hunks::new(&head).next() {
                None => continue,
                Some(Ok(h)) if h.start >= n => continue,
                Some(Err(mpatch::PatchError::Truncated)) if head.len() >= 12 => {
                    let start = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
                    if start >= n {
                        continue;
                    }
                    let text = self.revision(rev)?;
                    return Ok(text[..n.min(text.len())].to_vec());
                }
                _ => {
                    let text = self.revision(rev)?;
                    return Ok(text[..n.min(text.len())].to_vec());
                }
            }
        }
        match start {
            Some(t) => Ok(t[..n.min(t.len())].to_vec()),
            None => chunk::decompress_prefix(self.chunk(oldest)?, n)
                .map_err(|reason| StoreError::corrupt_rev(&self.name, oldest as u32, reason)),
        }
    }
}
