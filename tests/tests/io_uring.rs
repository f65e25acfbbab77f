//! How the kernel hands a mount its requests (`mount.io_uring`, vfs/src/uring.rs and
//! vendor/fuser/src/uring.rs): through io_uring rings when the kernel offers them, one queue
//! a CPU with its ring threads pinned to that CPU, the fuse module's `enable_uring` turned
//! on by the daemon; through `/dev/fuse` when the configuration says no. Programs see the
//! same files either way (the random-operations, fio and stress-ng tests run both ways).

use revfs_tests::mount::Mount;
use revfs_tests::{fixtures, hg_archive, possible_cpus, tree_files};
use std::path::{Path, PathBuf};

const ENABLE: &str = "/sys/module/fuse/parameters/enable_uring";

fn info(m: &Mount) -> serde_json::Value {
    let answer = m.control("{\"cmd\":\"info\"}");
    serde_json::from_str(answer.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("info: {answer}: {e}"))
}

/// The daemon's ring threads: (name, the CPUs it may run on).
fn ring_threads(pid: i32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !name.starts_with("fuser-ring-") {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default()
            .trim()
            .to_string();
        out.push((name.trim().to_string(), cpus));
    }
    out.sort();
    out
}

/// Every file of the mount (but `.revfs`) equals hg's checkout of `rev`.
fn files_equal_hg(m: &Mount, repo: &Path, rev: &str) {
    let tmp = revfs_tests::scratch_dir();
    let want = tmp.path().join("archive");
    hg_archive(repo, rev, &want);
    let names: Vec<PathBuf> = tree_files(&m.dir)
        .into_iter()
        .filter(|p| !p.starts_with(".revfs"))
        .collect();
    assert_eq!(names, tree_files(&want));
    for name in &names {
        let ours = std::fs::read(m.dir.join(name)).unwrap();
        let theirs = std::fs::read(want.join(name)).unwrap();
        assert!(ours == theirs, "{} differs", name.display());
    }
}

/// Writes a file through the mount and reads it back; `revfs status` sees it.
fn write_and_read_back(m: &Mount) {
    std::fs::write(m.dir.join("through-the-ring.txt"), b"written\n").unwrap();
    assert_eq!(
        std::fs::read(m.dir.join("through-the-ring.txt")).unwrap(),
        b"written\n"
    );
    let st = m.revfs_in(&m.dir, &["status"]);
    assert_eq!(
        String::from_utf8_lossy(&st.stdout),
        "? through-the-ring.txt\n"
    );
}

#[test]
fn a_mount_takes_requests_through_io_uring_rings_pinned_to_their_cpus() {
    let param = Path::new(ENABLE);
    let before = std::fs::read_to_string(param).ok();
    // Off, as after a boot: the daemon (root) turns it on for its mount.
    if before.is_some() {
        std::fs::write(param, "N\n").unwrap();
    }
    let repo = fixtures().join("wide");
    let m = Mount::new(&repo, None);
    let requests = info(&m)["requests"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let Some(before) = before else {
        // A kernel without FUSE over io_uring (before 6.14): /dev/fuse, and why.
        assert!(
            requests.starts_with("/dev/fuse (this kernel has no"),
            "{requests}"
        );
        files_equal_hg(&m, &repo, "tip");
        return;
    };
    assert_eq!(std::fs::read_to_string(param).unwrap().trim(), "Y");
    let disabled =
        std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").unwrap_or_default();
    if disabled.trim() == "2" {
        // io_uring refused to every process (sysctl kernel.io_uring_disabled): /dev/fuse.
        assert!(
            requests.starts_with("/dev/fuse (the kernel did not offer"),
            "{requests}"
        );
        files_equal_hg(&m, &repo, "tip");
        m.unmount();
        std::fs::write(param, before).unwrap();
        return;
    }
    let rings = possible_cpus() * 2;
    assert_eq!(requests, format!("io_uring ({rings} rings)"));
    // Two ring threads a CPU, each allowed on its CPU only.
    let threads = ring_threads(m.daemon_pid());
    assert_eq!(threads.len(), rings, "{threads:?}");
    for (name, cpus) in &threads {
        assert_eq!(
            name.strip_prefix("fuser-ring-"),
            Some(cpus.as_str()),
            "{threads:?}"
        );
    }
    files_equal_hg(&m, &repo, "tip");
    write_and_read_back(&m);
    let doctor = m.revfs(&["doctor", &m.dir.display().to_string()]);
    let doctor = String::from_utf8_lossy(&doctor.stdout).to_string();
    assert!(
        doctor.contains(&format!(" requests through io_uring ({rings} rings)\n")),
        "{doctor}"
    );
    m.unmount();
    // As it was (a later mount turns it on again).
    if before.trim() != "Y" {
        std::fs::write(param, before).unwrap();
    }
}

#[test]
fn with_io_uring_off_requests_go_through_dev_fuse() {
    let repo = fixtures().join("wide");
    let m = Mount::with_config(&repo, "[mount]\nio_uring = false\n");
    assert_eq!(
        info(&m)["requests"].as_str(),
        Some("/dev/fuse (mount.io_uring is off)")
    );
    assert_eq!(ring_threads(m.daemon_pid()), Vec::new());
    files_equal_hg(&m, &repo, "tip");
    write_and_read_back(&m);
    let doctor = m.revfs(&["doctor", &m.dir.display().to_string()]);
    let doctor = String::from_utf8_lossy(&doctor.stdout).to_string();
    assert!(
        doctor.contains(" requests through /dev/fuse (mount.io_uring is off)\n"),
        "{doctor}"
    );
}
