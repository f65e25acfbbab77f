//! Faults of the machine under the mount: the state directory's file system full (ENOSPC)
//! gives the writer an error and loses nothing already written; files can be deleted to
//! make room; a remount finds everything that was acknowledged. One working copy is served
//! by one daemon at a time.

use revfs_tests::hg_cmd;
use revfs_tests::mount::{snapshot, Mount};
use std::io::Write;
use std::path::Path;

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A small tmpfs, unmounted when dropped.
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn new(dir: &Path, size: &str) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs");
        SmallFs(dir.to_owned())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_full_overlay_disk_refuses_the_write_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(hg_cmd(tmp.path(), &["init", "repo"]).status.success());
    let repo = tmp.path().join("repo");
    std::fs::write(repo.join("tracked.txt"), b"tracked\n").unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qAm", "0", "-d", "0 0"])
        .status
        .success());
    // The mount's state directory (overlay and journal) on an 8 MiB file system.
    let small = SmallFs::new(&tmp.path().join("small"), "8m");
    let m = Mount::with_state_root(&repo, None, &small.0.join("state"));

    let chunk = vec![b'x'; 256 << 10];
    let mut acked: Vec<(String, Vec<u8>)> = Vec::new();
    let mut refused = None;
    for i in 0..200 {
        let name = format!("f{i:03}");
        let data: Vec<u8> = chunk.iter().map(|b| b.wrapping_add(i as u8)).collect();
        let r = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(m.dir.join(&name))?;
            f.write_all(&data)?;
            f.sync_all()
        })();
        match r {
            Ok(()) => acked.push((name, data)),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("an 8 MiB disk fills up");
    assert_eq!(e.raw_os_error(), Some(28 /* ENOSPC */), "{e}");
    assert!(acked.len() >= 10, "only {} files fit", acked.len());
    // The daemon is alive and everything acknowledged is there, byte for byte.
    for (name, data) in &acked {
        assert_eq!(&std::fs::read(m.dir.join(name)).unwrap(), data, "{name}");
    }
    // Writing over a tracked file fails the same way (open with O_TRUNC empties it first,
    // as on any file system); what is left is readable and status sees it.
    let _ = std::fs::write(m.dir.join("tracked.txt"), b"tracked, edited\n");
    let tracked = std::fs::read(m.dir.join("tracked.txt")).unwrap();
    assert!(b"tracked, edited\n".starts_with(&tracked), "{tracked:?}");
    let status_before = s(&m.revfs(&["-R", m.dir.to_str().unwrap(), "status"]).stdout);
    assert!(status_before.contains("? f000\n"), "{status_before}");

    // Deleting files makes room again, on a full disk.
    let (gone, kept) = acked.split_at(acked.len() / 2);
    for (name, _) in gone {
        std::fs::remove_file(m.dir.join(name)).unwrap();
    }
    std::fs::write(m.dir.join("after.txt"), b"room again\n").unwrap();

    // A remount finds exactly that.
    let files_before = snapshot(&m.dir);
    let status_before = s(&m.revfs(&["-R", m.dir.to_str().unwrap(), "status"]).stdout);
    m.unmount();
    m.remount(&repo, None);
    assert!(snapshot(&m.dir) == files_before, "files after remount");
    assert_eq!(
        s(&m.revfs(&["-R", m.dir.to_str().unwrap(), "status"]).stdout),
        status_before
    );
    for (name, data) in kept {
        assert_eq!(&std::fs::read(m.dir.join(name)).unwrap(), data, "{name}");
    }
    for (name, _) in gone {
        assert!(!m.dir.join(name).exists(), "{name}");
    }
    m.unmount();
}

/// A second daemon for a working copy (two `revfs mount` racing, or a mount while another
/// daemon still holds the working copy) stops at the working copy's lock, naming it.
#[test]
fn a_working_copy_held_by_another_daemon_is_not_mounted_twice() {
    let repo = revfs_tests::fixtures().join("tiny");
    let m = Mount::new(&repo, None);
    std::fs::write(m.dir.join("kept.txt"), b"kept\n").unwrap();
    m.unmount();
    let state = std::fs::read_dir(m.state_root.join("mounts"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // Another process holds the lock, as a running daemon does.
    use std::os::unix::process::CommandExt;
    let mut holder = std::process::Command::new("flock")
        .arg(state.join("lock"))
        .args(["sleep", "30"])
        .process_group(0)
        .spawn()
        .expect("flock(1)");
    let held = std::time::Instant::now();
    while std::time::Instant::now() < held + std::time::Duration::from_secs(5) {
        let probe = std::process::Command::new("flock")
            .args(["-n"])
            .arg(state.join("lock"))
            .arg("true")
            .status()
            .unwrap();
        if !probe.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = m.revfs(&["mount", repo.to_str().unwrap(), m.dir.to_str().unwrap()]);
    let err = s(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{err}");
    assert!(
        err.starts_with("abort: ")
            && err.contains(&*state.to_string_lossy())
            && err.contains("in use by another revfs daemon"),
        "{err}"
    );
    assert!(std::fs::read_dir(&m.dir).unwrap().next().is_none());
    // flock and its sleep both hold the lock: end the whole group.
    let _ = std::process::Command::new("kill")
        .args(["-9", "--", &format!("-{}", holder.id())])
        .status();
    let _ = holder.wait();
    // Once the lock is free the working copy mounts, with its change.
    m.remount(&repo, None);
    assert_eq!(std::fs::read(m.dir.join("kept.txt")).unwrap(), b"kept\n");
}
