//! The size cache (docs/FORMATS.md, "Size cache"): the sizes a mount learned are kept in the
//! repository's `.hg/cache/revfs/sizes`, and the next mount stats every file without
//! opening a filelog; the sizes are hg's (copies and renames, whose revisions carry
//! metadata, included); a damaged file is removed and made again.

use revfs_tests::mount::Mount;
use revfs_tests::{fixture_copy, hg_cmd};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The size of every file and symlink below `root` (lstat), `.hg` and `.revfs` aside.
fn sizes_of(root: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_name() == ".hg" || e.file_name() == ".revfs" {
                continue;
            }
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, meta.len());
            }
        }
    }
    out
}

#[test]
fn sizes_kept_by_one_mount_serve_the_next_without_opening_filelogs() {
    let tmp = fixture_copy("history");
    let repo = tmp.path().join("repo");
    let tip = tmp.path().join("tip");
    revfs_tests::hg_archive(&repo, "tip", &tip);
    let want = sizes_of(&tip);
    // (Mounts of the shared fixture may have kept sizes in it already.)
    let cache = repo.join(".hg/cache/revfs/sizes");
    let _ = std::fs::remove_file(&cache);

    let m = Mount::new(&repo, Some("tip"));
    assert_eq!(sizes_of(&m.dir), want, "first mount");
    assert!(m.stats().get("open_filelogs") > 0);
    m.unmount();
    let len = std::fs::metadata(&cache)
        .expect("the sizes were kept")
        .len();
    assert_eq!((len - 32) % 32, 0, "{len} bytes");
    // One record per file revision (files with the same content share one).
    let manifest = hg_cmd(&repo, &["manifest", "--debug", "-r", "tip"]);
    let nodes: std::collections::BTreeSet<&[u8]> = manifest
        .stdout
        .split(|&b| b == b'\n')
        .filter_map(|l| l.get(..40))
        .collect();
    assert_eq!((len - 32) / 32, nodes.len() as u64, "{len} bytes");

    m.remount(&repo, Some("tip"));
    assert_eq!(sizes_of(&m.dir), want, "second mount");
    let s = m.stats();
    assert_eq!(s.get("open_filelogs"), 0, "a filelog was opened: {s}");
    m.unmount();

    // A damaged cache is removed; the sizes are found again, and kept again.
    let mut bytes = std::fs::read(&cache).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x40;
    std::fs::write(&cache, &bytes).unwrap();
    m.remount(&repo, Some("tip"));
    assert_eq!(sizes_of(&m.dir), want, "after damage");
    assert!(
        m.log().contains("checksum mismatch: removed"),
        "{}",
        m.log()
    );
    m.unmount();
    assert_eq!(std::fs::metadata(&cache).unwrap().len(), len);
}

#[test]
fn a_text_checked_before_is_checked_again_when_its_stored_chunk_changed() {
    // A mount keeps, with a file's size, the CRC-32 of the chunk whose text it checked
    // against the node (SHA-1): the next mount skips that hash for the same chunk, and
    // checks again a chunk changed since, as hg does every time.
    let tmp = tempfile::tempdir().unwrap();
    let repo = revfs_tests::hg_repo(
        tmp.path(),
        &[
            ("a.txt", &b"hello world\n"[..]),
            ("b.txt", &b"another file\n"[..]),
        ],
    );
    let m = Mount::new(&repo, Some("tip"));
    assert_eq!(
        std::fs::read(m.dir.join("a.txt")).unwrap(),
        b"hello world\n"
    );
    m.unmount();
    // The record of a.txt's node says its chunk was checked.
    let manifest = hg_cmd(&repo, &["manifest", "--debug", "-r", "tip"]);
    let line = manifest
        .stdout
        .split(|&b| b == b'\n')
        .find(|l| l.ends_with(b" a.txt"))
        .expect("a.txt in the manifest")
        .to_vec();
    let node: Vec<u8> = (0..20)
        .map(|i| {
            u8::from_str_radix(std::str::from_utf8(&line[2 * i..2 * i + 2]).unwrap(), 16).unwrap()
        })
        .collect();
    let cache = std::fs::read(repo.join(".hg/cache/revfs/sizes")).unwrap();
    let record = cache[32..]
        .chunks(32)
        .find(|r| r[..20] == node[..])
        .expect("a.txt's size kept");
    assert_eq!(record[20] & 0x80, 0x80, "a.txt's chunk not kept as checked");
    assert_eq!(&record[21..28], &[0, 0, 0, 0, 0, 0, 12], "a.txt's size");

    // Its stored chunk (stored as is: too short to compress) changed, same length.
    let index = repo.join(".hg/store/data/a.txt.i");
    let mut bytes = std::fs::read(&index).unwrap();
    let at = bytes
        .windows(11)
        .position(|w| w == b"hello world")
        .expect("the text stored as is");
    bytes[at + 4] = b'O';
    std::fs::write(&index, &bytes).unwrap();
    m.remount(&repo, Some("tip"));
    let read = std::fs::read(m.dir.join("a.txt"));
    assert!(read.is_err(), "a damaged text was read: {read:?}");
    assert!(m.log().contains("integrity check failed"), "{}", m.log());
    assert_eq!(
        std::fs::read(m.dir.join("b.txt")).unwrap(),
        b"another file\n"
    );
    m.unmount();
}

#[test]
fn a_text_checked_before_is_checked_again_when_its_parents_changed() {
    // The node hashes the parents too: a text checked before, whose index entry now names
    // other parents, is checked again and fails, as hg fails.
    let tmp = tempfile::tempdir().unwrap();
    let repo = revfs_tests::hg_repo(tmp.path(), &[("f", &b"a\n"[..])]);
    std::fs::write(repo.join("f"), b"b\n").unwrap();
    let out = hg_cmd(&repo, &["commit", "-q", "-m", "second"]);
    assert!(out.status.success(), "{out:?}");
    let m = Mount::new(&repo, Some("tip"));
    assert_eq!(std::fs::read(m.dir.join("f")).unwrap(), b"b\n");
    m.unmount();

    // Revision 1 of f is stored whole (a delta would be longer than the text): its parent
    // revision 0 is made null.
    let index = repo.join(".hg/store/data/f.i");
    let mut bytes = std::fs::read(&index).unwrap();
    let word = |b: &[u8], at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let entry1 = 64 + word(&bytes, 8) as usize;
    assert_eq!(
        word(&bytes, entry1 + 16),
        1,
        "revision 1 is not stored whole"
    );
    assert_eq!(word(&bytes, entry1 + 24), 0, "revision 1's first parent");
    bytes[entry1 + 24..entry1 + 28].copy_from_slice(&[0xff; 4]);
    std::fs::write(&index, &bytes).unwrap();
    let hg = hg_cmd(&repo, &["cat", "-r", "tip", "f"]);
    assert!(
        String::from_utf8_lossy(&hg.stderr).contains("integrity check failed on data/f:1"),
        "{hg:?}"
    );
    m.remount(&repo, Some("tip"));
    let read = std::fs::read(m.dir.join("f"));
    assert!(
        read.is_err(),
        "a text with other parents was read: {read:?}"
    );
    assert!(m.log().contains("integrity check failed"), "{}", m.log());
    m.unmount();
}
