//! Hard links in a mount, as on ext4: link(2) of store and overlay files and symlinks, one
//! inode and one content for the names, link counts and change times, unlink and rename of
//! linked names, an open file whose last name goes; the links rebuilt after an unmount and
//! after a kill -9; and hg's view (each name a file) compared with a clone on ext4 where the
//! same `ln` was done.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_repo};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const PATHS: &[&str] = &[
    "a", "a2", "d/b", "e/b2", "e/b3", "n", "n2", "l", "l2", "x", "x2",
];

/// A path's link count, the first path of `PATHS` with the same inode, and its content (a
/// link's target); `None` when absent.
type Seen = (String, Option<(u64, String, Vec<u8>)>);

/// Each path of `PATHS` as seen.
fn view(root: &Path) -> Vec<Seen> {
    let inos: Vec<Option<u64>> = PATHS
        .iter()
        .map(|p| {
            std::fs::symlink_metadata(root.join(p))
                .ok()
                .map(|m| m.ino())
        })
        .collect();
    PATHS
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let full = root.join(p);
            let state = std::fs::symlink_metadata(&full).ok().map(|m| {
                let first = inos.iter().position(|x| *x == inos[i]).unwrap_or(i);
                let content = if m.file_type().is_symlink() {
                    use std::os::unix::ffi::OsStrExt;
                    std::fs::read_link(&full)
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec()
                } else {
                    std::fs::read(&full).unwrap()
                };
                (m.nlink(), PATHS[first].to_string(), content)
            });
            (p.to_string(), state)
        })
        .collect()
}

struct Sides {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    clone: PathBuf,
    mount: Mount,
}

impl Sides {
    fn new() -> Sides {
        let tmp = revfs_tests::scratch_dir();
        let repo = hg_repo(tmp.path(), &[("a", "a\n"), ("d/b", "b\n"), ("x", "x\n")]);
        std::os::unix::fs::symlink("a", repo.join("l")).unwrap();
        let out = hg_cmd(&repo, &["commit", "-qAm", "link", "-d", "1 0"]);
        assert!(out.status.success(), "{out:?}");
        let out = hg_cmd(tmp.path(), &["clone", "-q", "repo", "clone"]);
        assert!(out.status.success(), "{out:?}");
        let mount = Mount::new(&repo, None);
        Sides {
            clone: tmp.path().join("clone"),
            repo,
            mount,
            tmp,
        }
    }

    fn both(&self, f: impl Fn(&Path)) {
        f(&self.mount.dir);
        f(&self.clone);
    }

    /// The same names, links and contents on both sides, and the same hg status and diff.
    fn same(&self, when: &str) {
        assert_eq!(view(&self.mount.dir), view(&self.clone), "{when}");
        for args in [&["status", "-A"][..], &["diff", "--git"]] {
            let (m, c) = (hg_cmd(&self.mount.dir, args), hg_cmd(&self.clone, args));
            assert_eq!(
                (m.status.code(), &m.stdout, &m.stderr),
                (c.status.code(), &c.stdout, &c.stderr),
                "hg {args:?} {when}"
            );
        }
    }

    fn hg(&self, args: &[&str]) {
        self.both(|root| {
            let out = hg_cmd(root, args);
            assert!(out.status.success(), "hg {args:?} in {root:?}: {out:?}");
        });
    }
}

#[test]
fn linked_names_are_one_file_for_programs_and_separate_files_for_hg_as_on_ext4() {
    let s = Sides::new();
    let mnt = &s.mount.dir;
    // A store file: copied up, then one inode; its change time moves, its content stays.
    let before = std::fs::metadata(mnt.join("a")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    s.both(|r| std::fs::hard_link(r.join("a"), r.join("a2")).unwrap());
    let (a, a2) = (
        std::fs::metadata(mnt.join("a")).unwrap(),
        std::fs::metadata(mnt.join("a2")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink(), a2.nlink()), (a2.ino(), 2, 2));
    assert!(
        (a.ctime(), a.ctime_nsec()) > (before.ctime(), before.ctime_nsec()),
        "link changes the file's ctime"
    );
    assert_eq!(
        (a.mtime(), a.mtime_nsec()),
        (before.mtime(), before.mtime_nsec())
    );
    s.same("after ln a a2");
    // Writes through either name are seen through the other.
    s.both(|r| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(r.join("a2"))
            .unwrap();
        f.write_all(b"through a2\n").unwrap();
    });
    s.same("after a write through a2");
    // New files, a new directory, a symlink, a third name.
    s.both(|r| {
        std::fs::write(r.join("n"), "n\n").unwrap();
        std::fs::hard_link(r.join("n"), r.join("n2")).unwrap();
        std::fs::create_dir(r.join("e")).unwrap();
        std::fs::hard_link(r.join("d/b"), r.join("e/b2")).unwrap();
        std::fs::hard_link(r.join("e/b2"), r.join("e/b3")).unwrap();
        std::fs::hard_link(r.join("l"), r.join("l2")).unwrap();
        std::fs::write(r.join("e/b3"), "b3\n").unwrap();
    });
    s.same("after more links");
    assert_eq!(std::fs::metadata(mnt.join("d/b")).unwrap().nlink(), 3);
    // A name already there is refused; a directory cannot be linked.
    s.both(|r| {
        let e = std::fs::hard_link(r.join("n"), r.join("x")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "{r:?}");
        let e = std::fs::hard_link(r.join("d"), r.join("d2")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{r:?}");
    });
    // Unlinking the first name keeps the others; a rename onto another name of the same
    // file does nothing; a rename of a linked name over another file replaces it.
    s.both(|r| {
        std::fs::remove_file(r.join("d/b")).unwrap();
        std::fs::rename(r.join("n2"), r.join("n")).unwrap();
        std::fs::rename(r.join("e/b3"), r.join("x")).unwrap();
    });
    s.same("after unlink and renames");
    assert_eq!(std::fs::metadata(mnt.join("e/b2")).unwrap().nlink(), 2);
    // An open file whose last name goes stays usable until it is closed.
    s.both(|r| {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(r.join("n"))
            .unwrap();
        std::fs::remove_file(r.join("n")).unwrap();
        std::fs::remove_file(r.join("n2")).unwrap();
        f.write_all(b"gone\n").unwrap();
        f.rewind().unwrap();
        let mut back = String::new();
        f.read_to_string(&mut back).unwrap();
        assert_eq!(back, "gone\n", "{r:?}");
        assert_eq!(f.metadata().unwrap().nlink(), 0, "{r:?}");
    });
    s.same("after the last name of an open file went");
    // The links come back after an unmount, and after a kill -9.
    let linked = view(mnt);
    let ino = std::fs::metadata(mnt.join("a")).unwrap().ino();
    s.mount.unmount();
    s.mount.remount(&s.repo, None);
    assert_eq!(view(mnt), linked, "after a remount");
    assert_eq!(
        std::fs::metadata(mnt.join("a2")).unwrap().ino(),
        std::fs::metadata(mnt.join("a")).unwrap().ino()
    );
    let _ = ino;
    s.mount.kill_daemon();
    s.mount.unmount();
    s.mount.remount(&s.repo, None);
    assert_eq!(view(mnt), linked, "after a kill -9 and a remount");
    s.same("after a remount");
    // hg: each name a file. A commit keeps the links; a revert writes a new file for the
    // name it restores, whose other names keep the content.
    s.hg(&["add", "a2", "e/b2", "l2"]);
    s.hg(&["commit", "-m", "links", "-u", "test", "-d", "2 0"]);
    s.same("after a commit");
    assert_eq!(std::fs::metadata(mnt.join("a")).unwrap().nlink(), 2);
    s.both(|r| std::fs::write(r.join("a2"), "a changed\n").unwrap());
    s.hg(&["revert", "--no-backup", "a"]);
    s.same("after a revert of one name");
    // The journal rewritten by the commit holds the links too.
    let linked = view(mnt);
    s.mount.kill_daemon();
    s.mount.unmount();
    s.mount.remount(&s.repo, None);
    assert_eq!(
        view(mnt),
        linked,
        "after the commit, a kill -9 and a remount"
    );
    let _ = &s.tmp;
}

/// The names of the storm's directory: name -> file (by the order of its creation); files'
/// contents.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    names: std::collections::BTreeMap<String, u64>,
    contents: std::collections::BTreeMap<u64, Vec<u8>>,
}

impl Model {
    /// What the directory shows: each name's content and the names of its inode.
    fn seen(&self) -> Vec<(String, Vec<u8>, Vec<String>)> {
        self.names
            .iter()
            .map(|(n, f)| {
                let group = self
                    .names
                    .iter()
                    .filter(|(_, g)| *g == f)
                    .map(|(m, _)| m.clone())
                    .collect();
                (n.clone(), self.contents[f].clone(), group)
            })
            .collect()
    }
}

fn seen_on_disk(dir: &Path) -> Vec<(String, Vec<u8>, Vec<String>)> {
    let mut names: Vec<(String, u64, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            (e.file_name().into_string().unwrap(), m.ino(), m.nlink())
        })
        .collect();
    names.sort();
    names
        .iter()
        .map(|(n, ino, nlink)| {
            let group: Vec<String> = names
                .iter()
                .filter(|(_, i, _)| i == ino)
                .map(|(m, _, _)| m.clone())
                .collect();
            assert_eq!(*nlink, group.len() as u64, "{n}: link count");
            (n.clone(), std::fs::read(dir.join(n)).unwrap(), group)
        })
        .collect()
}

/// Creates, links, rewrites, unlinks and renames names of one directory, fsyncing each
/// change (the file, then the directory) before the next; `states` gets the model after
/// each attempted change (a rewrite's truncation too), `acked` the number acknowledged.
fn link_storm(dir: &Path, seed: u64, states: &std::sync::Mutex<(Vec<Model>, usize)>) {
    let mut rng = revfs_tests::Rng::new(seed);
    let mut model = Model::default();
    let mut next_file = 0u64;
    loop {
        let a = format!("n{}", rng.below(12));
        let b = format!("n{}", rng.below(12));
        let mut after = model.clone();
        // A rewrite is seen truncated before it is written (one write(2) of a few bytes).
        let mut truncated = None;
        let op: Box<dyn Fn() -> std::io::Result<()>> = match rng.below(5) {
            0 => {
                next_file += 1;
                let content = format!("file {next_file}\n").repeat(rng.below(20) + 1);
                // A write through an existing name: every name of it sees it.
                let f = *after.names.entry(a.clone()).or_insert(next_file);
                after.contents.insert(f, Vec::new());
                truncated = Some(after.clone());
                after.contents.insert(f, content.clone().into_bytes());
                let p = dir.join(&a);
                Box::new(move || {
                    let mut f = std::fs::File::create(&p)?;
                    f.write_all(content.as_bytes())?;
                    f.sync_all()
                })
            }
            1 | 2 => {
                let Some(&f) = model.names.get(&a) else {
                    continue;
                };
                if model.names.contains_key(&b) {
                    continue;
                }
                after.names.insert(b.clone(), f);
                let (from, to) = (dir.join(&a), dir.join(&b));
                Box::new(move || std::fs::hard_link(&from, &to))
            }
            3 => {
                if after.names.remove(&a).is_none() {
                    continue;
                }
                let p = dir.join(&a);
                Box::new(move || std::fs::remove_file(&p))
            }
            _ => {
                let Some(&f) = model.names.get(&a) else {
                    continue;
                };
                if model.names.get(&b) != Some(&f) {
                    after.names.remove(&a);
                    after.names.insert(b.clone(), f);
                }
                let (from, to) = (dir.join(&a), dir.join(&b));
                Box::new(move || std::fs::rename(&from, &to))
            }
        };
        after
            .contents
            .retain(|f, _| after.names.values().any(|g| g == f));
        let steps = 1 + usize::from(truncated.is_some());
        states
            .lock()
            .unwrap()
            .0
            .extend(truncated.into_iter().chain([after.clone()]));
        if op().is_err() || std::fs::File::open(dir).and_then(|d| d.sync_all()).is_err() {
            return;
        }
        states.lock().unwrap().1 += steps;
        model = after;
    }
}

#[test]
fn a_daemon_killed_in_a_storm_of_links_unlinks_and_renames_keeps_every_fsynced_name() {
    let tmp = revfs_tests::scratch_dir();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let mount = Mount::new(&repo, None);
    let dir = mount.dir.join("storm");
    for round in 0..revfs_tests::env_or("REVFS_CRASH_ROUNDS", 8u64) {
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        let states = std::sync::Arc::new(std::sync::Mutex::new((vec![Model::default()], 1)));
        let storm = {
            let (dir, states) = (dir.clone(), states.clone());
            std::thread::spawn(move || link_storm(&dir, 0x1ee7 + round, &states))
        };
        let mut rng = revfs_tests::Rng::new(0x4b1d + round);
        std::thread::sleep(std::time::Duration::from_millis(
            100 + rng.below(300) as u64,
        ));
        mount.kill_daemon();
        storm.join().unwrap();
        mount.unmount();
        mount.remount(&repo, None);
        let (states, acked) = states.lock().unwrap().clone();
        assert!(
            acked > 5,
            "round {round}: the storm acknowledged {acked} changes"
        );
        // The last acknowledged state, or the one attempted after it.
        let got = seen_on_disk(&dir);
        let allowed: Vec<_> = states[acked - 1..].iter().map(Model::seen).collect();
        assert!(
            allowed.contains(&got),
            "round {round}: after the crash {got:?}\nexpected one of {allowed:?}"
        );
    }
}

/// Runs `cmd` in `dir` (a fixed identity and dates for git); it must succeed.
fn run(dir: &Path, cmd: &[&str]) {
    let out = std::process::Command::new(cmd[0])
        .args(&cmd[1..])
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} in {dir:?}: {out:?}");
}

#[test]
fn cp_al_rsync_link_dest_and_a_local_git_clone_work_in_a_mount_as_on_ext4() {
    let s = Sides::new();
    s.both(|r| {
        // cp -al of a directory with a store file, then edits on both sides of it.
        std::fs::write(r.join("d/new"), "new\n").unwrap();
        run(r, &["cp", "-al", "d", "copy"]);
        std::fs::write(r.join("copy/c"), "only in the copy\n").unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(r.join("copy/b"))
            .unwrap();
        f.write_all(b"edited through the copy\n").unwrap();
        std::fs::write(r.join("d/new"), "rewritten in place\n").unwrap();
        // rsync --link-dest: unchanged files are links to the reference tree.
        run(r, &["rsync", "-a", "--link-dest=../d", "d/", "backup/"]);
        // A local git clone links the objects of its source.
        run(r, &["git", "init", "-q", "-b", "main", "src"]);
        std::fs::write(r.join("src/f"), "f\n").unwrap();
        run(&r.join("src"), &["git", "add", "f"]);
        run(&r.join("src"), &["git", "commit", "-q", "-m", "one"]);
        std::fs::write(r.join("src/f"), "f\nf2\n").unwrap();
        run(&r.join("src"), &["git", "commit", "-q", "-am", "two"]);
        run(r, &["git", "clone", "-q", "src", "dst"]);
        run(
            &r.join("dst"),
            &["git", "fsck", "--strict", "--no-progress"],
        );
        run(&r.join("dst"), &["git", "log", "--oneline"]);
    });
    let objects = |root: &Path| -> u64 {
        let dir = root.join("dst/.git/objects");
        revfs_tests::tree_files(&dir)
            .iter()
            .filter(|p| std::fs::metadata(dir.join(p)).unwrap().nlink() == 2)
            .count() as u64
    };
    assert!(objects(&s.mount.dir) > 0, "git clone linked no object");
    assert_eq!(objects(&s.mount.dir), objects(&s.clone));
    // Git's index, config and logs hold times and paths of their own side: its objects and
    // everything else are compared.
    let snap = |r: &Path| {
        let mut v = revfs_tests::mount::snapshot(r);
        v.retain(|(p, _)| {
            let p = p.to_string_lossy();
            !p.contains(".git/") || p.contains(".git/objects/")
        });
        v
    };
    assert_eq!(
        snap(&s.mount.dir),
        snap(&s.clone),
        "the trees, link counts included"
    );
    s.same("after cp -al, rsync --link-dest and git clone");
    s.mount.unmount();
    s.mount.remount(&s.repo, None);
    assert_eq!(snap(&s.mount.dir), snap(&s.clone), "after a remount");
    run(
        &s.mount.dir.join("dst"),
        &["git", "fsck", "--strict", "--no-progress"],
    );
}

#[test]
fn revfs_update_and_revert_give_the_name_they_change_a_file_of_its_own_as_hg_does() {
    let tmp = revfs_tests::scratch_dir();
    let repo = hg_repo(tmp.path(), &[("a", "a\n"), ("x", "x\n")]);
    std::fs::write(repo.join("a"), "a1\n").unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qm", "a1", "-d", "1 0"])
        .status
        .success());
    assert!(hg_cmd(tmp.path(), &["clone", "-q", "repo", "clone"])
        .status
        .success());
    let s = Sides {
        clone: tmp.path().join("clone"),
        mount: Mount::new(&repo, None),
        repo,
        tmp,
    };
    let both_cmd = |revfs_args: &[&str], hg_args: &[&str]| {
        let out = revfs_tests::revfs(&s.mount.dir, revfs_args);
        assert!(out.status.success(), "revfs {revfs_args:?}: {out:?}");
        let out = hg_cmd(&s.clone, hg_args);
        assert!(out.status.success(), "hg {hg_args:?}: {out:?}");
    };
    // An update that changes a linked name: the other name keeps the old content.
    s.both(|r| std::fs::hard_link(r.join("a"), r.join("a2")).unwrap());
    both_cmd(&["update", "-q", "0"], &["update", "-q", "0"]);
    s.same("after an update that changes one of two names");
    assert_eq!(
        std::fs::metadata(s.mount.dir.join("a2")).unwrap().nlink(),
        1
    );
    // A revert of a name modified through another.
    s.both(|r| {
        std::fs::hard_link(r.join("x"), r.join("x2")).unwrap();
        std::fs::write(r.join("x2"), "x through x2\n").unwrap();
    });
    both_cmd(&["revert", "-C", "x"], &["revert", "--no-backup", "x"]);
    s.same("after a revert of one of two names");
    assert_eq!(
        std::fs::read(s.mount.dir.join("x2")).unwrap(),
        b"x through x2\n"
    );
    let linked = view(&s.mount.dir);
    s.mount.kill_daemon();
    s.mount.unmount();
    s.mount.remount(&s.repo, None);
    assert_eq!(view(&s.mount.dir), linked, "after a kill -9 and a remount");
    let _ = &s.tmp;
}
