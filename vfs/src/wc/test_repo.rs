//! For the working copy's unit tests: repositories built with real hg, and a working copy
//! opened on one of their revisions.

use super::*;
use std::process::Command;

/// Runs hg in `repo` (no user configuration) and returns its output; fails the test when hg
/// fails.
pub(crate) fn hg(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("hg")
        .args(args)
        .current_dir(repo)
        .env("HGPLAIN", "1")
        .env("HGRCPATH", "")
        .env("HGUSER", "t")
        .output()
        .expect("hg runs");
    assert!(
        out.status.success(),
        "hg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Writes `data` at `path` under `root`, making its directories.
pub(crate) fn put(root: &Path, path: &str, data: &[u8]) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
    std::fs::write(&p, data).expect("write");
}

/// The node of revision `rev` of `repo`.
pub(crate) fn node(repo: &Path, rev: &str) -> Node {
    let hex = hg(repo, &["log", "-r", rev, "-T", "{node}"]);
    Node::from_hex(hex.as_bytes()).expect("a node")
}

/// A working copy of `repo` at `rev`, its state in `state`.
pub(crate) fn open_at(repo: &Path, rev: Node, state: &Path) -> WorkingCopy {
    let handle = Repo::open(repo).expect("repo");
    let manifest = handle
        .manifest_at(&rev)
        .expect("manifest")
        .expect("the rev");
    std::fs::create_dir_all(state).expect("mkdir");
    WorkingCopy::open(
        Arc::new(handle),
        rev,
        manifest,
        state,
        SystemTime::now(),
        16,
    )
    .expect("working copy")
}

/// `len` bytes that do not compress (a revlog keeps them whole).
pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
