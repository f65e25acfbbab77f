//! Which filesystem requests the daemon is serving, and since when they last made progress.
//!
//! Every FUSE handler marks its thread busy for as long as it runs ([`Busy::enter`]: one
//! clock read and two atomic stores, no lock). A handler doing long work that progresses
//! (rebuilding a big text) says so with [`heartbeat`]. The control socket reports how long
//! the oldest request has gone without progress (`Ping`), so a client can tell a daemon
//! whose filesystem is stuck (a deadlock, a hung disk) from one that answers, before it
//! touches the mount, and `revfs doctor` can report it.
//!
//! A wait counts only while the daemon runs. A clock thread ([`start_clock`]) notes every
//! 100 ms that the process runs; a gap of more than a second between its notes means the
//! process was stopped (SIGSTOP, a frozen cgroup, a debugger), and a request that was in a
//! handler then has waited since the process ran again, not since it started: right after a
//! freeze ends, the request caught in it finishes within milliseconds, and a client's check
//! must not call the filesystem stuck meanwhile (the soak saw `revfs update` give up so).
//! Until the clock has noted the process running again, no wait counts.
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

/// How often the clock thread notes that the process runs.
const TICK: Duration = Duration::from_millis(100);

/// A gap between the clock's notes longer than this (ms): the process was stopped.
const PAUSE_MS: u64 = 1000;

/// [`now`] at the clock thread's last note; 0: no clock runs (waits count from their start).
static LAST_TICK: AtomicU64 = AtomicU64::new(0);

/// [`now`] at the first note after the last pause; 0: no pause seen.
static RESUMED: AtomicU64 = AtomicU64::new(0);

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

/// [`now`] when the last request started; 0: none yet.
static LAST_REQUEST: AtomicU64 = AtomicU64::new(0);

/// Milliseconds on this module's clock (since its first use, plus one).
pub fn now_ms() -> u64 {
    now()
}

/// When the last request started, in [`now_ms`]'s milliseconds; 0: none yet.
pub fn last_request_ms() -> u64 {
    LAST_REQUEST.load(Ordering::Relaxed)
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

/// Starts the thread that notes that the process runs, so that a wait through a stop of
/// the whole process does not count (the daemon calls it once).
pub fn start_clock() -> std::io::Result<()> {
    tick(now());
    std::thread::Builder::new()
        .name("revfs-clock".into())
        .spawn(|| loop {
            std::thread::sleep(TICK);
            tick(now());
        })
        .map(drop)
}

fn tick(at: u64) {
    let before = LAST_TICK.swap(at, Ordering::AcqRel);
    if before != 0 && at.saturating_sub(before) > PAUSE_MS {
        RESUMED.fetch_max(at, Ordering::AcqRel);
    }
}

/// How long a request started (or last progressing) at `start` has waited at `now`, given
/// the clock's last note and the end of the last pause (0s: none): the time since the later
/// of its start and the pause's end; none while the clock has not noted the process running
/// for longer than a pause (the process has just run again, or its clock gets no CPU).
fn waited(start: u64, now: u64, last_tick: u64, resumed: u64) -> u64 {
    if last_tick != 0 && now.saturating_sub(last_tick) > PAUSE_MS {
        return 0;
    }
    now.saturating_sub(start.max(resumed))
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
        let at = now();
        slot.store(at, Ordering::Release);
        // Stored only when the millisecond changed: the request threads share its line.
        if LAST_REQUEST.load(Ordering::Relaxed) != at {
            LAST_REQUEST.store(at, Ordering::Relaxed);
        }
        BusyGuard { slot }
    }

    /// The requests being served: how many, and the longest time one of them has gone
    /// without progress.
    pub fn snapshot(&self) -> (u32, Duration) {
        let (last_tick, resumed) = (
            LAST_TICK.load(Ordering::Acquire),
            RESUMED.load(Ordering::Acquire),
        );
        let now = now();
        let mut count = 0;
        let mut oldest = 0;
        for s in STARTS.iter() {
            let t = s.load(Ordering::Acquire);
            if t != 0 {
                count += 1;
                oldest = oldest.max(waited(t, now, last_tick, resumed));
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

    #[test]
    fn a_wait_counts_only_while_the_process_runs() {
        // No clock: from the request's start.
        assert_eq!(waited(1_000, 9_000, 0, 0), 8_000);
        // A clock that ticks, no pause: the same.
        assert_eq!(waited(1_000, 9_000, 8_950, 0), 8_000);
        // Stopped from 2,000 to 7,000: since the clock's first note after it.
        assert_eq!(waited(1_000, 9_000, 8_950, 7_000), 2_000);
        // A request younger than the pause's end: from its start.
        assert_eq!(waited(8_000, 9_000, 8_950, 7_000), 1_000);
        // Run again, the clock not yet: nothing counts.
        assert_eq!(waited(1_000, 9_000, 2_000, 0), 0);
    }
}
