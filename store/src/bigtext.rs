//! Rebuilt texts of big file revisions, kept on disk: a file too big for the in-memory text
//! cache is rebuilt once (streaming, with bounded memory) into a file of this cache, and
//! every read of it is a `pread` from there, so reading a 1 GB file costs one rebuild, not
//! one per read request.
//!
//! The cache is a directory (the mount's state directory keeps it as `texts/`), bounded in
//! bytes and evicted least recently used. Each entry holds the content (metadata removed)
//! of one file revision, named by its node; its header (docs/FORMATS.md, "The text cache")
//! names the node and the length, and the boot it was written in. It only ever holds what
//! the store can rebuild, so it needs no fsync: a kill -9 leaves complete entries (the page
//! cache has them) or temporary files (removed at the next open), and after a machine crash
//! entries of an earlier boot are not trusted but deleted.

use crate::error::{Result, StoreError};
use crate::filelog::Filelog;
use crate::node::{Node, Rev};
use lru::LruCache;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// The first bytes of every entry.
const MAGIC: &[u8; 8] = b"RVFSTEXT";
/// The entry format this code writes and reads.
pub const TEXT_CACHE_VERSION: u32 = 1;
/// Texts bigger than this (raw, metadata included) are rebuilt into this cache and read
/// from it, rather than held whole in memory.
pub const BIG_TEXT: u64 = 4 << 20;
/// Bytes before the content.
const HEADER_LEN: u64 = 64;
/// Entries kept open at once (each holds a descriptor).
pub const MAX_OPEN: usize = 16;
/// Prefix of entries being written.
const TMP_PREFIX: &str = "tmp-";

/// One cached text: its content is `len` bytes of `file` from [`HEADER_LEN`].
pub struct BigText {
    file: File,
    len: u64,
}

impl BigText {
    /// The content's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Up to `size` bytes of the content from `offset`.
    pub fn read(&self, offset: u64, size: usize) -> std::io::Result<Vec<u8>> {
        let start = offset.min(self.len);
        let n = usize::try_from(self.len - start)
            .unwrap_or(usize::MAX)
            .min(size);
        let mut buf = vec![0u8; n];
        self.file.read_exact_at(&mut buf, HEADER_LEN + start)?;
        Ok(buf)
    }

    /// The whole content as a reader (for a copy or a comparison in bounded blocks).
    pub fn reader(&self) -> impl std::io::Read + '_ {
        BigTextReader { text: self, at: 0 }
    }
}

struct BigTextReader<'a> {
    text: &'a BigText,
    at: u64,
}

impl std::io::Read for BigTextReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from(self.text.len - self.at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.text
            .file
            .read_exact_at(&mut buf[..n], HEADER_LEN + self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

struct State {
    /// Entries on disk and their sizes, least recently used first out.
    on_disk: LruCache<Node, u64>,
    bytes: u64,
    /// Entries open now.
    open: LruCache<Node, Arc<BigText>>,
}

/// A build in progress, that others wait for.
#[derive(Default)]
struct Build {
    done: Mutex<bool>,
    wake: Condvar,
}

/// The on-disk cache of big texts (see the module documentation).
pub struct BigTextCache {
    dir: PathBuf,
    budget: u64,
    boot: [u8; 16],
    state: Mutex<State>,
    building: Mutex<HashMap<Node, Arc<Build>>>,
    next_tmp: std::sync::atomic::AtomicU64,
    /// Texts rebuilt since the cache was opened.
    builds: std::sync::atomic::AtomicU64,
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), or zeroes where there is none.
fn boot_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let hexits: String = text.trim().chars().filter(|c| *c != '-').collect();
        let _ = hex::decode_to_slice(hexits, &mut id);
    }
    id
}

impl BigTextCache {
    /// Opens (creating it) the cache in `dir`, holding at most `budget` bytes: removes what
    /// a killed writer left, and every entry that is damaged, of another format or of an
    /// earlier boot.
    pub fn open(dir: &Path, budget: u64) -> Result<BigTextCache> {
        use std::os::unix::fs::DirBuilderExt;
        let io = |e| StoreError::io(dir, e);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
        let cache = BigTextCache {
            dir: dir.to_owned(),
            budget,
            boot: boot_id(),
            state: Mutex::new(State {
                on_disk: LruCache::unbounded(),
                bytes: 0,
                open: LruCache::new(
                    std::num::NonZeroUsize::new(MAX_OPEN).unwrap_or(std::num::NonZeroUsize::MIN),
                ),
            }),
            building: Mutex::new(HashMap::new()),
            next_tmp: Default::default(),
            builds: Default::default(),
        };
        let mut found: Vec<(std::time::SystemTime, Node, u64)> = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io)?.flatten() {
            let path = e.path();
            let name = e.file_name();
            let keep = name
                .to_str()
                .and_then(|n| Node::from_hex(n.as_bytes()))
                .and_then(|node| {
                    let file = File::open(&path).ok()?;
                    let len = cache.check(&file, &node).ok()?;
                    let time = file.metadata().ok()?.modified().ok()?;
                    Some((time, node, HEADER_LEN + len))
                });
            match keep {
                Some(k) => found.push(k),
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        found.sort();
        {
            let mut st = cache.lock();
            for (_, node, size) in found {
                st.on_disk.put(node, size);
                st.bytes += size;
            }
        }
        cache.evict();
        Ok(cache)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes of entries on disk.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Texts rebuilt since the cache was opened.
    pub fn builds(&self) -> u64 {
        self.builds.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn path_of(&self, node: &Node) -> PathBuf {
        self.dir.join(node.to_hex())
    }

    /// Checks an entry's header against `node` and this boot; its content length.
    fn check(&self, file: &File, node: &Node) -> std::result::Result<u64, String> {
        let mut h = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut h, 0)
            .map_err(|e| format!("header: {e}"))?;
        if &h[0..8] != MAGIC {
            return Err("not a revfs text cache entry".into());
        }
        let version = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
        if version != TEXT_CACHE_VERSION {
            return Err(format!("format version {version}"));
        }
        if u32::from_be_bytes([h[12], h[13], h[14], h[15]]) as u64 != HEADER_LEN {
            return Err("bad header length".into());
        }
        if h[16..32] != self.boot {
            return Err("written before the last boot".into());
        }
        if h[32..52] != node.0 {
            return Err("another revision".into());
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&h[52..60]);
        let len = u64::from_be_bytes(len);
        let size = file.metadata().map_err(|e| e.to_string())?.len();
        if size != HEADER_LEN + len {
            return Err(format!(
                "{size} bytes, the header says {}",
                HEADER_LEN + len
            ));
        }
        Ok(len)
    }

    fn header(&self, node: &Node, len: u64) -> [u8; HEADER_LEN as usize] {
        let mut h = [0u8; HEADER_LEN as usize];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&TEXT_CACHE_VERSION.to_be_bytes());
        h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_be_bytes());
        h[16..32].copy_from_slice(&self.boot);
        h[32..52].copy_from_slice(&node.0);
        h[52..60].copy_from_slice(&len.to_be_bytes());
        h
    }

    /// The text of revision `rev` (node `node`) of `filelog`: from the cache, else rebuilt
    /// into it. Only one thread rebuilds a given text; others wait for it. `progress` is
    /// called as the rebuild goes (and while waiting for another's), so that a caller can
    /// show it is working.
    pub fn get(
        &self,
        filelog: &Filelog,
        rev: Rev,
        node: Node,
        progress: &dyn Fn(),
    ) -> Result<Arc<BigText>> {
        loop {
            if let Some(t) = self.cached(&node) {
                return Ok(t);
            }
            let (build, mine) = {
                let mut b = self.building.lock().unwrap_or_else(|p| p.into_inner());
                match b.get(&node) {
                    Some(build) => (build.clone(), false),
                    None => {
                        let build = Arc::new(Build::default());
                        b.insert(node, build.clone());
                        (build, true)
                    }
                }
            };
            if !mine {
                let mut done = build.done.lock().unwrap_or_else(|p| p.into_inner());
                while !*done {
                    progress();
                    done = match build
                        .wake
                        .wait_timeout(done, std::time::Duration::from_millis(500))
                    {
                        Ok((d, _)) => d,
                        Err(p) => p.into_inner().0,
                    };
                }
                // Built (or failed): look again; a failure is rebuilt here.
                continue;
            }
            // A build that ended between the look above and taking the table put its text
            // in the cache before it left the table: look again rather than build twice.
            let result = match self.cached(&node) {
                Some(t) => Ok(t),
                None => self.build(filelog, rev, node, progress),
            };
            self.building
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&node);
            *build.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
            build.wake.notify_all();
            return result;
        }
    }

    /// The entry for `node` if the cache has it (opening it from disk when needed).
    fn cached(&self, node: &Node) -> Option<Arc<BigText>> {
        let mut st = self.lock();
        if let Some(t) = st.open.get(node) {
            let t = t.clone();
            st.on_disk.get(node);
            return Some(t);
        }
        st.on_disk.get(node)?;
        let path = self.path_of(node);
        let opened = File::open(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| Ok((self.check(&f, node)?, f)));
        match opened {
            Ok((len, file)) => {
                let t = Arc::new(BigText { file, len });
                st.open.put(*node, t.clone());
                Some(t)
            }
            Err(why) => {
                tracing::warn!(path = %path.display(), "text cache entry dropped: {why}");
                if let Some(size) = st.on_disk.pop(node) {
                    st.bytes -= size;
                }
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    fn build(
        &self,
        filelog: &Filelog,
        rev: Rev,
        node: Node,
        progress: &dyn Fn(),
    ) -> Result<Arc<BigText>> {
        self.builds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = self
            .next_tmp
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!("{TMP_PREFIX}{}-{n}", std::process::id()));
        let t0 = std::time::Instant::now();
        let result = self.write_entry(&tmp, filelog, rev, &node, progress);
        let (file, len) = match result {
            Ok(x) => x,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let path = self.path_of(&node);
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(StoreError::io(&path, e));
        }
        tracing::info!(
            file = %String::from_utf8_lossy(filelog.path()),
            rev,
            node = %node.to_hex(),
            bytes = len,
            elapsed = ?t0.elapsed(),
            "text cache: rebuilt"
        );
        let t = Arc::new(BigText { file, len });
        {
            let mut st = self.lock();
            if let Some(old) = st.on_disk.put(node, HEADER_LEN + len) {
                st.bytes -= old;
            }
            st.bytes += HEADER_LEN + len;
            st.open.put(node, t.clone());
        }
        self.evict();
        Ok(t)
    }

    fn write_entry(
        &self,
        tmp: &Path,
        filelog: &Filelog,
        rev: Rev,
        node: &Node,
        progress: &dyn Fn(),
    ) -> Result<(File, u64)> {
        let io = |e| StoreError::io(tmp, e);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(io)?;
        file.seek(SeekFrom::Start(HEADER_LEN)).map_err(io)?;
        let len = {
            let mut out = Progressing {
                inner: std::io::BufWriter::with_capacity(1 << 20, &file),
                progress,
            };
            let len = filelog.write_content(rev, &self.dir, &mut out)?;
            out.inner.flush().map_err(io)?;
            len
        };
        file.write_all_at(&self.header(node, len), 0).map_err(io)?;
        Ok((file, len))
    }

    /// Removes the least recently used entries beyond the budget (an open one stays
    /// readable through its descriptor until it is closed).
    fn evict(&self) {
        let mut st = self.lock();
        while st.bytes > self.budget {
            let Some((node, size)) = st.on_disk.pop_lru() else {
                break;
            };
            st.bytes -= size;
            let _ = std::fs::remove_file(self.path_of(&node));
        }
    }
}

/// A writer that reports each write.
struct Progressing<'a, W: Write> {
    inner: W,
    progress: &'a dyn Fn(),
}

impl<W: Write> Write for Progressing<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (self.progress)();
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NULL_REV;
    use crate::revlog::{Revlog, TextCache};
    use crate::revlog_writer::{Compression, RevlogWriter};

    /// A filelog of three revisions of a ~200 KB text, the first with a copy header.
    fn filelog(dir: &Path) -> (Filelog, Vec<Vec<u8>>) {
        let (ip, dp) = (dir.join("f.i"), dir.join("f.d"));
        let mut w = RevlogWriter::open(&ip, &dp, true, Compression::Zlib)
            .unwrap()
            .store_deltas(true);
        let mut contents = Vec::new();
        let mut prev = NULL_REV;
        for k in 0..3u32 {
            let content: Vec<u8> = (0..20_000u32)
                .flat_map(|i| {
                    format!("{:09}\n", i.wrapping_mul(7919) ^ (k * (i % 97))).into_bytes()
                })
                .collect();
            let mut raw = Vec::new();
            if k == 0 {
                raw.extend_from_slice(
                    b"\x01\ncopy: a\ncopyrev: 0000000000000000000000000000000000000000\n\x01\n",
                );
            }
            raw.extend_from_slice(&content);
            let (rev, _) = w.add(&raw, prev, NULL_REV, k as Rev, true).unwrap();
            prev = rev;
            contents.push(content);
        }
        w.finish().unwrap();
        let rl = Revlog::open(&ip, &dp, "data/f.i".into(), TextCache::new(0), 0).unwrap();
        (Filelog::new(b"f".to_vec(), rl), contents)
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn texts_are_built_once_kept_across_opens_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let (fl, contents) = filelog(tmp.path());
        let dir = tmp.path().join("texts");
        let cache = BigTextCache::open(&dir, 1 << 30).unwrap();
        let node = |r: Rev| fl.node(r).unwrap();
        let calls = std::cell::Cell::new(0);
        let count = || calls.set(calls.get() + 1);
        for r in 0..3 {
            let t = cache.get(&fl, r, node(r), &count).unwrap();
            assert_eq!(t.len(), contents[r as usize].len() as u64);
            assert_eq!(t.read(0, usize::MAX).unwrap(), contents[r as usize]);
            assert_eq!(t.read(100, 10).unwrap(), &contents[r as usize][100..110]);
            assert!(t.read(t.len() + 5, 10).unwrap().is_empty());
        }
        assert!(calls.get() > 0, "the rebuild reports progress");
        // Served from the cache: no rebuild (no progress reported).
        calls.set(0);
        cache.get(&fl, 1, node(1), &count).unwrap();
        assert_eq!(calls.get(), 0);
        assert_eq!(entries(&dir).len(), 3);
        // A new cache over the same directory keeps them; a left-over temporary file and a
        // damaged entry go.
        std::fs::write(dir.join("tmp-1-1"), b"half").unwrap();
        let damaged = dir.join(node(2).to_hex());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&damaged)
            .unwrap();
        f.set_len(100).unwrap();
        // An entry named for one node that holds another.
        std::fs::copy(dir.join(node(0).to_hex()), dir.join(node(1).to_hex())).unwrap();
        drop(cache);
        let cache = BigTextCache::open(&dir, 1 << 30).unwrap();
        assert_eq!(entries(&dir), [node(0).to_hex()]);
        calls.set(0);
        let t = cache.get(&fl, 1, node(1), &count).unwrap();
        assert!(calls.get() > 0, "rebuilt");
        assert_eq!(t.read(0, usize::MAX).unwrap(), contents[1]);
        // An entry of an earlier boot is not trusted.
        let p0 = dir.join(node(0).to_hex());
        let mut bytes = std::fs::read(&p0).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&p0, &bytes).unwrap();
        drop(cache);
        let cache = BigTextCache::open(&dir, 1 << 30).unwrap();
        assert!(!entries(&dir).contains(&node(0).to_hex()));
        assert_eq!(
            cache
                .get(&fl, 0, node(0), &|| ())
                .unwrap()
                .read(0, usize::MAX)
                .unwrap(),
            contents[0]
        );
    }

    #[test]
    fn the_budget_evicts_the_least_recently_used_and_open_texts_stay_readable() {
        let tmp = tempfile::tempdir().unwrap();
        let (fl, contents) = filelog(tmp.path());
        let dir = tmp.path().join("texts");
        let one = contents[0].len() as u64 + HEADER_LEN;
        // Room for two entries.
        let cache = BigTextCache::open(&dir, 2 * one + 10).unwrap();
        let node = |r: Rev| fl.node(r).unwrap();
        let t0 = cache.get(&fl, 0, node(0), &|| ()).unwrap();
        cache.get(&fl, 1, node(1), &|| ()).unwrap();
        cache.get(&fl, 0, node(0), &|| ()).unwrap();
        cache.get(&fl, 2, node(2), &|| ()).unwrap();
        // 1 was the least recently used.
        assert_eq!(entries(&dir), {
            let mut v = vec![node(0).to_hex(), node(2).to_hex()];
            v.sort();
            v
        });
        assert!(cache.bytes() <= 2 * one + 10);
        // A text bigger than the whole budget is still served, from its open descriptor.
        let small = BigTextCache::open(&tmp.path().join("small"), 10).unwrap();
        let t = small.get(&fl, 2, node(2), &|| ()).unwrap();
        assert!(entries(&tmp.path().join("small")).is_empty());
        assert_eq!(t.read(0, usize::MAX).unwrap(), contents[2]);
        assert_eq!(t0.read(0, usize::MAX).unwrap(), contents[0]);
    }

    #[test]
    fn readers_of_one_text_at_once_share_one_rebuild() {
        let tmp = tempfile::tempdir().unwrap();
        let (fl, contents) = filelog(tmp.path());
        let cache = BigTextCache::open(&tmp.path().join("texts"), 1 << 30).unwrap();
        let node = fl.node(2).unwrap();
        let builds = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let t = cache.get(&fl, 2, node, &|| ()).unwrap();
                    assert_eq!(t.read(0, usize::MAX).unwrap(), contents[2]);
                    builds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                });
            }
        });
        assert_eq!(builds.into_inner(), 4);
        assert_eq!(cache.builds(), 1);
        assert_eq!(entries(&tmp.path().join("texts")).len(), 1);
    }
}
