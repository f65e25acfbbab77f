//! Redirections (`revfs redirect`): a directory of the mount bind-mounted from local disk.
//! Status must show its files as `.hgignore` would show them (checked against hg in a clone
//! that ignores the directory), the binds must come back with every mount and go with every
//! unmount, and what is refused must be refused with nothing changed.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_ok, hg_repo, write_file};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(out: Output, what: &str) -> String {
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{what}: {stdout}{stderr}");
    stdout
}

/// `revfs ARGS` in the mount's root.
fn in_mount(m: &Mount, args: &[&str]) -> Output {
    m.revfs_in(&m.dir, args)
}

/// The mountpoints strictly inside `dir`, as the kernel's table has them.
fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|p| p != dir && p.starts_with(dir))
        .collect()
}

fn repo(tmp: &Path) -> PathBuf {
    hg_repo(
        tmp,
        &[
            ("src/a.c", "int a;\n"),
            ("b", "b\n"),
            (".hgignore", "syntax: glob\n*.o\n"),
        ],
    )
}

/// The same changes in a working copy: a modified file, a new one, an ignored one, and in
/// `out/` files, a symbolic link and a subdirectory.
fn change(root: &Path) {
    write_file(root, "src/a.c", "int a = 1;\n");
    write_file(root, "new.txt", "new\n");
    write_file(root, "src/a.o", "obj\n");
    write_file(root, "out/x.txt", "x\n");
    write_file(root, "out/d/y.o", "y\n");
    write_file(root, "out/d/e/z", "z\n");
    std::os::unix::fs::symlink("x.txt", root.join("out/link")).expect("symlink");
}

#[test]
fn a_redirection_is_ignored_by_status_as_hgignore_would_ignore_it_and_survives_a_remount() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = Mount::new(&repo, None);
    assert_eq!(
        ok(in_mount(&m, &["redirect", "add", "out"]), "redirect add"),
        ""
    );
    change(&m.dir);
    // Its files are on local disk, not in the mount.
    let dev = |p: &Path| std::fs::metadata(p).expect("stat").dev();
    assert_ne!(dev(&m.dir.join("out/x.txt")), dev(&m.dir));
    assert_eq!(dev(&m.dir.join("out/x.txt")), dev(&m.state_dir()));

    // hg in a clone, with `out` ignored by an ignore file of its configuration.
    let clone = tmp.path().join("clone");
    hg_ok(tmp.path(), &["clone", "-q", "repo", "clone"]);
    change(&clone);
    let ignore = tmp.path().join("ignore-out");
    std::fs::write(&ignore, "syntax: regexp\n^out/\n").unwrap();
    let ui_ignore = format!("ui.ignore.redirect={}", ignore.display());
    let expected_all = hg_ok(&clone, &["status", "-A", "--config", &ui_ignore]);
    let expected_ignored = hg_ok(&clone, &["status", "-i", "--config", &ui_ignore]);
    let expected = hg_ok(&clone, &["status", "--config", &ui_ignore]);
    assert!(
        expected_ignored.contains("I out/d/e/z\n") && expected_ignored.contains("I out/link\n"),
        "{expected_ignored}"
    );
    let check = |when: &str| {
        for (args, want) in [
            (&["status", "-A"][..], &expected_all),
            (&["status", "-i"][..], &expected_ignored),
            (&["status"][..], &expected),
        ] {
            assert_eq!(
                &ok(in_mount(&m, args), "revfs status"),
                want,
                "revfs {args:?} {when}"
            );
            assert_eq!(
                &hg_ok(&m.dir, args),
                want,
                "hg {args:?} in the mount {when}"
            );
        }
    };
    check("after the redirection was made");

    let state = m.state_dir();
    let listed = ok(in_mount(&m, &["redirect", "list"]), "redirect list");
    let source = format!("{}/redirections/", state.display());
    assert!(
        listed.starts_with(&format!("out  bound  {source}")) && listed.lines().count() == 1,
        "{listed}"
    );
    let list = ok(m.revfs(&["list"]), "revfs list");
    let row = format!("{}  {}  ", m.dir.display(), repo.display());
    let at = list.find(&row).expect("the mount");
    let rest = &list[at..];
    let second = rest.lines().nth(1);
    assert_eq!(second, Some("  redirection out"), "{list}");

    // Unmounted: the bind goes with the mount. Mounted again: it is back, with its files.
    m.unmount();
    assert_eq!(mounts_below(&m.dir), Vec::<PathBuf>::new());
    assert!(!m.dir.join("out").exists());
    // Working copies kept are listed after the mounts (other tests' mounts among them).
    let list = ok(m.revfs(&["list"]), "revfs list");
    let kept = format!("{}  {}  ", m.dir.display(), repo.display());
    let at = list.find(&kept).expect("the working copy kept");
    assert!(
        list[at..].contains("(not mounted; 2 uncommitted changes)\n  redirection out\n"),
        "{list}"
    );
    m.remount(&repo, None);
    assert_eq!(mounts_below(&m.dir), [m.dir.join("out")]);
    assert_eq!(
        std::fs::read_to_string(m.dir.join("out/d/e/z")).unwrap(),
        "z\n"
    );
    check("after a remount");

    // hg's purge of everything untracked empties the redirection as it empties an ignored
    // directory of a clone: the same files left, no warning (the redirection's own
    // directory stays, a mountpoint, empty).
    let purge = |dir: &Path, extra: &[&str]| {
        let mut args = vec!["purge", "--all", "--config", "extensions.purge="];
        args.extend_from_slice(extra);
        let out = hg_cmd(dir, &args);
        assert!(
            out.status.success(),
            "hg purge in {}: {:?}",
            dir.display(),
            text(&out)
        );
        text(&out)
    };
    assert_eq!(
        purge(&clone, &["--config", &ui_ignore]),
        (String::new(), String::new())
    );
    assert_eq!(purge(&m.dir, &[]), (String::new(), String::new()));
    assert_eq!(files_in(&m.dir), files_in(&clone));
    assert_eq!(std::fs::read_dir(m.dir.join("out")).unwrap().count(), 0);
    assert!(!clone.join("out").exists());
}

/// The files and symbolic links under `root` (outside `.hg`), relative, sorted.
fn files_in(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                if e.file_name() != ".hg" {
                    stack.push(e.path());
                }
            } else {
                out.push(e.path().strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_redirection_is_refused_where_it_would_hide_or_lose_something_and_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = Mount::new(&repo, None);
    ok(in_mount(&m, &["redirect", "add", "out"]), "redirect add");
    write_file(&m.dir, "junk/f", "f\n");
    ok(hg_cmd(&m.dir, &["rm", "-q", "b"]), "hg rm");
    let refused = |args: &[&str], cwd: &Path, want: &str| {
        let out = m.revfs_in(cwd, args);
        let (stdout, stderr) = text(&out);
        assert_eq!(
            (out.status.code(), stdout.as_str(), stderr.as_str()),
            (Some(255), "", want),
            "revfs {args:?}"
        );
    };
    let root = m.dir.clone();
    refused(
        &["redirect", "add", "src"],
        &root,
        "abort: src holds tracked files: a redirection would hide them\n",
    );
    refused(
        &["redirect", "add", "a.c"],
        &root.join("src"),
        "abort: src/a.c is tracked: a redirection would hide it\n",
    );
    // A removed file is still hg's: an update or a revert brings it back.
    refused(
        &["redirect", "add", "b"],
        &root,
        "abort: b is tracked: a redirection would hide it\n",
    );
    refused(
        &["redirect", "add", "src/a.c/x"],
        &root,
        "abort: src/a.c/x: a file (src/a.c) is in the way\n",
    );
    // A link on the way could send the bind outside the mount.
    std::os::unix::fs::symlink(tmp.path(), m.dir.join("lnk")).unwrap();
    refused(
        &["redirect", "add", "lnk"],
        &root,
        "abort: lnk: a symbolic link (lnk) is in the way\n",
    );
    // hg's path auditor stops this one in the command; the daemon refuses it too, asked
    // directly.
    refused(
        &["redirect", "add", "lnk/x"],
        &root,
        "abort: path 'lnk/x' traverses symbolic link 'lnk'\n",
    );
    assert_eq!(
        m.control(r#"{"cmd":"redirect","op":{"op":"add","path":[108,110,107,47,120]}}"#),
        "{\"reply\":\"error\",\"message\":\"lnk/x: a symbolic link (lnk) is in the way\"}\n"
    );
    assert!(!tmp.path().join("x").exists());
    std::fs::remove_file(m.dir.join("lnk")).unwrap();
    refused(
        &["redirect", "add", "junk"],
        &root,
        "abort: junk is not empty: move its files away first (a redirection would hide them)\n",
    );
    refused(
        &["redirect", "add", "out/sub"],
        &root,
        "abort: out/sub overlaps the redirection out\n",
    );
    refused(
        &["redirect", "add", "out"],
        &root,
        "abort: out is already a redirection\n",
    );
    refused(
        &["redirect", "add", ".hg"],
        &root,
        // hg's path auditor's words.
        "abort: path contains illegal component: .hg\n",
    );
    refused(
        &["redirect", "add", ".."],
        &root,
        &format!("abort: .. not under root '{}'\n", root.display()),
    );
    refused(
        &["redirect", "remove", "junk"],
        &root,
        "abort: junk is not a redirection\n",
    );
    // Its files cannot be tracked: they never reach the daemon.
    write_file(&m.dir, "out/f", "f\n");
    refused(
        &["add", "out/f"],
        &root,
        "abort: out/f is in the redirection out: revfs does not track what is there\n",
    );
    let out = hg_cmd(&m.dir, &["add", "out/f"]);
    assert_eq!(
        (out.status.code(), text(&out).1),
        (
            Some(255),
            "abort: revfs: out/f is in the redirection out: revfs does not track what is there\n"
                .to_owned()
        )
    );
    let out = hg_cmd(&m.dir, &["copy", "src/a.c", "out/a.c"]);
    assert_eq!(out.status.code(), Some(255), "{:?}", text(&out));
    // Nothing changed: the one redirection, the same status.
    assert_eq!(
        ok(in_mount(&m, &["redirect", "list", "-T", "json"]), "list")
            .matches("\"path\"")
            .count(),
        1
    );
    assert_eq!(
        ok(in_mount(&m, &["status"]), "status"),
        "R b\n? junk/f\n",
        "the status after the refusals"
    );
    assert_eq!(
        std::fs::read_to_string(m.dir.join("junk/f")).unwrap(),
        "f\n"
    );
    assert_eq!(mounts_below(&m.dir), [m.dir.join("out")]);

    // A revision that tracks files there is not checked out: they would land under the bind.
    write_file(&repo, "out/gen.c", "gen\n");
    hg_ok(&repo, &["commit", "-qAm", "generated"]);
    let tip = hg_ok(&repo, &["log", "-r", "tip", "-T", "{node|short}"]);
    refused(
        &["update", "-C", "tip"],
        &root,
        &format!("abort: revision {tip} tracks out/gen.c, in the redirection out (remove it first: revfs redirect remove out)\n"),
    );
    let out = hg_cmd(&m.dir, &["update", "-C", "tip"]);
    assert_eq!(out.status.code(), Some(255), "{:?}", text(&out));
    assert!(
        text(&out)
            .1
            .contains("tracks out/gen.c, in the redirection out"),
        "{:?}",
        text(&out)
    );
    assert_eq!(hg_ok(&m.dir, &["id", "-n"]), "0+\n");
}

#[test]
fn unmount_waits_for_a_busy_redirection_and_discard_removes_it_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = Mount::new(&repo, None);
    ok(
        in_mount(&m, &["redirect", "add", "out", "cache/deep"]),
        "redirect add",
    );
    write_file(&m.dir, "out/f", "f\n");
    write_file(&m.dir, "cache/deep/g", "g\n");
    let state = m.state_dir();
    let sources: Vec<PathBuf> = std::fs::read_dir(state.join("redirections"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(sources.len(), 2);

    // Removed: refused while it holds files, then gone with them.
    let out = in_mount(&m, &["redirect", "remove", "cache/deep"]);
    assert_eq!(
        (out.status.code(), text(&out).1),
        (
            Some(255),
            "abort: the redirection cache/deep is not empty (remove it with what it holds: --force)\n"
                .to_owned()
        )
    );
    ok(
        in_mount(&m, &["redirect", "remove", "--force", "cache/deep"]),
        "remove",
    );
    assert!(!m.dir.join("cache/deep").exists());
    assert_eq!(mounts_below(&m.dir), [m.dir.join("out")]);
    assert_eq!(
        std::fs::read_dir(state.join("redirections"))
            .unwrap()
            .count(),
        1
    );

    // A file open in a redirection keeps the mount, as one open in the mount would.
    let held = std::fs::File::open(m.dir.join("out/f")).unwrap();
    let out = m.revfs(&["unmount", &m.dir.display().to_string()]);
    assert_eq!(
        (out.status.code(), text(&out).1),
        (
            Some(255),
            format!(
                "abort: {}/out is busy: a process still has files open in it (close them, or use --force)\n",
                m.dir.display()
            )
        )
    );
    assert_eq!(mounts_below(&m.dir), [m.dir.join("out")]);
    assert_eq!(std::fs::read_to_string(m.dir.join("out/f")).unwrap(), "f\n");
    drop(held);

    // A daemon killed: the unmount takes its binds along.
    m.kill_daemon();
    m.unmount();
    assert_eq!(mounts_below(&m.dir), Vec::<PathBuf>::new());

    let out = m.revfs(&["discard", "--force", &m.dir.display().to_string()]);
    let stdout = ok(out, "discard");
    assert!(
        stdout.ends_with("removed its redirection out and the 1 file in it\n"),
        "{stdout}"
    );
    assert!(!state.exists());
    // (Other tests' mounts may be listed.)
    let list = ok(m.revfs(&["list"]), "list");
    assert!(!list.contains(&m.dir.display().to_string()), "{list}");
}
