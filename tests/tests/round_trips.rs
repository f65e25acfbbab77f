//! What an operation costs in requests to the daemon (the daemon's counts by opcode, from
//! `stats`): the round trips that make creating many files slower than on ext4. Each test
//! pins the exact requests of one operation repeated N times, so that a change that adds
//! one (an entry or attribute the kernel can no longer cache, a reply that makes it ask
//! again) fails here, and one that removes one must update the numbers and their reasons.
//!
//! Not counted: `forget` and `batch_forget`, which the kernel sends when it evicts inodes,
//! at times of its own (memory pressure), and on which no program waits.

use revfs_tests::hg_repo;
use revfs_tests::mount::Mount;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

const FILES: u64 = 100;

/// The requests the daemon got between `before` and `after`, forgets left out.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter(|(k, _)| !k.contains("forget"))
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The daemon's counts once `key` has grown by `want` since `before` (releases come after
/// the close that caused them returned: the kernel sends them in the background), within
/// a deadline.
fn settled(
    m: &Mount,
    before: &BTreeMap<String, u64>,
    key: &str,
    want: u64,
) -> BTreeMap<String, u64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = m.stats().requests();
        let got = now.get(key).copied().unwrap_or(0) - before.get(key).copied().unwrap_or(0);
        if got >= want || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Creates `dir/f{i}` for each `i < n`, as most programs write a small file: create,
/// one write, close.
fn create_files(dir: &std::path::Path, from: u64, n: u64) {
    for i in from..from + n {
        let mut f = std::fs::File::create(dir.join(format!("f{i}"))).unwrap();
        f.write_all(format!("file {i}\n").as_bytes()).unwrap();
    }
}

fn expected(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// A new file written once and closed, with passthrough off (the default). Per file:
/// - `lookup`: the new name (negative; the kernel then caches nothing for it before the
///   create);
/// - `create`: makes and opens the file, its attributes in the reply;
/// - `getattr` of the directory: a create makes the kernel drop the directory's
///   attributes (`fuse_dir_changed`), and with `default_permissions` it needs them for the
///   permission check of the next name in it;
/// - `getxattr` (`security.capability`): the kernel asks before the first write to a file
///   whether writing must drop a capability (`file_remove_privs`); the create's attributes
///   clear the inode's "no security attributes" mark, so a new file's first write asks
///   (the next ones do not: below);
/// - `write`: the bytes (no write-back cache: the overlay and journal see every write);
/// - `release`: the close, sent in the background.
///
/// `flush` is refused once (ENOSYS), before the counting starts, and never sent again.
#[test]
fn a_new_file_written_once_costs_six_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let m = Mount::new(&repo, None);
    let dir = m.dir.join("new");
    std::fs::create_dir(&dir).unwrap();
    // The first close is the one flush the kernel sends (answered ENOSYS).
    create_files(&dir, 0, 1);
    let before = settled(&m, &BTreeMap::new(), "release", 1);
    create_files(&dir, 1, FILES);
    let after = settled(&m, &before, "release", FILES);
    assert_eq!(
        delta(&before, &after),
        expected(&[
            ("create", FILES),
            ("getattr", FILES),
            ("getxattr", FILES),
            ("lookup", FILES),
            ("release", FILES),
            ("write", FILES),
        ]),
        "requests for {FILES} new files"
    );
}

/// With passthrough on, a created file's writes go from the kernel to its overlay file
/// directly: no `write` request (the rest as with it off).
#[test]
fn with_passthrough_a_new_file_written_once_costs_no_write_request() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let m = Mount::with_config(&repo, "[mount]\npassthrough = true\n");
    let dir = m.dir.join("new");
    std::fs::create_dir(&dir).unwrap();
    create_files(&dir, 0, 1);
    let before = settled(&m, &BTreeMap::new(), "release", 1);
    create_files(&dir, 1, FILES);
    let after = settled(&m, &before, "release", FILES);
    assert_eq!(
        delta(&before, &after),
        expected(&[
            ("create", FILES),
            ("getattr", FILES),
            ("getxattr", FILES),
            ("lookup", FILES),
            ("release", FILES),
        ]),
        "requests for {FILES} new files"
    );
}

/// A file written in several writes, as `tar xf` writes a file of more than one record, then
/// given its owner, as tar does: the kernel asks for `security.capability` before the first
/// write only (the daemon kills set-user-ID itself, `FUSE_HANDLE_KILLPRIV_V2`, so the kernel
/// may keep the inode's "no security attributes" mark), and once more for the chown, which
/// drops capabilities (`ATTR_KILL_PRIV`); the chown needs no `getattr` first. The one
/// `getattr` is the directory's, for the create's permission check. Before, each write
/// asked (6 `getxattr` here) and the chown fetched the file's attributes (2 `getattr`).
#[test]
fn a_file_written_in_several_writes_and_chowned_asks_for_its_capability_once() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let m = Mount::new(&repo, None);
    let dir = m.dir.join("new");
    std::fs::create_dir(&dir).unwrap();
    create_files(&dir, 0, 1);
    let before = settled(&m, &BTreeMap::new(), "release", 1);
    let path = dir.join("several");
    {
        let mut f = std::fs::File::create(&path).unwrap();
        for i in 0..5 {
            f.write_all(format!("record {i}\n").as_bytes()).unwrap();
        }
        std::os::unix::fs::fchown(&f, Some(0), Some(0)).unwrap();
    }
    let after = settled(&m, &before, "release", 1);
    assert_eq!(
        delta(&before, &after),
        expected(&[
            ("create", 1),
            ("getattr", 1),
            ("getxattr", 2),
            ("lookup", 1),
            ("release", 1),
            ("setattr", 1),
            ("write", 5),
        ]),
        "requests for a file written in 5 writes and chowned"
    );
}
