//! Revlog v1 writer: appends revisions to one revlog (`.i`, and `.d` once split) in hg
//! 6.3.2's exact on-disk format.
//!
//! This module owns everything below "here is a raw text and its parents": node hashing and
//! node reuse, the delta policy (generaldelta against p1, or the previous revision for legacy
//! revlogs; line-aligned deltas for manifests), chunk compression (zstd level 3 or zlib, with
//! hg's size thresholds and the `u`/`\0` raw markers), index entry encoding, the header of a
//! new revlog, and the inline-to-split conversion at 131072 data bytes.
//!
//! It does not own locking, the transaction journal, the fncache or phaseroots: the caller
//! records [`RevlogWriter::original_sizes`] in the journal before calling
//! [`RevlogWriter::finish`], and adds the `.d` to the fncache when `finish` reports that it
//! created one.
//!
//! Revisions are buffered in memory by [`RevlogWriter::add`] and only written by `finish`:
//! data-file bytes first, index entries last, so a reader never sees an entry whose chunk is
//! missing. The texts of the appended revisions are kept in memory until `finish` (they are
//! the delta bases of later revisions).

use crate::error::{Result, StoreError};
use crate::node::{Node, Rev, NULL_REV};
use crate::revlog::{Revlog, TextCache};
use crate::text::SharedText;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const ENTRY_SIZE: usize = 64;
const VERSION_V1: u32 = 1;
const FLAG_INLINE_DATA: u32 = 1 << 16;
const FLAG_GENERALDELTA: u32 = 1 << 17;
/// hg's `_maxinline`: an inline revlog whose data reaches this size is split.
const MAX_INLINE: u64 = 131072;
/// hg's maximum delta chain length with sparse-revlog.
const MAX_CHAIN_LEN: u32 = 1000;
/// hg's `LIMIT_DELTA2TEXT`: a chain may read at most this many times the text size.
const LIMIT_DELTA2TEXT: u64 = 2;
/// hg's zstd compression level.
const ZSTD_LEVEL: i32 = 3;

/// The compression engine for new chunks (`revlog-compression-zstd` or the zlib default;
/// `exp-compression-none`: raw chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Zlib,
    Zstd,
    None,
}

impl Compression {
    /// Compresses `data` as hg's engine does: `None` when the input is below the engine's
    /// threshold or the output is not strictly smaller.
    fn compress(self, data: &[u8]) -> Result<Option<Vec<u8>>> {
        let out = match self {
            Compression::None => return Ok(None),
            Compression::Zlib => {
                if data.len() < 44 {
                    return Ok(None);
                }
                let mut z = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(data.len() / 2),
                    flate2::Compression::new(6),
                );
                z.write_all(data)
                    .and_then(|_| z.finish())
                    .map_err(|e| StoreError::Other(format!("zlib compression failed: {e}")))?
            }
            Compression::Zstd => {
                if data.len() < 50 {
                    return Ok(None);
                }
                // The bulk API writes the content size in the frame header, as hg does.
                zstd::bulk::compress(data, ZSTD_LEVEL)
                    .map_err(|e| StoreError::Other(format!("zstd compression failed: {e}")))?
            }
        };
        Ok((out.len() < data.len()).then_some(out))
    }

    /// Encodes one chunk like `revlog.compress`: empty stays empty, compressed if that is
    /// strictly smaller, else raw with a `u` prefix unless the data starts with NUL.
    fn chunk(self, data: &[u8]) -> Result<Vec<u8>> {
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(c) = self.compress(data)? {
            return Ok(c);
        }
        if data[0] == 0 {
            return Ok(data.to_vec());
        }
        let mut out = Vec::with_capacity(data.len() + 1);
        out.push(b'u');
        out.extend_from_slice(data);
        Ok(out)
    }
}

/// What the writer needs to know about every revision, existing or new.
#[derive(Debug, Clone, Copy)]
struct EntryInfo {
    /// Offset in data-file space.
    offset: u64,
    clen: u32,
    base: Rev,
    node: Node,
}

/// One buffered new revision.
struct Pending {
    entry: [u8; ENTRY_SIZE],
    chunk: Vec<u8>,
}

/// Appends revisions to one revlog. See the module documentation.
pub struct RevlogWriter {
    index_path: PathBuf,
    data_path: PathBuf,
    name: String,
    inline: bool,
    generaldelta: bool,
    compression: Compression,
    store_deltas: bool,
    /// A reader over the revisions that existed when opened (their texts are delta bases).
    existing: Option<Revlog>,
    existing_len: usize,
    entries: Vec<EntryInfo>,
    /// Memoised (chain length in deltas, summed chunk lengths incl. the full text) per rev.
    chain_info: Vec<Option<(u32, u64)>>,
    nodemap: HashMap<Node, Rev>,
    /// Raw texts of the revisions appended by this writer, by rev - existing_len.
    new_texts: Vec<Arc<[u8]>>,
    /// A text of an existing revision the caller already had (see [`RevlogWriter::known_text`]).
    known: Option<(Rev, SharedText)>,
    pending: Vec<Pending>,
    original_sizes: (u64, u64),
}

fn file_size(path: &Path) -> Result<u64> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

impl RevlogWriter {
    /// Opens the revlog at `index_path`/`data_path` for appending. A missing or empty index
    /// is a new revlog, created inline with the generaldelta flag when `generaldelta` is set
    /// (hg's header for new filelogs and manifests; pass `false` for the changelog). For an
    /// existing revlog the header on disk is authoritative and `generaldelta` is ignored.
    pub fn open(
        index_path: &Path,
        data_path: &Path,
        generaldelta: bool,
        compression: Compression,
    ) -> Result<RevlogWriter> {
        let original_sizes = (file_size(index_path)?, file_size(data_path)?);
        let name = index_path.display().to_string();
        let mut writer = RevlogWriter {
            index_path: index_path.to_owned(),
            data_path: data_path.to_owned(),
            name: name.clone(),
            inline: true,
            generaldelta,
            compression,
            store_deltas: true,
            existing: None,
            existing_len: 0,
            entries: Vec::new(),
            chain_info: Vec::new(),
            nodemap: HashMap::new(),
            new_texts: Vec::new(),
            known: None,
            pending: Vec::new(),
            original_sizes,
        };
        if original_sizes.0 == 0 {
            return Ok(writer);
        }
        let mut first = [0u8; 4];
        {
            let mut f = File::open(index_path).map_err(|e| StoreError::io(index_path, e))?;
            std::io::Read::read_exact(&mut f, &mut first)
                .map_err(|e| StoreError::io(index_path, e))?;
        }
        let header = u32::from_be_bytes(first);
        if header & 0xFFFF != VERSION_V1
            || header & !(0xFFFF | FLAG_INLINE_DATA | FLAG_GENERALDELTA) != 0
        {
            return Err(StoreError::CorruptIndex {
                revlog: name,
                reason: format!("cannot append to a revlog with header {header:#010x}"),
            });
        }
        writer.inline = header & FLAG_INLINE_DATA != 0;
        writer.generaldelta = header & FLAG_GENERALDELTA != 0;
        // A private cache for the base texts of deltas against existing revisions.
        let revlog = Revlog::open(
            index_path,
            data_path,
            name.clone(),
            TextCache::new(8 << 20),
            0,
        )?;
        for r in 0..revlog.len() as Rev {
            let e = revlog.entry(r)?;
            writer.entries.push(EntryInfo {
                offset: e.offset,
                clen: e.compressed_len,
                base: e.base,
                node: e.node,
            });
            writer.nodemap.entry(e.node).or_insert(r);
        }
        writer.existing_len = revlog.len();
        writer.chain_info = vec![None; revlog.len()];
        // Refuse to append to a split revlog whose data file does not end where the index
        // says: the new offsets would be wrong.
        if !writer.inline {
            let end = writer.data_end();
            if end != original_sizes.1 {
                return Err(StoreError::CorruptIndex {
                    revlog: name,
                    reason: format!(
                        "data file has {} bytes, index expects {end}",
                        original_sizes.1
                    ),
                });
            }
        }
        writer.existing = Some(revlog);
        Ok(writer)
    }

    /// Whether deltas may be stored (default true). hg never stores changelog deltas
    /// (`plain-cl-delta`): call `store_deltas(false)` for the changelog.
    pub fn store_deltas(mut self, store: bool) -> Self {
        self.store_deltas = store;
        self
    }

    /// Number of revisions, including the ones appended and not yet flushed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The node of `rev` (`NULL_REV` gives the null node).
    pub fn node(&self, rev: Rev) -> Result<Node> {
        if rev == NULL_REV {
            return Ok(Node::NULL);
        }
        self.entries
            .get(usize::try_from(rev).map_err(|_| self.out_of_range(rev))?)
            .map(|e| e.node)
            .ok_or_else(|| self.out_of_range(rev))
    }

    /// The revision with this node, if any.
    pub fn rev_of(&self, node: &Node) -> Option<Rev> {
        if node.is_null() {
            return Some(NULL_REV);
        }
        self.nodemap.get(node).copied()
    }

    fn out_of_range(&self, rev: Rev) -> StoreError {
        StoreError::RevisionOutOfRange {
            revlog: self.name.clone(),
            rev: rev as i64,
        }
    }

    /// End of the data (in data-file space) after the last revision.
    fn data_end(&self) -> u64 {
        self.entries
            .last()
            .map_or(0, |e| e.offset + u64::from(e.clen))
    }

    /// The raw text of `rev` (existing or appended by this writer).
    pub fn text(&self, rev: Rev) -> Result<SharedText> {
        if rev == NULL_REV {
            return Ok(SharedText::Heap(Arc::from(&[][..])));
        }
        let r = usize::try_from(rev).map_err(|_| self.out_of_range(rev))?;
        if r >= self.existing_len {
            return self
                .new_texts
                .get(r - self.existing_len)
                .map(|t| SharedText::Heap(t.clone()))
                .ok_or_else(|| self.out_of_range(rev));
        }
        if let Some((k, text)) = &self.known {
            if *k == rev {
                return Ok(text.clone());
            }
        }
        match &self.existing {
            Some(revlog) => revlog.revision(rev).map(SharedText::Heap),
            None => Err(self.out_of_range(rev)),
        }
    }

    /// Tells the writer the text of existing revision `rev`, which the caller has already
    /// read (a commit has its first parent's manifest), so that a delta against it does not
    /// read it again. The text is trusted to be that revision's.
    pub fn known_text(&mut self, rev: Rev, text: SharedText) {
        self.known = Some((rev, text));
    }

    /// The revision whose text `rev`'s stored delta applies to, or None for a full text.
    fn delta_parent(&self, rev: usize) -> Option<usize> {
        let base = self.entries[rev].base;
        if base == rev as Rev || base < 0 || rev == 0 {
            return None;
        }
        if self.generaldelta {
            Some(base as usize)
        } else {
            Some(rev - 1)
        }
    }

    /// (number of deltas, summed chunk lengths including the full text) of `rev`'s chain.
    fn chain(&mut self, rev: usize) -> (u32, u64) {
        let mut stack = Vec::new();
        let mut cur = rev;
        let (mut len, mut sum) = loop {
            if let Some(info) = self.chain_info[cur] {
                break info;
            }
            match self.delta_parent(cur) {
                Some(p) if p < cur => {
                    stack.push(cur);
                    cur = p;
                }
                _ => {
                    let info = (0, u64::from(self.entries[cur].clen));
                    self.chain_info[cur] = Some(info);
                    break info;
                }
            }
        };
        // Every stacked rev is a delta on the one below it.
        while let Some(r) = stack.pop() {
            len += 1;
            sum += u64::from(self.entries[r].clen);
            self.chain_info[r] = Some((len, sum));
        }
        (len, sum)
    }

    /// Appends a revision with raw text `text` (for filelogs, including any metadata
    /// header), parents `p1`/`p2` (revision numbers or `NULL_REV`) and `linkrev`. Returns its
    /// revision and node. If a revision with the same node exists, it is returned and nothing
    /// is appended (hg's node reuse). `line_deltas` must be true for manifests: deltas then
    /// replace whole lines with whole lines.
    pub fn add(
        &mut self,
        text: &[u8],
        p1: Rev,
        p2: Rev,
        linkrev: Rev,
        line_deltas: bool,
    ) -> Result<(Rev, Node)> {
        self.add_shared(Arc::from(text), p1, p2, linkrev, line_deltas)
    }

    /// [`RevlogWriter::add`] of a text the caller shares (a manifest it keeps): the writer
    /// keeps the same bytes for later deltas instead of a copy.
    pub fn add_shared(
        &mut self,
        text_arc: Arc<[u8]>,
        p1: Rev,
        p2: Rev,
        linkrev: Rev,
        line_deltas: bool,
    ) -> Result<(Rev, Node)> {
        let text: &[u8] = &text_arc;
        let rev = self.entries.len();
        if rev >= i32::MAX as usize - 1 {
            return Err(StoreError::Other(format!(
                "{}: too many revisions",
                self.name
            )));
        }
        for p in [p1, p2] {
            if p < NULL_REV || p as i64 >= rev as i64 {
                return Err(StoreError::Other(format!(
                    "{}: parent {p} out of range for new revision {rev}",
                    self.name
                )));
            }
        }
        if linkrev < 0 {
            return Err(StoreError::Other(format!(
                "{}: bad linkrev {linkrev}",
                self.name
            )));
        }
        if text.len() > i32::MAX as usize {
            return Err(StoreError::Other(format!(
                "{}: text of {} bytes is too large for a revlog v1",
                self.name,
                text.len()
            )));
        }
        let node = Node::hash_revision(&self.node(p1)?, &self.node(p2)?, text);
        if let Some(&existing) = self.nodemap.get(&node) {
            return Ok((existing, node));
        }
        if node.0 == [0xff; 20] || node.is_null() {
            return Err(StoreError::Other(format!(
                "{}: revision hashes to a reserved node id {node}",
                self.name
            )));
        }

        let (chunk, base) = match self.delta_candidate(rev, text, p1, line_deltas)? {
            Some((chunk, base)) => (chunk, base),
            None => (self.compression.chunk(text)?, rev as Rev),
        };
        let offset = self.data_end();
        let clen = u32::try_from(chunk.len())
            .map_err(|_| StoreError::Other(format!("{}: chunk too large", self.name)))?;

        let mut entry = [0u8; ENTRY_SIZE];
        let offset_flags: u64 = offset << 16; // revision flags: always 0
        entry[0..8].copy_from_slice(&offset_flags.to_be_bytes());
        if rev == 0 {
            entry[0..4].copy_from_slice(&self.header().to_be_bytes());
        }
        entry[8..12].copy_from_slice(&clen.to_be_bytes());
        entry[12..16].copy_from_slice(&(text.len() as i32).to_be_bytes());
        entry[16..20].copy_from_slice(&base.to_be_bytes());
        entry[20..24].copy_from_slice(&linkrev.to_be_bytes());
        entry[24..28].copy_from_slice(&p1.to_be_bytes());
        entry[28..32].copy_from_slice(&p2.to_be_bytes());
        entry[32..52].copy_from_slice(&node.0);

        self.entries.push(EntryInfo {
            offset,
            clen,
            base,
            node,
        });
        self.chain_info.push(None);
        self.nodemap.insert(node, rev as Rev);
        self.new_texts.push(text_arc.clone());
        self.pending.push(Pending { entry, chunk });
        Ok((rev as Rev, node))
    }

    /// The header word of this revlog (stored in the first 4 bytes of entry 0).
    fn header(&self) -> u32 {
        let mut h = VERSION_V1;
        if self.inline {
            h |= FLAG_INLINE_DATA;
        }
        if self.generaldelta {
            h |= FLAG_GENERALDELTA;
        }
        h
    }

    /// A compressed delta chunk and its base field, if hg's limits accept a delta.
    fn delta_candidate(
        &mut self,
        rev: usize,
        text: &[u8],
        p1: Rev,
        line_deltas: bool,
    ) -> Result<Option<(Vec<u8>, Rev)>> {
        if !self.store_deltas || text.is_empty() || rev == 0 {
            return Ok(None);
        }
        let delta_from = if self.generaldelta {
            if p1 == NULL_REV {
                return Ok(None);
            }
            p1 as usize
        } else {
            rev - 1
        };
        let (chain_len, chain_sum) = self.chain(delta_from);
        if chain_len + 1 > MAX_CHAIN_LEN {
            return Ok(None);
        }
        let base_text = self.text(delta_from as Rev)?;
        let delta = if line_deltas {
            line_delta(&base_text, text)
        } else {
            byte_delta(&base_text, text)
        };
        let chunk = self.compression.chunk(&delta)?;
        let textlen = text.len() as u64;
        if chunk.len() as u64 > textlen
            || chain_sum + chunk.len() as u64 > LIMIT_DELTA2TEXT * textlen
        {
            return Ok(None);
        }
        let base = if self.generaldelta {
            delta_from as Rev
        } else {
            // Legacy layout: the base field holds the chain base.
            let mut b = delta_from;
            while let Some(p) = self.delta_parent(b) {
                b = p;
            }
            b as Rev
        };
        Ok(Some((chunk, base)))
    }

    /// The sizes the `.i` and `.d` files had when the writer was opened (0 for missing
    /// files), for the transaction journal.
    pub fn original_sizes(&self) -> (u64, u64) {
        self.original_sizes
    }

    /// Writes the buffered revisions: data-file bytes before index entries. An inline revlog
    /// whose data reaches 131072 bytes is split into `.i` (entries only, inline flag cleared,
    /// written to a temporary file and renamed over the old index) and `.d`, as hg does for
    /// filelogs and manifests. Returns whether a `.d` was created by the split (the caller
    /// must then add it to the fncache and journal it with size 0).
    pub fn finish(self) -> Result<bool> {
        if self.pending.is_empty() {
            return Ok(false);
        }
        let io_i = |e| StoreError::io(&self.index_path, e);
        let io_d = |e| StoreError::io(&self.data_path, e);
        if !self.inline {
            let mut data = Vec::new();
            let mut index = Vec::with_capacity(self.pending.len() * ENTRY_SIZE);
            for p in &self.pending {
                data.extend_from_slice(&p.chunk);
                index.extend_from_slice(&p.entry);
            }
            if !data.is_empty() {
                let mut d = open_append(&self.data_path).map_err(io_d)?;
                d.write_all(&data).map_err(io_d)?;
                d.flush().map_err(io_d)?;
            }
            let mut i = open_append(&self.index_path).map_err(io_i)?;
            i.write_all(&index).map_err(io_i)?;
            return Ok(false);
        }
        if self.data_end() < MAX_INLINE {
            let mut buf = Vec::new();
            for p in &self.pending {
                buf.extend_from_slice(&p.entry);
                buf.extend_from_slice(&p.chunk);
            }
            let mut i = open_append(&self.index_path).map_err(io_i)?;
            i.write_all(&buf).map_err(io_i)?;
            return Ok(false);
        }
        // Split: every chunk to .d, every entry to a new .i without the inline flag.
        let old = if self.existing_len > 0 {
            std::fs::read(&self.index_path).map_err(io_i)?
        } else {
            Vec::new()
        };
        let mut data = Vec::with_capacity(self.data_end() as usize);
        let mut index = Vec::with_capacity(self.entries.len() * ENTRY_SIZE);
        let mut pos = 0usize;
        for r in 0..self.existing_len {
            let clen = self.entries[r].clen as usize;
            let (Some(entry), Some(chunk)) = (
                old.get(pos..pos + ENTRY_SIZE),
                old.get(pos + ENTRY_SIZE..pos + ENTRY_SIZE + clen),
            ) else {
                return Err(StoreError::CorruptIndex {
                    revlog: self.name.clone(),
                    reason: format!("inline index changed on disk while writing (rev {r})"),
                });
            };
            index.extend_from_slice(entry);
            data.extend_from_slice(chunk);
            pos += ENTRY_SIZE + clen;
        }
        for p in &self.pending {
            index.extend_from_slice(&p.entry);
            data.extend_from_slice(&p.chunk);
        }
        let header = (self.header() & !FLAG_INLINE_DATA).to_be_bytes();
        if let Some(h) = index.get_mut(0..4) {
            h.copy_from_slice(&header);
        }
        let mut d = File::create(&self.data_path).map_err(io_d)?;
        d.write_all(&data).map_err(io_d)?;
        d.sync_all().map_err(io_d)?;
        let mut tmp_name = self.index_path.as_os_str().to_owned();
        tmp_name.push(format!(".revfs-split-{}", std::process::id()));
        let tmp = PathBuf::from(tmp_name);
        let io_t = |e| StoreError::io(&tmp, e);
        let mut t = File::create(&tmp).map_err(io_t)?;
        t.write_all(&index).map_err(io_t)?;
        t.sync_all().map_err(io_t)?;
        drop(t);
        std::fs::rename(&tmp, &self.index_path).map_err(io_i)?;
        Ok(true)
    }
}

/// Opens `path` for appending. A file with other hard links (a local `hg clone` shares its
/// store files with the source) is first replaced by a private copy, as hg does, so that
/// appending here never changes another repository.
fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.nlink() > 1 {
            let mut tmp_name = path.as_os_str().to_owned();
            tmp_name.push(format!(".revfs-unshare-{}", std::process::id()));
            let tmp = PathBuf::from(tmp_name);
            std::fs::copy(path, &tmp)?;
            File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, path)?;
        }
    }
    OpenOptions::new().create(true).append(true).open(path)
}

/// Appends one mpatch hunk replacing `old[start..end]` with `data`.
fn push_hunk(out: &mut Vec<u8>, start: usize, end: usize, data: &[u8]) {
    out.extend_from_slice(&(start as i32).to_be_bytes());
    out.extend_from_slice(&(end as i32).to_be_bytes());
    out.extend_from_slice(&(data.len() as i32).to_be_bytes());
    out.extend_from_slice(data);
}

/// A byte-level delta: one hunk between the common prefix and the common suffix.
/// Valid for filelogs and the changelog, not for manifests.
fn byte_delta(old: &[u8], new: &[u8]) -> Vec<u8> {
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take(max_suffix)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = Vec::new();
    let (oe, ne) = (old.len() - suffix, new.len() - suffix);
    if prefix == oe && prefix == ne {
        return out;
    }
    push_hunk(&mut out, prefix, oe, &new[prefix..ne]);
    out
}

/// A line-aligned delta: every hunk replaces whole old lines with whole new lines.
///
/// The two texts are walked as a merge of two sorted sequences of lines: runs of identical
/// lines are skipped with block comparisons (a manifest changed in a few places costs little
/// more than one `memcmp` of its text), and where lines differ the smaller one is deleted
/// or inserted. Any such walk is a valid edit script; for sorted texts with unique lines
/// (flat manifests) it is minimal, so the inserted lines are exactly the new or changed
/// entries, sorted, as `manifestctx.readdelta` expects.
fn line_delta(old: &[u8], new: &[u8]) -> Vec<u8> {
    let line_end = |t: &[u8], from: usize| {
        t[from..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(t.len(), |p| from + p + 1)
    };
    let mut out = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    // The open hunk: where it starts in the old and the new text.
    let mut open: Option<(usize, usize)> = None;
    loop {
        // Skip the identical whole lines ahead.
        let common = crate::manifest::common_prefix_len(&old[i..], &new[j..]);
        let skip = old[i..i + common]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |p| p + 1);
        if skip > 0 {
            if let Some((so, sn)) = open.take() {
                push_hunk(&mut out, so, i, &new[sn..j]);
            }
            i += skip;
            j += skip;
        }
        if i >= old.len() && j >= new.len() {
            break;
        }
        if open.is_none() {
            open = Some((i, j));
        }
        let (oe, ne) = (line_end(old, i), line_end(new, j));
        if j >= new.len() || (i < old.len() && old[i..oe] < new[j..ne]) {
            i = oe;
        } else {
            j = ne;
        }
    }
    if let Some((so, sn)) = open {
        push_hunk(&mut out, so, i, &new[sn..j]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpatch;

    fn apply(old: &[u8], delta: &[u8]) -> Vec<u8> {
        mpatch::apply(old, delta, 0).unwrap()
    }

    #[test]
    fn byte_and_line_deltas_apply() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b"", b"abc"),
            (b"abc", b""),
            (b"aaaa", b"aa"),
            (b"aa", b"aaaa"),
            (b"a\nb\nc\n", b"a\nB\nc\n"),
            (b"a\nb\nc", b"a\nb\nc\n"),
            (b"x\0h1\ny\0h2\n", b"w\0h0\nx\0h1\ny\0h3\nz\0h4\n"),
            (b"c\nb\na\n", b"a\nb\nc\n"),
            (b"\n\n\n", b"\n\n"),
        ];
        for (old, new) in cases {
            assert_eq!(apply(old, &byte_delta(old, new)), *new);
            let ld = line_delta(old, new);
            assert_eq!(apply(old, &ld), *new, "{old:?} -> {new:?}");
            // Every hunk is line aligned and inserts whole lines.
            for h in mpatch::Hunks::new(&ld) {
                let h = h.unwrap();
                assert!(h.start == 0 || old[h.start - 1] == b'\n');
                assert!(h.end == 0 || h.end == old.len() || old[h.end - 1] == b'\n');
                assert!(h.data.is_empty() || h.data.ends_with(b"\n") || new.ends_with(h.data));
            }
        }
        // Sorted manifest-like texts: inserted lines are exactly the changed ones.
        let old = b"a\0h1\nb\0h2\nc\0h3\nd\0h4\n";
        let new = b"a\0h1\nb\0h9\nc\0h3\nd\0h8\ne\0h5\n";
        let ins: Vec<u8> = mpatch::Hunks::new(&line_delta(old, new))
            .flat_map(|h| h.unwrap().data.to_vec())
            .collect();
        assert_eq!(ins, b"b\0h9\nd\0h8\ne\0h5\n");
    }

    #[test]
    fn chunks_follow_hg_rules() {
        for c in [Compression::Zlib, Compression::Zstd] {
            assert_eq!(c.chunk(b"").unwrap(), b"");
            assert_eq!(c.chunk(b"abc").unwrap(), b"uabc");
            assert_eq!(c.chunk(b"\0abc").unwrap(), b"\0abc");
        }
        let text = vec![b'a'; 100];
        assert_eq!(Compression::Zlib.chunk(&text).unwrap()[0], b'x');
        assert_eq!(Compression::Zstd.chunk(&text).unwrap()[0], b'(');
        // 44..50 bytes: zlib compresses, zstd does not even try.
        let text = vec![b'a'; 46];
        assert_eq!(Compression::Zlib.chunk(&text).unwrap()[0], b'x');
        assert_eq!(Compression::Zstd.chunk(&text).unwrap()[0], b'u');
        let zs = Compression::Zstd.chunk(&[b'q'; 1000]).unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&zs).ok().flatten(),
            Some(1000)
        );
    }

    /// A small deterministic generator (xorshift), so the tests need no extra crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
        fn hex_lines(&mut self, n: usize) -> Vec<u8> {
            let mut out = Vec::new();
            for _ in 0..n {
                out.extend_from_slice(
                    format!("{:016x} {:x}\n", self.next(), self.next()).as_bytes(),
                );
            }
            out
        }
    }

    fn open_reader(dir: &Path) -> Revlog {
        Revlog::open(
            &dir.join("f.i"),
            &dir.join("f.d"),
            "f.i".into(),
            TextCache::new(1 << 20),
            0,
        )
        .unwrap()
    }

    /// The text of revision `r` of the round-trip revlog: a growing file with edits,
    /// binary blobs, empty texts and `\1\n`-prefixed texts.
    fn varied_text(rng: &mut Rng, r: usize, growing: &mut Vec<u8>) -> Vec<u8> {
        match r % 10 {
            3 => Vec::new(),
            5 => {
                let n = rng.below(3000) as usize;
                rng.bytes(n)
            }
            7 => {
                let mut t = b"\x01\n".to_vec();
                let n = rng.below(5) as usize;
                t.extend_from_slice(&rng.hex_lines(n));
                t
            }
            _ => {
                // Grow by ~1.2 KB and rewrite a line somewhere in the middle.
                let more = rng.hex_lines(40);
                growing.extend_from_slice(&more);
                if growing.len() > 100 {
                    let at = rng.below(growing.len() as u64 - 50) as usize;
                    growing[at..at + 8].copy_from_slice(b"EDITED!\n");
                }
                growing.clone()
            }
        }
    }

    #[test]
    fn round_trip_with_every_compression_and_delta_mode() {
        for compression in [Compression::Zlib, Compression::Zstd] {
            for (generaldelta, store_deltas) in [(true, true), (false, true), (false, false)] {
                for line_deltas in [false, true] {
                    round_trip(compression, generaldelta, store_deltas, line_deltas);
                }
            }
        }
    }

    fn round_trip(compression: Compression, gd: bool, store_deltas: bool, line_deltas: bool) {
        let what = format!("{compression:?} gd={gd} deltas={store_deltas} lines={line_deltas}");
        let dir = tempfile::tempdir().unwrap();
        let (ip, dp) = (dir.path().join("f.i"), dir.path().join("f.d"));
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut growing = Vec::new();
        let mut texts: Vec<Vec<u8>> = Vec::new();
        let mut parents: Vec<(Rev, Rev)> = Vec::new();
        let mut splits = 0;
        let mut expected_sizes = (0u64, 0u64);
        // Six sessions of 50 revisions: appends to a new, an inline and a split revlog.
        for _session in 0..6 {
            let mut w = RevlogWriter::open(&ip, &dp, gd, compression)
                .unwrap()
                .store_deltas(store_deltas);
            assert_eq!(w.original_sizes(), expected_sizes, "{what}");
            assert_eq!(w.len(), texts.len());
            for k in 0..50 {
                let r = texts.len();
                let text = varied_text(&mut rng, r, &mut growing);
                let p1 = match rng.below(8) {
                    0 => NULL_REV,
                    1 if r > 0 => rng.below(r as u64) as Rev,
                    _ => r as Rev - 1,
                };
                let p2 = if r > 2 && rng.below(6) == 0 {
                    rng.below(r as u64 - 1) as Rev
                } else {
                    NULL_REV
                };
                let (rev, node) = w.add(&text, p1, p2, (r * 2) as Rev, line_deltas).unwrap();
                if (rev as usize) < r {
                    // Node reuse of an identical earlier revision (e.g. two empty texts).
                    assert_eq!(texts[rev as usize], text);
                    continue;
                }
                assert_eq!(rev as usize, r, "{what}");
                assert_eq!(w.node(rev).unwrap(), node);
                texts.push(text.clone());
                parents.push((p1, p2));
                if k == 10 {
                    // Node reuse: the same text and parents give the same revision.
                    assert_eq!(w.add(&text, p1, p2, 999, line_deltas).unwrap(), (rev, node));
                }
            }
            let split = w.finish().unwrap();
            splits += split as usize;
            let i_len = std::fs::metadata(&ip).unwrap().len();
            let d_len = std::fs::metadata(&dp).map(|m| m.len()).unwrap_or(0);
            expected_sizes = (i_len, d_len);
        }
        assert_eq!(splits, 1, "{what}: the inline revlog splits exactly once");
        assert!(growing.len() > 200_000, "{}", growing.len());
        let head = std::fs::read(&ip).unwrap();
        let want_header: &[u8] = if gd { &[0, 2, 0, 1] } else { &[0, 0, 0, 1] };
        assert_eq!(&head[..4], want_header, "{what}");
        assert_eq!(head.len() % ENTRY_SIZE, 0);

        // The streaming rebuild gives the same texts, with no cache to start from (every
        // chain from its base chunk) and with one (chains cut short by cached texts).
        for budget in [0, 1 << 20] {
            let cold = Revlog::open(&ip, &dp, "f.i".into(), TextCache::new(budget), 0).unwrap();
            for (r, text) in texts.iter().enumerate() {
                let mut out = Vec::new();
                let n = cold
                    .write_revision(r as Rev, dir.path(), &mut out)
                    .unwrap_or_else(|e| panic!("{what} rev {r}: {e}"));
                assert_eq!(n as usize, text.len(), "{what} rev {r}");
                assert!(out == *text, "{what} rev {r}: streamed text differs");
                if budget > 0 && r % 3 == 0 {
                    cold.revision(r as Rev).unwrap();
                }
            }
        }

        let revlog = open_reader(dir.path());
        assert_eq!(revlog.len(), texts.len());
        assert_eq!(revlog.is_generaldelta(), gd);
        let mut deltas = 0;
        for (r, text) in texts.iter().enumerate() {
            let rev = r as Rev;
            assert_eq!(&*revlog.revision(rev).unwrap(), &text[..], "{what} rev {r}");
            let e = revlog.entry(rev).unwrap();
            assert_eq!((e.p1, e.p2), parents[r]);
            assert_eq!(e.linkrev, (r * 2) as Rev);
            assert_eq!(e.raw_len as usize, text.len());
            let expected_node = Node::hash_revision(
                &revlog.node(e.p1).unwrap(),
                &revlog.node(e.p2).unwrap(),
                text,
            );
            assert_eq!(e.node, expected_node);
            if e.base != rev {
                deltas += 1;
            }
            if text.is_empty() {
                assert_eq!(e.compressed_len, 0);
                assert_eq!(e.base, rev);
            }
        }
        if store_deltas {
            assert!(deltas > 100, "{what}: only {deltas} deltas");
        } else {
            assert_eq!(deltas, 0, "{what}");
        }
    }

    #[test]
    fn the_reader_checks_the_nodes_of_written_revisions() {
        let dir = tempfile::tempdir().unwrap();
        let (ip, dp) = (dir.path().join("f.i"), dir.path().join("f.d"));
        let mut w = RevlogWriter::open(&ip, &dp, true, Compression::Zstd).unwrap();
        let (r0, n0) = w.add(b"hello", NULL_REV, NULL_REV, 0, false).unwrap();
        assert_eq!(
            (r0, n0),
            (0, Node::hash_revision(&Node::NULL, &Node::NULL, b"hello"))
        );
        assert!(!w.finish().unwrap());
        let bytes = std::fs::read(&ip).unwrap();
        assert_eq!(&bytes[..4], &[0, 3, 0, 1]);
        assert_eq!(&bytes[ENTRY_SIZE..], b"uhello");
        assert_eq!(&*open_reader(dir.path()).revision(0).unwrap(), b"hello");
        // Same length, different content: only the hash check can notice.
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] = b'O';
        std::fs::write(&ip, &bad).unwrap();
        assert!(matches!(
            open_reader(dir.path()).revision(0),
            Err(StoreError::IntegrityCheckFailed { .. })
        ));
        // Parents must exist.
        let mut w = RevlogWriter::open(&ip, &dp, true, Compression::Zstd).unwrap();
        assert!(w.add(b"x", 1, NULL_REV, 0, false).is_err());
        // Empty text without parents: hg's well-known node and an empty chunk.
        let (_, n) = w.add(b"", NULL_REV, NULL_REV, 0, false).unwrap();
        assert_eq!(n.to_hex(), "b80de5d138758541c5f05265ad144ab9fa86d1db");
    }

    fn hg(root: &Path, args: &[&str]) -> Option<std::process::Output> {
        std::process::Command::new("hg")
            .arg("-R")
            .arg(root)
            .current_dir(root)
            .args(args)
            .env("HGPLAIN", "1")
            .env("HGRCPATH", "")
            .output()
            .ok()
    }

    /// Content of `path` as changed by changeset `cs`, or None when `cs` leaves it alone.
    fn change(rng: &mut Rng, cs: usize, path: &str) -> Option<Vec<u8>> {
        let mut lines = |n: usize| {
            let mut t = format!("{path} at changeset {cs}\n").into_bytes();
            t.extend_from_slice(&rng.hex_lines(n));
            t
        };
        match (path, cs) {
            ("a.txt", 15) => Some(Vec::new()),
            ("a.txt", c) if c % 2 == 0 || c % 3 != 0 => Some(lines(30 + c)),
            ("Dir/UPPER.bin", c) if c % 3 == 0 => {
                let mut t = vec![0u8, 1, 2, 255];
                t.extend_from_slice(&lines(c));
                Some(t)
            }
            (".hidden/aux.txt", c) if c >= 5 && c % 5 == 0 => Some(lines(3)),
            ("big.dat", 8) => Some(rng.bytes(150_000)),
            ("big.dat", 12) => {
                let mut t = rng.bytes(150_000);
                t.extend_from_slice(b"tail\n");
                Some(t)
            }
            ("meta.txt", 10 | 17) => {
                let mut t = b"\x01\ncontent that looks like metadata\n".to_vec();
                t.extend_from_slice(&lines(1));
                Some(t)
            }
            _ => None,
        }
    }

    /// Builds a complete repository with the writer; returns (changeset, path, content)
    /// for every file revision written.
    fn build_repo(root: &Path, compression: Compression) -> Vec<(usize, String, Vec<u8>)> {
        use crate::pathenc::{encode_dir, encode_store_path, PathEncoding};
        use std::collections::BTreeMap;
        crate::commit::init_with(root, compression).unwrap();
        let store = root.join(".hg").join("store");

        let enc = PathEncoding::Fncache { dotencode: true };
        let files = [
            "a.txt",
            "Dir/UPPER.bin",
            ".hidden/aux.txt",
            "big.dat",
            "meta.txt",
        ];
        let mut filelogs: BTreeMap<&str, RevlogWriter> = BTreeMap::new();
        let store_file = |unencoded: String| {
            let p = store
                .join(String::from_utf8(encode_store_path(unencoded.as_bytes(), enc)).unwrap());
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            p
        };
        for f in files {
            let w = RevlogWriter::open(
                &store_file(format!("data/{f}.i")),
                &store_file(format!("data/{f}.d")),
                true,
                compression,
            )
            .unwrap();
            filelogs.insert(f, w);
        }
        let mut manifest = RevlogWriter::open(
            &store.join("00manifest.i"),
            &store.join("00manifest.d"),
            true,
            compression,
        )
        .unwrap();
        let mut changelog = RevlogWriter::open(
            &store.join("00changelog.i"),
            &store.join("00changelog.d"),
            false,
            compression,
        )
        .unwrap()
        .store_deltas(false);

        let mut rng = Rng(42);
        let mut current: BTreeMap<&str, (Rev, Node)> = BTreeMap::new();
        let mut written = Vec::new();
        let mut mrev = NULL_REV;
        for cs in 0..20usize {
            let mut changed = Vec::new();
            for f in files {
                let Some(content) = change(&mut rng, cs, f) else {
                    continue;
                };
                let mut raw = Vec::new();
                if content.starts_with(b"\x01\n") {
                    raw.extend_from_slice(b"\x01\n\x01\n");
                }
                raw.extend_from_slice(&content);
                let p1 = current.get(f).map_or(NULL_REV, |&(r, _)| r);
                let w = filelogs.get_mut(f).unwrap();
                let (r, n) = w.add(&raw, p1, NULL_REV, cs as Rev, false).unwrap();
                assert_eq!(r as usize, w.len() - 1, "no node reuse expected");
                current.insert(f, (r, n));
                changed.push(f);
                written.push((cs, f.to_owned(), content));
            }
            assert!(!changed.is_empty());
            let mut mtext = Vec::new();
            for (f, (_, n)) in &current {
                mtext.extend_from_slice(f.as_bytes());
                mtext.push(0);
                mtext.extend_from_slice(n.to_hex().as_bytes());
                if *f == "Dir/UPPER.bin" {
                    mtext.push(b'x');
                }
                mtext.push(b'\n');
            }
            let (r, mnode) = manifest
                .add(&mtext, mrev, NULL_REV, cs as Rev, true)
                .unwrap();
            mrev = r;
            let mut cl: Vec<String> = vec![
                mnode.to_hex(),
                "Writer Test <writer@example.invalid>".into(),
                format!("{} 0", 1_700_000_000 + cs * 60),
            ];
            changed.sort();
            cl.extend(changed.iter().map(|f| f.to_string()));
            cl.push(String::new());
            cl.push(format!("changeset {cs}"));
            let p1 = cs as Rev - 1;
            let (r, _) = changelog
                .add(cl.join("\n").as_bytes(), p1, NULL_REV, cs as Rev, false)
                .unwrap();
            assert_eq!(r as usize, cs);
        }
        // Write order: filelogs, manifest, changelog last.
        let mut fncache = Vec::new();
        for (f, w) in filelogs {
            let split = w.finish().unwrap();
            fncache.extend_from_slice(&encode_dir(format!("data/{f}.i").as_bytes()));
            fncache.push(b'\n');
            if split {
                fncache.extend_from_slice(&encode_dir(format!("data/{f}.d").as_bytes()));
                fncache.push(b'\n');
            }
            assert_eq!(split, f == "big.dat", "{f}");
        }
        manifest.finish().unwrap();
        changelog.finish().unwrap();
        std::fs::write(store.join("fncache"), fncache).unwrap();
        written
    }

    #[test]
    fn hg_verify_accepts_a_repository_written_by_the_writer() {
        if !matches!(hg(Path::new("."), &["--version"]), Some(o) if o.status.success()) {
            assert!(
                std::env::var_os("CI").is_none(),
                "hg is required when CI is set"
            );
            println!("SKIPPED: hg not found");
            return;
        }
        for compression in [Compression::Zstd, Compression::Zlib] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let written = build_repo(root, compression);
            let out = hg(root, &["verify"]).unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.status.success(),
                "{compression:?}: hg verify failed:\n{text}"
            );
            assert!(!text.contains("warning"), "{compression:?}:\n{text}");
            assert!(text.contains("checked 20 changesets"), "{text}");
            for (i, (cs, path, content)) in written.iter().enumerate() {
                let interesting = path == "big.dat" || path == "meta.txt" || content.is_empty();
                if !interesting && i % 4 != 0 {
                    continue;
                }
                let out = hg(root, &["cat", "-r", &cs.to_string(), path]).unwrap();
                assert!(
                    out.status.success(),
                    "hg cat -r {cs} {path}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(&out.stdout, content, "hg cat -r {cs} {path}");
            }
        }
    }
}
