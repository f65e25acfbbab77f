//! The daemon's control socket: a Unix socket in the mount's state directory through which
//! `revfs` commands talk to the daemon. One JSON request per line, one JSON response per
//! line. Only the user who owns the daemon (or root) may connect (checked with SO_PEERCRED).
//!
//! A request may carry `"progress": true` (any request; default false): the daemon then
//! sends `{"reply":"progress","done":N,"total":M,"what":"..."}` lines (the latest state, at
//! most every [`PROGRESS_INTERVAL`]) before the final response. Clients that do not ask
//! never see them. While the handler works without reporting (its thread uses CPU), the
//! last state is sent again every [`HEARTBEAT_INTERVAL`]: a heartbeat. A handler that waits
//! on a lock or on the kernel sends nothing, so the client's deadline catches a daemon that
//! stopped working.
//!
//! Every client has a deadline ([`request`]): connecting, and each line of the answer,
//! must come within it, or the call fails with [`ControlError::NotAnswering`]. A long
//! request is fine for as long as its progress lines keep coming.

use crate::journal::Track;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The shortest time between two progress lines of one request.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// How often a handler that works without reporting progress is announced as alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// What a client may ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Is the daemon there? Answered without any lock of the working copy.
    Ping,
    Info,
    /// Version 7: what the daemon holds in memory (for tests and benchmarks; it walks the
    /// inode table, so it is not for every command).
    Stats,
    /// Status of the working copy (M, A, R and ! always; the others on request).
    Status {
        clean: bool,
        ignored: bool,
        unknown: bool,
        /// Version 6: also the directories that may be empty once unknown and ignored
        /// files are gone ([`Response::Status`]'s `dirs`; what hg's purge asks of its walk).
        #[serde(default)]
        dirs: bool,
    },
    /// Changes how paths are tracked (add, forget, remove).
    Track {
        paths: Vec<Vec<u8>>,
        track: Track,
        /// Version 7: sent inside an hg transaction; journaled once it is over
        /// ([`Request::ConfirmTracking`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        txn: bool,
    },
    /// Restores paths to the base revision's content (revert), dropping overlay copies.
    Restore {
        paths: Vec<Vec<u8>>,
    },
    /// Version 7: the copy sources only (what hg's `dirstate.copies()` asks), without a
    /// status.
    Copies,
    /// Records (or clears, with `None`) copy sources: (destination, source).
    Copy {
        copies: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        /// Version 7: as `Track`'s.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        txn: bool,
    },
    /// Version 7: the hg transaction inside which tracking changed is over (closed, or
    /// rolled back and its dirstate restored): those changes are journaled as they stand.
    ConfirmTracking,
    /// Commits the changes (all, or those of `paths`) and makes the new changeset the
    /// working-copy parent.
    Commit {
        paths: Option<Vec<Vec<u8>>>,
        user: Vec<u8>,
        time: i64,
        tz: i32,
        message: Vec<u8>,
    },
    /// Switches the working copy to revision `node` (hex); `clean` discards changes.
    /// `keep` (protocol version 4): paths hg's merge handles itself (an update over local
    /// changes), neither checked nor touched; `dry_run`: only the checks. Neither goes with
    /// `clean`.
    Update {
        node: String,
        clean: bool,
        #[serde(default)]
        keep: Vec<Vec<u8>>,
        #[serde(default)]
        dry_run: bool,
        /// Version 5: `node` may be a changeset of the hg transaction under way, in its
        /// pending changelog (`00changelog.i.a`).
        #[serde(default)]
        pending: bool,
    },
    /// Reads the files `paths` of revision `node` (hex; `None`: the working-copy parent)
    /// through the daemon's repository handle, so that its caches hold them.
    Prefetch {
        #[serde(default)]
        node: Option<String>,
        paths: Vec<Vec<u8>>,
    },
    /// What hg's dirstate knows of `paths` (the Mercurial extension's `get_entry` and
    /// `hasdir`): whether each is tracked in the parent and in the working copy, and
    /// whether it is a directory of tracked or removed files.
    Lookup {
        paths: Vec<Vec<u8>>,
    },
    /// For each of `paths`, the other paths hg's dirstate holds (tracked or removed) that
    /// equal it but for case (hg's case-collision warning on `add`). Protocol version 3.
    CaseVariants {
        paths: Vec<Vec<u8>>,
    },
    /// Makes `node` (hex) the working-copy parent without touching a file (hg's commit,
    /// amend, `strip --keep` in a mount); `files`: the paths whose state hg changed with
    /// it, each tracked in the working copy or not. Protocol version 3.
    SetParent {
        node: String,
        files: Vec<(Vec<u8>, bool)>,
        /// Version 4: the second parent (hex; absent or null: none, which ends a merge), and
        /// which of `files` hg marked as merged or taken from it (`p2_info`).
        #[serde(default)]
        p2: Option<String>,
        #[serde(default)]
        from_p2: Vec<Vec<u8>>,
        /// Version 4: which of `files` hg says the new parent tracks (`p1_tracked`; absent:
        /// as its manifest says).
        #[serde(default)]
        in_p1: Option<Vec<Vec<u8>>>,
        /// Version 5: `node` may be a changeset of the hg transaction under way.
        #[serde(default)]
        pending: bool,
    },
    /// Syncs the journal and ends the daemon, whatever is still open in the mount (its
    /// connection to the kernel closes with it): `revfs unmount --force` after a lazy
    /// unmount left files open.
    Shutdown,
    /// The daemon opens nothing in its own mount for a while (`QUIESCE_PAUSE`) and answers
    /// once it has nothing open there (it waits up to `QUIESCE_WAIT`): `revfs unmount`
    /// sends it first, so that read-ahead's read leases (`lease.rs`) never make the
    /// unmount fail as busy (version 8).
    Quiesce,
    /// Debug builds only: read-ahead pushes nothing into the page cache from now on, for
    /// tests of what read-ahead holds itself (version 8).
    DebugNoPush,
    /// Debug builds only: the daemon stops answering its filesystem (it holds the working
    /// copy's lock forever), as a deadlock would. For tests of the watchdogs.
    DebugHang,
    /// Debug builds only: every push into the page cache at open (passthrough on) waits
    /// `ms` milliseconds before it fills the pages and as long after, so that tests can
    /// change and read the file meanwhile.
    DebugPushDelay {
        ms: u64,
    },
    /// Debug builds only: every read-only open (passthrough on) waits `ms` milliseconds
    /// between its look at the file and its decision, so that tests can open the file for
    /// writing meanwhile.
    DebugOpenDelay {
        ms: u64,
    },
    /// Debug builds only: every lookup waits `ms` milliseconds before it is served, so that
    /// tests can kill the daemon while one waits (version 8).
    DebugLookupDelay {
        ms: u64,
    },
}

/// Options that any request may carry next to its `cmd`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// Send progress lines before the final response.
    #[serde(default)]
    pub progress: bool,
}

/// What the daemon says about its mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountInfo {
    pub pid: u32,
    pub repo: PathBuf,
    pub mountpoint: PathBuf,
    pub node: String,
    pub rev: i64,
    pub inodes: u64,
    /// The version of this protocol the daemon speaks (absent from older daemons: 1).
    #[serde(default = "protocol_one")]
    pub protocol: u32,
    /// The second parent of a merge hg is making in the mount (version 4; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p2: Option<String>,
    /// Whether the mount uses kernel passthrough for overlay files: `on`, or `off (why)`
    /// (absent from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<String>,
    /// How the kernel hands the mount its requests: `io_uring (N rings)`, or
    /// `/dev/fuse (why)` (absent from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<String>,
}

/// The version of the control protocol this code speaks: 2 added `lookup` and
/// `Info.protocol`, for the Mercurial extension.
pub const PROTOCOL_VERSION: u32 = 8;

/// How long [`Request::Quiesce`] keeps the daemon out of its mount, and how long it waits
/// for what the daemon has open there.
pub const QUIESCE_PAUSE: std::time::Duration = std::time::Duration::from_secs(10);
pub const QUIESCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

fn protocol_one() -> u32 {
    1
}

/// One path's dirstate facts ([`Request::Lookup`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathState {
    /// Tracked in the working copy's parent (its manifest has the file).
    pub p1: bool,
    /// Tracked in the working copy (added, or in the parent and not removed).
    pub wc: bool,
    /// A directory holding files tracked in the working copy or removed from it.
    pub dir: bool,
    /// Merged, or taken from the second parent, in the merge hg is making (hg's
    /// `p2_info`; version 4, absent: false).
    #[serde(default)]
    pub p2: bool,
}

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Response {
    Pong {
        pid: u32,
        /// How long the oldest filesystem request being served has been at it, in ms (0:
        /// none). A large value means the filesystem does not answer although the control
        /// socket does.
        #[serde(default)]
        busy_ms: u64,
        /// Filesystem requests being served.
        #[serde(default)]
        busy: u32,
    },
    Info(MountInfo),
    /// Entries of the inode table, the distinct manifests it holds (the base and those
    /// directories not listed yet take their entries from) and their bytes, on the heap and
    /// mapped.
    Stats {
        entries: u64,
        frozen: u64,
        manifests: u64,
        manifest_bytes: u64,
        #[serde(default)]
        mapped_manifest_bytes: u64,
        #[serde(default)]
        listed: u64,
        /// Read-ahead (`readahead.rs`), when on: rounds started, files and bytes read
        /// ahead, files dropped, files a reader then read, bytes read ahead not read yet.
        #[serde(default)]
        readahead: Option<crate::readahead::ReadaheadStats>,
        /// Filelogs the repository handle holds open (version 7; missing from older
        /// daemons: 0).
        #[serde(default)]
        open_filelogs: u64,
        /// Opens answered through a backing file and in the page cache (passthrough on;
        /// both 0 when off).
        #[serde(default)]
        passthrough_opens: u64,
        #[serde(default)]
        cached_opens: u64,
        /// Of the opens in the page cache, those that filled it first (missing from older
        /// daemons: 0).
        #[serde(default)]
        pushed_opens: u64,
        /// Directories the lease helper listed from the daemon before it took leases in
        /// them (`lease.rs`; missing from older daemons: 0).
        #[serde(default)]
        lease_listings: u64,
    },
    /// Status lines in hg's order: (letter, path), and copy sources (destination, source).
    Status {
        entries: Vec<(char, Vec<u8>)>,
        copies: Vec<(Vec<u8>, Vec<u8>)>,
        /// hg's warnings while it read the ignore files (an unknown `syntax:`), when unknown
        /// or ignored files were asked for (absent from older daemons' answers: none).
        #[serde(default)]
        warnings: Vec<String>,
        /// When `dirs` was asked (version 6): every directory at or below a changed path,
        /// and their ancestors, outside `.hg` and nested repositories, sorted.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        dirs: Vec<Vec<u8>>,
    },
    /// The copy sources (destination, source), by destination (version 7).
    Copies {
        copies: Vec<(Vec<u8>, Vec<u8>)>,
    },
    Done,
    Committed {
        node: String,
    },
    NothingChanged,
    Updated {
        updated: usize,
        removed: usize,
        /// The new parent's branch, so that hg need not read its changeset again (absent
        /// from older daemons' answers: empty, meaning ask the store).
        #[serde(default)]
        branch: Vec<u8>,
    },
    /// The update would overwrite changes to these paths; `untracked`: they are untracked
    /// files that differ from the target's (absent in older daemons' answers: false).
    Conflicts {
        paths: Vec<Vec<u8>>,
        #[serde(default)]
        untracked: bool,
    },
    /// Answer to [`Request::Lookup`], one per path in order.
    Lookup {
        entries: Vec<PathState>,
    },
    /// One list of paths per path asked (`case_variants`).
    CaseVariants {
        entries: Vec<Vec<Vec<u8>>>,
    },
    /// What a prefetch read: files and bytes of content.
    Prefetched {
        files: u64,
        bytes: u64,
    },
    /// Not a final answer: how far the request has come (only when it asked for progress).
    /// `total` 0 means the amount of work is unknown.
    Progress {
        done: u64,
        total: u64,
        what: String,
    },
    Error {
        message: String,
    },
}

/// Errors talking over the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("cannot reach the revfs daemon at {}: {source}", path.display())]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {}: bad message: {reason}", path.display())]
    Protocol { path: PathBuf, reason: String },
    /// The daemon did not accept the connection, or said nothing, within the deadline.
    #[error("the revfs daemon at {} did not answer within {}", path.display(), seconds(*waited))]
    NotAnswering { path: PathBuf, waited: Duration },
    /// The daemon answers, but a filesystem request of its mount has waited this long.
    #[error("the revfs daemon at {} answers, but a filesystem request has waited {}", path.display(), seconds(*waited))]
    FilesystemStuck { path: PathBuf, waited: Duration },
}

/// `5 s`, `0.5 s`: a duration as people read it.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", s as u64)
    } else {
        format!("{s:.1} s")
    }
}

/// The uid of the peer of a Unix socket.
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a properly sized ucred.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Where a request's progress goes: to its connection as `progress` lines when the client
/// asked for them, else nowhere. [`Progress::report`] only records the latest state (a
/// mutex, no I/O: callers may hold the working copy's lock); one thread of the daemon (the
/// progress thread, shared by every request) sends it at most every [`PROGRESS_INTERVAL`],
/// and the heartbeats, so a client that reads slowly, or not at all, never holds up the
/// work. A client that went away does not stop the work either.
pub struct Progress {
    entry: Option<Arc<Entry>>,
}

/// One request that asked for progress, as the progress thread sees it.
struct Entry {
    state: Mutex<ProgressState>,
    /// Held while a line is written: [`Progress::finish`] takes it to wait for a line in
    /// flight, so that none follows the answer.
    writing: Mutex<UnixStream>,
    /// The CPU clock of the handler's thread: a heartbeat is sent while it advances.
    handler_clock: Option<libc::clockid_t>,
}

struct ProgressState {
    what: String,
    done: u64,
    total: u64,
    /// A state not sent yet.
    fresh: bool,
    /// The request is over (or its client gone): nothing more is sent.
    finished: bool,
    last_sent: std::time::Instant,
    last_cpu: Option<Duration>,
}

impl Entry {
    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The line to send now, if any: the latest state when it changed, or again as a
    /// heartbeat when the handler used CPU since the last line a second ago.
    fn due(&self) -> Option<Response> {
        let mut st = self.lock();
        if st.finished {
            return None;
        }
        if !st.fresh && st.last_sent.elapsed() >= HEARTBEAT_INTERVAL {
            // Working, not waiting: at least 1% of the interval on a CPU.
            let cpu = self.handler_clock.and_then(cpu_time);
            if let (Some(now), Some(before)) = (cpu, st.last_cpu) {
                if now.saturating_sub(before) >= HEARTBEAT_INTERVAL / 100 {
                    st.fresh = true;
                }
            }
            st.last_cpu = cpu;
            st.last_sent = std::time::Instant::now();
        }
        if !st.fresh {
            return None;
        }
        st.fresh = false;
        st.last_sent = std::time::Instant::now();
        Some(Response::Progress {
            done: st.done,
            total: st.total,
            what: st.what.clone(),
        })
    }
}

/// The requests the progress thread serves.
struct Hub {
    entries: Mutex<Vec<Arc<Entry>>>,
    wake: Condvar,
}

/// The progress thread, started with the first request that asks for progress.
fn hub() -> Option<&'static Hub> {
    static HUB: std::sync::OnceLock<Option<&'static Hub>> = std::sync::OnceLock::new();
    *HUB.get_or_init(|| {
        let hub: &'static Hub = Box::leak(Box::new(Hub {
            entries: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("revfs-progress".into())
            .spawn(move || progress_thread(hub))
            .ok()
            .map(|_| hub)
    })
}

/// CPU time used so far on `clock` (a thread's CPU clock), if it can be read.
fn cpu_time(clock: libc::clockid_t) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; an invalid clock gives an error, no UB.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Every [`PROGRESS_INTERVAL`] while requests want progress: sends each one's due line.
/// A client that does not take a line within a second loses its progress (not its answer).
fn progress_thread(hub: &Hub) {
    let mut entries = hub.entries.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        entries.retain(|e| !e.lock().finished);
        if entries.is_empty() {
            entries = hub.wake.wait(entries).unwrap_or_else(|p| p.into_inner());
            continue;
        }
        let now: Vec<Arc<Entry>> = entries.clone();
        drop(entries);
        for e in now {
            let mut stream = e.writing.lock().unwrap_or_else(|p| p.into_inner());
            let Some(line) = e.due() else { continue };
            let sent = serde_json::to_vec(&line).is_ok_and(|mut msg| {
                msg.push(b'\n');
                stream.write_all(&msg).is_ok()
            });
            if !sent {
                e.lock().finished = true;
            }
        }
        std::thread::sleep(PROGRESS_INTERVAL);
        entries = hub.entries.lock().unwrap_or_else(|p| p.into_inner());
    }
}

impl Progress {
    /// Progress that goes nowhere.
    pub fn none() -> Progress {
        Progress { entry: None }
    }

    /// Progress sent on `stream` (nowhere if it cannot be set up). Called on the thread
    /// that runs the handler: its CPU clock drives the heartbeats.
    fn to(stream: &UnixStream) -> Progress {
        let (Ok(clone), Some(hub)) = (stream.try_clone(), hub()) else {
            return Progress::none();
        };
        let _ = clone.set_write_timeout(Some(Duration::from_secs(1)));
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_getcpuclockid writes one clockid for the calling thread.
        let handler_clock =
            (unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0)
                .then_some(clock);
        let entry = Arc::new(Entry {
            state: Mutex::new(ProgressState {
                what: String::new(),
                done: 0,
                total: 0,
                fresh: false,
                finished: false,
                last_sent: std::time::Instant::now(),
                last_cpu: handler_clock.and_then(cpu_time),
            }),
            writing: Mutex::new(clone),
            handler_clock,
        });
        hub.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(entry.clone());
        hub.wake.notify_all();
        Progress { entry: Some(entry) }
    }

    /// True when the client asked for progress (callers may skip work meant only for it).
    pub fn wanted(&self) -> bool {
        self.entry.is_some()
    }

    /// `done` of `total` units of phase `what` are done (`total` 0: unknown). Cheap: the
    /// state is recorded, the progress thread sends the latest one.
    pub fn report(&self, what: &str, done: u64, total: u64) {
        let Some(entry) = &self.entry else { return };
        let mut state = entry.lock();
        if state.what != what {
            state.what.clear();
            state.what.push_str(what);
        }
        state.done = done;
        state.total = total;
        state.fresh = true;
    }

    /// No more lines (after the one in flight, if any): the answer comes next.
    fn finish(&mut self) {
        if let Some(entry) = self.entry.take() {
            entry.lock().finished = true;
            drop(entry.writing.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A request handler: the request, and where its progress goes.
pub type Handler = dyn Fn(Request, &Progress) -> Response + Send + Sync;

/// Serves requests on `path` in a background thread until the process exits.
pub fn serve(
    path: &Path,
    handler: Arc<Handler>,
) -> Result<std::thread::JoinHandle<()>, ControlError> {
    let io = |source| ControlError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let listener = UnixListener::bind(path).map_err(io)?;
    // SAFETY: getuid has no preconditions.
    let owner = unsafe { libc::getuid() };
    std::thread::Builder::new()
        .name("revfs-control".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let stream = match stream {
                    Ok(s) => s,
                    Err(e) => {
                        // Out of descriptors (EMFILE) or memory: wait a little rather than
                        // spin on a connection the kernel keeps offering.
                        tracing::warn!("control connection not accepted: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                match peer_uid(&stream) {
                    Ok(uid) if uid == owner || uid == 0 => {}
                    Ok(uid) => {
                        tracing::warn!(uid, "control connection from another user refused");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("control connection without credentials: {e}");
                        continue;
                    }
                }
                if OPEN_CONNECTIONS.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel);
                    refuse(&stream);
                    continue;
                }
                let handler = handler.clone();
                let spawned = std::thread::Builder::new()
                    .name("revfs-control-conn".into())
                    .spawn(move || {
                        handle(stream, &*handler);
                        OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .map_err(io)
}

/// Control connections served at once; one more is answered with an error and closed (each
/// holds a descriptor and a thread).
pub const MAX_CONNECTIONS: usize = 64;

static OPEN_CONNECTIONS: AtomicUsize = AtomicUsize::new(0);

/// Answers a connection over the bound with an error, without reading it.
fn refuse(stream: &UnixStream) {
    tracing::warn!(
        MAX_CONNECTIONS,
        "control connection refused: too many at once"
    );
    let response = Response::Error {
        message: format!(
            "the daemon is serving {MAX_CONNECTIONS} control connections already; try again"
        ),
    };
    if let Ok(mut out) = serde_json::to_vec(&response) {
        out.push(b'\n');
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = (&*stream).write_all(&out);
    }
}

fn handle(stream: UnixStream, handler: &Handler) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
        let response = match serde_json::from_str::<Request>(&line) {
            Ok(req) => {
                let opts = serde_json::from_str::<RequestOptions>(&line).unwrap_or_default();
                if opts.progress {
                    let mut progress = Progress::to(&stream);
                    let response = handler(req, &progress);
                    // No progress line after (or inside) the answer.
                    progress.finish();
                    response
                } else {
                    handler(req, &Progress::none())
                }
            }
            Err(e) => Response::Error {
                message: format!("bad request: {e}"),
            },
        };
        let Ok(mut out) = serde_json::to_vec(&response) else {
            return;
        };
        out.push(b'\n');
        if (&stream).write_all(&out).is_err() {
            return;
        }
        line.clear();
    }
}

/// Sends one request on a connection of its own and waits for the response. `deadline`
/// bounds the connection and the silence before each line of the answer: a daemon that
/// says nothing for that long is not answering ([`ControlError::NotAnswering`]). Requests
/// other than `Ping` and `Info` ask for progress lines (and ignore them), so that a long
/// request whose daemon works is not mistaken for a frozen one.
pub fn request(path: &Path, req: &Request, deadline: Duration) -> Result<Response, ControlError> {
    Client::connect(path, deadline)?.request(req, None)
}

/// Sends one request asking for progress, calls `on_progress(what, done, total)` for each
/// progress line, and returns the final response. `deadline` bounds the connection and the
/// wait for each line.
pub fn request_with_progress(
    path: &Path,
    req: &Request,
    deadline: Duration,
    on_progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Response, ControlError> {
    Client::connect(path, deadline)?.request(req, Some(on_progress))
}

/// What a client does with a progress line: `(what, done, total)`.
pub type OnProgress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// A connection to a daemon, for one request or several in a row (a command pings, then
/// asks: one connection saves the daemon a thread and the client a round trip).
pub struct Client {
    path: PathBuf,
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    deadline: Duration,
    last_used: std::time::Instant,
}

/// The daemon closes a connection idle for 30 s; a client reconnects well before.
const REUSE_IDLE: Duration = Duration::from_secs(20);

impl Client {
    /// Connects within `deadline`; each request's lines must then come within it too.
    pub fn connect(path: &Path, deadline: Duration) -> Result<Client, ControlError> {
        let stream = connect(path, deadline)?;
        let io = |source| ControlError::Io {
            path: path.to_owned(),
            source,
        };
        stream.set_read_timeout(Some(deadline)).map_err(io)?;
        stream.set_write_timeout(Some(deadline)).map_err(io)?;
        let reader = BufReader::new(stream.try_clone().map_err(io)?);
        Ok(Client {
            path: path.to_owned(),
            stream,
            reader,
            deadline,
            last_used: std::time::Instant::now(),
        })
    }

    /// Whether the connection may still be used (the daemon has not dropped it for idling).
    pub fn fresh(&self) -> bool {
        self.last_used.elapsed() < REUSE_IDLE
    }

    /// Sends `req` and returns the final response. Progress lines go to `on_progress` when
    /// given; requests other than `Ping` and `Info` ask for them anyway (for the deadline's
    /// sake) and drop them.
    pub fn request(
        &mut self,
        req: &Request,
        on_progress: Option<OnProgress>,
    ) -> Result<Response, ControlError> {
        self.send(req, on_progress.is_some())?;
        self.receive(on_progress)
    }

    /// Sends `req` without waiting for its answer ([`Client::receive`] reads it; answers
    /// come in the order of the requests). `progress` asks for progress lines.
    pub fn send(&mut self, req: &Request, progress: bool) -> Result<(), ControlError> {
        let quick = matches!(req, Request::Ping | Request::Info);
        let mut value = serde_json::to_value(req).map_err(|e| self.protocol(e.to_string()))?;
        if progress || !quick {
            if let serde_json::Value::Object(map) = &mut value {
                map.insert("progress".into(), serde_json::Value::Bool(true));
            }
        }
        let mut msg = serde_json::to_vec(&value).map_err(|e| self.protocol(e.to_string()))?;
        msg.push(b'\n');
        (&self.stream).write_all(&msg).map_err(|e| self.io(e))
    }

    /// Reads the answer to the oldest request sent and not answered yet.
    pub fn receive(&mut self, on_progress: Option<OnProgress>) -> Result<Response, ControlError> {
        let mut on_progress = on_progress;
        let mut line = String::new();
        let answer = loop {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) => {
                    return Err(
                        self.protocol("the daemon closed the connection without an answer".into())
                    )
                }
                Ok(_) => {}
                Err(e) => return Err(self.io(e)),
            }
            match serde_json::from_str(&line).map_err(|e| self.protocol(e.to_string()))? {
                Response::Progress { done, total, what } => {
                    if let Some(f) = on_progress.as_mut() {
                        f(&what, done, total);
                    }
                }
                other => break other,
            }
        };
        self.last_used = std::time::Instant::now();
        Ok(answer)
    }

    fn protocol(&self, reason: String) -> ControlError {
        ControlError::Protocol {
            path: self.path.clone(),
            reason,
        }
    }

    /// A read or write that timed out means the daemon is not answering.
    fn io(&self, source: std::io::Error) -> ControlError {
        if matches!(
            source.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            ControlError::NotAnswering {
                path: self.path.clone(),
                waited: self.deadline,
            }
        } else {
            ControlError::Io {
                path: self.path.clone(),
                source,
            }
        }
    }
}

/// Connects to the socket at `path`, giving up after `deadline`: a daemon whose listen
/// backlog is full (it stopped accepting) makes a blocking `connect` wait forever.
pub fn connect(path: &Path, deadline: Duration) -> Result<UnixStream, ControlError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::FromRawFd;
    let connect_err = |source| ControlError::Connect {
        path: path.to_owned(),
        source,
    };
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(connect_err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "socket path too long",
        )));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket has no memory preconditions.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(connect_err(std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh socket that nothing else owns.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    let start = std::time::Instant::now();
    loop {
        // SAFETY: addr is a valid sockaddr_un of the size given.
        let rc = unsafe {
            libc::connect(
                fd,
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            // The backlog is full: the daemon does not accept.
            Some(libc::EAGAIN) if start.elapsed() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Some(libc::EAGAIN) => {
                return Err(ControlError::NotAnswering {
                    path: path.to_owned(),
                    waited: deadline,
                })
            }
            _ => return Err(connect_err(e)),
        }
    }
    stream.set_nonblocking(false).map_err(connect_err)?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_get_answers_over_the_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        serve(
            &sock,
            Arc::new(|req, _: &Progress| match req {
                Request::Ping => Response::Pong {
                    pid: 7,
                    busy_ms: 0,
                    busy: 0,
                },
                _ => Response::Error {
                    message: "no".into(),
                },
            }),
        )
        .unwrap();
        let r = request(&sock, &Request::Ping, Duration::from_secs(5)).unwrap();
        assert!(matches!(r, Response::Pong { pid: 7, .. }));
        let r = request(&sock, &Request::Info, Duration::from_secs(5)).unwrap();
        assert_eq!(
            r,
            Response::Error {
                message: "no".into()
            }
        );
    }

    #[test]
    fn progress_lines_come_only_when_asked_for() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        let pause = || std::thread::sleep(PROGRESS_INTERVAL * 5);
        serve(
            &sock,
            Arc::new(move |req, progress: &Progress| {
                progress.report("counting", 1, 3);
                pause();
                progress.report("counting", 2, 3);
                progress.report("counting", 3, 3);
                pause();
                progress.report("writing", 0, 0);
                pause();
                match req {
                    Request::Ping => Response::Pong {
                        pid: 1,
                        busy_ms: 0,
                        busy: 0,
                    },
                    _ => Response::Done,
                }
            }),
        )
        .unwrap();
        let five = Duration::from_secs(5);
        // Without asking: the final answer only.
        assert!(matches!(
            request(&sock, &Request::Ping, five).unwrap(),
            Response::Pong { pid: 1, .. }
        ));
        let mut seen = Vec::new();
        let r = request_with_progress(&sock, &Request::Ping, five, &mut |w, d, t| {
            seen.push((w.to_owned(), d, t))
        })
        .unwrap();
        assert!(matches!(r, Response::Pong { pid: 1, .. }));
        // The latest state is sent: states replaced within an interval are not.
        assert_eq!(
            seen,
            [
                ("counting".to_owned(), 1, 3),
                ("counting".to_owned(), 3, 3),
                ("writing".to_owned(), 0, 0)
            ]
        );
        // Raw lines, as an old client or a test would send them.
        let raw = |text: &str| {
            let s = UnixStream::connect(&sock).unwrap();
            (&s).write_all(text.as_bytes()).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut out = String::new();
            std::io::Read::read_to_string(&mut &s, &mut out).unwrap();
            out
        };
        assert_eq!(
            raw("{\"cmd\":\"ping\"}\n"),
            "{\"reply\":\"pong\",\"pid\":1,\"busy_ms\":0,\"busy\":0}\n"
        );
        let with = raw("{\"cmd\":\"ping\",\"progress\":true}\n");
        assert!(
            with.starts_with(
                "{\"reply\":\"progress\",\"done\":1,\"total\":3,\"what\":\"counting\"}\n"
            ),
            "{with}"
        );
        assert!(
            with.ends_with("\n{\"reply\":\"pong\",\"pid\":1,\"busy_ms\":0,\"busy\":0}\n"),
            "{with}"
        );
        let prefetch =
            raw("{\"cmd\":\"prefetch\",\"paths\":[[97]],\"node\":null,\"progress\":false}\n");
        assert_eq!(prefetch, "{\"reply\":\"done\"}\n");
    }

    #[test]
    fn a_missing_daemon_is_a_connect_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = request(
            &tmp.path().join("none.sock"),
            &Request::Ping,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, ControlError::Connect { .. }));
    }

    #[test]
    fn a_daemon_that_does_not_accept_is_not_answering_within_the_deadline() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        // Bound but never accepting: connect succeeds (the backlog), the answer never comes.
        let _listener = UnixListener::bind(&sock).unwrap();
        let t0 = std::time::Instant::now();
        let err = request(&sock, &Request::Ping, Duration::from_millis(500)).unwrap_err();
        assert!(matches!(err, ControlError::NotAnswering { .. }), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert!(
            err.to_string().contains("did not answer within 0.5 s"),
            "{err}"
        );
    }

    #[test]
    fn a_handler_that_works_sends_heartbeats_and_one_that_waits_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        serve(
            &sock,
            Arc::new(|req, _: &Progress| {
                let until = std::time::Instant::now() + Duration::from_millis(2500);
                match req {
                    // Works (uses CPU) for 2.5 s without reporting anything.
                    Request::Info => {
                        let mut x = 0u64;
                        while std::time::Instant::now() < until {
                            x = std::hint::black_box(x.wrapping_add(1));
                        }
                        Response::Done
                    }
                    // Waits 2.5 s, as on a lock that never comes free.
                    _ => {
                        std::thread::sleep(until - std::time::Instant::now());
                        Response::Done
                    }
                }
            }),
        )
        .unwrap();
        let deadline = Duration::from_millis(1800);
        let mut beats = 0;
        let r = request_with_progress(&sock, &Request::Info, deadline, &mut |_, _, _| beats += 1);
        assert_eq!(r.unwrap(), Response::Done);
        assert!(beats >= 1, "no heartbeat");
        let err = request(
            &sock,
            &Request::Status {
                clean: false,
                ignored: false,
                unknown: false,
                dirs: false,
            },
            deadline,
        )
        .unwrap_err();
        assert!(matches!(err, ControlError::NotAnswering { .. }), "{err}");
    }
}
