//! A daemon killed (-9) while hg commits or updates inside its mount: after a remount the
//! working copy is one that a clone interrupted at some point of the same command can be
//! in, `hg verify` passes, and nothing written before the kill is lost. A commit leaves
//! either the old parent with every change still there (the changeset made or not, as in
//! a clone killed before or after its transaction), or the new changeset as the parent with
//! nothing left to commit; an update leaves the tree of one of the two revisions, never a
//! mix, with `.hg/updatestate` when it was interrupted, which `hg update` finishes.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, revfs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FILES: usize = 300;

fn name(i: usize) -> String {
    format!("f/{:03}", i)
}

/// A repository of two revisions: rev 0 has FILES files, rev 1 changes every one.
fn base(dir: &Path) -> PathBuf {
    let files: Vec<(String, String)> = (0..FILES).map(|i| (name(i), format!("r0 {i}\n"))).collect();
    let repo = revfs_tests::hg_repo(dir, &files);
    for i in 0..FILES {
        std::fs::write(repo.join(name(i)), format!("r1 {i}\n")).unwrap();
    }
    let out = hg_cmd(&repo, &["commit", "-qm", "r1", "-d", "1 0"]);
    assert!(out.status.success(), "{out:?}");
    repo
}

fn text(dir: &Path, args: &[&str]) -> String {
    let out = hg_cmd(dir, args);
    assert!(out.status.success(), "hg {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `hg ARGS` in the mount, kills the daemon after `delay`, and waits for hg (which
/// must stop within its deadline); then frees the mount and mounts it again.
fn interrupted(mount: &Mount, repo: &Path, args: &[&str], delay: Duration) -> String {
    let mut hg = revfs_tests::hg_env(&mut Command::new("hg"))
        .args(args)
        .current_dir(&mount.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    mount.kill_daemon();
    let t0 = Instant::now();
    while hg.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "hg {args:?} did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = hg.wait_with_output().unwrap();
    mount.unmount();
    mount.remount(repo, None);
    format!(
        "{:?} {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// hg recover where hg itself asks for it (a transaction the kill interrupted), then
/// `hg verify`.
fn recover_and_verify(mount: &Mount, repo: &Path) {
    if repo.join(".hg/store/journal").exists() {
        let out = hg_cmd(&mount.dir, &["recover"]);
        assert!(out.status.success(), "hg recover: {out:?}");
    }
    let out = hg_cmd(&mount.dir, &["verify", "-q"]);
    assert!(out.status.success(), "hg verify: {out:?}");
}

#[test]
fn a_daemon_killed_during_hg_commit_leaves_what_an_interrupted_clone_can_show() {
    let mut seen = Vec::new();
    for delay in [0, 150, 300, 350, 400, 450, 700, 1000] {
        let tmp = revfs_tests::scratch_dir();
        base(tmp.path());
        let repo = tmp.path().join("clone");
        let out = hg_cmd(tmp.path(), &["clone", "-q", "-U", "repo", "clone"]);
        assert!(out.status.success());
        let mount = Mount::new(&repo, Some("1"));
        let p0 = text(&mount.dir, &["log", "-r", ".", "-T", "{node}"]);
        for i in 0..FILES {
            std::fs::write(mount.dir.join(name(i)), format!("edit {i}\n")).unwrap();
        }
        let hg = interrupted(
            &mount,
            &repo,
            &["commit", "-m", "c", "-u", "t", "-d", "2 0"],
            Duration::from_millis(delay),
        );
        recover_and_verify(&mount, &repo);
        // Nothing written before the kill is lost.
        for i in 0..FILES {
            assert_eq!(
                std::fs::read_to_string(mount.dir.join(name(i))).unwrap(),
                format!("edit {i}\n"),
                "{delay} ms: {hg}"
            );
        }
        let parent = text(&mount.dir, &["log", "-r", ".", "-T", "{node}"]);
        let status = text(&mount.dir, &["status"]);
        let heads = text(&mount.dir, &["heads", "-T", "{node}\\n"]);
        let state = if parent == p0 {
            let all: String = (0..FILES).map(|i| format!("M {}\n", name(i))).collect();
            assert_eq!(
                status, all,
                "{delay} ms, old parent: every change kept ({hg})"
            );
            if heads.lines().count() == 1 {
                "not committed"
            } else {
                "committed, parent not moved"
            }
        } else {
            assert_eq!(
                text(&mount.dir, &["log", "-r", "p1(.)", "-T", "{node}"]),
                p0,
                "{hg}"
            );
            assert_eq!(status, "", "{delay} ms, new parent: nothing left ({hg})");
            assert_eq!(text(&mount.dir, &["cat", "-r", ".", &name(7)]), "edit 7\n");
            "committed"
        };
        // revfs and hg agree on the state.
        let ours = revfs(&mount.dir, &["status"]);
        assert_eq!(String::from_utf8_lossy(&ours.stdout), status);
        seen.push((delay, state));
        mount.unmount();
    }
    eprintln!("states after a kill during hg commit: {seen:?}");
}

#[test]
fn a_daemon_killed_during_hg_update_leaves_one_revisions_tree() {
    let mut seen = Vec::new();
    for delay in [0, 60, 90, 110, 130, 150, 180, 400] {
        let tmp = revfs_tests::scratch_dir();
        let repo = base(tmp.path());
        let mount = Mount::new(&repo, Some("1"));
        // Some files read first, so that their inodes exist when the update changes them.
        for i in (0..FILES).step_by(3) {
            std::fs::read(mount.dir.join(name(i))).unwrap();
        }
        let hg = interrupted(
            &mount,
            &repo,
            &["update", "0"],
            Duration::from_millis(delay),
        );
        recover_and_verify(&mount, &repo);
        let rev = text(&mount.dir, &["log", "-r", ".", "-T", "{rev}"]);
        assert!(rev == "0" || rev == "1", "{rev}");
        assert_eq!(text(&mount.dir, &["status"]), "", "{delay} ms: {hg}");
        for i in 0..FILES {
            assert_eq!(
                std::fs::read_to_string(mount.dir.join(name(i))).unwrap(),
                format!("r{rev} {i}\n"),
                "{delay} ms: the tree is revision {rev}'s ({hg})"
            );
        }
        let interrupted = mount.dir.join(".hg/updatestate").exists();
        if interrupted {
            // As in a clone: hg asks for an update, which finishes the job.
            let out = hg_cmd(&mount.dir, &["commit", "-m", "x"]);
            assert_eq!(out.status.code(), Some(255));
            assert!(
                String::from_utf8_lossy(&out.stderr)
                    .starts_with("abort: last update was interrupted"),
                "{out:?}"
            );
            let out = hg_cmd(&mount.dir, &["update", "0"]);
            assert!(out.status.success(), "{out:?}");
            assert_eq!(text(&mount.dir, &["log", "-r", ".", "-T", "{rev}"]), "0");
            assert_eq!(text(&mount.dir, &["status"]), "");
            assert!(!mount.dir.join(".hg/updatestate").exists());
        }
        seen.push((delay, rev, interrupted));
        mount.unmount();
    }
    eprintln!("states after a kill during hg update: {seen:?}");
}
