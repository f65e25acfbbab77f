//! Where a shallow repository's file revisions come from, in remotefilelog's order: the
//! repository's own loose blobs (`.hg/store/data/<sha1hex(path)>/<hex node>`: what a local
//! commit wrote), then the shared cache, then the server through a [`Fetcher`] (what it
//! answers is verified and kept in the cache before use). A process registers the source
//! of each shallow repository it opens ([`register`]): the daemon and the command that
//! know the repository's configuration (revfs-vfs reads it with hg's rules); a repository
//! with no source registered reads what is local and says what it lacks.
//!
//! Concurrent readers of one missing revision wait for one fetch ([`ShallowSource::get`]
//! keeps the fetches in flight by key).
//!
//! The cache is bounded once a process says how ([`ShallowSource::bound_cache`]): past the
//! limit, a thread of its own removes the least recently used blobs down to nine tenths of
//! it, never those the caller keeps (a working copy's changed files' parents: what status,
//! diff, revert and commit read) and never the repository's own (a local commit's, which
//! are not in the cache).

use super::blob::Blob;
use super::cache::{CacheError, SharedCache};
use crate::error::StoreError;
use crate::node::Node;
use sha1::{Digest, Sha1};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, RwLock};

/// A file revision a commit adds to a shallow repository, before its changeset is known.
#[derive(Debug, Clone)]
pub struct LocalBlob {
    pub path: Vec<u8>,
    pub node: Node,
    /// The content (no metadata block).
    pub text: Vec<u8>,
    /// The filelog's parents (p1 null for a copy).
    pub p1: Node,
    pub p2: Node,
    /// A copy's source path and file node.
    pub copy: Option<(Vec<u8>, Node)>,
}

/// Fetches file revisions from a server.
pub trait Fetcher: Send + Sync {
    /// The decompressed blobs of `keys` (path, file node), in order, each with its own
    /// result (an error's text names the reason, never credentials).
    fn fetch(&self, keys: &[(&[u8], Node)]) -> Vec<Result<Vec<u8>, String>>;

    /// The server, for messages (its password hidden).
    fn describe(&self) -> String;
}

/// One shallow repository's sources of file revisions.
pub struct ShallowSource {
    local: PathBuf,
    cache: SharedCache,
    fetcher: Option<Arc<dyn Fetcher>>,
    /// Keys being fetched now: later askers wait on the first one's fetch.
    in_flight: Mutex<HashMap<Key, Arc<Flight>>>,
    /// Blobs read or fetched lately, verified: a file's size, text and copy source are
    /// asked one after the other, and each would read and hash the blob again.
    recent: Mutex<Recent>,
    /// The cache's bound, once set.
    bound: std::sync::OnceLock<Arc<Bound>>,
    /// Revisions known to be on this machine: `true` for those this process wrote to the
    /// cache (verified then), `false` for those found there or in the repository. Spares a
    /// lookup's, a fetch's and a walk's `stat`s, and the second hash of what was fetched
    /// ahead and read later. An eviction empties it.
    here: Arc<Mutex<lru::LruCache<Key, bool>>>,
}

/// The most revisions [`ShallowSource`] remembers as here (about 100 bytes each).
const HERE: usize = 1 << 18;

/// The blobs a bounded cache must keep, asked for at each eviction.
pub type KeepFn = Box<dyn Fn() -> Vec<(Vec<u8>, Node)> + Send + Sync>;

/// A bound on the cache and what the eviction knows of it.
struct Bound {
    cache: SharedCache,
    /// The source's revisions known here, emptied when blobs go.
    here: Arc<Mutex<lru::LruCache<Key, bool>>>,
    limit: u64,
    keep: KeepFn,
    /// Bytes in the cache as last measured plus what was fetched since (`None` until the
    /// first measure), and whether an eviction runs and must run again.
    state: Mutex<BoundState>,
}

#[derive(Default)]
struct BoundState {
    usage: Option<u64>,
    running: bool,
    /// Blobs came in while an eviction ran: it measures again when it ends.
    again: bool,
}

impl Bound {
    fn state(&self) -> std::sync::MutexGuard<'_, BoundState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `bytes` more in the cache: an eviction starts when that may pass the limit (or runs
    /// again after the one under way, which may have measured before they came).
    fn added(self: &Arc<Self>, bytes: u64) {
        {
            let mut st = self.state();
            let over = match st.usage.as_mut() {
                Some(n) => {
                    *n += bytes;
                    *n > self.limit
                }
                None => true,
            };
            if !over {
                return;
            }
            if st.running {
                st.again = true;
                return;
            }
            st.running = true;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("revfs-cache-evict".into())
            .spawn(move || loop {
                me.run();
                let mut st = me.state();
                if !std::mem::take(&mut st.again) {
                    st.running = false;
                    break;
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("the cache's eviction could not start: {e}");
            self.state().running = false;
        }
    }

    /// Measures the cache and, over the limit, removes down to nine tenths of it.
    fn run(&self) {
        let t0 = std::time::Instant::now();
        let keep = (self.keep)();
        let target = self.limit - self.limit / 10;
        let e = self.cache.evict(self.limit, target, &keep);
        if e.removed > 0 {
            self.here.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        let left = e.bytes - e.removed_bytes;
        self.state().usage = Some(left);
        if e.removed > 0 {
            tracing::info!(
                removed = e.removed,
                removed_bytes = e.removed_bytes,
                blobs_left = e.blobs - e.removed,
                bytes_left = left,
                limit = self.limit,
                kept = keep.len(),
                elapsed = ?t0.elapsed(),
                "cache over its limit: least recently used blobs removed"
            );
        }
    }
}

/// The verified blobs kept in memory, least recently used out first, within a byte budget.
struct Recent {
    blobs: lru::LruCache<Key, Arc<Blob>>,
    bytes: usize,
}

/// The memory [`ShallowSource`] keeps blobs in, and the largest blob it keeps.
const RECENT_BYTES: usize = 32 << 20;
const RECENT_MAX_BLOB: usize = 4 << 20;

fn weight(b: &Blob) -> usize {
    b.text.len() + 100 * b.ancestors.len()
}

impl Recent {
    fn get(&mut self, key: &Key) -> Option<Arc<Blob>> {
        self.blobs.get(key).cloned()
    }

    fn put(&mut self, key: Key, blob: Arc<Blob>) {
        let size = weight(&blob);
        if size > RECENT_MAX_BLOB {
            return;
        }
        if let Some(old) = self.blobs.put(key, blob) {
            self.bytes -= weight(&old);
        }
        self.bytes += size;
        while self.bytes > RECENT_BYTES {
            match self.blobs.pop_lru() {
                Some((_, b)) => self.bytes -= weight(&b),
                None => break,
            }
        }
    }
}

/// A file revision: its path and node.
type Key = (Vec<u8>, Node);

#[derive(Default)]
struct Flight {
    done: Mutex<bool>,
    cv: Condvar,
}

/// Why a file revision is not available.
fn unavailable(path: &[u8], node: &Node, reason: String) -> StoreError {
    StoreError::NotFetched {
        path: String::from_utf8_lossy(path).into_owned(),
        node: node.to_hex(),
        reason,
    }
}

fn cache_err(e: CacheError) -> StoreError {
    match e {
        CacheError::Io { path, source } => StoreError::io(path, source),
        CacheError::Blob(b) => StoreError::Other(b.to_string()),
        CacheError::Pack(super::pack::PackError::Io { path, source }) => {
            StoreError::io(path, source)
        }
        CacheError::Pack(p) => StoreError::Other(p.to_string()),
    }
}

impl ShallowSource {
    /// The sources of the repository whose store is `store` (its `.hg/store`).
    pub fn new(store: &Path, cache: SharedCache, fetcher: Option<Arc<dyn Fetcher>>) -> Self {
        ShallowSource {
            local: store.join("data"),
            cache,
            fetcher,
            in_flight: Mutex::new(HashMap::new()),
            recent: Mutex::new(Recent {
                blobs: lru::LruCache::unbounded(),
                bytes: 0,
            }),
            bound: std::sync::OnceLock::new(),
            here: Arc::new(Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(HERE).unwrap_or(std::num::NonZeroUsize::MIN),
            ))),
        }
    }

    fn here(&self) -> std::sync::MutexGuard<'_, lru::LruCache<Key, bool>> {
        self.here.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bounds the cache to `limit` bytes, keeping the blobs `keep` names at each eviction;
    /// measures the cache now (in the background) and evicts if it is over already. The
    /// first call sets the bound.
    pub fn bound_cache(&self, limit: u64, keep: KeepFn) {
        let bound = Arc::new(Bound {
            cache: self.cache.clone(),
            here: self.here.clone(),
            limit,
            keep,
            state: Mutex::new(BoundState::default()),
        });
        if self.bound.set(bound.clone()).is_ok() {
            bound.added(0);
        }
    }

    /// The repository's own loose blob of `path` at `node`.
    pub fn local_path(&self, path: &[u8], node: &Node) -> PathBuf {
        self.local
            .join(hex::encode(Sha1::digest(path)))
            .join(node.to_hex())
    }

    pub fn cache(&self) -> &SharedCache {
        &self.cache
    }

    /// The blob on this machine, if any (verified).
    fn local_blob(&self, key: &Key) -> Result<Option<Blob>, StoreError> {
        let (path, node) = (&key.0[..], &key.1);
        let written = self.here().get(key) == Some(&true);
        if written {
            if let Some(b) = self.cache.get_written(path, node).map_err(cache_err)? {
                return Ok(Some(b));
            }
        }
        let file = self.local_path(path, node);
        match std::fs::read(&file) {
            Ok(bytes) => Blob::parse_verified(path, node, &bytes)
                .map(Some)
                .map_err(|e| StoreError::Other(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.cache.get(path, node).map_err(cache_err)
            }
            Err(e) => Err(StoreError::io(file, e)),
        }
    }

    /// The verified blob of `path` at `node`, fetched when this machine lacks it.
    pub fn get(&self, path: &[u8], node: &Node) -> Result<Arc<Blob>, StoreError> {
        let key = (path.to_vec(), *node);
        if let Some(b) = self.recent().get(&key) {
            return Ok(b);
        }
        let blob = match self.local_blob(&key)? {
            Some(b) => b,
            None => {
                // Not on the disk after all (hg's gc, or another mount's eviction took it).
                self.here().pop(&key);
                self.fetch_many(&[(path, *node)])?;
                if let Some(b) = self.recent().get(&key) {
                    return Ok(b);
                }
                self.local_blob(&key)?.ok_or_else(|| {
                    unavailable(
                        path,
                        node,
                        "the fetched revision did not reach the cache".into(),
                    )
                })?
            }
        };
        let blob = Arc::new(blob);
        self.recent().put(key, blob.clone());
        Ok(blob)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `blob` into the repository's local store, linked to changeset `linknode`, as
    /// remotefilelog's `_createfileblob` does: the text, its own record, then the records
    /// of its ancestors from its parents' blobs (the copy source's for a copy), breadth
    /// first. A temporary file renamed into place, read-only, checked before it is.
    pub fn write_local(&self, blob: &LocalBlob, linknode: &Node) -> Result<(), StoreError> {
        let (real_p1, copy_from) = match &blob.copy {
            Some((src, rev)) => (*rev, src.clone()),
            None => (blob.p1, Vec::new()),
        };
        let mut data = format!("{}\0", blob.text.len()).into_bytes();
        data.extend_from_slice(&blob.text);
        let record = |data: &mut Vec<u8>, n: &Node, p1: &Node, p2: &Node, l: &Node, c: &[u8]| {
            for x in [n, p1, p2, l] {
                data.extend_from_slice(&x.0);
            }
            data.extend_from_slice(c);
            data.push(0);
        };
        record(
            &mut data, &blob.node, &real_p1, &blob.p2, linknode, &copy_from,
        );
        // The parents' ancestry maps, then a breadth-first walk from the parents.
        let mut known: HashMap<Node, super::blob::Ancestor> = HashMap::new();
        let mut queue = std::collections::VecDeque::new();
        let mut seen = std::collections::HashSet::new();
        let parents = [
            (
                if blob.copy.is_some() {
                    copy_from.as_slice()
                } else {
                    &blob.path[..]
                },
                real_p1,
            ),
            (&blob.path[..], blob.p2),
        ];
        for (path, parent) in parents {
            if parent.is_null() || !seen.insert(parent) {
                continue;
            }
            for a in self.get(path, &parent)?.ancestors.iter().cloned() {
                known.entry(a.node).or_insert(a);
            }
            queue.push_back(parent);
        }
        while let Some(n) = queue.pop_front() {
            let Some(a) = known.get(&n) else {
                return Err(unavailable(
                    &blob.path,
                    &n,
                    "an ancestor's record is missing from its descendant's blob".into(),
                ));
            };
            let copy = a.copy_from.clone().unwrap_or_default();
            record(&mut data, &a.node, &a.p1, &a.p2, &a.linknode, &copy);
            for p in [a.p1, a.p2] {
                if !p.is_null() && seen.insert(p) {
                    queue.push_back(p);
                }
            }
        }
        Blob::parse_verified(&blob.path, &blob.node, &data)
            .map_err(|e| StoreError::Other(e.to_string()))?;
        let file = self.local_path(&blob.path, &blob.node);
        let dir = file.parent().unwrap_or(&self.local);
        let io = |p: &Path| {
            let p = p.to_owned();
            move |e| StoreError::io(p, e)
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let tmp = super::write_read_only_temp(dir, "", &data)
            .map_err(|(path, e)| StoreError::io(path, e))?;
        tmp.persist(&file)
            .map_err(|e| StoreError::io(&file, e.error))?;
        Ok(())
    }

    /// Whether `path` at `node` is on this machine (the repository's or the cache's).
    pub fn is_local(&self, path: &[u8], node: &Node) -> bool {
        let key = (path.to_vec(), *node);
        if self.here().get(&key).is_some() {
            return true;
        }
        let here = self.local_path(path, node).exists() || self.cache.contains(path, node);
        if here {
            self.here().put(key, false);
        }
        here
    }

    /// Fetches those of `keys` this machine lacks, in one request, into the cache; waits
    /// for fetches of the same keys already under way. Errors name the first key that
    /// failed.
    pub fn fetch_many(&self, keys: &[(&[u8], Node)]) -> Result<usize, StoreError> {
        let mut mine = Vec::new();
        let mut theirs = Vec::new();
        // What is here is asked of the disk first, under no lock; under the lock, only of
        // memory (a fetch that ended meanwhile noted its keys there before it let go).
        let missing: Vec<&(&[u8], Node)> = keys
            .iter()
            .filter(|(path, node)| !self.is_local(path, node))
            .collect();
        {
            let mut fl = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            for (path, node) in missing {
                let key = (path.to_vec(), *node);
                if self.here().contains(&key) {
                    continue;
                }
                match fl.get(&key) {
                    Some(f) => theirs.push(f.clone()),
                    None => {
                        let f = Arc::new(Flight::default());
                        fl.insert(key, f.clone());
                        mine.push((*path, *node, f));
                    }
                }
            }
        }
        let result = self.fetch_mine(&mine);
        {
            let mut fl = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            for (path, node, f) in &mine {
                fl.remove(&(path.to_vec(), *node));
                *f.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
                f.cv.notify_all();
            }
        }
        for f in theirs {
            let mut done = f.done.lock().unwrap_or_else(|p| p.into_inner());
            while !*done {
                done = f.cv.wait(done).unwrap_or_else(|p| p.into_inner());
            }
        }
        result
    }

    fn fetch_mine(&self, mine: &[(&[u8], Node, Arc<Flight>)]) -> Result<usize, StoreError> {
        if mine.is_empty() {
            return Ok(0);
        }
        let Some(fetcher) = &self.fetcher else {
            let (path, node, _) = &mine[0];
            return Err(unavailable(
                path,
                node,
                "not on this machine, and no server to fetch it from".into(),
            ));
        };
        let keys: Vec<(&[u8], Node)> = mine.iter().map(|(p, n, _)| (*p, *n)).collect();
        let answers = fetcher.fetch(&keys);
        // The answers that came, stored in one batch (a pack when it is big enough).
        let came: Vec<(&[u8], Node, &[u8])> = keys
            .iter()
            .zip(&answers)
            .filter_map(|((p, n), a)| Some((*p, *n, a.as_ref().ok()?.as_slice())))
            .collect();
        let mut stored = self.cache.insert_many(&came).into_iter();
        let mut first_err = None;
        let mut got = 0;
        let mut bytes = 0u64;
        for (i, (path, node)) in keys.iter().enumerate() {
            let outcome = match answers.get(i) {
                Some(Ok(blob_bytes)) => match stored.next() {
                    Some(Ok(blob)) => {
                        bytes += blob_bytes.len() as u64;
                        self.here().put((path.to_vec(), *node), true);
                        self.recent().put((path.to_vec(), *node), Arc::new(blob));
                        Ok(())
                    }
                    Some(Err(e @ CacheError::Blob(_))) => Err(format!(
                        "{} sent a revision that was refused: {e}",
                        fetcher.describe()
                    )),
                    Some(Err(e)) => Err(format!("the fetched revision could not be stored: {e}")),
                    None => Err("the cache lost count of the batch".into()),
                },
                Some(Err(e)) => Err(e.clone()),
                None => Err(format!("{} gave no answer for it", fetcher.describe())),
            };
            match outcome {
                Ok(()) => got += 1,
                Err(reason) => {
                    tracing::warn!(
                        path = %String::from_utf8_lossy(path),
                        node = %node.to_hex(),
                        "fetching a file revision failed: {reason}"
                    );
                    first_err.get_or_insert_with(|| unavailable(path, node, reason));
                }
            }
        }
        if let Some(b) = self.bound.get() {
            b.added(bytes);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(got),
        }
    }
}

/// The sources registered in this process, by store path.
static SOURCES: RwLock<Vec<(PathBuf, Arc<ShallowSource>)>> = RwLock::new(Vec::new());

/// Makes `source` the one every repository opened on `store` (a `.hg/store` path) reads
/// shallow file revisions from.
pub fn register(store: &Path, source: Arc<ShallowSource>) {
    let mut s = SOURCES.write().unwrap_or_else(|p| p.into_inner());
    s.retain(|(p, _)| p != store);
    s.push((store.to_owned(), source));
}

/// The source registered for `store`, if any.
pub fn registered(store: &Path) -> Option<Arc<ShallowSource>> {
    SOURCES
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(p, _)| p == store)
        .map(|(_, s)| s.clone())
}
