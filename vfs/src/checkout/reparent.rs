//! A new parent with the working copy kept as it is: what hg's commit, amend and
//! `strip --keep` do to the dirstate in a mount (control request `set_parent`). No file
//! changes; the journal is rebased on the new parent, as after `revfs commit`.

use super::*;
use crate::wc::{Result, WorkingCopy};
use revfs_store::{Repo, StoreError};
use std::sync::Arc;

impl WorkingCopy {
    /// Makes `node` the working copy's parent without touching a file. `files` is hg's
    /// word on the paths whose state it changed with the parent (`dirstate.update_file`):
    /// tracked in the working copy or not, against the new parent; their copy sources go,
    /// as in hg. Every other tracking override keeps its meaning against the new parent.
    /// The repository is opened afresh (hg has just written the revision).
    pub fn set_parent(&self, node: Node, files: &[(Vec<u8>, bool)]) -> Result<()> {
        let _one = self.transition_lock();
        let repo = Arc::new(Repo::open(self.repo().root())?);
        let base = Arc::new(
            repo.manifest_at(&node)?
                .ok_or_else(|| StoreError::UnknownRevision(node.to_hex()))?,
        );
        self.room()?;
        let mut inner = self.write();
        for (path, tracked) in files {
            // Kept by rebase_journal only where it means something against the new parent.
            let track = if *tracked {
                Track::Added
            } else {
                Track::Removed
            };
            inner.tracking.insert(path.clone(), track);
            inner.copies.remove(path.as_slice());
            // It may differ from the new parent although it was clean against the old one
            // (strip --keep): the journal's rebase looks at it.
            inner.dirty.insert(path.clone());
        }
        inner.base = base;
        inner.base_node = node;
        inner.repo = repo;
        self.rebase_journal(&mut inner, &BTreeSet::new())
    }
}
