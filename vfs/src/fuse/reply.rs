//! What the handlers share to answer the kernel: errors as errnos, the working copy's types
//! as the kernel's, and replies of a common shape.

use crate::wc::journal::SpecialKind;
use crate::wc::{EntryType, WcError};
use fuser::{Errno, FileAttr, FileType, FopenFlags, INodeNo, ReplyEmpty, ReplyXattr, TimeOrNow};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// How long the kernel may trust entries and attributes. revfs invalidates explicitly
/// whenever it changes the tree behind the kernel's back, so this can be long.
pub(super) const TTL: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// The open flags of a handle in the kernel's page cache: keep the pages it holds, unless
/// they may be older than the file.
pub(super) fn cached_flags(keep: bool) -> FopenFlags {
    if keep {
        FopenFlags::FOPEN_KEEP_CACHE
    } else {
        FopenFlags::empty()
    }
}

/// Logs a failure (store errors are the interesting ones) and gives the errno.
pub(super) fn errno(op: &str, err: &WcError) -> Errno {
    match err {
        WcError::Store(_) | WcError::Journal(_) | WcError::Replay { .. } => {
            tracing::error!("{op}: {err}")
        }
        WcError::Io(e) => tracing::warn!("{op}: overlay: {e}"),
        _ => tracing::debug!("{op}: {err}"),
    }
    Errno::from_i32(err.errno())
}

/// Answers getxattr or listxattr: the length when asked for it (size 0), ERANGE when the
/// caller's buffer is too small, else the bytes.
pub(super) fn reply_xattr(value: &[u8], size: u32, reply: ReplyXattr) {
    if size == 0 {
        reply.size(value.len() as u32)
    } else if (size as usize) < value.len() {
        reply.error(Errno::ERANGE)
    } else {
        reply.data(value)
    }
}

/// Answers a request that returns nothing on success.
pub(super) fn reply_empty(op: &str, result: Result<(), WcError>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(op, &e)),
    }
}

pub(super) fn file_type(t: EntryType) -> FileType {
    match t {
        EntryType::Dir => FileType::Directory,
        EntryType::File => FileType::RegularFile,
        EntryType::Symlink => FileType::Symlink,
        EntryType::Special(SpecialKind::Fifo) => FileType::NamedPipe,
        EntryType::Special(SpecialKind::Socket) => FileType::Socket,
        EntryType::Special(SpecialKind::Char) => FileType::CharDevice,
        EntryType::Special(SpecialKind::Block) => FileType::BlockDevice,
    }
}

/// The kind of special file a `mknod` mode asks for, if it is one.
pub(super) fn special_kind(mode: u32) -> Option<SpecialKind> {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => Some(SpecialKind::Fifo),
        libc::S_IFSOCK => Some(SpecialKind::Socket),
        libc::S_IFCHR => Some(SpecialKind::Char),
        libc::S_IFBLK => Some(SpecialKind::Block),
        _ => None,
    }
}

pub(super) fn time_of(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

/// The attributes of an entry a listing names without making it (node id 0): the kernel
/// reads only the inode number and the type.
pub(super) fn name_only(ino: u64, kind: FileType) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// (blocks, free, available, block size) of the file system holding `path`.
pub(super) fn nix_statvfs(path: &Path) -> Option<libc::statvfs> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the struct we pass; the path is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(s)
}
