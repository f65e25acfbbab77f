//! `revfs watch`: what changes in a mount, from the daemon's change feed, with a cursor
//! that a tool gives back after a restart of its own, a remount or a killed daemon, and
//! gets every change after it, none twice (after a kill, the paths the journal names
//! again, as modified: nothing is missed).

use revfs_tests::mount::Mount;
use revfs_tests::scratch_dir;
use revfs_tests::{hg_ok, write_file};
use std::path::{Path, PathBuf};

/// Two revisions: the second changes `d/a.txt`, removes `d/b.txt`, adds `e/new.txt`.
fn repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    hg_ok(dir, &["init", "repo"]);
    write_file(&repo, "d/a.txt", "a\n");
    write_file(&repo, "d/b.txt", "b\n");
    write_file(&repo, "top.txt", "top\n");
    hg_ok(&repo, &["commit", "-qAm", "r0", "-d", "0 0"]);
    write_file(&repo, "d/a.txt", "a, changed\n");
    std::fs::remove_file(repo.join("d/b.txt")).unwrap();
    write_file(&repo, "e/new.txt", "new\n");
    hg_ok(&repo, &["commit", "-qAm", "r1", "-d", "1 0"]);
    repo
}

/// `revfs watch --once [ARGS]` in the mount: its output lines, the last (`cursor C`) split
/// off as the cursor.
fn once(m: &Mount, args: &[&str]) -> (Vec<String>, String) {
    let root = m.dir.to_str().unwrap();
    let mut all = vec!["-R", root, "watch", "--once"];
    all.extend_from_slice(args);
    let out = m.revfs(&all);
    assert!(
        out.status.success(),
        "revfs watch {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let last = lines.pop().expect("a cursor line");
    let cursor = last
        .strip_prefix("cursor ")
        .unwrap_or_else(|| panic!("not a cursor line: {last:?}"))
        .to_string();
    (lines, cursor)
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn revfs_watch_tells_writes_creates_removes_renames_and_an_update_once_each() {
    let tmp = scratch_dir();
    let repo = repo(tmp.path());
    let m = Mount::at_with_config(&repo, "0", "");
    let (none, c0) = once(&m, &[]);
    assert_eq!(
        none,
        Vec::<String>::new(),
        "nothing before the first cursor"
    );

    // Writes to one file, several times: one change. A new file written: its creation.
    write_file(&m.dir, "d/a.txt", "edited\n");
    write_file(&m.dir, "d/a.txt", "edited again\n");
    write_file(&m.dir, "n.txt", "n\n");
    std::fs::remove_file(m.dir.join("top.txt")).unwrap();
    std::fs::rename(m.dir.join("n.txt"), m.dir.join("d/n.txt")).unwrap();
    let (changes, c1) = once(&m, &["--since", &c0]);
    assert_eq!(
        changes,
        lines(&[
            "modified d/a.txt",
            "created n.txt",
            "removed top.txt",
            "removed n.txt",
            "created d/n.txt",
        ])
    );
    // Asked again from the same cursor: the same; from the new one: nothing.
    assert_eq!(once(&m, &["--since", &c0]).0, changes);
    assert_eq!(once(&m, &["--since", &c1]).0, Vec::<String>::new());

    // A write after a cursor was handed out is a change again.
    write_file(&m.dir, "d/a.txt", "edited a third time\n");
    let (changes, c2) = once(&m, &["--since", &c1]);
    assert_eq!(changes, lines(&["modified d/a.txt"]));

    // An update, clean: every path it changed, and the local changes it reverted (the
    // untracked file stays, as hg's update -C keeps it).
    let out = m.revfs(&["-R", m.dir.to_str().unwrap(), "update", "-C", "-r", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (changes, _) = once(&m, &["--since", &c2]);
    for line in [
        "modified d/a.txt",
        "removed d/b.txt",
        "created e/new.txt",
        "created top.txt",
    ] {
        assert!(
            changes.iter().any(|l| l == line),
            "{line:?} missing from {changes:?}"
        );
    }
    assert!(
        !changes.iter().any(|l| l.ends_with(" d/n.txt")),
        "{changes:?}"
    );

    // Patterns keep the changes of their files; the cursor still moves past the others.
    let (changes, _) = once(&m, &["--since", &c2, "path:e"]);
    assert_eq!(changes, lines(&["created e/new.txt", "created e"]));
}

#[test]
fn a_cursor_given_back_after_a_remount_misses_nothing_and_repeats_nothing() {
    let tmp = scratch_dir();
    let repo = repo(tmp.path());
    let m = Mount::at_with_config(&repo, "0", "");
    let (_, c0) = once(&m, &[]);
    write_file(&m.dir, "before.txt", "1\n");
    let (_, c1) = once(&m, &["--since", &c0]);
    write_file(&m.dir, "between.txt", "2\n");
    m.unmount();
    m.remount(&repo, None);
    write_file(&m.dir, "after.txt", "3\n");
    let (changes, _) = once(&m, &["--since", &c1]);
    assert_eq!(
        changes,
        lines(&["created between.txt", "created after.txt"])
    );
    let (changes, _) = once(&m, &["--since", &c0]);
    assert_eq!(
        changes,
        lines(&[
            "created before.txt",
            "created between.txt",
            "created after.txt"
        ])
    );
}

#[test]
fn after_a_killed_daemon_a_cursor_misses_nothing() {
    let tmp = scratch_dir();
    let repo = repo(tmp.path());
    let m = Mount::at_with_config(&repo, "0", "");
    let (_, c0) = once(&m, &[]);
    // Changes the daemon holds in memory when it is killed (no tool asked since).
    write_file(&m.dir, "made.txt", "1\n");
    write_file(&m.dir, "d/a.txt", "edited\n");
    m.kill_daemon();
    m.unmount();
    m.remount(&repo, None);
    let (changes, _) = once(&m, &["--since", &c0]);
    for path in ["made.txt", "d/a.txt"] {
        assert!(
            changes.iter().any(|l| l.ends_with(&format!(" {path}"))),
            "{path} missing from {changes:?}"
        );
    }
}

#[test]
fn revfs_watch_json_gives_each_change_its_cursor_and_a_foreign_cursor_is_fresh() {
    let tmp = scratch_dir();
    let repo = repo(tmp.path());
    let m = Mount::at_with_config(&repo, "0", "");
    let (_, c0) = once(&m, &[]);
    write_file(&m.dir, "x\"y.txt", "1\n");
    let root = m.dir.to_str().unwrap();
    let out = m.revfs(&["-R", root, "watch", "--once", "-T", "json", "--since", &c0]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let instance = c0.split(':').next().unwrap();
    let seq: u64 = c0.split(':').nth(1).unwrap().parse().unwrap();
    assert_eq!(
        text,
        format!(
            "{{\"cursor\": \"{instance}:{}\", \"kind\": \"created\", \"path\": \"x\\\"y.txt\"}}\n\
             {{\"cursor\": \"{instance}:{}\"}}\n",
            seq + 1,
            seq + 1
        )
    );
    // A cursor of another feed: fresh, no changes.
    let other = format!("{:016x}:3", u64::from_str_radix(instance, 16).unwrap() ^ 1);
    let out = m.revfs(&[
        "-R", root, "watch", "--once", "-T", "json", "--since", &other,
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "{{\"cursor\": \"{instance}:{}\", \"fresh\": true}}\n",
            seq + 1
        )),
        "{text}"
    );
    // Not a cursor at all: an abort, as hg's errors.
    let out = m.revfs(&["-R", root, "watch", "--once", "--since", "nonsense"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("abort: not a revfs watch cursor"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
