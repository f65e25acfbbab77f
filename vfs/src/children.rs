//! The children of a loaded directory: names to inodes, sorted by name, with the number of
//! them that are directories kept up to date, so that a directory's link count (2 + its
//! subdirectories) costs nothing however many entries it has.

use std::collections::BTreeMap;

/// One child: its inode and whether it is a directory (fixed for the life of an inode).
#[derive(Debug, Clone, Copy)]
struct Child {
    ino: u64,
    dir: bool,
}

#[derive(Debug, Default)]
pub struct Children {
    names: BTreeMap<Box<[u8]>, Child>,
    subdirs: u32,
}

impl Children {
    pub fn new() -> Children {
        Children::default()
    }

    pub fn get(&self, name: &[u8]) -> Option<u64> {
        self.names.get(name).map(|c| c.ino)
    }

    pub fn contains(&self, name: &[u8]) -> bool {
        self.names.contains_key(name)
    }

    /// Names `ino` (a directory when `dir`) `name`, replacing what had that name.
    pub fn insert(&mut self, name: Box<[u8]>, ino: u64, dir: bool) {
        if let Some(old) = self.names.insert(name, Child { ino, dir }) {
            self.subdirs -= u32::from(old.dir);
        }
        self.subdirs += u32::from(dir);
    }

    /// Removes `name`; its inode, if it was there.
    pub fn remove(&mut self, name: &[u8]) -> Option<u64> {
        let old = self.names.remove(name)?;
        self.subdirs -= u32::from(old.dir);
        Some(old.ino)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// How many children are directories.
    pub fn subdirs(&self) -> u32 {
        self.subdirs
    }

    /// Names and inodes, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.names.iter().map(|(n, c)| (&n[..], c.ino))
    }

    /// Inodes, in the order of their names.
    pub fn inodes(&self) -> impl Iterator<Item = u64> + '_ {
        self.names.values().map(|c| c.ino)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subdirectory_count_follows_inserts_replacements_and_removals() {
        let mut c = Children::new();
        c.insert(b"a".as_slice().into(), 2, true);
        c.insert(b"b".as_slice().into(), 3, false);
        c.insert(b"c".as_slice().into(), 4, true);
        assert_eq!((c.len(), c.subdirs()), (3, 2));
        c.insert(b"a".as_slice().into(), 5, false);
        assert_eq!((c.len(), c.subdirs()), (3, 1));
        c.insert(b"b".as_slice().into(), 6, true);
        assert_eq!((c.len(), c.subdirs()), (3, 2));
        assert_eq!(c.remove(b"c"), Some(4));
        assert_eq!(c.remove(b"c"), None);
        assert_eq!((c.len(), c.subdirs()), (2, 1));
        let all: Vec<(&[u8], u64)> = c.iter().collect();
        assert_eq!(all, [(b"a".as_slice(), 5), (b"b".as_slice(), 6)]);
    }
}
