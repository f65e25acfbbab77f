//! Rebuilding a revision into a writer with memory bounded by its deltas' hunk lists, not
//! by its text: for texts too big to hold (a 1 GB asset).
//!
//! The chunks of the delta chain are decompressed, streaming, into a scratch file (a base
//! stored uncompressed is read in place from the revlog; a text stored whole in one
//! compressed chunk goes straight to the writer). The text is then described as a
//! list of pieces, each a range of the base or of a delta's inserted data; applying a delta
//! to that list costs its hunks, not the text. Finally the pieces are copied to the writer
//! in bounded blocks, hashed on the way and checked against the revision's node. Reads go
//! through `pread`, never a memory map, so the process's resident memory stays small.

use super::Revlog;
use crate::error::{Result, StoreError};
use crate::mpatch::{PatchError, Piece, Rope};
use crate::node::{Node, Rev, NULL_REV};
use sha1::{Digest, Sha1};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// Bytes copied per block, from the pieces to the writer.
const BLOCK: usize = 1 << 20;

/// The sources of a rope's pieces: the text the chain starts from, and the scratch file
/// (inserted data of the deltas).
const BASE: u32 = 0;
const SCRATCH: u32 = 1;

/// The text the chain starts from.
enum Base {
    /// A cached text (from the in-memory cache), or the empty text.
    Memory(Arc<[u8]>),
    /// A range of a file: the revlog (a chunk stored uncompressed) or the scratch file.
    File { file: Arc<File>, off: u64, len: u64 },
}

impl Base {
    fn len(&self) -> u64 {
        match self {
            Base::Memory(t) => t.len() as u64,
            Base::File { len, .. } => *len,
        }
    }
}

/// A `Read` over `len` bytes of a file from `off`, by `pread`.
struct RangeReader<'a> {
    file: &'a File,
    off: u64,
    left: u64,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.off)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file shorter than its index says",
            ));
        }
        self.off += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}

impl Revlog {
    /// Writes the raw text of `rev` (for filelogs, with any metadata header) to `out`,
    /// rebuilt from its delta chain with memory bounded by the chain's hunks, checked
    /// against its length and node; returns its length. Decompressed chunks are spooled to
    /// an unnamed file in `scratch` (on disk: not `/tmp`, which may be memory).
    pub fn write_revision(&self, rev: Rev, scratch: &Path, out: &mut dyn Write) -> Result<u64> {
        if rev == NULL_REV {
            return Ok(0);
        }
        let entry = self.rebuildable_entry(rev)?;
        let scratch_file =
            Arc::new(tempfile::tempfile_in(scratch).map_err(|e| StoreError::io(scratch, e))?);
        let mut spooled = 0u64;
        let (chain, start) = self.delta_chain(rev)?;
        self.check_span(&chain)?;
        if let (None, &[only]) = (&start, &chain[..]) {
            if let Some(len) = self.write_whole_chunk(only, &entry, scratch, out)? {
                return Ok(len);
            }
        }
        let mut deltas = chain.iter().rev();
        let base = match start {
            Some(text) => Base::Memory(text),
            None => match deltas.next() {
                Some(&r) => self.base_of(r, &scratch_file, &mut spooled)?,
                None => Base::Memory(Arc::from(&[][..])),
            },
        };
        let mut rope = Rope::new(BASE, base.len());
        for &r in deltas {
            let (off, dlen) = self.spool(r, &scratch_file, &mut spooled)?;
            rope = apply(&rope, &scratch_file, off, dlen)
                .map_err(|reason| StoreError::corrupt_rev(&self.name, r as u32, reason))?;
        }
        let len = rope.len();
        self.check_len(rev, &entry, len)?;
        let mut hash = Node::revision_hasher(&self.node(entry.p1)?, &self.node(entry.p2)?);
        let io = |e| StoreError::io(scratch, e);
        let mut buf = vec![0u8; BLOCK.min(usize::try_from(len).unwrap_or(BLOCK)).max(1)];
        for p in rope.pieces() {
            let mut done = 0u64;
            while done < p.len {
                let n = usize::try_from(p.len - done)
                    .unwrap_or(BLOCK)
                    .min(buf.len());
                let block = &mut buf[..n];
                let at = p.off + done;
                match (p.src, &base) {
                    (BASE, Base::Memory(t)) => {
                        block.copy_from_slice(&t[at as usize..at as usize + n]);
                    }
                    (BASE, Base::File { file, off, .. }) => {
                        file.read_exact_at(block, off + at).map_err(io)?
                    }
                    _ => scratch_file.read_exact_at(block, at).map_err(io)?,
                }
                hash.update(&*block);
                out.write_all(block).map_err(io)?;
                done += n as u64;
            }
        }
        self.check_node(rev, &entry, Node(hash.finalize().into()))?;
        Ok(len)
    }

    /// A text stored whole in one compressed chunk (the first revision of a big file, or a
    /// snapshot), decompressed straight into `out` and hashed on the way: not spooled to the
    /// scratch file and read back, which cost its length written and read once more. `None`
    /// when the chunk is stored uncompressed (the general path reads it in place).
    fn write_whole_chunk(
        &self,
        rev: Rev,
        entry: &super::index::IndexEntry,
        scratch: &Path,
        out: &mut dyn Write,
    ) -> Result<Option<u64>> {
        let mut sink = Hashing {
            hash: Node::revision_hasher(&self.node(entry.p1)?, &self.node(entry.p2)?),
            out,
            failed: None,
        };
        let (kind, at) = self.chunk_at(rev)?;
        if !matches!(kind, b'(' | b'x') {
            return Ok(None);
        }
        let decoded = at.decompress_into(kind, &mut sink);
        // A failed write is the writer's (a full disk), not the revlog's.
        if let Some(e) = sink.failed.take() {
            return Err(StoreError::io(scratch, e));
        }
        let len =
            decoded.map_err(|reason| StoreError::corrupt_rev(&self.name, rev as u32, reason))?;
        self.check_len(rev, entry, len)?;
        self.check_node(rev, entry, Node(sink.hash.finalize().into()))?;
        Ok(Some(len))
    }

    /// The base text of a chain, from its chunk: read in place when stored uncompressed in
    /// a data file, else decompressed into the scratch file.
    fn base_of(&self, rev: Rev, scratch: &Arc<File>, spooled: &mut u64) -> Result<Base> {
        let (kind, at) = self.chunk_at(rev)?;
        let at = match (kind, at) {
            (b'u', ChunkAt::File { file, off, len }) => {
                return Ok(Base::File {
                    file: Arc::new(file),
                    off: off + 1,
                    len: len - 1,
                })
            }
            (b'\0', ChunkAt::File { file, off, len }) if len > 0 => {
                return Ok(Base::File {
                    file: Arc::new(file),
                    off,
                    len,
                })
            }
            (_, at) => at,
        };
        let (off, len) = self.spool_chunk(rev, kind, &at, scratch, spooled)?;
        Ok(Base::File {
            file: scratch.clone(),
            off,
            len,
        })
    }

    /// `rev`'s chunk: its kind (its first byte, 0 for an empty chunk) and where it is.
    fn chunk_at(&self, rev: Rev) -> Result<(u8, ChunkAt<'_>)> {
        match self.chunk_in_file(rev)? {
            Some((file, off, len)) => {
                let mut kind = [0u8; 1];
                if len > 0 {
                    file.read_exact_at(&mut kind, off)
                        .map_err(|e| StoreError::io(&self.data_path, e))?;
                }
                Ok((kind[0], ChunkAt::File { file, off, len }))
            }
            None => {
                let bytes = self.chunk(rev)?;
                Ok((bytes.first().copied().unwrap_or(0), ChunkAt::Memory(bytes)))
            }
        }
    }

    /// The data file, offset and length of `rev`'s chunk, when it is in a data file big
    /// enough to be mapped (smaller ones, and inline revlogs, are in memory already).
    fn chunk_in_file(&self, rev: Rev) -> Result<Option<(File, u64, u64)>> {
        if !matches!(
            (&self.layout, &self.data),
            (super::Layout::Split, Some(super::FileBytes::Mapped(_)))
        ) {
            return Ok(None);
        }
        let e = self.entry(rev)?;
        let file =
            File::open(&self.data_path).map_err(|err| StoreError::io(&self.data_path, err))?;
        let size = file
            .metadata()
            .map_err(|err| StoreError::io(&self.data_path, err))?
            .len();
        let len = e.compressed_len as u64;
        if e.offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(StoreError::corrupt_rev(
                &self.name,
                rev as u32,
                format!(
                    "data truncated: chunk {}+{len} beyond the {size} bytes of the data file",
                    e.offset
                ),
            ));
        }
        Ok(Some((file, e.offset, len)))
    }

    /// Decompresses `rev`'s chunk to the end of the scratch file; its offset and length
    /// there.
    fn spool(&self, rev: Rev, scratch: &File, spooled: &mut u64) -> Result<(u64, u64)> {
        let (kind, at) = self.chunk_at(rev)?;
        self.spool_chunk(rev, kind, &at, scratch, spooled)
    }

    /// [`Revlog::spool`] of a chunk found already.
    fn spool_chunk(
        &self,
        rev: Rev,
        kind: u8,
        at: &ChunkAt<'_>,
        scratch: &File,
        spooled: &mut u64,
    ) -> Result<(u64, u64)> {
        let written = at
            .decompress_into(kind, &mut &*scratch)
            .map_err(|reason| StoreError::corrupt_rev(&self.name, rev as u32, reason))?;
        let off = *spooled;
        *spooled += written;
        Ok((off, written))
    }
}

/// Where a chunk's bytes are: a range of a data file too big to hold, or memory.
enum ChunkAt<'a> {
    File { file: File, off: u64, len: u64 },
    Memory(&'a [u8]),
}

impl ChunkAt<'_> {
    /// Decompresses the whole chunk, of kind `kind`, into `out`; the bytes written.
    fn decompress_into(&self, kind: u8, out: &mut impl Write) -> std::result::Result<u64, String> {
        match self {
            ChunkAt::File { file, off, len } => {
                let whole = RangeReader {
                    file,
                    off: *off,
                    left: *len,
                };
                decompress_into(kind, *len, whole, out)
            }
            ChunkAt::Memory(bytes) => decompress_into(kind, bytes.len() as u64, *bytes, out),
        }
    }
}

/// A writer that hashes what it passes on, and keeps the error of a failed write (told
/// apart from a decompression's).
struct Hashing<'a> {
    hash: Sha1,
    out: &'a mut dyn Write,
    failed: Option<std::io::Error>,
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.out.write(buf) {
            Ok(n) => {
                self.hash.update(&buf[..n]);
                Ok(n)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                let copy = std::io::Error::new(e.kind(), e.to_string());
                self.failed = Some(e);
                Err(copy)
            }
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Decompresses a whole chunk (`len` bytes from `input`, starting with its kind byte) into
/// `out`; the bytes written.
fn decompress_into(
    kind: u8,
    len: u64,
    mut input: impl Read,
    out: &mut impl Write,
) -> std::result::Result<u64, String> {
    let err = |e: std::io::Error| format!("revlog decompress error: {e}");
    if len == 0 {
        return Ok(0);
    }
    match kind {
        b'\0' => std::io::copy(&mut input, out).map_err(err),
        b'u' => {
            let mut skip = [0u8; 1];
            input.read_exact(&mut skip).map_err(err)?;
            std::io::copy(&mut input, out).map_err(err)
        }
        b'x' => {
            let mut d = flate2::read::ZlibDecoder::new(std::io::BufReader::new(input));
            std::io::copy(&mut d, out).map_err(err)
        }
        b'(' => {
            let mut d = zstd::stream::read::Decoder::new(input)
                .map_err(err)?
                .single_frame();
            std::io::copy(&mut d, out).map_err(err)
        }
        other => Err(format!("unknown compression type {other:#04x}")),
    }
}

/// Applies the delta spooled at `off` (`len` bytes) of `scratch` to the text `rope`.
fn apply(rope: &Rope, scratch: &File, off: u64, len: u64) -> std::result::Result<Rope, String> {
    let mut patcher = rope.patcher();
    let mut read = 0u64;
    let truncated = || PatchError::Truncated.to_string();
    while read < len {
        if len - read < 12 {
            return Err(truncated());
        }
        let mut header = [0u8; 12];
        scratch
            .read_exact_at(&mut header, off + read)
            .map_err(|e| format!("scratch file: {e}"))?;
        let field =
            |i: usize| i32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let (start, end, dlen) = (field(0), field(4), field(8));
        if start < 0 || end < start || dlen < 0 {
            return Err(PatchError::BadHunk {
                start: start as u32,
                end: end as u32,
                old_len: rope.len() as usize,
            }
            .to_string());
        }
        let dlen = dlen as u64;
        if len - read - 12 < dlen {
            return Err(truncated());
        }
        let data = Piece {
            src: SCRATCH,
            off: off + read + 12,
            len: dlen,
        };
        patcher
            .hunk(start as u64, end as u64, data)
            .map_err(|e| e.to_string())?;
        read += 12 + dlen;
    }
    Ok(patcher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revlog::TextCache;
    use crate::revlog_writer::{Compression, RevlogWriter};

    /// A split revlog of a 300 KB text and four edits of it (deltas), zstd.
    fn big_revlog(dir: &Path) -> Vec<Vec<u8>> {
        big_revlog_with(dir, Compression::Zstd)
    }

    fn big_revlog_with(dir: &Path, compression: Compression) -> Vec<Vec<u8>> {
        let (ip, dp) = (dir.join("f.i"), dir.join("f.d"));
        let mut w = RevlogWriter::open(&ip, &dp, true, compression)
            .unwrap()
            .store_deltas(true);
        // Lines of random hex (line deltas then carry only the lines changed).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut line = |n: usize| -> Vec<u8> {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut l = format!("{x:016x}{n:08}").into_bytes();
            l.push(b'\n');
            l
        };
        let mut lines: Vec<Vec<u8>> = (0..12_000).map(&mut line).collect();
        let mut texts = Vec::new();
        let mut prev = NULL_REV;
        for k in 0..5u8 {
            if k > 0 {
                for j in 0..20 {
                    lines[j * 590 + k as usize] = line(j);
                }
                lines.push(line(k as usize));
            }
            let text = lines.concat();
            let (rev, _) = w.add(&text, prev, NULL_REV, k as Rev, true).unwrap();
            prev = rev;
            texts.push(text);
        }
        w.finish().unwrap();
        texts
    }

    fn open(dir: &Path) -> Revlog {
        Revlog::open(
            &dir.join("f.i"),
            &dir.join("f.d"),
            "f.i".into(),
            TextCache::new(0),
            0,
        )
        .unwrap()
    }

    #[test]
    fn a_streamed_rebuild_equals_the_text_and_damage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let texts = big_revlog(dir.path());
        let rl = open(dir.path());
        assert!(
            rl.entry(4).unwrap().base != 4,
            "the last revision is a delta"
        );
        for (r, t) in texts.iter().enumerate() {
            let mut out = Vec::new();
            rl.write_revision(r as Rev, dir.path(), &mut out).unwrap();
            assert!(out == *t, "rev {r}");
        }
        // A byte flipped in the last delta: the hash no longer matches, or the delta no
        // longer applies; an error either way, never a wrong text.
        let dp = dir.path().join("f.d");
        let mut data = std::fs::read(&dp).unwrap();
        let e = rl.entry(4).unwrap();
        let mid = (e.offset + e.compressed_len as u64 / 2) as usize;
        data[mid] ^= 0x55;
        std::fs::write(&dp, &data).unwrap();
        let rl = open(dir.path());
        let mut out = Vec::new();
        assert!(rl.write_revision(4, dir.path(), &mut out).is_err());
        // Truncated: the chunk runs past the end of the data file.
        data.truncate(e.offset as usize + 10);
        std::fs::write(&dp, &data).unwrap();
        let rl = open(dir.path());
        let err = rl
            .write_revision(4, dir.path(), &mut Vec::new())
            .unwrap_err();
        assert!(
            err.to_string().starts_with("partial read of revlog "),
            "{err}"
        );
    }

    /// A writer that fails once `room` bytes were written, as a full disk does.
    struct FullDisk {
        room: usize,
        got: Vec<u8>,
    }

    impl Write for FullDisk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.got.len() + buf.len() > self.room {
                return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
            }
            self.got.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_text_whole_in_one_chunk_is_rebuilt_and_a_full_disk_is_not_a_corrupt_revlog() {
        for compression in [Compression::Zstd, Compression::Zlib] {
            let dir = tempfile::tempdir().unwrap();
            let texts = big_revlog_with(dir.path(), compression);
            let rl = open(dir.path());
            assert_eq!(rl.entry(0).unwrap().base, 0, "revision 0 is whole");
            let mut out = Vec::new();
            assert_eq!(
                rl.write_revision(0, dir.path(), &mut out).unwrap() as usize,
                texts[0].len()
            );
            assert!(out == texts[0], "{compression:?}");
            // The writer fails part way: an I/O error on the output, not a damaged revlog.
            let mut full = FullDisk {
                room: 100_000,
                got: Vec::new(),
            };
            let err = rl.write_revision(0, dir.path(), &mut full).unwrap_err();
            assert!(
                matches!(err, StoreError::Io { .. }) && err.to_string().contains("No space"),
                "{compression:?}: {err}"
            );
            // A byte of the whole chunk flipped: an error, never a wrong text.
            let dp = dir.path().join("f.d");
            let mut data = std::fs::read(&dp).unwrap();
            let e = rl.entry(0).unwrap();
            data[(e.offset + e.compressed_len as u64 / 2) as usize] ^= 0x55;
            std::fs::write(&dp, &data).unwrap();
            let rl = open(dir.path());
            assert!(rl.write_revision(0, dir.path(), &mut Vec::new()).is_err());
        }
    }
}
