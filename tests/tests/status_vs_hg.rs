//! The property test of the journal and status: random sequences of file-system operations
//! are applied both to a revfs mount and to an ordinary hg checkout of the same revision;
//! afterwards `revfs status` must print exactly what `hg status` prints, and every file must
//! hold the same bytes. A failing seed is printed with its operations, to be replayed with
//! `REVFS_SEED=<seed> cargo test -p revfs-tests --test status_vs_hg`.

use revfs_tests::mount::{drop_kernel_caches, lstat_tree, snapshot, Mount};
use revfs_tests::Rng;
use revfs_tests::{fixtures, hg_cmd, revfs};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `n` bytes of text, newlines and a little binary.
fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    let words: [&[u8]; 6] = [
        b"alpha ",
        b"beta\n",
        b"gamma ",
        b"\n",
        b"delta\n",
        b"\x00\x01",
    ];
    let mut out = Vec::new();
    while out.len() < n {
        out.extend_from_slice(words[rng.below(words.len())]);
    }
    out.truncate(n);
    out
}

/// Every file, symlink and directory under `root` (relative), skipping `.hg`.
fn listing(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for (p, s) in snapshot(root) {
        match s {
            revfs_tests::mount::Snap::Dir => dirs.push(p),
            _ => files.push(p),
        }
    }
    (files, dirs)
}

fn errno_of<T>(r: std::io::Result<T>) -> Result<(), Option<i32>> {
    r.map(|_| ()).map_err(|e| e.raw_os_error())
}

/// How one operation ended on one side: done, or refused with this errno.
type Outcome = Result<(), Option<i32>>;

/// One random operation, applied the same way to both trees. Returns a description.
fn random_op(rng: &mut Rng, a: &Path, b: &Path, originals: &Path) -> String {
    let (files, dirs) = listing(b);
    let mut all_dirs = vec![PathBuf::new()];
    all_dirs.extend(dirs.iter().cloned());
    let new_name = |rng: &mut Rng| -> PathBuf {
        let names = ["n1.txt", "n2.c", "New File", "x", "é.txt", "deep"];
        let dir = rng.pick(&all_dirs).cloned().unwrap_or_default();
        dir.join(format!("{}{}", names[rng.below(names.len())], rng.below(3)))
    };
    let choice = rng.below(100);
    let (desc, ra, rb): (String, Outcome, Outcome) = match choice {
        0..=17 => {
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let n = rng.below(40);
            let data = bytes(rng, n);
            let append = rng.below(2) == 0;
            let w = |root: &Path| -> std::io::Result<()> {
                use std::io::Write;
                let p = root.join(&f);
                if std::fs::symlink_metadata(&p)?.file_type().is_symlink() {
                    return Ok(());
                }
                let mut fh = std::fs::OpenOptions::new()
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(p)?;
                fh.write_all(&data)
            };
            (
                format!("write {f:?} append={append} {} bytes", data.len()),
                errno_of(w(a)),
                errno_of(w(b)),
            )
        }
        18..=27 => {
            let p = new_name(rng);
            let n = rng.below(30);
            let data = bytes(rng, n);
            let c = |root: &Path| std::fs::write(root.join(&p), &data);
            (format!("create {p:?}"), errno_of(c(a)), errno_of(c(b)))
        }
        28..=37 => {
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let c = |root: &Path| std::fs::remove_file(root.join(&f));
            (format!("unlink {f:?}"), errno_of(c(a)), errno_of(c(b)))
        }
        38..=49 => {
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let to = if rng.below(3) == 0 {
                rng.pick(&files).cloned().unwrap_or_else(|| new_name(rng))
            } else {
                new_name(rng)
            };
            let c = |root: &Path| std::fs::rename(root.join(&f), root.join(&to));
            (
                format!("rename {f:?} -> {to:?}"),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        50..=54 => {
            let Some(d) = rng.pick(&dirs).cloned() else {
                return "noop".into();
            };
            let to = new_name(rng);
            let c = |root: &Path| std::fs::rename(root.join(&d), root.join(&to));
            (
                format!("rename dir {d:?} -> {to:?}"),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        55..=60 => {
            let p = new_name(rng);
            let c = |root: &Path| std::fs::create_dir(root.join(&p));
            (format!("mkdir {p:?}"), errno_of(c(a)), errno_of(c(b)))
        }
        61..=64 => {
            let Some(d) = rng.pick(&dirs).cloned() else {
                return "noop".into();
            };
            let c = |root: &Path| std::fs::remove_dir(root.join(&d));
            (format!("rmdir {d:?}"), errno_of(c(a)), errno_of(c(b)))
        }
        65..=72 => {
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let exec = rng.below(2) == 0;
            let c = |root: &Path| -> std::io::Result<()> {
                let p = root.join(&f);
                if std::fs::symlink_metadata(&p)?.file_type().is_symlink() {
                    return Ok(());
                }
                std::fs::set_permissions(
                    p,
                    std::fs::Permissions::from_mode(if exec { 0o755 } else { 0o644 }),
                )
            };
            (
                format!("chmod {f:?} exec={exec}"),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        76..=77 => {
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let to = new_name(rng);
            let c = |root: &Path| std::fs::hard_link(root.join(&f), root.join(&to));
            (
                format!("link {f:?} -> {to:?}"),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        73..=75 => {
            let p = new_name(rng);
            let target = ["a.txt", "../x", "dangling target", "README.txt"][rng.below(4)];
            let c = |root: &Path| std::os::unix::fs::symlink(target, root.join(&p));
            (
                format!("symlink {p:?} -> {target}"),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        78..=83 => {
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let size = rng.below(20) as u64;
            let c = |root: &Path| -> std::io::Result<()> {
                let p = root.join(&f);
                if std::fs::symlink_metadata(&p)?.file_type().is_symlink() {
                    return Ok(());
                }
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)?
                    .set_len(size)
            };
            (
                format!("truncate {f:?} {size}"),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        84..=91 => {
            // Write a file back to the bytes it has in the base revision.
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let orig = originals.join(&f);
            let Ok(meta) = std::fs::symlink_metadata(&orig) else {
                return "noop".into();
            };
            if meta.file_type().is_symlink() || meta.is_dir() {
                return "noop".into();
            }
            let data = std::fs::read(&orig).unwrap();
            let c = |root: &Path| -> std::io::Result<()> {
                let p = root.join(&f);
                if std::fs::symlink_metadata(&p)?.file_type().is_symlink() {
                    return Ok(());
                }
                std::fs::write(p, &data)
            };
            (
                format!("restore bytes of {f:?}"),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        92..=93 if rng.below(2) == 0 => {
            // A repository made inside the working copy: hg's walk does not enter it, and
            // the tracked files below are missing to status (with unknown files listed:
            // without, hg reads the files it is unsure of through an auditor that aborts
            // on them, which depends on its dirstate's cached times). Compared here, then
            // taken away again.
            let Some(d) = rng.pick(&dirs).cloned() else {
                return "noop".into();
            };
            let c = |root: &Path| std::fs::create_dir(root.join(&d).join(".hg"));
            let desc = format!("nested repository {d:?} made, status, taken away");
            assert_eq!(errno_of(c(a)), errno_of(c(b)), "{desc}");
            for args in [&["status"][..], &["status", "-A"]] {
                let ours = revfs(a, args);
                let theirs = hg_cmd(b, args);
                assert_eq!(
                    (ours.status.code(), String::from_utf8_lossy(&ours.stdout)),
                    (
                        theirs.status.code(),
                        String::from_utf8_lossy(&theirs.stdout)
                    ),
                    "{desc}: revfs {args:?} (left) and hg (right)"
                );
            }
            let c = |root: &Path| std::fs::remove_dir(root.join(&d).join(".hg"));
            (desc, errno_of(c(a)), errno_of(c(b)))
        }
        92..=93 => {
            let rules: [&[u8]; 5] = [
                b"syntax: glob\n*.c\nn1.*\n",
                b"syntax: regexp\n^deep/\n\\.txt[0-9]$\n",
                b"glob:New File*\nrelre:x$\n",
                b"syntax: foo\nglob:*.c\n",
                b"",
            ];
            let text = rules[rng.below(rules.len())];
            let c = |root: &Path| std::fs::write(root.join(".hgignore"), text);
            (
                format!(".hgignore = {:?}", String::from_utf8_lossy(text)),
                errno_of(c(a)),
                errno_of(c(b)),
            )
        }
        _ => {
            // hg bookkeeping commands, run the same way on both sides.
            let Some(f) = rng.pick(&files).cloned() else {
                return "noop".into();
            };
            let f = f.to_string_lossy().into_owned();
            let cmd: Vec<&str> = match rng.below(4) {
                0 => vec!["add", &f],
                1 => vec!["forget", &f],
                2 => vec!["remove", "-A", &f],
                _ => vec!["addremove"],
            };
            let ours = revfs(a, &cmd);
            let theirs = hg_cmd(b, &cmd);
            let code = |o: &std::process::Output| {
                if o.status.success() {
                    Ok(())
                } else {
                    Err(o.status.code())
                }
            };
            // The messages too, for a failure's report.
            let said = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
            (
                format!(
                    "{cmd:?} (revfs said {:?}, hg said {:?})",
                    said(&ours),
                    said(&theirs)
                ),
                code(&ours),
                code(&theirs),
            )
        }
    };
    assert_eq!(ra, rb, "{desc}: revfs and hg disagree on the outcome");
    desc
}

/// The fixture repository, an hg clone of its tip (`wc`), the tip's files as hg archives
/// them (`orig`, to write files back from) and a mount of the tip.
fn sides(config: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Mount) {
    let repo = fixtures().join("history");
    let tmp = revfs_tests::scratch_dir();
    let wc = tmp.path().join("wc");
    let out = hg_cmd(
        tmp.path(),
        &[
            "clone",
            "-q",
            "-u",
            "tip",
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
    // The base revision's bytes, to write files back to.
    let originals = tmp.path().join("orig");
    revfs_tests::hg_archive(&wc, "tip", &originals);
    let mount = Mount::at_with_config(&repo, "tip", config);
    (tmp, wc, originals, mount)
}

/// Makes the kernel forget what nothing holds (the daemon then drops the entries it can)
/// and waits a little for its FORGETs.
fn forget_everything(mount: &Mount) {
    let before = mount.stats().get("entries");
    drop_kernel_caches();
    let mut last = mount.stats();
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let now = mount.stats();
        if now == last {
            break;
        }
        last = now;
    }
    assert!(
        last.get("entries") < before,
        "nothing left the inode table when the kernel forgot it: {before} entries, then {last}"
    );
}

/// `remount_every`: unmount and mount again after that many operations; `forget_every`:
/// make the kernel forget every inode after that many, checking that every path keeps its
/// inode number and times (0: never).
fn run_seed(seed: u64, ops: usize, remount_every: usize, forget_every: usize) {
    run_seed_with(seed, ops, remount_every, forget_every, "")
}

/// [`run_seed`] on a mount with this revfs configuration.
fn run_seed_with(seed: u64, ops: usize, remount_every: usize, forget_every: usize, config: &str) {
    let repo = fixtures().join("history");
    let (_tmp, wc, originals, mount) = sides(config);
    let mut rng = Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut log = Vec::new();
    for i in 0..ops {
        log.push(random_op(&mut rng, &mount.dir, &wc, &originals));
        if remount_every > 0 && (i + 1) % remount_every == 0 {
            mount.unmount();
            mount.remount(&repo, Some("tip"));
            log.push("(remount)".into());
        }
        if forget_every > 0 && (i + 1) % forget_every == 0 {
            let before = lstat_tree(&mount.dir);
            forget_everything(&mount);
            log.push("(kernel forgets every inode)".into());
            let after = lstat_tree(&mount.dir);
            assert!(
                before == after,
                "seed {seed}: inode numbers or times changed when the kernel forgot them\n\
                 replay with REVFS_SEED={seed}\noperations:\n  {}\nbefore: {before:?}\nafter: {after:?}",
                log.join("\n  ")
            );
        }
    }
    let report = |what: &str| {
        format!(
            "seed {seed}: {what}\nreplay with REVFS_SEED={seed}\noperations:\n  {}",
            log.join("\n  ")
        )
    };
    for args in [vec!["status"], vec!["status", "-A"]] {
        let ours = revfs(&mount.dir, &args);
        let theirs = hg_cmd(&wc, &args);
        assert!(
            ours.status.success(),
            "{}",
            report(&String::from_utf8_lossy(&ours.stderr))
        );
        if ours.stdout != theirs.stdout {
            panic!(
                "{}\nrevfs {args:?}:\n{}\nhg {args:?}:\n{}",
                report("status differs"),
                String::from_utf8_lossy(&ours.stdout),
                String::from_utf8_lossy(&theirs.stdout)
            );
        }
    }
    // diff: plain (dates on the ---/+++ lines differ by the clock) and git.
    let undate = |b: Vec<u8>| -> String {
        String::from_utf8_lossy(&b)
            .lines()
            .map(|l| match l.split_once('\t') {
                Some((head, _)) if l.starts_with("--- ") || l.starts_with("+++ ") => {
                    head.to_owned()
                }
                _ => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let ours = revfs(&mount.dir, &["diff"]);
    let theirs = hg_cmd(&wc, &["diff"]);
    assert!(
        ours.status.success(),
        "{}",
        report(&String::from_utf8_lossy(&ours.stderr))
    );
    if undate(ours.stdout.clone()) != undate(theirs.stdout.clone()) {
        panic!(
            "{}\nrevfs diff:\n{}\nhg diff:\n{}",
            report("diff differs"),
            undate(ours.stdout),
            undate(theirs.stdout)
        );
    }
    let ours = revfs(&mount.dir, &["diff", "--git"]);
    if ours.status.success() {
        let theirs = hg_cmd(&wc, &["diff", "--git"]);
        if ours.stdout != theirs.stdout {
            panic!(
                "{}\nrevfs diff --git:\n{}\nhg diff --git:\n{}",
                report("diff --git differs"),
                String::from_utf8_lossy(&ours.stdout),
                String::from_utf8_lossy(&theirs.stdout)
            );
        }
    } else {
        assert!(
            String::from_utf8_lossy(&ours.stderr).contains("binary"),
            "{}",
            report(&String::from_utf8_lossy(&ours.stderr))
        );
    }
    let (ours, theirs) = (snapshot(&mount.dir), snapshot(&wc));
    if ours != theirs {
        let a: Vec<_> = ours.iter().map(|(p, _)| p).collect();
        let b: Vec<_> = theirs.iter().map(|(p, _)| p).collect();
        panic!("{}\npaths: {:?}\nvs {:?}", report("trees differ"), a, b);
    }
}

/// The seeds a sweep runs: REVFS_SEED alone when set; else `count` seeds from `first`,
/// REVFS_SEED_COUNT of them when set (tests/long.sh runs more than CI does).
fn seeds(first: u64, count: u64) -> Vec<u64> {
    if let Some(s) = std::env::var("REVFS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![s];
    }
    let count = revfs_tests::env_or("REVFS_SEED_COUNT", count);
    (first..first + count).collect()
}

#[test]
fn status_and_bytes_match_hg_after_random_operations() {
    // 15 seeds x 100 operations in CI (~2.5 s a seed); tests/long.sh runs 200 (REVFS_SEED
    // runs any other one).
    for seed in seeds(0, 15) {
        run_seed(seed, 100, 0, 0);
    }
}

#[test]
fn status_and_bytes_match_hg_with_kernel_passthrough() {
    // Files in the overlay read and written by the kernel directly (`mount.passthrough`),
    // with remounts in the middle. 5 seeds in CI; tests/long.sh runs 40.
    for seed in seeds(3000, 5) {
        run_seed_with(seed, 80, 37, 0, "[mount]\npassthrough = true\n");
    }
}

#[test]
fn status_and_bytes_match_hg_through_dev_fuse() {
    // Requests read from /dev/fuse instead of io_uring rings (`mount.io_uring`), with
    // remounts in the middle. 6 seeds in CI; tests/long.sh runs 40.
    for seed in seeds(4000, 6) {
        run_seed_with(seed, 80, 37, 0, "[mount]\nio_uring = false\n");
    }
}

#[test]
fn the_kernel_forgetting_inodes_between_operations_changes_nothing() {
    // 6 seeds in CI; tests/long.sh runs 40.
    for seed in seeds(2000, 6) {
        run_seed(seed, 60, 0, 6);
    }
}

#[test]
fn the_journal_survives_remounts_in_the_middle_of_a_sequence() {
    // 6 seeds in CI; tests/long.sh runs 30.
    for seed in seeds(1000, 6) {
        run_seed(seed, 60, 17, 0);
    }
}

/// Real hg in the mount (its share and the daemon's dirstate) against hg in a clone, after
/// every random operation: `hg status -A` and `hg diff --git` print the same bytes and exit
/// alike, and `revfs status -A` prints hg's status.
fn run_seed_hg_in_mount(seed: u64, ops: usize) {
    let (tmp, wc, originals, fixture_mount) = sides("");
    // Commits go into the mount's repository: a clone of the fixture, not the fixture.
    drop(fixture_mount);
    let out = hg_cmd(
        tmp.path(),
        &[
            "clone",
            "-q",
            "-U",
            &fixtures().join("history").display().to_string(),
            "repo",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let mount = Mount::new(&tmp.path().join("repo"), Some("tip"));
    let mut stamp = 100;
    let mut rng = Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut log = Vec::new();
    let root = std::fs::canonicalize(&mount.dir)
        .unwrap()
        .display()
        .to_string();
    for _ in 0..ops {
        if rng.below(5) == 0 {
            stamp += 1;
            match random_history(&mut rng, &mount.dir, &wc, &root, stamp) {
                Ok(desc) => log.push(desc),
                Err(e) => panic!(
                    "seed {seed}: {e}\nreplay with REVFS_SEED={seed}\noperations:\n  {}",
                    log.join("\n  ")
                ),
            }
        } else if rng.below(3) == 0 {
            match random_tracking(&mut rng, &mount.dir, &wc, &root) {
                Ok(desc) => log.push(desc),
                Err(e) => panic!(
                    "seed {seed}: {e}\nreplay with REVFS_SEED={seed}\noperations:\n  {}",
                    log.join("\n  ")
                ),
            }
        } else {
            log.push(random_op(&mut rng, &mount.dir, &wc, &originals));
        }
        // After every step: the same history, the same tree, and a sound repository.
        for args in [
            &[
                "log",
                "-T",
                "{rev}:{node} {branch} {p1node} [{bookmarks}]\\n",
            ][..],
            &["id"],
            &["verify", "-q"],
        ] {
            let (a, b) = (hg_cmd(&mount.dir, args), hg_cmd(&wc, args));
            assert!(
                (a.status.code(), &a.stdout) == (b.status.code(), &b.stdout),
                "seed {seed}: hg {args:?} differs: {a:?} vs {b:?}\noperations:\n  {}",
                log.join("\n  ")
            );
        }
        let (ours, theirs) = (snapshot(&mount.dir), snapshot(&wc));
        assert!(
            ours == theirs,
            "seed {seed}: trees differ\noperations:\n  {}",
            log.join("\n  ")
        );
        for args in [&["status", "-A"][..], &["diff", "--git"]] {
            let ours = hg_cmd(&mount.dir, args);
            let theirs = hg_cmd(&wc, args);
            let show = |o: &std::process::Output| {
                (
                    o.status.code(),
                    String::from_utf8_lossy(&o.stdout).into_owned(),
                    String::from_utf8_lossy(&o.stderr).replace(&root, "$ROOT"),
                )
            };
            let wc_root = std::fs::canonicalize(&wc).unwrap().display().to_string();
            let (a, mut b) = (show(&ours), show(&theirs));
            b.2 = b.2.replace(&wc_root, "$ROOT");
            assert!(
                a == b,
                "seed {seed}: hg {args:?} in the mount (left) and in a clone (right) differ\n\
                 {a:#?}\n{b:#?}\nreplay with REVFS_SEED={seed}\noperations:\n  {}",
                log.join("\n  ")
            );
            if args[0] == "status" {
                let cli = revfs(&mount.dir, args);
                assert_eq!(
                    String::from_utf8_lossy(&cli.stdout),
                    a.1,
                    "seed {seed}: revfs status -A\noperations:\n  {}",
                    log.join("\n  ")
                );
            }
        }
    }
}

/// `hg ARGS` in the clone, and in the mount `hg ARGS`, or `revfs ARGS` one time in `odds`
/// when revfs has the command: (mount's output, clone's, whether revfs ran).
fn run_both(
    rng: &mut Rng,
    mount: &Path,
    wc: &Path,
    args: &[String],
    revfs_too: bool,
    odds: usize,
) -> (std::process::Output, std::process::Output, bool) {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let theirs = hg_cmd(wc, &argv);
    let with_revfs = revfs_too && rng.below(odds) == 0;
    let ours = if with_revfs {
        revfs(mount, &argv)
    } else {
        hg_cmd(mount, &argv)
    };
    (ours, theirs, with_revfs)
}

/// One random command that moves the parent: commit (all, -A, named files), amend,
/// updates (-C and --check, which hg and the daemon do alike; plain and --merge, which
/// merge local changes through hg's merge machinery), merge and `merge --abort`,
/// `hg resolve`, rebase (--abort, --continue), graft, backout, shelve and unshelve
/// (--abort, --continue, --keep), purge, import of an exported changeset, histedit with a
/// commands file (fold, mess, drop, pick), pull,
/// by hg or by revfs in the mount
/// and by hg in the clone, with the same user and date: same exit code and output.
fn random_history(
    rng: &mut Rng,
    mount: &Path,
    wc: &Path,
    root: &str,
    stamp: u32,
) -> Result<String, String> {
    let (files, _) = listing(wc);
    let tip: usize =
        String::from_utf8_lossy(&hg_cmd(wc, &["log", "-r", "tip", "-T", "{rev}"]).stdout)
            .parse()
            .unwrap_or(0);
    let date = format!("{stamp} 0");
    let message = format!("m{stamp}");
    let commit = |extra: &[String]| -> Vec<String> {
        let mut v: Vec<String> = ["commit", "-m", &message, "-u", "test", "-d", &date]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend_from_slice(extra);
        v
    };
    let target = match rng.below(tip + 2) {
        0 => "null".to_string(),
        n => (n - 1).to_string(),
    };
    let rebase = ["--config", "extensions.rebase="].map(String::from);
    let v = |a: &[&str]| -> Vec<String> { a.iter().map(|s| s.to_string()).collect() };
    let (args, revfs_too): (Vec<String>, bool) = match rng.below(24) {
        0 | 1 => (commit(&[]), true),
        2 => (commit(&["-A".into()]), true),
        3 => {
            let f = rng
                .pick(&files)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|| "nothing".into());
            (commit(&[f]), true)
        }
        4 => (commit(&["--amend".into()]), false),
        5 | 6 => (vec!["update".into(), "-C".into(), target], true),
        7 => (vec!["update".into(), "--check".into(), target], false),
        // Over local changes: hg's merge, its conflicts, and hg resolve.
        8 => (vec!["update".into(), target], false),
        9 => (vec!["update".into(), "--merge".into(), target], false),
        // Merges: hg's merge machinery, the daemon's second parent.
        10 => (vec!["merge".into(), target], false),
        11 => (vec!["merge".into(), "--abort".into()], false),
        // The rest of the family: rebase, graft, backout, shelve, purge, import.
        13 => {
            let mut a = rebase.to_vec();
            a.extend(v(&["rebase", "-d", &target]));
            (a, false)
        }
        14 => {
            let mut a = rebase.to_vec();
            a.extend(v(&["rebase", ["--abort", "--continue"][rng.below(2)]]));
            (a, false)
        }
        15 => (v(&["graft", "-r", &target]), false),
        16 => (
            v(&[
                "backout", "-r", &target, "-m", &message, "-u", "test", "-d", &date,
            ]),
            false,
        ),
        17 => (
            match rng.below(3) {
                0 => v(&["shelve", "--date", &date, "-A"]),
                _ => v(&["shelve", "--date", &date]),
            },
            false,
        ),
        18 => (
            match rng.below(4) {
                0 => v(&["unshelve", "--abort"]),
                1 => v(&["unshelve", "--continue"]),
                2 => v(&["unshelve", "--keep"]),
                _ => v(&["unshelve"]),
            },
            false,
        ),
        19 => (
            match rng.below(2) {
                0 => v(&["purge", "--no-confirm"]),
                _ => v(&["purge", "--no-confirm", "--all"]),
            },
            false,
        ),
        20 => {
            // A changeset exported from the clone, imported on both sides.
            let patch = wc
                .parent()
                .expect("the clone has a parent")
                .join("random.patch");
            let out = hg_cmd(wc, &["export", "--git", "-r", &target]);
            std::fs::write(&patch, &out.stdout).expect("write the patch");
            let patch = patch.display().to_string();
            (
                match rng.below(2) {
                    0 => v(&["import", "--no-commit", &patch]),
                    _ => v(&["import", &patch]),
                },
                false,
            )
        }
        21 => {
            // histedit of the parent and its own parent, with a commands file.
            let file = wc
                .parent()
                .expect("the clone has a parent")
                .join("histedit");
            let out = hg_cmd(
                wc,
                &["log", "-r", "parents(.) + .", "-T", "{node|short}\\n"],
            );
            let nodes: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect();
            let second = ["fold", "mess", "drop", "pick"][rng.below(4)];
            let plan = match nodes.as_slice() {
                [p, c] => format!("pick {p}\n{second} {c}\n"),
                [c] => format!("{second} {c}\n"),
                _ => String::new(),
            };
            std::fs::write(&file, plan).expect("write the histedit plan");
            let file = file.display().to_string();
            (
                v(&[
                    "--config",
                    "extensions.histedit=",
                    "--config",
                    "ui.editor=true",
                    "histedit",
                    "--commands",
                    &file,
                ]),
                false,
            )
        }
        22 => (
            v(&["pull", &fixtures().join("history").display().to_string()]),
            false,
        ),
        _ => (
            vec![
                "resolve".into(),
                "--all".into(),
                "--tool".into(),
                if rng.below(2) == 0 {
                    "internal:local"
                } else {
                    "internal:other"
                }
                .into(),
            ],
            false,
        ),
    };
    let (ours, theirs, with_revfs) = run_both(rng, mount, wc, &args, revfs_too, 2);
    let wc_root = std::fs::canonicalize(wc).unwrap().display().to_string();
    let show = |o: &std::process::Output, r: &str| {
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).replace(r, "$ROOT"),
            String::from_utf8_lossy(&o.stderr).replace(r, "$ROOT"),
        )
    };
    let (a, b) = (show(&ours, root), show(&theirs, &wc_root));
    let who = if with_revfs { "revfs" } else { "hg" };
    // revfs's errors are its own words (cli_vs_hg compares them); its output is hg's.
    let same = if with_revfs {
        (a.0, &a.1) == (b.0, &b.1)
    } else {
        a == b
    };
    if !same {
        return Err(format!(
            "{who} {args:?} in the mount (left) and hg in a clone (right) differ\n{a:#?}\n{b:#?}"
        ));
    }
    Ok(format!("{who} {args:?}"))
}

/// One random tracking command (add, forget, remove, copy, rename, addremove, revert) run
/// by hg in the clone and, in the mount, by hg (compared byte for byte) or by the revfs
/// command of the same name (compared by exit code: its output is cli_vs_hg's business).
fn random_tracking(rng: &mut Rng, mount: &Path, wc: &Path, root: &str) -> Result<String, String> {
    let (files, _) = listing(wc);
    let pick = |rng: &mut Rng| -> String {
        rng.pick(&files)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| "nothing".into())
    };
    let fresh = format!("t{}", rng.below(4));
    let (args, revfs_too): (Vec<String>, bool) = match rng.below(10) {
        0 => (vec!["add".into(), pick(rng)], true),
        1 => (vec!["add".into()], true),
        2 => (vec!["forget".into(), pick(rng)], true),
        3 => (vec!["remove".into(), pick(rng)], true),
        4 => (vec!["remove".into(), "--after".into(), pick(rng)], false),
        5 => (vec!["copy".into(), pick(rng), fresh], true),
        6 => (vec!["rename".into(), pick(rng), fresh], true),
        7 => (vec!["addremove".into()], false),
        8 => (
            vec!["revert".into(), "--no-backup".into(), pick(rng)],
            false,
        ),
        _ => (vec!["addremove".into(), "-s".into(), "60".into()], false),
    };
    let (ours, theirs, with_revfs) = run_both(rng, mount, wc, &args, revfs_too, 3);
    let wc_root = std::fs::canonicalize(wc).unwrap().display().to_string();
    // hg warns of each new file's name (portablefilenames) in its walk's order, which in
    // a clone is the file system's listing order (ext4's hash order): compared as a set.
    let show = |o: &std::process::Output, r: &str| {
        let err = String::from_utf8_lossy(&o.stderr).replace(r, "$ROOT");
        let mut lines: Vec<&str> = err.lines().collect();
        lines.sort_unstable();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).replace(r, "$ROOT"),
            lines.join("\n"),
        )
    };
    let (a, b) = (show(&ours, root), show(&theirs, &wc_root));
    let who = if with_revfs { "revfs" } else { "hg" };
    let same = if with_revfs { a.0 == b.0 } else { a == b };
    if !same {
        return Err(format!(
            "{who} {args:?} in the mount (left) and hg in a clone (right) differ\n{a:#?}\n{b:#?}"
        ));
    }
    Ok(format!("{who} {args:?}"))
}

#[test]
fn hg_in_the_mount_agrees_with_a_clone_after_each_random_operation() {
    // 2 seeds of 12 operations in CI (tests/long.sh runs 10 of 40).
    let ops = revfs_tests::env_or("REVFS_HG_OPS", 12);
    if std::env::var_os("REVFS_SEED").is_none() {
        // Found by seed 38: a backout that merges a copied file left its copy source in
        // the mount (hg drops the merge's copies when the second parent goes).
        run_seed_hg_in_mount(38, 2);
    }
    for seed in seeds(2000, 2) {
        run_seed_hg_in_mount(seed, ops);
    }
}
