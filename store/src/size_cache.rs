//! The size cache: the content size of file revisions by file node (and, for a text
//! checked against its node, the CRC-32 of its parents' nodes and the stored chunk it was
//! rebuilt from: `revlog::CheckedTexts`), kept in the repository's cache directory
//! (`.hg/cache/revfs/sizes`, the share source's for a share), so that a lookup after a
//! remount knows a file's size without opening its filelog (`ls -l`, `find -size`, a
//! build's stat of every source). A node names one text, whatever the path, so its size
//! never changes. The format is in docs/FORMATS.md ("Size cache").
//!
//! The file holds sorted records and is mapped: a lookup is a binary search in it, nothing
//! on the heap. Sizes learned since are kept in memory and written out in the background,
//! merged with the file into a new one renamed into place, once they are many (a quarter
//! of the file, 4,096 at least) and when the process ends ([`SizeCache::save`]). A file
//! that does not check out (magic, version, length, checksum) is removed and started again.
//! One cache per file is shared by every repository handle of the process.

use crate::node::Node;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};

const MAGIC: &[u8; 8] = b"RVFSSIZE";
/// The format version this code writes and reads.
pub const VERSION: u32 = 2;
/// magic, version, record count (u64), crc32 of the records, zeros.
const HEADER: usize = 32;
/// node, size (u64 BE, its top bit set when a checked chunk follows), checked chunk (u32
/// BE).
const RECORD: usize = 32;
/// The size's bit that says the record names a checked chunk.
const CHECKED: u64 = 1 << 63;
/// Sizes learned before a write is due, at least.
const MIN_BATCH: usize = 4096;

/// The sorted records of the file, mapped.
struct Mapped {
    map: memmap2::Mmap,
    count: usize,
}

impl Mapped {
    fn record(&self, i: usize) -> (&[u8], Known) {
        let at = HEADER + i * RECORD;
        let r = &self.map[at..at + RECORD];
        let mut size = [0u8; 8];
        size.copy_from_slice(&r[20..28]);
        let size = u64::from_be_bytes(size);
        let mut chunk = [0u8; 4];
        chunk.copy_from_slice(&r[28..32]);
        let known = Known {
            size: size & !CHECKED,
            checked: (size & CHECKED != 0).then_some(u32::from_be_bytes(chunk)),
        };
        (&r[..20], known)
    }

    fn get(&self, node: &Node) -> Option<Known> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (n, size) = self.record(mid);
            match n.cmp(&node.0[..]) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(size),
            }
        }
        None
    }
}

/// What the cache knows of a file revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    /// Its content size.
    size: u64,
    /// The CRC-32 of its parents' nodes and the stored chunk (a whole text, not a delta)
    /// that rebuilt its text when that text was checked against its node (SHA-1), if it
    /// was.
    checked: Option<u32>,
}

impl Known {
    /// The two merged: the size, and a checked chunk either knows (`self`'s first).
    fn or(self, other: Known) -> Known {
        Known {
            size: self.size,
            checked: self.checked.or(other.checked),
        }
    }
}

struct State {
    /// `None` until first used (a command that never asks for a size never reads the file).
    mapped: Option<Option<Mapped>>,
    learned: HashMap<Node, Known>,
    /// A write is under way or wanted.
    saving: bool,
    /// Past the limit: nothing more is learned.
    full: bool,
}

/// The size cache of one repository (see the module's documentation).
pub struct SizeCache {
    path: PathBuf,
    limit: u64,
    state: Mutex<State>,
    wake: Condvar,
}

impl std::fmt::Debug for SizeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SizeCache({})", self.path.display())
    }
}

/// The caches of this process, by file.
static CACHES: OnceLock<Mutex<HashMap<PathBuf, Weak<SizeCache>>>> = OnceLock::new();

/// Where the size cache of a repository whose store is in `source_hg` lives.
pub fn cache_path(source_hg: &Path) -> PathBuf {
    source_hg.join("cache").join("revfs").join("sizes")
}

impl SizeCache {
    /// The cache at `path` (shared with every other handle of this process on that file),
    /// at most `limit` bytes on disk; `None` when `limit` is 0 (no cache).
    pub fn shared(path: PathBuf, limit: u64) -> Option<Arc<SizeCache>> {
        if limit == 0 {
            return None;
        }
        let mut all = CACHES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(c) = all.get(&path).and_then(Weak::upgrade) {
            return Some(c);
        }
        all.retain(|_, w| w.strong_count() > 0);
        let c = Arc::new(SizeCache::new(path.clone(), limit));
        all.insert(path, Arc::downgrade(&c));
        let weak = Arc::downgrade(&c);
        let spawned = std::thread::Builder::new()
            .name("revfs-sizes".into())
            .spawn(move || writer(weak));
        if let Err(e) = spawned {
            tracing::warn!("size cache: no writer thread: {e}");
        }
        Some(c)
    }

    /// A cache of its own on `path` (not shared, no writer thread: [`SizeCache::shared`]).
    fn new(path: PathBuf, limit: u64) -> SizeCache {
        SizeCache {
            path,
            limit,
            state: Mutex::new(State {
                mapped: None,
                learned: HashMap::new(),
                saving: false,
                full: false,
            }),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is known of file revision `node`.
    fn known(&self, node: &Node) -> Option<Known> {
        let mut st = self.lock();
        if st.mapped.is_none() {
            st.mapped = Some(self.open());
        }
        let mapped = st
            .mapped
            .as_ref()
            .and_then(Option::as_ref)
            .and_then(|m| m.get(node));
        match (st.learned.get(node), mapped) {
            (Some(&l), Some(m)) => Some(l.or(m)),
            (l, m) => l.copied().or(m),
        }
    }

    /// The size of file revision `node`, if known: a learned one is not looked up in the
    /// file (a lookup's path).
    pub fn get(&self, node: &Node) -> Option<u64> {
        if let Some(k) = self.lock().learned.get(node) {
            return Some(k.size);
        }
        self.known(node).map(|k| k.size)
    }

    /// The CRC-32 of the parents' nodes and the stored chunk that rebuilt the text of file
    /// revision `node` when that text was checked against its node, if it was
    /// ([`SizeCache::put_checked`]).
    pub fn checked_chunk(&self, node: &Node) -> Option<u32> {
        self.known(node)?.checked
    }

    /// Keeps the size of file revision `node`; a write of the file follows once enough are
    /// new.
    pub fn put(&self, node: Node, size: u64) {
        self.learn(
            node,
            Known {
                size,
                checked: None,
            },
        );
    }

    /// Keeps the size of file revision `node`, and `chunk`: the CRC-32 of the parents'
    /// nodes and the stored chunk (a whole text) whose text was just checked against
    /// `node`. A later rebuild from a chunk with that CRC-32 rebuilds the same text
    /// (decompression is deterministic), and a chunk or parents damaged since have another
    /// CRC-32 (short of a 1 in 4 billion chance): the text is checked again.
    pub fn put_checked(&self, node: Node, size: u64, chunk: u32) {
        self.learn(
            node,
            Known {
                size,
                checked: Some(chunk),
            },
        );
    }

    fn learn(&self, node: Node, known: Known) {
        if known.size & CHECKED != 0 {
            return;
        }
        let mut st = self.lock();
        if st.full {
            return;
        }
        let count = st
            .mapped
            .as_ref()
            .and_then(Option::as_ref)
            .map_or(0, |m| m.count);
        if (HEADER + (count + st.learned.len() + 1) * RECORD) as u64 > self.limit {
            tracing::info!(
                path = %self.path.display(),
                limit = self.limit,
                "size cache full: no more sizes kept"
            );
            st.full = true;
            return;
        }
        let known = match st.learned.get(&node) {
            Some(&before) => known.or(before),
            None => known,
        };
        st.learned.insert(node, known);
        if st.learned.len() >= MIN_BATCH.max(count / 4) && !st.saving {
            st.saving = true;
            self.wake.notify_all();
        }
    }

    /// Writes what was learned into the file now (at the end of a mount), if anything. A
    /// file that cannot be written (a read-only repository, a full disk) turns the cache
    /// off for this process: nothing more is learned.
    pub fn save(&self) {
        if let Err(e) = self.write_out() {
            tracing::warn!(
                "size cache {}: {e}: no more sizes kept",
                self.path.display()
            );
            let mut st = self.lock();
            st.full = true;
            st.learned.clear();
        }
    }

    /// Maps the file; a file that does not check out is removed.
    fn open(&self) -> Option<Mapped> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!("size cache {}: {e}", self.path.display());
                return None;
            }
        };
        // SAFETY: the file is only ever replaced by a rename, never written in place; a map
        // of the old one stays valid.
        let map = match unsafe { memmap2::Mmap::map(&file) } {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("size cache {}: {e}", self.path.display());
                return None;
            }
        };
        match check(&map) {
            Ok(count) => {
                let _ = map.advise(memmap2::Advice::Random);
                Some(Mapped { map, count })
            }
            Err(why) => {
                tracing::warn!("size cache {}: {why}: removed", self.path.display());
                let _ = std::fs::remove_file(&self.path);
                None
            }
        }
    }

    /// Merges the learned sizes with the file's into a new file renamed into place.
    fn write_out(&self) -> std::io::Result<()> {
        let mut learned: Vec<(Node, Known)> = {
            let st = self.lock();
            if st.learned.is_empty() {
                return Ok(());
            }
            st.learned.iter().map(|(n, s)| (*n, *s)).collect()
        };
        learned.sort_unstable_by_key(|(n, _)| n.0);
        // The file as it is now (another process may have written it meanwhile).
        let current = self.open();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        crate::cache_dir::create(dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".sizes-")
            .tempfile_in(dir)?;
        // The file's records and the learned ones, both sorted, merged; a node in both
        // keeps one record (a node has one size, whoever found it).
        let old_count = current.as_ref().map_or(0, |m| m.count);
        let mut old = current
            .iter()
            .flat_map(|m| (0..m.count).map(move |i| m.record(i)))
            .peekable();
        let mut body: Vec<u8> = Vec::with_capacity((old_count + learned.len()) * RECORD);
        let mut count = 0u64;
        let mut push = |n: &[u8], k: Known| {
            body.extend_from_slice(n);
            let flag = if k.checked.is_some() { CHECKED } else { 0 };
            body.extend_from_slice(&(k.size | flag).to_be_bytes());
            body.extend_from_slice(&k.checked.unwrap_or(0).to_be_bytes());
            count += 1;
        };
        for (n, k) in &learned {
            let mut k = *k;
            while let Some(&(o, ok)) = old.peek() {
                if o > &n.0[..] {
                    break;
                }
                old.next();
                if o < &n.0[..] {
                    push(o, ok);
                } else {
                    // The same node: what the file knew too (a checked chunk) stays.
                    k = k.or(ok);
                }
            }
            push(&n.0, k);
        }
        for (o, os) in old {
            push(o, os);
        }
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_be_bytes());
        header[12..20].copy_from_slice(&count.to_be_bytes());
        header[20..24].copy_from_slice(&crc32fast::hash(&body).to_be_bytes());
        // Readable as the repository's other caches are (tempfile makes it 0600).
        tmp.as_file()
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        tmp.write_all(&header)?;
        tmp.write_all(&body)?;
        tmp.flush()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        // Map the new file; forget what it now holds.
        let mapped = self.open();
        let mut st = self.lock();
        if let Some(m) = &mapped {
            st.learned
                .retain(|n, k| m.get(n).is_none_or(|f| f.or(*k) != f));
        }
        st.mapped = Some(mapped);
        Ok(())
    }
}

/// The record count of a mapped file, or why it is not a size cache of this version.
fn check(map: &[u8]) -> Result<usize, String> {
    if map.len() < HEADER || &map[..8] != MAGIC {
        return Err("not a size cache".into());
    }
    let word = |at: usize| u32::from_be_bytes([map[at], map[at + 1], map[at + 2], map[at + 3]]);
    let version = word(8);
    if version != VERSION {
        return Err(format!("version {version}, this revfs reads {VERSION}"));
    }
    let mut count = [0u8; 8];
    count.copy_from_slice(&map[12..20]);
    let count = usize::try_from(u64::from_be_bytes(count)).map_err(|_| "bad count")?;
    if count
        .checked_mul(RECORD)
        .and_then(|b| b.checked_add(HEADER))
        != Some(map.len())
    {
        return Err(format!("{} bytes for {count} records", map.len()));
    }
    if crc32fast::hash(&map[HEADER..]) != word(20) {
        return Err("checksum mismatch".into());
    }
    Ok(count)
}

/// Writes a cache out whenever [`SizeCache::put`] asks, until the cache is dropped.
fn writer(cache: Weak<SizeCache>) {
    loop {
        let Some(c) = cache.upgrade() else {
            return;
        };
        {
            let st = c.lock();
            let st = c
                .wake
                .wait_timeout_while(st, std::time::Duration::from_secs(5), |s| !s.saving)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
            if !st.saving {
                continue;
            }
        }
        c.save();
        c.lock().saving = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: u32) -> Node {
        let mut n = [0u8; 20];
        n[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
        n[4..8].copy_from_slice(&i.to_be_bytes());
        Node(n)
    }

    #[test]
    fn sizes_written_out_are_found_again_by_another_cache_on_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sizes");
        let a = SizeCache::new(path.clone(), 1 << 20);
        for i in 0..300 {
            a.put(node(i), u64::from(i) * 7);
        }
        a.save();
        for i in 300..400 {
            a.put(node(i), u64::from(i) * 7);
        }
        a.put(node(5), 35);
        a.save();
        assert!(a.lock().learned.is_empty());
        let b = SizeCache::new(path.clone(), 1 << 20);
        for i in 0..400 {
            assert_eq!(b.get(&node(i)), Some(u64::from(i) * 7), "{i}");
        }
        assert_eq!(b.get(&node(400)), None);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            (HEADER + 400 * RECORD) as u64
        );

        // A damaged file is removed, and nothing is found in it.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER + 3] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let c = SizeCache::new(path.clone(), 1 << 20);
        assert_eq!(c.get(&node(1)), None);
        assert!(!path.exists());
        // Past the limit nothing more is kept.
        let d = SizeCache::new(path, (HEADER + 10 * RECORD) as u64);
        for i in 0..20 {
            d.put(node(i), 1);
        }
        assert_eq!(d.lock().learned.len(), 10);
    }

    #[test]
    fn checked_chunks_are_kept_with_sizes_and_never_lost_to_a_size_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sizes");
        let a = SizeCache::new(path.clone(), 1 << 20);
        a.put(node(1), 10);
        a.put_checked(node(2), 20, 0xdead_beef);
        a.put_checked(node(3), 30, 0);
        // A size found again later (without its chunk) keeps what was known.
        a.put(node(2), 20);
        assert_eq!(a.checked_chunk(&node(2)), Some(0xdead_beef));
        a.save();
        let b = SizeCache::new(path.clone(), 1 << 20);
        assert_eq!(b.get(&node(1)), Some(10));
        assert_eq!(b.checked_chunk(&node(1)), None);
        assert_eq!(b.get(&node(2)), Some(20));
        assert_eq!(b.checked_chunk(&node(2)), Some(0xdead_beef));
        assert_eq!(b.checked_chunk(&node(3)), Some(0));
        // A chunk checked for a node the file has a size of: both, after a merge.
        b.put_checked(node(1), 10, 7);
        b.put(node(4), 40);
        b.save();
        let c = SizeCache::new(path.clone(), 1 << 20);
        assert_eq!(c.checked_chunk(&node(1)), Some(7));
        assert_eq!(c.get(&node(4)), Some(40));
        assert_eq!(c.checked_chunk(&node(2)), Some(0xdead_beef));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            (HEADER + 4 * RECORD) as u64
        );
        // A file of version 1 is removed: its sizes are found again.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&1u32.to_be_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let d = SizeCache::new(path.clone(), 1 << 20);
        assert_eq!(d.get(&node(1)), None);
        assert!(!path.exists());
    }
}
