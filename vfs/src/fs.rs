//! The FUSE filesystem: translates kernel requests into [`Tree`] operations.
//!
//! The tree changes only when revfs changes it, so the kernel is told to cache hard: long
//! entry and attribute timeouts (negative entries included), `FOPEN_KEEP_CACHE` for files,
//! `FOPEN_CACHE_DIR` for directories, symlink caching, large reads and readahead.
//! A hidden directory `.revfs` at the root (not listed, but found by lookup) holds
//! symlinks to the control socket, the repository and the state directory.

use crate::tree::{Inode, Kind, Tree, TreeError, ROOT_INO};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyXattr, Request,
};
use revfs_store::manifest::FileFlag;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How long the kernel may trust entries and attributes. revfs invalidates explicitly
/// whenever it changes the tree, so this can be long.
const TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Name of the hidden control directory at the root.
pub const CONTROL_DIR: &str = ".revfs";
const CONTROL_DIR_INO: u64 = 0xFFFF_FFFF_0000_0001;
const CONTROL_LINKS: [(&str, u64); 3] = [
    ("socket", 0xFFFF_FFFF_0000_0002),
    ("repo", 0xFFFF_FFFF_0000_0003),
    ("state", 0xFFFF_FFFF_0000_0004),
];

/// What the control directory points at.
#[derive(Debug, Clone)]
pub struct ControlTargets {
    pub socket: PathBuf,
    pub repo: PathBuf,
    pub state: PathBuf,
}

impl ControlTargets {
    fn target(&self, ino: u64) -> Option<&PathBuf> {
        match CONTROL_LINKS.iter().position(|(_, i)| *i == ino)? {
            0 => Some(&self.socket),
            1 => Some(&self.repo),
            _ => Some(&self.state),
        }
    }
}

/// The mounted filesystem.
pub struct RevFs {
    tree: Arc<Tree>,
    control: ControlTargets,
    uid: u32,
    gid: u32,
    /// mtime/ctime/atime of everything that comes unchanged from the store.
    checkout_time: SystemTime,
}

impl RevFs {
    pub fn new(tree: Arc<Tree>, control: ControlTargets, checkout_time: SystemTime) -> RevFs {
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        RevFs {
            tree,
            control,
            uid,
            gid,
            checkout_time,
        }
    }

    fn attr(&self, ino: u64, kind: FileType, perm: u16, size: u64) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.checkout_time,
            mtime: self.checkout_time,
            ctime: self.checkout_time,
            crtime: self.checkout_time,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn inode_attr(&self, inode: &Inode) -> Result<FileAttr, TreeError> {
        Ok(match &inode.kind {
            Kind::Dir { .. } => self.attr(inode.ino, FileType::Directory, 0o755, 4096),
            Kind::File { flag, .. } => {
                let size = self.tree.size(inode)?;
                let (kind, perm) = match flag {
                    FileFlag::Regular => (FileType::RegularFile, 0o644),
                    FileFlag::Executable => (FileType::RegularFile, 0o755),
                    FileFlag::Symlink => (FileType::Symlink, 0o777),
                };
                self.attr(inode.ino, kind, perm, size)
            }
        })
    }

    fn control_attr(&self, ino: u64) -> Option<FileAttr> {
        if ino == CONTROL_DIR_INO {
            return Some(self.attr(ino, FileType::Directory, 0o555, 4096));
        }
        let target = self.control.target(ino)?;
        Some(self.attr(
            ino,
            FileType::Symlink,
            0o777,
            target.as_os_str().len() as u64,
        ))
    }

    fn attr_of(&self, ino: u64) -> Result<FileAttr, Errno> {
        if let Some(a) = self.control_attr(ino) {
            return Ok(a);
        }
        let inode = self.tree.get(ino).map_err(|e| errno(&e))?;
        self.inode_attr(&inode).map_err(|e| self.fail(&inode, e))
    }

    /// Logs a failure to serve one inode and turns it into an errno for that inode alone.
    fn fail(&self, inode: &Inode, err: TreeError) -> Errno {
        tracing::error!(path = %String::from_utf8_lossy(&inode.path), "{err}");
        errno(&err)
    }
}

/// The entries of the control directory, `.` and `..` first.
fn control_entries() -> Vec<(u64, FileType, &'static str)> {
    let mut entries = vec![
        (CONTROL_DIR_INO, FileType::Directory, "."),
        (ROOT_INO, FileType::Directory, ".."),
    ];
    entries.extend(
        CONTROL_LINKS
            .iter()
            .map(|(n, i)| (*i, FileType::Symlink, *n)),
    );
    entries
}

fn errno(err: &TreeError) -> Errno {
    match err {
        TreeError::NoInode(_) => Errno::ENOENT,
        TreeError::NotADirectory(_) => Errno::ENOTDIR,
        TreeError::IsADirectory(_) => Errno::EISDIR,
        TreeError::Store(_) => Errno::EIO,
    }
}

fn file_type(flag: Option<FileFlag>) -> FileType {
    match flag {
        None => FileType::Directory,
        Some(FileFlag::Symlink) => FileType::Symlink,
        Some(_) => FileType::RegularFile,
    }
}

impl Filesystem for RevFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        for cap in [
            InitFlags::FUSE_ASYNC_READ,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
            InitFlags::FUSE_MAX_PAGES,
            // After one ENOSYS from `open`, the kernel stops sending open/release for files
            // and keeps their page cache (clean files never change under the kernel).
            InitFlags::FUSE_NO_OPEN_SUPPORT,
        ] {
            if config.add_capabilities(cap).is_err() {
                tracing::info!("kernel lacks {cap:?}");
            }
        }
        let _ = config.set_max_readahead(1 << 20);
        let _ = config.set_max_background(256);
        let _ = config.set_congestion_threshold(192);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let parent = parent.0;
        if parent == ROOT_INO && name == CONTROL_DIR {
            return reply.entry(
                &TTL,
                &self.attr(CONTROL_DIR_INO, FileType::Directory, 0o555, 4096),
                Generation(0),
            );
        }
        if parent == CONTROL_DIR_INO {
            return match CONTROL_LINKS.iter().find(|(n, _)| OsStr::new(n) == name) {
                Some((_, ino)) => match self.control_attr(*ino) {
                    Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
                    None => reply.error(Errno::ENOENT),
                },
                None => reply.error(Errno::ENOENT),
            };
        }
        match self.tree.lookup(parent, name.as_bytes()) {
            Ok(Some(inode)) => match self.inode_attr(&inode) {
                Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
                Err(e) => reply.error(self.fail(&inode, e)),
            },
            // A negative entry (inode 0) that the kernel may cache as long as a positive one.
            Ok(None) => {
                let mut attr = self.attr(0, FileType::RegularFile, 0, 0);
                attr.ino = INodeNo(0);
                reply.entry(&TTL, &attr, Generation(0))
            }
            Err(e) => {
                tracing::error!(parent, name = ?name, "lookup: {e}");
                reply.error(errno(&e))
            }
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr_of(ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        if let Some(target) = self.control.target(ino.0) {
            return reply.data(target.as_os_str().as_bytes());
        }
        match self.tree.get(ino.0) {
            Ok(inode) if inode.flag() == Some(FileFlag::Symlink) => match self.tree.content(&inode)
            {
                Ok(text) => reply.data(&text),
                Err(e) => reply.error(self.fail(&inode, e)),
            },
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let acc = flags.0 & libc::O_ACCMODE;
        if acc != libc::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        match self.tree.get(ino.0) {
            Ok(inode) if inode.flag().is_some() => {
                reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE)
            }
            Ok(_) => reply.error(Errno::EISDIR),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let inode = match self.tree.get(ino.0) {
            Ok(i) => i,
            Err(e) => return reply.error(errno(&e)),
        };
        match self.tree.content(&inode) {
            Ok(text) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(text.len());
                let end = start.saturating_add(size as usize).min(text.len());
                reply.data(&text[start..end]);
            }
            Err(e) => reply.error(self.fail(&inode, e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == CONTROL_DIR_INO {
            return reply.opened(FileHandle(0), FopenFlags::empty());
        }
        match self.tree.get(ino.0) {
            Ok(inode) if inode.flag().is_none() => reply.opened(
                FileHandle(0),
                FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 == CONTROL_DIR_INO {
            for (i, (ino, kind, name)) in control_entries()
                .into_iter()
                .enumerate()
                .skip(offset as usize)
            {
                if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                    break;
                }
            }
            return reply.ok();
        }
        let (dir, children) = match self
            .tree
            .get(ino.0)
            .and_then(|d| Ok((self.tree.children(d.ino)?, d)))
        {
            Ok((c, d)) => (d, c),
            Err(e) => return reply.error(errno(&e)),
        };
        let mut index = offset;
        if index == 0 {
            if reply.add(INodeNo(dir.ino), 1, FileType::Directory, ".") {
                return reply.ok();
            }
            index = 1;
        }
        if index == 1 {
            if reply.add(INodeNo(dir.parent), 2, FileType::Directory, "..") {
                return reply.ok();
            }
            index = 2;
        }
        for (i, e) in children.iter().enumerate().skip((index - 2) as usize) {
            if reply.add(
                INodeNo(e.ino),
                i as u64 + 3,
                file_type(e.flag),
                OsStr::from_bytes(&e.name),
            ) {
                break;
            }
        }
        reply.ok()
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        if ino.0 == CONTROL_DIR_INO {
            for (i, (ino, _, name)) in control_entries()
                .into_iter()
                .enumerate()
                .skip(offset as usize)
            {
                let attr = match self.control_attr(ino) {
                    Some(a) => a,
                    None => self.attr(ROOT_INO, FileType::Directory, 0o755, 4096),
                };
                if reply.add(INodeNo(ino), i as u64 + 1, name, &TTL, &attr, Generation(0)) {
                    break;
                }
            }
            return reply.ok();
        }
        let (dir, children) = match self
            .tree
            .get(ino.0)
            .and_then(|d| Ok((self.tree.children(d.ino)?, d)))
        {
            Ok((c, d)) => (d, c),
            Err(e) => return reply.error(errno(&e)),
        };
        let dir_attr = self.attr(dir.ino, FileType::Directory, 0o755, 4096);
        let mut index = offset;
        if index == 0 {
            if reply.add(INodeNo(dir.ino), 1, ".", &TTL, &dir_attr, Generation(0)) {
                return reply.ok();
            }
            index = 1;
        }
        if index == 1 {
            let parent_attr = self.attr(dir.parent, FileType::Directory, 0o755, 4096);
            if reply.add(
                INodeNo(dir.parent),
                2,
                "..",
                &TTL,
                &parent_attr,
                Generation(0),
            ) {
                return reply.ok();
            }
            index = 2;
        }
        for (i, e) in children.iter().enumerate().skip((index - 2) as usize) {
            let attr = match self
                .tree
                .get(e.ino)
                .and_then(|inode| self.inode_attr(&inode))
            {
                Ok(a) => a,
                Err(err) => {
                    tracing::error!(name = %String::from_utf8_lossy(&e.name), "readdirplus: {err}");
                    // Still list the name; its attributes come from a later lookup, which
                    // reports the error for that file alone.
                    self.attr(e.ino, file_type(e.flag), 0, 0)
                }
            };
            if reply.add(
                INodeNo(e.ino),
                i as u64 + 3,
                OsStr::from_bytes(&e.name),
                &TTL,
                &attr,
                Generation(0),
            ) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let files = self.tree.inode_count() as u64;
        reply.statfs(0, 0, 0, files, 0, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // The kernel checks modes itself (default_permissions).
        reply.ok()
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        // Asked before every write (security.capability): answer at once.
        reply.error(Errno::ENODATA)
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(0)
        } else {
            reply.data(&[])
        }
    }
}
