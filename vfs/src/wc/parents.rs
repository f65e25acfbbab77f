//! The working copy's parents as the inode table holds them, changed only here: a move to
//! a new base (its manifest, node and repository handle), the merge's second parent and
//! the files taken from it, a provisional parent (set inside an hg transaction); and the
//! tracking that a move keeps, settles or journals. `checkout/` moves the working copy
//! through these.

use super::journal::Track;
use super::{Inner, Result};
use revfs_store::manifest::Manifest;
use revfs_store::{Node, Repo};
use std::collections::BTreeSet;
use std::sync::Arc;

impl Inner {
    /// Moves to a new parent: `base`, revision `node` of `repo`. Directories not listed yet
    /// below paths outside `changed` take their entries from it (see `share_base`).
    pub(crate) fn move_base(
        &mut self,
        base: Arc<Manifest>,
        node: Node,
        repo: Arc<Repo>,
        changed: &BTreeSet<Vec<u8>>,
    ) {
        let old = std::mem::replace(&mut self.base, base);
        self.share_base(&old, changed);
        drop(old);
        self.base_node = node;
        self.repo = repo;
    }

    /// Whether the parent was set inside an hg transaction, which may still be rolled back.
    pub(crate) fn set_provisional(&mut self, on: bool) {
        self.provisional = on;
    }

    /// No merge in progress any more: no second parent, no file taken from it.
    pub(crate) fn end_merge(&mut self) {
        self.p2 = Node::default();
        self.from_p2.clear();
    }

    /// The merge's second parent `p2` (null: none, which ends the merge), and for each of
    /// hg's `files`, whether it was merged or taken from it (`from_p2`).
    pub(crate) fn set_merge(
        &mut self,
        p2: Node,
        files: &[(Vec<u8>, bool)],
        from_p2: &BTreeSet<Vec<u8>>,
    ) {
        self.p2 = p2;
        if p2.is_null() {
            self.from_p2.clear();
        } else {
            for (path, _) in files {
                if from_p2.contains(path) {
                    self.from_p2.insert(path.clone());
                } else {
                    self.from_p2.remove(path);
                }
            }
        }
    }

    /// hg's word on a path's tracking with a new parent: kept as it says, without a copy
    /// source, and looked at by the journal's rebase (it may differ from the new parent
    /// although it was clean against the old one: strip --keep).
    pub(crate) fn set_hg_tracking(&mut self, path: &[u8], track: Track) {
        self.tracking.insert(path.to_vec(), track);
        self.copies.remove(path);
        self.dirty.insert(path.to_vec());
    }

    /// A path the old and the new parent disagree on (`in_old`, `in_new`) keeps its
    /// tracking across the move, as hg's dirstate keeps an entry it was not told of: a
    /// tracked file the new parent lacks becomes added, an untracked one it has becomes
    /// removed.
    pub(crate) fn keep_tracking(&mut self, path: &[u8], in_old: bool, in_new: bool) {
        let current = self.tracking.get(path).copied();
        let keep = match (in_old, in_new, current) {
            (true, false, Some(Track::Removed | Track::Dropped)) => Track::Default,
            (false, true, Some(Track::Claimed)) => Track::Default,
            (true, false, _) => Track::Added,
            (false, true, Some(Track::Added)) => Track::Default,
            (false, true, _) => Track::Removed,
            _ => return,
        };
        if keep == Track::Default {
            self.tracking.remove(path);
        } else {
            self.tracking.insert(path.to_vec(), keep);
        }
        self.dirty.insert(path.to_vec());
    }

    /// A file an update writes (hg's "get") is tracked as the target has it, whatever
    /// hg's dirstate had for it: one hg had no entry for although the parent has it (it
    /// shows as unknown) is no longer left so.
    pub(crate) fn got_by_update(&mut self, path: &[u8]) {
        if self.tracking.get(path) == Some(&Track::Dropped) {
            self.tracking.remove(path);
            self.dirty.insert(path.to_vec());
        }
    }

    /// Drops the tracking overrides that say nothing against the new parent (an added file
    /// it has, a removed one it lacks) and those of the files just committed, and the copy
    /// sources of the committed files.
    pub(crate) fn settle_tracking(&mut self, committed: &BTreeSet<Vec<u8>>) -> Result<()> {
        let mut gone = Vec::new();
        for (p, &t) in &self.tracking {
            let in_base = self.base.find(p)?.is_some();
            let means_something = match t {
                Track::Added | Track::Claimed => !in_base,
                Track::Removed | Track::Dropped | Track::Readded => in_base,
                Track::Default => false,
            };
            if !means_something || committed.contains(p) {
                gone.push(p.clone());
            }
        }
        for p in gone {
            self.tracking.remove(&p);
        }
        self.copies.retain(|dest, _| !committed.contains(dest));
        Ok(())
    }

    /// A new overlay id, for a file whose content goes to the overlay.
    pub(crate) fn new_overlay_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The journal now holds the working copy whole against its parent: nothing tentative
    /// is left, and `dirty` (the paths of its records) is what may differ from the parent.
    pub(crate) fn journaled(&mut self, dirty: BTreeSet<Vec<u8>>) {
        self.tentative.clear();
        self.dirty = dirty;
    }
}

/// What `checkout/` reads of the table's state (it changes it through the methods above).
impl Inner {
    /// The base manifest: the working-copy parent's.
    pub(crate) fn base(&self) -> &Arc<Manifest> {
        &self.base
    }

    pub(crate) fn base_node(&self) -> Node {
        self.base_node
    }

    /// The repository handle that knows the parent.
    pub(crate) fn repo(&self) -> &Arc<Repo> {
        &self.repo
    }

    /// The merge's second parent (null: no merge).
    pub(crate) fn p2(&self) -> Node {
        self.p2
    }

    /// Files merged or taken from the second parent.
    pub(crate) fn merged_from_p2(&self) -> &BTreeSet<Vec<u8>> {
        &self.from_p2
    }

    /// Whether the parent was set inside an hg transaction.
    pub(crate) fn provisional(&self) -> bool {
        self.provisional
    }

    /// Paths touched since the base revision.
    pub(crate) fn dirty(&self) -> &BTreeSet<Vec<u8>> {
        &self.dirty
    }

    /// Tracking overrides, by path.
    pub(crate) fn tracking(&self) -> &std::collections::BTreeMap<Vec<u8>, Track> {
        &self.tracking
    }

    /// Copy sources, by destination.
    pub(crate) fn copies(&self) -> &std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
        &self.copies
    }

    /// The inode table's entries.
    pub(crate) fn entries(&self) -> &std::collections::HashMap<u64, Box<super::Entry>> {
        &self.entries
    }
}
