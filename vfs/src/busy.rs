//! Which filesystem requests the daemon is serving, and since when they last made progress.
//!
//! Every FUSE handler marks its thread busy for as long as it runs ([`Busy::enter`]: one
//! clock read and two atomic stores, no lock). A handler doing long work that progresses
//! (rebuilding a big text) says so with [`heartbeat`]. The control socket reports how long
//! the oldest request has gone without progress (`Ping`), so a client can tell a daemon
//! whose filesystem is stuck (a deadlock, a hung disk) from one that answers, before it
//! touches the mount, and `revfs doctor` can report it.
//!
//! There is one filesystem per daemon process, so the slots are process-wide.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Slots for request threads (more than `mount.threads` allows; threads beyond share).
const SLOTS: usize = 512;

/// Milliseconds since [`origin`] + 1 when the slot's thread started its request or last
/// reported progress; 0: idle.
static STARTS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn now() -> u64 {
    origin().elapsed().as_millis() as u64 + 1
}

fn my_slot() -> &'static AtomicU64 {
    let i = SLOT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
        }
        s.get()
    });
    &STARTS[i]
}

/// The requests being served (a handle on the process-wide slots).
#[derive(Default)]
pub struct Busy(());

/// Marks a request as being served until dropped.
pub struct BusyGuard {
    slot: &'static AtomicU64,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.slot.store(0, Ordering::Release);
    }
}

/// The calling thread's request made progress (no effect outside a request).
pub fn heartbeat() {
    let slot = my_slot();
    if slot.load(Ordering::Relaxed) != 0 {
        slot.store(now(), Ordering::Release);
    }
}

impl Busy {
    /// Marks the calling thread busy with a request until the guard is dropped.
    pub fn enter(&self) -> BusyGuard {
        let slot = my_slot();
        slot.store(now(), Ordering::Release);
        BusyGuard { slot }
    }

    /// The requests being served: how many, and the longest time one of them has gone
    /// without progress.
    pub fn snapshot(&self) -> (u32, Duration) {
        let now = now();
        let mut count = 0;
        let mut oldest = 0;
        for s in STARTS.iter() {
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
    fn a_request_counts_while_it_runs_and_a_heartbeat_makes_it_young() {
        let busy = std::sync::Arc::new(Busy::default());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (beat_tx, beat_rx) = std::sync::mpsc::channel::<()>();
        let b = busy.clone();
        let t = std::thread::spawn(move || {
            let _g = b.enter();
            let _ = beat_rx.recv();
            heartbeat();
            let _ = rx.recv();
        });
        std::thread::sleep(Duration::from_millis(80));
        let (n, age) = busy.snapshot();
        assert!(n >= 1);
        assert!(age >= Duration::from_millis(70), "{age:?}");
        beat_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let (_, age) = busy.snapshot();
        assert!(age < Duration::from_millis(70), "{age:?}");
        tx.send(()).unwrap();
        t.join().unwrap();
        // Outside a request a heartbeat marks nothing.
        heartbeat();
    }
}
