//! The children of a loaded directory: names to inodes, sorted by name, with the number of
//! them that are directories kept up to date, so that a directory's link count (2 + its
//! subdirectories) costs nothing however many entries it has.
//!
//! A child file may be *frozen*: it has an inode number but no entry in the inode table,
//! only what rebuilds one here (its file node and flag: an unchanged store file at the
//! directory's `origin` path, with the default mode and no attribute of its own). A
//! directory's files start frozen when it is listed, a file is thawed when it is looked up
//! and frozen again when the kernel forgets it: a file costs the inode table nothing until
//! something uses it, and its inode number stays the same across.

use revfs_store::manifest::FileFlag;
use revfs_store::Node;
use std::collections::BTreeMap;

/// One child: its inode and what it is (a directory's is fixed for the life of an inode);
/// `node` is meaningful for a frozen file only.
#[derive(Debug, Clone, Copy)]
struct Child {
    ino: u64,
    node: Node,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Dir,
    /// A file (or any non-directory) with an entry in the inode table.
    Loaded,
    /// A file with none: rebuilt from `node` and this flag.
    Frozen(FileFlag),
}

#[derive(Debug, Default)]
pub struct Children {
    names: BTreeMap<Box<[u8]>, Child>,
    subdirs: u32,
    frozen: u32,
    /// The manifest directory the frozen files' filelogs are named after (the path the
    /// directory was listed from); `None` for a directory made through the mount, whose
    /// files are never frozen.
    origin: Option<Box<[u8]>>,
}

impl Children {
    pub fn new() -> Children {
        Children::default()
    }

    /// The children of manifest directory `origin`, none yet.
    pub fn listed_from(origin: &[u8]) -> Children {
        Children {
            origin: Some(origin.into()),
            ..Children::default()
        }
    }

    pub fn get(&self, name: &[u8]) -> Option<u64> {
        self.names.get(name).map(|c| c.ino)
    }

    /// `name`'s inode and, when it is frozen, its file node and flag.
    pub fn get_full(&self, name: &[u8]) -> Option<(u64, Option<(Node, FileFlag)>)> {
        self.names.get(name).map(|c| match c.state {
            State::Frozen(flag) => (c.ino, Some((c.node, flag))),
            _ => (c.ino, None),
        })
    }

    pub fn contains(&self, name: &[u8]) -> bool {
        self.names.contains_key(name)
    }

    /// Names `ino` (a directory when `dir`) `name`, replacing what had that name.
    pub fn insert(&mut self, name: Box<[u8]>, ino: u64, dir: bool) {
        let state = if dir { State::Dir } else { State::Loaded };
        self.put(name, ino, Node::default(), state);
    }

    /// Names frozen file `ino` (`node`, `flag`) `name`.
    pub fn insert_frozen(&mut self, name: Box<[u8]>, ino: u64, node: Node, flag: FileFlag) {
        self.put(name, ino, node, State::Frozen(flag));
    }

    fn put(&mut self, name: Box<[u8]>, ino: u64, node: Node, state: State) {
        if let Some(old) = self.names.insert(name, Child { ino, node, state }) {
            self.forget_state(old.state);
        }
        self.subdirs += u32::from(state == State::Dir);
        self.frozen += u32::from(matches!(state, State::Frozen(_)));
    }

    fn forget_state(&mut self, state: State) {
        self.subdirs -= u32::from(state == State::Dir);
        self.frozen -= u32::from(matches!(state, State::Frozen(_)));
    }

    /// Marks frozen child `name` as loaded; its node and flag, if it was frozen.
    pub fn thaw(&mut self, name: &[u8]) -> Option<(Node, FileFlag)> {
        let c = self.names.get_mut(name)?;
        let State::Frozen(flag) = c.state else {
            return None;
        };
        c.state = State::Loaded;
        self.frozen -= 1;
        Some((c.node, flag))
    }

    /// Marks loaded file `name` frozen as `node` and `flag`; false if it is not a loaded
    /// file.
    pub fn freeze(&mut self, name: &[u8], node: Node, flag: FileFlag) -> bool {
        let Some(c) = self.names.get_mut(name) else {
            return false;
        };
        if c.state != State::Loaded {
            return false;
        }
        c.state = State::Frozen(flag);
        c.node = node;
        self.frozen += 1;
        true
    }

    /// The path of frozen child `name`'s filelog (`origin/name`); `None` for a directory
    /// with no origin.
    pub fn store_path(&self, name: &[u8]) -> Option<Vec<u8>> {
        let origin = self.origin.as_deref()?;
        let mut p = Vec::with_capacity(origin.len() + 1 + name.len());
        p.extend_from_slice(origin);
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        Some(p)
    }

    /// The manifest directory the directory was listed from (`None`: made through the
    /// mount).
    pub fn origin(&self) -> Option<&[u8]> {
        self.origin.as_deref()
    }

    /// Whether `path` is the path [`Children::store_path`] gives `name`.
    pub fn is_store_path(&self, name: &[u8], path: &[u8]) -> bool {
        let Some(origin) = self.origin.as_deref() else {
            return false;
        };
        match path.strip_suffix(name) {
            Some(head) if origin.is_empty() => head.is_empty(),
            Some(head) => head.strip_suffix(b"/") == Some(origin),
            None => false,
        }
    }

    /// Removes `name`; its inode, if it was there.
    pub fn remove(&mut self, name: &[u8]) -> Option<u64> {
        let old = self.names.remove(name)?;
        self.forget_state(old.state);
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

    /// How many children are frozen files.
    pub fn frozen(&self) -> u32 {
        self.frozen
    }

    /// Names and inodes, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.names.iter().map(|(n, c)| (&n[..], c.ino))
    }

    /// Frozen children: names, inodes and nodes, sorted by name.
    pub fn frozen_nodes(&self) -> impl Iterator<Item = (&[u8], u64, Node)> {
        self.names.iter().filter_map(|(n, c)| match c.state {
            State::Frozen(_) => Some((&n[..], c.ino, c.node)),
            _ => None,
        })
    }

    /// Names, inodes and, for frozen files, their flag, sorted by name.
    pub fn iter_full(&self) -> impl Iterator<Item = (&[u8], u64, Option<FileFlag>)> {
        self.names.iter().map(|(n, c)| {
            let flag = match c.state {
                State::Frozen(f) => Some(f),
                _ => None,
            };
            (&n[..], c.ino, flag)
        })
    }

    /// The files named after `name`, in name order (directories and frozen symlinks left
    /// out): their names, and a frozen file's node or a loaded one's inode (its entry has
    /// what it is).
    pub fn files_after<'a>(
        &'a self,
        name: &[u8],
    ) -> impl Iterator<Item = (&'a [u8], Result<Node, u64>)> {
        use std::ops::Bound;
        self.names
            .range::<[u8], _>((Bound::Excluded(name), Bound::Unbounded))
            .filter_map(|(n, c)| match c.state {
                State::Dir | State::Frozen(FileFlag::Symlink) => None,
                State::Frozen(_) => Some((&n[..], Ok(c.node))),
                State::Loaded => Some((&n[..], Err(c.ino))),
            })
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

    #[test]
    fn a_frozen_file_keeps_its_inode_and_node_through_a_thaw_and_a_freeze() {
        let node = Node([7; 20]);
        let mut c = Children::listed_from(b"src/lib");
        c.insert_frozen(b"a.rs".as_slice().into(), 10, node, FileFlag::Executable);
        c.insert(b"d".as_slice().into(), 11, true);
        assert_eq!((c.frozen(), c.subdirs()), (1, 1));
        assert_eq!(
            c.get_full(b"a.rs"),
            Some((10, Some((node, FileFlag::Executable))))
        );
        assert_eq!(c.store_path(b"a.rs").as_deref(), Some(&b"src/lib/a.rs"[..]));
        assert!(c.is_store_path(b"a.rs", b"src/lib/a.rs"));
        assert!(!c.is_store_path(b"a.rs", b"src/libx/a.rs"));
        assert!(!c.is_store_path(b"a.rs", b"xsrc/lib/a.rs"));
        assert!(!c.is_store_path(b"a.rs", b"a.rs"));
        assert_eq!(c.thaw(b"a.rs"), Some((node, FileFlag::Executable)));
        assert_eq!(c.thaw(b"a.rs"), None);
        assert_eq!((c.frozen(), c.get_full(b"a.rs")), (0, Some((10, None))));
        assert!(!c.freeze(b"d", node, FileFlag::Regular), "a directory");
        assert!(c.freeze(b"a.rs", node, FileFlag::Regular));
        assert_eq!(c.remove(b"a.rs"), Some(10));
        assert_eq!((c.frozen(), c.len()), (0, 1));
        let mut root = Children::listed_from(b"");
        root.insert_frozen(b"top".as_slice().into(), 2, node, FileFlag::Symlink);
        assert!(root.is_store_path(b"top", b"top"));
        assert!(!root.is_store_path(b"top", b"d/top"));
        assert!(!Children::new().is_store_path(b"top", b"top"));
    }
}
