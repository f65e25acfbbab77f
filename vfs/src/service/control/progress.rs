//! Progress of a request that asked for it: recorded by its handler, sent to its client
//! by the daemon's one progress thread (with heartbeats), never holding up the work.

use super::*;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

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
    pub(super) fn to(stream: &UnixStream) -> Progress {
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
    pub(super) fn finish(&mut self) {
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
