//! inotify watchers (editors, build and test watchers, Watchman) hear of what an update or
//! a revert changes in a mount as they hear of it in a clone of the same repository: the
//! same (directory, name) pairs get events, each with the same families (created, deleted,
//! modified), and nothing else does. The daemon makes these changes itself, behind the
//! kernel's back; its events helper makes the calls that tell the watchers
//! (vfs/src/fuse/events.rs).
//!
//! Each side is watched as editors watch a tree: every directory listed, then watched
//! (`.hg` left out). Events are queued by the calls that make them, and the daemon's calls
//! are made before the command that asked for the change returns: the events are read
//! once it has, without waiting for anything.

use revfs_tests::mount::Mount;
use revfs_tests::watch::{families, Event, Follower, Watcher};
use revfs_tests::{hg_cmd, hg_ok, scratch_dir, write_file};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

type Families = BTreeMap<(String, String), String>;

/// A repository of two revisions: the second changes a file, removes one, adds two (one
/// empty), makes one executable, points a symlink elsewhere, removes a directory with a
/// subdirectory and adds a directory; some files stay as they are.
fn repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    hg_ok(dir, &["init", "repo"]);
    for (p, d) in [
        ("keep/a.txt", "a\n"),
        ("keep/b.txt", "b\n"),
        ("keep/mode.sh", "#!/bin/sh\n"),
        ("keep/same.txt", "same\n"),
        ("gone/x.txt", "x\n"),
        ("gone/sub/y.txt", "y\n"),
        ("top.txt", "top\n"),
    ] {
        write_file(&repo, p, d);
    }
    std::os::unix::fs::symlink("a.txt", repo.join("keep/link")).unwrap();
    hg_ok(&repo, &["commit", "-qAm", "r0", "-d", "0 0"]);
    write_file(&repo, "keep/a.txt", "a, changed\n");
    std::fs::remove_file(repo.join("keep/b.txt")).unwrap();
    write_file(&repo, "keep/c.txt", "c\n");
    write_file(&repo, "keep/empty", "");
    std::fs::set_permissions(
        repo.join("keep/mode.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::remove_file(repo.join("keep/link")).unwrap();
    std::os::unix::fs::symlink("same.txt", repo.join("keep/link")).unwrap();
    std::fs::remove_dir_all(repo.join("gone")).unwrap();
    write_file(&repo, "new/z.txt", "z\n");
    hg_ok(&repo, &["commit", "-qAm", "r1", "-d", "1 0"]);
    repo
}

/// A clone and a mount of the repository, both at revision 0.
struct Sides {
    _tmp: tempfile::TempDir,
    clone: PathBuf,
    mount: Mount,
}

impl Sides {
    fn new() -> Sides {
        let tmp = scratch_dir();
        let repo = repo(tmp.path());
        hg_ok(tmp.path(), &["clone", "-q", "-r", "1", "repo", "clone"]);
        let clone = tmp.path().join("clone");
        hg_ok(&clone, &["update", "-q", "-r", "0"]);
        let mount = Mount::at_with_config(&repo, "0", "");
        Sides {
            _tmp: tmp,
            clone,
            mount,
        }
    }

    /// The families of events a watcher of each side (the mount's first) hears while
    /// `op` runs there.
    fn heard<R>(&self, op: impl Fn(&Path, bool) -> R) -> [Families; 2] {
        [(&self.mount.dir, true), (&self.clone, false)].map(|(root, mount)| {
            let mut w = Watcher::start(root);
            // Nothing before the change.
            assert_eq!(
                w.take(),
                vec![],
                "events before the change in {}",
                root.display()
            );
            op(root, mount);
            families(&w.take())
        })
    }
}

impl Sides {
    /// The same local changes on both sides: a file edited, one removed, a directory's
    /// file and the directory removed.
    fn edit_both(&self) {
        for root in [&self.mount.dir, &self.clone] {
            write_file(root, "keep/a.txt", "edited\n");
            std::fs::remove_file(root.join("keep/b.txt")).unwrap();
            std::fs::remove_file(root.join("gone/sub/y.txt")).unwrap();
            std::fs::remove_dir(root.join("gone/sub")).unwrap();
        }
    }

    /// [`Sides::heard`] of `revfs REVFS_ARGS` in the mount and `hg HG_ARGS` in the clone.
    fn revfs_and_hg(&self, revfs_args: &[&str], hg_args: &[&str]) -> [Families; 2] {
        self.heard(|root, mount| {
            if mount {
                let mut args = vec!["-R", root.to_str().unwrap()];
                args.extend_from_slice(revfs_args);
                let out = self.mount.revfs(&args);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            } else {
                hg_ok(root, hg_args);
            }
        })
    }
}

impl Sides {
    /// Runs hg with `args` on both sides, each under a watcher: asserts that both exit and
    /// print the same, and heard the same (`what` names the step); the clone's exit,
    /// output and families.
    fn hg_step(&self, what: &str, args: &[&str]) -> ((Option<i32>, String), Families) {
        let outs = std::cell::RefCell::new(Vec::new());
        let heard = self.heard(|root, _| outs.borrow_mut().push(hg_any(root, args)));
        let mut outs = outs.into_inner();
        assert_eq!(
            outs[0], outs[1],
            "{what}: the mount's exit and output (left), the clone's (right)"
        );
        (outs.pop().expect("the clone's"), same(heard, what))
    }
}

/// Families from (directory, name, family) triples.
fn expect(triples: &[(&str, &str, &str)]) -> Families {
    triples
        .iter()
        .map(|(d, n, f)| ((d.to_string(), n.to_string()), f.to_string()))
        .collect()
}

/// Asserts that both sides heard the same of `what`; the clone's.
fn same(heard: [Families; 2], what: &str) -> Families {
    let [mount, clone] = heard;
    assert_eq!(
        mount, clone,
        "{what}: the mount's events (left), the clone's (right)"
    );
    clone
}

#[test]
fn watchers_hear_of_an_hg_update_in_a_mount_as_in_a_clone_both_ways() {
    let s = Sides::new();
    let clone = same(
        s.heard(|root, _| hg_ok(root, &["update", "-q", "-r", "1"])),
        "update 0 -> 1",
    );
    // What hg's update does in a clone, which the comparison takes as the truth: a changed
    // file unlinked and written again, a removed directory's files removed before it, a
    // new directory made (its files in it, where no watch is yet), a mode changed in place.
    let expected = expect(&[
        ("", "gone", "-d-"),
        ("", "new", "c--"),
        ("gone", "", "-d-"),
        ("gone", "sub", "-d-"),
        ("gone", "x.txt", "-d-"),
        ("gone/sub", "", "-d-"),
        ("gone/sub", "y.txt", "-d-"),
        ("keep", "a.txt", "cdm"),
        ("keep", "b.txt", "-d-"),
        ("keep", "c.txt", "c-m"),
        ("keep", "empty", "c-m"),
        ("keep", "link", "cd-"),
        ("keep", "mode.sh", "--m"),
    ]);
    assert_eq!(clone, expected, "a clone's update 0 -> 1");

    let clone = same(
        s.heard(|root, _| hg_ok(root, &["update", "-q", "-r", "0"])),
        "update 1 -> 0",
    );
    assert!(clone.contains_key(&("".into(), "gone".into())), "{clone:?}");
}

impl Sides {
    /// The events a [`Follower`] of each side (the mount's first) hears while `op` runs
    /// there, in the order heard.
    fn followed<R>(&self, op: impl Fn(&Path) -> R) -> [Vec<Event>; 2] {
        [&self.mount.dir, &self.clone].map(|root| {
            let f = Follower::start(root);
            op(root);
            f.stop()
        })
    }
}

/// Asserts that in `events`, each name deleted and created again (a file hg's update
/// rewrites) is created right after its delete, as hg's update does it: a watcher that
/// batches its events (VS Code's) then names the two a change.
fn rewrites_are_delete_then_create(events: &[Event], what: &str) {
    for (i, e) in events.iter().enumerate() {
        let Some(next) = events.get(i + 1) else { break };
        let again = events[i + 1..]
            .iter()
            .any(|n| n.mask & libc::IN_CREATE != 0 && (&n.dir, &n.name) == (&e.dir, &e.name));
        if e.mask & libc::IN_DELETE != 0 && again {
            assert!(
                next.mask & libc::IN_CREATE != 0 && (&next.dir, &next.name) == (&e.dir, &e.name),
                "{what}: {}/{} deleted, then {next:?} before it is made again: {events:?}",
                e.dir,
                e.name
            );
        }
    }
}

#[test]
fn a_watcher_that_watches_new_directories_without_listing_them_hears_of_their_files_in_a_mount() {
    // VS Code's watcher watches a directory it hears was made and never lists it: it
    // hears of the files an update makes there only when they are made after its watch.
    // In a clone that is a race with hg, which writes a new directory's first file right
    // after making it (the watcher mostly loses it); in a mount the daemon's helper makes
    // them after a pause for the watch, so the watcher hears of every one. Otherwise it
    // hears what it hears in the clone.
    let s = Sides::new();
    let steps = [
        ("1", "update 0 -> 1", &[("new", "z.txt", "c-m")][..]),
        (
            "0",
            "update 1 -> 0",
            &[
                ("gone", "sub", "c--"),
                ("gone", "x.txt", "c-m"),
                ("gone/sub", "y.txt", "c-m"),
            ],
        ),
        ("1", "update 0 -> 1 again", &[("new", "z.txt", "c-m")]),
    ];
    for (rev, what, made) in steps {
        let [mount, clone] = s.followed(|root| hg_ok(root, &["update", "-q", "-r", rev]));
        rewrites_are_delete_then_create(&clone, &format!("{what} in the clone"));
        rewrites_are_delete_then_create(&mount, &format!("{what} in the mount"));
        let (mount, clone) = (families(&mount), families(&clone));
        let made = expect(made);
        for (k, f) in &made {
            assert_eq!(
                mount.get(k),
                Some(f),
                "{what}: {k:?} in the mount: {mount:?}"
            );
        }
        // (What the clone's watcher hears of a new directory's files depends on the race.)
        for (k, f) in clone.iter().filter(|(k, _)| !made.contains_key(*k)) {
            assert_eq!(
                mount.get(k),
                Some(f),
                "{what}: {k:?} in the mount as in the clone: {mount:?}"
            );
        }
        for k in mount.keys() {
            assert!(
                clone.contains_key(k) || made.contains_key(k),
                "{what}: {k:?} heard in the mount only: {mount:?}"
            );
        }
    }
    // revfs's own update tells the same as hg's.
    let f = Follower::start(&s.mount.dir);
    let out = s
        .mount
        .revfs(&["-R", s.mount.dir.to_str().unwrap(), "update", "-r", "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = f.stop();
    rewrites_are_delete_then_create(&events, "revfs update 1 -> 0");
    let heard = families(&events);
    for (k, f) in expect(&[
        ("gone", "sub", "c--"),
        ("gone", "x.txt", "c-m"),
        ("gone/sub", "y.txt", "c-m"),
    ]) {
        assert_eq!(
            heard.get(&k),
            Some(&f),
            "revfs update 1 -> 0: {k:?}: {heard:?}"
        );
    }
}

#[test]
fn watchers_hear_of_a_revert_in_a_mount_as_in_a_clone() {
    let s = Sides::new();
    s.edit_both();
    let clone = same(
        s.heard(|root, _| hg_ok(root, &["revert", "-q", "--all", "--no-backup"])),
        "revert",
    );
    assert!(
        clone.contains_key(&("keep".into(), "a.txt".into())),
        "{clone:?}"
    );
    assert!(
        clone.contains_key(&("keep".into(), "b.txt".into())),
        "{clone:?}"
    );
}

#[test]
fn revfs_revert_tells_watchers_what_hgs_revert_tells_them_in_a_clone() {
    // hg's revert in a mount writes through the mount (its events are the kernel's own);
    // revfs's is the daemon's.
    let s = Sides::new();
    s.edit_both();
    let clone = same(
        s.revfs_and_hg(
            &["revert", "--all", "-C"],
            &["revert", "-q", "--all", "--no-backup"],
        ),
        "revert",
    );
    let expected = expect(&[
        ("gone", "sub", "c--"),
        ("keep", "a.txt", "cdm"),
        ("keep", "b.txt", "c-m"),
    ]);
    assert_eq!(clone, expected, "a clone's revert");
}

#[test]
fn revfs_update_tells_watchers_what_hgs_update_tells_them_in_a_clone() {
    let s = Sides::new();
    let clone = same(
        s.revfs_and_hg(&["update", "-r", "1"], &["update", "-q", "-r", "1"]),
        "update 0 -> 1",
    );
    assert!(
        clone.contains_key(&("keep".into(), "a.txt".into())),
        "{clone:?}"
    );
    // Back with hg (which writes through the mount, so that what revision 0 has is the
    // mount's overlay now), then forward with revfs again.
    same(
        s.heard(|root, _| hg_ok(root, &["update", "-q", "-r", "0"])),
        "hg's update 1 -> 0",
    );
    let clone = same(
        s.revfs_and_hg(&["update", "-r", "1"], &["update", "-q", "-r", "1"]),
        "update 0 -> 1 over what hg wrote",
    );
    assert!(clone.contains_key(&("".into(), "gone".into())), "{clone:?}");
}

/// [`Sides`] whose repository has a third revision, a branch from revision 0 that changes
/// `keep/a.txt` as revision 1 does not (a conflict with it) and `top.txt`; both sides at
/// revision 1.
fn sides_with_a_branch() -> Sides {
    let s = Sides::new();
    let repo = s._tmp.path().join("repo");
    hg_ok(&repo, &["update", "-q", "-r", "0"]);
    write_file(&repo, "keep/a.txt", "a, on the branch\n");
    write_file(&repo, "top.txt", "top, on the branch\n");
    write_file(&repo, "keep/branch.txt", "branch\n");
    hg_ok(&repo, &["commit", "-qm", "r2", "-d", "2 0"]);
    hg_ok(&s.clone, &["pull", "-q"]);
    // Pulled changesets are public in the clone; the branch is a draft on both sides, as
    // the repository has it, so that both rebase it.
    hg_ok(&s.clone, &["phase", "-q", "--draft", "--force", "-r", "2"]);
    for root in [&s.mount.dir, &s.clone] {
        hg_ok(root, &["update", "-q", "-r", "1"]);
    }
    s
}

/// Runs hg with `args` in `root`, whatever its exit (a merge with conflicts exits 1):
/// the exit code and the output, which must be the same on both sides.
fn hg_any(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = hg_cmd(root, args);
    let text = String::from_utf8_lossy(&out.stdout).replace(root.to_str().unwrap(), "$ROOT");
    (out.status.code(), text)
}

#[test]
fn watchers_hear_of_hgs_merge_rebase_shelve_and_unshelve_in_a_mount_as_in_a_clone() {
    let s = sides_with_a_branch();
    let steps: &[&[&str]] = &[
        // A merge with a conflict (keep/a.txt), then its abort.
        &["merge", "-r", "2", "--tool", ":merge3"],
        &["merge", "--abort"],
        // Local changes shelved and put back.
        &["shelve", "-q", "-n", "s"],
        &["unshelve", "-q", "-n", "s"],
        &["revert", "-q", "--all", "--no-backup"],
        // The branch rebased onto revision 1, its conflict resolved as the branch had it.
        &["rebase", "-q", "-s", "2", "-d", "1", "--tool", ":other"],
    ];
    for (i, step) in steps.iter().enumerate() {
        if step[0] == "shelve" {
            for root in [&s.mount.dir, &s.clone] {
                write_file(root, "keep/c.txt", "c, shelved\n");
                write_file(root, "keep/new.txt", "new, shelved\n");
                hg_ok(root, &["add", "-q", "keep/new.txt"]);
            }
        }
        let args: Vec<&str> = [
            "--config",
            "extensions.rebase=",
            "--config",
            "extensions.shelve=",
        ]
        .into_iter()
        .chain(step.iter().copied())
        .collect();
        let (_, clone) = s.hg_step(&format!("step {i}, hg {step:?}"), &args);
        assert!(
            !clone.is_empty() || step[0] == "revert",
            "step {i}: no event in the clone: {step:?}"
        );
    }
}

/// A Watchman server of the test's own, its socket, state and log in a temporary
/// directory, stopped when dropped. hg's fsmonitor finds it through `WATCHMAN_SOCK`
/// (pywatchman's `_resolvesockname`), so that no server of the user's is started.
struct Watchman {
    child: std::process::Child,
    sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl Watchman {
    fn start() -> Watchman {
        let dir = scratch_dir();
        let arg = |flag: &str, name: &str| format!("--{flag}={}", dir.path().join(name).display());
        let child = std::process::Command::new("watchman")
            .args([
                "--foreground".to_string(),
                "--no-save-state".to_string(),
                arg("sockname", "sock"),
                arg("logfile", "log"),
                arg("pidfile", "pid"),
                arg("statefile", "state"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn watchman (tests/deps.sh installs it)");
        let w = Watchman {
            child,
            sock: dir.path().join("sock"),
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while w.roots().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "watchman did not answer on {} within 20 s",
                w.sock.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        w
    }

    /// The roots it watches (`watchman watch-list`), or None if it does not answer.
    fn roots(&self) -> Option<Vec<String>> {
        let v = self.answer(&["watch-list"]).ok()?;
        let roots = v.get("roots")?.as_array()?;
        Some(
            roots
                .iter()
                .map(|r| r.as_str().unwrap_or_default().to_string())
                .collect(),
        )
    }

    /// `watchman ARGS` as JSON, or what went wrong (it does not answer yet, or says an
    /// error).
    fn answer(&self, args: &[&str]) -> Result<serde_json::Value, String> {
        let out = std::process::Command::new("watchman")
            .arg("--no-spawn")
            .arg(format!("--sockname={}", self.sock.display()))
            .args(args)
            .output()
            .map_err(|e| format!("spawn watchman: {e}"))?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if out.status.success() && v.get("error").is_none() {
            Ok(v)
        } else {
            Err(format!("{v} {}", String::from_utf8_lossy(&out.stderr)))
        }
    }

    /// `watchman ARGS` as JSON; panics with its error if it fails.
    fn json(&self, args: &[&str]) -> serde_json::Value {
        self.answer(args)
            .unwrap_or_else(|e| panic!("watchman {args:?}: {e}"))
    }

    /// The files of the working copy Watchman says changed under `root` while `op` ran
    /// (`watchman since` a clock taken before): (name, exists), sorted. Watchman syncs
    /// with the filesystem before it answers (a cookie file it waits to hear of), so
    /// nothing heard before the answer is missed. Its `new` flag is left out: whether a
    /// file unlinked and made again is new depends on whether Watchman looked between the
    /// two calls (in a clone as in a mount).
    fn changed<R>(&self, root: &Path, op: impl FnOnce() -> R) -> Vec<(String, bool)> {
        let root = root.to_str().unwrap();
        let clock = self.json(&["clock", root])["clock"]
            .as_str()
            .unwrap()
            .to_string();
        op();
        let since = self.json(&["since", root, &clock]);
        let mut files: Vec<(String, bool)> = since["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap_or_default().to_string(),
                    f["exists"].as_bool().unwrap_or_default(),
                )
            })
            // The clone's `.hg` is a directory Watchman reports (its ignore_vcs keeps
            // it from crawling it, not from telling of it); a mount's is a symlink.
            .filter(|(name, _)| name != ".hg" && !name.starts_with(".hg/"))
            .collect();
        files.sort();
        files
    }

    /// hg with fsmonitor enabled (as a user's hgrc does) and this server: exit and output,
    /// the root's path written `$ROOT`.
    fn hg(&self, root: &Path, args: &[&str]) -> (Option<i32>, String, String) {
        let out = revfs_tests::hg_env(
            std::process::Command::new("hg")
                .args(["--config", "extensions.fsmonitor="])
                .args(args)
                .current_dir(root),
        )
        .env("WATCHMAN_SOCK", &self.sock)
        .output()
        .expect("spawn hg");
        let text = |b: &[u8]| String::from_utf8_lossy(b).replace(root.to_str().unwrap(), "$ROOT");
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    }
}

impl Drop for Watchman {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn hgs_fsmonitor_in_a_mount_leaves_watchman_alone_and_answers_as_in_a_clone() {
    let s = Sides::new();
    let w = Watchman::start();
    s.edit_both();
    let steps: &[&[&str]] = &[
        &["status"],
        &["update", "-C", "-r", "1"],
        &["status", "-A"],
        &["update", "-r", "0"],
        &["status"],
    ];
    for (i, step) in steps.iter().enumerate() {
        let mount = w.hg(&s.mount.dir, step);
        let clone = w.hg(&s.clone, step);
        assert_eq!(
            mount, clone,
            "step {i}, hg {step:?} with fsmonitor: the mount's exit, output and errors (left), \
             the clone's (right)"
        );
    }
    // The clone's status came through Watchman (it watches the clone); the mount was never
    // handed to it, so it never crawled the mount.
    let clone = s.clone.canonicalize().unwrap();
    assert_eq!(
        w.roots(),
        Some(vec![clone.to_str().unwrap().to_string()]),
        "Watchman's roots"
    );
}

#[test]
fn watchman_watching_a_mount_hears_of_hgs_and_revfss_updates_as_in_a_clone() {
    let s = Sides::new();
    let w = Watchman::start();
    for root in [&s.mount.dir, &s.clone] {
        w.json(&["watch", root.to_str().unwrap()]);
    }
    // An update of each side, by hg in both, then revfs's in the mount against hg's in
    // the clone.
    let steps: [(&[&str], &[&str]); 3] = [
        (&["update", "-q", "-r", "1"], &["update", "-q", "-r", "1"]),
        (&["update", "-q", "-r", "0"], &["update", "-q", "-r", "0"]),
        (&["update", "-q", "-r", "1"], &["update", "-r", "1"]),
    ];
    for (i, (hg_args, revfs_args)) in steps.iter().enumerate() {
        let clone = w.changed(&s.clone, || hg_ok(&s.clone, hg_args));
        let mount = w.changed(&s.mount.dir, || {
            if i < 2 {
                hg_ok(&s.mount.dir, hg_args);
            } else {
                let root = s.mount.dir.to_str().unwrap();
                let mut args = vec!["-R", root];
                args.extend_from_slice(revfs_args);
                let out = s.mount.revfs(&args);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        });
        assert_eq!(
            mount, clone,
            "step {i}: what Watchman heard in the mount (left), in the clone (right)"
        );
        assert!(
            clone.contains(&("keep/a.txt".to_string(), true)),
            "step {i}: {clone:?}"
        );
    }
}

/// A repository of `n` files in directories of 100 (`dNNNN/fNN`) whose second revision
/// changes the first file of each directory: `n / 100` changes.
fn big_repo(dir: &Path, n: usize) -> PathBuf {
    let repo = dir.join("repo");
    hg_ok(dir, &["init", "repo"]);
    let script = format!(
        "import os, sys\n\
         root = sys.argv[1]\n\
         for d in range({dirs}):\n\
         \x20   os.mkdir(os.path.join(root, 'd%04d' % d))\n\
         \x20   for f in range(100):\n\
         \x20       with open(os.path.join(root, 'd%04d/f%02d' % (d, f)), 'w') as out:\n\
         \x20           out.write('%d %d\\n' % (d, f))\n",
        dirs = n / 100
    );
    let status = std::process::Command::new("python3")
        .args(["-c", &script])
        .arg(&repo)
        .status()
        .expect("python3");
    assert!(status.success());
    hg_ok(&repo, &["commit", "-qAm", "r0", "-d", "0 0"]);
    for d in 0..n / 100 {
        write_file(&repo, &format!("d{d:04}/f00"), "changed\n");
    }
    hg_ok(&repo, &["commit", "-qm", "r1", "-d", "1 0"]);
    repo
}

#[test]
fn a_watcher_of_a_big_tree_hears_of_the_hundredth_an_update_changes_and_no_other() {
    // 20,000 files in CI; tests/long.sh watches 100,000.
    let n: usize = revfs_tests::env_or("REVFS_TEST_WATCH_FILES", 20_000);
    // On disk: a hundred thousand files and their filelogs are too many for /dev/shm.
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = big_repo(tmp.path(), n);
    let m = Mount::at_with_config(&repo, "0", "");
    // The watcher lists every directory (the kernel then holds each), as an editor does.
    let mut w = Watcher::start(&m.dir);
    let t0 = std::time::Instant::now();
    hg_ok(&m.dir, &["update", "-q", "-r", "1"]);
    let took = t0.elapsed();
    let heard = families(&w.take());
    // Each changed file as hg's update in a clone tells it (unlinked, made, written: the
    // first test), and nothing of the others.
    let expected: Families = (0..n / 100)
        .map(|d| ((format!("d{d:04}"), "f00".to_string()), "cdm".to_string()))
        .collect();
    assert_eq!(heard.len(), expected.len(), "names heard (took {took:?})");
    assert_eq!(heard, expected);
    // And back: the same names.
    hg_ok(&m.dir, &["update", "-q", "-r", "0"]);
    assert_eq!(families(&w.take()), expected, "update back");
}

#[test]
fn a_watcher_started_before_a_killed_daemon_is_told_the_mount_went_and_a_new_one_hears_updates() {
    let s = Sides::new();
    let mut before = Watcher::start(&s.mount.dir);
    s.mount.kill_daemon();
    s.mount.unmount();
    // Every watch of the dead mount ends with IN_UNMOUNT, which tells an editor to watch
    // the tree again.
    let ended = before.take();
    assert!(
        ended.iter().any(|e| e.mask & libc::IN_UNMOUNT != 0),
        "no IN_UNMOUNT: {ended:?}"
    );
    let repo = s._tmp.path().join("repo");
    s.mount.remount(&repo, None);
    let clone = same(
        s.heard(|root, _| hg_ok(root, &["update", "-q", "-r", "1"])),
        "update 0 -> 1 after a kill and a remount",
    );
    assert!(
        clone.contains_key(&("keep".into(), "a.txt".into())),
        "{clone:?}"
    );
}

#[test]
fn watchers_hear_of_hgs_purge_histedit_and_strip_in_a_mount_as_in_a_clone() {
    let s = sides_with_a_branch();
    // histedit's plan: drop the branch's revision (the same node on both sides).
    let node = String::from_utf8(hg_cmd(&s.clone, &["log", "-r", "2", "-T", "{node}"]).stdout)
        .expect("node");
    let plan = s._tmp.path().join("histedit-plan");
    std::fs::write(&plan, format!("drop {node}\n")).unwrap();
    let plan = plan.to_str().unwrap();
    let steps: &[&[&str]] = &[
        // Untracked files (written just before) removed by purge.
        &["--config", "extensions.purge=", "purge"],
        &["update", "-q", "-r", "2"],
        // The working copy's parent dropped: back to its parent, revision 0.
        &[
            "--config",
            "extensions.histedit=",
            "histedit",
            "-q",
            "-r",
            "2",
            "--commands",
            plan,
        ],
        &["update", "-q", "-r", "1"],
        // The working copy's parent stripped: back to revision 0.
        &["--config", "extensions.strip=", "strip", "-q", "-r", "1"],
    ];
    for (i, step) in steps.iter().enumerate() {
        if step.contains(&"purge") {
            for root in [&s.mount.dir, &s.clone] {
                write_file(root, "junk.txt", "junk\n");
                write_file(root, "keep/junk/more.txt", "more\n");
            }
        }
        let (out, clone) = s.hg_step(&format!("step {i}, hg {step:?}"), step);
        assert_eq!(out.0, Some(0), "step {i}, hg {step:?}: {out:?}");
        assert!(
            !clone.is_empty(),
            "step {i}: no event in the clone: {step:?}"
        );
    }
}
