//! What the kernel knows of the tree, for telling its watchers of changes made behind its
//! back (`fuse/events.rs`): which inodes it holds (looked up and not forgotten), what a
//! path is now, inode numbers for names that no entry stands for any more.

use super::*;

impl WorkingCopy {
    /// `ino`'s attributes when the kernel holds it (a lookup not yet forgotten, whether
    /// or not a name still leads to it), with one link at least: what the kernel is told
    /// of a name just gone, so that the name it removes next is the inode it has.
    pub fn held_attr(&self, ino: u64) -> Option<Attr> {
        let inner = self.read();
        if inner.entries.get(&ino).is_none_or(|e| e.nlookup == 0) {
            return None;
        }
        let mut a = self.attr_of(&inner, ino).ok()?;
        a.nlink = a.nlink.max(1);
        Some(a)
    }

    /// The kernel was told of `ino` once more (a name just gone, looked up by the events
    /// helper): one more reference for its forget to drop.
    pub fn held_again(&self, ino: u64) {
        if let Some(e) = self.write().entries.get_mut(&ino) {
            e.nlookup += 1;
        }
    }

    /// A new inode number that no entry will ever have: for a name just gone whose inode
    /// the kernel never had (its forget finds no entry and does nothing).
    pub fn spare_ino(&self) -> u64 {
        let mut inner = self.write();
        let ino = inner.next_ino;
        inner.next_ino += 1;
        ino
    }

    /// What `path` is now, when the kernel holds it: its inode and type.
    pub fn held_at(&self, path: &[u8]) -> Option<(u64, EntryType)> {
        self.at(path, true)
    }

    /// What `path` is now, held by the kernel or not: its inode and type.
    pub fn entry_at(&self, path: &[u8]) -> Option<(u64, EntryType)> {
        self.at(path, false)
    }

    fn at(&self, path: &[u8], held: bool) -> Option<(u64, EntryType)> {
        let mut inner = self.write();
        let ino = inner.resolve(path).ok()??;
        let e = inner.entries.get(&ino)?;
        if held && e.nlookup == 0 && ino != ROOT_INO {
            return None;
        }
        Some((ino, e.kind.entry_type()))
    }
}
