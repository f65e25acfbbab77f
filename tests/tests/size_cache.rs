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
    assert_eq!((len - 32) % 28, 0, "{len} bytes");
    // One record per file revision (files with the same content share one).
    let manifest = hg_cmd(&repo, &["manifest", "--debug", "-r", "tip"]);
    let nodes: std::collections::BTreeSet<&[u8]> = manifest
        .stdout
        .split(|&b| b == b'\n')
        .filter_map(|l| l.get(..40))
        .collect();
    assert_eq!((len - 32) / 28, nodes.len() as u64, "{len} bytes");

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
