//! Data packs (`datapack.py`): file texts by filenode.
//!
//! ```text
//! .datapack = version:u8 revision*
//! revision  = namelen:u16 name node:20 deltabase:20 deltalen:u64 zlib(delta)
//!             metalen:u32 (key:u8 len:u16 value)*        keys `f` flags, `s` size
//! .dataidx  = index (index.rs) of entries node:20 base:i32 offset:u64 size:u64
//! ```
//!
//! A delta base of null means the delta is the fulltext (the filelog's text, copy metadata
//! included); otherwise it is an mdiff patch on the same file's revision `deltabase`, whose
//! index entry `base` points at (-1 fulltext, -2 in another pack). revfs writes fulltexts
//! only, zlib-stored (uncompressed, as the loose blobs are: the pack's job is fewer files,
//! and a compressor would cost more than the files it saves).

use super::index::{self, Index};
use super::{Be, PackError, VERSION};
use crate::node::Node;
use std::path::Path;

pub const PACK_SUFFIX: &str = ".datapack";
pub const INDEX_SUFFIX: &str = ".dataidx";
const ENTRY: usize = 40;
const FULLTEXT: i32 = -1;

/// One revision of a data pack, its delta still compressed.
#[derive(Debug, Clone, Copy)]
pub struct DataEntry<'a> {
    pub name: &'a [u8],
    pub node: Node,
    /// Null for a fulltext.
    pub delta_base: Node,
    zdelta: &'a [u8],
    /// The revision flags (`f`), 0 when absent.
    pub flags: u16,
}

impl DataEntry<'_> {
    /// The delta (or fulltext), decompressed.
    pub fn delta(&self, pack: &Path) -> Result<Vec<u8>, PackError> {
        // Deflate expands at most 1,032 times; the stored streams revfs writes, not at all.
        let max = self.zdelta.len().saturating_mul(1032);
        crate::zlib::inflate(self.zdelta, self.zdelta.len(), max)
            .map_err(|e| PackError::malformed(pack, format!("a revision's {e}")))
    }
}

/// A data pack and its index, mapped.
pub struct DataPack {
    files: super::Mapped,
    index: Index,
}

impl std::ops::Deref for DataPack {
    type Target = super::Mapped;
    fn deref(&self) -> &super::Mapped {
        &self.files
    }
}

impl DataPack {
    /// Opens the pack at `base` (its path without suffix): both files, version checked.
    pub fn open(base: &Path) -> Result<DataPack, PackError> {
        let files = super::Mapped::open(base, (PACK_SUFFIX, INDEX_SUFFIX))?;
        let index = Index::parse(&files.idx, ENTRY, &files.index_path())?;
        Ok(DataPack { files, index })
    }

    pub fn len(&self) -> usize {
        self.index.count
    }

    pub fn is_empty(&self) -> bool {
        self.index.count == 0
    }

    /// The nodes of the revisions in this pack.
    pub fn nodes(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.index.keys(&self.idx)
    }

    pub fn contains(&self, node: &Node) -> bool {
        self.index.find(&self.idx, &node.0).is_some()
    }

    /// Every revision in the pack, in the index's order (a garbled one is an error).
    pub fn entries(&self) -> impl Iterator<Item = Result<DataEntry<'_>, PackError>> + '_ {
        (0..self.index.count).map(move |i| match self.index.entry(&self.idx, i) {
            Some(e) => self.parse_entry(e),
            None => Err(PackError::malformed(
                &self.index_path(),
                "an entry past the index's end",
            )),
        })
    }

    /// The revision `node`, if this pack has it.
    pub fn entry(&self, node: &Node) -> Result<Option<DataEntry<'_>>, PackError> {
        let Some(e) = self.index.find(&self.idx, &node.0) else {
            return Ok(None);
        };
        self.parse_entry(e).map(Some)
    }

    fn parse_entry(&self, e: &[u8]) -> Result<DataEntry<'_>, PackError> {
        let path = self.pack_path();
        let bad = |r: &str| PackError::malformed(&path, r);
        let (offset, size) = match (e.be_u64(24), e.be_u64(32)) {
            (Some(o), Some(s)) => (o, s),
            _ => return Err(bad("short index entry")),
        };
        let raw = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(size).ok())
            .and_then(|(o, s)| self.pack.slice(o, s))
            .ok_or_else(|| bad("an index entry points past the pack's end"))?;
        let name_len = usize::from(raw.be_u16(0).ok_or_else(|| bad("short revision"))?);
        let name = raw
            .slice(2, name_len)
            .ok_or_else(|| bad("short revision"))?;
        let mut at = 2 + name_len;
        let node = raw.slice(at, 20).and_then(Node::from_slice);
        let delta_base = raw.slice(at + 20, 20).and_then(Node::from_slice);
        let (Some(node), Some(delta_base)) = (node, delta_base) else {
            return Err(bad("short revision"));
        };
        if node.0[..] != e[..20] {
            return Err(bad("a revision is not the one its index entry names"));
        }
        at += 40;
        let zlen = raw
            .be_u64(at)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| bad("short revision"))?;
        let zdelta = raw
            .slice(at + 8, zlen)
            .ok_or_else(|| bad("short revision"))?;
        at += 8 + zlen;
        let meta_len = raw.be_u32(at).ok_or_else(|| bad("short revision"))? as usize;
        let mut meta = raw
            .slice(at + 4, meta_len)
            .ok_or_else(|| bad("short revision"))?;
        let mut flags = 0u16;
        while let Some((&key, rest)) = meta.split_first() {
            let len = usize::from(rest.be_u16(0).ok_or_else(|| bad("short metadata"))?);
            let value = rest.slice(2, len).ok_or_else(|| bad("short metadata"))?;
            if key == b'f' {
                flags = value
                    .iter()
                    .try_fold(0u64, |n, &b| n.checked_mul(256).map(|n| n | u64::from(b)))
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or_else(|| bad("revision flags out of range"))?;
            }
            meta = &rest[2 + len..];
        }
        Ok(DataEntry {
            name,
            node,
            delta_base,
            zdelta,
            flags,
        })
    }
}

/// A data pack being written: revisions in memory, then [`DataPackBuilder::finish`].
#[derive(Default)]
pub struct DataPackBuilder {
    pack: Vec<u8>,
    /// (node, offset, size) of each revision.
    entries: Vec<(Node, u64, u64)>,
    seen: std::collections::HashSet<Node>,
}

impl DataPackBuilder {
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// A builder whose pack has room for `bytes` of entries before it grows (see
    /// [`DataPackBuilder::entry_len`]).
    pub fn with_capacity(bytes: usize) -> Self {
        let mut pack = Vec::with_capacity(1 + bytes);
        pack.push(VERSION);
        DataPackBuilder {
            pack,
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes [`DataPackBuilder::add`] writes for a fulltext of `text_len` bytes named
    /// `name_len` bytes: the entry's fields, the stored zlib stream (2 header bytes, 5 a
    /// block of 65,535, 4 of Adler-32) and metadata of at most 25 bytes.
    pub fn entry_len(name_len: usize, text_len: usize) -> usize {
        2 + name_len + 40 + 8 + 2 + (text_len / 0xffff + 1) * 5 + text_len + 4 + 4 + 25
    }

    /// Adds the fulltext of `name` at `node` (the filelog's text, copy metadata included),
    /// with `size` as its `s` metadata (the text's length without the metadata, as hg's
    /// loose store reports it). A second add of a node is ignored, as hg's. A name longer
    /// than 65,535 bytes is refused (hg's limit).
    pub fn add(
        &mut self,
        name: &[u8],
        node: &Node,
        fulltext: &[u8],
        size: u64,
        flags: u16,
    ) -> bool {
        let Ok(name_len) = u16::try_from(name.len()) else {
            return false;
        };
        if !self.seen.insert(*node) {
            return true;
        }
        let start = self.pack.len();
        self.pack.extend_from_slice(&name_len.to_be_bytes());
        self.pack.extend_from_slice(name);
        self.pack.extend_from_slice(&node.0);
        self.pack.extend_from_slice(&Node::NULL.0);
        let len_at = self.pack.len();
        self.pack.extend_from_slice(&[0; 8]);
        zlib_stored(fulltext, &mut self.pack);
        let zlen = (self.pack.len() - len_at - 8) as u64;
        self.pack[len_at..len_at + 8].copy_from_slice(&zlen.to_be_bytes());
        let mut meta = Vec::new();
        if flags != 0 {
            meta.push(b'f');
            push_int_item(&mut meta, u64::from(flags));
        }
        meta.push(b's');
        push_int_item(&mut meta, size);
        self.pack
            .extend_from_slice(&(meta.len() as u32).to_be_bytes());
        self.pack.extend_from_slice(&meta);
        self.entries
            .push((*node, start as u64, (self.pack.len() - start) as u64));
        true
    }

    /// The pack's and its index's bytes.
    pub fn finish(mut self) -> (Vec<u8>, Vec<u8>) {
        self.entries.sort_by_key(|e| e.0);
        let keys: Vec<[u8; 20]> = self.entries.iter().map(|e| e.0 .0).collect();
        let mut idx = index::start(&keys, ENTRY);
        for (node, offset, size) in &self.entries {
            idx.extend_from_slice(&node.0);
            idx.extend_from_slice(&FULLTEXT.to_be_bytes());
            idx.extend_from_slice(&offset.to_be_bytes());
            idx.extend_from_slice(&size.to_be_bytes());
        }
        (self.pack, idx)
    }
}

/// hg's `int2bin`: big-endian, no leading zero bytes (0 is empty), after a u16 length.
fn push_int_item(out: &mut Vec<u8>, n: u64) {
    let bytes = n.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count();
    out.extend_from_slice(&((8 - skip) as u16).to_be_bytes());
    out.extend_from_slice(&bytes[skip..]);
}

/// A zlib stream of `data` in stored (uncompressed) blocks: what any inflater reads, at the
/// cost of a copy and an Adler-32.
fn zlib_stored(data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let len = chunk.len() as u16;
        out.push(u8::from(last));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
}

fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before b overflows.
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_zlib_stream_inflates_to_its_data() {
        use std::io::Read;
        for n in [0usize, 1, 5551, 5553, 0xffff, 0x10000, 200_000] {
            let data: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let mut z = Vec::new();
            zlib_stored(&data, &mut z);
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&z[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data, "{n} bytes");
        }
    }

    #[test]
    fn a_written_data_pack_reads_back_and_a_cut_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = DataPackBuilder::new();
        let n1 = Node([3; 20]);
        let n2 = Node([1; 20]);
        assert!(b.add(b"dir/a", &n1, b"hello\n", 6, 0));
        assert!(b.add(b"b", &n2, b"", 0, 0));
        assert!(!b.add(&vec![b'x'; 70_000], &Node([9; 20]), b"", 0, 0));
        let (pack, idx) = b.finish();
        let base =
            super::super::install(dir.path(), &pack, &idx, (PACK_SUFFIX, INDEX_SUFFIX)).unwrap();
        let p = DataPack::open(&base).unwrap();
        assert_eq!(p.len(), 2);
        let e = p.entry(&n1).unwrap().unwrap();
        assert_eq!(
            (e.name, e.delta_base, e.flags),
            (&b"dir/a"[..], Node::NULL, 0)
        );
        assert_eq!(e.delta(&base).unwrap(), b"hello\n");
        assert_eq!(p.entry(&n2).unwrap().unwrap().delta(&base).unwrap(), b"");
        assert!(p.entry(&Node([9; 20])).unwrap().is_none());
        // A pack cut short: its entries are errors, not panics.
        let cut = dir.path().join("cut");
        std::fs::write(
            format!("{}{PACK_SUFFIX}", cut.display()),
            &pack[..pack.len() - 9],
        )
        .unwrap();
        std::fs::write(format!("{}{INDEX_SUFFIX}", cut.display()), &idx).unwrap();
        let p = DataPack::open(&cut).unwrap();
        assert!(p.entry(&n1).unwrap().is_some());
        assert!(p.entry(&n2).is_err());
    }
}
