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
    /// Nanoseconds after `base` of the last first read, plus one (0: none yet).
    last: AtomicU64,
}

impl Default for Readers {
    fn default() -> Self {
        Readers {
            base: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
}

impl Readers {
    /// A read of a file at `offset`.
    pub fn read(&self, offset: u64) {
        if offset == 0 {
            let now = self.base.elapsed().as_nanos() as u64 + 1;
            self.last.store(now, Ordering::Relaxed);
        }
    }

    /// A file (not a directory) was looked up: someone stats files one by one.
    pub fn looked_up(&self) {
        self.read(0);
    }

    /// Whether a file was read from its start or looked up in the last [`WINDOW`].
    pub fn active(&self) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        last != 0 && self.base.elapsed().as_nanos() as u64 + 1 - last < WINDOW.as_nanos() as u64
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
    }
}
