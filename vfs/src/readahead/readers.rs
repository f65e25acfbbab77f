//! Owns the guess whether a program is reading or stat'ing the tree's files: a first read
//! of a file (a read at offset 0), or a lookup of a file (not a directory: `find` and `ls`
//! look up only the directories they enter), in the last [`WINDOW`]. While one is, a
//! listing carries its entries' attributes (READDIRPLUS), so the program's `lstat` of each
//! entry needs no lookup of its own; otherwise a listing names its entries only, as a
//! plain READDIR does, so that `find` or `ls` keep a cold tree cold (no entry is made in
//! the kernel or thawed in the working copy for it).
//!
//! Also owns the guess whether a program reads the tree itself, directory after directory
//! (tar, grep -r, an indexer), as opposed to listing directories while others read files
//! (make, whose compilers read): the thread that listed a directory then reads
//! [`LISTER_READS`] of its files ([`Readers::listed`], [`Readers::read_in`]). Only such a
//! program starts the walk ahead of it (`wc/ahead.rs`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
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
    /// The thread that last listed a directory while files were read (0: none), kept
    /// apart from [`Readers::lister`] so that other threads' reads pass without a lock.
    lister_pid: AtomicU32,
    lister: Mutex<Lister>,
}

/// How many distinct files of a directory the thread that listed it reads before it counts
/// as a program reading the tree: `make` reads one (the directory's Makefile) after
/// listing it; tar and grep read them all.
pub const LISTER_READS: usize = 2;

/// The directory the last lister listed, and the files of it that thread read since.
#[derive(Debug, Default)]
struct Lister {
    dir: u64,
    read: Vec<u64>,
}

impl Default for Readers {
    fn default() -> Self {
        Readers {
            base: Instant::now(),
            last: AtomicU64::new(0),
            last_read: AtomicU64::new(0),
            lister_pid: AtomicU32::new(0),
            lister: Mutex::new(Lister::default()),
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

    /// Thread `pid` listed directory `dir` while files were read: it is the lister now.
    pub fn listed(&self, pid: u32, dir: u64) {
        let mut l = self.lister.lock().unwrap_or_else(|p| p.into_inner());
        l.dir = dir;
        l.read.clear();
        self.lister_pid.store(pid, Ordering::Relaxed);
    }

    /// Whether thread `pid` is the lister (lock-free: the read path asks it of every first
    /// read, and looks up the file's directory only when it is).
    pub fn is_lister(&self, pid: u32) -> bool {
        pid != 0 && self.lister_pid.load(Ordering::Relaxed) == pid
    }

    /// Thread `pid` read file `ino` of directory `dir` from its start: the directory it
    /// listed, when that makes [`LISTER_READS`] files of it (it reads the tree itself; it is
    /// the lister no more).
    pub fn read_in(&self, pid: u32, dir: u64, ino: u64) -> Option<u64> {
        let mut l = self.lister.lock().unwrap_or_else(|p| p.into_inner());
        if !self.is_lister(pid) || l.dir != dir || l.read.contains(&ino) {
            return None;
        }
        l.read.push(ino);
        if l.read.len() < LISTER_READS {
            return None;
        }
        l.read.clear();
        self.lister_pid.store(0, Ordering::Relaxed);
        Some(dir)
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
    fn the_thread_that_listed_a_directory_reads_the_tree_once_it_read_two_of_its_files() {
        let r = Readers::default();
        r.listed(7, 100);
        assert!(r.is_lister(7) && !r.is_lister(8));
        // Another thread's reads, another directory's, and the same file again: not yet.
        assert_eq!(r.read_in(8, 100, 1), None);
        assert_eq!(r.read_in(7, 200, 1), None);
        assert_eq!(r.read_in(7, 100, 1), None);
        assert_eq!(r.read_in(7, 100, 1), None);
        assert_eq!(r.read_in(7, 100, 2), Some(100));
        assert!(!r.is_lister(7));
        assert_eq!(r.read_in(7, 100, 3), None);
    }

    #[test]
    fn a_later_listing_makes_its_thread_the_lister_and_starts_the_count_again() {
        let r = Readers::default();
        r.listed(7, 100);
        assert_eq!(r.read_in(7, 100, 1), None);
        r.listed(9, 300);
        assert!(!r.is_lister(7));
        assert_eq!(r.read_in(7, 100, 2), None);
        assert_eq!(r.read_in(9, 300, 5), None);
        assert_eq!(r.read_in(9, 300, 6), Some(300));
    }

    #[test]
    fn a_lookup_makes_a_reader_active_and_not_reading() {
        let r = Readers::default();
        r.looked_up();
        assert!(r.active());
        assert!(!r.reading());
    }
}
