//! `revfs doctor`: each problem made for real (a daemon killed with -9, a damaged
//! `mount.json`, a journal of a newer format, a working-copy parent stripped from the
//! repository, a lost overlay file, hg killed in the middle of a transaction, an unsupported
//! requirement), then the diagnosis, the exit status (1), and the fix it prints, followed
//! to a clean bill of health (exit 0). (/dev/fuse that cannot be opened is not made here:
//! that needs another user or a container.)

use revfs_tests::watchdog::{default_deadline, Watchdog};
use revfs_tests::{hg_cmd, hg_env, revfs_bin};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A repository, a mountpoint and a state root of their own; unmounts (lazily) on drop.
struct Setup {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    mnt: PathBuf,
    _watchdog: Watchdog,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        assert!(hg_cmd(tmp.path(), &["init", "repo"]).status.success());
        std::fs::create_dir(repo.join("dir")).unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        std::fs::write(repo.join("dir/b.txt"), "b\n").unwrap();
        assert!(hg_cmd(&repo, &["commit", "-qAm", "base"]).status.success());
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let _watchdog = Watchdog::start(&mnt, &tmp.path().join("state"), default_deadline());
        Setup {
            tmp,
            repo,
            mnt,
            _watchdog,
        }
    }

    fn state_root(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    /// `revfs ARGS` in `dir`, with this setup's state root and no configuration file.
    fn revfs_in(&self, dir: &Path, args: &[&str]) -> Output {
        hg_env(Command::new(revfs_bin()).args(args))
            .current_dir(dir)
            .env("REVFS_STATE_DIR", self.state_root())
            .env("REVFS_CONFIG", "")
            .output()
            .expect("spawn revfs")
    }

    fn revfs(&self, args: &[&str]) -> Output {
        self.revfs_in(self.tmp.path(), args)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.revfs(args);
        assert!(
            out.status.success(),
            "revfs {args:?}: {}{}",
            s(&out.stdout),
            s(&out.stderr)
        );
        s(&out.stdout)
    }

    fn repo_arg(&self) -> String {
        self.repo.display().to_string()
    }
    fn mnt_arg(&self) -> String {
        self.mnt.display().to_string()
    }

    fn mount(&self) {
        self.ok(&["mount", &self.repo_arg(), &self.mnt_arg()]);
    }
    fn unmount(&self) {
        self.ok(&["unmount", &self.mnt_arg()]);
    }

    /// `revfs doctor ARGS`: (exit status, stdout). It never writes to stderr.
    fn doctor(&self, args: &[&str]) -> (i32, String) {
        let mut full = vec!["doctor"];
        full.extend_from_slice(args);
        let out = self.revfs(&full);
        assert_eq!(s(&out.stderr), "", "doctor wrote to stderr");
        (out.status.code().unwrap_or(-1), s(&out.stdout))
    }

    /// Asserts that doctor finds nothing wrong, with and without the mountpoint.
    fn healthy(&self) -> String {
        let (code, out) = self.doctor(&[]);
        assert_eq!(code, 0, "{out}");
        assert!(out.ends_with("no problems detected\n"), "{out}");
        let (code, one) = self.doctor(&[&self.mnt_arg()]);
        assert_eq!(code, 0, "{one}");
        out
    }

    /// The one state directory.
    fn state_dir(&self) -> PathBuf {
        std::fs::read_dir(self.state_root().join("mounts"))
            .unwrap()
            .flatten()
            .next()
            .expect("a state directory")
            .path()
    }

    fn status(&self) -> String {
        self.ok(&["status", "-R", &self.mnt_arg()])
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-uz")
            .arg(&self.mnt)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Asserts `out` has `line` as a whole line.
#[track_caller]
fn has_line(out: &str, line: &str) {
    assert!(
        out.lines().any(|l| l == line),
        "no line {line:?} in:\n{out}"
    );
}

#[test]
fn a_killed_daemon_is_found_and_the_fix_brings_the_working_copy_back() {
    let t = Setup::new();
    t.mount();
    let out = t.healthy();
    let sd = t.state_dir();
    has_line(
        &out,
        &format!("checking mount {} (state {})", t.mnt_arg(), sd.display()),
    );
    has_line(&out, &format!("checking repository {}", t.repo_arg()));
    assert!(out.contains("read-ahead 1024 KiB\n"), "{out}");
    std::fs::write(t.mnt.join("a.txt"), "changed\n").unwrap();
    std::fs::write(t.mnt.join("new.txt"), "new\n").unwrap();

    let pid: i32 = std::fs::read_to_string(sd.join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    // Until the kernel has noticed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let fix = format!(
        " (run `revfs unmount --force {}`, then `revfs mount {} {}` resumes the working copy)",
        t.mnt_arg(),
        t.repo_arg(),
        t.mnt_arg()
    );
    for args in [vec![], vec![t.mnt_arg()]] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out) = t.doctor(&args);
        assert_eq!(code, 1, "{out}");
        has_line(
            &out,
            " the daemon is gone (killed or crashed): the mount is dead",
        );
        has_line(&out, &fix);
        assert!(out.ends_with("1 problem detected\n"), "{out}");
    }

    // The fix, as printed.
    t.ok(&["unmount", "--force", &t.mnt_arg()]);
    let out = t.healthy();
    let resume = format!(
        " not mounted: `revfs mount {} {}` resumes it (",
        t.repo_arg(),
        t.mnt_arg()
    );
    assert!(out.lines().any(|l| l.starts_with(&resume)), "{out}");
    has_line(
        &out,
        &format!(
            " to discard it instead (and every change in it): revfs discard --force {}",
            t.mnt_arg()
        ),
    );
    t.mount();
    assert_eq!(t.status(), "M a.txt\n? new.txt\n");
    t.healthy();
    t.unmount();
}

#[test]
fn a_damaged_or_newer_mount_json_is_named_with_the_way_out() {
    let t = Setup::new();
    t.mount();
    std::fs::write(t.mnt.join("dir/b.txt"), "edited\n").unwrap();
    t.unmount();
    let sd = t.state_dir();
    let file = sd.join("mount.json");
    let good = std::fs::read_to_string(&file).unwrap();
    let node = t.ok(&["log", "-R", &t.repo_arg(), "-r", "0", "-T", "{node}"]);

    // A newer format.
    std::fs::write(&file, good.replace("\"version\": 1", "\"version\": 9")).unwrap();
    let (code, out) = t.doctor(&[]);
    assert_eq!(code, 1, "{out}");
    has_line(
        &out,
        &format!(
            " {}: mount state format version 9 is not supported (this revfs reads version 1)",
            file.display()
        ),
    );
    assert!(out.ends_with("1 problem detected\n"), "{out}");

    // Garbage: doctor prints how to mount again at the journal's parent.
    std::fs::write(&file, "{\"version\": 1, \"repo\": ").unwrap();
    let (code, out) = t.doctor(&[&t.mnt_arg()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            " {}: not a valid mount state file: ",
            file.display()
        )),
        "{out}"
    );
    let fix = format!(
        "mv {0} {0}.bad; revfs mount -r {node} REPO {1}; or discard this working copy",
        file.display(),
        t.mnt_arg()
    );
    assert!(out.contains(&fix), "{fix}\nnot in:\n{out}");
    // `revfs mount` refuses it too.
    let out = t.revfs(&["mount", &t.repo_arg(), &t.mnt_arg()]);
    assert_eq!(out.status.code(), Some(255));

    // Following the fix gives the working copy back, edit included.
    std::fs::rename(&file, sd.join("mount.json.bad")).unwrap();
    t.ok(&["mount", "-r", &node, &t.repo_arg(), &t.mnt_arg()]);
    assert_eq!(t.status(), "M dir/b.txt\n");
    t.healthy();
    t.unmount();
}

#[test]
fn a_journal_of_an_unknown_version_is_refused_by_name() {
    let t = Setup::new();
    t.mount();
    std::fs::write(t.mnt.join("x.txt"), "x\n").unwrap();
    t.unmount();
    let journal = t.state_dir().join("journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    assert_eq!(&bytes[..8], b"RVFSJRNL");
    // The version this revfs writes, and one past it.
    let current = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let unknown = current + 1;
    bytes[8..12].copy_from_slice(&unknown.to_be_bytes());
    std::fs::write(&journal, &bytes).unwrap();
    let (code, out) = t.doctor(&[]);
    assert_eq!(code, 1, "{out}");
    has_line(
        &out,
        &format!(
            " the journal cannot be read: {}: journal format version {unknown} is not supported (this revfs reads versions 1 to {current})",
            journal.display()
        ),
    );
    // doctor only reads.
    assert_eq!(std::fs::read(&journal).unwrap(), bytes);
}

#[test]
fn a_parent_stripped_from_the_repository_is_found() {
    let t = Setup::new();
    t.mount();
    std::fs::write(t.mnt.join("a.txt"), "second\n").unwrap();
    t.ok(&["commit", "-R", &t.mnt_arg(), "-m", "second"]);
    std::fs::write(t.mnt.join("a.txt"), "third\n").unwrap();
    let node = t.ok(&["log", "-R", &t.mnt_arg(), "-r", ".", "-T", "{node}"]);
    t.unmount();
    t.healthy();
    let strip = hg_cmd(
        &t.repo,
        &["--config", "extensions.strip=", "strip", "-q", "-r", "tip"],
    );
    assert!(strip.status.success(), "{}", s(&strip.stderr));
    let (code, out) = t.doctor(&[]);
    assert_eq!(code, 1, "{out}");
    has_line(
        &out,
        &format!(
            " the working copy's parent {node} is not in {} any more (stripped or rolled back?)",
            t.repo_arg()
        ),
    );
    assert!(
        out.contains(".hg/strip-backup/; or discard this working copy"),
        "{out}"
    );
    // Not "resumes it": it would not.
    assert!(!out.contains("resumes it"), "{out}");
    // The way back it names.
    let bundle = std::fs::read_dir(t.repo.join(".hg/strip-backup"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let unbundle = hg_cmd(&t.repo, &["unbundle", "-q", &bundle.display().to_string()]);
    assert!(unbundle.status.success(), "{}", s(&unbundle.stderr));
    t.healthy();
    t.mount();
    assert_eq!(t.status(), "M a.txt\n");
    t.unmount();
}

#[test]
fn a_lost_overlay_file_is_named_by_its_path() {
    let t = Setup::new();
    t.mount();
    std::fs::write(t.mnt.join("dir/new.txt"), "new content\n").unwrap();
    std::fs::write(t.mnt.join("gone.txt"), "x\n").unwrap();
    std::fs::remove_file(t.mnt.join("gone.txt")).unwrap();
    t.unmount();
    let overlay = t.state_dir().join("overlay");
    let files: Vec<PathBuf> = std::fs::read_dir(&overlay)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let id = files[0].file_name().unwrap().to_string_lossy().into_owned();
    std::fs::remove_file(&files[0]).unwrap();
    let (code, out) = t.doctor(&[&t.mnt_arg()]);
    assert_eq!(code, 1, "{out}");
    has_line(
        &out,
        &format!(
            " 1 overlay file the working copy needs is missing from {}: {id} (dir/new.txt)",
            overlay.display()
        ),
    );
}

#[test]
fn hg_killed_in_a_transaction_leaves_what_doctor_and_recover_fix() {
    let t = Setup::new();
    t.mount();
    t.unmount();
    std::fs::write(t.repo.join("a.txt"), "by hg\n").unwrap();
    // The hook runs inside the transaction; $PPID is hg itself (plain hg: under chg it
    // would be chg's client, whose death makes the worker roll the transaction back).
    let out = revfs_tests::hg_plain_cmd(
        &t.repo,
        &[
            "commit",
            "-m",
            "killed",
            "--config",
            "hooks.pretxncommit=kill -9 $PPID",
        ],
    );
    assert_eq!(out.status.code(), None, "hg was not killed");
    assert!(t.repo.join(".hg/store/journal").exists());
    let store = t.repo.join(".hg/store");
    let dot_hg = t.repo.join(".hg");
    let (code, out) = t.doctor(&[]);
    assert_eq!(code, 1, "{out}");
    let repo = t.repo_arg();
    has_line(
        &out,
        &format!(
            " abandoned transaction found ({})",
            store.join("journal").display()
        ),
    );
    has_line(
        &out,
        &format!(" (run `revfs recover -R {repo}`, or hg recover)"),
    );
    for lock in [dot_hg.join("wlock"), store.join("lock")] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!(" stale lock {} (process ", lock.display()))),
            "{out}"
        );
        has_line(
            &out,
            &format!(
                " (remove it: rm {}; hg and revfs also break it at their next write)",
                lock.display()
            ),
        );
    }
    assert!(out.ends_with("3 problems detected\n"), "{out}");
    // The same from inside the repository, with no state directory at all.
    let bare = Setup::new();
    let out = bare.revfs_in(&t.repo, &["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(s(&out.stdout).contains(" abandoned transaction found"));

    // The fixes, as printed.
    let out = t.revfs(&["recover", "-R", &repo]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    for lock in [dot_hg.join("wlock"), store.join("lock")] {
        let _ = std::fs::remove_file(lock);
    }
    t.healthy();
    let verify = hg_cmd(&t.repo, &["verify", "-q"]);
    assert!(verify.status.success(), "{}", s(&verify.stdout));
}

#[test]
fn an_unsupported_requirement_and_a_foreign_directory() {
    let t = Setup::new();
    t.mount();
    t.healthy();
    let requires = t.repo.join(".hg/requires");
    let mut text = std::fs::read_to_string(&requires).unwrap();
    text.push_str("treemanifest\n");
    std::fs::write(&requires, &text).unwrap();
    let (code, out) = t.doctor(&[]);
    assert_eq!(code, 1, "{out}");
    has_line(
        &out,
        &format!(
            " repository requires features revfs does not support: treemanifest (used by {})",
            t.mnt_arg()
        ),
    );
    std::fs::write(&requires, text.replace("treemanifest\n", "")).unwrap();
    t.healthy();
    t.unmount();

    // A directory revfs knows nothing of.
    let other = t.tmp.path().join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let (code, out) = t.doctor(&[&other.display().to_string()]);
    assert_eq!(code, 1, "{out}");
    has_line(
        &out,
        &format!(
            " {} is not a revfs mount, and revfs keeps no state for it under {}",
            other.display(),
            t.state_root().display()
        ),
    );
}

/// Puts haltpoll's polling back as it was, however the test ends.
struct PollRestore(String);

impl Drop for PollRestore {
    fn drop(&mut self) {
        let _ = std::fs::write(POLL_NS, &self.0);
    }
}

const POLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

#[test]
fn idle_cpus_that_halt_at_once_are_noted_on_a_haltpoll_guest() {
    let t = Setup::new();
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .unwrap_or_default();
    let Ok(before) = std::fs::read_to_string(POLL_NS) else {
        // Not a haltpoll guest: nothing is said about idle CPUs.
        let (code, out) = t.doctor(&[]);
        assert_eq!(code, 0, "{out}");
        assert!(!out.contains("idle CPUs"), "{out}");
        return;
    };
    assert_eq!(
        driver.trim(),
        "haltpoll",
        "haltpoll's module without its driver"
    );
    let _restore = PollRestore(before);
    let note = " idle CPUs halt at once: each request to a mount's daemon and each answer may \
                wait for a halted CPU to wake, which made a round trip 2 to 3 times slower on \
                a KVM guest; as root, `echo 200000 > /sys/module/haltpoll/parameters/\
                guest_halt_poll_ns` lets an idle CPU poll 200 us before it halts, or \
                `mount.cpu_latency_us = 0` in revfs's configuration makes idle CPUs poll \
                while a mount's requests come";
    std::fs::write(POLL_NS, "0").expect("set guest_halt_poll_ns (root)");
    let (code, out) = t.doctor(&[]);
    assert_eq!(code, 0, "a note, not a problem:\n{out}");
    let at = out
        .lines()
        .position(|l| l == "checking idle CPUs (haltpoll, guest_halt_poll_ns = 0)")
        .unwrap_or_else(|| panic!("no idle CPU check in:\n{out}"));
    assert_eq!(out.lines().nth(at + 1), Some(note), "{out}");
    std::fs::write(POLL_NS, "200000").expect("set guest_halt_poll_ns (root)");
    let (code, out) = t.doctor(&[]);
    assert_eq!(code, 0, "{out}");
    has_line(
        &out,
        "checking idle CPUs (haltpoll, guest_halt_poll_ns = 200000)",
    );
    assert!(!out.contains("halt at once"), "{out}");
}
