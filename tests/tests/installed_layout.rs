//! An installed revfs is two programs (packaging/build.sh): `PREFIX/bin/revfs`, the
//! commands, and `PREFIX/lib/revfs/revfs-daemon`, which every mount's daemon runs, whether
//! `revfs mount` starts it or `revfs mount --foreground` is run itself (the systemd unit).
//! Both are copies of the workspace's binary here: what is checked is which program runs.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_env, hg_repo, revfs_bin};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// PREFIX/bin/revfs and PREFIX/lib/revfs/revfs-daemon, each a link to (or a copy of) the
/// workspace's binary.
fn installed(prefix: &Path) -> (PathBuf, PathBuf) {
    let bin = prefix.join("bin/revfs");
    let daemon = prefix.join("lib/revfs/revfs-daemon");
    for path in [&bin, &daemon] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if std::fs::hard_link(revfs_bin(), path).is_err() {
            std::fs::copy(revfs_bin(), path).unwrap();
        }
    }
    (bin, daemon)
}

fn exe_of(pid: i32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
}

#[test]
fn a_mount_started_by_the_installed_command_runs_the_installed_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n"), ("d/b", "b\n")]);
    let (bin, daemon) = installed(&tmp.path().join("prefix"));
    let m = Mount::with_binary(&repo, &bin);
    assert_eq!(exe_of(m.daemon_pid()), daemon);
    assert_eq!(std::fs::read(m.dir.join("d/b")).unwrap(), b"b\n");
    std::fs::write(m.dir.join("a"), "changed\n").unwrap();
    let out = m.revfs_in(&m.dir, &["status"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "M a\n");
    assert!(out.status.success());
}

#[test]
fn mount_foreground_run_by_the_installed_command_becomes_the_installed_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let (bin, daemon) = installed(&tmp.path().join("prefix"));
    let mnt = tmp.path().join("mnt");
    let state = tmp.path().join("state");
    std::fs::create_dir(&mnt).unwrap();
    let mut child = hg_env(Command::new(&bin).args(["mount", "--foreground"]))
        .arg(&repo)
        .arg(&mnt)
        .env("REVFS_STATE_DIR", &state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The same process, now the daemon's program, serves the mount.
    let deadline = Instant::now() + Duration::from_secs(30);
    let served = loop {
        if let Ok(bytes) = std::fs::read(mnt.join("a")) {
            break Some(bytes);
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).ok();
    let unmounted = hg_env(Command::new(&bin).args(["unmount", "--force"]))
        .arg(&mnt)
        .env("REVFS_STATE_DIR", &state)
        .output()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        served.as_deref(),
        Some(&b"a\n"[..]),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(exe, Some(daemon));
    assert!(
        unmounted.status.success(),
        "{}",
        String::from_utf8_lossy(&unmounted.stderr)
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
