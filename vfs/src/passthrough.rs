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

use fuser::BackingId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
}

/// What an open should be.
pub enum Decision {
    /// Through this backing file (the inode's).
    Through(Arc<BackingId>),
    /// In the kernel's page cache; `keep`: the pages it holds are good (else the open
    /// drops them).
    Cached { keep: bool },
}

/// The mount's passthrough state and open table.
pub struct Passthrough {
    mode: Mutex<Mode>,
    opens: Mutex<HashMap<u64, Opened>>,
    /// Inodes that had handles on a backing file since their last cached open: their
    /// page cache in the kernel may be older than the backing file, so their next cached
    /// open drops it (no `FOPEN_KEEP_CACHE`).
    stale_cache: Mutex<std::collections::HashSet<u64>>,
    /// Opens answered: through the backing file, and in the page cache.
    through_opens: AtomicU64,
    cached_opens: AtomicU64,
}

impl Passthrough {
    /// `wanted`: `mount.passthrough`; the kernel's agreement comes at init
    /// ([`Passthrough::kernel_refused`]).
    pub fn new(wanted: bool) -> Passthrough {
        Passthrough {
            mode: Mutex::new(if wanted {
                Mode::On
            } else {
                Mode::Off("mount.passthrough = false".into())
            }),
            opens: Mutex::new(HashMap::new()),
            stale_cache: Mutex::new(std::collections::HashSet::new()),
            through_opens: AtomicU64::new(0),
            cached_opens: AtomicU64::new(0),
        }
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
    pub fn decide(
        &self,
        ino: u64,
        backing: Option<&dyn Fn() -> std::io::Result<BackingId>>,
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
        o.cached += 1;
        self.cached_opens.fetch_add(1, Ordering::Relaxed);
        let keep = !self.stale().remove(&ino);
        Decision::Cached { keep }
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
            if o.through == 0 && o.cached == 0 {
                opens.remove(&ino);
            }
            gone
        };
        drop(backing);
    }

    /// (opens through a backing file, opens in the page cache) answered so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.through_opens.load(Ordering::Relaxed),
            self.cached_opens.load(Ordering::Relaxed),
        )
    }
}
