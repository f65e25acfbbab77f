//! The mounted working copy against real hg checkouts: same paths, bytes, exec bits and
//! symlink targets for every revision; laziness; faults that stay local; unmount rules.

use revfs_tests::hg::HgServer;
use revfs_tests::mount::{snapshot, Mount, Snap};
use revfs_tests::{fixtures, hg_cmd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn diff_snapshots(
    name: &str,
    rev: usize,
    ours: &[(std::path::PathBuf, Snap)],
    theirs: &[(std::path::PathBuf, Snap)],
) {
    if ours == theirs {
        return;
    }
    let ours_paths: Vec<_> = ours.iter().map(|(p, _)| p).collect();
    let their_paths: Vec<_> = theirs.iter().map(|(p, _)| p).collect();
    assert_eq!(ours_paths, their_paths, "{name}@{rev}: different paths");
    for ((p, a), (_, b)) in ours.iter().zip(theirs) {
        assert!(
            a == b,
            "{name}@{rev}: {} differs: mount {:?} vs hg {:?}",
            p.display(),
            short(a),
            short(b)
        );
    }
}

fn short(s: &Snap) -> String {
    match s {
        Snap::Dir => "dir".into(),
        Snap::Link(t) => format!("link -> {}", String::from_utf8_lossy(t)),
        Snap::File { exec, data, .. } => format!("file exec={exec} {} bytes", data.len()),
    }
}

fn every_revision_matches_checkout(name: &str, step: usize) {
    let repo = fixtures().join(name);
    let tmp = revfs_tests::scratch_dir();
    let wc = tmp.path().join("wc");
    let out = hg_cmd(
        tmp.path(),
        &["clone", "-q", "-U", &repo.display().to_string(), "wc"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut hg = HgServer::start(&wc);
    let tip: usize = String::from_utf8(hg.run(&["log", "-r", "tip", "-T", "{rev}"]).stdout)
        .unwrap()
        .parse()
        .unwrap();
    let mut revs: Vec<usize> = (0..=tip).step_by(step).collect();
    if revs.last() != Some(&tip) {
        revs.push(tip);
    }
    for rev in revs {
        let r = rev.to_string();
        let up = hg.run(&[
            "update",
            "-q",
            "-C",
            "-r",
            &r,
            "--config",
            "ui.portablefilenames=ignore",
        ]);
        assert_eq!(
            up.code,
            0,
            "hg update -r {rev}: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        let mount = Mount::new(&repo, Some(&r));
        diff_snapshots(name, rev, &snapshot(&mount.dir), &snapshot(&wc));
        mount.unmount();
    }
}

#[test]
fn the_mount_equals_an_hg_checkout_at_every_revision() {
    every_revision_matches_checkout("history", revfs_tests::mount_rev_step());
}

#[test]
fn the_mount_equals_an_hg_checkout_at_every_revision_zlib() {
    every_revision_matches_checkout("history-zlib", revfs_tests::mount_rev_step());
}

#[test]
fn the_mount_equals_an_hg_checkout_at_every_revision_legacy_formats() {
    for name in ["history-legacy", "history-nofncache", "history-nostore"] {
        every_revision_matches_checkout(name, revfs_tests::mount_rev_step());
    }
}

#[test]
fn the_mount_equals_an_hg_checkout_at_every_revision_small_repositories() {
    for name in ["tiny", "wide"] {
        every_revision_matches_checkout(name, 1);
    }
}

fn info_inodes(mount: &Mount) -> u64 {
    // The control socket reports how many inodes the daemon has built.
    let sock = mount.dir.join(".revfs/socket");
    let target = std::fs::read_link(&sock).expect(".revfs/socket");
    let resp = revfs_vfs_request(&target);
    resp["inodes"].as_u64().expect("inodes")
}

fn revfs_vfs_request(sock: &Path) -> serde_json::Value {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).expect("connect control socket");
    s.write_all(b"{\"cmd\":\"info\"}\n").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

#[test]
fn mounting_builds_nothing_until_asked_and_directories_one_at_a_time() {
    let mount = Mount::new(&fixtures().join("wide"), None);
    // The mount has the kernel cache the way to `.hg` for hg, and hg's case probe `.HG`
    // (share::prime_kernel_cache): that lookup builds the root's own entries, no deeper.
    let at_mount = info_inodes(&mount);
    let top: Vec<_> = std::fs::read_dir(&mount.dir).unwrap().collect();
    assert_eq!(
        at_mount,
        1 + top.len() as u64,
        "only the root and its entries exist right after mount"
    );
    let after_root = info_inodes(&mount);
    assert_eq!(after_root, at_mount, "listing the root builds nothing more");
    let src = std::fs::read_dir(mount.dir.join("src")).unwrap().count() as u64;
    assert_eq!(info_inodes(&mount), after_root + src);
}

#[test]
fn hidden_entries_and_stable_inodes() {
    let repo = fixtures().join("tiny");
    let mount = Mount::new(&repo, None);
    let names: Vec<String> = std::fs::read_dir(&mount.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n == ".hg" || n == ".revfs"),
        "{names:?}"
    );
    // `.hg` is the hg share in the state directory (for hg in the mount), never a tree entry.
    assert_eq!(
        std::fs::canonicalize(mount.dir.join(".hg")).unwrap(),
        std::fs::canonicalize(mount.state_dir().join("hg")).unwrap()
    );
    assert_eq!(
        std::fs::read(mount.dir.join(".hg/sharedpath")).unwrap(),
        std::fs::canonicalize(repo.join(".hg"))
            .unwrap()
            .as_os_str()
            .as_encoded_bytes()
    );
    assert!(mount.dir.join(".revfs/socket").symlink_metadata().is_ok());
    assert_eq!(
        std::fs::read_link(mount.dir.join(".revfs/repo")).unwrap(),
        std::fs::canonicalize(&repo).unwrap()
    );
    let ino = std::fs::metadata(mount.dir.join("b/c.txt")).unwrap().ino();
    // Drop the kernel's caches so that the next stat asks the daemon again.
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "2");
    assert_eq!(
        std::fs::metadata(mount.dir.join("b/c.txt")).unwrap().ino(),
        ino
    );
}

#[test]
fn mtimes_are_the_checkout_time_and_survive_a_remount() {
    let repo = fixtures().join("tiny");
    let mount = Mount::new(&repo, None);
    let m1 = std::fs::metadata(mount.dir.join("a.txt")).unwrap();
    let m2 = std::fs::metadata(mount.dir.join("b/c.txt")).unwrap();
    assert_eq!(m1.mtime(), m2.mtime());
    assert_eq!(m1.ctime(), m1.mtime());
    let before = m1.mtime();
    mount.unmount();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    mount.remount(&repo, None);
    assert_eq!(
        std::fs::metadata(mount.dir.join("a.txt")).unwrap().mtime(),
        before
    );
}

#[test]
fn a_corrupt_file_gives_eio_for_that_file_alone() {
    let tmp = revfs_tests::fixture_copy("tiny");
    let repo = tmp.path().join("repo");
    let index = repo.join(".hg/store/data/a.txt.i");
    let mut bytes = std::fs::read(&index).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x20;
    std::fs::write(&index, &bytes).unwrap();
    let mount = Mount::new(&repo, None);
    let err = std::fs::read(mount.dir.join("a.txt")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(5), "EIO expected, got {err}");
    assert_eq!(std::fs::read(mount.dir.join("b/c.txt")).unwrap(), b"c\n");
    let log = mount.log();
    assert!(
        log.contains("data/a.txt:1"),
        "the log names the revlog: {log}"
    );
}

#[test]
fn a_missing_filelog_gives_eio_for_that_file_alone() {
    let tmp = revfs_tests::fixture_copy("tiny");
    let repo = tmp.path().join("repo");
    std::fs::remove_file(repo.join(".hg/store/data/a.txt.i")).unwrap();
    let mount = Mount::new(&repo, None);
    let err = std::fs::read(mount.dir.join("a.txt")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(5), "EIO expected, got {err}");
    assert_eq!(std::fs::read(mount.dir.join("b/c.txt")).unwrap(), b"c\n");
    let names: Vec<_> = std::fs::read_dir(&mount.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        names.iter().any(|n| n == "a.txt"),
        "still listed: {names:?}"
    );
    assert!(mount.log().contains("a.txt"), "{}", mount.log());
}

#[test]
fn unmount_refuses_a_busy_mount_unless_forced() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let held = std::fs::File::open(mount.dir.join("a.txt")).unwrap();
    let out = mount.revfs(&["unmount", &mount.dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(255));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("abort: ") && err.contains("busy") && err.contains("--force"),
        "{err}"
    );
    let out = mount.revfs(&["unmount", "--force", &mount.dir.display().to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(held);
    // Not mounted any more: listed as a kept working copy.
    let list = mount.revfs(&["list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{} ", mount.dir.display())))
        .unwrap_or_else(|| panic!("not listed:\n{text}"));
    assert!(
        line.ends_with("  (not mounted; no uncommitted changes)"),
        "{line}"
    );
}

#[test]
fn root_unmounts_without_fusermount3() {
    // A machine without fuse3: root mounts and unmounts through the kernel itself. The
    // fusermount3 first on the PATH fails and leaves a mark, so a call to it shows.
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let bin = tempfile::tempdir().unwrap();
    let mark = bin.path().join("called");
    let tool = bin.path().join("fusermount3");
    std::fs::write(
        &tool,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", mark.display()),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let dir = mount.dir.display().to_string();
    let out = mount.revfs_with_path_first(bin.path(), &["unmount", &dir]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!mark.exists(), "fusermount3 was run");
    let list = mount.revfs(&["list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("{dir} ")) && l.contains("(not mounted")),
        "{text}"
    );
}

#[test]
fn a_killed_daemon_leaves_a_mount_that_unmount_clears() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    mount.kill_daemon();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let err = std::fs::metadata(mount.dir.join("a.txt")).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(107),
        "ENOTCONN expected, got {err}"
    );
    let list = mount.revfs(&["list"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("not running"));
    mount.unmount();
    assert!(std::fs::read_dir(&mount.dir).unwrap().next().is_none());
}

#[test]
fn mounting_twice_on_one_directory_is_refused() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let out = mount.revfs(&[
        "mount",
        &fixtures().join("tiny").display().to_string(),
        &mount.dir.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(255));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already a revfs mount"));
}

#[test]
fn commands_inside_a_mount_use_its_repository_and_revision() {
    let repo = fixtures().join("history");
    let mount = Mount::new(&repo, Some("100"));
    let run_in = |dir: &Path, args: &[&str]| {
        let out = revfs_tests::revfs(dir, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    // `.` is the mount's revision, found from the mount root and from a subdirectory.
    assert_eq!(
        run_in(&mount.dir, &["log", "-r", ".", "-T", "json"]),
        hg_cmd(&repo, &["log", "-r", "100", "-T", "json"]).stdout
    );
    let sub = mount.dir.join("Dir");
    assert!(sub.is_dir());
    assert_eq!(
        run_in(&sub, &["files"]),
        hg_cmd(&repo.join("Dir"), &["files", "-r", "100"]).stdout
    );
    // parents and id show the mount's revision; id marks a changed working copy.
    assert_eq!(
        run_in(&mount.dir, &["parents"]),
        hg_cmd(&repo, &["log", "-r", "100"]).stdout
    );
    let clean_id = hg_cmd(&repo, &["id", "-r", "100"]).stdout;
    assert_eq!(run_in(&mount.dir, &["id"]), clean_id);
    std::fs::write(mount.dir.join("new-file"), b"x").unwrap();
    assert_eq!(
        run_in(&mount.dir, &["id"]),
        clean_id,
        "an unknown file does not make it dirty"
    );
    assert!(revfs_tests::revfs(&mount.dir, &["add", "new-file"])
        .status
        .success());
    let mut dirty = clean_id[..12].to_vec();
    dirty.push(b'+');
    dirty.extend_from_slice(&clean_id[12..]);
    assert_eq!(run_in(&mount.dir, &["id"]), dirty);
    // -R MOUNTPOINT works from anywhere.
    let elsewhere = std::env::temp_dir();
    let m = mount.dir.display().to_string();
    assert_eq!(
        run_in(&elsewhere, &["-R", &m, "log", "-r", ".", "-q"]),
        b"100:"
            .iter()
            .copied()
            .chain(hg_cmd(&repo, &["log", "-r", "100", "-T", "{node|short}\n"]).stdout)
            .collect::<Vec<u8>>()
    );
}

#[test]
fn an_ioctl_is_refused_as_ext4_refuses_it_and_leaves_no_log_line() {
    // Every Python open() asks whether the file is a terminal (TCGETS): the kernel sends
    // it to the daemon each time, which must answer ENOTTY without logging it.
    use std::os::fd::AsRawFd;
    let repo = fixtures().join("tiny");
    let mount = Mount::new(&repo, None);
    let before = mount.log().matches("ioctl").count();
    let f = std::fs::File::open(mount.dir.join("a.txt")).unwrap();
    for _ in 0..20 {
        let mut t = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: TCGETS fills the termios we pass, or fails.
        let rc = unsafe { libc::ioctl(f.as_raw_fd(), libc::TCGETS, t.as_mut_ptr()) };
        assert_eq!(rc, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTTY)
        );
    }
    assert_eq!(
        std::io::Read::bytes(&f).count() as u64,
        std::fs::metadata(mount.dir.join("a.txt")).unwrap().len()
    );
    assert_eq!(
        mount.log().matches("ioctl").count(),
        before,
        "{}",
        mount.log()
    );
}

#[test]
fn a_mount_reads_ahead_up_to_a_megabyte() {
    // The kernel caps a FUSE mount's read-ahead at its backing device's default (128 KiB)
    // unless the daemon raises the device's (vfs/src/bdi.rs), before `revfs mount` returns.
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let dev = std::fs::metadata(&mount.dir).unwrap().dev();
    let file = format!(
        "/sys/class/bdi/{}:{}/read_ahead_kb",
        libc::major(dev),
        libc::minor(dev)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "1024");
}
