//! The working copy's types: entries of the inode table and their kinds, attributes as
//! the kernel asks for them, what the kernel must forget, and the errors, with their errno.

use super::*;

/// What the kernel must forget after revfs changed the tree behind its back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidation {
    /// Name `name` in directory `parent` (negative entries included).
    Entry { parent: u64, name: Box<[u8]> },
    /// The data, attributes and (for a directory) cached listing of an inode.
    Inode(u64),
}

/// A path that the daemon changed behind the kernel's back (an update, a revert), as
/// inotify watchers must hear of it (`fuse/events.rs`): what was there and what is there
/// now, each an inode and its type. The same inode before and after is a change of mode
/// (`content` false) or of content in place (`content` true); different inodes, a name that
/// went and came back (as hg's update writes a file: unlinked, then created).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    pub path: Vec<u8>,
    pub old: Option<(u64, EntryType)>,
    pub new: Option<(u64, EntryType)>,
    pub content: bool,
}

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
    #[error("too many links")]
    TooManyLinks,
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
    #[error(transparent)]
    Feed(#[from] crate::wc::feed::FeedError),
    #[error("{0}")]
    Ignore(String),
    #[error("file name too long")]
    NameTooLong,
    #[error("nothing changed")]
    NothingChanged,
    #[error("the change journal could not be rewritten after a commit or an update; unmount and mount again (nothing is lost: the journal still holds the working copy as it was before)")]
    JournalStale,
    /// An update would overwrite these changed paths (hg would merge them).
    #[error("uncommitted changes")]
    UncommittedChanges(Vec<Vec<u8>>),
    /// An update that would leave a merge hg is making (its second parent) unfinished.
    #[error("outstanding uncommitted merge")]
    UncommittedMerge,
    /// An update from or to a revision with subrepositories (a `.hgsubstate`): hg's own
    /// update visits each subrepository (and refuses git's and svn's unless allowed),
    /// which the daemon's does not.
    #[error("the working copy's parent or the requested revision has subrepositories")]
    Subrepos,
    /// An update would overwrite these untracked files, which differ from the target's.
    #[error("untracked files in working directory differ from files in requested revision")]
    UntrackedDiffers(Vec<Vec<u8>>),
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
            WcError::TooManyLinks => libc::EMLINK,
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
    /// What the entry is, for attributes and listings.
    pub(crate) fn entry_type(&self) -> EntryType {
        match self {
            Kind::Dir { .. } => EntryType::Dir,
            Kind::File(_) => EntryType::File,
            Kind::Symlink(_) => EntryType::Symlink,
            Kind::Special { kind, .. } => EntryType::Special(*kind),
        }
    }

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
    /// The other names of a file with hard links, (parent, name), besides `parent` and
    /// `name` (which a removal of that name hands to the first of these).
    pub links: Option<Box<Names>>,
}

/// Names of an entry: (parent, name) pairs.
pub type Names = Vec<(u64, Box<[u8]>)>;

impl Entry {
    /// An entry named `name` in `parent`, with `nlookup` kernel references and nothing of
    /// its own (times, owner, attributes, other names).
    pub(crate) fn new(parent: u64, name: &[u8], kind: Kind, mode: u32, nlookup: u64) -> Entry {
        Entry {
            parent,
            name: name.into(),
            nlookup,
            kind,
            mode,
            mtime: None,
            ctime: None,
            atime: None,
            owner: None,
            xattrs: None,
            links: None,
        }
    }

    /// How many names the entry has (0 once unlinked).
    pub fn nlink(&self) -> u32 {
        u32::from(self.parent != 0) + self.links.as_ref().map_or(0, |l| l.len() as u32)
    }
}

/// What a working copy holds in memory ([`WorkingCopy::memory_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStats {
    /// Entries in the inode table.
    pub entries: u64,
    /// Files with an inode number and no entry (see [`crate::wc::children`]).
    pub frozen: u64,
    /// Distinct manifests held: the base's, and those directories not listed yet take
    /// their entries from.
    pub manifests: u64,
    /// Their bytes on the heap.
    pub manifest_bytes: u64,
    /// Their bytes mapped from the manifest cache (the pages read of them count in the
    /// daemon's RSS, as page cache the kernel may drop).
    pub mapped_manifest_bytes: u64,
    /// Names in the listings made from a manifest and not dropped since.
    pub listed: u64,
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
