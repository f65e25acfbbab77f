//! Reading a directory's files ahead of a reader. When a store file is read from its start
//! (a program reading the tree: tar, grep, an indexer, a build), the files of its directory
//! that come after it (all its files, when such a program lists it: the directory it reads
//! next) are rebuilt on background threads into the repository's caches: the text cache
//! for their content (a text too big for it, into the on-disk cache of big texts:
//! [`BigTexts`]), the size cache for their size. The reader's next lookups
//! and reads then find both there, and the decoding overlaps with the reader's own work
//! instead of adding to it. A file read ahead is also pushed into the kernel's page cache
//! when no writer can have it open ([`Pusher`]: with opens seen, passthrough on, when no
//! handle has it open; with passthrough off, under a read lease): the reader's open then
//! finds its pages, and neither READ nor GETATTR follows. A pushed text leaves the budget
//! (its reader sends no READ to say it read it; it is in the kernel's page cache, not the
//! daemon's memory).
//!
//! A program that reads the tree (tar, grep -r, an indexer) lists each directory before it
//! reads its files: the walk ([`Walker`], `wc/ahead.rs`) goes on from a directory it lists,
//! in the order such a program goes (depth first, in listing order), and queues the rounds
//! of the directories it comes to, up to [`AHEAD`] files past the last directory the
//! program was seen listing. A program round (a directory read or listed that the walk had
//! not come to) goes before the walk's.
//!
//! Bounded three ways: by threads (`mount.readahead_threads`, at the lowest priority, nice
//! 19, so that a foreground request runnable beside them gets nearly all of a CPU), by
//! bytes (`mount.readahead_size`: texts read ahead, not pushed and not read since; past it,
//! a file is left to its reader), and per directory (a directory starts a round at most
//! once a while, of at most `PER_DIR` files). The threads hold the working copy's lock only
//! briefly (the walk lists a directory under it), never while they decode.

pub mod lease;
pub mod readers;

use lru::LruCache;
use revfs_store::bigtext::BigText;
use revfs_store::filelog::FileText;
use revfs_store::{Node, Repo};
use std::collections::{HashMap, VecDeque};
use std::num::NonZeroUsize;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The most files one directory's round queues.
pub const PER_DIR: usize = 256;
/// How many files the walk queues past the last directory the program it follows was seen
/// listing.
pub const AHEAD: usize = 4096;
/// A walk whose program lists no directory it came to for this long (counted from the
/// walk's last step, too) is over: a program listing one later (`find` after a `tar`) reads
/// nothing ahead.
const WALK_LIVE: Duration = Duration::from_secs(2);
/// How many directories the walk came to are remembered (a program listing one of them is
/// the program the walk follows, come that far).
const WALKED: NonZeroUsize = match NonZeroUsize::new(8192) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};
/// Of the last 32 listings of a program reading the tree, how many may start the walk
/// again (the walk had not come to the directory) before the walk is paused: the program
/// does not go where the walk goes. A tar follows it (a first tar of linux: one start, 5,015
/// listings the walk had come to); rg's parallel walk, or two programs reading different
/// parts of the tree at once, do not (rg: 1,643 starts, 1,432 found): the walk then reads
/// files nobody reads soon, on CPU the readers need (rg took 5.5 s with the walk, 4.4 s
/// without, docs/BENCHMARKS.md).
const WALK_MISSES: u32 = 8;
/// Three listings in a row that each started the walk again pause it too (a program that
/// never goes where the walk goes would otherwise have it queue [`AHEAD`] files eight
/// times first).
const WALK_MISSED_IN_A_ROW: u32 = 0b111;
/// How long a paused walk stays off; each directory a program lists still gets its round.
const WALK_PAUSE: Duration = Duration::from_secs(5);
/// Texts bigger than this go through the on-disk big text cache (`content.rs`): read
/// ahead into it (outside the budget), and pushed from there a piece at a time.
const MAX_TEXT: u64 = revfs_store::bigtext::BIG_TEXT;
/// A text read ahead that nobody read within this time no longer counts against the budget
/// (the text cache may have let it go anyway).
const STALE: Duration = Duration::from_secs(20);
/// How many directories are remembered as having had their round.
const RECENT_DIRS: usize = 256;
/// How many texts a reader read (and nobody had read ahead) are remembered, so that a round
/// queued behind the reader skips them: read ahead after the reader, a text would hold its
/// bytes in the budget until it went stale, and a full budget starts no round.
const RECENT_READS: NonZeroUsize = match NonZeroUsize::new(8192) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};
/// A directory's round is not started again within this time.
const DIR_QUIET: Duration = Duration::from_secs(30);
/// How many queued files read-ahead leaves to a reader that caught up with it (read a text
/// read-ahead had rebuilt, or was rebuilding, before it was pushed), so as to be ahead of it
/// again. Side by side, the reader would come to each file as read-ahead rebuilt it, before
/// its push, and read it through the daemon (a READ and, for tar, the GETATTR of its fstat
/// after it); ahead, read-ahead pushes the files after these before the reader comes to
/// them, and the reader reads them from the page cache (a first tar of linux: 35,000 files
/// pushed of 78,635 side by side, 51,000 with the leap, docs/BENCHMARKS.md).
const LEAP: usize = 16;
/// A read-ahead thread pushes the texts it rebuilt this many at a time (or fewer, when
/// nothing more is queued): with passthrough off their read leases then take one round
/// trip to the lease helper, not one each (`lease.rs`).
const PUSH_BATCH: usize = 8;

/// One file to read ahead: the filelog path (the file's path in the working copy, unless
/// renamed since) and revision, and its inode when the kernel may have one (a loaded entry:
/// with passthrough on, its pages can be filled, see [`Pusher`]).
#[derive(Debug, Clone)]
pub struct Job {
    pub path: Vec<u8>,
    pub node: Node,
    pub ino: Option<u64>,
    /// Whether it may be pushed (the first files of a directory a program listed are
    /// not: its reads of them must reach the daemon, see `readers.rs`).
    pub push: bool,
    /// Queued by the walk (dropped when it pauses), not by a program's round.
    pub walked: bool,
}

/// Fills the kernel's page cache of files whose texts were just read ahead, when that is
/// safe (`fs.rs`: no writer may have them open). The reader's open then finds the pages:
/// no READ, and no GETATTR after it.
pub trait Pusher: Send + Sync {
    /// Fills the pages of each of `files` (a job, and its text just rebuilt), in order, if
    /// it still is that revision and, once nothing else stands in the way, `still_ahead`
    /// (no reader read it meanwhile); whether each was filled. Together, so that what
    /// makes a push safe is asked for once for all of them.
    fn push(&self, files: &[(&Job, &[u8])], still_ahead: &dyn Fn(&Job) -> bool) -> Vec<bool>;

    /// Fills the pages of `job`'s file with `text` (a big text, in the on-disk cache), a
    /// piece at a time, if it still is that revision and, once nothing else stands in the
    /// way, `unread` (no reader read it from its start); whether it did.
    fn push_big(&self, job: &Job, text: &BigText, unread: &dyn Fn() -> bool) -> bool;
}

/// Rebuilds a text too big for the text cache into the working copy's on-disk cache of
/// big texts (`content.rs`), where its reader then finds it instead of rebuilding it
/// first, on the request's path. Runs on a read-ahead thread.
pub trait BigTexts: Send + Sync {
    /// Rebuilds `job`'s text (of `repo`) unless it is there; the text when it is there now.
    fn build(&self, repo: &Repo, job: &Job) -> Option<Arc<BigText>>;
}

/// Goes through the tree ahead of a program that reads it (`wc/ahead.rs`): lists the
/// directories it comes to and queues their rounds with [`Readahead::queue_walked`], while
/// [`Readahead::walk_room`] allows. Runs on a read-ahead thread.
pub trait Walker: Send + Sync {
    /// Starts again after directory `from` (its subdirectories first), or goes on where it
    /// was (`None`).
    fn walk(&self, from: Option<u64>);
}

/// Counters, for `stats` (docs/FORMATS.md) and the tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadaheadStats {
    /// Directories whose round started.
    pub rounds: u64,
    /// Files read ahead, and their bytes.
    pub files: u64,
    pub bytes: u64,
    /// Files dropped: past the budget, too big, or failed.
    pub dropped: u64,
    /// Files read ahead that a reader then read.
    pub used: u64,
    /// Bytes read ahead and not read since (what the budget bounds).
    pub pending_bytes: u64,
    /// Files read ahead whose pages were filled in the kernel's page cache.
    #[serde(default)]
    pub pushed: u64,
    /// Directories whose round the walk queued (of `rounds`).
    #[serde(default)]
    pub walked: u64,
    /// Files queued now.
    #[serde(default)]
    pub queued: u64,
    /// Times read-ahead left the next [`LEAP`] queued files to a reader that had caught up
    /// with it (of `dropped`).
    #[serde(default)]
    pub leaps: u64,
    /// Times a program reading the tree listed a directory the walk had not come to, and
    /// the walk started again from it.
    #[serde(default)]
    pub walk_starts: u64,
    /// Times such a program listed a directory the walk had come to (it follows the walk).
    #[serde(default)]
    pub walk_reaches: u64,
    /// Times the walk was paused: its program did not follow it ([`WALK_MISSES`]).
    #[serde(default)]
    pub walk_pauses: u64,
    /// Files a reader read while read-ahead was still rebuilding them (of `used`): both
    /// rebuilt it.
    #[serde(default)]
    pub raced: u64,
}

/// A text read ahead (or being read), not read since.
struct Ahead {
    /// Its bytes, counted against the budget.
    bytes: u64,
    /// When its read-ahead started.
    at: Instant,
    /// Whether it is to be pushed ([`Job::push`]).
    push: bool,
    /// The text, once rebuilt: its reader takes it from here, without opening its filelog
    /// (`None` while being rebuilt).
    text: Option<FileText>,
}

struct State {
    queue: VecDeque<(Arc<Repo>, Job)>,
    /// Texts read ahead (or being read) and not read by anyone since.
    ahead: HashMap<Node, Ahead>,
    ahead_bytes: u64,
    /// Directories that had their round lately, with when.
    recent: VecDeque<(u64, Instant)>,
    /// Texts a reader read that were not read ahead, the latest [`RECENT_READS`].
    read: LruCache<Node, ()>,
    stats: ReadaheadStats,
    stop: bool,
    /// The walk asked for: from a directory (`Some(Some(dir))`), or on from where it is.
    walk: Option<Option<u64>>,
    /// A thread walks now.
    walking: bool,
    /// Files the walk queued, all told.
    walk_total: u64,
    /// Of them, those queued before the last directory the program it follows was seen
    /// listing.
    walk_seen: u64,
    /// Directories the walk came to, with `walk_total` when it did, and when.
    walked: LruCache<u64, (u64, Instant)>,
    /// The walk is over after this: the program it followed was last seen [`WALK_LIVE`]
    /// before.
    walk_live_until: Option<Instant>,
    /// No walk (`debug_no_push`).
    walk_off: bool,
    /// The program's latest listings, newest in the lowest bit: 1 when one started the walk
    /// again, 0 when the walk had come to it.
    follow: u32,
    /// No walk starts before this: its program did not follow it ([`WALK_MISSES`]).
    walk_paused_until: Option<Instant>,
    /// A reader read a text read-ahead had rebuilt (or was rebuilding) to push, before its
    /// push: it caught up with read-ahead, which leaps ([`LEAP`]).
    caught_up: bool,
}

impl State {
    /// Whether revision `node` was read by its reader already, or is read ahead (or
    /// being).
    fn taken(&self, node: &Node) -> bool {
        self.read.contains(node) || self.ahead.contains_key(node)
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    budget: u64,
    pusher: std::sync::OnceLock<Arc<dyn Pusher>>,
    walker: std::sync::OnceLock<Arc<dyn Walker>>,
    big_texts: std::sync::OnceLock<Arc<dyn BigTexts>>,
}

/// The read-ahead of one mount: its threads and budget.
pub struct Readahead {
    shared: Arc<Shared>,
}

impl Readahead {
    /// Starts `threads` threads with a budget of `budget` bytes; `None` when either is 0
    /// (read-ahead off).
    pub fn start(threads: usize, budget: u64) -> Option<Readahead> {
        if threads == 0 || budget == 0 {
            return None;
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                ahead: HashMap::new(),
                ahead_bytes: 0,
                recent: VecDeque::new(),
                read: LruCache::new(RECENT_READS),
                stats: ReadaheadStats::default(),
                stop: false,
                walk: None,
                walking: false,
                walk_total: 0,
                walk_seen: 0,
                walked: LruCache::new(WALKED),
                walk_live_until: None,
                walk_off: false,
                follow: 0,
                walk_paused_until: None,
                caught_up: false,
            }),
            wake: Condvar::new(),
            budget,
            pusher: std::sync::OnceLock::new(),
            walker: std::sync::OnceLock::new(),
            big_texts: std::sync::OnceLock::new(),
        });
        for i in 0..threads {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("revfs-readahead-{i}"))
                .spawn(move || worker(&shared));
            if let Err(e) = spawned {
                tracing::warn!("read-ahead thread not started: {e}");
            }
        }
        Some(Readahead { shared })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Who fills pages of the files read ahead (set once, when the session exists).
    pub fn set_pusher(&self, pusher: Arc<dyn Pusher>) {
        let _ = self.shared.pusher.set(pusher);
    }

    /// Who walks ahead of a program (set once).
    pub fn set_walker(&self, walker: Arc<dyn Walker>) {
        let _ = self.shared.walker.set(walker);
    }

    /// Who rebuilds big texts into the on-disk cache (set once; without one, big texts
    /// are left to their readers).
    pub fn set_big_texts(&self, big: Arc<dyn BigTexts>) {
        let _ = self.shared.big_texts.set(big);
    }

    /// A program that reads files lists directory `dir`: true when the walk came to it
    /// (the program the walk follows is that far: the walk may go [`AHEAD`] files past it
    /// again).
    pub fn reached(&self, dir: u64) -> bool {
        let mut st = self.lock();
        let now = Instant::now();
        if st.walk_live_until.is_none_or(|t| now > t) {
            return false;
        }
        let Some(&(at, _)) = st.walked.get(&dir) else {
            return false;
        };
        st.walk_live_until = Some(now + WALK_LIVE);
        st.walk_seen = st.walk_seen.max(at);
        st.stats.walk_reaches += 1;
        st.follow <<= 1;
        if st.walk.is_none() {
            st.walk = Some(None);
        }
        drop(st);
        self.shared.wake.notify_one();
        true
    }

    /// No walk from now on (`debug_no_push`: tests of what a program's own reads and
    /// listings start).
    pub fn stop_walking(&self) {
        let mut st = self.lock();
        st.walk = None;
        st.walk_live_until = None;
        st.walk_off = true;
    }

    /// Starts the walk again after directory `dir`, which a program reading files lists.
    pub fn walk_from(&self, dir: u64) {
        if self.shared.walker.get().is_none() {
            return;
        }
        let mut st = self.lock();
        let now = Instant::now();
        if st.walk_off || st.walk_paused_until.is_some_and(|t| now < t) {
            return;
        }
        st.stats.walk_starts += 1;
        st.follow = (st.follow << 1) | 1;
        if st.follow.count_ones() >= WALK_MISSES
            || st.follow & WALK_MISSED_IN_A_ROW == WALK_MISSED_IN_A_ROW
        {
            // What it queued waits for nobody: left to the programs' own rounds.
            let before = st.queue.len();
            st.queue.retain(|(_, j)| !j.walked);
            st.stats.dropped += (before - st.queue.len()) as u64;
            st.follow = 0;
            st.walk = None;
            st.walk_live_until = None;
            st.walk_paused_until = Some(now + WALK_PAUSE);
            st.stats.walk_pauses += 1;
            return;
        }
        st.walk = Some(Some(dir));
        st.walk_seen = st.walk_total;
        st.walk_live_until = Some(now + WALK_LIVE);
        drop(st);
        self.shared.wake.notify_one();
    }

    /// How many files the walk may queue now: none once [`AHEAD`] are queued past the
    /// program, or the budget is spent.
    pub fn walk_room(&self) -> usize {
        let st = self.lock();
        if st.stop || st.ahead_bytes >= self.shared.budget {
            return 0;
        }
        let ahead = usize::try_from(st.walk_total - st.walk_seen).unwrap_or(usize::MAX);
        AHEAD.saturating_sub(ahead)
    }

    /// The walk came to directory `dir`: queues its round (`jobs`, read from `repo`) after
    /// what is queued.
    pub fn queue_walked(&self, repo: &Arc<Repo>, dir: u64, jobs: Vec<Job>) {
        let mut st = self.lock();
        let at = st.walk_total;
        let now = Instant::now();
        // A walk that started again (two programs, or one the walk lost) comes to the
        // directories it came to before: their files were read ahead then.
        let again = st
            .walked
            .put(dir, (at, now))
            .is_some_and(|(_, t)| now.duration_since(t) < DIR_QUIET);
        // A walk under way is not over (its program is counted from where the walk is).
        if st.walk_live_until.is_some_and(|t| now <= t) {
            st.walk_live_until = Some(now + WALK_LIVE);
        }
        // Its round came lately (a program read or listed it, or the walk): not again.
        if jobs.is_empty() || again || st.recent.iter().any(|(d, _)| *d == dir) {
            st.walk_total += 1;
            return;
        }
        // Not in `recent`: `walked` keeps a program's round from starting again.
        st.walk_total += jobs.len() as u64;
        st.stats.rounds += 1;
        st.stats.walked += 1;
        st.queue.extend(
            jobs.into_iter()
                .map(|j| (repo.clone(), Job { walked: true, ..j })),
        );
        drop(st);
        self.shared.wake.notify_all();
    }

    /// True when directory `dir` has not had a round lately: the caller then collects its
    /// files and calls [`Readahead::queue`]. Marks it as having had one.
    pub fn starts_round(&self, dir: u64) -> bool {
        let now = Instant::now();
        let mut st = self.lock();
        while st
            .recent
            .front()
            .is_some_and(|(_, t)| now.duration_since(*t) > DIR_QUIET)
            || st.recent.len() > RECENT_DIRS
        {
            st.recent.pop_front();
        }
        if st.recent.iter().any(|(d, _)| *d == dir) || st.walked.contains(&dir) {
            return false;
        }
        // A budget spent on texts nobody has read yet: no new round.
        if st.ahead_bytes >= self.shared.budget {
            return false;
        }
        st.recent.push_back((dir, now));
        true
    }

    /// Queues a program's round (files read from `repo`, in the order a reader would read
    /// them) before what is queued: the program is there now.
    pub fn queue(&self, repo: &Arc<Repo>, jobs: Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        let mut st = self.lock();
        st.stats.rounds += 1;
        for j in jobs.into_iter().rev() {
            st.queue.push_front((repo.clone(), j));
        }
        drop(st);
        self.shared.wake.notify_all();
    }

    /// A reader reads revision `node` from its start: if it was read ahead, its bytes leave
    /// the budget, and its text, when rebuilt, is the reader's.
    pub fn read_by_reader(&self, node: &Node) -> Option<FileText> {
        let mut st = self.lock();
        if let Some(a) = st.ahead.remove(node) {
            st.ahead_bytes -= a.bytes;
            st.stats.used += 1;
            // A text left to its reader (unpushed) is no sign of one.
            st.caught_up |= a.push;
            st.stats.raced += u64::from(a.text.is_none());
            a.text
        } else {
            // Read before its turn came (or with no round): its turn, if it comes, skips it.
            st.read.put(*node, ());
            None
        }
    }

    pub fn stats(&self) -> ReadaheadStats {
        let st = self.lock();
        ReadaheadStats {
            pending_bytes: st.ahead_bytes,
            queued: st.queue.len() as u64,
            ..st.stats
        }
    }
}

impl Drop for Readahead {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.wake.notify_all();
    }
}

/// The lowest priority of the normal class for the calling thread (nice 19): a
/// foreground request runnable beside it gets about 98% of the CPU. Not `SCHED_IDLE`: a
/// thread of that class runs only on a CPU with nothing else to run, so one that reads the
/// store from the disk sits runnable behind every busy CPU when its read completes, with
/// the reader soon waiting for the same file (a first tar with every cache dropped took
/// 12.6 s under SCHED_IDLE, 7.6 s at nice 19, 7.2 s native: docs/BENCHMARKS.md).
fn lower_priority() {
    // SAFETY: acts on the calling thread only.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
    }
}

fn worker(shared: &Shared) {
    lower_priority();
    // Texts rebuilt by this thread and not pushed yet (pushable jobs).
    let mut rebuilt: Vec<Job> = Vec::new();
    loop {
        let next = {
            let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if st.stop {
                    return;
                }
                if let (false, Some(from), Some(walker)) =
                    (st.walking, st.walk, shared.walker.get())
                {
                    // What this thread rebuilt is pushed before it walks.
                    if !rebuilt.is_empty() {
                        break None;
                    }
                    st.walk = None;
                    st.walking = true;
                    drop(st);
                    walker.walk(from);
                    st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
                    st.walking = false;
                    continue;
                }
                if std::mem::take(&mut st.caught_up) {
                    leap(&mut st);
                }
                if rebuilt.len() < PUSH_BATCH {
                    if let Some(next) = st.queue.pop_front() {
                        break Some(next);
                    }
                }
                // A batch is full, or nothing more is queued: its texts are pushed now.
                if !rebuilt.is_empty() {
                    break None;
                }
                st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        let Some((repo, job)) = next else {
            push_rebuilt(shared, &rebuilt);
            rebuilt.clear();
            continue;
        };
        fetch_ahead(shared, &repo, &job);
        let outcome = read_ahead(shared, &repo, &job);
        let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Some(bytes) => {
                st.stats.files += 1;
                st.stats.bytes += bytes;
                // A big text was pushed (or not) by `read_ahead` itself, from the on-disk
                // cache: it is in no batch.
                if job.push && bytes <= MAX_TEXT {
                    rebuilt.push(job);
                }
            }
            None => st.stats.dropped += 1,
        }
    }
}

/// In a repository cloned from a server, the file revisions of `job` and of the queued
/// jobs after it that this machine lacks, fetched in one request (at most [`FETCH_AHEAD`]),
/// so that a round costs a request per batch rather than per file. Under no lock.
fn fetch_ahead(shared: &Shared, repo: &Arc<Repo>, job: &Job) {
    if repo.has_file_locally(&job.path, &job.node) {
        return;
    }
    let mut keys: Vec<(Vec<u8>, Node)> = vec![(job.path.clone(), job.node)];
    {
        let st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        for (r, j) in st.queue.iter() {
            if keys.len() >= FETCH_AHEAD {
                break;
            }
            if Arc::ptr_eq(r, repo) {
                keys.push((j.path.clone(), j.node));
            }
        }
    }
    let keys: Vec<(&[u8], Node)> = keys.iter().map(|(p, n)| (p.as_slice(), *n)).collect();
    if let Err(e) = repo.fetch_files(&keys) {
        tracing::debug!("read-ahead's fetch: {e}");
    }
}

/// The most file revisions one fetch of read-ahead asks a server for.
const FETCH_AHEAD: usize = 256;

/// Leaves the next [`LEAP`] queued files to a reader that caught up with read-ahead, but
/// for those whose size is known to be too big for the text cache: rebuilt on the reader's
/// path, each would cost it milliseconds; read-ahead rebuilds them into the on-disk cache
/// first (a reader coming to one meanwhile waits for that).
fn leap(st: &mut State) {
    let n = LEAP.min(st.queue.len());
    if n == 0 {
        return;
    }
    let mut kept = Vec::new();
    for (repo, job) in st.queue.drain(..n) {
        if repo
            .known_size(&job.node)
            .is_some_and(|size| size > MAX_TEXT)
        {
            kept.push((repo, job));
        }
    }
    let dropped = n - kept.len();
    if dropped > 0 {
        st.stats.dropped += dropped as u64;
        st.stats.leaps += 1;
    }
    for k in kept.into_iter().rev() {
        st.queue.push_front(k);
    }
}

/// Pushes the texts of `jobs` just rebuilt, those no reader read meanwhile (its READ took
/// the text out of `ahead`: a push then would fill pages the reader already has).
fn push_rebuilt(shared: &Shared, jobs: &[Job]) {
    let Some(pusher) = shared.pusher.get() else {
        return;
    };
    let texts: Vec<(&Job, FileText)> = {
        let st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        jobs.iter()
            .filter_map(|job| Some((job, st.ahead.get(&job.node)?.text.clone()?)))
            .collect()
    };
    if texts.is_empty() {
        return;
    }
    let files: Vec<(&Job, &[u8])> = texts.iter().map(|(j, t)| (*j, &t[..])).collect();
    let still_ahead = |job: &Job| {
        shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ahead
            .contains_key(&job.node)
    };
    let pushed = pusher.push(&files, &still_ahead);
    let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    for ((job, _), pushed) in files.iter().zip(pushed) {
        if pushed {
            st.stats.pushed += 1;
            // Its reader finds the pages: no READ will take it out of the budget.
            if let Some(a) = st.ahead.remove(&job.node) {
                st.ahead_bytes -= a.bytes;
            }
        }
    }
}

/// Reads one file ahead; its bytes, or `None` when it was dropped.
fn read_ahead(shared: &Shared, repo: &Repo, job: &Job) -> Option<u64> {
    // Its reader came first (or it is read ahead already): not even its filelog is opened
    // (a first tar overtakes read-ahead thousands of times).
    if shared
        .state
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .taken(&job.node)
    {
        return None;
    }
    // From the disk too: its reads overlap the reader's work (the disk serves several at
    // once faster than one after another).
    let fl = repo.filelog(&job.path).ok()?;
    let rev = fl.rev_of(&job.node).ok()?;
    let len = fl.raw_len(rev).ok()??;
    if len > MAX_TEXT {
        // Into the on-disk cache (not the budget's: it holds no memory), unless its
        // reader came first.
        let reader_came = shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .read
            .contains(&job.node);
        let big = shared.big_texts.get().filter(|_| !reader_came)?;
        let text = big.build(repo, job)?;
        // Pushed too: the reader's READs of it, a MiB each, would be on its path.
        let unread = || {
            !shared
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .read
                .contains(&job.node)
        };
        if job.push
            && shared
                .pusher
                .get()
                .is_some_and(|p| p.push_big(job, &text, &unread))
        {
            shared
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .stats
                .pushed += 1;
        }
        return Some(len);
    }
    {
        let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if st.ahead_bytes + len > shared.budget {
            // Texts read ahead long ago and never read count no more.
            let stale: Vec<Node> = st
                .ahead
                .iter()
                .filter(|(_, a)| now.duration_since(a.at) > STALE)
                .map(|(n, _)| *n)
                .collect();
            for n in stale {
                if let Some(a) = st.ahead.remove(&n) {
                    st.ahead_bytes -= a.bytes;
                }
            }
        }
        if st.ahead_bytes + len > shared.budget {
            // The budget is spent: this file is left to its reader (the next ones may fit
            // once read texts leave the budget).
            return None;
        }
        if st.taken(&job.node) {
            return None;
        }
        st.ahead.insert(
            job.node,
            Ahead {
                bytes: len,
                at: now,
                push: job.push,
                text: None,
            },
        );
        st.ahead_bytes += len;
    }
    // Into the text cache, then the size (from the cached text).
    let text = fl
        .read(rev)
        .ok()
        .filter(|_| repo.file_size(&job.path, &job.node).is_ok());
    let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    match text {
        Some(text) => {
            // Unless its reader came meanwhile (and rebuilt it too, from the text cache).
            if let Some(a) = st.ahead.get_mut(&job.node) {
                a.text = Some(text);
            }
            Some(len)
        }
        None => {
            if let Some(a) = st.ahead.remove(&job.node) {
                st.ahead_bytes -= a.bytes;
            }
            None
        }
    }
}
