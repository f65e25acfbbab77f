//! Working copies of a server's repository (`revfs clone`), for the tests of issue 52 and
//! of every Mercurial release: a history with what a bundle must carry, served by Debian's
//! `hg serve` with Mercurial's bundled remotefilelog in server mode, and a day of hg's work
//! in a mount of its clone, compared with the same day in a full clone.

use crate::mount::Mount;
use std::path::{Path, PathBuf};

fn hg_ok(dir: &Path, args: &[&str]) -> String {
    hg_with(Path::new("hg"), dir, args)
}

/// `hg ARGS` in `dir` with the hg program `hg`, which must succeed; its output.
pub fn hg_with(hg: &Path, dir: &Path, args: &[&str]) -> String {
    let mut cmd = if hg == Path::new("hg") {
        crate::chg::hg_command(dir, args)
    } else {
        let mut cmd = std::process::Command::new(hg);
        crate::hg_env(cmd.args(args).current_dir(dir));
        cmd
    };
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{} {args:?} in {}: {out:?}",
        hg.display(),
        dir.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A history with what a bundle must carry: edits, a rename, a merge, a named branch, a
/// binary file, a text that starts like copy metadata, a file over 128 KiB (a split
/// revlog), an exec bit, a symlink, a tag.
pub fn build_history(t: &Path) -> PathBuf {
    hg_ok(t, &["init", "src"]);
    let src = t.join("src");
    let w = |p: &str, c: &[u8]| {
        let p = src.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, c).unwrap();
    };
    w("a", b"a1\n");
    w("dir/b", b"b1\n");
    w("dir/sub/c", b"c1\n");
    hg_ok(&src, &["commit", "-qA", "-m", "one", "-d", "0 0"]);
    w("a", b"a1\na2\n");
    hg_ok(&src, &["mv", "dir/b", "renamed"]);
    w("meta", b"\x01\nnot metadata\n\x01\nbody\n");
    w("bin", &[0, 1, 2, 255, 0, 10]);
    let big: Vec<u8> = (0..40_000u32)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect();
    w("big", &big);
    hg_ok(&src, &["commit", "-qA", "-m", "two", "-d", "1 0"]);
    hg_ok(&src, &["branch", "-q", "stable"]);
    w("dir/sub/c", b"c1\nc-stable\n");
    std::os::unix::fs::symlink("a", src.join("link")).unwrap();
    hg_ok(&src, &["commit", "-qA", "-m", "stable", "-d", "2 0"]);
    hg_ok(&src, &["update", "-q", "default"]);
    w("a", b"a0\na1\na2\n");
    let mut big2 = big.clone();
    big2.extend_from_slice(b"more\n");
    w("big", &big2);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(src.join("meta"), std::fs::Permissions::from_mode(0o755)).unwrap();
    hg_ok(&src, &["commit", "-q", "-m", "three", "-d", "3 0"]);
    hg_ok(&src, &["merge", "-q", "stable"]);
    hg_ok(&src, &["commit", "-q", "-m", "merge", "-d", "4 0"]);
    hg_ok(&src, &["tag", "-d", "5 0", "v1"]);
    src
}

/// The server's hgrc: Mercurial's bundled remotefilelog in server mode, nothing of revfs.
pub fn serve_files(src: &Path) {
    let rc = src.join(".hg/hgrc");
    let mut text = std::fs::read_to_string(&rc).unwrap_or_default();
    text.push_str("[extensions]\nremotefilelog =\n[remotefilelog]\nserver = True\n");
    std::fs::write(rc, text).unwrap();
}

/// `revfs clone URL` of a server onto a fresh mount (with this revfs configuration), the
/// repository at `t/shallow`.
pub fn clone_mounted(url: &str, t: &Path, config: &str) -> (Mount, PathBuf) {
    clone_mounted_for(url, t, config, Path::new("hg"))
}

/// [`clone_mounted`] by a user whose `PATH` finds the hg program `hg` first (which must
/// read the repository the clone makes).
pub fn clone_mounted_for(url: &str, t: &Path, config: &str, hg: &Path) -> (Mount, PathBuf) {
    let m = Mount::empty(config);
    let repo = t.join("shallow");
    let args = [
        "clone",
        url,
        &m.dir.display().to_string(),
        "--repo",
        repo.to_str().unwrap(),
    ];
    let out = match hg.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => m.revfs_with_path_first(dir, &args),
        None => m.revfs(&args),
    };
    assert!(out.status.success(), "{out:?}");
    (m, repo)
}

/// `hg serve` serves with remotefilelog, and its clone `theirs`, which a full clone works
/// against. Returns `src`.
pub fn two_servers(t: &Path) -> PathBuf {
    let src = build_history(t);
    serve_files(&src);
    hg_ok(t, &["clone", "-q", "-U", src.to_str().unwrap(), "theirs"]);
    for s in [&src, &t.join("theirs")] {
        let rc = s.join(".hg/hgrc");
        let mut text = std::fs::read_to_string(&rc).unwrap_or_default();
        text.push_str("\n[web]\npush_ssl = False\nallow-push = *\n");
        std::fs::write(rc, text).unwrap();
    }
    src
}

/// A day of hg's work with the hg program `hg` (its own bundled remotefilelog client in the
/// mount): commits, a rename, a push, a pull of someone else's change, a rebase and a push
/// again, in a mount of a `revfs clone` of `hg serve` and in a full clone of an identical
/// server. The same output, the same history on both servers (both verify), the same tree,
/// and `revfs update` to hg's revisions and back.
pub fn a_day_of_hg_in_a_clones_mount(hg: &Path) {
    let tmp = crate::scratch_dir();
    let t = tmp.path();
    // Two identical servers: one revfs works against, one a full clone works against.
    let src = two_servers(t);
    hg_ok(&t.join("theirs"), &["update", "-q", "tip"]);
    let served = crate::served::Served::start(&src, t);
    // The full clone over HTTP too: its repository is in the formats `hg` makes (a pure
    // Python release has no zstd, which Debian's hg gives the servers).
    let logs = t.join("theirs-logs");
    std::fs::create_dir(&logs).unwrap();
    let theirs = crate::served::Served::start(&t.join("theirs"), &logs);
    hg_with(hg, t, &["clone", "-q", &theirs.url(), "full"]);
    let full = t.join("full");
    let (m, _) = clone_mounted_for(&served.url(), t, "", hg);
    let rebase = "extensions.rebase=";

    // The same day of work in both.
    for wc in [&m.dir, &full] {
        let w = |p: &str, c: &str| std::fs::write(wc.join(p), c).unwrap();
        w("a", "a0\na1\na2\nlocal\n");
        w("new", "new file\n");
        hg_with(hg, wc, &["mv", "renamed", "dir/moved"]);
        hg_with(
            hg,
            wc,
            &[
                "commit",
                "-q",
                "-A",
                "-u",
                "u",
                "-d",
                "10 0",
                "-m",
                "local one",
            ],
        );
        hg_with(hg, wc, &["push", "-q"]);
        w("dir/sub/c", "c1\nlocal two\n");
        hg_with(
            hg,
            wc,
            &["commit", "-q", "-u", "u", "-d", "11 0", "-m", "local two"],
        );
    }
    // Someone else pushes to each server meanwhile (the same change).
    for s in [&src, &t.join("theirs")] {
        hg_ok(s, &["update", "-q", "tip"]);
        std::fs::write(s.join("bin"), [9u8, 9, 0, 9]).unwrap();
        hg_ok(
            s,
            &["commit", "-q", "-u", "o", "-d", "12 0", "-m", "theirs"],
        );
    }
    for wc in [&m.dir, &full] {
        hg_with(hg, wc, &["pull", "-q"]);
        hg_with(
            hg,
            wc,
            &["--config", rebase, "rebase", "-q", "-s", ".", "-d", "tip"],
        );
        hg_with(hg, wc, &["push", "-q"]);
    }
    for args in [
        &[
            "log",
            "-G",
            "-p",
            "--git",
            "-T",
            "{rev}:{node|short} {phase} {desc}\n",
        ][..],
        &["annotate", "-c", "a", "dir/sub/c", "new", "bin"],
        &["grep", "-n", "a1"],
        &["status", "--all"],
        &["files"],
        &["verify", "-q"],
    ] {
        assert_eq!(
            hg_with(hg, &m.dir, args),
            hg_with(hg, &full, args),
            "hg {args:?}"
        );
    }
    // The servers hold the same history, and both verify.
    let all = ["log", "--debug", "-p", "--git", "-r", "all()"];
    assert_eq!(hg_ok(&src, &all), hg_ok(&t.join("theirs"), &all));
    hg_ok(&src, &["verify", "-q"]);
    // The tree through the mount is the full clone's, and revfs agrees with hg.
    for f in hg_with(hg, &full, &["files"]).lines() {
        assert_eq!(
            std::fs::read(m.dir.join(f)).unwrap(),
            std::fs::read(full.join(f)).unwrap(),
            "{f}"
        );
    }
    let st = m.revfs_in(&m.dir, &["status"]);
    assert_eq!(String::from_utf8_lossy(&st.stdout), "", "{st:?}");
    // hg moves the working copy (its client fetches what the old revision needs), and back.
    for rev in ["0", "tip"] {
        for wc in [&m.dir, &full] {
            hg_with(hg, wc, &["update", "-q", "-r", rev]);
        }
        for args in [&["status", "--all"][..], &["log", "-r", ".", "-p", "--git"]] {
            assert_eq!(
                hg_with(hg, &m.dir, args),
                hg_with(hg, &full, args),
                "after update -r {rev}: hg {args:?}"
            );
        }
    }
    // revfs itself moves the working copy to revisions made by hg here, and back.
    for rev in ["0", "tip"] {
        let out = m.revfs_in(&m.dir, &["update", "-r", rev]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(hg_with(hg, &m.dir, &["status", "--all"]), {
            hg_with(hg, &full, &["update", "-q", "-r", rev]);
            hg_with(hg, &full, &["status", "--all"])
        });
    }
    drop(served);
    drop(theirs);
}
