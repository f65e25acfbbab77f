//! The test harness cannot hang: a mount whose daemon stops answering (the debug-only
//! `debug_hang` request makes it hold its working copy's lock forever, as a deadlock would)
//! is turned by the mount's watchdog into a failure within its deadline, with the daemon's
//! log and stacks as evidence; the blocked reader is released and nothing is left behind.

use revfs_tests::hg_repo;
use revfs_tests::mount::Mount;
use revfs_tests::watchdog;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_hung_daemon_becomes_a_failure_with_evidence_within_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a.txt", "a\n")]);

    let deadline = Duration::from_secs(4);
    let m = Mount::with_deadline(&repo, deadline);
    let t0 = Instant::now();
    let pid = m.daemon_pid();
    m.debug_hang();
    // A reader that blocks in the daemon (it waits for the lock, in userspace: it cannot
    // even be killed until the connection ends).
    let mut cat = Command::new("cat")
        .arg(m.dir.join("a.txt"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(st) = cat.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < deadline + Duration::from_secs(90),
            "the watchdog did not release the reader"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let released = t0.elapsed();
    assert!(!status.success(), "the reader read from a hung mount");
    assert!(released >= deadline, "released after {released:?}");
    let report = m.stop_watchdog().expect("the watchdog fired");
    assert!(
        report.contains("stopped answering: the test's work on it took longer than 4s"),
        "{report}"
    );
    // The evidence: the daemon's log (it says it holds the lock) and its threads.
    assert!(
        report.contains("debug_hang: holding the working copy's lock forever"),
        "{report}"
    );
    assert!(report.contains("revfs-dbg-hang"), "{report}");
    let has_gdb = Command::new("gdb").arg("--version").output().is_ok();
    if has_gdb {
        assert!(report.contains("Thread "), "no stacks in:\n{report}");
    }
    // Nothing left: no daemon, no mount.
    let deadline_gone = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}/cmdline")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"))
    {
        assert!(
            Instant::now() < deadline_gone,
            "the daemon is still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!watchdog::is_mounted(&m.dir), "still mounted");
}
