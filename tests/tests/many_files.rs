//! Many new files: the daemon keeps a bounded number of descriptors open whatever the number
//! of files written through the mount. Under a 1,024-descriptor limit (soft and hard, as a
//! service manager may set it), 100,000 files are made by `tar xf` and by a Python loop,
//! listed by `revfs status`, read back byte for byte after a remount, and deleted; the
//! daemon's open descriptors, sampled throughout, stay under its configured overlay cache.

use revfs_tests::mount::Mount;
use revfs_tests::{env_or, hg_repo};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The overlay files the daemon may keep open (`mount.open_files`).
const OPEN_FILES: usize = 128;
/// The descriptor limit of the daemon and of every revfs command.
const FD_LIMIT: u64 = 1024;
/// FUSE threads of a mount (the default): each may hold one overlay file beyond the cache.
const THREADS: usize = 8;

/// What file `i` made by `how` holds.
fn content(how: &str, i: usize) -> String {
    format!("{how} {i}\n").repeat(1 + i % 3)
}

fn tar_path(i: usize) -> String {
    format!("t/d{:03}/f{i:06}", i / 100)
}

fn loop_path(i: usize) -> String {
    format!("loop/f{i:06}")
}

/// The most descriptors the daemon had open, in all and on overlay files, sampled every
/// 50 ms until stopped (across remounts: the pid is read again each time).
struct FdSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(usize, usize)>,
}

impl FdSampler {
    fn start(state_dir: PathBuf) -> FdSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut total, mut overlay) = (0, 0);
            while !flag.load(Ordering::Relaxed) {
                let pid = std::fs::read_to_string(state_dir.join("daemon.pid")).unwrap_or_default();
                if let Ok(fds) = std::fs::read_dir(format!("/proc/{}/fd", pid.trim())) {
                    let (mut t, mut o) = (0, 0);
                    for fd in fds.flatten() {
                        t += 1;
                        if std::fs::read_link(fd.path())
                            .is_ok_and(|l| l.to_string_lossy().contains("/overlay/"))
                        {
                            o += 1;
                        }
                    }
                    total = total.max(t);
                    overlay = overlay.max(o);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (total, overlay)
        });
        FdSampler { stop, thread }
    }

    fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("sampler")
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A tar archive of `n` files (`tar_path`), written with Python's tarfile.
fn make_archive(archive: &Path, n: usize) {
    let script = format!(
        "import io, tarfile, sys\n\
         with tarfile.open(sys.argv[1], 'w') as t:\n\
         \x20   for i in range({n}):\n\
         \x20       data = (('tar %d\\n' % i) * (1 + i % 3)).encode()\n\
         \x20       info = tarfile.TarInfo('t/d%03d/f%06d' % (i // 100, i))\n\
         \x20       info.size = len(data)\n\
         \x20       info.mtime = 1700000000\n\
         \x20       t.addfile(info, io.BytesIO(data))\n"
    );
    run(Command::new("python3").args(["-c", &script]).arg(archive));
}

#[test]
fn many_new_files_under_a_1024_descriptor_limit() {
    // 20,000 in CI, twenty times the limit; tests/long.sh makes 100,000.
    let n: usize = env_or("REVFS_TEST_MANY_FILES", 20_000);
    let (in_tar, in_loop) = (n / 2, n - n / 2);
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = hg_repo(tmp.path(), &[("README", "hello\n")]);
    let m = Mount::with_fd_limit(
        &repo,
        &format!("[mount]\nopen_files = {OPEN_FILES}\n"),
        FD_LIMIT,
    );
    let sampler = FdSampler::start(m.state_dir());
    let archive = tmp.path().join("files.tar");
    make_archive(&archive, in_tar);

    run(Command::new("tar")
        .arg("xf")
        .arg(&archive)
        .arg("-C")
        .arg(&m.dir));
    let script = format!(
        "import os, sys\n\
         os.mkdir(os.path.join(sys.argv[1], 'loop'))\n\
         for i in range({in_loop}):\n\
         \x20   with open(os.path.join(sys.argv[1], 'loop/f%06d' % i), 'w') as f:\n\
         \x20       f.write(('loop %d\\n' % i) * (1 + i % 3))\n"
    );
    run(Command::new("python3").args(["-c", &script]).arg(&m.dir));

    // revfs status lists every one, in hg's order.
    let mut expected: Vec<String> = (0..in_tar)
        .map(tar_path)
        .chain((0..in_loop).map(loop_path))
        .collect();
    expected.sort();
    let want: String = expected.iter().map(|p| format!("? {p}\n")).collect();
    let out = m.revfs(&["status", "-R", &m.dir.display().to_string()]);
    assert!(
        out.status.success(),
        "revfs status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == want.as_bytes(),
        "revfs status: {} lines, {} expected; first: {:?}",
        out.stdout.split(|&b| b == b'\n').count() - 1,
        expected.len(),
        String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(200)])
    );

    // After a remount every file reads back whole.
    m.unmount();
    m.remount(&repo, None);
    for i in 0..in_tar {
        let p = tar_path(i);
        let got = std::fs::read(m.dir.join(&p)).unwrap_or_else(|e| panic!("read {p}: {e}"));
        assert_eq!(got, content("tar", i).as_bytes(), "{p}");
    }
    for i in 0..in_loop {
        let p = loop_path(i);
        let got = std::fs::read(m.dir.join(&p)).unwrap_or_else(|e| panic!("read {p}: {e}"));
        assert_eq!(got, content("loop", i).as_bytes(), "{p}");
    }
    let log = m.log();
    assert!(
        log.contains(&format!("soft_limit={FD_LIMIT} hard_limit={FD_LIMIT}")),
        "the daemon logs its descriptor limits:\n{log}"
    );

    run(Command::new("rm")
        .arg("-rf")
        .arg(m.dir.join("t"))
        .arg(m.dir.join("loop")));
    let out = m.revfs(&["status", "-R", &m.dir.display().to_string()]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert!(out.status.success());
    let (total, overlay) = sampler.finish();
    assert!(
        overlay <= OPEN_FILES + THREADS,
        "the daemon had {overlay} overlay files open at once (cache of {OPEN_FILES})"
    );
    assert!(
        total <= OPEN_FILES + THREADS + 64,
        "the daemon had {total} descriptors open at once (cache of {OPEN_FILES})"
    );
    assert!(overlay > 0, "the sampler saw the daemon's overlay files");
    m.unmount();
}

#[test]
fn doctor_warns_when_the_daemon_descriptor_limit_is_below_what_its_settings_need() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = hg_repo(tmp.path(), &[("README", "hello\n")]);
    // The default settings need 256 overlay files + 2 per thread + 16 + 64 + 64 = 416, and
    // 2 per io_uring ring (2 a possible CPU).
    let need = 416 + 2 * 2 * revfs_tests::possible_cpus();
    let m = Mount::with_fd_limit(&repo, "", 256);
    let out = m.revfs(&["doctor", &m.dir.display().to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pid = m.daemon_pid();
    let want = format!(
        " daemon {pid} may run out of file descriptors: its limit is 256, its settings need \
         up to {need}"
    );
    assert!(stdout.contains(&want), "{stdout}");
    assert!(
        stdout.contains(" (raise the limit before mounting (`ulimit -n 4096`, or LimitNOFILE="),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    m.unmount();

    // With the limit raised, nothing to say about descriptors.
    let m = Mount::with_fd_limit(&repo, "", 1024);
    let out = m.revfs(&["doctor", &m.dir.display().to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("descriptors"), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    m.unmount();
}
