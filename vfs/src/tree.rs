//! The inode table of a checkout: a read-only tree built lazily from one manifest.
//!
//! A directory's children are computed from the manifest the first time the directory is
//! looked up in or listed, and only then do they get inode numbers. Inode numbers are handed
//! out once and never reused while the mount lives, so they are stable for tools that key
//! on them. Files keep their manifest entry; their size is computed on first `getattr`.

use revfs_store::manifest::{Child, FileFlag, Manifest};
use revfs_store::{Node, Repo};
use std::sync::{Arc, OnceLock, RwLock};

/// Inode number of the root directory (FUSE's fixed value).
pub const ROOT_INO: u64 = 1;

/// What an inode is.
#[derive(Debug)]
pub enum Kind {
    Dir {
        /// Children sorted by name, filled on first use.
        children: OnceLock<Arc<[DirEntry]>>,
    },
    File {
        node: Node,
        flag: FileFlag,
        size: OnceLock<u64>,
    },
}

/// One inode.
#[derive(Debug)]
pub struct Inode {
    pub ino: u64,
    pub parent: u64,
    /// Repository path (`""` for the root).
    pub path: Box<[u8]>,
    pub kind: Kind,
}

impl Inode {
    /// The file's manifest flag, or `None` for a directory.
    pub fn flag(&self) -> Option<FileFlag> {
        match &self.kind {
            Kind::File { flag, .. } => Some(*flag),
            Kind::Dir { .. } => None,
        }
    }
}

/// A directory entry: its name, inode number and kind.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub name: Box<[u8]>,
    pub ino: u64,
    /// `None` for a directory.
    pub flag: Option<FileFlag>,
}

/// Errors the tree reports to the filesystem layer.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("no inode {0}")]
    NoInode(u64),
    #[error("inode {0} is not a directory")]
    NotADirectory(u64),
    #[error("inode {0} is a directory")]
    IsADirectory(u64),
    #[error(transparent)]
    Store(#[from] revfs_store::StoreError),
}

/// Refuses directory entry names that must never appear in a working copy.
fn check_name(name: &[u8]) -> Result<(), &'static str> {
    match name {
        b"" => Err("empty path component"),
        b"." | b".." => Err("'.' or '..' path component"),
        n if n.eq_ignore_ascii_case(b".hg") => Err("path inside .hg"),
        n if n.contains(&0) => Err("NUL in name"),
        _ => Ok(()),
    }
}

/// The tree of one revision.
pub struct Tree {
    repo: Arc<Repo>,
    manifest: Manifest,
    inodes: RwLock<Vec<Arc<Inode>>>,
}

impl Tree {
    pub fn new(repo: Arc<Repo>, manifest: Manifest) -> Tree {
        let root = Arc::new(Inode {
            ino: ROOT_INO,
            parent: ROOT_INO,
            path: Box::from(&b""[..]),
            kind: Kind::Dir {
                children: OnceLock::new(),
            },
        });
        Tree {
            repo,
            manifest,
            // Slot 0 is unused so that an inode number indexes the table directly.
            inodes: RwLock::new(vec![root.clone(), root]),
        }
    }

    pub fn repo(&self) -> &Arc<Repo> {
        &self.repo
    }

    /// Number of inodes handed out so far.
    pub fn inode_count(&self) -> usize {
        self.read_table().len() - 1
    }

    fn read_table(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Inode>>> {
        self.inodes.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The inode with number `ino`.
    pub fn get(&self, ino: u64) -> Result<Arc<Inode>, TreeError> {
        usize::try_from(ino)
            .ok()
            .filter(|&i| i >= 1)
            .and_then(|i| self.read_table().get(i).cloned())
            .ok_or(TreeError::NoInode(ino))
    }

    /// The children of directory `ino`, sorted by name, built on first use.
    pub fn children(&self, ino: u64) -> Result<Arc<[DirEntry]>, TreeError> {
        let dir = self.get(ino)?;
        let Kind::Dir { children } = &dir.kind else {
            return Err(TreeError::NotADirectory(ino));
        };
        if let Some(c) = children.get() {
            return Ok(c.clone());
        }
        let listing = self.manifest.children(&dir.path)?;
        let mut table = self.inodes.write().unwrap_or_else(|p| p.into_inner());
        // Another thread may have built it while we read the manifest.
        if let Some(c) = children.get() {
            return Ok(c.clone());
        }
        let mut entries: Vec<DirEntry> = Vec::with_capacity(listing.len());
        for child in listing {
            let name = match child {
                Child::File { name, .. } | Child::Dir { name } => name,
            };
            if let Err(why) = check_name(name) {
                tracing::warn!(
                    dir = %String::from_utf8_lossy(&dir.path),
                    name = %String::from_utf8_lossy(name),
                    "manifest entry not served: {why}"
                );
                continue;
            }
            let ino = table.len() as u64;
            let (name, kind, flag) = match child {
                Child::File { name, entry } => (
                    name,
                    Kind::File {
                        node: entry.node,
                        flag: entry.flag,
                        size: OnceLock::new(),
                    },
                    Some(entry.flag),
                ),
                Child::Dir { name } => (
                    name,
                    Kind::Dir {
                        children: OnceLock::new(),
                    },
                    None,
                ),
            };
            let mut path = dir.path.to_vec();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name);
            table.push(Arc::new(Inode {
                ino,
                parent: dir.ino,
                path: path.into(),
                kind,
            }));
            entries.push(DirEntry {
                name: name.into(),
                ino,
                flag,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        // A manifest holding both a file `x` and files under `x/` names two things `x`; serve
        // the first and say so.
        entries.dedup_by(|later, first| {
            let dup = later.name == first.name;
            if dup {
                tracing::warn!(
                    name = %String::from_utf8_lossy(&later.name),
                    "manifest names both a file and a directory; serving one"
                );
            }
            dup
        });
        let entries: Arc<[DirEntry]> = entries.into();
        let _ = children.set(entries.clone());
        Ok(entries)
    }

    /// The child `name` of directory `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Option<Arc<Inode>>, TreeError> {
        let children = self.children(parent)?;
        match children.binary_search_by(|e| (*e.name).cmp(name)) {
            Ok(i) => self.get(children[i].ino).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// The content size of a file inode, computed once (from the revlog index when that is
    /// enough) and remembered.
    pub fn size(&self, inode: &Inode) -> Result<u64, TreeError> {
        let Kind::File { node, size, .. } = &inode.kind else {
            return Err(TreeError::IsADirectory(inode.ino));
        };
        if let Some(s) = size.get() {
            return Ok(*s);
        }
        let filelog = self.repo.filelog(&inode.path)?;
        let s = filelog.size(filelog.rev_of(node)?)?;
        let _ = size.set(s);
        Ok(s)
    }

    /// The content of a file inode (symlink targets included).
    pub fn content(&self, inode: &Inode) -> Result<revfs_store::filelog::FileText, TreeError> {
        let Kind::File { node, .. } = &inode.kind else {
            return Err(TreeError::IsADirectory(inode.ino));
        };
        let filelog = self.repo.filelog(&inode.path)?;
        Ok(filelog.read(filelog.rev_of(node)?)?)
    }
}
