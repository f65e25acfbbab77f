//! FUSE passthrough (Linux 6.9 and later, `CAP_SYS_ADMIN`): whether a mount uses it, and
//! the table of its open files by inode.
//!
//! With passthrough on (`mount.passthrough`, and the kernel agreed at init), the daemon
//! answers `open`: a file whose content lives in the overlay (written through the mount,
//! or opened for writing now) is opened with the overlay file as its backing file, and the
//! kernel reads, writes and maps it without asking the daemon; a store file opened for
//! reading is opened in the kernel's page cache as before. The kernel puts an inode in one
//! mode at a time (passthrough, or cached), so an inode's opens follow the first: an inode
//! with open cached handles gets cached ones (its writes then reach the daemon as WRITE
//! requests), one with passthrough handles gets passthrough ones, on the same backing file.
//! With passthrough off the daemon answers the first `open` with ENOSYS and the kernel stops
//! sending them (no round trip per open).
//!
//! Since opens are seen, the first read-only open of a store file in the kernel's inode
//! (no other handle, no change under way) may fill the inode's page cache before the open
//! returns ([`Decision::Cached`]'s `push`, done in `fs.rs` with `FUSE_NOTIFY_STORE`): the
//! program's reads then find the pages there, with no READ, and its `fstat` after them no
//! GETATTR (a page filled by a READ marks atime stale). A push writes pages over whatever
//! the kernel holds, so nothing that changes the file may run meanwhile: an open for
//! writing or truncating, and a truncate, wait for the inode's push to end
//! ([`Passthrough::begin_change`]), and no push starts while one runs or while a handle is
//! open (a writer's would be). Read-ahead pushes the files it rebuilt under the same rule
//! ([`Passthrough::claim_push`]), so that the open after finds them there. With opens not
//! seen (passthrough off) read-ahead asks the kernel instead: it pushes a file only under a
//! read lease, which the kernel grants while no descriptor has the file open for writing
//! and which an open for writing or a truncate waits for ([`Passthrough::leases`],
//! `lease.rs`).

use fuser::BackingId;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// A file handle's bits.
pub const FH_PASSTHROUGH: u64 = 1;
pub const FH_WRITER: u64 = 2;

/// Whether a mount uses passthrough, and why not when it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    On,
    Off(String),
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::On => f.write_str("on"),
            Mode::Off(why) => write!(f, "off ({why})"),
        }
    }
}

/// How the kernel holds one inode's open files.
#[derive(Default)]
struct Opened {
    /// Handles in the kernel's page cache.
    cached: u32,
    /// Handles on the backing file.
    through: u32,
    /// The backing file's id while `through` > 0.
    backing: Option<Arc<BackingId>>,
    /// Changes under way (an open for writing or truncating, a truncate: between
    /// [`Passthrough::begin_change`] and its end).
    changing: u32,
    /// A push into the page cache runs (from a read-only open's decision to
    /// [`Passthrough::push_ended`]).
    pushing: bool,
}

impl Opened {
    fn idle(&self) -> bool {
        self.cached == 0 && self.through == 0 && self.changing == 0 && !self.pushing
    }
}

/// What an open should be.
pub enum Decision {
    /// Through this backing file (the inode's).
    Through(Arc<BackingId>),
    /// In the kernel's page cache; `keep`: the pages it holds are good (else the open
    /// drops them); `push`: fill them before answering, then call
    /// [`Passthrough::push_ended`].
    Cached { keep: bool, push: bool },
}

/// The mount's passthrough state and open table.
pub struct Passthrough {
    mode: Mutex<Mode>,
    opens: Mutex<HashMap<u64, Opened>>,
    /// Signalled when a push ends.
    push_over: Condvar,
    /// Inodes whose page cache a push filled since the kernel last forgot them: not pushed
    /// again (pages the kernel dropped since are read with READs).
    pushed: Mutex<HashSet<u64>>,
    /// Inodes that had handles on a backing file since their last cached open: their
    /// page cache in the kernel may be older than the backing file, so their next cached
    /// open drops it (no `FOPEN_KEEP_CACHE`).
    stale_cache: Mutex<std::collections::HashSet<u64>>,
    /// Opens answered: through the backing file, and in the page cache.
    through_opens: AtomicU64,
    cached_opens: AtomicU64,
    /// Opens that filled the page cache.
    pushes: AtomicU64,
    /// What each push waits for before it fills the pages and after (debug builds'
    /// `debug_push_delay` and `debug_push_hold`; nothing otherwise).
    pub push_delay: PushGate,
    /// How long a read-only open waits between its look at the file and its decision
    /// (debug builds' `debug_open_delay`; none otherwise).
    pub open_delay: DebugDelay,
    /// How long each lookup waits before it is served (debug builds' `debug_lookup_delay`;
    /// none otherwise).
    pub lookup_delay: DebugDelay,
    /// Read leases, for pushes after read-ahead with opens not seen (passthrough off).
    pub leases: crate::readahead::lease::Leases,
    /// Read-ahead pushes nothing (debug builds' `debug_no_push`, for tests of what
    /// read-ahead holds itself).
    no_push: std::sync::atomic::AtomicBool,
}

/// A wait that tests put where a race would happen (control's debug commands), in
/// milliseconds; 0: none.
#[derive(Default)]
pub struct DebugDelay(AtomicU64);

impl DebugDelay {
    pub fn set(&self, delay: std::time::Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.0.store(ms, Ordering::Relaxed);
    }

    /// Waits as long as set (not at all unless set).
    pub fn wait(&self) {
        let ms = self.0.load(Ordering::Relaxed);
        if ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}

/// Where each push into the page cache waits, for tests of what a change of the file
/// meanwhile waits for (control's debug commands): a delay before it fills the pages and
/// after (`debug_push_delay`), and a hold, which stops each of read-ahead's pushes before it
/// fills the pages until the test releases it (`debug_push_hold`, `debug_push_held`, `debug_push_release`):
/// a test can then make its change while a push of the file certainly runs.
#[derive(Default)]
pub struct PushGate {
    delay: DebugDelay,
    /// Whether pushes stop; checked without the lock on every push.
    holding: std::sync::atomic::AtomicBool,
    /// The inodes whose pushes are stopped.
    held: Mutex<Vec<u64>>,
    changed: Condvar,
}

impl PushGate {
    fn held_list(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set(&self, delay: std::time::Duration) {
        self.delay.set(delay);
    }

    /// Before a push of `ino` fills its pages: the delay, then for read-ahead's pushes
    /// (`background`) the hold, if on, until the push is released or the hold ends. (An
    /// open's push is not held: the program's open waits for it.)
    pub fn before(&self, ino: u64, background: bool) {
        self.delay.wait();
        if !background || !self.holding.load(Ordering::Acquire) {
            return;
        }
        let mut held = self.held_list();
        if !self.holding.load(Ordering::Acquire) {
            return;
        }
        held.push(ino);
        self.changed.notify_all();
        while held.contains(&ino) {
            held = self.changed.wait(held).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Whether a push may wait here longer than a push takes: a delay is set, or pushes
    /// are held.
    pub fn may_wait(&self) -> bool {
        self.delay.0.load(Ordering::Relaxed) > 0 || self.holding.load(Ordering::Acquire)
    }

    /// After a push filled its pages: the delay.
    pub fn after(&self) {
        self.delay.wait();
    }

    /// Pushes stop before they fill the pages from now on (`on`), or no more (every
    /// stopped one goes on).
    pub fn hold(&self, on: bool) {
        let mut held = self.held_list();
        self.holding.store(on, Ordering::Release);
        if !on {
            held.clear();
        }
        self.changed.notify_all();
    }

    /// The inodes whose pushes are stopped, once there is one or after `wait`.
    pub fn held(&self, wait: std::time::Duration) -> Vec<u64> {
        let deadline = std::time::Instant::now() + wait;
        let mut held = self.held_list();
        while held.is_empty() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            held = self
                .changed
                .wait_timeout(held, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        held.clone()
    }

    /// The stopped push of `ino` goes on; false if there was none.
    pub fn release(&self, ino: u64) -> bool {
        let mut held = self.held_list();
        let before = held.len();
        held.retain(|&i| i != ino);
        self.changed.notify_all();
        held.len() < before
    }
}

impl Passthrough {
    /// `wanted`: `mount.passthrough`; the kernel's agreement comes at init
    /// ([`Passthrough::refused`]).
    pub fn new(wanted: bool) -> Passthrough {
        Passthrough {
            mode: Mutex::new(if wanted {
                Mode::On
            } else {
                Mode::Off("mount.passthrough = false".into())
            }),
            opens: Mutex::new(HashMap::new()),
            push_over: Condvar::new(),
            pushed: Mutex::new(HashSet::new()),
            stale_cache: Mutex::new(std::collections::HashSet::new()),
            through_opens: AtomicU64::new(0),
            cached_opens: AtomicU64::new(0),
            pushes: AtomicU64::new(0),
            push_delay: PushGate::default(),
            open_delay: DebugDelay::default(),
            lookup_delay: DebugDelay::default(),
            leases: crate::readahead::lease::Leases::default(),
            no_push: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Read-ahead pushes nothing from now on (`debug_no_push`).
    pub fn stop_background_pushes(&self) {
        self.no_push.store(true, Ordering::Relaxed);
        self.leases.disable();
    }

    /// Whether read-ahead may push the files it rebuilt.
    pub fn background_pushes(&self) -> bool {
        !self.no_push.load(Ordering::Relaxed)
    }

    pub fn mode(&self) -> Mode {
        self.mode.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn on(&self) -> bool {
        self.mode() == Mode::On
    }

    /// Passthrough is off from now on: `why`.
    pub fn refused(&self, why: String) {
        let mut m = self.mode.lock().unwrap_or_else(|p| p.into_inner());
        if *m == Mode::On {
            tracing::warn!("passthrough off: {why}");
            *m = Mode::Off(why);
        }
    }

    fn opens(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Opened>> {
        self.opens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides how an open of `ino` goes and counts it. `backing` makes the inode's
    /// backing file when it has none and the open can go through one (the file is in the
    /// overlay: `None` otherwise); it runs under the table's lock (an ioctl on /dev/fuse,
    /// which waits for nothing of the daemon's), so that two opens of one inode never
    /// disagree. A backing that cannot be made turns passthrough off for the mount.
    /// `may_push`: a read-only open of a store file, which may fill the page cache (see
    /// the module's comment).
    pub fn decide(
        &self,
        ino: u64,
        backing: Option<&dyn Fn() -> std::io::Result<BackingId>>,
        may_push: bool,
    ) -> Decision {
        let mut opens = self.opens();
        let o = opens.entry(ino).or_default();
        if let (true, Some(b)) = (o.through > 0, &o.backing) {
            o.through += 1;
            self.through_opens.fetch_add(1, Ordering::Relaxed);
            return Decision::Through(b.clone());
        }
        if let (0, Some(make), true) = (o.cached, backing, self.on()) {
            match make() {
                Ok(b) => {
                    let b = Arc::new(b);
                    o.backing = Some(b.clone());
                    o.through = 1;
                    self.through_opens.fetch_add(1, Ordering::Relaxed);
                    self.stale().insert(ino);
                    return Decision::Through(b);
                }
                Err(e) => self.refused(format!("the kernel refused a backing file: {e}")),
            }
        }
        let push = may_push && o.idle() && !self.pushed().contains(&ino);
        o.cached += 1;
        self.cached_opens.fetch_add(1, Ordering::Relaxed);
        let keep = !self.stale().remove(&ino);
        // Pages a push fills would be dropped by this open (not `keep`).
        let push = push && keep;
        if push {
            o.pushing = true;
            self.pushed().insert(ino);
        }
        Decision::Cached { keep, push }
    }

    fn pushed(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.pushed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The push that `decide` started for `ino` is over; `filled`: it filled pages (a file
    /// empty, too big or changed fills none).
    pub fn push_ended(&self, ino: u64, filled: bool) {
        if filled {
            self.pushes.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(o) = self.opens().get_mut(&ino) {
            o.pushing = false;
        }
        self.push_over.notify_all();
    }

    /// Claims a push of `ino`'s pages in the background (after read-ahead): only with
    /// passthrough on, for an inode with no handle open, no change under way and no push
    /// since the kernel last forgot it, whose pages no open will drop. Then call
    /// [`Passthrough::background_push_ended`].
    pub fn claim_push(&self, ino: u64) -> bool {
        if !self.on() {
            return false;
        }
        let mut opens = self.opens();
        if opens.get(&ino).is_some_and(|o| !o.idle()) || self.stale().contains(&ino) {
            return false;
        }
        if !self.pushed().insert(ino) {
            return false;
        }
        opens.entry(ino).or_default().pushing = true;
        true
    }

    /// The push [`Passthrough::claim_push`] claimed is over: `filled`, it filled pages (if
    /// not, an open may push later); not `keep`, the file changed meanwhile (the next
    /// cached open drops the pages).
    pub fn background_push_ended(&self, ino: u64, filled: bool, keep: bool) {
        {
            let mut opens = self.opens();
            if !filled {
                self.pushed().remove(&ino);
            }
            if !keep {
                self.stale().insert(ino);
            }
            if let Some(o) = opens.get_mut(&ino) {
                o.pushing = false;
                if o.idle() {
                    opens.remove(&ino);
                }
            }
        }
        self.push_over.notify_all();
    }

    /// The kernel forgot `ino` (its pages went with it): a later open may push again.
    pub fn forgotten(&self, ino: u64) {
        self.pushed().remove(&ino);
    }

    /// A change of `ino`'s content begins (an open for writing or truncating, a truncate):
    /// waits for its push, if one runs, and keeps new ones from starting until the
    /// returned guard is dropped (after the open's decision: its handle then keeps them
    /// off).
    pub fn begin_change(&self, ino: u64) -> Change<'_> {
        let mut opens = self.opens();
        while opens.get(&ino).is_some_and(|o| o.pushing) {
            opens = self
                .push_over
                .wait(opens)
                .unwrap_or_else(|p| p.into_inner());
        }
        opens.entry(ino).or_default().changing += 1;
        Change { table: self, ino }
    }

    fn stale(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<u64>> {
        self.stale_cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A handle of `ino` was released: `through` tells its kind. The backing goes with the
    /// last handle on it (dropped outside the table's lock).
    pub fn released(&self, ino: u64, through: bool) {
        let backing = {
            let mut opens = self.opens();
            let Some(o) = opens.get_mut(&ino) else {
                return;
            };
            let mut gone = None;
            if through {
                o.through = o.through.saturating_sub(1);
                if o.through == 0 {
                    gone = o.backing.take();
                }
            } else {
                o.cached = o.cached.saturating_sub(1);
            }
            if o.idle() {
                opens.remove(&ino);
            }
            gone
        };
        drop(backing);
    }

    /// (opens through a backing file, opens in the page cache, of them opens that filled
    /// it) answered so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.through_opens.load(Ordering::Relaxed),
            self.cached_opens.load(Ordering::Relaxed),
            self.pushes.load(Ordering::Relaxed),
        )
    }
}

/// A change of an inode's content under way ([`Passthrough::begin_change`]).
pub struct Change<'a> {
    table: &'a Passthrough,
    ino: u64,
}

impl Drop for Change<'_> {
    fn drop(&mut self) {
        let mut opens = self.table.opens();
        if let Some(o) = opens.get_mut(&self.ino) {
            o.changing = o.changing.saturating_sub(1);
            if o.idle() {
                opens.remove(&self.ino);
            }
        }
    }
}
