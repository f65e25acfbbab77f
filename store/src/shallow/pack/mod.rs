//! remotefilelog's packs (version 2, the same from hg 4.7 to 7.2), in the shared cache's
//! `packs/` directory, where hg's client looks before its loose blobs:
//!
//! - a data pack (`<sha1>.datapack` + `<sha1>.dataidx`, [`data`]) holds file texts, each a
//!   zlib stream of a fulltext or of a delta against another revision;
//! - a history pack (`<sha1>.histpack` + `<sha1>.histidx`, [`hist`]) holds each file's
//!   revisions with their parents, linknodes and copy sources.
//!
//! Each pair's index is a fanout table then entries sorted by a 20-byte key ([`index`]).
//! revfs writes one data pack and one history pack for each large batch it fetches (one
//! file each instead of a directory and a file per revision), and reads those and the ones
//! `hg repack` writes ([`set`]), and merges small packs into bigger ones when no pack has
//! been written for a while ([`merge`]). docs/FORMATS.md describes the layout.
//!
//! Everything read from a pack is bounds-checked: a short or garbled pack is an error naming
//! it, never a panic. The texts are verified against their nodes by the caller.

pub mod data;
pub mod hist;
pub mod index;
pub mod merge;
pub mod set;

pub use set::PackSet;

use std::path::PathBuf;

/// The pack version revfs reads and writes (hg's `SUPPORTED_VERSIONS = [2]`).
pub const VERSION: u8 = 2;

/// Why a pack could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: malformed pack: {reason}", path.display())]
    Malformed { path: PathBuf, reason: String },
}

impl PackError {
    pub(crate) fn malformed(path: &std::path::Path, reason: impl Into<String>) -> PackError {
        PackError::Malformed {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Big-endian reads that fail instead of panicking past the end.
pub(crate) trait Be {
    fn be_u16(&self, at: usize) -> Option<u16>;
    fn be_u32(&self, at: usize) -> Option<u32>;
    fn be_u64(&self, at: usize) -> Option<u64>;
    fn slice(&self, at: usize, len: usize) -> Option<&[u8]>;
}

impl Be for [u8] {
    fn be_u16(&self, at: usize) -> Option<u16> {
        Some(u16::from_be_bytes(self.slice(at, 2)?.try_into().ok()?))
    }
    fn be_u32(&self, at: usize) -> Option<u32> {
        Some(u32::from_be_bytes(self.slice(at, 4)?.try_into().ok()?))
    }
    fn be_u64(&self, at: usize) -> Option<u64> {
        Some(u64::from_be_bytes(self.slice(at, 8)?.try_into().ok()?))
    }
    fn slice(&self, at: usize, len: usize) -> Option<&[u8]> {
        self.get(at..at.checked_add(len)?)
    }
}

/// A pack file mapped read-only. Packs are written once, renamed into place and never
/// changed (hg and revfs both make them 0444); a removed one stays mapped until dropped.
pub(crate) fn map(path: &std::path::Path) -> Result<memmap2::Mmap, PackError> {
    let io = |source| PackError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: pack files are immutable once in place (written whole, renamed, mode 0444);
    // nothing of ours or hg's truncates or rewrites one.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok(map)
}

/// A pack file and its index, mapped read-only, the pack's version checked: what data and
/// history packs share (each derefs to it).
pub struct Mapped {
    base: PathBuf,
    suffixes: (&'static str, &'static str),
    pack: memmap2::Mmap,
    idx: memmap2::Mmap,
}

impl Mapped {
    /// Maps the pack at `base` (its path without suffix) and its index.
    fn open(
        base: &std::path::Path,
        suffixes: (&'static str, &'static str),
    ) -> Result<Mapped, PackError> {
        let m = Mapped {
            base: base.to_owned(),
            suffixes,
            pack: map(&with_suffix(base, suffixes.0))?,
            idx: map(&with_suffix(base, suffixes.1))?,
        };
        match m.pack.first() {
            Some(&VERSION) => Ok(m),
            Some(v) => Err(PackError::malformed(
                &m.pack_path(),
                format!("pack version {v} (revfs reads {VERSION})"),
            )),
            None => Err(PackError::malformed(&m.pack_path(), "empty")),
        }
    }

    /// The pack's path without its suffix.
    pub fn base(&self) -> &std::path::Path {
        &self.base
    }

    /// The pack file's path.
    pub fn pack_path(&self) -> PathBuf {
        with_suffix(&self.base, self.suffixes.0)
    }

    /// The index file's path.
    pub fn index_path(&self) -> PathBuf {
        with_suffix(&self.base, self.suffixes.1)
    }

    /// Bytes on disk, both files.
    pub fn disk_size(&self) -> u64 {
        (self.pack.len() + self.idx.len()) as u64
    }
}

fn with_suffix(base: &std::path::Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// [`crate::shallow::write_read_only_temp`], its error a pack's.
fn write_temp(
    dir: &std::path::Path,
    suffix: &str,
    bytes: &[u8],
) -> Result<tempfile::TempPath, PackError> {
    crate::shallow::write_read_only_temp(dir, suffix, bytes)
        .map_err(|(path, source)| PackError::Io { path, source })
}

/// Puts a pack in place: its two files written whole to temporaries, then renamed, the
/// pack before its index (hg lists a pack only when it sees both). Returns the pack's path
/// without its suffix.
pub(crate) fn install(
    dir: &std::path::Path,
    pack: &[u8],
    index: &[u8],
    suffixes: (&str, &str),
) -> Result<PathBuf, PackError> {
    // Named for its index, which holds every key and where it is, at a fraction of the
    // hashing of hg's name (the SHA-1 of the pack's bytes; hg reads no meaning into it).
    // Two packs whose indexes are alike (the same revisions at the same offsets, under
    // names of the same length) would share that name: the second is then named for both
    // its files, and never replaces the first.
    use sha1::{Digest, Sha1};
    let mut name = hex::encode(Sha1::digest(index));
    let pack_tmp = write_temp(dir, "-tmp", pack)?;
    let index_tmp = write_temp(dir, "-tmp", index)?;
    let to = |name: &str, suffix: &str| dir.join(format!("{name}{suffix}"));
    let mut pack_tmp = Some(pack_tmp);
    let mut created = false;
    for attempt in 0..2 {
        let pack_to = to(&name, suffixes.0);
        let Some(tmp) = pack_tmp.take() else { break };
        match tmp.persist_noclobber(&pack_to) {
            Ok(_) => {
                created = true;
                break;
            }
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                if std::fs::read(&pack_to).is_ok_and(|there| there == pack) {
                    // This very pack is there already.
                    break;
                }
                if attempt == 1 {
                    return Err(PackError::Io {
                        path: pack_to,
                        source: e.error,
                    });
                }
                let mut h = Sha1::new();
                h.update(index);
                h.update(pack);
                name = hex::encode(h.finalize());
                pack_tmp = Some(e.path);
            }
            Err(e) => {
                return Err(PackError::Io {
                    path: pack_to,
                    source: e.error,
                })
            }
        }
    }
    let base = dir.join(&name);
    let index_to = to(&name, suffixes.1);
    if let Err(e) = index_tmp.persist(&index_to) {
        if created {
            let _ = std::fs::remove_file(to(&name, suffixes.0));
        }
        return Err(PackError::Io {
            path: index_to,
            source: e.error,
        });
    }
    Ok(base)
}
