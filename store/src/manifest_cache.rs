//! The manifest cache: full manifest texts kept as files in the repository's cache directory
//! (`.hg/cache/revfs/manifests/`, the share source's for a share), one per manifest node, so
//! that a mount maps its base manifest instead of rebuilding it from its delta chain. A map
//! costs what is read of it: a mount of a million-file tree touches a few pages, not the
//! 100 MB text. The format is in docs/FORMATS.md ("Manifest cache").
//!
//! Files are written whole under a temporary name and renamed into place, so a reader sees a
//! whole file or none; nothing truncates one (eviction unlinks, which a map survives). What
//! a file holds is checked on open against the node's index entry (node, length); its hash
//! is checked by [`ManifestCache::verify`], which a mount runs in the background.

use crate::error::StoreError;
use crate::manifest::Manifest;
use crate::node::{Node, Rev};
use crate::revlog::Revlog;
use crate::text::SharedText;
use sha1::Digest;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The first bytes of every cache file.
const MAGIC: &[u8; 8] = b"RVFSMNFT";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Bytes before the text: magic, version, header length, node, text length, zeros.
const HEADER: usize = 64;
/// Temporary files older than this are a crashed writer's and are removed by eviction.
const STALE_TEMP: Duration = Duration::from_secs(3600);

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Why a cache file was not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheFileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not what its name says (bad magic, unknown version, another node, a
    /// length that is not the index's). It is removed.
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// The manifest texts of one repository kept on disk, at most `limit` bytes of them.
#[derive(Debug, Clone)]
pub struct ManifestCache {
    dir: PathBuf,
    limit: u64,
}

impl ManifestCache {
    /// The cache in `dir`, evicted down to `limit` bytes after each store (the newest file
    /// always stays). A limit of 0 turns the cache off.
    pub fn new(dir: PathBuf, limit: u64) -> ManifestCache {
        ManifestCache { dir, limit }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether manifests are kept at all.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// The file of manifest `node`.
    pub fn path(&self, node: &Node) -> PathBuf {
        self.dir.join(format!("{}.manifest", node.to_hex()))
    }

    /// Maps the kept text of manifest `node`, whose index says it is `len` bytes long;
    /// `Ok(None)` when there is none. A file that fails the checks is removed and reported.
    pub fn open(
        &self,
        node: &Node,
        len: Option<usize>,
    ) -> std::result::Result<Option<Manifest>, CacheFileError> {
        if !self.enabled() {
            return Ok(None);
        }
        let path = self.path(node);
        let io = |source| CacheFileError::Io {
            path: path.clone(),
            source,
        };
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        // SAFETY: cache files are written whole under another name and renamed into place;
        // nothing writes to or truncates one after that (eviction unlinks it).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        // Lookups are binary searches: no readahead around them. (Pages already cached in
        // large folios are still mapped a folio at a time: ~64 MiB of file pages after a
        // million-file mount, which the kernel can take back.)
        let _ = map.advise(memmap2::Advice::Random);
        match check(&map, node, len) {
            Ok(text_len) => {
                let text = SharedText::Mapped {
                    map: Arc::new(map),
                    start: HEADER,
                    len: text_len,
                };
                Manifest::new(text, *node)
                    .map(Some)
                    .map_err(|e| self.invalid(node, e.to_string()))
            }
            Err(reason) => Err(self.invalid(node, reason)),
        }
    }

    /// Removes the file of `node` and says why.
    fn invalid(&self, node: &Node, reason: String) -> CacheFileError {
        let path = self.path(node);
        let _ = std::fs::remove_file(&path);
        CacheFileError::Invalid { path, reason }
    }

    /// Marks the file of `node` as just used, so that eviction keeps it longer.
    pub fn touch(&self, node: &Node) {
        if let Ok(f) = File::options().write(true).open(self.path(node)) {
            let _ = f.set_modified(SystemTime::now());
        }
    }

    /// Writes `manifest` to the cache (if it is not there), then evicts the oldest files
    /// beyond the limit.
    pub fn store(&self, manifest: &Manifest) -> std::result::Result<(), CacheFileError> {
        if !self.enabled() || manifest.node().is_null() {
            return Ok(());
        }
        let path = self.path(&manifest.node());
        if path.exists() {
            return Ok(());
        }
        crate::cache_dir::create(&self.dir).map_err(|source| CacheFileError::Io {
            path: self.dir.clone(),
            source,
        })?;
        let temp = self.temp_path();
        let written = write_file(&temp, manifest).and_then(|()| std::fs::rename(&temp, &path));
        if let Err(source) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(CacheFileError::Io { path, source });
        }
        self.evict(&path);
        Ok(())
    }

    /// Rebuilds revision `rev` of the manifest log `log` (manifest `node`) straight into a
    /// new cache file, checked against its node on the way, and maps it: the memory this
    /// takes is bounded by the delta chain's hunks, not by the text (a million-file manifest
    /// is ~100 MB). The file has a temporary name until [`PendingManifest::keep`] syncs it
    /// and renames it into place; the map is good meanwhile (it reads what was written).
    /// Errors are the cache's (a directory that cannot be written, a full disk) or the
    /// manifest log's (damage): the caller may rebuild the text in memory instead.
    pub fn rebuild(
        &self,
        log: &Revlog,
        rev: Rev,
        node: &Node,
    ) -> std::result::Result<(Manifest, PendingManifest), StoreError> {
        let dir_io = |source| StoreError::io(&self.dir, source);
        crate::cache_dir::create(&self.dir).map_err(dir_io)?;
        let temp = self.temp_path();
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| StoreError::io(&temp, e))?;
        let pending = PendingManifest {
            cache: self.clone(),
            temp,
            file,
            node: *node,
        };
        let io = |source| StoreError::io(&pending.temp, source);
        // The header's place (written once the text's length is known), then the text.
        let mut out = &pending.file;
        out.write_all(&[0u8; HEADER]).map_err(io)?;
        // Scratch space for the decompressed chunks: the cache's directory, on disk.
        let len = log.write_revision(rev, &self.dir, &mut out)?;
        pending
            .file
            .write_all_at(&header(node, len), 0)
            .map_err(io)?;
        // SAFETY: the file is ours under a name no other process uses, written whole above;
        // nothing writes to or truncates it after this (eviction unlinks).
        let map = unsafe { memmap2::Mmap::map(&pending.file) }.map_err(io)?;
        let _ = map.advise(memmap2::Advice::Random);
        let text_len = check(&map, node, None)
            .map_err(|reason| StoreError::Other(format!("{}: {reason}", pending.temp.display())))?;
        let text = SharedText::Mapped {
            map: Arc::new(map),
            start: HEADER,
            len: text_len,
        };
        Ok((Manifest::new(text, *node)?, pending))
    }

    /// A new temporary file name in the cache's directory.
    fn temp_path(&self) -> PathBuf {
        self.dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// Removes the least recently used files until the rest fit the limit (`keep` stays),
    /// and temporary files a crashed writer left.
    fn evict(&self, keep: &Path) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut files = Vec::new();
        let mut total = 0u64;
        for entry in dir.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".tmp-") {
                if now.duration_since(mtime).unwrap_or_default() > STALE_TEMP {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            if !name.ends_with(".manifest") {
                continue;
            }
            total += meta.len();
            if path != keep {
                files.push((mtime, meta.len(), path));
            }
        }
        files.sort();
        for (_, len, path) in files {
            if total <= self.limit {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }

    /// Whether the kept text of `node` hashes to `node` with parents `p1` and `p2` (hg's
    /// revision hash). Reads the file with plain reads, not through a map, so that a check
    /// of a 100 MB text does not count against the reader's memory. A file that fails is
    /// removed; one that is gone is not checked (`Ok(true)`).
    pub fn verify(
        &self,
        node: &Node,
        p1: &Node,
        p2: &Node,
    ) -> std::result::Result<bool, CacheFileError> {
        let path = self.path(node);
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
            Err(source) => return Err(CacheFileError::Io { path, source }),
        };
        let mut hash = Node::revision_hasher(p1, p2);
        let mut buf = vec![0u8; 1 << 20];
        let mut header = [0u8; HEADER];
        let mut skipped = 0;
        let mut text_len = 0usize;
        loop {
            let n = file.read(&mut buf).map_err(|source| CacheFileError::Io {
                path: path.clone(),
                source,
            })?;
            if n == 0 {
                break;
            }
            let mut chunk = &buf[..n];
            if skipped < HEADER {
                let take = (HEADER - skipped).min(chunk.len());
                header[skipped..skipped + take].copy_from_slice(&chunk[..take]);
                skipped += take;
                chunk = &chunk[take..];
            }
            text_len += chunk.len();
            hash.update(chunk);
        }
        let good =
            check_header(&header, node) == Ok(text_len) && Node(hash.finalize().into()) == *node;
        if !good {
            let _ = self.invalid(node, "its text does not hash to its node".into());
        }
        Ok(good)
    }
}

/// A manifest text written by [`ManifestCache::rebuild`] under a temporary name: removed if
/// dropped before [`PendingManifest::keep`].
pub struct PendingManifest {
    cache: ManifestCache,
    temp: PathBuf,
    file: File,
    node: Node,
}

impl PendingManifest {
    /// Syncs the file and renames it into place (over another process's copy of the same
    /// node, if any), then evicts the oldest files beyond the cache's limit.
    pub fn keep(self) -> std::result::Result<(), CacheFileError> {
        let path = self.cache.path(&self.node);
        let done = self
            .file
            .sync_data()
            .and_then(|()| std::fs::rename(&self.temp, &path));
        if let Err(source) = done {
            return Err(CacheFileError::Io { path, source });
        }
        self.cache.evict(&path);
        Ok(())
    }

    /// [`PendingManifest::keep`] in a thread of its own (a sync of ~100 MB takes a while),
    /// logging a failure.
    pub fn keep_in_background(self) {
        let spawned = std::thread::Builder::new()
            .name("keep-manifest".into())
            .spawn(move || {
                let node = self.node;
                let t0 = std::time::Instant::now();
                match self.keep() {
                    Ok(()) => tracing::debug!(node = %node.to_hex(), elapsed = ?t0.elapsed(), "manifest kept"),
                    Err(e) => tracing::warn!("manifest cache: {e}"),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("manifest cache: keeping a manifest: {e}");
        }
    }
}

impl Drop for PendingManifest {
    fn drop(&mut self) {
        // After a rename the temporary name is gone and this fails harmlessly.
        let _ = std::fs::remove_file(&self.temp);
    }
}

/// The header of a cache file holding `len` bytes of manifest `node`'s text.
fn header(node: &Node, len: u64) -> [u8; HEADER] {
    let mut header = [0u8; HEADER];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_be_bytes());
    header[12..16].copy_from_slice(&(HEADER as u32).to_be_bytes());
    header[16..36].copy_from_slice(&node.0);
    header[36..44].copy_from_slice(&len.to_be_bytes());
    header
}

/// Writes the header and text of `manifest` to a new file at `path`, and syncs it.
fn write_file(path: &Path, manifest: &Manifest) -> std::io::Result<()> {
    let mut file = File::options().write(true).create_new(true).open(path)?;
    let text: &[u8] = manifest.text();
    file.write_all(&header(&manifest.node(), text.len() as u64))?;
    file.write_all(text)?;
    file.sync_data()
}

/// Checks a cache file's header against the node it is named for; gives the length of the
/// text it announces.
fn check_header(bytes: &[u8], node: &Node) -> std::result::Result<usize, String> {
    let header = bytes
        .get(..HEADER)
        .ok_or_else(|| "shorter than its header".to_owned())?;
    if &header[..8] != MAGIC {
        return Err("not a revfs manifest cache file".into());
    }
    let version = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    if version != VERSION {
        return Err(format!(
            "format version {version}, this revfs reads {VERSION}"
        ));
    }
    let header_len = u32::from_be_bytes([header[12], header[13], header[14], header[15]]);
    if header_len as usize != HEADER {
        return Err(format!("header of {header_len} bytes, {HEADER} expected"));
    }
    if header[16..36] != node.0 {
        return Err("holds another manifest".into());
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&header[36..44]);
    usize::try_from(u64::from_be_bytes(n)).map_err(|_| "text too long".to_owned())
}

/// Checks a whole cache file: its header, that the text is all there, and that it is as
/// long as the index says (`len`, when known); gives the text's length.
fn check(bytes: &[u8], node: &Node, len: Option<usize>) -> std::result::Result<usize, String> {
    let text_len = check_header(bytes, node)?;
    if bytes.len() - HEADER != text_len {
        return Err(format!(
            "{} bytes of text, its header says {text_len}",
            bytes.len() - HEADER
        ));
    }
    if let Some(expected) = len {
        if expected != text_len {
            return Err(format!(
                "{text_len} bytes of text, the index says {expected}"
            ));
        }
    }
    Ok(text_len)
}

/// Turns a cache failure into a store error, for callers that report rather than skip.
impl From<CacheFileError> for StoreError {
    fn from(e: CacheFileError) -> Self {
        StoreError::Other(e.to_string())
    }
}

/// The cache of the repository whose `.hg` (the share source's, for a share) is `source_hg`.
pub fn cache_dir(source_hg: &Path) -> PathBuf {
    source_hg.join("cache").join("revfs").join("manifests")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(n: u8, paths: &[&str]) -> Manifest {
        let mut text = Vec::new();
        for p in paths {
            text.extend_from_slice(p.as_bytes());
            text.push(0);
            text.extend_from_slice(format!("{:040x}", n).as_bytes());
            text.push(b'\n');
        }
        // The node of a manifest without parents, as the manifest log would give it.
        let node = Node::hash_revision(&Node::NULL, &Node::NULL, &text);
        Manifest::new(text, node).unwrap()
    }

    #[test]
    fn a_stored_manifest_comes_back_mapped_and_equal() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ManifestCache::new(dir.path().join("m"), 1 << 20);
        let m = manifest(1, &["a", "b/c", "d"]);
        assert!(cache.open(&m.node(), None).unwrap().is_none());
        cache.store(&m).unwrap();
        let back = cache
            .open(&m.node(), Some(m.text().len()))
            .unwrap()
            .unwrap();
        assert!(back.text().is_mapped());
        assert_eq!(&back.text()[..], &m.text()[..]);
        assert_eq!(back.find(b"b/c").unwrap().unwrap().path, b"b/c");
        assert!(cache.verify(&m.node(), &Node::NULL, &Node::NULL).unwrap());
        // Storing it again changes nothing.
        cache.store(&m).unwrap();
        assert!(cache.path(&m.node()).exists());
    }

    #[test]
    fn a_file_that_is_not_what_its_name_says_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ManifestCache::new(dir.path().to_owned(), 1 << 20);
        let m = manifest(1, &["a", "b"]);
        let other = manifest(2, &["a", "b"]);
        cache.store(&m).unwrap();
        let path = cache.path(&m.node());
        let good = std::fs::read(&path).unwrap();
        let len = Some(m.text().len());
        // Each damage: the file, what `open` says.
        let mut wrong_node = good.clone();
        wrong_node[16..36].copy_from_slice(&other.node().0);
        let mut wrong_version = good.clone();
        wrong_version[11] = 2;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                good[..good.len() - 1].to_vec(),
                "bytes of text, its header says",
            ),
            (good[..10].to_vec(), "shorter than its header"),
            (wrong_node, "holds another manifest"),
            (wrong_version, "format version 2"),
            (b"junk".repeat(20), "not a revfs manifest cache file"),
        ];
        for (bytes, says) in cases {
            std::fs::write(&path, &bytes).unwrap();
            let e = cache.open(&m.node(), len).err().unwrap().to_string();
            assert!(e.contains(says), "{e}");
            assert!(!path.exists(), "{says}: not removed");
        }
        // The index's length disagrees.
        cache.store(&m).unwrap();
        let e = cache.open(&m.node(), Some(3)).err().unwrap().to_string();
        assert!(e.contains("the index says 3"), "{e}");
        // A changed byte of text passes the checks on open and fails the hash.
        cache.store(&m).unwrap();
        let mut flipped = good.clone();
        let at = good.len() - 3;
        flipped[at] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert!(cache.open(&m.node(), len).unwrap().is_some());
        assert!(!cache.verify(&m.node(), &Node::NULL, &Node::NULL).unwrap());
        assert!(!path.exists());
        assert!(cache.verify(&m.node(), &Node::NULL, &Node::NULL).unwrap());
    }

    #[test]
    fn eviction_keeps_the_newest_and_the_recently_used_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let ms: Vec<Manifest> = (1..=4).map(|n| manifest(n, &["a", "b", "c"])).collect();
        let size = (HEADER + ms[0].text().len()) as u64;
        let cache = ManifestCache::new(dir.path().to_owned(), 2 * size);
        let old = SystemTime::now() - Duration::from_secs(100);
        for (i, m) in ms.iter().take(3).enumerate() {
            cache.store(m).unwrap();
            let f = File::options()
                .write(true)
                .open(cache.path(&m.node()))
                .unwrap();
            f.set_modified(old + Duration::from_secs(i as u64)).unwrap();
        }
        // 1 went when 3 came; 2 is used again, so 3 is the oldest when 4 comes.
        assert!(!cache.path(&ms[0].node()).exists());
        cache.touch(&ms[1].node());
        let stale = dir.path().join(".tmp-1-1");
        std::fs::write(&stale, b"x").unwrap();
        File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old - STALE_TEMP)
            .unwrap();
        cache.store(&ms[3]).unwrap();
        let kept: Vec<bool> = ms.iter().map(|m| cache.path(&m.node()).exists()).collect();
        assert_eq!(kept, [false, true, false, true]);
        assert!(!stale.exists());
        // A limit below one file still keeps the newest.
        let tiny = ManifestCache::new(dir.path().to_owned(), 1);
        tiny.store(&ms[0]).unwrap();
        let kept: Vec<bool> = ms.iter().map(|m| tiny.path(&m.node()).exists()).collect();
        assert_eq!(kept, [true, false, false, false]);
        // 0 keeps nothing.
        let off = ManifestCache::new(dir.path().join("off"), 0);
        off.store(&ms[0]).unwrap();
        assert!(off.open(&ms[0].node(), None).unwrap().is_none());
        assert!(!dir.path().join("off").exists());
    }
    #[test]
    fn a_manifest_rebuilt_into_the_cache_is_mapped_at_once_and_kept_in_place_by_keep() {
        use crate::node::NULL_REV;
        use crate::revlog::TextCache;
        use crate::revlog_writer::{Compression, RevlogWriter};
        let dir = tempfile::tempdir().unwrap();
        let (ip, dp) = (
            dir.path().join("00manifest.i"),
            dir.path().join("00manifest.d"),
        );
        // Random nodes, so that the revlog is big enough to be split (a data file).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut lines: Vec<String> = (0..10_000)
            .map(|i| {
                let mut hex = String::new();
                for _ in 0..3 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    hex.push_str(&format!("{x:016x}"));
                }
                format!("d{}/f{i}\0{}\n", i % 7, &hex[..40])
            })
            .collect();
        lines.sort();
        let m0 = Manifest::new(lines.concat().into_bytes(), Node::NULL).unwrap();
        lines.push(format!("zz\0{}\n", "1".repeat(40)));
        let m1 = Manifest::new(lines.concat().into_bytes(), Node::NULL).unwrap();
        let mut w = RevlogWriter::open(&ip, &dp, true, Compression::Zstd)
            .unwrap()
            .store_deltas(true);
        let (r0, _) = w.add(m0.text(), NULL_REV, NULL_REV, 0, true).unwrap();
        let (r1, n1) = w.add(m1.text(), r0, NULL_REV, 1, true).unwrap();
        w.finish().unwrap();
        let log = Revlog::open(&ip, &dp, "00manifest.i".into(), TextCache::new(0), 0).unwrap();
        assert!(log.entry(r1).unwrap().base != r1, "a delta");
        let cache = ManifestCache::new(dir.path().join("m"), 1 << 30);
        let (m, pending) = cache.rebuild(&log, r1, &n1).unwrap();
        assert!(m.text().is_mapped());
        assert_eq!(&m.text()[..], &m1.text()[..]);
        assert_eq!(m.node(), n1);
        assert!(dp.exists(), "a split revlog");
        // Not in place before `keep`; in place, equal and checked after.
        assert!(cache.open(&n1, None).unwrap().is_none());
        pending.keep().unwrap();
        let back = cache.open(&n1, Some(m1.text().len())).unwrap().unwrap();
        assert_eq!(&back.text()[..], &m1.text()[..]);
        assert!(cache
            .verify(&n1, &log.node(r0).unwrap(), &Node::NULL)
            .unwrap());
        let names = |d: &Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(cache.dir()), [format!("{}.manifest", n1.to_hex())]);
        // A rebuild dropped without `keep` leaves nothing; one of a damaged revision is an
        // error and leaves nothing either.
        let (_, pending) = cache.rebuild(&log, r0, &log.node(r0).unwrap()).unwrap();
        drop(pending);
        let mut data = std::fs::read(&dp).unwrap();
        let e = log.entry(r1).unwrap();
        let mid = (e.offset + e.compressed_len as u64 / 2) as usize;
        data[mid] ^= 0x55;
        std::fs::write(&dp, &data).unwrap();
        let log = Revlog::open(&ip, &dp, "00manifest.i".into(), TextCache::new(0), 0).unwrap();
        std::fs::remove_file(cache.path(&n1)).unwrap();
        assert!(cache.rebuild(&log, r1, &n1).is_err());
        assert!(names(cache.dir()).is_empty(), "{:?}", names(cache.dir()));
    }
}
