//! Idle CPUs kept quick to wake while the filesystem serves requests
//! (`mount.cpu_latency_us`, off unless set).
//!
//! A request to the daemon is two wake-ups: a ring thread, then the program that waits for
//! the answer. The scheduler wakes that program on an idle CPU when its own still runs the
//! thread that answered, so a loop of requests moves from CPU to CPU at every answer (five
//! moves a file for a Python loop that creates files), and each move wakes a CPU from
//! idle. Where that is costly (a KVM guest whose idle CPUs halt at once: every wake-up of
//! a halted CPU is an exit to the hypervisor), such a loop was 2.3 times slower than the
//! same loop pinned to one CPU (docs/BENCHMARKS.md, "Where a round trip's time goes").
//!
//! With `mount.cpu_latency_us` set, the daemon asks the kernel (its PM QoS CPU latency
//! request, `/dev/cpu_dma_latency`, root only) that idle CPUs wake within that many
//! microseconds while requests come: 0 makes them poll instead of halt. It holds the
//! request from a tick that sees a recent request until [`QUIET`] without one, so an idle
//! mount costs nothing. The idle CPUs' polling is CPU time the machine's owner pays (a
//! hypervisor sees its guest busy), which is why it is a choice and not the default.
//!
//! A thread ticks every [`TICK`]; a request only stores the time it came
//! ([`crate::busy::last_request_ms`], set by every handler's `Busy::enter`).

use std::fs::File;
use std::io::Write;
use std::time::Duration;

/// The kernel's PM QoS device for the CPU latency request.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// How often the holder looks at the last request's time.
const TICK: Duration = Duration::from_millis(50);

/// How long without a request before the latency request is let go (ms).
const QUIET: u64 = 1000;

/// Whether a latency request should be held at `now` (ms), the last request having come at
/// `last` (ms, 0: none yet).
fn wanted(last: u64, now: u64) -> bool {
    last != 0 && now.saturating_sub(last) <= QUIET
}

/// Opens the PM QoS device and asks for `us` microseconds; the request holds while the
/// file is open.
fn ask(us: u32) -> std::io::Result<File> {
    let mut f = std::fs::OpenOptions::new().write(true).open(DEVICE)?;
    // The device takes a native 32-bit integer.
    f.write_all(&(us.min(i32::MAX as u32) as i32).to_ne_bytes())?;
    Ok(f)
}

/// Starts the thread that holds a latency request of `us` microseconds while requests
/// come. A device the daemon cannot open (not root, no PM QoS) is said once in the log,
/// and nothing is held.
pub fn start(us: u32) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("revfs-latency".into())
        .spawn(move || {
            let mut held: Option<File> = None;
            loop {
                std::thread::sleep(TICK);
                let now = crate::busy::now_ms();
                match (wanted(crate::busy::last_request_ms(), now), held.is_some()) {
                    (true, false) => match ask(us) {
                        Ok(f) => held = Some(f),
                        Err(e) => {
                            tracing::warn!(
                                "mount.cpu_latency_us: cannot ask for {us} us ({DEVICE}): {e}"
                            );
                            return;
                        }
                    },
                    (false, true) => held = None,
                    _ => {}
                }
            }
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_within_the_quiet_time_holds_and_none_lets_go() {
        assert!(!wanted(0, 5_000), "no request yet");
        assert!(wanted(4_000, 5_000));
        assert!(wanted(4_000, 4_000 + QUIET));
        assert!(!wanted(4_000, 4_001 + QUIET));
    }
}
