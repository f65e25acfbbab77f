//! Real hg inside a mount. The mount's `.hg` is an hg share of the repository whose
//! dirstate is the daemon, through revfs's Mercurial extension: the same edits in a mount
//! and in an hg clone, then the same hg commands in both (read-only ones, and the tracking
//! ones: add, forget, remove, copy, rename, addremove, revert), must print the same bytes
//! and exit alike; then the commands that move the parent (commit, update, merge, rebase,
//! shelve, import, purge...). An hg without the extension refuses the mount; `unshare`
//! stops before it changes anything.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, revfs};
use std::path::{Path, PathBuf};
use std::time::Duration;

const BASE: &[(&str, &str)] = revfs_tests::HG_SIDES_BASE;

/// A repository of two revisions (an executable file and a symlink in the second), an hg
/// clone of it, and a mount of it.
struct Sides {
    _tmp: tempfile::TempDir,
    clone: PathBuf,
    mount: Mount,
    /// Paths each side has its own of (the mount's first), by name: `$NAME` in an
    /// argument of `same` is the side's path, and the side's path in an output is `$NAME`.
    /// `$ROOT` is each side's root.
    named: std::cell::RefCell<Vec<(&'static str, [PathBuf; 2])>>,
}

fn sides() -> Sides {
    let tmp = revfs_tests::scratch_dir();
    let repo = revfs_tests::hg_repo(tmp.path(), BASE);
    use std::os::unix::fs::PermissionsExt;
    let run = std::fs::Permissions::from_mode(0o755);
    std::fs::write(repo.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(repo.join("run.sh"), run).unwrap();
    std::os::unix::fs::symlink("a", repo.join("link")).unwrap();
    std::fs::write(repo.join("a"), "a\na2\n").unwrap();
    let out = hg_cmd(&repo, &["commit", "-qAm", "second", "-d", "1 0"]);
    assert!(out.status.success(), "{out:?}");
    let out = hg_cmd(tmp.path(), &["clone", "-q", "repo", "mnt"]);
    assert!(out.status.success(), "{out:?}");
    // Both sides see the repository's phases alike (a clone makes what it pulls public).
    let out = hg_cmd(&repo, &["phase", "--public", "-r", "all()"]);
    assert!(out.status.success());
    let mount = Mount::new(&repo, None);
    Sides {
        clone: tmp.path().join("mnt"),
        mount,
        _tmp: tmp,
        named: Default::default(),
    }
}

impl Sides {
    /// The same status (with copies), diff, parent, shelves, history and `hg verify` on
    /// both sides, and `revfs status` as hg's.
    fn same_history_and_working_copy(&self) {
        let log = &["log", "-G", "-T", "{rev}:{node} {desc} {files}\\n"][..];
        for args in [
            &["status", "-A", "-C"][..],
            &["diff", "--git"],
            &["id"],
            &["shelve", "-l", "-q"],
            log,
            &["verify", "-q"],
        ] {
            self.same("", args);
        }
        self.revfs_status_is_hgs();
    }

    fn roots(&self) -> [&Path; 2] {
        [&self.mount.dir, &self.clone]
    }

    /// The same shell edit in both trees.
    fn edit(&self, f: impl Fn(&Path)) {
        for root in self.roots() {
            f(root);
        }
    }

    /// `hg ARGS` in both trees (from `cwd` below each root): the mount's output, after
    /// checking that it is the clone's, the tree's path aside.
    fn same(&self, cwd: &str, args: &[&str]) -> (Option<i32>, String, String) {
        let named = self.named.borrow();
        let [ours, theirs] = [0, 1].map(|side| {
            let root = self.roots()[side];
            let mut paths: Vec<(&str, String)> = named
                .iter()
                .map(|(name, p)| (*name, p[side].display().to_string()))
                .collect();
            paths.push(("ROOT", root.display().to_string()));
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    paths.iter().fold(a.to_string(), |a, (name, p)| {
                        a.replace(&format!("${name}"), p)
                    })
                })
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = hg_cmd(&root.join(cwd), &args);
            let n = |b: &[u8]| {
                let mut s = String::from_utf8_lossy(b).into_owned();
                for (name, p) in &paths {
                    let real =
                        std::fs::canonicalize(p).map_or(p.clone(), |r| r.display().to_string());
                    s = s
                        .replace(&real, &format!("${name}"))
                        .replace(p, &format!("${name}"));
                }
                s
            };
            (out.status.code(), n(&out.stdout), n(&out.stderr))
        });
        // A plain diff dates the working side with the current time.
        let clock = |s: &str| -> String {
            s.lines()
                .map(|l| match l.split_once('\t') {
                    Some((h, _)) if l.starts_with("+++ ") => format!("{h}\t$NOW\n"),
                    _ => format!("{l}\n"),
                })
                .collect()
        };
        let (o, t) = if args.first() == Some(&"diff") && !args.contains(&"--git") {
            (clock(&ours.1), clock(&theirs.1))
        } else {
            (ours.1.clone(), theirs.1.clone())
        };
        assert_eq!(
            (ours.0, &o, &ours.2),
            (theirs.0, &t, &theirs.2),
            "hg {args:?} in {cwd:?} (left the mount, right a clone)"
        );
        ours
    }
}

impl Sides {
    /// `same` for each of `steps`, in order, from the root.
    fn same_all(&self, steps: &[&[&str]]) {
        for args in steps {
            self.same("", args);
        }
    }

    /// The two trees are alike, every file's bytes included, and so are the statuses.
    fn tree_and_status_are_the_clones(&self) {
        let tree = |r: &Path| revfs_tests::mount::snapshot(r);
        assert_eq!(tree(&self.mount.dir), tree(&self.clone));
        self.revfs_status_is_hgs();
    }

    /// `revfs status -A` in the mount prints what `hg status -A` prints in the clone.
    fn revfs_status_is_hgs(&self) {
        let ours = revfs(&self.mount.dir, &["status", "-A"]);
        let theirs = hg_cmd(&self.clone, &["status", "-A"]);
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout)
        );
    }

    /// `revfs ARGS` in the mount against `hg ARGS` in the clone: the same output and exit
    /// code, the tree's path aside.
    fn revfs_as_hg(&self, args: &[&str]) {
        let norm = |root: &Path, out: std::process::Output| {
            let root = std::fs::canonicalize(root).unwrap().display().to_string();
            let n = |b: &[u8]| String::from_utf8_lossy(b).replace(&root, "$ROOT");
            (out.status.code(), n(&out.stdout), n(&out.stderr))
        };
        let ours = norm(&self.mount.dir, revfs(&self.mount.dir, args));
        let theirs = norm(&self.clone, hg_cmd(&self.clone, args));
        assert_eq!(ours, theirs, "revfs {args:?} in the mount, hg in a clone");
    }
}

/// Read-only commands, each with the flags users type.
const READS: &[&[&str]] = &[
    &["status"],
    &["status", "-A"],
    &["status", "-C"],
    &["status", "-mardui"],
    &["status", "-c"],
    &["status", "-n"],
    &["status", "-0"],
    &["status", "-T", "json"],
    &["status", "--rev", "0"],
    &["status", "--rev", "0", "--rev", "1"],
    &["status", "d"],
    &["status", "nonexist", "a"],
    &["status", "glob:*.c"],
    &["status", "-i", "build"],
    &["status", "-A", "set:modified()"],
    &["status", "--change", "1"],
    &["status", "-q"],
    &["status", "-t", "u"],
    &["status", "-t", "mardu"],
    &["status", "-C", "--rev", "0"],
    &["status", "-A", "-T", "{status} {path}\\n"],
    &["diff", "-c", "1"],
    &["diff"],
    &["diff", "--git"],
    &["diff", "--stat"],
    &["diff", "-r", "0"],
    &["diff", "a", "d"],
    &["id"],
    &["id", "-n"],
    &["summary"],
    &["parents"],
    &["root"],
    &["files"],
    &["files", "d"],
    &["locate"],
    &["log", "-G", "-T", "{rev} {desc} {files}\\n"],
    &["log", "-r", "."],
    &["annotate", "a"],
    &["annotate", "-r", "0", "a"],
    &["annotate", "-r", "wdir()", "a"],
    &["grep", "a"],
    &["cat", "a"],
    &["cat", "-r", "0", "link"],
    &["verify", "-q"],
    &["branch"],
];

fn all_reads(s: &Sides) {
    for args in READS {
        s.same("", args);
    }
    for args in [
        &["status"][..],
        &["status", "."],
        &["files", "."],
        &["diff", "-g"],
    ] {
        s.same("d", args);
    }
}

#[test]
fn read_only_hg_commands_print_what_they_print_in_a_clone() {
    let s = sides();
    all_reads(&s);
    // Shell edits of every kind: content, a new file, an ignored one, a deleted file, a
    // type change, a mode change, a file in a new directory, a deleted directory's file.
    s.edit(|r| {
        std::fs::write(r.join("a"), "changed\n").unwrap();
        std::fs::write(r.join("n.c"), "new\n").unwrap();
        std::fs::write(r.join("i.o"), "ign\n").unwrap();
        std::fs::create_dir_all(r.join("build")).unwrap();
        std::fs::write(r.join("build/out"), "ign\n").unwrap();
        std::fs::remove_file(r.join("gone")).unwrap();
        std::fs::remove_file(r.join("link")).unwrap();
        std::fs::write(r.join("link"), "now a file\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(r.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::create_dir_all(r.join("new/dir")).unwrap();
        std::fs::write(r.join("new/dir/f"), "f\n").unwrap();
        std::fs::remove_file(r.join("e/x")).unwrap();
    });
    all_reads(&s);
    // Tracking done by revfs in the mount and by hg in the clone.
    for (revfs_args, hg_args) in [
        (&["add", "n.c"][..], &["add", "n.c"][..]),
        (&["copy", "d/f", "d/f2"], &["copy", "d/f", "d/f2"]),
        (&["rename", "d/g", "d/g2"], &["rename", "d/g", "d/g2"]),
        (&["remove", "b.c"], &["remove", "b.c"]),
        (&["forget", "x y"], &["forget", "x y"]),
    ] {
        let ours = revfs(&s.mount.dir, revfs_args);
        let theirs = hg_cmd(&s.clone, hg_args);
        assert_eq!(ours.status.code(), theirs.status.code(), "{revfs_args:?}");
    }
    all_reads(&s);
}

#[test]
fn hg_status_in_a_mount_takes_the_commands_ignore_files_sees_nested_repositories_and_warns_once() {
    let s = sides();
    s.edit(|r| {
        std::fs::create_dir_all(r.join("flow")).unwrap();
        std::fs::write(r.join("flow/junk.o"), "o\n").unwrap();
        std::fs::write(r.join("flow/x.tmp"), "t\n").unwrap();
        std::fs::write(r.join(".hgignore.flow"), "syntax: glob\n*.tmp\n").unwrap();
    });
    // The ignore files of the command's own configuration (--config here), not of the
    // daemon's.
    for args in [
        &["status", "-i", "--config", "ui.ignore=.hgignore.flow"][..],
        &["status", "--config", "ui.ignore=.hgignore.flow"],
        &[
            "status",
            "-A",
            "--config",
            "ui.ignore.x=$ROOT/.hgignore.flow",
        ],
        &["status", "-i"],
        &["status", "-A"],
    ] {
        s.same("", args);
    }
    // So does revfs status (HGRCPATH here).
    let rc = s._tmp.path().join("flow.rc");
    std::fs::write(&rc, "[ui]\nignore = .hgignore.flow\n").unwrap();
    let with_rc = |cmd: &mut std::process::Command| {
        let out = revfs_tests::hg_env(cmd)
            .env("HGRCPATH", &rc)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(
        with_rc(
            std::process::Command::new(revfs_tests::revfs_bin())
                .args(["status", "-A"])
                .current_dir(&s.mount.dir)
        ),
        with_rc(
            std::process::Command::new("hg")
                .args(["status", "-A"])
                .current_dir(&s.clone)
        ),
    );
    // A repository made inside the working copy over tracked files: they are missing
    // whenever unknown files are listed (hg's walk does not enter it); named, hg refuses.
    s.edit(|r| std::fs::create_dir_all(r.join("d/sub/.hg")).unwrap());
    for args in [
        &["status"][..],
        &["status", "-A"],
        &["status", "d"],
        &["status", "d/sub/h"],
        &["addremove", "-n"],
    ] {
        s.same("", args);
    }
    s.revfs_status_is_hgs();
    s.edit(|r| std::fs::remove_dir_all(r.join("d/sub/.hg")).unwrap());
    s.same("", &["status", "-A"]);
    // An unknown syntax: line in .hgignore: hg's warning, once a command.
    s.edit(|r| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(r.join(".hgignore"))
            .unwrap();
        std::io::Write::write_all(&mut f, b"syntax: foo\n").unwrap();
    });
    for args in [
        &["status"][..],
        &["status", "-i"],
        &["revert", "--no-backup", ".hgignore"],
        &["status"],
    ] {
        s.same("", args);
    }
}

#[test]
fn hg_without_the_extension_refuses_the_mount() {
    let s = sides();
    let out = hg_cmd(&s.mount.dir, &["--config", "extensions.revfs=!", "status"]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "abort: repository requires features unknown to this Mercurial: revfs-dirstate-v1\n\
         (see https://mercurial-scm.org/wiki/MissingRequirement for more information)\n"
    );
    // `.hg` is never the working copy's: not in status, not committed, not removable.
    let out = revfs(&s.mount.dir, &["status", "-A", ".hg"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(".hg"),
        "{out:?}"
    );
    assert!(std::fs::remove_file(s.mount.dir.join(".hg")).is_err());
    assert!(std::fs::create_dir(s.mount.dir.join(".hg")).is_err());
    assert!(s.mount.dir.join(".hg/requires").is_file());
}

#[test]
fn the_extension_is_compiled_once_even_where_python_may_not_write_bytecode() {
    // Python compiles an extension without a bytecode cache at every hg command (~10 ms);
    // under PYTHONDONTWRITEBYTECODE it never writes one, so the extension writes its own.
    let s = sides();
    let cache = s.mount.state_dir().join("hgext/revfs/__pycache__");
    let _ = std::fs::remove_dir_all(&cache);
    let run = || {
        let out = revfs_tests::hg_env(
            std::process::Command::new("hg")
                .args(["id", "-r", "."])
                .current_dir(&s.mount.dir)
                .env("PYTHONDONTWRITEBYTECODE", "1"),
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    run();
    let list = |dir: &std::path::Path, ext: &str| {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        v.sort();
        v
    };
    // One bytecode file for each module of the extension's package.
    let modules = list(cache.parent().unwrap(), "py");
    let written = list(&cache, "pyc");
    assert!(modules.len() > 1, "{modules:?}");
    assert_eq!(written.len(), modules.len(), "{written:?} for {modules:?}");
    let modified = |files: &[std::path::PathBuf]| -> Vec<_> {
        files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().modified().unwrap())
            .collect()
    };
    let before = modified(&written);
    run();
    assert_eq!(modified(&written), before, "a valid cache is kept");
}

#[test]
fn hg_unshare_of_a_mount_stops_and_changes_nothing() {
    let s = sides();
    std::fs::write(s.mount.dir.join("a"), "changed\n").unwrap();
    std::fs::write(s.mount.dir.join("n"), "new\n").unwrap();
    let before = (
        revfs(&s.mount.dir, &["status", "-A"]).stdout,
        hg_cmd(&s.mount.dir, &["log", "-T", "{node}\\n"]).stdout,
    );
    // share's unshare would copy the store into the mount's .hg.
    for args in [
        &["unshare"][..],
        &["--config", "extensions.share=", "unshare"],
    ] {
        let out = hg_cmd(&s.mount.dir, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(255), "{args:?}: {err}");
        assert!(err.starts_with("abort: "), "{args:?}: {err}");
        let after = (
            revfs(&s.mount.dir, &["status", "-A"]).stdout,
            hg_cmd(&s.mount.dir, &["log", "-T", "{node}\\n"]).stdout,
        );
        assert_eq!(before, after, "{args:?} changed something");
    }
    assert_eq!(std::fs::read(s.mount.dir.join("a")).unwrap(), b"changed\n");
    assert!(!s.mount.state_dir().join("hg/store").exists());
}

/// The working-copy paths `hg ARGS` (run in the mount under strace) touched, and the
/// directories it listed: every path under the mount's root but `.hg` (the share, off the
/// mount) and the root itself.
fn traced(s: &Sides, args: &[&str]) -> (Vec<String>, Vec<String>) {
    let text = strace_hg(s, &["-y", "-e", "trace=%file,getdents64"], args);
    let root = std::fs::canonicalize(&s.mount.dir)
        .unwrap()
        .display()
        .to_string();
    let (mut touched, mut listed) = (Vec::new(), Vec::new());
    for line in text.lines() {
        // Paths appear quoted ("...") or, for file descriptors, in angle brackets (3</...>).
        for piece in line.split(['"', '<', '>']) {
            let Some(rest) = piece.strip_prefix(&root) else {
                continue;
            };
            let rel = rest.trim_start_matches('/');
            if rel.is_empty() || rel == ".hg" || rel == ".HG" || rel.starts_with(".hg/") {
                continue;
            }
            if line.contains("getdents64(") {
                listed.push(rel.to_owned());
            } else {
                touched.push(rel.to_owned());
            }
        }
    }
    touched.sort();
    touched.dedup();
    (touched, listed)
}

#[test]
fn hg_status_lists_no_directory_and_stats_no_unchanged_file() {
    let s = sides();
    std::fs::write(s.mount.dir.join("a"), "changed\n").unwrap();
    std::fs::write(s.mount.dir.join("d/new"), "new\n").unwrap();
    std::fs::remove_file(s.mount.dir.join("gone")).unwrap();
    for args in [
        &["status"][..],
        &["status", "-A"],
        &["status", "-mardui"],
        &["id"],
        &["summary"],
    ] {
        assert_eq!(traced(&s, args), (vec![], vec![]), "hg {args:?}");
    }
    // purge reads the ignore rules and looks only at the directories where something
    // changed (d, which has a new file).
    assert_eq!(
        traced(&s, &["purge", "--no-confirm", "-p"]),
        (
            vec![".hgignore".to_owned(), "d".to_owned()],
            vec!["d".to_owned(), "d".to_owned()]
        ),
        "hg purge -p"
    );
    // The trace does see the tree: a diff reads the changed file (and only it).
    assert_eq!(
        traced(&s, &["diff", "--git"]),
        (vec!["a".to_owned()], vec![]),
        "hg diff --git"
    );
}

#[test]
fn hg_debugdirstate_in_a_mount_prints_what_a_clone_prints_once_status_saw_every_file() {
    // A clone's dirstate keeps a file's mode, size and time once a status sees the file
    // in an earlier second than its own: the mount's entries are the daemon's, as such.
    let s = sides();
    let settle = || std::thread::sleep(Duration::from_millis(1100));
    settle();
    s.same("", &["status"]);
    s.edit(|r| {
        std::fs::write(r.join("a"), "changed\n").unwrap();
        std::fs::write(r.join("n"), "new\n").unwrap();
    });
    s.same_all(&[&["add", "n"], &["rm", "gone"], &["cp", "d/f", "d/f2"]]);
    settle();
    s.same_all(&[
        &["status"],
        &["debugdirstate", "--nodates"],
        &["debugstate", "--no-dates"],
        &["debugdirstate", "--docket"],
    ]);
}

#[test]
fn hg_tracking_commands_do_in_a_mount_what_they_do_in_a_clone() {
    let s = sides();
    s.edit(|r| {
        std::fs::write(r.join("n"), "n\n").unwrap();
        std::fs::write(r.join("d/o"), "o\n").unwrap();
        std::fs::create_dir_all(r.join("new")).unwrap();
        std::fs::write(r.join("new/f"), "f\n").unwrap();
        std::fs::write(r.join("i.o"), "ignored\n").unwrap();
    });
    let steps: &[&[&str]] = &[
        &["add", "n"],
        &["add", "i.o"],
        &["status"],
        &["add"],
        &["add", "nonexist"],
        &["status", "-C"],
        &["forget", "d/o"],
        &["forget", "a"],
        &["remove", "b.c"],
        &["remove", "--after", "d/g"],
        &["copy", "a", "a2"],
        &["copy", "a", "d/f"],
        &["copy", "--force", "a", "d/f"],
        &["rename", "d/sub/h", "d/h2"],
        &["status", "-C"],
        &["addremove", "-s", "50"],
        &["status", "-C"],
    ];
    s.same_all(steps);
    s.edit(|r| {
        std::fs::remove_file(r.join("e/x")).unwrap();
        std::fs::write(r.join("u"), "u\n").unwrap();
    });
    let steps: &[&[&str]] = &[
        &["addremove", "-n"],
        &["addremove"],
        &["status", "-C"],
        &["diff", "--git"],
        &["revert", "--all", "--no-backup"],
        &["status", "-C"],
        &["add", "n", "new/f"],
        &["forget", "new"],
        &["status", "-A"],
        &["revert", "d/g"],
        &["copy", "--after", "a", "n"],
        &["status", "-C"],
        &["remove", "-f", "n"],
        &["status", "-C"],
    ];
    s.same_all(steps);
    // hg's case-folding warnings, from the daemon's case variants of each new file.
    s.edit(|r| {
        std::fs::write(r.join("A"), "A\n").unwrap();
        std::fs::write(r.join("d/F"), "F\n").unwrap();
        std::fs::create_dir_all(r.join("D")).unwrap();
        std::fs::write(r.join("D/g"), "g\n").unwrap();
    });
    for args in [&["add", "A", "d/F"][..], &["add", "D/g"], &["status"]] {
        s.same("", args);
    }
    // From a subdirectory, with relative names.
    for args in [
        &["add", "."][..],
        &["status"],
        &["forget", "o"],
        &["status"],
    ] {
        s.same("d", args);
    }
    // One working copy, two front ends: what revfs tracks, hg sees, and the other way.
    let ours = revfs(&s.mount.dir, &["add", "u"]);
    assert!(ours.status.success(), "{ours:?}");
    assert!(hg_cmd(&s.clone, &["add", "u"]).status.success());
    s.same("", &["status", "-C"]);
    s.same("", &["rename", "u", "u2"]);
    let ours = revfs(&s.mount.dir, &["status", "-C"]);
    let theirs = hg_cmd(&s.clone, &["status", "-C"]);
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs.stdout)
    );
    s.same("", &["verify", "-q"]);
}

#[test]
fn hg_commit_amend_and_strip_keep_in_a_mount_make_the_changesets_of_a_clone() {
    let s = sides();
    s.edit(|r| {
        std::fs::write(r.join("n"), "n\n").unwrap();
        std::fs::write(r.join("d/o"), "o\n").unwrap();
        std::fs::write(r.join("a"), "a\na2\na3\n").unwrap();
    });
    let log = &[
        "log",
        "-T",
        "{rev}:{node} {branch} {files} {file_copies}\\n",
    ][..];
    let steps: &[&[&str]] = &[
        &["commit", "-m", "named", "-u", "test", "-d", "10 0", "a"],
        &["status", "-C"],
        &["commit", "-A", "-m", "all", "-u", "test", "-d", "11 0"],
        &["status", "-C"],
        log,
    ];
    s.same_all(steps);
    s.edit(|r| {
        std::fs::write(r.join("n"), "n2\n").unwrap();
        std::fs::remove_file(r.join("x y")).unwrap();
    });
    let steps: &[&[&str]] = &[
        &[
            "commit", "--amend", "-m", "amended", "-u", "test", "-d", "12 0",
        ],
        &["status", "-C"],
        &["remove", "x y"],
        &["copy", "a", "a3"],
        &["branch", "feature"],
        &["commit", "-m", "copy", "-u", "test", "-d", "13 0"],
        &["status", "-C"],
        &["commit", "-m", "nothing", "-u", "test", "-d", "14 0"],
        log,
        &["bookmark", "bm"],
        &["add", "n.c"],
        &["status"],
    ];
    s.edit(|r| std::fs::write(r.join("n.c"), "c\n").unwrap());
    s.same_all(steps);
    // A transaction a hook aborts leaves the parent and the tracking as they were.
    let steps: &[&[&str]] = &[
        &[
            "commit",
            "-m",
            "hooked",
            "-u",
            "test",
            "-d",
            "15 0",
            "--config",
            "hooks.pretxncommit=false",
        ],
        &["status", "-C"],
        &["commit", "-m", "bm moves", "-u", "test", "-d", "16 0"],
        &["bookmarks"],
        log,
        // The parent goes back one revision, every file stays: hg's dirstate rebuild.
        &[
            "--config",
            "extensions.strip=",
            "strip",
            "--keep",
            "-r",
            ".",
        ],
        &["status", "-C"],
        &["summary"],
        log,
        // hg's movedirstate (uncommit): the parent moves back, the tracking follows.
        &["copy", "a", "a4"],
        &["copy", "d/g", "g2"],
        &["commit", "-m", "copies", "-u", "test", "-d", "18 0"],
        &["--config", "extensions.uncommit=", "uncommit", "a4"],
        &["status", "-C"],
        log,
        &["--config", "extensions.uncommit=", "uncommit"],
        &["status", "-C"],
        &["diff", "--git"],
        log,
        &["commit", "-m", "again", "-u", "test", "-d", "19 0"],
        &["status", "-A"],
        &["verify", "-q"],
    ];
    s.same_all(steps);
    // debugsetparents moves the parent and touches no file: the status is then what
    // `status --rev` said of the working copy against that revision (in a clone hg keeps
    // its old entries and their stat caches instead, which a mount does not have).
    let against_1 = hg_cmd(&s.mount.dir, &["status", "--rev", "1"]).stdout;
    let snap = revfs_tests::mount::snapshot(&s.mount.dir);
    let out = hg_cmd(&s.mount.dir, &["debugsetparents", "1"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(hg_cmd(&s.mount.dir, &["status"]).stdout, against_1);
    assert_eq!(revfs_tests::mount::snapshot(&s.mount.dir), snap);
    assert_eq!(
        hg_cmd(&s.mount.dir, &["log", "-r", ".", "-T", "{rev}"]).stdout,
        b"1"
    );
    let out = hg_cmd(&s.mount.dir, &["debugsetparents", "tip"]);
    assert!(out.status.success(), "{out:?}");
    // A rebuild of the whole dirstate stops in a mount before it changes anything.
    let before = (
        hg_cmd(&s.mount.dir, &["status", "-A"]).stdout,
        hg_cmd(&s.mount.dir, log).stdout,
    );
    {
        let args = &["debugrebuilddirstate"][..];
        let out = hg_cmd(&s.mount.dir, args);
        assert_eq!(out.status.code(), Some(255), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("abort: "),
            "{out:?}"
        );
        let after = (
            hg_cmd(&s.mount.dir, &["status", "-A"]).stdout,
            hg_cmd(&s.mount.dir, log).stdout,
        );
        assert_eq!(before, after, "{args:?} changed something");
    }
    // revfs sees the same working copy.
    let ours = revfs(&s.mount.dir, &["status", "-C"]);
    let theirs = hg_cmd(&s.clone, &["status", "-C"]);
    assert_eq!(ours.stdout, theirs.stdout);
    let ours = revfs(&s.mount.dir, &["parents", "-T", "{node}\\n"]);
    let theirs = hg_cmd(&s.clone, &["parents", "-T", "{node}\\n"]);
    assert_eq!(ours.stdout, theirs.stdout);
}

#[test]
fn hg_clean_updates_in_a_mount_are_the_daemons_and_print_what_a_clone_prints() {
    let s = sides();
    s.edit(|r| {
        std::fs::write(r.join("n"), "n\n").unwrap();
        std::fs::remove_file(r.join("e/x")).unwrap();
        std::fs::write(r.join("a"), "a\na2\nthird\n").unwrap();
    });
    let log = &[
        "log",
        "-r",
        ".",
        "-T",
        "{rev}:{node} {branch} {activebookmark}\\n",
    ][..];
    let steps: &[&[&str]] = &[
        &["commit", "-A", "-m", "third", "-u", "test", "-d", "20 0"],
        &["update", "0"],
        &["status", "-A"],
        log,
        &["update", "tip"],
        &["status", "-A"],
        &["update", "null"],
        &["status", "-A"],
        &["files"],
        &["update", "1"],
        log,
        &["update", "1"],
        // A named branch: the daemon's update tells hg the branch it writes.
        &["branch", "feature"],
        &["commit", "-m", "on feature", "-u", "test", "-d", "21 0"],
        &["update", "1"],
        &["branch"],
        &["update", "feature"],
        &["branch"],
        log,
        &["update", "null"],
        &["branch"],
        &["update", "1"],
    ];
    s.same_all(steps);
    // Local changes the update does not touch stay; --check refuses them; -C drops them.
    s.edit(|r| {
        std::fs::write(r.join("d/f"), "local\n").unwrap();
        std::fs::write(r.join("u"), "unknown\n").unwrap();
    });
    let steps: &[&[&str]] = &[
        &["update", "2"],
        &["status"],
        &["update", "--check", "1"],
        &["update", "-C", "1"],
        &["status"],
        &["bookmark", "-r", "2", "bm"],
        &["update", "bm"],
        &["bookmarks"],
        log,
        &["update", "1"],
        &["bookmarks"],
        &["update"],
        log,
        &["branch"],
        &["summary"],
        // strip of the parent: hg updates away first (the daemon's update), then strips.
        &["--config", "extensions.strip=", "strip", "-r", "."],
        log,
        &["status", "-A"],
        &["verify", "-q"],
    ];
    s.same_all(steps);
    assert!(!s.mount.dir.join(".hg/updatestate").exists());
    s.revfs_status_is_hgs();
}

/// Files (not directories) below `dir`.
fn overlay_files(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            n += overlay_files(&e.path());
        } else {
            n += 1;
        }
    }
    n
}

/// The trace of `hg ARGS` in the mount under `strace -f OPTIONS` (hg must succeed).
fn strace_hg(s: &Sides, options: &[&str], args: &[&str]) -> String {
    let trace = s._tmp.path().join("trace");
    let path = trace.display().to_string();
    let mut full = vec!["-f", "-qq", "-o", &path];
    full.extend(options);
    full.push("hg");
    full.extend(args);
    let out = revfs_tests::hg_env(std::process::Command::new("strace").args(&full))
        .current_dir(&s.mount.dir)
        .output()
        .expect("strace (apt-get install strace)");
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(&trace).unwrap()
}

/// The control requests in a trace of `sendto`s (strace `-s 40`), by command, in order.
fn requested(trace: &str) -> Vec<String> {
    trace
        .lines()
        .filter_map(|l| l.split("{\\\"cmd\\\": \\\"").nth(1))
        .filter_map(|rest| rest.split('\\').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn an_hg_update_over_a_local_change_asks_status_once_and_writes_the_merged_file_once() {
    // hg asks for status three times before its actions (its dirty check, the working
    // manifest, the split of the actions between hg and the daemon): one request answers
    // them. After the merge hg's setparents wants the copies only: no status for them.
    // hg writes the local side of each file back before merging it (for `hg resolve`
    // after an edit): the same bytes, through an unlink, a create and a write. In a mount
    // the file stays; hg's merge then writes it once.
    let s = sides();
    s.edit(|r| std::fs::write(r.join("a"), "local\na\na2\n").unwrap());
    let options = ["-e", "trace=sendto,unlink,unlinkat", "-s", "40"];
    let trace = strace_hg(&s, &options, &["update", "0"]);
    let asked = requested(&trace);
    let count = |cmd: &str| asked.iter().filter(|c| *c == cmd).count();
    assert_eq!((count("status"), count("copies")), (1, 1), "{asked:?}");
    let unlinked = trace.lines().filter(|l| l.contains("/a\"")).count();
    assert_eq!(unlinked, 1, "{trace}");
    let out = hg_cmd(&s.clone, &["update", "0"]);
    assert!(out.status.success(), "{out:?}");
    s.same_all(&[&["status", "-A"], &["diff"]]);
}

#[test]
fn hg_updates_over_local_changes_merge_them_as_in_a_clone() {
    let s = sides();
    let log = &["log", "-r", ".", "-T", "{rev}:{node}\\n"][..];
    // Revision 2 changes d/f and removes e/x; a local edit of `a` that revision 0 does not
    // conflict with is merged into it on the way there and back.
    s.edit(|r| {
        std::fs::write(r.join("d/f"), "f\nthird\n").unwrap();
        std::fs::remove_file(r.join("e/x")).unwrap();
    });
    s.same(
        "",
        &["commit", "-A", "-m", "third", "-u", "test", "-d", "20 0"],
    );
    s.same("", &["update", "1"]);
    s.edit(|r| std::fs::write(r.join("a"), "local\na\na2\n").unwrap());
    let steps: &[&[&str]] = &[
        &["update", "0"],
        &["status", "-A"],
        &["diff"],
        &["cat", "a"],
        log,
        &["update", "1"],
        &["diff"],
    ];
    s.same_all(steps);
    // What the daemon updated (d/f, from the store) stays lazy: the overlay holds no more
    // files than before (the one hg merged, `a`, was there already).
    let overlay = s.mount.state_dir().join("overlay");
    let before = overlay_files(&overlay);
    s.same("", &["update", "2"]);
    assert_eq!(overlay_files(&overlay), before);
    let steps: &[&[&str]] = &[
        &["diff"],
        &["status", "-A"],
        &["update", "--merge", "0"],
        &["update", "--check", "2"],
        &["update", "-C", "2"],
        &["status", "-A"],
    ];
    s.same_all(steps);
    // Conflicts: hg's markers, `.hg/merge`, `hg resolve`, and a commit of the result.
    s.same("", &["update", "1"]);
    s.edit(|r| {
        std::fs::write(r.join("d/f"), "f\nlocal\n").unwrap();
        std::fs::write(r.join("e/x"), "x\nlocal\n").unwrap();
        std::fs::write(r.join("new"), "new\n").unwrap();
    });
    let steps: &[&[&str]] = &[
        &["add", "new"],
        &[
            "--config",
            "hooks.preupdate=echo preupdate $HG_PARENT1",
            "update",
            "2",
        ],
        &["status", "-A"],
        &["diff"],
        &["cat", "d/f"],
        &["resolve", "-l"],
        &["summary"],
        &["update", "1"],
        &["commit", "-m", "no"],
        &["resolve", "--all", "--tool", "internal:local"],
        &["resolve", "-l"],
        &["cat", "d/f"],
        &["resolve", "--unmark", "d/f"],
        &["resolve", "--mark", "d/f"],
        &["status", "-C"],
        &["commit", "-m", "merged", "-u", "test", "-d", "21 0"],
        log,
        &["status", "-A"],
        &["verify", "-q"],
    ];
    s.same_all(steps);
    // An untracked file in the way: refused when it differs, taken when it is the same.
    s.same("", &["update", "0"]);
    s.edit(|r| {
        std::fs::write(r.join("link"), "other\n").unwrap();
        std::fs::write(r.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(r.join("a"), "a\nlocal\n").unwrap();
    });
    for args in [
        &["update", "1"][..],
        &["status", "-A"],
        &["--config", "merge.checkunknown=warn", "update", "1"],
        &["status", "-A"],
        &["diff", "--git"],
        log,
        &["update", "-C", "0"],
        &["status", "-A"],
    ] {
        s.same("", args);
    }
    assert!(!s.mount.dir.join(".hg/updatestate").exists());
    s.revfs_status_is_hgs();
    let ours = revfs(&s.mount.dir, &["diff", "--git"]);
    let theirs = hg_cmd(&s.clone, &["diff", "--git"]);
    assert_eq!(ours.stdout, theirs.stdout);
}

#[test]
fn an_update_that_adds_to_a_removed_directory_leaves_its_unchanged_files_removed() {
    // hg's "keep absent": a file the user removed and the target does not change stays
    // removed, even when the target adds a file beside it and so brings its directory back.
    let s = sides();
    s.edit(|r| {
        std::fs::write(r.join("d/new"), "new\n").unwrap();
        std::fs::create_dir(r.join("d/sub/deeper")).unwrap();
        std::fs::write(r.join("d/sub/deeper/n"), "n\n").unwrap();
    });
    s.same(
        "",
        &[
            "commit",
            "-A",
            "-m",
            "adds to d",
            "-u",
            "test",
            "-d",
            "20 0",
        ],
    );
    s.same("", &["update", "1"]);
    s.edit(|r| std::fs::remove_dir_all(r.join("d")).unwrap());
    s.same_all(&[
        &["status"],
        &["update", "2"],
        &["status", "-A"],
        &["summary"],
    ]);
    s.tree_and_status_are_the_clones();
    // revfs's own update, from the same state.
    s.same_all(&[&["update", "-C", "1"], &["status"]]);
    s.edit(|r| std::fs::remove_dir_all(r.join("d")).unwrap());
    s.revfs_as_hg(&["update", "2"]);
    s.tree_and_status_are_the_clones();
    s.same_all(&[&["update", "-C", "1"], &["status", "-A"]]);
    s.tree_and_status_are_the_clones();
}

#[test]
fn hg_resolve_keeping_a_file_a_rebase_deletes_tracks_it_as_added_as_in_a_clone() {
    // (No debugdirstate: a file hg writes in the clock's current second has its time
    // "unset" in the clone's dirstate, or not, as the clock goes; status is exact.)
    // A rebase whose second changeset deletes a file the first one's rebase changed: a
    // changed/deleted conflict. Resolved by keeping the file, hg's dirstate has it as added
    // although the parent has it (journal track state 5).
    let s = sides();
    let rebase = |args: &[&'static str]| -> Vec<&'static str> {
        ["--config", "extensions.rebase="]
            .into_iter()
            .chain(args.iter().copied())
            .collect()
    };
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nd\n").unwrap());
    s.same("", &["commit", "-m", "dest", "-u", "test", "-d", "20 0"]);
    s.same("", &["update", "1"]);
    s.same("", &["copy", "a", "c"]);
    s.same("", &["commit", "-m", "copy", "-u", "test", "-d", "21 0"]);
    s.same("", &["remove", "c"]);
    s.same("", &["commit", "-m", "remove", "-u", "test", "-d", "22 0"]);
    s.same("", &rebase(&["rebase", "-s", "3", "-d", "2"]));
    s.same_all(&[
        &["status", "-A", "-C"],
        &["resolve", "-l"],
        &["resolve", "--all", "--tool", "internal:local"],
        &["status", "-A", "-C"],
        &["summary"],
    ]);
    s.revfs_status_is_hgs();
    // Forgotten, it has no entry (unknown, although the parent has it); added again, it is
    // added.
    s.same_all(&[
        &["forget", "c"],
        &["status", "-A", "-C"],
        &["add", "c"],
        &["status", "-A", "-C"],
    ]);
    s.revfs_status_is_hgs();
    // The same by revfs's own forget and add.
    for args in [
        &["forget", "c"][..],
        &["status", "-A", "-C"],
        &["add", "c"],
        &["status", "-A", "-C"],
    ] {
        s.revfs_as_hg(args);
    }
    s.same("", &rebase(&["rebase", "--continue"]));
    s.same_all(&[
        &["log", "-G", "-T", "{rev}:{node} {desc} {files}\\n"],
        &["status", "-A", "-C"],
        &["verify", "-q"],
    ]);
    s.tree_and_status_are_the_clones();
}

#[test]
fn an_update_writes_and_tracks_a_file_hgs_dirstate_had_no_entry_for() {
    // A removal kept by resolve over a changed/deleted conflict leaves hg's dirstate with
    // no entry for a file the parent has; the next update that changes the file gets it
    // (hg's "remote is newer -> g"), tracked, as in a clone.
    let s = sides();
    for (text, date) in [("f\nchanged\n", "20 0"), ("f\nchanged\nagain\n", "21 0")] {
        s.edit(|r| std::fs::write(r.join("d/f"), text).unwrap());
        s.same("", &["commit", "-m", text, "-u", "test", "-d", date]);
    }
    s.same_all(&[
        &["update", "1"],
        &["remove", "d/f"],
        &["update", "--merge", "2"],
        &["resolve", "--all", "--tool", "internal:local"],
        &["status", "-A"],
        // An update --clean that leaves the file as the parent has it does nothing to it:
        // hg still has no entry for it.
        &["update", "-C", "2"],
        &["status", "-A"],
        &["update", "3"],
        &["status", "-A"],
    ]);
    s.tree_and_status_are_the_clones();
}

#[test]
fn an_update_to_or_from_a_revision_with_subrepositories_is_hgs() {
    // hg's update visits the subrepositories of the parent and of the target, and refuses
    // git's unless allowed: the mount's update leaves them to hg, and refuses them itself
    // (revfs update), rather than update around them.
    let s = sides();
    let git = s.clone.parent().unwrap().join("gitsub");
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir({
                std::fs::create_dir_all(&git).unwrap();
                &git
            })
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    // Revision 2 has a git subrepository; revision 3 removes it.
    s.edit(|r| {
        let out = std::process::Command::new("git")
            .args(["clone", "-q", &git.display().to_string(), "s"])
            .current_dir(r)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        std::fs::write(r.join(".hgsub"), format!("s = [git]{}\n", git.display())).unwrap();
    });
    let allowed = ["--config", "subrepos.git:allowed=true"];
    let with = |args: &[&'static str]| -> Vec<&'static str> {
        allowed
            .iter()
            .copied()
            .chain(args.iter().copied())
            .collect()
    };
    s.same("", &with(&["add", ".hgsub"]));
    s.same(
        "",
        &with(&["commit", "-m", "subrepo", "-u", "test", "-d", "20 0"]),
    );
    s.same("", &with(&["remove", ".hgsub", ".hgsubstate"]));
    s.same(
        "",
        &with(&["commit", "-m", "no subrepo", "-u", "test", "-d", "21 0"]),
    );
    s.edit(|r| std::fs::remove_dir_all(r.join("s")).unwrap());
    s.same_all(&[
        &["status", "-A"],
        // Refused by hg, after it wrote some of the target's files: an interrupted update.
        &["update", "2"],
        &["status", "-A"],
        &["summary"],
        &["update", "-C", "3"],
        &["status", "-A"],
    ]);
    s.tree_and_status_are_the_clones();
    // revfs update declines both ways, changing nothing.
    let refused = |args: &[&str], why: &str| {
        let out = s.mount.revfs_in(&s.mount.dir, args);
        assert_eq!(out.status.code(), Some(255), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), why);
        s.same_all(&[&["status", "-A"], &["id"]]);
    };
    refused(
        &["update", "2"],
        "abort: revision 2 has subrepositories (.hgsub), which revfs does not support (use hg \
         instead)\n",
    );
    s.same("", &with(&["update", "2"]));
    refused(
        &["update", "1"],
        "abort: the working copy's parent has subrepositories, which revfs does not support \
         (use hg instead)\n",
    );
    s.same("", &with(&["update", "1"]));
    s.same_all(&[&["status", "-A"], &["id"]]);
    s.revfs_status_is_hgs();
    // A `.hgsubstate` added in the working copy (addremove adds the one an interrupted
    // update leaves): hg's update looks at the working copy's, so the mount's leaves it to
    // hg as well.
    s.same_all(&[
        &["revert", "-r", "2", ".hgsub", ".hgsubstate"],
        &["status", "-A"],
        &["update", "-C", "1"],
        &["status", "-A"],
        &["id"],
    ]);
}

#[test]
fn hg_merge_rebase_graft_and_backout_in_a_mount_do_what_they_do_in_a_clone() {
    let s = sides();
    let rebase = "--config=extensions.rebase=";
    let log = &[
        "log",
        "-G",
        "-T",
        "{rev}:{node} {p1rev} {p2rev} {desc} {files}\\n",
    ][..];
    s.same("", &["phase", "--draft", "--force", "-r", "all()"]);
    // Two heads that change d/f each their own way.
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nleft\n").unwrap());
    s.same("", &["commit", "-m", "left", "-u", "test", "-d", "10 0"]);
    s.same("", &["update", "1"]);
    s.edit(|r| {
        std::fs::write(r.join("d/f"), "f\nright\n").unwrap();
        std::fs::write(r.join("r"), "r\n").unwrap();
        std::fs::remove_file(r.join("gone")).unwrap();
    });
    s.same(
        "",
        &["commit", "-A", "-m", "right", "-u", "test", "-d", "11 0"],
    );
    s.edit(|r| std::fs::write(r.join("b.c"), "int b2;\n").unwrap());
    s.same("", &["commit", "-m", "stack", "-u", "test", "-d", "12 0"]);
    s.same("", &["update", "2"]);
    s.edit(|r| std::fs::write(r.join("e/x"), "x\nleft\n").unwrap());
    s.same("", &["commit", "-m", "left2", "-u", "test", "-d", "13 0"]);
    // A merge with a conflict, looked at, abandoned, done again and committed.
    let steps: &[&[&str]] = &[
        &["merge", "4"],
        &["status", "-C"],
        &["status", "-A"],
        &["resolve", "-l"],
        &["id"],
        &["parents"],
        &["summary"],
        &["diff"],
        &["update", "1"],
        &["commit", "-m", "no"],
        &["merge", "--abort"],
        &["status", "-A"],
        &["merge", "4"],
    ];
    s.same_all(steps);
    // revfs in the middle of a merge: the same status, and what it cannot do it says.
    s.revfs_status_is_hgs();
    s.revfs_as_hg(&["update", "1"]);
    for args in [&["commit", "-m", "x"][..], &["parents"], &["id"]] {
        let out = revfs(&s.mount.dir, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(255), "revfs {args:?}: {err}");
        assert!(err.starts_with("abort: revfs "), "revfs {args:?}: {err}");
    }
    // The merge survives a killed daemon: the journal holds its second parent and files.
    s.mount.kill_daemon();
    s.mount.unmount();
    s.mount.remount(&s._tmp.path().join("repo"), None);
    for args in [
        &["status", "-A"][..],
        &["id"],
        &["resolve", "-l"],
        &["diff", "--git"],
    ] {
        s.same("", args);
    }
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nboth\n").unwrap());
    let steps: &[&[&str]] = &[
        &["resolve", "--mark", "d/f"],
        &["status", "-C"],
        &["commit", "-m", "merged", "-u", "test", "-d", "14 0"],
        log,
        &["status", "-A"],
        // A rebase with a conflict, continued; another, abandoned.
        &[rebase, "rebase", "-s", "3", "-d", "2"],
        &["status", "-C"],
        &["resolve", "-l"],
        &[rebase, "rebase", "--continue"],
        &["resolve", "--all", "--tool", "internal:other"],
        &[rebase, "rebase", "--continue"],
        log,
        &["status", "-A"],
    ];
    s.same_all(steps);
    // Two commits that change b.c each their own way.
    s.same("", &["update", "-C", "1"]);
    s.edit(|r| std::fs::write(r.join("b.c"), "int one;\n").unwrap());
    s.same("", &["commit", "-m", "one", "-u", "test", "-d", "20 0"]);
    s.same("", &["update", "1"]);
    s.edit(|r| std::fs::write(r.join("b.c"), "int two;\n").unwrap());
    s.same("", &["commit", "-m", "two", "-u", "test", "-d", "21 0"]);
    let steps: &[&[&str]] = &[
        &[rebase, "rebase", "-s", "8", "-d", "7"],
        &["status", "-C"],
        &["resolve", "-l"],
        &[rebase, "rebase", "--abort"],
        &["status", "-A"],
        log,
        // graft with a conflict, abandoned, then done and continued; backouts.
        &["update", "-C", "7"],
        &["graft", "-r", "8", "-u", "test", "-d", "22 0"],
        &["status", "-C"],
        &["graft", "--abort"],
        &["status", "-A"],
        &["graft", "-r", "8", "-u", "test", "-d", "22 0"],
        &["resolve", "--all", "--tool", "internal:local"],
        &["graft", "--continue", "-u", "test", "-d", "22 0"],
        log,
        &[
            "backout", "-r", ".", "-m", "back", "-u", "test", "-d", "23 0",
        ],
        &[
            "backout", "--merge", "-r", "7", "-m", "back2", "-u", "test", "-d", "24 0",
        ],
        &["status", "-A"],
        &["resolve", "-l"],
        &["resolve", "--all", "--tool", "internal:other"],
        &["commit", "-m", "backed", "-u", "test", "-d", "25 0"],
        log,
        &["status", "-A"],
        &["verify", "-q"],
    ];
    s.same_all(steps);
    s.revfs_status_is_hgs();
}

#[test]
fn revfs_and_hg_in_one_mount_share_its_branch_and_bookmarks() {
    // revfs commit and update in the mount, hg commit and update in the clone, with hg's
    // branch and bookmark commands on both: the same changesets, bookmarks and messages.
    let s = sides();
    let log = &[
        "log",
        "-r",
        ".",
        "-T",
        "{rev}:{node} {branch} [{bookmarks}] {activebookmark}\\n",
    ][..];
    let edit = |name: &'static str, text: &'static str| {
        s.edit(move |r| std::fs::write(r.join(name), text).unwrap());
    };
    s.same("", &["bookmark", "bm"]);
    edit("a", "bm moves\n");
    s.revfs_as_hg(&["commit", "-m", "on bm", "-u", "test", "-d", "30 0"]);
    s.same("", log);
    s.same("", &["bookmarks"]);
    // A named branch set by hg is the one revfs commits on.
    s.same("", &["branch", "feature"]);
    edit("b.c", "feature\n");
    s.revfs_as_hg(&["commit", "-m", "on feature", "-u", "test", "-d", "31 0"]);
    s.same("", log);
    s.same("", &["bookmarks"]);
    // Updates: to a revision (the bookmark is left), to a bookmark (activated).
    s.revfs_as_hg(&["update", "1"]);
    s.same("", &["branch"]);
    s.same("", log);
    s.revfs_as_hg(&["update", "bm"]);
    s.same("", log);
    s.revfs_as_hg(&["update", "1"]);
    // A bare update moves the active bookmark to the branch's head.
    s.same("", &["bookmark", "bm2"]);
    s.revfs_as_hg(&["update"]);
    s.same("", log);
    s.same("", &["bookmarks"]);
    // An active bookmark elsewhere than the parent (as a pull leaves it): a bare update
    // goes to it.
    let zero =
        String::from_utf8(hg_cmd(&s.clone, &["log", "-r", "0", "-T", "{node}"]).stdout).unwrap();
    let marks =
        String::from_utf8(hg_cmd(&s.clone, &["bookmarks", "-T", "{node} {bookmark}\\n"]).stdout)
            .unwrap()
            .replace(
                &format!("{} bm2", hg_id(&s.clone, "bm2")),
                &format!("{zero} bm2"),
            );
    let mut marks: Vec<&str> = marks.lines().collect();
    marks.sort_by_key(|l| l.split_once(' ').map(|(_, n)| n.to_owned()));
    let text = marks.join("\n") + "\n";
    std::fs::write(s.clone.join(".hg/bookmarks"), &text).unwrap();
    std::fs::write(s._tmp.path().join("repo/.hg/bookmarks"), &text).unwrap();
    s.same("", &["bookmarks"]);
    s.revfs_as_hg(&["update"]);
    s.same("", log);
    s.revfs_as_hg(&["update", "-q", "feature"]);
    s.same("", log);
    s.same("", &["verify", "-q"]);
}

fn hg_id(dir: &Path, rev: &str) -> String {
    String::from_utf8(hg_cmd(dir, &["log", "-r", rev, "-T", "{node}"]).stdout).unwrap()
}

#[test]
fn a_revfs_command_waits_for_hgs_working_directory_lock() {
    // hg holds the share's wlock (a live process named in it): revfs add waits with hg's
    // message, and goes on once the holder is gone (a dead holder's lock is broken).
    let s = sides();
    std::fs::write(s.mount.dir.join("new"), "new\n").unwrap();
    let mut holder = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let wlock = s.mount.state_dir().join("hg/wlock");
    let prefix = revfs_store::lock::lock_prefix();
    std::os::unix::fs::symlink(format!("{prefix}:{}", holder.id()), &wlock).unwrap();
    let child = revfs_tests::hg_env(&mut std::process::Command::new(revfs_tests::revfs_bin()))
        .args(["add", "new"])
        .current_dir(&s.mount.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let out = revfs(&s.mount.dir, &["status"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "? new\n",
        "not added yet"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let root = std::fs::canonicalize(&s.mount.dir).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let first = format!(
        "waiting for lock on working directory of {} held by process '{}' on host '{prefix}'\n",
        root.display(),
        holder.id()
    );
    assert!(err.starts_with(&first), "{err}");
    assert!(err.contains("got lock after "), "{err}");
    let out = revfs(&s.mount.dir, &["status"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "A new\n");
    assert!(wlock.symlink_metadata().is_err(), "released");
}

#[test]
fn chg_in_a_mount_prints_what_hg_prints_in_a_clone_and_never_pins_the_mount() {
    // chg, hg's command server, forks a worker per command from a server that loaded the
    // extension once: each worker opens its own connection to the daemon. The server runs
    // from `/` (chg's daemon-postexec), so the mount can be unmounted while it lives.
    let s = sides();
    let sock = s._tmp.path().join("chg");
    let chg = |dir: &Path, args: &[&str]| {
        revfs_tests::hg_env(&mut std::process::Command::new("chg"))
            .env("CHGSOCKNAME", &sock)
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap()
    };
    struct Server(PathBuf);
    impl Drop for Server {
        fn drop(&mut self) {
            // The server's socket is CHGSOCKNAME.PID; its command line names it.
            let _ = std::process::Command::new("pkill")
                .args(["-f", "--", &format!("--address {}", self.0.display())])
                .status();
        }
    }
    let _server = Server(sock.clone());
    s.edit(|r| std::fs::write(r.join("a"), "chg\n").unwrap());
    let root = std::fs::canonicalize(&s.mount.dir)
        .unwrap()
        .display()
        .to_string();
    let log = &["log", "-T", "{rev}:{node} {desc}\\n"][..];
    for args in [
        &["status"][..],
        &["diff", "--git"],
        &["commit", "-m", "by chg", "-u", "test", "-d", "40 0"],
        &["status", "-A"],
        &["update", "0"],
        &["status"],
        &["update", "tip"],
        log,
        &["id"],
    ] {
        let ours = chg(&s.mount.dir, args);
        let theirs = hg_cmd(&s.clone, args);
        let show = |o: &std::process::Output, r: &str| {
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).replace(r, "$ROOT"),
                String::from_utf8_lossy(&o.stderr).replace(r, "$ROOT"),
            )
        };
        let clone_root = std::fs::canonicalize(&s.clone)
            .unwrap()
            .display()
            .to_string();
        assert_eq!(
            show(&ours, &root),
            show(&theirs, &clone_root),
            "chg {args:?} in the mount, hg in a clone"
        );
        // revfs changes the daemon's state between two chg commands: the next one (a worker
        // of the same server) sees it, as hg sees the clone's.
        let between: &[&str] = match args[0] {
            "diff" => &["add", "new"],
            "update" if args[1] == "0" => &["commit", "-m", "by revfs", "-d", "41 0"],
            "status" if args.len() == 2 => &["update", "1"],
            _ => continue,
        };
        match between[0] {
            "add" => s.edit(|r| std::fs::write(r.join("new"), "new\n").unwrap()),
            "commit" => s.edit(|r| std::fs::write(r.join("a"), "by revfs\n").unwrap()),
            _ => {}
        }
        let out = revfs(&s.mount.dir, between);
        assert!(out.status.success(), "revfs {between:?}: {out:?}");
        let mut hg_args = between.to_vec();
        if hg_args[0] == "commit" {
            hg_args.extend(["-u", "revfs tests <tests@example.org>"]);
        }
        assert!(hg_cmd(&s.clone, &hg_args).status.success());
    }
    // The server lives on; the mount can go.
    let servers = std::process::Command::new("pgrep")
        .args(["-f", "--", &format!("--address {}", sock.display())])
        .output()
        .unwrap();
    assert!(!servers.stdout.is_empty(), "a chg server runs");
    s.mount.unmount();
}

#[test]
fn hg_pull_push_incoming_outgoing_and_histedit_in_a_mount_do_what_they_do_in_a_clone() {
    // The mount's paths are its repository's (a share reads its source's hgrc); the clone
    // gets the same path to its own copy of the upstream repository.
    let s = sides();
    let tmp = s._tmp.path();
    let ups = [tmp.join("up-m"), tmp.join("up-c")];
    for up in &ups {
        let out = hg_cmd(tmp, &["clone", "-q", "repo", up.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
    }
    for (dot_hg, up) in [
        (tmp.join("repo/.hg"), &ups[0]),
        (s.clone.join(".hg"), &ups[1]),
    ] {
        let paths = format!("[paths]\ndefault = {}\n", up.display());
        std::fs::write(dot_hg.join("hgrc"), paths).unwrap();
    }
    s.named.borrow_mut().push(("UP", ups.clone()));
    s.named
        .borrow_mut()
        .push(("COPY", [tmp.join("copy-m"), tmp.join("copy-c")]));
    let upstream = |path: &str, content: &str, msg: &str, date: &str| {
        for up in &ups {
            std::fs::write(up.join(path), content).unwrap();
            let out = hg_cmd(up, &["commit", "-A", "-m", msg, "-u", "test", "-d", date]);
            assert!(out.status.success(), "{out:?}");
        }
    };
    let (rebase, histedit) = (
        "--config=extensions.rebase=",
        "--config=extensions.histedit=",
    );
    let editor = "--config=ui.editor=true";
    let log = &[
        "log",
        "-G",
        "-T",
        "{rev}:{node} {phase} {desc} {bookmarks} {files}\\n",
    ][..];
    upstream("a", "a\na2\nup1\n", "up1", "30 0");
    let steps: &[&[&str]] = &[
        &["paths"],
        &["incoming", "-T", "{rev}:{node} {desc}\\n"],
        &["pull", "-u"],
        log,
        &["status", "-A"],
    ];
    s.same_all(steps);
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nlocal\n").unwrap());
    let steps: &[&[&str]] = &[
        &["commit", "-m", "local", "-u", "test", "-d", "31 0"],
        &["outgoing", "-T", "{rev}:{node} {phase} {desc}\\n"],
        &["push"],
        &["phase", "-r", "."],
        &["outgoing"],
        &["-R", "$UP", "log", "-r", "tip"],
    ];
    s.same_all(steps);
    // A stack of four, edited by histedit: pick, edit (a change made while it stops),
    // mess and fold.
    for (i, (path, content)) in [
        ("d/g", "g\nl1\n"),
        ("e/x", "x\nl2\n"),
        ("d/sub/h", "h\nl3\n"),
        ("n", "n\n"),
    ]
    .iter()
    .enumerate()
    {
        s.edit(|r| std::fs::write(r.join(path), content).unwrap());
        let (msg, date) = (format!("l{}", i + 1), format!("{} 0", 32 + i));
        s.same("", &["commit", "-A", "-m", &msg, "-u", "test", "-d", &date]);
    }
    s.same("", &["bookmark", "feat"]);
    let nodes = hg_cmd(&s.clone, &["log", "-r", "draft()", "-T", "{node|short} "]);
    let nodes = String::from_utf8(nodes.stdout).unwrap();
    let nodes: Vec<&str> = nodes.split_whitespace().collect();
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    let commands = tmp.join("histedit-commands");
    let plan = format!(
        "pick {}\nedit {}\nmess {}\nfold {}\n",
        nodes[0], nodes[1], nodes[2], nodes[3]
    );
    std::fs::write(&commands, plan).unwrap();
    let commands = commands.to_str().unwrap();
    s.same(
        "",
        &[
            histedit,
            editor,
            "histedit",
            "-r",
            "draft()",
            "--commands",
            commands,
        ],
    );
    s.same("", &["status", "-A"]);
    s.edit(|r| std::fs::write(r.join("x y"), "space\nedited\n").unwrap());
    let steps: &[&[&str]] = &[
        &["status"],
        &[histedit, editor, "histedit", "--continue"],
        log,
        &["status", "-A"],
        &["outgoing", "-T", "{rev}:{node} {phase} {desc}\\n"],
        &["push", "-B", "feat"],
        &["-R", "$UP", "bookmarks"],
    ];
    s.same_all(steps);
    // Upstream changes what the stack changes: pull --rebase stops on the conflict.
    upstream("n", "upstream n\n", "up2", "40 0");
    for up in &ups {
        assert!(hg_cmd(up, &["bookmark", "-r", "0", "upstream"])
            .status
            .success());
    }
    s.edit(|r| std::fs::write(r.join("a"), "dirty\n").unwrap());
    let steps: &[&[&str]] = &[
        &["incoming", "-B"],
        &[rebase, "pull", "--rebase"],
        &["revert", "--no-backup", "--all"],
        &[rebase, "pull", "--rebase"],
        &["status", "-A"],
        &["resolve", "-l"],
        log,
        &[rebase, "rebase", "--abort"],
        &["status", "-A"],
        &["pull", "-B", "upstream"],
        &["bookmarks"],
        &["update", "upstream"],
        &["status", "-A"],
        &["update", "feat"],
        log,
        // Others pull from and clone the mount.
        &["-R", "$UP", "pull", "$ROOT"],
        &[
            "-R",
            "$UP",
            "log",
            "-r",
            "head()",
            "-T",
            "{rev}:{node} {phase} {desc}\\n",
        ],
        &["clone", "-q", "$ROOT", "$COPY"],
        &["-R", "$COPY", "status", "-A"],
        &["-R", "$COPY", "id"],
        &["verify", "-q"],
    ];
    s.same_all(steps);
    s.revfs_status_is_hgs();
}

#[test]
fn hg_shelve_and_unshelve_in_a_mount_do_what_they_do_in_a_clone() {
    // shelve and unshelve commit, update and roll their transaction back: the daemon reads
    // the changesets of the open transaction from hg's pending changelog.
    let s = sides();
    let log = &[
        "log",
        "--hidden",
        "-G",
        "-T",
        "{rev}:{node} {phase} {desc} {files}\\n",
    ][..];
    s.edit(|r| {
        std::fs::write(r.join("a"), "a\na2\nshelved\n").unwrap();
        std::fs::write(r.join("d/f"), "f\nshelved\n").unwrap();
        std::fs::write(r.join("new"), "new\n").unwrap();
        std::fs::write(r.join("unk"), "unknown\n").unwrap();
    });
    let steps: &[&[&str]] = &[
        &["add", "new"],
        &["shelve", "--date", "20 0"],
        &["status", "-A"],
        &["unshelve"],
        &["status", "-A"],
        &["diff", "--git"],
        // Part of the changes, and unknown files; unshelve over local changes.
        &["shelve", "--date", "21 0", "d/f"],
        &["status", "-A"],
        &["unshelve"],
        &["status", "-A"],
        &["shelve", "--date", "22 0", "-u", "-n", "one"],
        &["status", "-A"],
        &["shelve", "--date", "23 0", "-n", "nothing"],
        log,
    ];
    s.same_all(steps);
    // A conflict: looked at, abandoned, done again with --keep, resolved, continued.
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nother\n").unwrap());
    let steps: &[&[&str]] = &[
        &["commit", "-m", "other", "-u", "test", "-d", "24 0"],
        &["unshelve", "one"],
        &["status", "-A"],
        &["resolve", "-l"],
        &["diff", "--git"],
        &["summary"],
        &["unshelve", "--abort"],
        &["status", "-A"],
        log,
        &["unshelve", "--keep", "one"],
        &["resolve", "-l"],
    ];
    s.same_all(steps);
    s.revfs_status_is_hgs();
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nboth\n").unwrap());
    let steps: &[&[&str]] = &[
        &["resolve", "--mark", "a"],
        &["unshelve", "--continue"],
        &["status", "-A"],
        &["diff", "--git"],
        log,
        // --addremove, a merge tool, --keep (the changes stay), delete and cleanup.
        &["shelve", "--date", "25 0", "-A", "-n", "two"],
        &["status", "-A"],
    ];
    s.same_all(steps);
    s.edit(|r| std::fs::write(r.join("x y"), "local\n").unwrap());
    let steps: &[&[&str]] = &[
        &["unshelve", "two", "-t", ":other"],
        &["status", "-A"],
        &["shelve", "--date", "26 0", "--keep", "-n", "three"],
        &["status", "-A"],
        &["shelve", "--delete", "one"],
        &["shelve", "--cleanup"],
        &["verify", "-q"],
    ];
    s.same_all(steps);
    s.revfs_status_is_hgs();
}

#[test]
fn hg_purge_in_a_mount_removes_what_it_removes_in_a_clone() {
    // The daemon tells purge which directories changed (its walk of the whole tree in a
    // clone): unknown and ignored files, new and emptied directories, ignored ones, a
    // nested repository, patterns.
    let s = sides();
    s.edit(|r| {
        for d in [
            "new/deep/empty",
            "emptydir",
            "build/empty",
            "onlyign",
            "d/sub/newdir",
            "sp ace",
            "added",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for (f, text) in [
            ("new/deep/file.txt", "unknown\n"),
            ("build/out.o", "ignored\n"),
            ("d/x.o", "ignored\n"),
            ("onlyign/a.o", "ignored\n"),
            ("d/sub/new", "unknown\n"),
            ("sp ace/u", "unknown\n"),
            ("added/f", "added\n"),
            ("x.o", "ignored\n"),
            ("unk", "unknown\n"),
        ] {
            std::fs::write(r.join(f), text).unwrap();
        }
        // A store directory emptied: purge removes it, its file stays missing.
        std::fs::remove_file(r.join("e/x")).unwrap();
        let out = hg_cmd(r, &["init", "nest"]);
        assert!(out.status.success(), "{out:?}");
        std::fs::create_dir(r.join("nest/emptyd")).unwrap();
        std::fs::write(r.join("nest/unk"), "nested\n").unwrap();
    });
    let steps: &[&[&str]] = &[
        &["add", "added/f"],
        &["purge", "--no-confirm", "-p"],
        &["purge", "--no-confirm", "-p", "-0"],
        &["purge", "--no-confirm", "-p", "--all"],
        &["purge", "--no-confirm", "-p", "-i"],
        &["purge", "--no-confirm", "-p", "d"],
        &["purge", "--no-confirm", "-p", "build"],
        &["purge", "--no-confirm", "-p", "--all", "-I", "glob:**.o"],
        &["purge", "--no-confirm", "-p", "-X", "new"],
        &["purge", "--no-confirm", "-p", "--files"],
        &["purge", "--no-confirm", "-p", "--dirs"],
        // Without the purge extension, purge asks first (and hears no).
        &["purge"],
        &["purge", "-v", "--no-confirm", "d"],
        &["status", "-A"],
        &["purge", "-v", "--no-confirm"],
        &["status", "-A"],
        &["purge", "-p", "--all"],
    ];
    s.same_all(steps);
    s.tree_and_status_are_the_clones();
    let steps: &[&[&str]] = &[
        &["--config", "extensions.purge=", "purge", "-v", "--all"],
        &["status", "-A"],
        &["verify", "-q"],
    ];
    s.same_all(steps);
    s.tree_and_status_are_the_clones();
}

#[test]
fn hg_import_in_a_mount_does_what_it_does_in_a_clone() {
    // Patches exported from the clone (git and plain), a hand-made diff, one that does not
    // apply, imported with and without a commit, --bypass, --exact, --partial, --similarity.
    let s = sides();
    let patches = s._tmp.path().join("patches");
    std::fs::create_dir(&patches).unwrap();
    let patch = |name: &str| patches.join(name).display().to_string();
    use std::os::unix::fs::PermissionsExt;
    s.edit(|r| {
        std::fs::write(r.join("a"), "a\na2\nimported\n").unwrap();
        std::fs::write(r.join("d/f"), "f\nchanged\n").unwrap();
        std::fs::write(r.join("n"), "new\n").unwrap();
        std::fs::write(r.join("bin"), b"\0\x01binary\xff\n").unwrap();
        std::fs::set_permissions(r.join("b.c"), std::fs::Permissions::from_mode(0o755)).unwrap();
    });
    let strip = &["--config", "extensions.strip=", "strip", "-q", "-r", "."][..];
    let log = &[
        "log",
        "-G",
        "-T",
        "{rev}:{node} {desc|firstline} {files}\\n",
    ][..];
    s.same_all(&[
        &["add", "n", "bin"],
        &["rm", "gone"],
        &["mv", "d/g", "d/g2"],
        &["commit", "-m", "one\n\nbody", "-u", "test", "-d", "30 0"],
    ]);
    for (name, args) in [
        ("git.patch", &["export", "--git", "-r", "."][..]),
        ("plain.patch", &["export", "-r", "."]),
        ("diff.patch", &["diff", "-r", "0", "-r", "1"]),
    ] {
        let done = hg_cmd(&s.clone, args);
        assert!(done.status.success(), "{done:?}");
        std::fs::write(patches.join(name), done.stdout).unwrap();
    }
    std::fs::write(
        patches.join("bad.patch"),
        "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,2 +1,2 @@\n-nothing\n+such\n a2\n\
         diff --git a/e/x b/e/x\n--- a/e/x\n+++ b/e/x\n@@ -1,1 +1,2 @@\n x\n+more\n",
    )
    .unwrap();
    let (git, plain, diff, bad) = (
        patch("git.patch"),
        patch("plain.patch"),
        patch("diff.patch"),
        patch("bad.patch"),
    );
    s.same_all(&[
        strip,
        &["status", "-A"],
        &["import", &git],
        log,
        &["status", "-A"],
        strip,
        &["import", "--no-commit", &git],
        &["status", "-A", "-C"],
        &["diff", "--git"],
        &["update", "-C", "."],
        &["purge", "--no-confirm"],
        &["import", "--bypass", "-m", "bypassed", &git],
        log,
        &["status", "-A"],
        &["import", "--exact", &git],
        log,
        &["update", "-r", "1"],
        &["import", &plain],
        &["status", "-A"],
        log,
        &["update", "-r", "0"],
        &["import", "-m", "diff", "-u", "someone", "-d", "40 0", &diff],
        log,
        &["import", &bad],
        &["status", "-A"],
        &["update", "-C", "."],
        &["purge", "--no-confirm"],
        &["import", "--partial", "-m", "partial", "-d", "41 0", &bad],
        &["status", "-A"],
        log,
        &["update", "-C", "1"],
        &["purge", "--no-confirm"],
        &["import", "--no-commit", "-s", "50", &plain],
        &["status", "-A", "-C"],
        &["commit", "-m", "similar", "-u", "test", "-d", "42 0"],
        log,
        &["verify", "-q"],
    ]);
    s.tree_and_status_are_the_clones();
}

#[test]
fn a_daemon_killed_while_its_parent_is_in_hgs_open_transaction_comes_back_as_a_rolled_back_clone() {
    // While a changeset of hg's open transaction is the parent, the daemon is killed; hg
    // rolls the transaction back. The mount, mounted again, is what a clone is after the
    // same rollback: the parent of before, the files as they were written.
    let s = sides();
    let repo = s._tmp.path().join("repo");
    let log = &["log", "-G", "-T", "{rev}:{node} {desc} {files}\\n"][..];
    let compare = |s: &Sides| s.same_history_and_working_copy();
    let hg_exit = |dir: &Path, args: &[&str]| {
        let out = hg_cmd(dir, args);
        assert_eq!(out.status.code(), Some(255), "hg {args:?}: {out:?}");
    };
    // unshelve over a local change, the parent moved since the shelve: the local change
    // and the rebased shelve are committed in hg's transaction, and the daemon is killed
    // at the update back to the first (which keeps the shelved changes as local ones).
    // A clone's unshelve that fails there leaves the changes and the shelve: as --keep.
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nshelved\n").unwrap());
    s.same("", &["shelve", "--date", "20 0"]);
    s.edit(|r| std::fs::write(r.join("b.c"), "int b2;\n").unwrap());
    s.same("", &["commit", "-m", "moved", "-u", "test", "-d", "21 0"]);
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nlocal\n").unwrap());
    let kill = format!("hooks.update.kill=kill -9 {}", s.mount.daemon_pid());
    hg_exit(&s.mount.dir, &["--config", &kill, "unshelve"]);
    let out = hg_cmd(&s.clone, &["unshelve", "--keep"]);
    assert!(out.status.success(), "{out:?}");
    s.mount.unmount();
    s.mount.remount(&repo, None);
    compare(&s);
    s.same_all(&[&["commit", "-m", "both", "-u", "test", "-d", "22 0"]]);
    // A rebase in one transaction ends with an update to the last changeset it made:
    // the daemon's, to a changeset of the open transaction. A pretxnclose hook kills the
    // daemon in the mount and fails in the clone: both roll the rebase back.
    s.same_all(&[
        &["update", "1"],
        &["--config", "extensions.strip=", "strip", "-q", "-r", "3"],
    ]);
    s.edit(|r| {
        std::fs::write(r.join("e/x"), "x\nstack\n").unwrap();
        std::fs::write(r.join("new"), "new\n").unwrap();
    });
    s.same_all(&[
        &["commit", "-A", "-m", "stack", "-u", "test", "-d", "23 0"],
        &["rm", "gone"],
        &["commit", "-m", "stack2", "-u", "test", "-d", "24 0"],
        log,
    ]);
    let rebase = [
        "--config",
        "extensions.rebase=",
        "--config",
        "rebase.singletransaction=true",
    ];
    let kill = format!(
        "hooks.pretxnclose.kill=kill -9 {}; false",
        s.mount.daemon_pid()
    );
    let args = |hook: &str| -> Vec<String> {
        let mut v: Vec<String> = rebase.iter().map(|a| a.to_string()).collect();
        v.extend(["--config", hook, "rebase", "-s", "3", "-d", "2"].map(String::from));
        v
    };
    let argv = args(&kill);
    hg_exit(
        &s.mount.dir,
        &argv.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let argv = args("hooks.pretxnclose.fail=false");
    hg_exit(
        &s.clone,
        &argv.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    s.mount.unmount();
    s.mount.remount(&repo, None);
    compare(&s);
    s.same_all(&[&["update", "-C", "."], &["purge", "--no-confirm"]]);
    let mut argv: Vec<&str> = rebase.to_vec();
    argv.extend(["rebase", "-s", "3", "-d", "2"]);
    s.same_all(&[&argv, &["status", "-A"], log, &["verify", "-q"]]);
    s.revfs_status_is_hgs();
}

#[test]
fn a_daemon_killed_during_a_rebase_or_an_unshelve_comes_back_where_hg_continues_or_aborts() {
    // hg stopped on a conflict (rebase, unshelve); the daemon is killed and the mount
    // mounted again: the working copy is what the clone has, and hg goes on from there.
    let s = sides();
    let repo = s._tmp.path().join("repo");
    let rebase = "--config=extensions.rebase=";
    let log = &["log", "-G", "-T", "{rev}:{node} {desc} {files}\\n"][..];
    let crash = |s: &Sides| {
        s.mount.kill_daemon();
        s.mount.unmount();
        s.mount.remount(&repo, None);
    };
    s.same("", &["phase", "--draft", "--force", "-r", "all()"]);
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nleft\n").unwrap());
    s.same("", &["commit", "-m", "left", "-u", "test", "-d", "10 0"]);
    s.same("", &["update", "1"]);
    s.edit(|r| {
        std::fs::write(r.join("d/f"), "f\nright\n").unwrap();
        std::fs::write(r.join("r"), "r\n").unwrap();
    });
    s.same(
        "",
        &["commit", "-A", "-m", "right", "-u", "test", "-d", "11 0"],
    );
    s.edit(|r| std::fs::write(r.join("b.c"), "int b2;\n").unwrap());
    s.same("", &["commit", "-m", "stack", "-u", "test", "-d", "12 0"]);
    // A rebase stopped on its conflict, the daemon killed: abort, then again and continue.
    for end in [
        &[rebase, "rebase", "--abort"][..],
        &[rebase, "rebase", "--continue"],
    ] {
        s.same("", &[rebase, "rebase", "-s", "3", "-d", "2"]);
        crash(&s);
        for args in [
            &["status", "-A"][..],
            &["resolve", "-l"],
            &["diff", "--git"],
        ] {
            s.same("", args);
        }
        if end[2] == "--continue" {
            s.edit(|r| std::fs::write(r.join("d/f"), "f\nboth\n").unwrap());
            s.same("", &["resolve", "--mark", "d/f"]);
        }
        s.same("", end);
        s.same("", &["status", "-A"]);
        s.same("", log);
    }
    // An unshelve stopped on its conflict, the daemon killed: abort, then again and
    // continue.
    s.edit(|r| std::fs::write(r.join("a"), "shelved\n").unwrap());
    s.same("", &["shelve", "--date", "20 0"]);
    s.edit(|r| std::fs::write(r.join("a"), "committed\n").unwrap());
    s.same("", &["commit", "-m", "a", "-u", "test", "-d", "21 0"]);
    for end in [&["unshelve", "--abort"][..], &["unshelve", "--continue"]] {
        s.same("", &["unshelve", "--keep"]);
        crash(&s);
        for args in [&["status", "-A"][..], &["resolve", "-l"], &["summary"]] {
            s.same("", args);
        }
        if end[1] == "--continue" {
            s.edit(|r| std::fs::write(r.join("a"), "both\n").unwrap());
            s.same("", &["resolve", "--mark", "a"]);
        }
        s.same("", end);
        s.same("", &["status", "-A"]);
        s.same("", log);
    }
    s.same("", &["verify", "-q"]);
    s.revfs_status_is_hgs();
}

#[test]
fn a_daemon_killed_in_an_unshelve_or_a_shelve_that_change_tracking_comes_back_as_an_interrupted_clone(
) {
    // Unshelve and shelve change what is tracked inside a transaction they end by rolling
    // back (keeping the dirstate they made). Interrupted before that end, hg rolls the
    // transaction back and its dirstate backup with it: the tracking of before, the files
    // as written. The daemon is killed in the mount at the update hook; the clone is
    // interrupted at the same hook (a KeyboardInterrupt, which aborts the transaction).
    let s = sides();
    let repo = s._tmp.path().join("repo");
    let stop = s._tmp.path().join("stop.py");
    std::fs::write(&stop, "def hook(**kwargs):\n    raise KeyboardInterrupt\n").unwrap();
    let stop = format!("hooks.update.stop=python:{}:hook", stop.display());
    let interrupted = |s: &Sides, args: &[&str]| {
        let kill = format!("hooks.update.kill=kill -9 {}", s.mount.daemon_pid());
        let mut full = vec!["--config", &kill];
        full.extend(args);
        let out = hg_cmd(&s.mount.dir, &full);
        assert_eq!(out.status.code(), Some(255), "hg {full:?}: {out:?}");
        let mut full = vec!["--config", &stop];
        full.extend(args);
        let out = hg_cmd(&s.clone, &full);
        assert_eq!(out.status.code(), Some(255), "hg {full:?}: {out:?}");
        s.mount.unmount();
        s.mount.remount(&repo, None);
        s.same_history_and_working_copy();
    };
    // A shelve with an added file, a copy and a removal, unshelved over local changes
    // with an added and a removed file of their own, after the parent moved.
    s.edit(|r| {
        std::fs::write(r.join("a"), "a\na2\nshelved\n").unwrap();
        std::fs::write(r.join("shelvednew"), "sn\n").unwrap();
    });
    s.same_all(&[
        &["add", "shelvednew"],
        &["rm", "gone"],
        &["cp", "a", "acopy"],
    ]);
    s.same("", &["shelve", "--date", "20 0"]);
    s.edit(|r| std::fs::write(r.join("b.c"), "int b2;\n").unwrap());
    s.same("", &["commit", "-m", "moved", "-u", "test", "-d", "21 0"]);
    s.edit(|r| {
        std::fs::write(r.join("d/f"), "f\nlocal\n").unwrap();
        std::fs::write(r.join("localnew"), "ln\n").unwrap();
    });
    s.same_all(&[&["add", "localnew"], &["rm", "e/x"]]);
    interrupted(&s, &["unshelve"]);
    // hg goes on alike: the changes shelved again with their unknown files (-A), and
    // that shelve interrupted at its update back to the parent.
    s.same_all(&[&["status"], &["add", "acopy"]]);
    interrupted(&s, &["shelve", "-A", "--date", "22 0"]);
    s.same_all(&[
        &["shelve", "-A", "--date", "23 0"],
        &["status", "-A"],
        &["shelve", "-l", "-q"],
    ]);
    // Tracking changed inside transactions that ended (the unshelve's, rolled back with
    // its dirstate kept; a commit's) is journaled: a daemon killed afterwards keeps it.
    s.same_all(&[&["unshelve"], &["status", "-A", "-C"]]);
    // An extension's command adds a file inside a transaction that closes, asking status
    // in between (which sends the change to the daemon inside the transaction).
    let ext = s._tmp.path().join("txadd.py");
    std::fs::write(
        &ext,
        "import contextlib\n\
         from mercurial import registrar\n\
         cmdtable = {}\n\
         command = registrar.command(cmdtable)\n\
         @command(b'txadd', [], b'FILE')\n\
         def txadd(ui, repo, f):\n\
         \x20   with repo.wlock(), repo.lock(), repo.transaction(b'txadd'):\n\
         \x20       ds = repo.dirstate\n\
         \x20       # hg 6.4 and later: tracking changes in their scope.\n\
         \x20       scope = getattr(ds, 'changing_files', None)\n\
         \x20       with scope(repo) if scope else contextlib.nullcontext():\n\
         \x20           repo[None].add([f])\n\
         \x20       ui.write(b'%d\\n' % len(repo.status().added))\n",
    )
    .unwrap();
    s.edit(|r| std::fs::write(r.join("txnew"), "t\n").unwrap());
    let ext = format!("extensions.txadd={}", ext.display());
    s.same_all(&[
        &["--config", &ext, "txadd", "txnew"],
        &["status", "-A", "-C"],
    ]);
    s.mount.kill_daemon();
    s.mount.unmount();
    s.mount.remount(&repo, None);
    s.same_all(&[&["status", "-A", "-C"], &["diff", "--git"]]);
    s.revfs_status_is_hgs();
}
