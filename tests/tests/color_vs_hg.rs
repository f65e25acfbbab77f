//! Colour against real hg: the same edits on a revfs mount and on an hg checkout of the same
//! revision, then `status` and `diff` with `--color=always` (hg in `color.mode=ansi`) must
//! print the same bytes, escapes included; and hg's rules for when to colour (`--color`
//! values, `ui.color`, `HGPLAIN`, a terminal or not, `TERM=dumb`) and `[color]` styles give
//! the same decisions.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_env, revfs, revfs_bin, scratch_dir};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A repository made by hg with text that exercises every diff label: tabs, trailing
/// whitespace, CRLF, an escape sequence in the content, a binary file, an executable, a
/// symlink, nested directories.
fn make_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    assert!(hg_cmd(dir, &["init", "repo"]).status.success());
    let files: &[(&str, &[u8])] = &[
        ("a.txt", b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"),
        ("tabs.c", b"int\tx;\n\tint y;  \nreturn 0;\n"),
        ("crlf.txt", b"line\r\nline2\r\n"),
        ("esc.txt", b"has \x1b[0m escape\n"),
        ("bin.dat", b"\x00\x01binary\x02"),
        ("run.sh", b"#!/bin/sh\necho hi\n"),
        ("gone.txt", b"soon missing\n"),
        ("removed.txt", b"soon removed\n"),
        ("src.txt", b"renamed away\nsecond line\n"),
        ("copysrc.txt", b"copied\n"),
        ("dir/sub/deep.txt", b"deep\nfile\n"),
        ("noeol.txt", b"no newline at the end"),
        (".hgignore", b"syntax: glob\n*.o\n"),
    ];
    for (p, data) in files {
        let p = repo.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
    }
    std::fs::set_permissions(repo.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", repo.join("link")).unwrap();
    let out = hg_cmd(&repo, &["commit", "-qAm", "base", "-d", "0 0"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    repo
}

/// The same edits in `root`; `track` runs hg's bookkeeping commands there (hg or revfs).
fn edit(root: &Path, track: &dyn Fn(&[&str])) {
    let w = |p: &str, data: &[u8]| std::fs::write(root.join(p), data).unwrap();
    w(
        "a.txt",
        b"one\ntwo  \n\tthree\tfour \nfive\nsix\nseven\nEIGHT\t\nnine\r\n",
    );
    w("tabs.c", b"int\tx;\n\t\tint y;\nreturn 1;  \t\n");
    std::fs::write(root.join("crlf.txt"), b"line\r\nline2 \r\nline3\r\n").unwrap();
    w("esc.txt", b"has \x1b[0m escape\nmore \x1b[0m\x1b[0m x\n");
    w("noeol.txt", b"still no newline, changed");
    w("dir/sub/deep.txt", b"deep\nfile\nadded line\n");
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::remove_file(root.join("link")).unwrap();
    std::os::unix::fs::symlink("tabs.c", root.join("link")).unwrap();
    std::fs::remove_file(root.join("gone.txt")).unwrap();
    w("new.txt", b"brand new\n");
    w("new file with space.txt", b"spaced\n");
    w("unknown.txt", b"not tracked\n");
    w("build.o", b"ignored\n");
    track(&["remove", "removed.txt"]);
    track(&["remove", "bin.dat"]);
    track(&["add", "new.txt", "new file with space.txt"]);
    track(&["rename", "src.txt", "moved.txt"]);
    track(&["copy", "copysrc.txt", "dir/copied.txt"]);
}

/// A command with the test environment but without `HGPLAIN` (it turns colour off).
fn coloured(cmd: &mut Command) -> &mut Command {
    hg_env(cmd).env_remove("HGPLAIN").env("TERM", "xterm")
}

fn ours(dir: &Path, args: &[&str]) -> Output {
    coloured(Command::new(revfs_bin()).args(args).current_dir(dir))
        .output()
        .expect("spawn revfs")
}

fn theirs(dir: &Path, args: &[&str]) -> Output {
    coloured(
        Command::new("hg")
            .args(["--config", "color.mode=ansi"])
            .args(args)
            .current_dir(dir),
    )
    .output()
    .expect("spawn hg")
}

/// The `+++`/`---` dates of plain diffs (the working copy's is the clock's).
fn undate(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, line) in b.split(|&c| c == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        let plain: Vec<u8> = line.to_vec();
        let text_start = plain.windows(4).position(|w| w == b"+++ " || w == b"--- ");
        match (text_start, plain.iter().position(|&c| c == b'\t')) {
            (Some(_), Some(tab)) if !plain.ends_with(b"\t") => {
                out.extend_from_slice(&plain[..tab]);
                out.extend_from_slice(b"\tDATE");
                if let Some(esc) = plain[tab..].iter().position(|&c| c == 0x1b) {
                    out.extend_from_slice(&plain[tab + esc..]);
                }
            }
            _ => out.extend_from_slice(line),
        }
    }
    out
}

fn assert_same(what: &str, a: &Output, b: &Output, dates: bool) {
    let (mut ao, mut bo) = (a.stdout.clone(), b.stdout.clone());
    if dates {
        ao = undate(&ao);
        bo = undate(&bo);
    }
    assert_eq!(
        a.status.code(),
        b.status.code(),
        "{what}: exit codes\nrevfs stderr: {}\nhg stderr: {}",
        s(&a.stderr),
        s(&b.stderr)
    );
    assert!(
        ao == bo,
        "{what}: stdout differs\nrevfs:\n{:?}\nhg:\n{:?}",
        s(&ao),
        s(&bo)
    );
    assert_eq!(s(&a.stderr), s(&b.stderr), "{what}: stderr differs");
}

struct Setup {
    _tmp: tempfile::TempDir,
    wc: PathBuf,
    mount: Mount,
}

fn setup() -> Setup {
    let tmp = scratch_dir();
    let repo = make_repo(tmp.path());
    let wc = tmp.path().join("wc");
    let out = hg_cmd(
        tmp.path(),
        &["clone", "-q", &repo.display().to_string(), "wc"],
    );
    assert!(out.status.success(), "{}", s(&out.stderr));
    let mount = Mount::new(&repo, Some("tip"));
    edit(&mount.dir, &|args| {
        let out = revfs(&mount.dir, args);
        assert!(out.status.success(), "revfs {args:?}: {}", s(&out.stderr));
    });
    edit(&wc, &|args| {
        let out = hg_cmd(&wc, args);
        assert!(out.status.success(), "hg {args:?}: {}", s(&out.stderr));
    });
    Setup {
        _tmp: tmp,
        wc,
        mount,
    }
}

#[test]
fn status_and_diff_are_coloured_as_hg_colours_them() {
    let t = setup();
    let (m, wc) = (t.mount.dir.as_path(), t.wc.as_path());
    // Plain status first: the two trees hold the same changes.
    let plain = (
        revfs(m, &["status", "-A", "-C"]),
        hg_cmd(wc, &["status", "-A", "-C"]),
    );
    assert_same("status -A -C (plain)", &plain.0, &plain.1, false);
    for letter in ["M ", "A ", "R ", "! ", "? ", "I ", "C "] {
        assert!(
            s(&plain.1.stdout).contains(letter),
            "the edits should give every status letter ({letter:?}):\n{}",
            s(&plain.1.stdout)
        );
    }
    let runs: &[(&[&str], bool)] = &[
        (&["status"], false),
        (&["status", "-C"], false),
        (&["status", "-A", "-C"], false),
        (&["status", "-n"], false),
        (&["status", "-0", "-A", "-C"], false),
        (&["status", "-mardui"], false),
        (&["status", "-T", "json", "-C"], false),
        (&["diff"], true),
        (&["diff", "--git"], false),
        (&["diff", "a.txt", "tabs.c"], true),
    ];
    for &(args, dates) in runs {
        for color in [
            "--color=always",
            "--color=yes",
            "--color=debug",
            "--color=never",
        ] {
            let mut full = vec![color];
            full.extend_from_slice(args);
            let what = format!("{full:?}");
            let (a, b) = (ours(m, &full), theirs(wc, &full));
            assert_same(&what, &a, &b, dates);
            if color == "--color=always" && !args.contains(&"json") {
                assert!(a.stdout.contains(&0x1b), "{what}: no colour at all");
            }
        }
    }
    // From a subdirectory (paths relative to it).
    for args in [
        &["--color=always", "status"][..],
        &["--color=always", "diff", "--git"],
    ] {
        let (a, b) = (ours(&m.join("dir"), args), theirs(&wc.join("dir"), args));
        assert_same(&format!("{args:?} in dir/"), &a, &b, false);
    }
}

#[test]
fn when_to_colour_follows_hg() {
    let t = setup();
    let (m, wc) = (t.mount.dir.as_path(), t.wc.as_path());
    let rc = t.wc.parent().unwrap().join("hgrc");
    let with_rc = |text: &str, args: &[&str]| -> (Output, Output) {
        std::fs::write(&rc, text).unwrap();
        let run = |cmd: &mut Command| cmd.env("HGRCPATH", &rc).output().expect("spawn");
        (
            run(coloured(
                Command::new(revfs_bin()).args(args).current_dir(m),
            )),
            run(coloured(
                Command::new("hg")
                    .args(if text.contains("mode =") {
                        &[][..]
                    } else {
                        &["--config", "color.mode=ansi"][..]
                    })
                    .args(args)
                    .current_dir(wc),
            )),
        )
    };
    // Output to a pipe: auto means no colour; ui.color=always forces it, ui.color=yes is
    // only auto; --color beats the configuration; unknown values mean no colour.
    for (rc_text, args, coloured_expected) in [
        ("", &["status"][..], false),
        ("", &["--color=auto", "status"], false),
        ("[ui]\ncolor = always\n", &["status"], true),
        ("[ui]\ncolor = yes\n", &["status"], false),
        ("[ui]\ncolor = always\n", &["--color=never", "status"], false),
        ("[ui]\ncolor = never\n", &["--color=on", "status"], true),
        ("", &["--color=bogus", "status"], false),
        ("[ui]\nformatted = yes\n", &["diff", "--git"], true),
        (
            "[color]\nstatus.modified = red underline bogus\nstatus.added = cyan_background\ndiff.inserted = yellow,bold\n",
            &["--color=always", "status"],
            true,
        ),
        (
            "[color]\nstatus.modified = red underline bogus\ndiff.inserted = yellow,bold\ndiff.tab = inverse\n",
            &["--color=always", "diff", "--git"],
            true,
        ),
        ("[color]\nmode = win32\n", &["--color=always", "status"], false),
        ("[color]\nmode = terminfo\n", &["status"], false),
    ] {
        let (a, b) = with_rc(rc_text, args);
        let what = format!("{args:?} with hgrc {rc_text:?}");
        assert_same(&what, &a, &b, false);
        assert_eq!(a.stdout.contains(&0x1b), coloured_expected, "{what}");
    }
    std::fs::write(&rc, "").unwrap();
    // HGPLAIN turns colour off, even --color=always; HGPLAINEXCEPT=color keeps it.
    for (var, value, expect) in [("HGPLAIN", "1", false), ("HGPLAINEXCEPT", "color", true)] {
        let args = ["--color=always", "status"];
        let run = |cmd: &mut Command| {
            coloured(cmd)
                .env("HGRCPATH", &rc)
                .env(var, value)
                .output()
                .expect("spawn")
        };
        let a = run(Command::new(revfs_bin()).args(args).current_dir(m));
        let b = run(Command::new("hg")
            .args(["--config", "color.mode=ansi"])
            .args(args)
            .current_dir(wc));
        assert_same(&format!("{var}={value}"), &a, &b, false);
        assert_eq!(a.stdout.contains(&0x1b), expect, "{var}={value}");
    }
    // On a terminal (script(1) gives a pseudo-terminal): auto colours, unless TERM=dumb.
    if Command::new("script").arg("--version").output().is_ok() {
        for (term, expect) in [("xterm", true), ("dumb", false)] {
            let run = |prog: String, dir: &Path| {
                coloured(
                    Command::new("script")
                        .args(["-qec", &format!("{prog} status"), "/dev/null"])
                        .current_dir(dir),
                )
                .env("TERM", term)
                .env("HGRCPATH", &rc)
                .stdin(Stdio::null())
                .output()
                .expect("spawn script")
            };
            let a = run(revfs_bin().display().to_string(), m);
            // (hg would page its output on a terminal; revfs has no pager.)
            let b = run("hg --pager=never --config color.mode=ansi".into(), wc);
            assert_same(&format!("a terminal with TERM={term}"), &a, &b, false);
            assert_eq!(a.stdout.contains(&0x1b), expect, "TERM={term}");
        }
    }
}
