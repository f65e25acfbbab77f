//! The manifest cache (`.hg/cache/revfs/manifests/`): the first mount at a revision and each
//! update rebuild the base manifest's text straight into a file there and map it; a commit
//! writes its new one there; a mount at that revision maps it instead of rebuilding it. A damaged file is never believed: the checks on open or the
//! hash in the background remove it, and the tree is hg's.

use revfs_tests::mount::{snapshot, Mount, Snap};
use revfs_tests::{hg_cmd, hg_repo, revfs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// (manifest bytes on the heap, mapped) from the daemon's `stats`.
fn held(m: &Mount) -> (u64, u64) {
    let s = m.stats();
    (s.get("manifest_bytes"), s.get("mapped_manifest_bytes"))
}

/// Waits (10 s at most) until `what` holds.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(10), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cache_dir(repo: &Path) -> PathBuf {
    repo.join(".hg/cache/revfs/manifests")
}

/// The full manifest node of revision `rev` and its text, as hg gives them.
fn hg_manifest(repo: &Path, rev: &str) -> (String, Vec<u8>) {
    let out = ok(hg_cmd(
        repo,
        &["--debug", "log", "-r", rev, "-T", "{manifest}"],
    ));
    let (mrev, node) = out.split_once(':').unwrap();
    let text = hg_cmd(repo, &["debugdata", "-m", mrev]).stdout;
    (node.to_owned(), text)
}

fn cache_file(repo: &Path, rev: &str) -> (PathBuf, Vec<u8>) {
    let (node, text) = hg_manifest(repo, rev);
    (cache_dir(repo).join(format!("{node}.manifest")), text)
}

/// The files of revision `rev` of `repo` with their contents, against those of the mount.
fn assert_tree_is(mnt: &Path, repo: &Path, rev: &str) {
    let files: Vec<String> = ok(hg_cmd(repo, &["files", "-r", rev]))
        .lines()
        .map(str::to_owned)
        .collect();
    let on_disk: Vec<(PathBuf, Vec<u8>)> = snapshot(mnt)
        .into_iter()
        .filter_map(|(p, s)| match s {
            Snap::File { data, .. } => Some((p, data)),
            _ => None,
        })
        .collect();
    let expected: Vec<(PathBuf, Vec<u8>)> = files
        .iter()
        .map(|f| {
            let data = hg_cmd(repo, &["cat", "-r", rev, f]).stdout;
            (PathBuf::from(f), data)
        })
        .collect();
    assert_eq!(on_disk, expected);
}

fn fixture(tmp: &Path) -> PathBuf {
    let repo = hg_repo(
        tmp,
        &[
            ("a", "a\n"),
            ("d1/b", "b\n"),
            ("d2/c", "c\n"),
            ("d2/e/f", "f\n"),
        ],
    );
    std::fs::write(repo.join("d2/c"), "c1\n").unwrap();
    ok(hg_cmd(&repo, &["commit", "-qm", "r1", "-d", "1 0"]));
    repo
}

#[test]
fn a_mount_maps_the_base_manifest_its_first_mount_kept_and_commits_keep_theirs() {
    let tmp = revfs_tests::scratch_dir();
    let repo = fixture(tmp.path());
    let (file, text) = cache_file(&repo, "tip");
    let m = Mount::new(&repo, None);
    // The first mount rebuilds the manifest straight into a cache file and maps it from the
    // start (no copy on the heap); the file takes its name in the background.
    assert_eq!(held(&m), (0, text.len() as u64));
    let said = |log: &str, mapped: bool, rebuilt: bool| {
        let line = format!("mapped={mapped} rebuilt={rebuilt} bytes={}", text.len());
        log.lines()
            .filter(|l| l.contains(" base manifest"))
            .map(|l| l.contains(&line))
            .collect::<Vec<bool>>()
    };
    assert_eq!(said(&m.log(), true, true), [true], "{}", m.log());
    eventually("the base kept", || file.exists());
    let kept = std::fs::read(&file).unwrap();
    assert_eq!(&kept[..8], b"RVFSMNFT");
    assert_eq!(kept[64..], text[..]);
    m.unmount();
    // A mount at that revision maps it from the start.
    m.remount(&repo, None);
    assert_eq!(held(&m), (0, text.len() as u64));
    assert_eq!(said(&m.log(), true, false), [false, true], "{}", m.log());
    assert_tree_is(&m.dir, &repo, "tip");
    // A commit keeps its new manifest; so does hg's commit in the mount, and an update.
    std::fs::write(m.dir.join("d1/b"), "b2\n").unwrap();
    ok(revfs(
        &m.dir,
        &["commit", "-m", "b2", "-u", "t", "-d", "2 0"],
    ));
    let (file2, text2) = cache_file(&repo, "tip");
    eventually("the commit's manifest mapped", || {
        file2.exists() && held(&m) == (0, text2.len() as u64)
    });
    std::fs::write(m.dir.join("d2/e/new"), "n\n").unwrap();
    ok(hg_cmd(
        &m.dir,
        &["commit", "-qAm", "new", "-u", "t", "-d", "3 0"],
    ));
    let (file3, text3) = cache_file(&repo, "tip");
    eventually("hg's commit's manifest mapped", || {
        file3.exists() && held(&m) == (0, text3.len() as u64)
    });
    ok(revfs(&m.dir, &["update", "-q", "0"]));
    let (file0, text0) = cache_file(&repo, "0");
    // Mapped as it was rebuilt: an update's new base is never on the heap either.
    assert_eq!(held(&m), (0, text0.len() as u64));
    eventually("the update's manifest kept", || file0.exists());
    assert_tree_is(&m.dir, &repo, "0");
    assert!(
        file.exists(),
        "within the limit, every manifest stays: {}",
        m.log()
    );
    assert_eq!(std::fs::read(&file2).unwrap()[64..], text2[..]);
    assert_eq!(std::fs::read(&file3).unwrap()[64..], text3[..]);
    ok(revfs(&m.dir, &["update", "-q", "tip"]));
    assert_tree_is(&m.dir, &repo, "tip");
    // hg sees nothing of it.
    assert_eq!(ok(hg_cmd(&repo, &["status"])), "");
    ok(hg_cmd(&repo, &["verify", "-q"]));
}

#[test]
fn a_damaged_manifest_cache_file_is_removed_and_the_tree_stays_hgs() {
    let tmp = revfs_tests::scratch_dir();
    let repo = fixture(tmp.path());
    let (file, text) = cache_file(&repo, "tip");
    let m = Mount::new(&repo, None);
    eventually("the base kept", || file.exists());
    m.unmount();
    let good = std::fs::read(&file).unwrap();

    // A changed node in the text passes the checks on open; the hash in the background
    // finds it, removes the file and puts the manifest log's text in its place, before
    // anything reads the directory.
    let line = text
        .split(|&b| b == b'\n')
        .position(|l| l.starts_with(b"d2/c\0"))
        .unwrap();
    let at = 64
        + text
            .split(|&b| b == b'\n')
            .take(line)
            .map(|l| l.len() + 1)
            .sum::<usize>()
        + "d2/c\0".len();
    let mut bad = good.clone();
    bad[at] = if bad[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(&file, &bad).unwrap();
    m.remount(&repo, None);
    eventually("the bad copy found", || {
        m.log().contains("does not hash to its node")
    });
    // The manifest log's text replaced it, and is then kept in the cache again and mapped
    // (mapped_base.rs: one end state whatever the order of the daemon's threads; before,
    // the base stayed on the heap or was mapped again depending on which came first).
    eventually("the good text kept and mapped", || {
        matches!(held(&m), (0, mapped) if mapped > 0)
            && std::fs::read(&file).is_ok_and(|f| f == good)
    });
    assert_tree_is(&m.dir, &repo, "tip");
    m.unmount();

    // Truncated, or of another format: refused on open, rebuilt, kept again.
    for damage in [&good[..good.len() - 7], &b"RVFSMNFT\0\0\0\x09"[..]] {
        std::fs::create_dir_all(cache_dir(&repo)).unwrap();
        std::fs::write(&file, damage).unwrap();
        m.remount(&repo, None);
        assert_tree_is(&m.dir, &repo, "tip");
        assert!(held(&m).1 > 0);
        eventually("kept again", || {
            std::fs::read(&file).ok().as_deref() == Some(&good[..])
        });
        m.unmount();
    }
    let log = m.log();
    assert!(log.contains("bytes of text, its header says"), "{log}");
    assert!(log.contains("shorter than its header"), "{log}");
    ok(hg_cmd(&repo, &["verify", "-q"]));
}

#[test]
fn a_read_only_cache_directory_costs_only_the_cache() {
    let tmp = revfs_tests::scratch_dir();
    let repo = fixture(tmp.path());
    // A file where the directory would be: nothing can be kept.
    std::fs::create_dir_all(repo.join(".hg/cache/revfs")).unwrap();
    std::fs::write(cache_dir(&repo), b"").unwrap();
    let m = Mount::new(&repo, None);
    assert_tree_is(&m.dir, &repo, "tip");
    std::fs::write(m.dir.join("a"), "a2\n").unwrap();
    ok(revfs(
        &m.dir,
        &["commit", "-m", "a2", "-u", "t", "-d", "2 0"],
    ));
    assert_tree_is(&m.dir, &repo, "tip");
    eventually("the failure logged", || m.log().contains("manifest cache:"));
    assert_eq!(held(&m).1, 0);
}
