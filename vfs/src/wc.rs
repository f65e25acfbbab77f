//! The working copy: the tree of one base revision, built lazily from its manifest, with
//! every change made through the mount applied on top. Changes are journaled by path
//! ([`crate::journal`]) and file contents that differ from the store live in the
//! [`crate::overlay`]; at mount time the journal is replayed over the base tree, so a
//! remount (even after the daemon was killed) finds the working copy as it was.
//!
//! Inode numbers are handed out the first time an entry is seen and never reused while the
//! daemon runs. Entries come from the manifest only when their directory is first listed
//! or looked up in. Every path a change touches goes to the dirty set that `status` reads.

use crate::children::Children;
use crate::journal::{Journal, JournalError, PutEntry, Record, SpecialKind, Track};
use crate::overlay::Overlay;
use revfs_store::manifest::{Child, FileFlag, Manifest};
use revfs_store::{Node, Repo, StoreError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockWriteGuard};
use std::time::SystemTime;

/// Inode number of the root directory (FUSE's fixed value).
pub const ROOT_INO: u64 = 1;

/// `renameat2` flags.
pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;

/// Errors of working-copy operations; each maps to the errno the kernel gets.
#[derive(Debug, thiserror::Error)]
pub enum WcError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("directory not empty")]
    NotEmpty,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("invalid argument")]
    Invalid,
    #[error("operation not supported")]
    NotSupported,
    #[error("operation not permitted")]
    NotPermitted,
    #[error("no data or hole past the end of the file")]
    NoSuchOffset,
    #[error("no such attribute")]
    NoAttr,
    #[error("attribute name too long")]
    AttrNameTooLong,
    #[error("attribute value too long")]
    AttrTooBig,
    #[error("overlay: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Ignore(String),
    #[error("file name too long")]
    NameTooLong,
    #[error("nothing changed")]
    NothingChanged,
    #[error("the change journal could not be rewritten after a commit or an update; unmount and mount again (nothing is lost: the journal still holds the working copy as it was before)")]
    JournalStale,
    /// An update would overwrite these changed or untracked paths.
    #[error("uncommitted changes")]
    UncommittedChanges(Vec<Vec<u8>>),
    #[error("journal record {index} ({record}) cannot be applied: {cause}")]
    Replay {
        index: usize,
        record: String,
        cause: Box<WcError>,
    },
}

impl WcError {
    /// The errno for the kernel.
    pub fn errno(&self) -> i32 {
        match self {
            WcError::NotFound => libc::ENOENT,
            WcError::Exists => libc::EEXIST,
            WcError::NotEmpty => libc::ENOTEMPTY,
            WcError::NotDir => libc::ENOTDIR,
            WcError::IsDir => libc::EISDIR,
            WcError::Invalid => libc::EINVAL,
            WcError::NameTooLong => libc::ENAMETOOLONG,
            WcError::NotSupported => libc::EOPNOTSUPP,
            WcError::NotPermitted => libc::EPERM,
            WcError::NoSuchOffset => libc::ENXIO,
            WcError::NoAttr => libc::ENODATA,
            WcError::AttrNameTooLong => libc::ERANGE,
            WcError::AttrTooBig => libc::E2BIG,
            WcError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            WcError::Journal(JournalError::Io { source, .. }) => {
                source.raw_os_error().unwrap_or(libc::EIO)
            }
            _ => libc::EIO,
        }
    }
}

pub type Result<T, E = WcError> = std::result::Result<T, E>;

/// Where a file's bytes are.
#[derive(Debug)]
pub enum FileData {
    /// Unchanged content of a store file revision (`path` names its filelog).
    Store {
        path: Box<[u8]>,
        node: Node,
        size: OnceLock<u64>,
    },
    /// Content in overlay file `id`.
    Overlay { id: u64 },
}

/// Where a symlink's target is.
#[derive(Debug)]
pub enum LinkData {
    Store { path: Box<[u8]>, node: Node },
    Local(Box<[u8]>),
}

/// Where a directory that is not loaded yet takes its entries from: a directory of some
/// manifest (the base's, or an older base's for a directory moved before an update).
#[derive(Clone)]
pub struct DirSource {
    pub manifest: Arc<Manifest>,
    pub path: Box<[u8]>,
}

impl std::fmt::Debug for DirSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DirSource({:?})", String::from_utf8_lossy(&self.path))
    }
}

#[derive(Debug)]
pub enum Kind {
    Dir {
        /// The manifest directory whose entries seed this one (None: a new directory).
        source: Option<DirSource>,
        /// Children by name, once loaded.
        children: Option<Children>,
    },
    File(FileData),
    Symlink(LinkData),
    /// A fifo, socket or device node: local to the working copy, never tracked.
    Special {
        kind: SpecialKind,
        rdev: u32,
    },
}

impl Kind {
    /// A file or symlink whose content is revision `node` of filelog `path`, as a manifest
    /// entry with `flag` describes it.
    pub(crate) fn from_store(path: &[u8], node: Node, flag: FileFlag) -> Kind {
        match flag {
            FileFlag::Symlink => Kind::Symlink(LinkData::Store {
                path: path.into(),
                node,
            }),
            _ => Kind::File(FileData::Store {
                path: path.into(),
                node,
                size: OnceLock::new(),
            }),
        }
    }
}

/// One inode of the working copy.
#[derive(Debug)]
pub struct Entry {
    /// Parent directory; 0 once unlinked.
    pub parent: u64,
    pub name: Box<[u8]>,
    /// Kernel references (lookups not yet forgotten).
    pub nlookup: u64,
    pub kind: Kind,
    /// Permission bits.
    pub mode: u32,
    /// Modification time of entries not in the overlay; `None` means the checkout time.
    pub mtime: Option<SystemTime>,
    pub ctime: Option<SystemTime>,
    /// Access time, once set by utimensat; `None` means the modification time (the mount
    /// is `noatime`: reads never change it).
    pub atime: Option<SystemTime>,
    /// Owner and group, when not the mounting user's.
    pub owner: Option<(u32, u32)>,
    /// Extended attributes (`user.` names only), when it has any.
    pub xattrs: Option<Box<Xattrs>>,
}

/// Extended attributes: full names (`user.x`) to values.
pub type Xattrs = BTreeMap<Box<[u8]>, Box<[u8]>>;

/// The longest attribute name and value Linux accepts (XATTR_NAME_MAX, XATTR_SIZE_MAX).
pub const XATTR_NAME_MAX: usize = 255;
pub const XATTR_SIZE_MAX: usize = 65536;

/// A directory listing: the parent's inode (`..`), then (name, inode, type) by name.
pub type Listing = (u64, Vec<(Box<[u8]>, u64, EntryType)>);

/// What an inode is, for attributes and directory entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryType {
    Dir,
    File,
    Symlink,
    Special(SpecialKind),
}

/// Attributes of an inode.
#[derive(Debug, Clone, Copy)]
pub struct Attr {
    pub ino: u64,
    pub kind: EntryType,
    pub size: u64,
    pub perm: u16,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    pub atime: SystemTime,
    /// Device number of a device node.
    pub rdev: u32,
    /// Owner and group, when not the mounting user's.
    pub owner: Option<(u32, u32)>,
    /// Links: 0 for a file unlinked while open, 1 for others, 2 plus the number of
    /// subdirectories for directories.
    pub nlink: u32,
    /// 512-byte blocks allocated: an overlay file's own (holes take none); the size's for
    /// the rest.
    pub blocks: u64,
}

/// The attributes a setattr request changes (`None`: left alone).
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SystemTime>,
    pub mtime: Option<SystemTime>,
}

pub(crate) struct Inner {
    pub(crate) entries: HashMap<u64, Entry>,
    next_ino: u64,
    next_id: u64,
    /// Paths touched since the base revision (files or directories).
    pub(crate) dirty: BTreeSet<Vec<u8>>,
    /// Tracking overrides (only `Added` and `Removed` are kept).
    pub(crate) tracking: BTreeMap<Vec<u8>, Track>,
    /// Copy sources of copied or renamed files: destination -> source.
    pub(crate) copies: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The working-copy parent: its node and manifest, and the repository it is read from
    /// (all three change together at commit and update).
    pub(crate) base: Arc<Manifest>,
    pub(crate) base_node: Node,
    pub(crate) repo: Arc<Repo>,
    /// The time of the operation under way: taken from the clock once per hold of the write
    /// lock, journaled (`Record::Clock`) before its records, and during replay taken from
    /// them, so that the times it stamps come back exactly after a remount.
    op_time: Option<SystemTime>,
}

/// The mutable working copy of one mount.
pub struct WorkingCopy {
    pub(crate) checkout_time: SystemTime,
    /// The user and group the daemon runs as: the owner of every entry without its own.
    mount_owner: (u32, u32),
    pub(crate) overlay: Overlay,
    /// Rebuilt big texts, on disk in the state directory (`texts/`).
    pub(crate) texts: revfs_store::bigtext::BigTextCache,
    texts_dir: PathBuf,
    pub(crate) inner: RwLock<Inner>,
    journal: Mutex<Journal>,
    /// The compiled `.hgignore` (it knows the files it was compiled from).
    pub(crate) ignore_cache: Mutex<Option<Arc<crate::ignore::Ignore>>>,
    /// Held by a commit or an update from start to end: one at a time.
    transition: Mutex<()>,
    /// Set when the journal could not be rewritten after a commit or an update: the tree in
    /// memory is ahead of the journal on disk, so no further change is accepted (the journal
    /// still describes the working copy as it was before, which a remount restores).
    pub(crate) journal_stale: std::sync::atomic::AtomicBool,
}

pub(crate) fn perm_of_flag(flag: FileFlag) -> u32 {
    match flag {
        FileFlag::Executable => 0o755,
        FileFlag::Symlink => 0o777,
        FileFlag::Regular => 0o644,
    }
}

/// The longest file name (`NAME_MAX`), as ext4 and most Linux filesystems allow.
pub const NAME_MAX: usize = 255;

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(WcError::Invalid);
    }
    Ok(())
}

/// A name a new entry may get through the mount: a valid one of at most [`NAME_MAX`] bytes.
/// (Replay does not check the length, so that a journal written before the limit existed
/// still opens.)
fn check_new_name(name: &[u8]) -> Result<()> {
    check_name(name)?;
    if name.len() > NAME_MAX {
        return Err(WcError::NameTooLong);
    }
    Ok(())
}

/// Names that must never appear in a working copy from the manifest.
fn unsafe_manifest_name(name: &[u8]) -> Option<&'static str> {
    match name {
        b"" => Some("empty path component"),
        b"." | b".." => Some("'.' or '..' path component"),
        n if n.eq_ignore_ascii_case(b".hg") => Some("path inside .hg"),
        _ => None,
    }
}

impl Inner {
    pub(crate) fn entry(&self, ino: u64) -> Result<&Entry> {
        self.entries.get(&ino).ok_or(WcError::NotFound)
    }

    pub(crate) fn entry_mut(&mut self, ino: u64) -> Result<&mut Entry> {
        self.entries.get_mut(&ino).ok_or(WcError::NotFound)
    }

    pub(crate) fn alloc(&mut self, parent: u64, name: &[u8], kind: Kind, mode: u32) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.entries.insert(
            ino,
            Entry {
                parent,
                name: name.into(),
                nlookup: 0,
                kind,
                mode,
                mtime: None,
                ctime: None,
                atime: None,
                owner: None,
                xattrs: None,
            },
        );
        ino
    }

    /// Loads the children of directory `ino` from the base manifest if not done yet.
    pub(crate) fn load(&mut self, ino: u64) -> Result<()> {
        let source = match &self.entry(ino)?.kind {
            Kind::Dir {
                children: Some(_), ..
            } => return Ok(()),
            Kind::Dir {
                children: None,
                source,
            } => source.clone(),
            _ => return Err(WcError::NotDir),
        };
        let mut children = Children::new();
        if let Some(DirSource {
            manifest,
            path: source,
        }) = source
        {
            for child in manifest.children(&source)? {
                let name = match child {
                    Child::File { name, .. } | Child::Dir { name } => name,
                };
                if let Some(why) = unsafe_manifest_name(name) {
                    tracing::warn!(dir = %String::from_utf8_lossy(&source), name = %String::from_utf8_lossy(name), "manifest entry not served: {why}");
                    continue;
                }
                if children.contains(name) {
                    tracing::warn!(name = %String::from_utf8_lossy(name), "manifest names both a file and a directory; serving the first");
                    continue;
                }
                let mut path = source.to_vec();
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(name);
                let (kind, mode) = match child {
                    Child::File { entry, .. } => (
                        Kind::from_store(&path, entry.node, entry.flag),
                        perm_of_flag(entry.flag),
                    ),
                    Child::Dir { .. } => (
                        Kind::Dir {
                            source: Some(DirSource {
                                manifest: manifest.clone(),
                                path: path.into(),
                            }),
                            children: None,
                        },
                        0o755,
                    ),
                };
                let dir = matches!(kind, Kind::Dir { .. });
                let child_ino = self.alloc(ino, name, kind, mode);
                children.insert(Box::from(name), child_ino, dir);
            }
        }
        if let Kind::Dir { children: slot, .. } = &mut self.entry_mut(ino)?.kind {
            *slot = Some(children);
        }
        Ok(())
    }

    pub(crate) fn children(&mut self, ino: u64) -> Result<&Children> {
        self.load(ino)?;
        match &self.entry(ino)?.kind {
            Kind::Dir {
                children: Some(c), ..
            } => Ok(c),
            _ => Err(WcError::NotDir),
        }
    }

    pub(crate) fn child(&mut self, parent: u64, name: &[u8]) -> Result<Option<u64>> {
        Ok(self.children(parent)?.get(name))
    }

    pub(crate) fn children_mut(&mut self, ino: u64) -> Result<&mut Children> {
        match &mut self.entry_mut(ino)?.kind {
            Kind::Dir {
                children: Some(c), ..
            } => Ok(c),
            Kind::Dir { .. } => Err(WcError::Invalid),
            _ => Err(WcError::NotDir),
        }
    }

    /// The repository path of a linked inode (`None` once unlinked).
    pub(crate) fn path_of(&self, mut ino: u64) -> Option<Vec<u8>> {
        let mut parts: Vec<&[u8]> = Vec::new();
        while ino != ROOT_INO {
            let e = self.entries.get(&ino)?;
            if e.parent == 0 {
                return None;
            }
            parts.push(&e.name);
            ino = e.parent;
        }
        parts.reverse();
        Some(parts.join(&b'/'))
    }

    /// The inode at `path`, loading directories on the way.
    pub(crate) fn resolve(&mut self, path: &[u8]) -> Result<Option<u64>> {
        let mut ino = ROOT_INO;
        if path.is_empty() {
            return Ok(Some(ino));
        }
        for part in path.split(|&b| b == b'/') {
            if !matches!(self.entry(ino)?.kind, Kind::Dir { .. }) {
                return Ok(None);
            }
            match self.child(ino, part)? {
                Some(c) => ino = c,
                None => return Ok(None),
            }
        }
        Ok(Some(ino))
    }

    /// The directory that holds `path` and the last component.
    pub(crate) fn resolve_parent<'p>(&mut self, path: &'p [u8]) -> Result<(u64, &'p [u8])> {
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], path),
        };
        let parent = self.resolve(dir)?.ok_or(WcError::NotFound)?;
        if !matches!(self.entry(parent)?.kind, Kind::Dir { .. }) {
            return Err(WcError::NotDir);
        }
        Ok((parent, name))
    }

    /// True when directory `ino` is `ancestor` or below it.
    pub(crate) fn is_within(&self, mut ino: u64, ancestor: u64) -> Result<bool> {
        loop {
            if ino == ancestor {
                return Ok(true);
            }
            if ino == ROOT_INO || ino == 0 {
                return Ok(false);
            }
            ino = self.entry(ino)?.parent;
        }
    }

    pub(crate) fn is_dir(&self, ino: u64) -> bool {
        matches!(
            self.entries.get(&ino).map(|e| &e.kind),
            Some(Kind::Dir { .. })
        )
    }

    /// The time of the operation under way (see `op_time`).
    pub(crate) fn now(&mut self) -> SystemTime {
        *self.op_time.get_or_insert_with(SystemTime::now)
    }

    pub(crate) fn touch_dir(&mut self, ino: u64) {
        let now = Some(self.now());
        if let Some(e) = self.entries.get_mut(&ino) {
            e.mtime = now;
            e.ctime = now;
        }
    }

    /// Adds a new child; fails if the name is taken.
    pub(crate) fn link_new(
        &mut self,
        parent: u64,
        name: &[u8],
        kind: Kind,
        mode: u32,
    ) -> Result<u64> {
        check_name(name)?;
        if self.child(parent, name)?.is_some() {
            return Err(WcError::Exists);
        }
        let dir = matches!(kind, Kind::Dir { .. });
        let ino = self.alloc(parent, name, kind, mode);
        let now = Some(self.now());
        if let Some(e) = self.entries.get_mut(&ino) {
            e.mtime = now;
            e.ctime = now;
        }
        self.children_mut(parent)?.insert(name.into(), ino, dir);
        self.touch_dir(parent);
        Ok(ino)
    }

    /// Detaches `ino` from its parent; frees it (and its overlay file) when the kernel
    /// holds no reference. Returns an overlay id to delete, if any.
    pub(crate) fn detach(&mut self, ino: u64) -> Option<u64> {
        let (parent, name) = match self.entries.get(&ino) {
            Some(e) => (e.parent, e.name.clone()),
            None => return None,
        };
        if let Ok(children) = self.children_mut(parent) {
            children.remove(&name);
        }
        self.touch_dir(parent);
        let now = Some(self.now());
        let e = self.entries.get_mut(&ino)?;
        e.parent = 0;
        e.ctime = now;
        if e.nlookup == 0 {
            return self.free(ino);
        }
        None
    }

    /// Detaches `ino` and, for a loaded directory, everything below it; returns the overlay
    /// ids to delete.
    pub(crate) fn detach_tree(&mut self, ino: u64) -> Vec<u64> {
        let mut freed = Vec::new();
        let mut stack = vec![ino];
        let mut order = Vec::new();
        while let Some(i) = stack.pop() {
            order.push(i);
            if let Some(Entry {
                kind: Kind::Dir {
                    children: Some(c), ..
                },
                ..
            }) = self.entries.get(&i)
            {
                stack.extend(c.inodes());
            }
        }
        // Children before their directories.
        for i in order.into_iter().rev() {
            freed.extend(self.detach(i));
        }
        freed
    }

    /// Makes `path` hold `entry` (see [`Record::Put`]); returns an overlay id it replaced.
    pub(crate) fn put(
        &mut self,
        path: &[u8],
        entry: &PutEntry,
        mode: u32,
        mtime: Option<SystemTime>,
    ) -> Result<Option<u64>> {
        let (parent, name) = self.resolve_parent(path)?;
        let kind = match entry {
            PutEntry::Dir => Kind::Dir {
                source: None,
                children: Some(Children::new()),
            },
            PutEntry::StoreFile { source, node } => Kind::File(FileData::Store {
                path: source.as_slice().into(),
                node: *node,
                size: OnceLock::new(),
            }),
            PutEntry::OverlayFile { id } => Kind::File(FileData::Overlay { id: *id }),
            PutEntry::StoreLink { source, node } => Kind::Symlink(LinkData::Store {
                path: source.as_slice().into(),
                node: *node,
            }),
            PutEntry::LocalLink { target } => {
                Kind::Symlink(LinkData::Local(target.as_slice().into()))
            }
            PutEntry::Special { kind, rdev } => Kind::Special {
                kind: *kind,
                rdev: *rdev,
            },
        };
        let is_dir = matches!(entry, PutEntry::Dir);
        let mut freed = None;
        match self.child(parent, name)? {
            Some(ino) => {
                let was_dir = self.is_dir(ino);
                let e = self.entry_mut(ino)?;
                match (was_dir, is_dir) {
                    (true, true) => {}
                    (true, false) => return Err(WcError::IsDir),
                    (false, true) => return Err(WcError::Exists),
                    (false, false) => {
                        let old = std::mem::replace(&mut e.kind, kind);
                        if let Kind::File(FileData::Overlay { id }) = old {
                            if !matches!(entry, PutEntry::OverlayFile { id: new } if *new == id) {
                                freed = Some(id);
                            }
                        }
                    }
                }
                e.mode = mode;
                e.mtime = mtime;
            }
            None => {
                let ino = self.link_new(parent, name, kind, mode)?;
                self.entry_mut(ino)?.mtime = mtime;
            }
        }
        Ok(freed)
    }

    /// Frees an unlinked inode with no kernel references.
    pub(crate) fn free(&mut self, ino: u64) -> Option<u64> {
        let e = self.entries.remove(&ino)?;
        match e.kind {
            Kind::File(FileData::Overlay { id }) => Some(id),
            Kind::Dir {
                children: Some(children),
                ..
            } => {
                // A removed directory is empty; nothing else to free.
                debug_assert!(children.is_empty());
                None
            }
            _ => None,
        }
    }
}

impl WorkingCopy {
    /// Opens the working copy of `base_node` kept in `state` (overlay and journal), replaying
    /// the journal over the base tree.
    pub fn open(
        repo: Arc<Repo>,
        base_node: Node,
        base: Manifest,
        state: &Path,
        checkout_time: SystemTime,
        open_files: usize,
    ) -> Result<WorkingCopy> {
        let base = Arc::new(base);
        let overlay = Overlay::open(&state.join("overlay"), open_files)?;
        let texts_dir = state.join("texts");
        let texts = revfs_store::bigtext::BigTextCache::open(
            &texts_dir,
            revfs_store::repo::RepoOptions::process_default().big_text_cache_bytes,
        )?;
        let (journal, records) = Journal::open(&state.join("journal"), &base_node)?;
        let mut entries = HashMap::new();
        entries.insert(
            ROOT_INO,
            Entry {
                parent: ROOT_INO,
                name: Box::from(&b""[..]),
                nlookup: 1,
                kind: Kind::Dir {
                    source: Some(DirSource {
                        manifest: base.clone(),
                        path: Box::from(&b""[..]),
                    }),
                    children: None,
                },
                mode: 0o755,
                mtime: None,
                ctime: None,
                atime: None,
                owner: None,
                xattrs: None,
            },
        );
        let on_disk = overlay.ids()?;
        let wc = WorkingCopy {
            checkout_time,
            // SAFETY: getuid/getgid have no preconditions.
            mount_owner: unsafe { (libc::getuid(), libc::getgid()) },
            overlay,
            texts,
            texts_dir,
            inner: RwLock::new(Inner {
                entries,
                next_ino: ROOT_INO + 1,
                next_id: on_disk.iter().max().map_or(1, |m| m + 1),
                dirty: BTreeSet::new(),
                tracking: BTreeMap::new(),
                copies: BTreeMap::new(),
                base,
                base_node,
                repo,
                op_time: None,
            }),
            journal: Mutex::new(journal),
            ignore_cache: Mutex::new(None),
            transition: Mutex::new(()),
            journal_stale: std::sync::atomic::AtomicBool::new(false),
        };
        {
            let mut inner = wc.write();
            for (index, rec) in records.iter().enumerate() {
                wc.apply(&mut inner, rec).map_err(|cause| WcError::Replay {
                    index,
                    record: rec.describe(),
                    cause: Box::new(cause),
                })?;
                // A clock applies to the one record after it; records without one (older
                // journals, a rewritten journal) are stamped with the time of the replay.
                if !matches!(rec, Record::Clock { .. }) {
                    inner.op_time = None;
                }
                if let Record::Create { id, .. }
                | Record::Materialize { id, .. }
                | Record::Put {
                    entry: PutEntry::OverlayFile { id },
                    ..
                } = rec
                {
                    inner.next_id = inner.next_id.max(id + 1);
                }
            }
            // Overlay files nothing points at any more (files unlinked while open when the
            // daemon stopped) are garbage.
            let live: BTreeSet<u64> = inner
                .entries
                .values()
                .filter_map(|e| match e.kind {
                    Kind::File(FileData::Overlay { id }) => Some(id),
                    _ => None,
                })
                .collect();
            for id in on_disk.into_iter().filter(|id| !live.contains(id)) {
                let _ = wc.overlay.remove(id);
            }
            if !records.is_empty() {
                tracing::info!(
                    records = records.len(),
                    changed = inner.dirty.len(),
                    "journal replayed"
                );
            }
        }
        Ok(wc)
    }

    /// The repository the working copy reads from (a fresh one after commit and update).
    /// Where the on-disk text cache is.
    pub(crate) fn texts_dir(&self) -> &Path {
        &self.texts_dir
    }

    pub fn repo(&self) -> Arc<Repo> {
        self.read().repo.clone()
    }

    /// The working-copy parent.
    pub fn base_node(&self) -> Node {
        self.read().base_node
    }

    /// The working-copy parent's manifest.
    pub fn base_manifest(&self) -> Arc<Manifest> {
        self.read().base.clone()
    }

    /// The working copy, for a change: an operation's time is taken afresh (once) under
    /// each hold.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        inner.op_time = None;
        inner
    }

    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The owner (uid, gid) of entries that have none of their own: the mounting user.
    pub fn mount_owner(&self) -> (u32, u32) {
        self.mount_owner
    }

    /// The owner (uid, gid) and permission bits of `ino`, without the rest of its
    /// attributes (no size, no subdirectory count).
    pub fn owner_and_mode(&self, ino: u64) -> Result<((u32, u32), u32)> {
        let inner = self.read();
        let e = inner.entry(ino)?;
        Ok((e.owner.unwrap_or(self.mount_owner), e.mode))
    }

    /// Number of inodes built so far.
    pub fn inode_count(&self) -> usize {
        self.read().entries.len()
    }

    /// Makes room in the journal for the record of a change about to be made, so that a
    /// full disk refuses the change (ENOSPC) instead of leaving it out of the journal.
    fn room(&self) -> Result<()> {
        Ok(self.journal().reserve()?)
    }

    pub(crate) fn transition_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.transition.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a mutation: into the journal (when the inode has a path) and the dirty set.
    fn record(&self, inner: &mut Inner, rec: Record) -> Result<()> {
        if self
            .journal_stale
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(WcError::JournalStale);
        }
        // Every record but tracking and copy marks changes times: the operation's time goes
        // first (taken now if the operation has not taken it yet: a record may be written
        // before the change it describes is made).
        if matches!(rec, Record::Track { .. } | Record::Copy { .. }) {
            self.journal().append(&rec)?;
        } else {
            let (secs, nanos) = unix_time(inner.now());
            self.journal()
                .append_all(&[Record::Clock { secs, nanos }, rec.clone()])?;
        }
        for p in rec.paths() {
            inner.dirty.insert(p.to_vec());
        }
        Ok(())
    }

    /// Applies a journal record during replay.
    fn apply(&self, inner: &mut Inner, rec: &Record) -> Result<()> {
        match rec {
            Record::Create { path, id, mode } => {
                let (parent, name) = inner.resolve_parent(path)?;
                inner.link_new(
                    parent,
                    name,
                    Kind::File(FileData::Overlay { id: *id }),
                    *mode,
                )?;
            }
            Record::Materialize { path, id } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                inner.entry_mut(ino)?.kind = Kind::File(FileData::Overlay { id: *id });
            }
            Record::Mkdir { path, mode } => {
                let (parent, name) = inner.resolve_parent(path)?;
                let dir = Kind::Dir {
                    source: None,
                    children: Some(Children::new()),
                };
                inner.link_new(parent, name, dir, *mode)?;
            }
            Record::Symlink { path, target } => {
                let (parent, name) = inner.resolve_parent(path)?;
                inner.link_new(
                    parent,
                    name,
                    Kind::Symlink(LinkData::Local(target.as_slice().into())),
                    0o777,
                )?;
            }
            Record::Unlink { path } | Record::Rmdir { path } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                if let Some(id) = inner.detach(ino) {
                    let _ = self.overlay.remove(id);
                }
            }
            Record::Rename { from, to, flags } => {
                let (sp, sn) = inner.resolve_parent(from)?;
                let (dp, dn) = inner.resolve_parent(to)?;
                if let Some(id) = self.do_rename(inner, sp, sn, dp, dn, *flags)? {
                    let _ = self.overlay.remove(id);
                }
            }
            Record::SetMode { path, mode } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let changed = inner.op_time;
                let e = inner.entry_mut(ino)?;
                e.mode = *mode;
                e.ctime = changed.or(e.ctime);
            }
            Record::SetMtime { path, secs, nanos } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let changed = inner.op_time;
                let e = inner.entry_mut(ino)?;
                e.mtime = Some(system_time(*secs, *nanos));
                e.ctime = changed.or(e.ctime);
            }
            Record::SetAtime { path, secs, nanos } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let changed = inner.op_time;
                let e = inner.entry_mut(ino)?;
                e.atime = Some(system_time(*secs, *nanos));
                e.ctime = changed.or(e.ctime);
            }
            Record::SetOwner { path, uid, gid } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let changed = inner.op_time;
                let e = inner.entry_mut(ino)?;
                e.owner = Some((*uid, *gid));
                e.ctime = changed.or(e.ctime);
            }
            Record::Clock { secs, nanos } => inner.op_time = Some(system_time(*secs, *nanos)),
            Record::SetXattr { path, name, value } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let changed = inner.op_time;
                let e = inner.entry_mut(ino)?;
                e.xattrs
                    .get_or_insert_with(Default::default)
                    .insert(name.as_slice().into(), value.as_slice().into());
                e.ctime = changed.or(e.ctime);
            }
            Record::RemoveXattr { path, name } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let changed = inner.op_time;
                let e = inner.entry_mut(ino)?;
                if let Some(x) = &mut e.xattrs {
                    x.remove(name.as_slice());
                    if x.is_empty() {
                        e.xattrs = None;
                    }
                }
                e.ctime = changed.or(e.ctime);
            }
            Record::Times { path, mtime, ctime } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let e = inner.entry_mut(ino)?;
                if let Some((s, n)) = mtime {
                    if !matches!(e.kind, Kind::File(FileData::Overlay { .. })) {
                        e.mtime = Some(system_time(*s, *n));
                    }
                }
                e.ctime = Some(system_time(ctime.0, ctime.1));
            }
            Record::Track { path, track } => set_track(inner, path, *track),
            Record::Copy { dest, source } => set_copy(inner, dest, source),
            Record::Restore { path } => {
                if let Some(id) = self.do_restore(inner, path)? {
                    let _ = self.overlay.remove(id);
                }
            }
            Record::Special {
                path,
                kind,
                mode,
                rdev,
            } => {
                let (parent, name) = inner.resolve_parent(path)?;
                let special = Kind::Special {
                    kind: *kind,
                    rdev: *rdev,
                };
                inner.link_new(parent, name, special, *mode)?;
            }
            Record::Remove { path } => {
                if let Some(ino) = inner.resolve(path)? {
                    if ino == ROOT_INO {
                        return Err(WcError::Invalid);
                    }
                    for id in inner.detach_tree(ino) {
                        let _ = self.overlay.remove(id);
                    }
                }
            }
            Record::Put {
                path,
                entry,
                mode,
                mtime,
            } => {
                let mtime = mtime.map(|(s, n)| system_time(s, n));
                if let Some(id) = inner.put(path, entry, *mode, mtime)? {
                    let _ = self.overlay.remove(id);
                }
            }
        }
        for p in rec.paths() {
            inner.dirty.insert(p.to_vec());
        }
        Ok(())
    }

    // ----- reading -----

    fn attr_of(&self, inner: &Inner, ino: u64) -> Result<Attr> {
        let e = inner.entry(ino)?;
        let mtime = e.mtime.unwrap_or(self.checkout_time);
        let ctime = e.ctime.unwrap_or(mtime);
        let mut blocks = None;
        let (kind, size, mtime) = match &e.kind {
            Kind::Dir { .. } => (EntryType::Dir, 4096, mtime),
            Kind::Symlink(LinkData::Local(t)) => (EntryType::Symlink, t.len() as u64, mtime),
            Kind::Special { kind, .. } => (EntryType::Special(*kind), 0, mtime),
            Kind::Symlink(LinkData::Store { path, node }) => {
                let fl = inner.repo.filelog(path)?;
                (EntryType::Symlink, fl.size(fl.rev_of(node)?)?, mtime)
            }
            Kind::File(FileData::Store { path, node, size }) => {
                let s = match size.get() {
                    Some(s) => *s,
                    None => {
                        let fl = inner.repo.filelog(path)?;
                        let s = fl.size(fl.rev_of(node)?)?;
                        let _ = size.set(s);
                        s
                    }
                };
                (EntryType::File, s, mtime)
            }
            Kind::File(FileData::Overlay { id }) => {
                let meta = self.overlay.metadata(*id)?;
                blocks = Some(std::os::unix::fs::MetadataExt::blocks(&meta));
                (
                    EntryType::File,
                    meta.len(),
                    meta.modified().unwrap_or(mtime),
                )
            }
        };
        let rdev = match e.kind {
            Kind::Special { rdev, .. } => rdev,
            _ => 0,
        };
        let nlink = match &e.kind {
            // "." and the entry in the parent, and each subdirectory's "..".
            Kind::Dir { children, source } => {
                let subdirs = match (children, source) {
                    (Some(c), _) => c.subdirs() as usize,
                    // A manifest that cannot be listed fails the listing (which names
                    // it), not the attributes.
                    (None, Some(src)) => src.manifest.children(&src.path).map_or(0, |c| {
                        c.iter()
                            .filter(|c| matches!(c, revfs_store::manifest::Child::Dir { .. }))
                            .count()
                    }),
                    (None, None) => 0,
                };
                2 + subdirs as u32
            }
            _ if e.parent == 0 => 0,
            _ => 1,
        };
        Ok(Attr {
            ino,
            kind,
            size,
            // Counted as ext4 allocates: whole 4 KiB blocks.
            blocks: blocks.unwrap_or(size.div_ceil(4096) * 8),
            rdev,
            perm: (e.mode & 0o7777) as u16,
            atime: e.atime.unwrap_or(mtime),
            owner: e.owner,
            nlink,
            mtime,
            ctime: if kind == EntryType::File
                && matches!(e.kind, Kind::File(FileData::Overlay { .. }))
            {
                mtime.max(ctime)
            } else {
                ctime
            },
        })
    }

    /// Attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        self.attr_of(&self.read(), ino)
    }

    /// Looks up `name` in `parent`; a found entry gains one kernel reference.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Option<Attr>> {
        if name.len() > NAME_MAX {
            return Err(WcError::NameTooLong);
        }
        let mut inner = self.write();
        let Some(ino) = inner.child(parent, name)? else {
            return Ok(None);
        };
        let attr = self.attr_of(&inner, ino)?;
        inner.entry_mut(ino)?.nlookup += 1;
        Ok(Some(attr))
    }

    /// The kernel dropped `n` references to `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        let mut inner = self.write();
        let Some(e) = inner.entries.get_mut(&ino) else {
            return;
        };
        e.nlookup = e.nlookup.saturating_sub(n);
        if e.nlookup == 0 && e.parent == 0 && ino != ROOT_INO {
            if let Some(id) = inner.free(ino) {
                let _ = self.overlay.remove(id);
            }
        }
    }

    /// The entries of directory `ino`, sorted by name, with `..`'s inode.
    pub fn readdir(&self, ino: u64) -> Result<Listing> {
        self.readdir_locked(&mut self.write(), ino)
    }

    /// [`WorkingCopy::readdir`] with the lock already held.
    pub(crate) fn readdir_locked(&self, inner: &mut Inner, ino: u64) -> Result<Listing> {
        let children: Vec<(Box<[u8]>, u64)> = inner
            .children(ino)?
            .iter()
            .map(|(n, i)| (Box::from(n), i))
            .collect();
        let out = children
            .into_iter()
            .map(|(n, i)| {
                let t = match inner.entries.get(&i).map(|e| &e.kind) {
                    Some(Kind::Dir { .. }) => EntryType::Dir,
                    Some(Kind::Symlink(_)) => EntryType::Symlink,
                    Some(Kind::Special { kind, .. }) => EntryType::Special(*kind),
                    _ => EntryType::File,
                };
                (n, i, t)
            })
            .collect();
        Ok((inner.entry(ino)?.parent, out))
    }

    /// Every path below directory `ino` (at `path`), loading directories as it goes: the
    /// files, and the directories too when `dirs`.
    pub(crate) fn paths_below(
        &self,
        inner: &mut Inner,
        ino: u64,
        path: &[u8],
        dirs: bool,
        out: &mut BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        let mut stack = vec![(ino, path.to_vec())];
        while let Some((dir, prefix)) = stack.pop() {
            let (_, children) = self.readdir_locked(inner, dir)?;
            for (name, child, kind) in children {
                let mut p = prefix.clone();
                if !p.is_empty() {
                    p.push(b'/');
                }
                p.extend_from_slice(&name);
                let is_dir = kind == EntryType::Dir;
                if is_dir {
                    stack.push((child, p.clone()));
                }
                if !is_dir || dirs {
                    out.insert(p);
                }
            }
        }
        Ok(())
    }

    /// Reads file content.
    pub fn read_file(&self, ino: u64, offset: u64, size: usize) -> Result<Vec<u8>> {
        let (path, node, repo) = {
            let inner = self.read();
            match &inner.entry(ino)?.kind {
                // Read under the (shared) lock: commit may drop an overlay file once its
                // content is in the store, and does so under the exclusive lock.
                Kind::File(FileData::Overlay { id }) => {
                    return Ok(self.overlay.read(*id, offset, size)?)
                }
                Kind::File(FileData::Store { path, node, .. }) => {
                    (path.clone(), *node, inner.repo.clone())
                }
                Kind::Dir { .. } => return Err(WcError::IsDir),
                Kind::Symlink(_) | Kind::Special { .. } => return Err(WcError::Invalid),
            }
        };
        // Outside the lock: a big text's first read rebuilds it.
        Ok(self.store_text(&repo, &path, &node)?.read(offset, size)?)
    }

    /// A symlink's target.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        let inner = self.read();
        match &inner.entry(ino)?.kind {
            Kind::Symlink(LinkData::Local(t)) => Ok(t.to_vec()),
            Kind::Symlink(LinkData::Store { path, node }) => {
                let fl = inner.repo.filelog(path)?;
                Ok(fl.read(fl.rev_of(node)?)?.to_vec())
            }
            _ => Err(WcError::Invalid),
        }
    }

    // ----- writing -----

    fn new_overlay(&self, inner: &mut Inner, content: &[u8]) -> Result<u64> {
        let id = inner.next_id;
        inner.next_id += 1;
        if let Err(e) = self.overlay.create(id, content) {
            // A copy cut short by a full disk is of no use to anyone.
            let _ = self.overlay.remove(id);
            return Err(e.into());
        }
        Ok(id)
    }

    /// Creates a regular file.
    pub fn create(&self, parent: u64, name: &[u8], mode: u32) -> Result<Attr> {
        self.room()?;
        let mut inner = self.write();
        check_new_name(name)?;
        if inner.child(parent, name)?.is_some() {
            return Err(WcError::Exists);
        }
        let path = child_path(&inner, parent, name)?;
        let id = self.new_overlay(&mut inner, b"")?;
        let mode = mode & 0o7777;
        let ino = inner.link_new(parent, name, Kind::File(FileData::Overlay { id }), mode)?;
        self.record(&mut inner, Record::Create { path, id, mode })?;
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    pub fn mkdir(&self, parent: u64, name: &[u8], mode: u32) -> Result<Attr> {
        self.room()?;
        check_new_name(name)?;
        let mut inner = self.write();
        let path = child_path(&inner, parent, name)?;
        let mode = mode & 0o7777;
        let dir = Kind::Dir {
            source: None,
            children: Some(Children::new()),
        };
        let ino = inner.link_new(parent, name, dir, mode)?;
        self.record(&mut inner, Record::Mkdir { path, mode })?;
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    pub fn symlink(&self, parent: u64, name: &[u8], target: &[u8]) -> Result<Attr> {
        self.room()?;
        check_new_name(name)?;
        let mut inner = self.write();
        let path = child_path(&inner, parent, name)?;
        let ino = inner.link_new(
            parent,
            name,
            Kind::Symlink(LinkData::Local(target.into())),
            0o777,
        )?;
        self.record(
            &mut inner,
            Record::Symlink {
                path,
                target: target.to_vec(),
            },
        )?;
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    /// Creates a fifo, socket or device node (local to the working copy).
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: SpecialKind,
        mode: u32,
        rdev: u32,
    ) -> Result<Attr> {
        self.room()?;
        check_new_name(name)?;
        let mut inner = self.write();
        let path = child_path(&inner, parent, name)?;
        let mode = mode & 0o7777;
        let ino = inner.link_new(parent, name, Kind::Special { kind, rdev }, mode)?;
        self.record(
            &mut inner,
            Record::Special {
                path,
                kind,
                mode,
                rdev,
            },
        )?;
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, false)
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, true)
    }

    fn remove_entry(&self, parent: u64, name: &[u8], dir: bool) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        let ino = inner.child(parent, name)?.ok_or(WcError::NotFound)?;
        match (dir, inner.is_dir(ino)) {
            (false, true) => return Err(WcError::IsDir),
            (true, false) => return Err(WcError::NotDir),
            (true, true) if !inner.children(ino)?.is_empty() => {
                return Err(WcError::NotEmpty);
            }
            _ => {}
        }
        let path = child_path(&inner, parent, name)?;
        self.record(
            &mut inner,
            if dir {
                Record::Rmdir { path }
            } else {
                Record::Unlink { path }
            },
        )?;
        if let Some(id) = inner.detach(ino) {
            let _ = self.overlay.remove(id);
        }
        Ok(())
    }

    /// Renames; returns nothing, like rename(2). `flags` as renameat2.
    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        check_new_name(newname)?;
        let from = child_path(&inner, parent, name)?;
        let to = child_path(&inner, newparent, newname)?;
        if let Some(id) = self.do_rename(&mut inner, parent, name, newparent, newname, flags)? {
            let _ = self.overlay.remove(id);
        }
        if from != to {
            self.record(&mut inner, Record::Rename { from, to, flags })?;
        }
        Ok(())
    }

    /// The rename itself; returns an overlay id freed by replacing a file.
    fn do_rename(
        &self,
        inner: &mut Inner,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<Option<u64>> {
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
            || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        {
            return Err(WcError::Invalid);
        }
        let src = inner.child(parent, name)?.ok_or(WcError::NotFound)?;
        if !inner.is_dir(newparent) {
            return Err(WcError::NotDir);
        }
        let dst = inner.child(newparent, newname)?;
        if dst == Some(src) {
            return Ok(None);
        }
        // A directory cannot move below itself.
        if inner.is_dir(src) && inner.is_within(newparent, src)? {
            return Err(WcError::Invalid);
        }
        let mut freed = None;
        if flags & RENAME_EXCHANGE != 0 {
            let dst = dst.ok_or(WcError::NotFound)?;
            if inner.is_dir(dst) && inner.is_within(parent, dst)? {
                return Err(WcError::Invalid);
            }
            let (src_dir, dst_dir) = (inner.is_dir(src), inner.is_dir(dst));
            inner
                .children_mut(parent)?
                .insert(name.into(), dst, dst_dir);
            inner
                .children_mut(newparent)?
                .insert(newname.into(), src, src_dir);
            let e = inner.entry_mut(dst)?;
            e.parent = parent;
            e.name = name.into();
        } else {
            if let Some(dst) = dst {
                if flags & RENAME_NOREPLACE != 0 {
                    return Err(WcError::Exists);
                }
                match (inner.is_dir(src), inner.is_dir(dst)) {
                    (true, false) => return Err(WcError::NotDir),
                    (false, true) => return Err(WcError::IsDir),
                    (true, true) if !inner.children(dst)?.is_empty() => {
                        return Err(WcError::NotEmpty)
                    }
                    _ => {}
                }
                freed = inner.detach(dst);
            }
            let src_dir = inner.is_dir(src);
            inner.children_mut(parent)?.remove(name);
            inner
                .children_mut(newparent)?
                .insert(newname.into(), src, src_dir);
        }
        let now = Some(inner.now());
        let e = inner.entry_mut(src)?;
        e.parent = newparent;
        e.name = newname.into();
        e.ctime = now;
        inner.touch_dir(parent);
        inner.touch_dir(newparent);
        Ok(freed)
    }

    /// Moves a store file into the overlay (copy-up) so that it can be written; returns its
    /// overlay id. `keep` = false starts it empty (truncation to zero). The content is
    /// copied without the working copy's lock (a big file takes a while, and its text may
    /// first be rebuilt), then installed if the inode still holds that store revision.
    fn materialize(&self, ino: u64, keep: bool) -> Result<u64> {
        loop {
            let (path, node, repo) = {
                let inner = self.read();
                match &inner.entry(ino)?.kind {
                    Kind::File(FileData::Overlay { id }) => return Ok(*id),
                    Kind::File(FileData::Store { path, node, .. }) => {
                        (path.clone(), *node, inner.repo.clone())
                    }
                    Kind::Dir { .. } => return Err(WcError::IsDir),
                    Kind::Symlink(_) | Kind::Special { .. } => return Err(WcError::Invalid),
                }
            };
            self.room()?;
            let id = {
                let mut inner = self.write();
                let id = inner.next_id;
                inner.next_id += 1;
                id
            };
            let copied = if keep {
                self.store_text(&repo, &path, &node).and_then(|t| {
                    self.overlay
                        .create_from(id, &mut t.reader())
                        .map_err(WcError::from)
                })
            } else {
                self.overlay
                    .create(id, &[])
                    .map(|_| ())
                    .map_err(WcError::from)
            };
            if let Err(e) = copied {
                // A copy cut short by a full disk is of no use to anyone.
                let _ = self.overlay.remove(id);
                return Err(e);
            }
            let mut inner = self.write();
            let still = match inner.entry(ino) {
                Ok(e) => matches!(&e.kind, Kind::File(FileData::Store { path: p, node: n, .. })
                    if *p == path && *n == node),
                Err(e) => {
                    drop(inner);
                    let _ = self.overlay.remove(id);
                    return Err(e);
                }
            };
            if !still {
                // Copied up by another writer meanwhile, or changed: ours is not needed.
                drop(inner);
                let _ = self.overlay.remove(id);
                continue;
            }
            let mtime = inner.entry(ino)?.mtime.unwrap_or(self.checkout_time);
            let _ = self.overlay.set_mtime(id, mtime);
            inner.entry_mut(ino)?.kind = Kind::File(FileData::Overlay { id });
            if let Some(p) = inner.path_of(ino) {
                self.record(&mut inner, Record::Materialize { path: p, id })?;
            }
            return Ok(id);
        }
    }

    /// Runs `op` on the overlay file of `ino`, copying the file up first if needed. The
    /// working-copy lock is held (shared) while `op` runs, so that commit, which turns
    /// committed overlay files back into store files under the exclusive lock, never races
    /// with a write.
    fn with_overlay<T>(
        &self,
        ino: u64,
        keep: bool,
        op: impl Fn(u64) -> std::io::Result<T>,
    ) -> Result<T> {
        loop {
            {
                let inner = self.read();
                if let Kind::File(FileData::Overlay { id }) = inner.entry(ino)?.kind {
                    return Ok(op(id)?);
                }
            }
            self.materialize(ino, keep)?;
        }
    }

    /// Writes file content; returns the number of bytes written.
    pub fn write_file(&self, ino: u64, offset: u64, data: &[u8]) -> Result<u32> {
        self.with_overlay(ino, true, |id| self.overlay.write(id, offset, data))?;
        Ok(data.len() as u32)
    }

    /// fallocate, any mode, on the file's overlay file (a store file is copied up first).
    pub fn fallocate(&self, ino: u64, offset: u64, len: u64, mode: i32) -> Result<()> {
        self.with_overlay(ino, true, |id| self.overlay.allocate(id, mode, offset, len))
    }

    /// lseek with SEEK_DATA or SEEK_HOLE (the kernel handles the other kinds itself). An
    /// overlay file answers from its backing file; a store file is all data.
    pub fn seek_data(&self, ino: u64, offset: i64, whence: i32) -> Result<i64> {
        if whence != libc::SEEK_DATA && whence != libc::SEEK_HOLE {
            return Err(WcError::Invalid);
        }
        let id = match &self.read().entry(ino)?.kind {
            Kind::File(FileData::Overlay { id }) => Some(*id),
            Kind::File(FileData::Store { .. }) => None,
            Kind::Dir { .. } => return Err(WcError::IsDir),
            _ => return Err(WcError::Invalid),
        };
        if let Some(id) = id {
            return Ok(self.overlay.seek(id, offset, whence)?);
        }
        let size = self.getattr(ino)?.size as i64;
        if offset < 0 {
            return Err(WcError::Invalid);
        }
        if offset >= size {
            return Err(WcError::NoSuchOffset);
        }
        Ok(if whence == libc::SEEK_DATA {
            offset
        } else {
            size
        })
    }

    // ----- extended attributes -----

    /// Checks that `ino` may carry the `user.` attribute `name` (as ext4 does: regular
    /// files and directories only).
    fn xattr_allowed(&self, inner: &Inner, ino: u64, name: &[u8]) -> Result<()> {
        if !name.starts_with(b"user.") {
            return Err(WcError::NotSupported);
        }
        if name.len() > XATTR_NAME_MAX {
            return Err(WcError::AttrNameTooLong);
        }
        match inner.entry(ino)?.kind {
            Kind::File(_) | Kind::Dir { .. } => Ok(()),
            _ => Err(WcError::NotPermitted),
        }
    }

    /// setxattr: `flags` XATTR_CREATE (1) fails on an existing name, XATTR_REPLACE (2) on
    /// a missing one. Journaled; changes the ctime.
    pub fn set_xattr(&self, ino: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        if value.len() > XATTR_SIZE_MAX {
            return Err(WcError::AttrTooBig);
        }
        self.room()?;
        let mut inner = self.write();
        self.xattr_allowed(&inner, ino, name)?;
        let exists = inner
            .entry(ino)?
            .xattrs
            .as_ref()
            .is_some_and(|x| x.contains_key(name));
        if flags & libc::XATTR_CREATE != 0 && exists {
            return Err(WcError::Exists);
        }
        if flags & libc::XATTR_REPLACE != 0 && !exists {
            return Err(WcError::NoAttr);
        }
        let now = inner.now();
        let path = inner.path_of(ino);
        let e = inner.entry_mut(ino)?;
        e.xattrs
            .get_or_insert_with(Default::default)
            .insert(name.into(), value.into());
        e.ctime = Some(now);
        if let Some(path) = path {
            let rec = Record::SetXattr {
                path,
                name: name.to_vec(),
                value: value.to_vec(),
            };
            self.record(&mut inner, rec)?;
        }
        Ok(())
    }

    /// getxattr.
    pub fn get_xattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        let inner = self.read();
        inner
            .entry(ino)?
            .xattrs
            .as_ref()
            .and_then(|x| x.get(name))
            .map(|v| v.to_vec())
            .ok_or(WcError::NoAttr)
    }

    /// listxattr: the names, each followed by a NUL.
    pub fn list_xattrs(&self, ino: u64) -> Result<Vec<u8>> {
        let inner = self.read();
        let mut out = Vec::new();
        for name in inner.entry(ino)?.xattrs.iter().flat_map(|x| x.keys()) {
            out.extend_from_slice(name);
            out.push(0);
        }
        Ok(out)
    }

    /// removexattr. Journaled; changes the ctime.
    pub fn remove_xattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        if !name.starts_with(b"user.") {
            return Err(WcError::NotSupported);
        }
        let now = inner.now();
        let path = inner.path_of(ino);
        let e = inner.entry_mut(ino)?;
        let Some(x) = &mut e.xattrs else {
            return Err(WcError::NoAttr);
        };
        if x.remove(name).is_none() {
            return Err(WcError::NoAttr);
        }
        if x.is_empty() {
            e.xattrs = None;
        }
        e.ctime = Some(now);
        if let Some(path) = path {
            let rec = Record::RemoveXattr {
                path,
                name: name.to_vec(),
            };
            self.record(&mut inner, rec)?;
        }
        Ok(())
    }

    /// chmod / chown / truncate / utimens.
    pub fn setattr(&self, ino: u64, change: &SetAttr) -> Result<Attr> {
        if let Some(size) = change.size {
            self.with_overlay(ino, size != 0, |id| self.overlay.truncate(id, size))?;
        }
        let meta = change.mode.is_some()
            || change.mtime.is_some()
            || change.atime.is_some()
            || change.uid.is_some()
            || change.gid.is_some();
        if meta {
            self.room()?;
        }
        let mut inner = self.write();
        let path = inner.path_of(ino);
        let now = inner.now();
        if let Some(mode) = change.mode {
            let mode = mode & 0o7777;
            let e = inner.entry_mut(ino)?;
            e.mode = mode;
            e.ctime = Some(now);
            if let Some(path) = path.clone() {
                self.record(&mut inner, Record::SetMode { path, mode })?;
            }
        }
        if change.uid.is_some() || change.gid.is_some() {
            let (uid0, gid0) = inner.entry(ino)?.owner.unwrap_or(self.mount_owner);
            let owner = (change.uid.unwrap_or(uid0), change.gid.unwrap_or(gid0));
            let e = inner.entry_mut(ino)?;
            e.owner = (owner != self.mount_owner).then_some(owner);
            e.ctime = Some(now);
            if let Some(path) = path.clone() {
                let (uid, gid) = owner;
                self.record(&mut inner, Record::SetOwner { path, uid, gid })?;
            }
        }
        if let Some(t) = change.atime {
            let e = inner.entry_mut(ino)?;
            e.atime = Some(t);
            e.ctime = Some(now);
            if let Some(path) = path.clone() {
                let (secs, nanos) = unix_time(t);
                self.record(&mut inner, Record::SetAtime { path, secs, nanos })?;
            }
        }
        if let Some(t) = change.mtime {
            match inner.entry(ino)?.kind {
                Kind::File(FileData::Overlay { id }) => {
                    self.overlay.set_mtime(id, t)?;
                    inner.entry_mut(ino)?.ctime = Some(now);
                }
                _ => {
                    let e = inner.entry_mut(ino)?;
                    e.mtime = Some(t);
                    e.ctime = Some(now);
                    if let Some(path) = path {
                        let (secs, nanos) = unix_time(t);
                        self.record(&mut inner, Record::SetMtime { path, secs, nanos })?;
                    }
                }
            }
        }
        if change.size.is_some() {
            inner.entry_mut(ino)?.ctime = Some(now);
        }
        self.attr_of(&inner, ino)
    }

    /// fsync: the file's overlay data and the journal reach the disk.
    pub fn fsync(&self, ino: u64) -> Result<()> {
        let id = match self.read().entries.get(&ino).map(|e| &e.kind) {
            Some(Kind::File(FileData::Overlay { id })) => Some(*id),
            _ => None,
        };
        if let Some(id) = id {
            self.overlay.sync(id)?;
        }
        self.sync_journal()
    }

    /// Makes every journaled change durable.
    pub fn sync_journal(&self) -> Result<()> {
        Ok(self.journal().sync()?)
    }

    // ----- tracking (add / remove / forget / revert) -----

    /// Journals a tracking change.
    pub fn set_tracking(&self, path: &[u8], track: Track) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        set_track(&mut inner, path, track);
        self.record(
            &mut inner,
            Record::Track {
                path: path.to_vec(),
                track,
            },
        )
    }

    /// Journals a copy source for `dest` (`None` clears it).
    pub fn set_copy(&self, dest: &[u8], source: Option<&[u8]>) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        let source = source.unwrap_or_default();
        set_copy(&mut inner, dest, source);
        self.record(
            &mut inner,
            Record::Copy {
                dest: dest.to_vec(),
                source: source.to_vec(),
            },
        )
    }

    /// The copy sources, destination -> source.
    pub fn copies(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.read().copies.clone()
    }

    /// Restores `path` to the base revision's content and mode; returns whether it did.
    pub fn restore(&self, path: &[u8]) -> Result<bool> {
        self.room()?;
        let mut inner = self.write();
        if inner.base.find(path)?.is_none() {
            return Ok(false);
        }
        if let Some(id) = self.do_restore(&mut inner, path)? {
            let _ = self.overlay.remove(id);
        }
        self.record(
            &mut inner,
            Record::Restore {
                path: path.to_vec(),
            },
        )?;
        Ok(true)
    }

    fn do_restore(&self, inner: &mut Inner, path: &[u8]) -> Result<Option<u64>> {
        let Some(entry) = inner.base.find(path)? else {
            return Ok(None);
        };
        let (node, flag) = (entry.node, entry.flag);
        // Create missing parent directories, replacing files that stand in their way.
        let mut dir = ROOT_INO;
        let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
        let mut freed = None;
        for part in &parts[..parts.len() - 1] {
            dir = match inner.child(dir, part)? {
                Some(c) if inner.is_dir(c) => c,
                other => {
                    if let Some(c) = other {
                        freed = inner.detach(c).or(freed);
                    }
                    let d = Kind::Dir {
                        source: None,
                        children: Some(Children::new()),
                    };
                    inner.link_new(dir, part, d, 0o755)?
                }
            };
        }
        let name = parts[parts.len() - 1];
        let kind = Kind::from_store(path, node, flag);
        if let Some(existing) = inner.child(dir, name)? {
            if inner.is_dir(existing) {
                return Err(WcError::IsDir);
            }
            let inner_now = inner.now();
            let e = inner.entry_mut(existing)?;
            let old = std::mem::replace(&mut e.kind, kind);
            e.mode = perm_of_flag(flag);
            e.mtime = Some(inner_now);
            e.ctime = e.mtime;
            if let Kind::File(FileData::Overlay { id }) = old {
                freed = Some(id);
            }
        } else {
            let ino = inner.link_new(dir, name, kind, perm_of_flag(flag))?;
            inner.entry_mut(ino)?.mode = perm_of_flag(flag);
        }
        Ok(freed)
    }

    /// The inode of a linked path, if any (for the filesystem layer after restore).
    pub fn ino_of(&self, path: &[u8]) -> Result<Option<u64>> {
        let mut inner = self.write();
        inner.resolve(path)
    }
}

fn set_copy(inner: &mut Inner, dest: &[u8], source: &[u8]) {
    if source.is_empty() {
        inner.copies.remove(dest);
    } else {
        inner.copies.insert(dest.to_vec(), source.to_vec());
    }
}

fn set_track(inner: &mut Inner, path: &[u8], track: Track) {
    // A file that stops being added or tracked loses its copy source, as in hg.
    if track != Track::Added {
        inner.copies.remove(path);
    }
    match track {
        Track::Default => {
            inner.tracking.remove(path);
        }
        t => {
            inner.tracking.insert(path.to_vec(), t);
        }
    }
}

fn child_path(inner: &Inner, parent: u64, name: &[u8]) -> Result<Vec<u8>> {
    let mut p = inner.path_of(parent).ok_or(WcError::NotFound)?;
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    Ok(p)
}

pub(crate) fn unix_time(t: SystemTime) -> (i64, u32) {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            if d.subsec_nanos() == 0 {
                (-(d.as_secs() as i64), 0)
            } else {
                (-(d.as_secs() as i64) - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    }
}

pub(crate) fn system_time(secs: i64, nanos: u32) -> SystemTime {
    let base = if secs >= 0 {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64)
    } else {
        SystemTime::UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs())
    };
    base + std::time::Duration::from_nanos(nanos as u64)
}
