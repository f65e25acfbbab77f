//! Which filesystem requests the daemon is serving, and since when.
//!
//! Every FUSE handler marks its thread busy for as long as it runs ([`Busy::enter`]: one
//! clock read and two atomic stores, no lock). The control socket reports the age of the
//! oldest request being served (`Ping`), so a client can tell a daemon whose filesystem is
//! stuck (a deadlock, a hung disk) from one that answers, before it touches the mount, and
//! `revfs doctor` can report it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Slots for request threads (more than `mount.threads` allows; threads beyond share).
const SLOTS: usize = 512;

/// The start times of the requests being served, one slot per thread.
pub struct Busy {
    origin: Instant,
    /// Milliseconds since `origin` + 1 when the slot's thread started its request; 0: idle.
    slots: Box<[AtomicU64]>,
}

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn my_slot() -> usize {
    SLOT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
        }
        s.get()
    })
}

/// Marks a request as being served until dropped.
pub struct BusyGuard<'a> {
    slot: &'a AtomicU64,
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.slot.store(0, Ordering::Release);
    }
}

impl Default for Busy {
    fn default() -> Self {
        Busy {
            origin: Instant::now(),
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Busy {
    /// Marks the calling thread busy with a request until the guard is dropped.
    pub fn enter(&self) -> BusyGuard<'_> {
        let slot = &self.slots[my_slot()];
        let now = self.origin.elapsed().as_millis() as u64 + 1;
        slot.store(now, Ordering::Release);
        BusyGuard { slot }
    }

    /// The requests being served: how many, and how long the oldest has been at it.
    pub fn snapshot(&self) -> (u32, Duration) {
        let now = self.origin.elapsed().as_millis() as u64 + 1;
        let mut count = 0;
        let mut oldest = 0;
        for s in self.slots.iter() {
            let t = s.load(Ordering::Acquire);
            if t != 0 {
                count += 1;
                oldest = oldest.max(now.saturating_sub(t));
            }
        }
        (count, Duration::from_millis(oldest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_counts_while_it_runs() {
        let busy = std::sync::Arc::new(Busy::default());
        assert_eq!(busy.snapshot().0, 0);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let b = busy.clone();
        let t = std::thread::spawn(move || {
            let _g = b.enter();
            let _ = rx.recv();
        });
        std::thread::sleep(Duration::from_millis(50));
        let (n, age) = busy.snapshot();
        assert_eq!(n, 1);
        assert!(age >= Duration::from_millis(40), "{age:?}");
        tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(busy.snapshot(), (0, Duration::ZERO));
    }
}
