//! hg in a mount whose daemon is frozen (SIGSTOP) or killed stops within its deadline
//! (`revfs.timeout`) with the way out, rather than waiting in the kernel: the kernel holds
//! the way to the share (`.hg`, its target, the root's attributes) from the mount on, so
//! hg loads the extension without the daemon, and the extension's deadline decides.
//!
//! A test binary of its own: that way holds only while the kernel keeps those entries, and
//! the kernel reclaims unused dentries and inodes under memory pressure (shown: with
//! `echo 2 > /proc/sys/vm/drop_caches` every 0.3 s the first hg call waits on the frozen
//! daemon in 3 runs of 3). Beside the other hg_in_mount tests (two at a time, with their
//! clones and mounts) a clean-suite run saw that happen once. Alone, nothing else of the
//! suite runs beside it (test binaries run one after another). docs/ARCHITECTURE.md,
//! "Never waiting on itself", says what a user sees then. The second test makes the root's
//! attributes stale (a listing), which the extension's ping before hg opens the repository
//! keeps out of hg's way.

use revfs_tests::mount::Mount;
use std::path::Path;
use std::time::{Duration, Instant};

/// Sends SIGCONT to a daemon the test stopped, when the test fails before it does.
struct Resume(String);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0])
            .status();
    }
}

/// `hg ARGS` in `dir` that must end within `limit`: killed and failed past it, so that a
/// regression fails instead of hanging the suite. Its output and how long it took.
fn hg_within(dir: &Path, args: &[&str], limit: Duration) -> (std::process::Output, Duration) {
    use std::process::{Command, Stdio};
    let t0 = Instant::now();
    let mut child = revfs_tests::hg_env(Command::new("hg").args(args).current_dir(dir))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hg");
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > limit {
            let waits = revfs_tests::waits::where_it_waits(child.id());
            let _ = child.kill();
            panic!("hg {args:?} still running after {limit:?}: {waits}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().expect("output"), t0.elapsed())
}

#[test]
fn hg_stops_within_its_deadline_when_the_daemon_is_frozen_or_killed() {
    let tmp = revfs_tests::scratch_dir();
    let repo = revfs_tests::hg_repo(tmp.path(), &[("a", "a\n"), ("d/f", "f\n")]);
    let mount = Mount::new(&repo, None);
    let (repo, mnt) = (
        std::fs::canonicalize(&repo).unwrap(),
        std::fs::canonicalize(&mount.dir).unwrap(),
    );
    std::fs::write(mnt.join("a"), "changed\n").unwrap();
    let pid = mount.daemon_pid().to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {sig}");
    };
    let way_out = format!(
        "(free the mount with: revfs unmount --force {m}; then revfs mount {r} {m} resumes \
         the working copy (revfs doctor tells more))\n",
        m = mnt.display(),
        r = repo.display()
    );
    // Frozen before hg ever ran in the mount: hg reaches the share without the daemon (the
    // kernel holds the way to it since the mount) and the extension's deadline decides.
    signal("-STOP");
    // A failure below leaves the daemon running again, so that the mount is unmounted.
    let resume = Resume(pid.clone());
    let deadline = ["--config", "revfs.timeout=2"];
    for (dir, args) in [
        (&mnt, &["status"][..]),
        (&mnt, &["diff", "--git"]),
        (
            &tmp.path().to_path_buf(),
            &["-R", mnt.to_str().unwrap(), "log", "-l", "1"],
        ),
    ] {
        let args = [&deadline[..], args].concat();
        let (out, took) = hg_within(dir, &args, Duration::from_secs(30));
        assert_eq!(
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned()),
            (
                Some(255),
                format!(
                    "abort: the revfs daemon of {} is not answering: nothing heard for 2 s\n{way_out}",
                    mnt.display()
                )
            ),
            "hg {args:?}"
        );
        assert!(out.stdout.is_empty(), "hg {args:?}: {out:?}");
        assert!(took < Duration::from_secs(5), "hg {args:?} took {took:?}");
    }
    signal("-CONT");
    std::mem::forget(resume);
    let (out, _) = hg_within(&mnt, &["status"], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "M a\n");
    // Killed: the mount is dead, and hg says so at once.
    signal("-KILL");
    let gone = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| !st.contains(") Z"))
        && Instant::now() < gone
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (out, took) = hg_within(&mnt, &["status"], Duration::from_secs(30));
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(255),
            format!(
                "abort: the revfs daemon of {} is not running (Connection refused)\n{way_out}",
                mnt.display()
            )
        )
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // The way out works, and nothing was lost.
    let out = mount.revfs(&["unmount", "--force", mnt.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    mount.remount(&repo, None);
    let (out, _) = hg_within(&mnt, &["status"], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "M a\n");
    mount.unmount();
}

/// The kernel's copy of the root's attributes goes stale when the root is listed from the
/// daemon (a listing the kernel did not hold: it marks the directory's atime stale), while
/// its permission bits stay fresh: hg then walks into the mount without the daemon but
/// its opening of the repository stats the root (hg.py `_local`), which would wait in the
/// kernel for a frozen daemon. The extension asks the daemon first, within the deadline
/// (`_repository`): hg aborts in time. Without that ping hg waits until the daemon runs
/// again (shown on 2026-12-07 by building the extension without the wrap of
/// hg.repository: hg ended only after SIGCONT, at 8 s, exit 0, and this test failed).
#[test]
fn hg_stops_within_its_deadline_when_the_roots_attributes_are_stale() {
    use std::process::{Command, Stdio};
    let tmp = revfs_tests::scratch_dir();
    let repo = revfs_tests::hg_repo(tmp.path(), &[("a", "a\n"), ("d/f", "f\n")]);
    let mount = Mount::new(&repo, None);
    let mnt = std::fs::canonicalize(&mount.dir).unwrap();
    let (out, _) = hg_within(&mnt, &["status"], Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    // A listing the kernel does not hold: the root's attributes are stale from here.
    let names: Vec<_> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let pid = mount.daemon_pid().to_string();
    let signal = |sig: &str| {
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success(), "kill {sig}");
    };
    signal("-STOP");
    // The daemon runs again at its time whatever happens (a call waiting on a stopped
    // daemon through io_uring cannot be killed): 8 s, past hg's deadline and more.
    let resume = Resume(pid.clone());
    let waker = {
        let pid = pid.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(8));
            drop(Resume(pid));
        })
    };
    let (out, took) = hg_within(
        &mnt,
        &["--config", "revfs.timeout=2", "status"],
        Duration::from_secs(30),
    );
    // The premise, still frozen: a stat of the root waits for the daemon.
    let mut stat = Command::new("stat")
        .arg(&mnt)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let stale = stat.try_wait().unwrap().is_none();
    waker.join().unwrap();
    std::mem::forget(resume);
    assert!(stat.wait().unwrap().success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{err}");
    assert!(
        err.starts_with(&format!(
            "abort: the revfs daemon of {} is not answering: nothing heard for 2 s\n",
            mnt.display()
        )),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "hg took {took:?}");
    assert!(
        stale,
        "the root's attributes were not stale: the test shows nothing"
    );
    mount.unmount();
}
