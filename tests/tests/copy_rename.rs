//! `revfs copy` and `revfs rename` in a mount against `hg copy` and `hg rename` in a
//! checkout of the same revision: the same sequences of commands (files, directories,
//! patterns, `--after`, `--force`, `--dry-run`, `--forget`, errors, from subdirectories,
//! on added, removed and deleted sources) must print the same stdout and stderr, exit with
//! the same code, and leave the same `status -C` and the same files.

use revfs_tests::mount::{snapshot, Mount};
use revfs_tests::{fixtures, hg_cmd, revfs};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// One step, applied to both trees.
enum Step {
    /// `revfs ARGS` in the mount and `hg ARGS` in the checkout, from a subdirectory.
    Cmd(&'static str, &'static [&'static str]),
    Write(&'static str, &'static str),
    Unlink(&'static str),
    Mkdir(&'static str),
    Chmod(&'static str, u32),
    /// A copy or move made without hg (for `--after`).
    FsCopy(&'static str, &'static str),
    FsMove(&'static str, &'static str),
}
use Step::*;

/// The same command from the root.
const fn at_root(args: &'static [&'static str]) -> Step {
    Cmd("", args)
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// Output with the tree's root replaced, so that both sides can be compared.
fn normalized(out: &Output, root: &Path) -> (Option<i32>, String, String) {
    let root = canonical(root);
    let n = |b: &[u8]| String::from_utf8_lossy(b).replace(&root, "$ROOT");
    (out.status.code(), n(&out.stdout), n(&out.stderr))
}

fn apply_fs(step: &Step, root: &Path) {
    let p = |rel: &str| root.join(rel);
    match step {
        Write(f, data) => std::fs::write(p(f), data).unwrap(),
        Unlink(f) => std::fs::remove_file(p(f)).unwrap(),
        Mkdir(d) => std::fs::create_dir_all(p(d)).unwrap(),
        Chmod(f, mode) => {
            std::fs::set_permissions(p(f), std::fs::Permissions::from_mode(*mode)).unwrap()
        }
        FsCopy(a, b) => {
            std::fs::copy(p(a), p(b)).unwrap();
        }
        FsMove(a, b) => std::fs::rename(p(a), p(b)).unwrap(),
        Cmd(..) => unreachable!(),
    }
}

/// A checkout of `fixture` at `rev`, and a mount of the same revision.
fn trees(fixture: &str, rev: &str) -> (tempfile::TempDir, PathBuf, Mount) {
    let repo = fixtures().join(fixture);
    let tmp = revfs_tests::scratch_dir();
    let out = hg_cmd(
        tmp.path(),
        &[
            "clone",
            "-q",
            "-u",
            rev,
            "--config",
            "ui.portablefilenames=ignore",
            &repo.display().to_string(),
            "wc",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wc = tmp.path().join("wc");
    let mount = Mount::new(&repo, Some(rev));
    (tmp, wc, mount)
}

fn run_scenario(name: &str, fixture: &str, steps: &[Step]) {
    let (_tmp, wc, mount) = trees(fixture, "tip");
    let mut log: Vec<String> = Vec::new();
    for step in steps {
        match step {
            Cmd(cwd, args) => {
                let ours = revfs(&mount.dir.join(cwd), args);
                let theirs = hg_cmd(&wc.join(cwd), args);
                log.push(format!("(cd {cwd:?}) {args:?}"));
                let (o, t) = (normalized(&ours, &mount.dir), normalized(&theirs, &wc));
                assert_eq!(
                    o,
                    t,
                    "{name}: {args:?} in {cwd:?} differs (left revfs, right hg)\nafter:\n  {}",
                    log.join("\n  ")
                );
                for st in [&["status", "-C"][..], &["status", "-A", "-C"]] {
                    let ours = revfs(&mount.dir, st);
                    let theirs = hg_cmd(&wc, st);
                    assert!(
                        ours.status.success(),
                        "{}",
                        String::from_utf8_lossy(&ours.stderr)
                    );
                    assert_eq!(
                        String::from_utf8_lossy(&ours.stdout),
                        String::from_utf8_lossy(&theirs.stdout),
                        "{name}: {st:?} after {args:?} differs (left revfs, right hg)\nafter:\n  {}",
                        log.join("\n  ")
                    );
                }
            }
            other => {
                apply_fs(other, &mount.dir);
                apply_fs(other, &wc);
            }
        }
    }
    let (ours, theirs) = (snapshot(&mount.dir), snapshot(&wc));
    if ours != theirs {
        let a: Vec<_> = ours.iter().map(|(p, _)| p).collect();
        let b: Vec<_> = theirs.iter().map(|(p, _)| p).collect();
        panic!("{name}: trees differ\nrevfs: {a:?}\nhg: {b:?}");
    }
}

#[test]
fn argument_errors() {
    run_scenario(
        "errors",
        "tiny",
        &[
            at_root(&["copy"]),
            at_root(&["copy", "a.txt"]),
            at_root(&["rename"]),
            at_root(&["rename", "a.txt"]),
            at_root(&["copy", "nonexist", "x"]),
            at_root(&["rename", "nonexist", "x"]),
            at_root(&["copy", "a.txt", "b/c.txt", "x"]),
            at_root(&["copy", "a.txt", "x/"]),
            at_root(&["rename", "glob:*.txt", "x"]),
            Write("u", "unknown\n"),
            at_root(&["copy", "u", "u2"]),
            at_root(&["copy", "u", "a.txt", "b"]),
            at_root(&["copy", "-A", "a.txt", "zz"]),
            at_root(&["rename", "-A", "a.txt", "zz"]),
            at_root(&["copy", "--forget", "-n", "a.txt"]),
            at_root(&["copy", "a.txt", ".hg/x"]),
            at_root(&["copy", "a.txt", "../outside"]),
            at_root(&["copy", "a.txt", "a.txt"]),
            at_root(&["cp", "a.txt", "a.txt/sub"]),
            // hg deletes a file forced onto itself, and a rename then marks it removed.
            at_root(&["copy", "-f", "b/c.txt", "b/c.txt"]),
            at_root(&["rename", "-f", "a.txt", "a.txt"]),
        ],
    );
}

#[test]
fn copying_files() {
    run_scenario(
        "copy files",
        "tiny",
        &[
            at_root(&["copy", "a.txt", "a2.txt"]),
            at_root(&["copy", "-v", "a.txt", "b"]),
            at_root(&["copy", "a.txt", "b/c.txt"]),
            at_root(&["copy", "--force", "a.txt", "b/c.txt"]),
            Write("u.txt", "unknown\n"),
            at_root(&["copy", "a.txt", "u.txt"]),
            at_root(&["cp", "-f", "a.txt", "u.txt"]),
            at_root(&["copy", "-n", "a.txt", "dry.txt"]),
            at_root(&["copy", "--dry-run", "-v", "b", "drydir"]),
            // A copy of a copy records the original source.
            at_root(&["copy", "a2.txt", "a3.txt"]),
            at_root(&["copy", "a.txt", "x:y"]),
            at_root(&["copy", "a.txt", "new/deep/dir/file"]),
            Chmod("a.txt", 0o755),
            at_root(&["copy", "a.txt", "exec.txt"]),
            at_root(&["copy", "-q", "b", "bq"]),
            at_root(&["copy", "b", "b2"]),
            at_root(&["copy", "b", "b2"]),
            at_root(&["copy", "glob:*.txt", "b2"]),
        ],
    );
}

#[test]
fn renaming_files_and_directories() {
    run_scenario(
        "rename",
        "tiny",
        &[
            at_root(&["rename", "a.txt", "moved.txt"]),
            // Back to where it came from: tracked again, no copy.
            at_root(&["rename", "moved.txt", "a.txt"]),
            at_root(&["mv", "b", "nb"]),
            at_root(&["move", "-v", "a.txt", "nb"]),
            Mkdir("existing"),
            at_root(&["mv", "nb", "existing"]),
            at_root(&["mv", "existing/nb/a.txt", "existing/nb/c.txt"]),
            at_root(&["mv", "-f", "existing/nb/a.txt", "existing/nb/c.txt"]),
            at_root(&["rename", "-n", "existing", "dry"]),
            at_root(&["rename", "existing", "renamed"]),
        ],
    );
}

#[test]
fn added_removed_and_deleted_sources() {
    run_scenario(
        "added and removed sources",
        "tiny",
        &[
            Write("new.txt", "new\n"),
            at_root(&["add", "new.txt"]),
            at_root(&["copy", "new.txt", "new2.txt"]),
            at_root(&["copy", "-q", "new.txt", "new2q.txt"]),
            at_root(&["rename", "new.txt", "new3.txt"]),
            at_root(&["remove", "a.txt"]),
            at_root(&["copy", "a.txt", "z.txt"]),
            at_root(&["rename", "a.txt", "z.txt"]),
            Write("z.txt", "hello\nworld\n"),
            at_root(&["copy", "-A", "a.txt", "z.txt"]),
            at_root(&["rename", "-A", "a.txt", "z.txt"]),
            Unlink("b/c.txt"),
            at_root(&["copy", "b/c.txt", "cc"]),
            at_root(&["rename", "b/c.txt", "cc2"]),
        ],
    );
}

#[test]
fn after_records_what_was_done_by_hand() {
    run_scenario(
        "after",
        "tiny",
        &[
            FsMove("a.txt", "b/a-moved.txt"),
            at_root(&["rename", "-A", "a.txt", "b/a-moved.txt"]),
            FsCopy("b/c.txt", "c-copy.txt"),
            at_root(&["copy", "--after", "b/c.txt", "c-copy.txt"]),
            at_root(&["copy", "-A", "b/c.txt", "b/a-moved.txt"]),
            at_root(&["copy", "-A", "b/c.txt", "c-copy.txt"]),
            at_root(&["copy", "-A", "-f", "b/c.txt", "c-copy.txt"]),
            FsMove("b", "bb"),
            at_root(&["rename", "-A", "b", "bb"]),
            Mkdir("dest/bb"),
            FsCopy("bb/c.txt", "dest/bb/c.txt"),
            at_root(&["copy", "-A", "bb", "dest"]),
        ],
    );
}

#[test]
fn from_a_subdirectory() {
    run_scenario(
        "subdirectory",
        "tiny",
        &[
            Cmd("b", &["copy", "c.txt", "../c-up.txt"]),
            Cmd("b", &["copy", "c.txt", "d.txt"]),
            Cmd("b", &["rename", "-v", "../a.txt", "."]),
            Cmd("b", &["copy", "nonexist", "x"]),
            Cmd("b", &["copy", ".", "../bcopy"]),
            Cmd("b", &["copy", "c.txt", "../b"]),
            Cmd("b", &["copy", "--forget", "d.txt", "../c-up.txt"]),
            Cmd("b", &["copy", "../../x", "y"]),
        ],
    );
}

#[test]
fn forget_and_collisions() {
    run_scenario(
        "forget",
        "tiny",
        &[
            at_root(&["copy", "a.txt", "f1"]),
            at_root(&["copy", "a.txt", "f2"]),
            at_root(&["copy", "a.txt", "f3"]),
            Write("unknown", "u\n"),
            at_root(&["copy", "--forget", "f1", "a.txt", "nonexist", "unknown"]),
            at_root(&["rename", "--forget"]),
            at_root(&["copy", "a.txt", "b/a.txt"]),
            Mkdir("d"),
            at_root(&["copy", "a.txt", "b/a.txt", "d"]),
        ],
    );
}

#[test]
fn a_large_tree_with_symlinks_and_awkward_names() {
    run_scenario(
        "history",
        "history",
        &[
            at_root(&["copy", "links", "links2"]),
            at_root(&["rename", "Dir", "Dir2"]),
            at_root(&["copy", "glob:bin/*.md", "docs"]),
            at_root(&["copy", "re:^meta/", "docs"]),
            at_root(&["copy", "MixedCase", "Dir2"]),
            at_root(&["copy", "-A", "links", "links2"]),
            at_root(&["copy", "aux.c", "nul.c"]),
            at_root(&["rename", "dir é", "dir ü"]),
            at_root(&["copy", " leading space.txt", "trailing space "]),
            // A symbolic link to a directory is a file to hg, but a directory to isdir().
            at_root(&["copy", "links/dir", "linkcopy"]),
            at_root(&["copy", "links/dir", "Dir2"]),
            at_root(&["rename", "links/readme", "links/dir"]),
            at_root(&["copy", "-v", "docs", "links"]),
        ],
    );
}
