//! Fetching ahead of a program that walks the tree of a repository cloned from a server
//! (tar, grep -r, find -size, an indexer). Each directory such a program lists whose files
//! this machine lacks costs it a request to the server (wc/read.rs, `size_ahead`), one
//! after the other, the program waiting while the server builds blobs and the server idle
//! while the program reads. Once a program has needed fetches in [`START_AFTER`] directories in a
//! row, each within [`START_WITHIN`] of the last, threads of this module's own ([`THREADS`], at normal priority: they
//! mostly wait on the server) fetch on from the last one in manifest order (depth first,
//! by name: the order those programs go), the missing ones of [`BATCH`] files a request,
//! no further than [`AHEAD`] bytes of manifest past the directory the program was last
//! seen in. Three requests in flight keep the server busy while the answers of the others
//! are checked and written. The walk moves with the program (a directory it looks into
//! behind the walk or past it), and ends when the program looks up nothing for [`LIVE`], or at
//! the first failed request (no walk starts for [`BACK_OFF`] after one: a server that is
//! down is not asked again and again; the program's own lookups still are).
//!
//! Only names and nodes are read from the manifest under this module's lock; whether a
//! file is here is asked of the disk under no lock, the working copy's lock is never
//! taken, and no request is made under any lock.

use revfs_store::manifest::Manifest;
use revfs_store::{Node, Repo};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// [`START_AFTER`] directories in a row needing fetches, each within this of the one
/// before, start a walk (`ls -l` of a directory or two does not).
const START_WITHIN: Duration = Duration::from_secs(2);
const START_AFTER: u32 = 3;
/// A walk whose program has looked up nothing for this long ends.
const LIVE: Duration = Duration::from_secs(3);
/// How far past the program a walk goes, in bytes of manifest text (60 to 100 a file:
/// some 25,000 files; what is fetched goes to the cache, not to memory).
const AHEAD: usize = 2 << 20;
/// The most files one step of the walk takes from the manifest (those this machine lacks
/// are one request).
const BATCH: usize = 512;
/// Threads fetching at once: one request at the server, one answer being checked and
/// written, one on the way (two left the server idle about half of a linux tar).
const THREADS: usize = 3;

/// The walk of one working copy of a repository cloned from a server.
pub(crate) struct FetchAhead {
    shared: Arc<Shared>,
}

struct Shared {
    repo: Arc<Repo>,
    st: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    /// The manifest the walk goes through (the working copy's base when it started).
    manifest: Option<Arc<Manifest>>,
    /// Where the program was last seen (a byte offset in the manifest), and when.
    reader: usize,
    reader_seen: Option<Instant>,
    /// The directory whose lookup last needed a fetch, when, and how many such
    /// directories came in a row.
    last_fetch: Option<(Vec<u8>, Instant, u32)>,
    /// The next offset to fetch from; `None`: no walk.
    cursor: Option<usize>,
    /// The directory the program was last seen in (its parent inode), so that each
    /// directory is placed in the manifest once.
    last_parent: u64,
    threads: usize,
    /// Files the walk under way asked for.
    asked: u64,
    /// When a request of a walk last failed: no walk starts for [`BACK_OFF`] after.
    failed: Option<Instant>,
}

/// How long after a failed request no walk starts.
const BACK_OFF: Duration = Duration::from_secs(30);

impl FetchAhead {
    pub(crate) fn new(repo: Arc<Repo>) -> FetchAhead {
        FetchAhead {
            shared: Arc::new(Shared {
                repo,
                st: Mutex::new(State::default()),
                cv: Condvar::new(),
            }),
        }
    }

    /// A program looks up a file of directory `parent`: true when it is the directory the
    /// walk last saw it in (noted as a sign of life; nothing more to tell the walk).
    pub(crate) fn same_dir(&self, parent: u64) -> bool {
        let mut st = self.shared.lock();
        if st.last_parent != parent {
            return false;
        }
        st.reader_seen = Some(Instant::now());
        true
    }

    /// A program looks up `path`, a file of directory `parent` ([`FetchAhead::same_dir`]
    /// false), in `manifest`; `fetched`: the lookup had to fetch its directory's files.
    pub(crate) fn seen(&self, parent: u64, path: &[u8], manifest: &Arc<Manifest>, fetched: bool) {
        let now = Instant::now();
        let mut st = self.shared.lock();
        st.reader_seen = Some(now);
        st.last_parent = parent;
        if !st
            .manifest
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, manifest))
        {
            // Another base (an update, a commit): a walk starts again from here.
            st.manifest = Some(manifest.clone());
            st.cursor = None;
        }
        let pos = manifest.position_of(path);
        st.reader = pos;
        if let Some(c) = st.cursor {
            // The program went past the walk, or back behind it: the walk goes on from it.
            if pos > c || pos + AHEAD < c {
                st.cursor = Some(pos);
            }
            self.shared.cv.notify_all();
            return;
        }
        if !fetched {
            return;
        }
        let dir = parent_dir(path);
        let streak = match &st.last_fetch {
            Some((d, _, n)) if d.as_slice() == dir => *n,
            Some((_, at, n)) if now.duration_since(*at) < START_WITHIN => n + 1,
            _ => 1,
        };
        st.last_fetch = Some((dir.to_vec(), now, streak));
        if streak < START_AFTER || st.failed.is_some_and(|t| t.elapsed() < BACK_OFF) {
            return;
        }
        st.cursor = Some(pos);
        st.asked = 0;
        tracing::debug!(from = %String::from_utf8_lossy(path), "fetching ahead of a walk");
        while st.threads < THREADS {
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("revfs-fetch-ahead".into())
                .spawn(move || shared.run());
            match spawned {
                Ok(_) => st.threads += 1,
                Err(e) => {
                    tracing::warn!("fetching ahead could not start: {e}");
                    break;
                }
            }
        }
    }
}

/// The directory part of `path` (empty for the root).
fn parent_dir(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => b"",
    }
}

/// The next [`BATCH`] files of `manifest` from offset `pos`, and the offset after them.
fn stretch_from(manifest: &Manifest, pos: usize) -> (Vec<(Vec<u8>, Node)>, usize) {
    let mut files = Vec::with_capacity(BATCH);
    let mut it = manifest.iter_at(pos);
    for _ in 0..BATCH {
        match it.next() {
            Some(Ok(e)) => files.push((e.path.to_vec(), e.node)),
            // A manifest that does not parse: the walk ends there (the program's own
            // lookups report it).
            Some(Err(_)) | None => return (files, manifest.text().len()),
        }
    }
    (files, it.position())
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One fetching thread: takes the next stretch of manifest and fetches what this
    /// machine lacks of it, until the walk ends.
    fn run(&self) {
        loop {
            let keys = {
                let mut st = self.lock();
                loop {
                    let live = st.reader_seen.is_some_and(|t| t.elapsed() < LIVE);
                    let (Some(cursor), Some(manifest), true) =
                        (st.cursor, st.manifest.clone(), live)
                    else {
                        st.cursor = None;
                        st.threads -= 1;
                        if st.threads == 0 && st.asked > 0 {
                            tracing::info!(files = st.asked, "fetched ahead of a walk");
                            st.asked = 0;
                        }
                        return;
                    };
                    if cursor > st.reader + AHEAD || cursor >= manifest.text().len() {
                        // Far enough ahead, or at the end: wait for the program.
                        st = self
                            .cv
                            .wait_timeout(st, Duration::from_millis(200))
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                        continue;
                    }
                    let (stretch, next) = stretch_from(&manifest, cursor);
                    st.cursor = Some(next);
                    if !stretch.is_empty() {
                        break stretch;
                    }
                }
            };
            // The fetch leaves out what this machine has (and asks nothing when that is all).
            let refs: Vec<(&[u8], Node)> = keys.iter().map(|(p, n)| (p.as_slice(), *n)).collect();
            match self.repo.fetch_files(&refs) {
                Ok(n) => self.lock().asked += n as u64,
                Err(e) => {
                    tracing::info!("fetching ahead stopped: {e}");
                    let mut st = self.lock();
                    st.cursor = None;
                    st.failed = Some(Instant::now());
                    st.threads -= 1;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_parent_of_a_path_is_its_directory() {
        assert_eq!(super::parent_dir(b"a/b/c"), b"a/b");
        assert_eq!(super::parent_dir(b"c"), b"");
    }
}
