//! Owns the guess whether a program is reading or stat'ing the tree's files: a first read
//! of a file (a read at offset 0), or a lookup of a file (not a directory: `find` and `ls`
//! look up only the directories they enter), in the last [`WINDOW`]. While one is, a
//! listing carries its entries' attributes (READDIRPLUS), so the program's `lstat` of each
//! entry needs no lookup of its own; otherwise a listing names its entries only, as a
//! plain READDIR does, so that `find` or `ls` keep a cold tree cold (no entry is made in
//! the kernel or thawed in the working copy for it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long after a first read a reader counts as active.
pub const WINDOW: Duration = Duration::from_secs(1);

/// When a file was last read from its start, lock-free (a store on the read path).
#[derive(Debug)]
pub struct Readers {
    base: Instant,
    /// Nanoseconds after `base` of the last first read or lookup of a file, plus one (0:
    /// none yet).
    last: AtomicU64,
    /// The same, of the last first read only.
    last_read: AtomicU64,
}

impl Default for Readers {
    fn default() -> Self {
        Readers {
            base: Instant::now(),
            last: AtomicU64::new(0),
            last_read: AtomicU64::new(0),
        }
    }
}

impl Readers {
    /// A read of a file at `offset`.
    pub fn read(&self, offset: u64) {
        if offset == 0 {
            let now = self.now();
            self.last.store(now, Ordering::Relaxed);
            self.last_read.store(now, Ordering::Relaxed);
        }
    }

    /// A file (not a directory) was looked up: someone stats files one by one.
    pub fn looked_up(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64 + 1
    }

    fn within_window(&self, last: &AtomicU64) -> bool {
        let last = last.load(Ordering::Relaxed);
        last != 0 && self.now() - last < WINDOW.as_nanos() as u64
    }

    /// Whether a file was read from its start or looked up in the last [`WINDOW`].
    pub fn active(&self) -> bool {
        self.within_window(&self.last)
    }

    /// Whether a file was read from its start in the last [`WINDOW`] (a lookup does not
    /// count: `find` or `ls -l` stat files and read none).
    pub fn reading(&self) -> bool {
        self.within_window(&self.last_read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_read_from_the_start_makes_a_reader_active() {
        let r = Readers::default();
        assert!(!r.active());
        r.read(4096);
        assert!(!r.active());
        r.read(0);
        assert!(r.active());
        assert!(r.reading());
    }

    #[test]
    fn a_lookup_makes_a_reader_active_and_not_reading() {
        let r = Readers::default();
        r.looked_up();
        assert!(r.active());
        assert!(!r.reading());
    }
}
