//! Every Mercurial release the extension serves (hgext/revfs/compat.py: 6.3 to 7.2), in a
//! mount as in a clone: for each release tests/deps.sh installed under
//! target/hg-versions (one of each minor version; Debian's 6.3.2 runs the whole of
//! hg_in_mount.rs), a repository made by that hg is mounted and cloned, and the same
//! day of work (tracking, commits, updates clean and over local changes, a merge with a
//! conflict, rebase, shelve, a transaction that fails, rollback, purge) must print the
//! same bytes and exit alike on both sides, and leave the same history and tree. A release
//! outside the range is refused with one `abort:` line naming the range and the release.
//!
//! `REVFS_HG_VERSIONS` (a space-separated list, or `all`) picks the releases (BY_DEFAULT
//! otherwise); tests/long.sh runs every one, and hg_in_mount.rs whole with each.

use revfs_tests::mount::{snapshot, Mount};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The releases the suite runs by default: the last of hg's second dirstate protocol
/// (compat.py: 6.4's change scopes and no backups, and 7.2's moved apply_updates, unshare
/// and status keyword), also taking turns with Debian's 6.3 (the first protocol). CI's 25
/// minutes leave the others to tests/long.sh, which runs every release
/// (`REVFS_HG_VERSIONS=all`): 6.4 (pure Python, the slowest day), 6.7 (setbranch's
/// transaction required) and 6.9 (the Rust update's switch) among them. tests/deps.sh's
/// HG_SUITE installs the suite's.
const BY_DEFAULT: &[&str] = &["7.2.4"];

/// Whether this run takes `version`.
fn selected(version: &str) -> bool {
    match std::env::var("REVFS_HG_VERSIONS") {
        Ok(v) if v.trim() == "all" => true,
        Ok(v) => v.split_whitespace().any(|w| w == version),
        Err(_) => BY_DEFAULT.contains(&version),
    }
}

/// The hg of `version` that tests/deps.sh installed.
fn installed(version: &str) -> PathBuf {
    let root = revfs_tests::workspace().join("target/hg-versions");
    let hg = root.join(version).join("bin/hg");
    assert!(
        hg.exists(),
        "{}: missing: run tests/run.sh, or `. tests/deps.sh; install_hg_versions {}`",
        hg.display(),
        root.display()
    );
    hg
}

fn run(hg: &Path, dir: &Path, args: &[&str]) -> Output {
    revfs_tests::hg_env(Command::new(hg).args(args).current_dir(dir))
        .output()
        .expect("spawn hg")
}

fn ok(hg: &Path, dir: &Path, args: &[&str]) -> String {
    let out = run(hg, dir, args);
    assert!(out.status.success(), "hg {args:?} in {dir:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A mount and a clone of one repository, and the hg that runs in both.
struct Sides {
    hg: PathBuf,
    version: String,
    repo: PathBuf,
    clone: PathBuf,
    mount: Mount,
    _tmp: tempfile::TempDir,
}

impl Sides {
    fn new(version: &str, hg: &Path) -> Sides {
        let tmp = revfs_tests::scratch_dir();
        let repo = tmp.path().join("repo");
        ok(hg, tmp.path(), &["init", "repo"]);
        for (path, text) in revfs_tests::HG_SIDES_BASE {
            let p = repo.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        ok(hg, &repo, &["commit", "-qA", "-m", "base", "-d", "0 0"]);
        std::fs::write(repo.join("a"), "a\na2\n").unwrap();
        std::os::unix::fs::symlink("a", repo.join("link")).unwrap();
        ok(hg, &repo, &["commit", "-qA", "-m", "second", "-d", "1 0"]);
        ok(hg, &repo, &["phase", "--public", "-r", "all()"]);
        ok(hg, tmp.path(), &["clone", "-q", "repo", "clone"]);
        let mount = Mount::new(&repo, None);
        Sides {
            hg: hg.to_owned(),
            version: version.to_owned(),
            repo,
            clone: tmp.path().join("clone"),
            mount,
            _tmp: tmp,
        }
    }

    fn roots(&self) -> [&Path; 2] {
        [&self.mount.dir, &self.clone]
    }

    fn edit(&self, f: impl Fn(&Path)) {
        for root in self.roots() {
            f(root);
        }
    }

    /// `hg ARGS` on both sides: the same exit code and output, each side's path aside.
    fn same(&self, args: &[&str]) {
        let [ours, theirs] = [0, 1].map(|side| {
            let root = self.roots()[side];
            let out = run(&self.hg, root, args);
            let real = std::fs::canonicalize(root).unwrap().display().to_string();
            let n = |b: &[u8]| String::from_utf8_lossy(b).replace(&real, "$ROOT");
            (out.status.code(), n(&out.stdout), n(&out.stderr))
        });
        assert_eq!(
            ours, theirs,
            "hg {} {args:?} (left the mount, right a clone)",
            self.version
        );
    }

    fn same_all(&self, steps: &[&[&str]]) {
        for args in steps {
            self.same(args);
        }
    }

    /// The same working copy, history and tree on both sides.
    fn same_state(&self) {
        self.same_all(&[
            &["status", "-A", "-C"],
            &["diff", "--git"],
            &["id"],
            &["log", "-G", "-T", "{rev}:{node} {desc} {files}\\n"],
        ]);
        let tree = |r: &Path| {
            snapshot(r)
                .into_iter()
                .filter(|(p, _)| !p.starts_with(".hg"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            tree(&self.mount.dir),
            tree(&self.clone),
            "hg {}: the trees",
            self.version
        );
    }
}

/// A commit whose transaction a hook refuses.
const REFUSED_COMMIT: &[&str] = &[
    "commit",
    "-m",
    "refused",
    "-u",
    "test",
    "-d",
    "8 0",
    "--config",
    "hooks.pretxnclose.no=false",
];

/// One day of work with `hg` on both sides.
fn a_day_of_work(s: &Sides) {
    let ext = [
        "--config",
        "extensions.rebase=",
        "--config",
        "extensions.shelve=",
        "--config",
        "extensions.purge=",
    ];
    let with_ext = |args: &[&str]| -> Vec<String> {
        ext.iter()
            .chain(args)
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
    };
    let same_ext = |args: &[&str]| {
        let v = with_ext(args);
        s.same(&v.iter().map(String::as_str).collect::<Vec<_>>());
    };
    s.same_all(&[&["status", "-A"], &["log", "-r", ".", "-T", "{rev}\\n"]]);

    // Tracking, then a commit.
    s.edit(|r| {
        std::fs::write(r.join("a"), "a\na2\nedited\n").unwrap();
        std::fs::write(r.join("new"), "new\n").unwrap();
        std::fs::remove_file(r.join("gone")).unwrap();
        std::fs::write(r.join("junk.o"), "o\n").unwrap();
    });
    s.same_all(&[
        &["status"],
        &["add", "new"],
        &["rm", "-A", "gone"],
        &["cp", "b.c", "bcopy.c"],
        &["mv", "d/g", "d/g2"],
        &["forget", "e/x"],
        &["status", "-C"],
        &["add", "e/x"],
        &["status", "-A", "-C"],
        &["diff", "--git"],
        &["commit", "-m", "work", "-u", "test", "-d", "2 0"],
        &["status", "-A"],
        &["summary"],
    ]);
    s.same_state();

    // Clean updates, and one over a local change hg merges.
    s.same_all(&[
        &["update", "-r", "0"],
        &["status", "-A"],
        &["update", "tip"],
    ]);
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nlocal\n").unwrap());
    s.same_all(&[&["update", "-r", "1"], &["status"], &["update", "tip"]]);
    s.same_state();

    // A branch, a merge with a conflict, resolved and committed.
    s.same_all(&[&["commit", "-m", "local f", "-u", "test", "-d", "3 0"]]);
    s.same_all(&[&["update", "-r", "1"]]);
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nother side\n").unwrap());
    s.same_all(&[
        &["commit", "-m", "other", "-u", "test", "-d", "4 0"],
        &["merge", "-r", "3", "--tool", "internal:merge"],
        &["status", "-A"],
        &["resolve", "-l"],
    ]);
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nmerged\n").unwrap());
    s.same_all(&[
        &["resolve", "-m", "a"],
        &["commit", "-m", "merge", "-u", "test", "-d", "5 0"],
    ]);
    s.same_state();

    // Rebase a new head onto the merge.
    s.same(&["update", "-r", "0"]);
    s.edit(|r| std::fs::write(r.join("e/x"), "x\nrebased\n").unwrap());
    s.same(&["commit", "-m", "to rebase", "-u", "test", "-d", "6 0"]);
    same_ext(&["rebase", "-d", "5"]);
    s.same_state();

    // Shelve and unshelve local changes, with an added and a removed file.
    s.edit(|r| {
        std::fs::write(r.join("b.c"), "int b2;\n").unwrap();
        std::fs::write(r.join("shelved"), "s\n").unwrap();
    });
    s.same_all(&[&["add", "shelved"], &["rm", "x y"]]);
    same_ext(&["shelve", "-d", "7 0"]);
    s.same_state();
    same_ext(&["unshelve"]);
    s.same_state();

    // A transaction that fails, then a commit rolled back.
    s.same_all(&[
        REFUSED_COMMIT,
        &["status", "-A", "-C"],
        &["id"],
        &["commit", "-m", "undone", "-u", "test", "-d", "9 0"],
        &["rollback"],
    ]);
    s.same_state();

    // Purge unknown and ignored files, and the directories left empty.
    s.edit(|r| {
        std::fs::create_dir_all(r.join("build/out")).unwrap();
        std::fs::write(r.join("build/out/x.o"), "o\n").unwrap();
        std::fs::write(r.join("stray"), "s\n").unwrap();
    });
    same_ext(&["purge", "--all", "--print"]);
    same_ext(&["purge", "--all"]);
    s.same_all(&[&["status", "-A"], &["verify", "-q"]]);
    s.same_state();
    // And revfs agrees with what this hg left.
    let ours = revfs_tests::revfs(&s.mount.dir, &["status", "-A"]);
    let theirs = run(&s.hg, &s.clone, &["status", "-A"]);
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs.stdout),
        "hg {}: revfs status",
        s.version
    );
}

/// The day of work with `version`, in a mount and in a clone.
fn a_day_with(version: &str) {
    if !selected(version) {
        eprintln!("SKIPPED: Mercurial {version} (REVFS_HG_VERSIONS; tests/long.sh runs it)");
        return;
    }
    let hg = installed(version);
    let out = ok(&hg, Path::new("/"), &["--version", "-q"]);
    assert!(out.contains(&format!("(version {version})")), "{out}");
    let s = Sides::new(version, &hg);
    a_day_of_work(&s);
    revfs_commits_and_updates(&s);
    s.mount.unmount();
    // The repository itself, read by the same release.
    ok(&hg, &s.repo, &["verify", "-q"]);
    formats_users_switch_on(version, &hg);
}

/// revfs's own commit and update in the mount of the repository this release made, read
/// back by it.
fn revfs_commits_and_updates(s: &Sides) {
    let m = &s.mount;
    let revfs = |args: &[&str]| {
        let out = m.revfs_in(&m.dir, args);
        assert!(
            out.status.success(),
            "hg {}: revfs {args:?}: {out:?}",
            s.version
        );
    };
    std::fs::write(m.dir.join("a"), "by revfs\n").unwrap();
    std::fs::write(m.dir.join("added by revfs"), "new\n").unwrap();
    // With what the unshelve left (b.c, shelved, x y).
    revfs(&["commit", "-A", "-m", "by revfs", "-d", "10 0"]);
    assert_eq!(
        ok(&s.hg, &m.dir, &["log", "-r", ".", "-T", "{desc}|{files}\n"]),
        "by revfs|a added by revfs b.c shelved x y\n"
    );
    revfs(&["update", "-r", "0"]);
    assert_eq!(ok(&s.hg, &m.dir, &["status"]), "");
    assert_eq!(std::fs::read(m.dir.join("a")).unwrap(), b"a\n");
    ok(&s.hg, &m.dir, &["update", "-q", "tip"]);
    assert_eq!(std::fs::read(m.dir.join("a")).unwrap(), b"by revfs\n");
    assert_eq!(ok(&s.hg, &m.dir, &["status"]), "");
    ok(&s.hg, &s.repo, &["verify", "-q"]);
}

/// A repository this release makes with the formats users switch on (a persistent
/// nodemap, dirstate-v2; a release without Rust needs their slow paths allowed), mounted,
/// committed to and updated by revfs, then checked by the same release.
fn formats_users_switch_on(version: &str, hg: &Path) {
    let tmp = revfs_tests::scratch_dir();
    let slow = [
        "--config",
        "storage.revlog.persistent-nodemap.slow-path=allow",
        "--config",
        "storage.dirstate-v2.slow-path=allow",
    ];
    let hgs = |dir: &Path, args: &[&str]| -> String {
        let all: Vec<&str> = slow.iter().copied().chain(args.iter().copied()).collect();
        ok(hg, dir, &all)
    };
    hgs(
        tmp.path(),
        &[
            "init",
            "--config",
            "format.use-persistent-nodemap=yes",
            "--config",
            "format.use-dirstate-v2=yes",
            "repo",
        ],
    );
    let repo = tmp.path().join("repo");
    let requires = std::fs::read_to_string(repo.join(".hg/requires")).unwrap()
        + &std::fs::read_to_string(repo.join(".hg/store/requires")).unwrap_or_default();
    for r in ["dirstate-v2", "persistent-nodemap"] {
        assert!(requires.lines().any(|l| l == r), "{version}: {requires}");
    }
    // A message that does not compress: a changelog that is not inline, with a nodemap.
    let mut rng = revfs_tests::Rng::new(7);
    let message: String = (0..200_000)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz012345"[rng.below(32)]))
        .collect();
    std::fs::write(tmp.path().join("message"), message).unwrap();
    std::fs::write(repo.join("f"), "one\n").unwrap();
    hgs(&repo, &["commit", "-qA", "-d", "0 0", "-l", "../message"]);
    std::fs::write(repo.join("f"), "two\n").unwrap();
    hgs(&repo, &["commit", "-q", "-d", "1 0", "-m", "two"]);
    hgs(&repo, &["update", "-q", "0"]);
    assert!(
        repo.join(".hg/store/00changelog.n").exists(),
        "{version}: no nodemap"
    );

    let m = Mount::new(&repo, Some("."));
    assert_eq!(std::fs::read(m.dir.join("f")).unwrap(), b"one\n");
    std::fs::write(m.dir.join("f"), "three\n").unwrap();
    let out = m.revfs_in(&m.dir, &["commit", "-m", "three", "-d", "2 0"]);
    assert!(out.status.success(), "{version}: {out:?}");
    let out = m.revfs_in(&m.dir, &["update", "-r", "1"]);
    assert!(out.status.success(), "{version}: {out:?}");
    assert_eq!(std::fs::read(m.dir.join("f")).unwrap(), b"two\n");
    m.unmount();
    hgs(&repo, &["verify", "-q"]);
    hgs(&repo, &["debugnodemap", "--check"]);
    // Debian's hg reads what this release and revfs made, too.
    let debian: Vec<&str> = slow.iter().copied().chain(["verify", "-q"]).collect();
    ok(Path::new("hg"), &repo, &debian);
    assert_eq!(
        hgs(
            &repo,
            &["log", "-T", "{rev}:{desc|firstline|strip}\n", "-r", "1:"]
        ),
        "1:two\n2:three\n"
    );
    // The release goes on with the repository: a commit rebuilds the nodemap.
    std::fs::write(repo.join("f"), "four\n").unwrap();
    hgs(&repo, &["commit", "-q", "-d", "3 0", "-m", "four"]);
    let check = hgs(&repo, &["debugnodemap", "--check"]);
    // ("revision in nodemap: 4" until 7.1, "revisions in nodemap: 4" in 7.2)
    assert!(
        check
            .lines()
            .any(|l| l.contains("in nodemap:") && l.split_whitespace().last() == Some("4")),
        "{version}: {check}"
    );
}

macro_rules! releases {
    ($($name:ident $version:literal)*) => {$(
        #[test]
        fn $name() {
            a_day_with($version);
        }
    )*};
}

// One of each minor release served (tests/deps.sh installs them); 6.3 is Debian's hg, which
// runs the whole of hg_in_mount.rs.
releases! {
    mercurial_6_4_does_in_a_mount_what_it_does_in_a_clone "6.4.5"
    mercurial_6_5_does_in_a_mount_what_it_does_in_a_clone "6.5.3"
    mercurial_6_6_does_in_a_mount_what_it_does_in_a_clone "6.6.3"
    mercurial_6_7_does_in_a_mount_what_it_does_in_a_clone "6.7.4"
    mercurial_6_8_does_in_a_mount_what_it_does_in_a_clone "6.8.2"
    mercurial_6_9_does_in_a_mount_what_it_does_in_a_clone "6.9.5"
    mercurial_7_0_does_in_a_mount_what_it_does_in_a_clone "7.0.3"
    mercurial_7_1_does_in_a_mount_what_it_does_in_a_clone "7.1.2"
    mercurial_7_2_does_in_a_mount_what_it_does_in_a_clone "7.2.4"
}

/// A working copy of a server's repository (`revfs clone` of Debian's `hg serve` with
/// remotefilelog), worked on by `version`'s hg: its own bundled remotefilelog client reads
/// and fills the cache revfs shares, and the day's output, history and tree are a full
/// clone's (tests/src/lazy.rs).
fn a_lazy_day_with(version: &str) {
    if !selected(version) {
        eprintln!("SKIPPED: Mercurial {version} (REVFS_HG_VERSIONS; tests/long.sh runs it)");
        return;
    }
    revfs_tests::lazy::a_day_of_hg_in_a_clones_mount(&installed(version));
}

macro_rules! lazy_releases {
    ($($name:ident $version:literal)*) => {$(
        #[test]
        fn $name() {
            a_lazy_day_with($version);
        }
    )*};
}

lazy_releases! {
    mercurial_6_4_works_in_a_mount_of_a_servers_repository "6.4.5"
    mercurial_6_5_works_in_a_mount_of_a_servers_repository "6.5.3"
    mercurial_6_6_works_in_a_mount_of_a_servers_repository "6.6.3"
    mercurial_6_7_works_in_a_mount_of_a_servers_repository "6.7.4"
    mercurial_6_8_works_in_a_mount_of_a_servers_repository "6.8.2"
    mercurial_6_9_works_in_a_mount_of_a_servers_repository "6.9.5"
    mercurial_7_0_works_in_a_mount_of_a_servers_repository "7.0.3"
    mercurial_7_1_works_in_a_mount_of_a_servers_repository "7.1.2"
    mercurial_7_2_works_in_a_mount_of_a_servers_repository "7.2.4"
}

/// One working copy, two releases on one machine: Debian's hg (6.3, the first dirstate
/// protocol: parentchange and backups) and 7.2 (change scopes, no backups) take turns on
/// the same mount and the same clone, each step by the other release than the last.
#[test]
fn debians_hg_and_7_2_take_turns_in_one_mount_as_in_one_clone() {
    if !selected("7.2.4") {
        eprintln!("SKIPPED: Mercurial 7.2.4 (REVFS_HG_VERSIONS; tests/long.sh runs it)");
        return;
    }
    let new = installed("7.2.4");
    let old = PathBuf::from("hg");
    let out = ok(&old, Path::new("/"), &["--version", "-q"]);
    assert!(out.contains("(version 6.3"), "{out}");
    let mut s = Sides::new("6.3", &old);
    let mut turn = 0;
    // The next step's release: 6.3, 7.2, 6.3, ...
    let mut next = |s: &mut Sides| {
        let (hg, version) = if turn % 2 == 0 {
            (&old, "6.3")
        } else {
            (&new, "7.2.4")
        };
        turn += 1;
        s.hg = hg.clone();
        s.version = version.to_owned();
    };
    let ext = [
        "--config",
        "extensions.shelve=",
        "--config",
        "extensions.purge=",
    ];
    let step = |s: &mut Sides, next: &mut dyn FnMut(&mut Sides), args: &[&str]| {
        next(s);
        let all: Vec<&str> = ext.iter().copied().chain(args.iter().copied()).collect();
        s.same(&all);
    };
    s.edit(|r| {
        std::fs::write(r.join("a"), "a\na2\nedited\n").unwrap();
        std::fs::write(r.join("new"), "new\n").unwrap();
        std::fs::remove_file(r.join("gone")).unwrap();
    });
    for args in [
        &["add", "new"][..],
        &["rm", "-A", "gone"],
        &["cp", "b.c", "bcopy.c"],
        &["status", "-C"],
        &["mv", "d/g", "d/g2"],
        &["commit", "-m", "work", "-u", "test", "-d", "2 0"],
        &["update", "-r", "0"],
        &["status", "-A"],
        &["update", "tip"],
    ] {
        step(&mut s, &mut next, args);
    }
    s.same_state();
    // An update over a local change, a merge with a conflict resolved by the other.
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nlocal\n").unwrap());
    for args in [
        &["update", "-r", "1"][..],
        &["status"],
        &["update", "tip"],
        &["commit", "-m", "local f", "-u", "test", "-d", "3 0"],
        &["update", "-r", "1"],
    ] {
        step(&mut s, &mut next, args);
    }
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nother side\n").unwrap());
    for args in [
        &["commit", "-m", "other", "-u", "test", "-d", "4 0"][..],
        &["merge", "-r", "3", "--tool", "internal:merge"],
        &["status", "-A"],
        &["resolve", "-l"],
    ] {
        step(&mut s, &mut next, args);
    }
    s.edit(|r| std::fs::write(r.join("a"), "a\na2\nmerged\n").unwrap());
    for args in [
        &["resolve", "-m", "a"][..],
        &["commit", "-m", "merge", "-u", "test", "-d", "5 0"],
    ] {
        step(&mut s, &mut next, args);
    }
    s.same_state();
    // Shelved by one, unshelved by the other; a commit one makes, the other rolls back;
    // a transaction one refuses.
    s.edit(|r| {
        std::fs::write(r.join("b.c"), "int b2;\n").unwrap();
        std::fs::write(r.join("shelved"), "s\n").unwrap();
    });
    for args in [
        &["add", "shelved"][..],
        &["shelve", "-d", "7 0"],
        &["status", "-A"],
        &["unshelve"],
        &["status", "-A", "-C"],
        // 7.2's commit, rolled back by 6.3: 6.3 finds no dirstate backup and empties the
        // dirstate (the null revision, every file unknown), then goes on from there.
        &["commit", "-m", "undone", "-u", "test", "-d", "9 0"],
        &["rollback"],
        &["status", "-A", "-C"],
        &["update", "-C", "tip"],
        &["id"],
        // 6.3's commit, rolled back by 7.2.
        &["commit", "-m", "undone again", "-u", "test", "-d", "10 0"],
        &["rollback"],
        &["status", "-A", "-C"],
        REFUSED_COMMIT,
        &["status", "-A", "-C"],
        &["id"],
        &["purge", "--all"],
        &["status", "-A"],
    ] {
        step(&mut s, &mut next, args);
    }
    s.same_state();
    let ours = revfs_tests::revfs(&s.mount.dir, &["status", "-A", "-C"]);
    let theirs = run(&s.hg, &s.clone, &["status", "-A", "-C"]);
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs.stdout),
    );
    s.mount.unmount();
    for hg in [&old, &new] {
        ok(hg, &s.repo, &["verify", "-q"]);
    }
}

/// The rhg tests/deps.sh's install_rhg built (tests/long.sh; CI's suite has not the 2.5
/// minutes its build takes): REVFS_RHG names it (and then it must be there), else
/// target/hg-versions/rhg-7.2.4, when it was built.
fn rhg() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REVFS_RHG") {
        let p = PathBuf::from(p);
        assert!(p.exists(), "REVFS_RHG={}: missing", p.display());
        return Some(p);
    }
    let p = revfs_tests::workspace().join("target/hg-versions/rhg-7.2.4/bin/rhg");
    p.exists().then_some(p)
}

/// rhg reads a dirstate itself: in a mount, whose dirstate is the daemon's, it must never
/// answer from a file. The mount's requirement (revfs-dirstate-v1) is one rhg does not
/// know, so it refuses (exit 252, naming it), and with `rhg.on-unsupported=fallback` (how
/// rhg is set up) hands the command to hg, which answers as in a clone; in the clone, rhg
/// answers itself, the same. After shell edits, revfs commands and hg commands.
#[test]
fn rhg_in_a_mount_refuses_or_falls_back_to_hg_and_prints_what_rhg_prints_in_a_clone() {
    let Some(rhg) = rhg() else {
        eprintln!("SKIPPED: rhg not built (tests/long.sh builds it: install_rhg)");
        return;
    };
    let s = Sides::new("6.3", Path::new("hg"));
    let rc = s._tmp.path().join("rhg.rc");
    std::fs::write(
        &rc,
        "[rhg]\non-unsupported = fallback\nfallback-executable = hg\n",
    )
    .unwrap();
    let rhg_in = |dir: &Path, args: &[&str], fallback: bool| {
        let mut cmd = Command::new(&rhg);
        revfs_tests::hg_env(cmd.args(args).current_dir(dir));
        if fallback {
            cmd.env("HGRCPATH", &rc);
        }
        let out = cmd.output().expect("spawn rhg");
        let real = std::fs::canonicalize(dir).unwrap().display().to_string();
        let n = |b: &[u8]| String::from_utf8_lossy(b).replace(&real, "$ROOT");
        (out.status.code(), n(&out.stdout), n(&out.stderr))
    };
    let reads: &[&[&str]] = &[
        &["status"],
        &["status", "-A", "-C"],
        &["files"],
        &["files", "-r", "0"],
        &["cat", "-r", ".", "a", "d/f"],
        &["cat", "-r", "0", "a"],
    ];
    let same = |when: &str| {
        for args in reads {
            let theirs = rhg_in(&s.clone, args, false);
            assert_eq!(
                rhg_in(&s.mount.dir, args, true),
                theirs,
                "{when}: rhg {args:?} with its fallback (left the mount, right rhg in a clone)"
            );
            let (code, out, err) = rhg_in(&s.mount.dir, args, false);
            assert_eq!(
                (code, out.as_str()),
                (Some(252), ""),
                "{when}: rhg {args:?} without its fallback: {err}"
            );
            assert!(
                err.contains("revfs-dirstate-v1"),
                "{when}: rhg {args:?}: {err}"
            );
        }
    };
    same("as mounted");
    assert!(
        !s.mount.dir.join(".hg/dirstate").exists(),
        "a dirstate file in the mount's .hg would be stale"
    );
    s.edit(|r| {
        std::fs::write(r.join("a"), "a\nedited\n").unwrap();
        std::fs::write(r.join("new"), "new\n").unwrap();
        std::fs::remove_file(r.join("gone")).unwrap();
    });
    same("after shell edits");
    let revfs = |args: &[&str]| {
        let out = s.mount.revfs_in(&s.mount.dir, args);
        assert!(out.status.success(), "revfs {args:?}: {out:?}");
        ok(&s.hg, &s.clone, args);
    };
    revfs(&["add", "new"]);
    revfs(&["rm", "-A", "gone"]);
    revfs(&["commit", "-m", "by revfs", "-u", "test", "-d", "2 0"]);
    same("after revfs commands");
    s.edit(|r| std::fs::write(r.join("d/f"), "f\nlocal\n").unwrap());
    s.same_all(&[
        &["update", "-r", "0"],
        &["cp", "b.c", "c.c"],
        &["mv", "d/g", "d/g2"],
    ]);
    same("after hg commands");
}

#[test]
fn a_release_outside_the_range_is_refused_with_one_abort_naming_both() {
    // The newest release before the range (tests/deps.sh installs it).
    let version = "6.2.3";
    let hg = installed(version);
    let tmp = revfs_tests::scratch_dir();
    // zlib: a pure-Python release reads no zstd.
    ok(
        &hg,
        tmp.path(),
        &["init", "--config", "format.revlog-compression=zlib", "repo"],
    );
    let repo = tmp.path().join("repo");
    std::fs::write(repo.join("a"), "a\n").unwrap();
    ok(&hg, &repo, &["commit", "-qAm", "a"]);
    let m = Mount::new(&repo, None);
    let out = run(&hg, &m.dir, &["status"]);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(255),
            String::new(),
            format!("abort: this revfs mount needs Mercurial 6.3 to 7.2, not {version}\n")
        )
    );
    m.unmount();
}

#[test]
fn revfs_doctor_names_the_range_and_whether_the_hg_on_the_path_is_in_it() {
    for (version, verdict) in [
        (
            "6.2.3",
            "hg cannot work in a mount, which needs Mercurial 6.3 to 7.2",
        ),
        ("7.2.4", "hg works in a mount (Mercurial 6.3 to 7.2)"),
    ] {
        let hg = installed(version);
        let path = format!(
            "{}:{}",
            hg.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let tmp = revfs_tests::scratch_dir();
        let out = revfs_tests::hg_env(Command::new(revfs_tests::revfs_bin()).arg("doctor"))
            .env("PATH", path)
            .env("REVFS_STATE_DIR", tmp.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let want = format!(
            "checking Mercurial ({})\n Mercurial {version}: {verdict}\n",
            hg.display()
        );
        assert!(text.contains(&want), "{want:?} in:\n{text}");
        assert_eq!(
            out.status.code(),
            Some(if version == "6.2.3" { 1 } else { 0 }),
            "{text}"
        );
    }
}
