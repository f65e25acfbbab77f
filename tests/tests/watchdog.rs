//! The test harness cannot hang: a mount whose daemon stops answering (the debug-only
//! `debug_hang` request makes it hold its working copy's lock forever, as a deadlock would)
//! is turned by the mount's watchdog into a failure within its deadline, with the daemon's
//! log and stacks as evidence; the blocked reader is released and nothing is left behind.

use revfs_tests::hg_cmd;
use revfs_tests::mount::Mount;
use revfs_tests::watchdog;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn hang(sock: &Path) {
    use std::io::{Read, Write};
    let mut c = std::os::unix::net::UnixStream::connect(sock).unwrap();
    c.write_all(b"{\"cmd\":\"debug_hang\"}\n").unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, "{\"reply\":\"done\"}\n");
}

#[test]
fn a_hung_daemon_becomes_a_failure_with_evidence_within_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    assert!(hg_cmd(tmp.path(), &["init", "repo"]).status.success());
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qAm", "base"]).status.success());

    let deadline = Duration::from_secs(4);
    let m = Mount::with_deadline(&repo, deadline);
    let t0 = Instant::now();
    let pid = m.daemon_pid();
    let state = std::fs::read_dir(m.state_root.join("mounts"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    hang(&state.join("control.sock"));
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
