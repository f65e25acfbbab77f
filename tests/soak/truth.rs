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

    /// Whose bytes `got` are, for a failure's report: the files of this revision or of
    /// `other` that hold exactly them (another file's pages, or the other revision's), and
    /// its first bytes.
    fn whose(&self, got: &[u8], other: &Revision) -> String {
        let mut same = Vec::new();
        for rev in [self, other] {
            for f in &rev.files {
                let theirs = rev.tree.join(f);
                let fits = theirs
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_file() && m.len() == got.len() as u64);
                if fits && std::fs::read(&theirs).is_ok_and(|b| b == got) {
                    same.push(format!("{} in {}", f.display(), &rev.node[..12]));
                }
            }
        }
        let head = String::from_utf8_lossy(&got[..got.len().min(80)]).into_owned();
        if same.is_empty() {
            format!("no file of either revision holds these bytes; they begin {head:?}")
        } else {
            format!("the bytes of {}", same.join(", "))
        }
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
                Ok(got) => wrong.push(format!(
                    "{}; {}",
                    first_difference(&p, &got, &want),
                    self.whose(&got, other)
                )),
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
