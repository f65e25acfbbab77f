//! `mount.cpu_latency_us`: the daemon asks the kernel (PM QoS, `/dev/cpu_dma_latency`) that
//! idle CPUs wake quickly while requests come, and lets the request go after a quiet
//! second; unset (the default), it never asks. What is held is seen from outside: the
//! daemon's open descriptors on the device (the request lasts as long as one is open).

use revfs_tests::hg_repo;
use revfs_tests::mount::Mount;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const DEVICE: &str = "/dev/cpu_dma_latency";

/// Whether the daemon `pid` has the PM QoS device open.
fn holds_latency_request(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the daemon's descriptors")
        .flatten()
        .any(|e| std::fs::read_link(e.path()).is_ok_and(|p| p == Path::new(DEVICE)))
}

/// Waits up to `limit` for `cond`; whether it came.
fn within(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Creates files in the mount (each create is requests to the daemon) until `until` holds
/// or `limit` passes; whether it held.
fn create_until(dir: &Path, limit: Duration, until: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    let mut i = 0;
    while Instant::now() < deadline {
        let mut f = std::fs::File::create(dir.join(format!("n{i}"))).unwrap();
        f.write_all(b"x\n").unwrap();
        i += 1;
        if until() {
            return true;
        }
    }
    false
}

#[test]
fn idle_cpus_are_asked_to_wake_quickly_while_requests_come_and_let_go_when_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let m = Mount::with_config(&repo, "[mount]\ncpu_latency_us = 0\n");
    let pid = m.daemon_pid();
    if !Path::new(DEVICE).exists() {
        // No PM QoS here: the daemon says so once and goes on.
        assert!(create_until(&m.dir, Duration::from_secs(5), || m
            .log()
            .contains("mount.cpu_latency_us: cannot ask for 0 us")));
        return;
    }
    // The mount's own requests (its first lookups) are over within the quiet second.
    assert!(
        within(Duration::from_secs(5), || !holds_latency_request(pid)),
        "a quiet mount holds no latency request"
    );
    assert!(
        create_until(&m.dir, Duration::from_secs(5), || holds_latency_request(
            pid
        )),
        "requests coming, the daemon asks for a latency (its log: {})",
        m.log()
    );
    // Still held while they keep coming...
    let busy_until = Instant::now() + Duration::from_millis(1500);
    assert!(!create_until(&m.dir, Duration::from_millis(1500), || {
        !holds_latency_request(pid)
    }));
    assert!(Instant::now() >= busy_until);
    // ...and let go within the quiet second (and a tick) after the last one.
    let quiet_from = Instant::now();
    assert!(within(Duration::from_secs(5), || !holds_latency_request(
        pid
    )));
    assert!(
        quiet_from.elapsed() >= Duration::from_millis(900),
        "held for the quiet second: {:?}",
        quiet_from.elapsed()
    );
}

#[test]
fn without_the_setting_the_daemon_never_asks_for_a_latency() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let m = Mount::new(&repo, None);
    let pid = m.daemon_pid();
    assert!(!create_until(&m.dir, Duration::from_millis(500), || {
        holds_latency_request(pid)
    }));
    assert!(!m.log().contains("cpu_latency_us"));
}
