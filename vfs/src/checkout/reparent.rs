//! A new parent with the working copy kept as it is: what hg's commit, amend and
//! `strip --keep` do to the dirstate in a mount (control request `set_parent`). No file
//! changes; the journal is rebased on the new parent, as after `revfs commit`.

use super::*;
use crate::wc::{Result, WorkingCopy};
use revfs_store::StoreError;
use std::sync::Arc;

impl WorkingCopy {
    /// Makes `node` the working copy's parent without touching a file. `files` is hg's
    /// word on the paths whose state it changed with the parent (`dirstate.update_file`):
    /// tracked in the working copy or not, against the new parent; their copy sources go,
    /// as in hg. Every other path keeps its tracking: a tracked file stays tracked (added
    /// when the new parent lacks it), an untracked one untracked (removed when the new
    /// parent has it).
    /// The repository is read as [`repo_for`](Self::repo_for) says.
    ///
    /// `p2` is the second parent of a merge hg is making (null: none, which ends any merge
    /// and its files' merge information); `hg.from_p2` the paths of `hg.tracked` that hg
    /// marked as merged or taken from it (the others of them lose that mark).
    ///
    /// `pending`: `node` may be a changeset of the hg transaction under way (hg wrote its
    /// pending changelog), read as hg's hooks read it.
    pub fn set_parent(&self, node: Node, p2: Node, hg: &HgFiles, pending: bool) -> Result<()> {
        let (files, from_p2) = (&hg.tracked, &hg.from_p2);
        let _one = self.transition_lock();
        let repo = self.repo_for(&node, pending)?;
        let base = if node == self.base_node() && Arc::ptr_eq(&repo, &self.repo()) {
            // The parent stays (a merge's second parent, hg's resolve, the end of an update
            // over local changes): its manifest is known.
            self.base_manifest()
        } else {
            Arc::new(
                repo.manifest_at(&node)?
                    .ok_or_else(|| StoreError::UnknownRevision(node.to_hex()))?,
            )
        };
        self.room()?;
        let mut inner = self.write();
        inner.set_provisional(pending);
        // The paths the two parents disagree on that hg did not name (debugsetparents names
        // none) keep their tracking, as hg's dirstate keeps their entries: tracked files the
        // new parent lacks become added, untracked ones it has become removed.
        let listed: BTreeSet<&[u8]> = files.iter().map(|(p, _)| p.as_slice()).collect();
        let mut changed: BTreeSet<Vec<u8>> = BTreeSet::new();
        for c in inner.base().diff(&base)? {
            if !listed.contains(c.path.as_slice()) {
                inner.keep_tracking(&c.path, c.old.is_some(), c.new.is_some());
            }
            changed.insert(c.path);
        }
        for (path, tracked) in files {
            // Kept by rebase_journal only where it means something against the new parent;
            // hg's word that the parent tracks a file it does not have, or does not track
            // one it has, is kept as it says (status then shows what hg's shows).
            let in_base = base.find(path)?.is_some();
            let claim = hg.in_p1.as_ref().map_or(in_base, |s| s.contains(path));
            let track = match (*tracked, claim, in_base) {
                (true, true, false) => Track::Claimed,
                (false, false, true) => Track::Dropped,
                (true, false, true) => Track::Readded,
                (true, _, _) => Track::Added,
                (false, _, _) => Track::Removed,
            };
            inner.set_hg_tracking(path, track);
        }
        inner.set_merge(p2, files, from_p2);
        // The working copy keeps its files: a directory not listed yet below a path the
        // parents differ on keeps the old entries.
        inner.move_base(base, node, repo, &changed);
        self.rebase_journal(&mut inner, &BTreeSet::new())
    }
}

/// hg's word on the files whose state it changed with the parents (`dirstate.update_file`).
#[derive(Debug, Default)]
pub struct HgFiles {
    /// Each path, tracked in the working copy or not.
    pub tracked: Vec<(Vec<u8>, bool)>,
    /// Those hg says the new first parent tracks (`p1_tracked`); `None`: as its manifest
    /// says.
    pub in_p1: Option<BTreeSet<Vec<u8>>>,
    /// Those hg marked as merged or taken from the second parent (`p2_info`).
    pub from_p2: BTreeSet<Vec<u8>>,
}
