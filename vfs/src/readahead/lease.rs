//! Read leases on files of the mount, so that read-ahead may fill a file's pages with
//! passthrough off (`passthrough.rs`).
//!
//! A push (`FUSE_NOTIFY_STORE`) writes pages over whatever the kernel holds, so no writer
//! may have the file open meanwhile. With passthrough off the daemon never sees an open
//! (the kernel stops sending them), so it asks the kernel instead: it opens the file
//! through its own mount, read-only, and takes a read lease on it (`F_SETLEASE`,
//! `F_RDLCK`). The kernel grants one only while no descriptor has the file open for
//! writing (a writable shared mapping holds one), and an open for writing or a truncate
//! breaks the lease and waits until it is let go, which is after the push. Without the
//! kernel's write-back cache (revfs never asks for it) no dirty page outlives a writer's
//! descriptor. A lease break's signal (SIGIO) is ignored by the daemon: read-ahead takes
//! the leases of a batch of files in one round trip to the helper ([`Leases::take`]),
//! pushes them, and lets each go unasked after its push, the helper told of a few at once
//! (within [`LET_GO_WITHIN`]).
//!
//! The descriptor is one of the mount's: an unmount while it is open fails as busy, so
//! `revfs unmount` first asks the daemon to take no lease for a while
//! ([`Leases::quiesce`], the control socket's `quiesce`).
//!
//! The descriptors are opened and held by a helper process of the daemon's (`helper.rs`:
//! the revfs binary run as [`HELPER_ARG`], on pipes), not by the daemon, whose wait on the
//! mount ends with the daemon.

use crate::helper::Helper;
use std::ffi::{CString, OsStr};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The inode of a FUSE mount's root (the kernel's FUSE_ROOT_ID).
const ROOT_INO: u64 = 1;

/// The first argument that makes the revfs binary the lease helper (`cli/src/main.rs`
/// hands it to [`helper_main`] before anything else).
pub const HELPER_ARG: &str = "--revfs-lease-helper";

/// The leases of one mount.
#[derive(Default)]
pub struct Leases {
    /// The helper (set once the mount serves). Each request is a byte and a
    /// NUL-terminated argument; each answer one line (`R` has none: the daemon does not
    /// wait for a lease to be let go).
    helper: OnceLock<Mutex<Helper>>,
    /// Its process id.
    helper_pid: OnceLock<u32>,
    /// The kernel refused leases on this mount for good, the helper is gone, or tests
    /// turned them off.
    disabled: AtomicBool,
    state: Mutex<State>,
    idle: Condvar,
    /// Directories the helper listed from the daemon (not from the kernel's cache) since
    /// [`Leases::take_listed`] last asked.
    listed: Mutex<Vec<u64>>,
    /// How many directories the helper listed from the daemon, ever.
    listings: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct State {
    /// Leases held or being taken now (descriptors open in the mount, or about to be).
    held: usize,
    /// No lease is taken before this (an unmount is coming).
    paused_until: Option<Instant>,
}

/// Read leases held on files of the mount, asked for together ([`Leases::take`]), let go
/// together (their descriptors closed) when dropped.
pub struct LeaseBatch<'a> {
    /// Per path asked for: its inode and the descriptor's number in the helper, when
    /// granted.
    granted: Vec<Option<(u64, RawFd)>>,
    leases: &'a Leases,
    /// Leases let go ([`LeaseBatch::let_go`]) and not told to the helper yet, and since
    /// when the oldest waits.
    untold: Vec<RawFd>,
    untold_since: Option<Instant>,
}

/// How long a lease let go may wait to be told to the helper together with the next ones.
/// Telling it wakes it: a pipe write and a switch to another process for each file, a
/// tenth of read-ahead's time in a first tar (`perf record --call-graph dwarf` of the
/// daemon, docs/BENCHMARKS.md) when each file's lease was told alone. A writer of the file
/// waits at most this and one more push.
const LET_GO_WITHIN: Duration = Duration::from_millis(2);

impl LeaseBatch<'_> {
    /// The inode of the `i`th path asked for, when its lease was granted.
    pub fn ino(&self, i: usize) -> Option<u64> {
        self.granted.get(i).copied().flatten().map(|(ino, _)| ino)
    }

    /// Lets go of the `i`th path's lease after its push, not with the batch: a writer of
    /// that file waits for its own push and at most [`LET_GO_WITHIN`] more, not for the
    /// pushes of all the files after it. The helper is told of the leases let go together,
    /// once the oldest has waited that long (or at [`LeaseBatch::tell_now`], or when the
    /// batch ends).
    pub fn let_go(&mut self, i: usize) {
        if let Some((_, fd)) = self.granted.get_mut(i).and_then(Option::take) {
            self.untold.push(fd);
            let since = *self.untold_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= LET_GO_WITHIN {
                self.tell_now();
            }
        }
    }

    /// Tells the helper now of the leases let go so far: before a push that may wait
    /// longer than a push takes (a test's hold or delay).
    pub fn tell_now(&mut self) {
        let fds: Vec<String> = self.untold.drain(..).map(|fd| fd.to_string()).collect();
        self.untold_since = None;
        self.release(&fds);
    }

    fn release(&self, fds: &[String]) {
        if fds.is_empty() {
            return;
        }
        // Not waited for: the helper lets go before it takes the next leases, and a
        // quiesce's ping comes after.
        if let Err(e) = self.leases.tell(b'R', fds.join(" ").as_bytes()) {
            self.leases.gone(&e);
        }
        self.leases.let_go(fds.len());
    }
}

impl Drop for LeaseBatch<'_> {
    fn drop(&mut self) {
        let fds: Vec<String> = self
            .untold
            .iter()
            .copied()
            .chain(self.granted.iter().flatten().map(|&(_, fd)| fd))
            .map(|fd| fd.to_string())
            .collect();
        self.release(&fds);
    }
}

impl Leases {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `n` leases fewer held (their descriptors closed, or never opened).
    fn let_go(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut st = self.lock();
        st.held = st.held.saturating_sub(n);
        drop(st);
        self.idle.notify_all();
    }

    fn ask(&self, op: u8, arg: &[u8], lines: usize) -> std::io::Result<Vec<Vec<u8>>> {
        match self.helper.get() {
            Some(h) => h
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .ask(op, arg, lines),
            None => Err(std::io::ErrorKind::NotConnected.into()),
        }
    }

    fn tell(&self, op: u8, arg: &[u8]) -> std::io::Result<()> {
        match self.helper.get() {
            Some(h) => h.lock().unwrap_or_else(|p| p.into_inner()).tell(op, arg),
            None => Err(std::io::ErrorKind::NotConnected.into()),
        }
    }

    /// The helper stopped answering: no lease from now on.
    fn gone(&self, e: &std::io::Error) {
        if !self.disabled.swap(true, Ordering::Relaxed) {
            tracing::warn!("the lease helper is gone, no pushes with passthrough off: {e}");
        }
    }

    /// The mount serves at `mountpoint`: starts the helper, and leases may be taken from
    /// then on. Called once, from a thread that serves no request (the helper looks at
    /// the mount's root before it answers).
    pub fn start(&self, mountpoint: &Path) {
        let helper = match Helper::spawn(HELPER_ARG, mountpoint) {
            Ok(h) => h,
            Err(why) => {
                tracing::info!("no read leases: {why}");
                return;
            }
        };
        let _ = self.helper_pid.set(helper.pid());
        let _ = self.helper.set(Mutex::new(helper));
    }

    /// The helper's process id, once it runs: its requests are no program's. Never takes
    /// the helper's lock, which a thread waiting for the helper holds while the helper
    /// waits for a request of the mount.
    pub fn helper_pid(&self) -> Option<u32> {
        self.helper_pid.get().copied()
    }

    /// The helper listed directory `dir` from its start, from the daemon: the kernel now
    /// keeps that listing, which a program listing the directory would be answered from.
    pub fn helper_listed(&self, dir: u64) {
        if dir == ROOT_INO {
            return;
        }
        self.listings.fetch_add(1, Ordering::Relaxed);
        self.listed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(dir);
    }

    /// How many directories the helper listed from the daemon since the mount started.
    pub fn listings(&self) -> u64 {
        self.listings.load(Ordering::Relaxed)
    }

    /// The directories the helper listed from the daemon since the last call: their
    /// listings are to be dropped from the kernel's cache, so that a program's listing of
    /// one still reaches the daemon (and the walk ahead learns where the program is).
    pub fn take_listed(&self) -> Vec<u64> {
        std::mem::take(&mut *self.listed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// No lease from now on (the kernel refused one for good, or tests asked).
    pub fn disable(&self) {
        self.disabled.store(true, Ordering::Relaxed);
    }

    /// Takes read leases on the mount's files at `paths` (relative to the root), in one
    /// round trip to the helper: a path's lease is not granted when the file is open for
    /// writing, is not there, or is not this mount's (or its path cannot be said on the
    /// pipe: it holds a newline, which no path of a Mercurial manifest does).
    pub fn take<'a>(&'a self, paths: &[&[u8]]) -> LeaseBatch<'a> {
        let mut batch = LeaseBatch {
            granted: vec![None; paths.len()],
            leases: self,
            untold: Vec::new(),
            untold_since: None,
        };
        let asked: Vec<usize> = (0..paths.len())
            .filter(|&i| !paths[i].is_empty() && !paths[i].contains(&b'\n'))
            .collect();
        if asked.is_empty() || self.disabled.load(Ordering::Relaxed) || self.helper.get().is_none()
        {
            return batch;
        }
        {
            let mut st = self.lock();
            if st.paused_until.is_some_and(|t| Instant::now() < t) {
                return batch;
            }
            st.held += asked.len();
        }
        // Counted from here until the helper closes the descriptors (or opens none).
        let arg = asked
            .iter()
            .map(|&i| paths[i])
            .collect::<Vec<_>>()
            .join(&b'\n');
        let answers = match self.ask(b'T', &arg, asked.len()) {
            Ok(a) => a,
            Err(e) => {
                self.gone(&e);
                self.let_go(asked.len());
                return batch;
            }
        };
        let mut refused = 0;
        for (&i, answer) in asked.iter().zip(&answers) {
            let granted = (|| {
                let text = std::str::from_utf8(answer).ok()?;
                let (ino, fd) = text.split_once(' ')?;
                Some((ino.parse().ok()?, fd.parse().ok()?))
            })();
            if granted.is_none() {
                refused += 1;
                if let Some(why) = answer.strip_prefix(b"!") {
                    if !self.disabled.swap(true, Ordering::Relaxed) {
                        tracing::info!(
                            "read leases refused, no pushes with passthrough off: {}",
                            String::from_utf8_lossy(why)
                        );
                    }
                }
            }
            batch.granted[i] = granted;
        }
        self.let_go(refused);
        batch
    }

    /// Takes no lease for `pause`, and waits (up to `wait`) until none is held: the mount
    /// is then free of the helper's descriptors, and an unmount is not refused as busy for
    /// them. True when none is held.
    pub fn quiesce(&self, pause: Duration, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let mut st = self.lock();
        st.paused_until = Some(Instant::now() + pause);
        while st.held > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = match self.idle.wait_timeout(st, left) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
        drop(st);
        // Every lease was let go: once the helper answers a ping, it closed them all (a
        // close waits for the daemon's answer to its flush: within what is left of `wait`).
        let Some(helper) = self.helper.get() else {
            return true;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let mut h = helper.lock().unwrap_or_else(|p| p.into_inner());
        match h.ask_within(b'P', b"", left) {
            Ok(Some(_)) => true,
            Ok(None) => {
                // The answer may come later, read as another's: no lease from now on.
                self.gone(&std::io::ErrorKind::TimedOut.into());
                false
            }
            Err(e) => {
                self.gone(&e);
                true
            }
        }
    }
}

/// The device and inode of an open descriptor, from the kernel's inode (no request to the
/// daemon: `AT_STATX_DONT_SYNC`).
fn dev_ino(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: statx writes into `stx`; an empty path with AT_EMPTY_PATH names `fd`.
    unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        let rc = libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC,
            libc::STATX_INO,
            &mut stx,
        );
        (rc == 0).then(|| {
            (
                libc::makedev(stx.stx_dev_major, stx.stx_dev_minor),
                stx.stx_ino,
            )
        })
    }
}

fn open(path: &Path, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open reads a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `name` in directory `dir` read-only.
fn open_at(dir: &OwnedFd, name: &[u8], flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: openat reads a NUL-terminated name relative to a descriptor we own; the
    // descriptor it returns is owned below.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The directories the helper listed lately, so that each is listed once.
const LISTED_DIRS: usize = 256;

/// Lists directory `fd` to its end (`getdents64`), the entries thrown away: the kernel
/// keeps what the listing made (an entry and an inode per name, when the daemon gives
/// attributes), and a lookup of one of its names is then answered without the daemon.
fn list_all(fd: &OwnedFd) {
    let mut buf = vec![0u8; 32 << 10];
    loop {
        // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n <= 0 {
            return;
        }
    }
}

/// The directories of one request's paths: the last one opened, so that the files of one
/// directory are opened by name, without walking the whole path each time. Dropped at the
/// end of the request: no descriptor of the mount outlives it but the leases'.
///
/// A directory is listed (its entries read to the end) before the first lease taken in
/// it: read-ahead comes to a directory before the program it goes ahead of lists it, and
/// the kernel has no entry for its files yet. Opening one then costs a lookup, a round
/// trip to the daemon each (39,000 in a first `tar` of linux, about 26 us of CPU each);
/// a listing makes them all in a round trip per few dozen names. The daemon drops the
/// listing the kernel keeps of it (`Leases::take_listed`), so that the program's own
/// listing still reaches the daemon.
#[derive(Default)]
struct DirCache {
    last: Option<(Vec<u8>, OwnedFd)>,
}

impl DirCache {
    /// Opens the mount's file at `path` (relative to `root`) read-only, not following a
    /// symlink in its last component. `listed`: the directories listed lately.
    fn open(
        &mut self,
        root: &Path,
        path: &[u8],
        listed: &mut std::collections::VecDeque<Vec<u8>>,
    ) -> std::io::Result<OwnedFd> {
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(at) => (&path[..at], &path[at + 1..]),
            None => (&path[..0], path),
        };
        if self.last.as_ref().is_none_or(|(d, _)| d.as_slice() != dir) {
            self.last = None;
            // Never the root: dropping its listing afterwards would drop its attributes
            // too, and the way to the share's `.hg` would need the daemon (a frozen
            // daemon must not hold hg up there: `hg_in_mount.rs`).
            let list = !dir.is_empty() && !listed.iter().any(|d| d.as_slice() == dir);
            let flags = if list {
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK
            } else {
                libc::O_PATH | libc::O_DIRECTORY
            };
            let fd = open(&root.join(OsStr::from_bytes(dir)), flags)?;
            if list {
                list_all(&fd);
                if listed.len() >= LISTED_DIRS {
                    listed.pop_front();
                }
                listed.push_back(dir.to_vec());
            }
            self.last = Some((dir.to_vec(), fd));
        }
        let Some((_, dirfd)) = &self.last else {
            return Err(std::io::ErrorKind::NotFound.into());
        };
        open_at(
            dirfd,
            name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        )
    }
}

/// Opens the mount's file at `path` read-only and takes a read lease on it, if it is on
/// device `dev`: its inode and descriptor; `Ok(None)` when not granted; `Err` when the
/// kernel refuses leases for good.
fn take_lease(
    dirs: &mut DirCache,
    listed: &mut std::collections::VecDeque<Vec<u8>>,
    root: &Path,
    path: &[u8],
    dev: u64,
) -> Result<Option<(u64, OwnedFd)>, String> {
    let Ok(fd) = dirs.open(root, path, listed) else {
        return Ok(None);
    };
    match dev_ino(fd.as_raw_fd()) {
        Some((d, ino)) if d == dev => {
            // SAFETY: fcntl on a descriptor we own.
            let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
            if rc == 0 {
                return Ok(Some((ino, fd)));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // Open for writing (or mapped for writing) now.
                Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(None),
                _ => Err(e.to_string()),
            }
        }
        _ => Ok(None),
    }
}

/// The lease helper (`revfs --revfs-lease-helper MOUNTPOINT`, started by the daemon):
/// checks the mount's root, says `ok`, then takes (`T` paths, one per line, one answer line
/// each) and lets go of (`R` numbers, unanswered) leases, and answers pings (`P`), until
/// its input closes. Returns the exit code.
pub fn helper_main(mountpoint: &OsStr) -> i32 {
    // A lease break's signal, whose default would end the process: the helper lets go of
    // its leases unasked, a moment after it takes them.
    // SAFETY: setting a signal's disposition to ignore.
    unsafe {
        libc::signal(libc::SIGIO, libc::SIG_IGN);
    }
    let root = Path::new(mountpoint);
    let dev = match open(root, libc::O_RDONLY | libc::O_DIRECTORY)
        .ok()
        .and_then(|fd| dev_ino(fd.as_raw_fd()))
    {
        Some((dev, ROOT_INO)) => Ok(dev),
        other => Err(format!("the mount's root is not a revfs root: {other:?}")),
    };
    let (dev, refused) = match dev {
        Ok(d) => (d, None),
        Err(why) => (0, Some(why)),
    };
    let mut held: std::collections::HashMap<RawFd, OwnedFd> = std::collections::HashMap::new();
    let mut listed = std::collections::VecDeque::new();
    crate::helper::serve(refused, |op, arg, out| match op {
        b'T' => {
            // One write for all the answers.
            let mut answer = Vec::new();
            let mut dirs = DirCache::default();
            for path in arg.split(|&b| b == b'\n') {
                let _ = match take_lease(&mut dirs, &mut listed, root, path, dev) {
                    Ok(Some((ino, fd))) => {
                        let raw = fd.as_raw_fd();
                        held.insert(raw, fd);
                        writeln!(answer, "{ino} {raw}")
                    }
                    Ok(None) => writeln!(answer, "-"),
                    Err(e) => writeln!(answer, "!{e}"),
                };
            }
            drop(dirs);
            out.write_all(&answer).map_err(|_| 0)
        }
        b'R' => {
            for number in arg.split(|&b| b == b' ') {
                let raw = std::str::from_utf8(number)
                    .ok()
                    .and_then(|s| s.parse().ok());
                if let Some(fd) = raw.and_then(|r: RawFd| held.remove(&r)) {
                    // SAFETY: fcntl on a descriptor we own; closing it lets go too.
                    unsafe {
                        libc::fcntl(fd.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK);
                    }
                    drop(fd);
                }
            }
            Ok(())
        }
        b'P' => writeln!(out, "done").map_err(|_| 0),
        _ => Err(1),
    })
}
