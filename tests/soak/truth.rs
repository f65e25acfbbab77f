//! What the mount's tracked files must hold at each revision the soak moves between: each
//! revision's tree made by `hg archive` (hg's own answer, outside the mount), and the
//! check of the mount against it, every byte of every file.

use crate::model::first_difference;
use std::path::{Path, PathBuf};

pub struct Revision {
    /// The full node.
    pub node: String,
    /// `hg archive` of it.
    tree: PathBuf,
    /// Its files (relative paths, sorted).
    pub files: Vec<PathBuf>,
}

impl Revision {
    pub fn new(repo: &Path, rev: &str, scratch: &Path) -> Revision {
        let out = revfs_tests::hg_cmd(repo, &["log", "-r", rev, "-T", "{node}"]);
        let node = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(out.status.success() && node.len() == 40, "hg log -r {rev}");
        let tree = scratch.join(&node);
        revfs_tests::hg_archive(repo, &node, &tree);
        let files = revfs_tests::tree_files(&tree);
        Revision { node, tree, files }
    }

    /// The bytes of its regular file `f` (None for a link or a file it does not have).
    pub fn bytes(&self, f: &Path) -> Option<Vec<u8>> {
        let p = self.tree.join(f);
        let m = p.symlink_metadata().ok()?;
        if !m.file_type().is_file() {
            return None;
        }
        std::fs::read(p).ok()
    }

    /// The differences between the mount's tracked files and this revision's, each a line:
    /// a file missing or with other bytes, a file of `other` (the revision left) that
    /// should be gone.
    pub fn check(&self, mount: &Path, other: &Revision) -> Vec<String> {
        let mut wrong = Vec::new();
        for f in &self.files {
            let p = mount.join(f);
            let theirs = self.tree.join(f);
            if theirs
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                let want = std::fs::read_link(&theirs).expect("the archive's link");
                match std::fs::read_link(&p) {
                    Ok(got) if got == want => {}
                    Ok(got) => wrong.push(format!(
                        "{}: -> {}, not {}",
                        p.display(),
                        got.display(),
                        want.display()
                    )),
                    Err(e) => wrong.push(format!("{}: {e}", p.display())),
                }
                continue;
            }
            let want = match std::fs::read(&theirs) {
                Ok(w) => w,
                Err(e) => panic!("the archive's {}: {e}", f.display()),
            };
            match std::fs::read(&p) {
                Ok(got) if got == want => {}
                Ok(got) => wrong.push(first_difference(&p, &got, &want)),
                Err(e) => wrong.push(format!("{}: {e}", p.display())),
            }
        }
        for f in &other.files {
            if self.files.binary_search(f).is_err() && mount.join(f).symlink_metadata().is_ok() {
                wrong.push(format!(
                    "{}: still there, not in {}",
                    f.display(),
                    self.node
                ));
            }
        }
        wrong
    }
}
