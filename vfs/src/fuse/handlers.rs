//! The FUSE filesystem: translates kernel requests into [`WorkingCopy`] operations.
//!
//! The tree changes only through this filesystem (or through revfs itself, which then
//! invalidates explicitly), so the kernel is told to cache hard: long entry and attribute
//! timeouts (negative entries included), no open/release round trips (the kernel then keeps
//! each file's pages), symlink caching, large requests. A hidden directory `.revfs` at the
//! root (not listed, but found by lookup) holds symlinks to the control socket, the
//! repository and the state directory.

use crate::fuse::events::Ghost;
use crate::fuse::passthrough::{Decision, FH_PASSTHROUGH, FH_WRITER};
use crate::wc::{EntryType, SetAttr, RENAME_EXCHANGE, RENAME_NOREPLACE, ROOT_INO};
use fuser::{
    AccessFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::reply::*;
use super::revfs::RevFs;
use super::synthetic::*;

impl Filesystem for RevFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        for cap in [
            InitFlags::FUSE_ASYNC_READ,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
            InitFlags::FUSE_MAX_PAGES,
            InitFlags::FUSE_BIG_WRITES,
            // After one ENOSYS from `open`, the kernel stops sending open/release for files
            // and keeps their page cache.
            InitFlags::FUSE_NO_OPEN_SUPPORT,
            InitFlags::FUSE_NO_OPENDIR_SUPPORT,
            // Every listing is a READDIRPLUS (not the kernel's "auto" choice): `readdirplus`
            // decides per listing whether its entries carry attributes.
            InitFlags::FUSE_DO_READDIRPLUS,
            // The daemon kills set-user-ID and set-group-ID when the kernel says
            // (`killpriv.rs`): no GETXATTR before each write, no GETATTR before a chown.
            InitFlags::FUSE_HANDLE_KILLPRIV_V2,
        ] {
            if config.add_capabilities(cap).is_err() {
                tracing::info!("kernel lacks {cap:?}");
            }
        }
        if self.passthrough.on() {
            // The overlay files are on a plain file system: one level of stacking.
            if config
                .add_capabilities(InitFlags::FUSE_PASSTHROUGH)
                .is_err()
            {
                self.passthrough
                    .refused("the kernel lacks FUSE_PASSTHROUGH (Linux 6.9 or later)".into());
            } else if let Err(e) = config.set_max_stack_depth(1) {
                self.passthrough
                    .refused(format!("the kernel refused a stacking depth of 1 ({e})"));
            } else if unsafe { libc::geteuid() } != 0 {
                // SAFETY (above): geteuid has no preconditions.
                self.passthrough
                    .refused("backing files need CAP_SYS_ADMIN (run as root)".into());
            }
        }
        tracing::info!(passthrough = %self.passthrough.mode(), "kernel connection");
        let _ = config.set_max_readahead(crate::fuse::bdi::READ_AHEAD);
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_background(256);
        let _ = config.set_congestion_threshold(192);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _busy = self.busy.enter();
        self.passthrough.lookup_delay.wait();
        let parent = parent.0;
        if parent == ROOT_INO && (name == CONTROL_DIR || name == DOT_HG) {
            let ino = if name == DOT_HG {
                DOT_HG_INO
            } else {
                CONTROL_DIR_INO
            };
            if let Some(a) = self.control_attr(ino) {
                return reply.entry(&TTL, &a, Generation(0));
            }
        }
        if parent == CONTROL_DIR_INO {
            return match CONTROL_LINKS
                .iter()
                .find(|(n, _)| OsStr::new(n) == name)
                .and_then(|(_, ino)| self.control_attr(*ino))
            {
                Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
                None => reply.error(Errno::ENOENT),
            };
        }
        // The events helper's names of changes being told (`events.rs`), seen by it alone.
        if self.is_events_helper(req) {
            match self.events.lookup(parent, name.as_bytes()) {
                Some(Ghost::Was { attr, held }) => {
                    if held {
                        self.wc.held_again(attr.ino);
                    }
                    return reply.entry(&Duration::ZERO, &self.file_attr(&attr), Generation(0));
                }
                Some(Ghost::Absent) => return self.reply_negative(&Duration::ZERO, reply),
                None => {}
            }
        }
        // A name the events helper is about to remove or make: not cached (`events.rs`).
        let ttl = if self.events.being_told(parent, name.as_bytes()) {
            Duration::ZERO
        } else {
            TTL
        };
        match self.wc.lookup(parent, name.as_bytes()) {
            Ok(Some(a)) => {
                // A file looked up one by one: a program stats the tree's files (`ls -l`,
                // `find -size`, rsync, make), so listings carry attributes for a while.
                if !matches!(a.kind, EntryType::Dir) && !self.is_helper(req) {
                    self.readers.looked_up();
                }
                reply.entry(&ttl, &self.file_attr(&a), Generation(0))
            }
            // A negative entry that the kernel may cache as long as a positive one.
            Ok(None) => self.reply_negative(&ttl, reply),
            Err(e) => reply.error(errno("lookup", &e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _busy = self.busy.enter();
        if !is_control(ino.0) {
            self.wc.forget(ino.0, nlookup);
            // The kernel forgets an inode when it evicts it, pages and all.
            self.passthrough.forgotten(ino.0);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _busy = self.busy.enter();
        if let Some(a) = self.control_attr(ino.0) {
            return reply.attr(&TTL, &a);
        }
        match self.wc.getattr(ino.0) {
            Ok(a) => reply.attr(&TTL, &self.file_attr(&a)),
            Err(e) => reply.error(errno("getattr", &e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        kill_suidgid: bool,
        reply: ReplyAttr,
    ) {
        let _busy = self.busy.enter();
        if is_control(ino.0) {
            return reply.error(Errno::EPERM);
        }
        // The events helper's `chmod` or `utimensat` (`events.rs`): answered, not made.
        if self.is_events_helper(req) {
            return match self.wc.getattr(ino.0) {
                Ok(a) => reply.attr(&TTL, &self.file_attr(&a)),
                Err(e) => reply.error(errno("setattr", &e)),
            };
        }
        // The kernel checks chown (default_permissions); only root gives a file away.
        if let Some(uid) = uid {
            let current = self
                .wc
                .owner_and_mode(ino.0)
                .map_or(self.uid, |((u, _), _)| u);
            if req.uid() != 0 && uid != current {
                return reply.error(Errno::EPERM);
            }
        }
        // A truncate waits for a push into the page cache of the file (`passthrough.rs`).
        let _change =
            (size.is_some() && self.passthrough.on()).then(|| self.passthrough.begin_change(ino.0));
        // A truncate by a caller without CAP_FSETID, or a chown (`killpriv.rs`).
        let mode = match mode {
            None if kill_suidgid => self.killed_mode(req, ino.0).ok().flatten(),
            mode => mode,
        };
        let change = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time_of),
            mtime: mtime.map(time_of),
        };
        match self.wc.setattr(ino.0, &change) {
            Ok(a) => reply.attr(&TTL, &self.file_attr(&a)),
            Err(e) => reply.error(errno("setattr", &e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _busy = self.busy.enter();
        if let Some(target) = self.control.target(ino.0) {
            return reply.data(target.as_os_str().as_bytes());
        }
        match self.wc.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno("readlink", &e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _busy = self.busy.enter();
        if self.is_events_helper(req) {
            return self.reply_made(parent.0, name, reply);
        }
        if reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        let (owner, _) = self.creator(req, parent.0);
        // Fifos, sockets and devices live in the working copy only (hg cannot track them).
        if let Some(kind) = special_kind(mode) {
            let result = self.wc.mknod(
                parent.0,
                name.as_bytes(),
                kind,
                mode & !umask & 0o7777,
                rdev,
            );
            return self.reply_entry("mknod", self.adopt(owner, result), reply);
        }
        if mode & libc::S_IFMT != libc::S_IFREG && mode & libc::S_IFMT != 0 {
            return reply.error(Errno::EINVAL);
        }
        let result = self.wc.create(parent.0, name.as_bytes(), mode & !umask);
        self.reply_entry("mknod", self.adopt(owner, result), reply)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let _busy = self.busy.enter();
        if self.is_events_helper(req) {
            return self.reply_made(parent.0, name, reply);
        }
        if reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        let (owner, setgid) = self.creator(req, parent.0);
        let mode = (mode & !umask) | if setgid { libc::S_ISGID } else { 0 };
        let result = self.wc.mkdir(parent.0, name.as_bytes(), mode);
        self.reply_entry("mkdir", self.adopt(owner, result), reply)
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _busy = self.busy.enter();
        if self.is_events_helper(req) {
            return self.reply_removed(parent.0, name, reply);
        }
        if reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        reply_empty("unlink", self.wc.unlink(parent.0, name.as_bytes()), reply)
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _busy = self.busy.enter();
        if self.is_events_helper(req) {
            return self.reply_removed(parent.0, name, reply);
        }
        if reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        reply_empty("rmdir", self.wc.rmdir(parent.0, name.as_bytes()), reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _busy = self.busy.enter();
        if self.is_events_helper(req) {
            return self.reply_made(parent.0, link_name, reply);
        }
        if reserved(parent, link_name) {
            return reply.error(Errno::EPERM);
        }
        let (owner, _) = self.creator(req, parent.0);
        let result = self.wc.symlink(
            parent.0,
            link_name.as_bytes(),
            target.as_os_str().as_bytes(),
        );
        self.reply_entry("symlink", self.adopt(owner, result), reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        if reserved(parent, name) || reserved(newparent, newname) {
            return reply.error(Errno::EPERM);
        }
        let mut f = 0;
        if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            f |= RENAME_NOREPLACE;
        }
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            f |= RENAME_EXCHANGE;
        }
        if !(flags & !(RenameFlags::RENAME_NOREPLACE | RenameFlags::RENAME_EXCHANGE)).is_empty() {
            return reply.error(Errno::EINVAL);
        }
        let result = self.wc.rename(
            parent.0,
            name.as_bytes(),
            newparent.0,
            newname.as_bytes(),
            f,
        );
        reply_empty("rename", result, reply)
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _busy = self.busy.enter();
        if reserved(newparent, newname)
            || self.control.target(ino.0).is_some()
            || ino.0 == CONTROL_DIR_INO
            || ino.0 == DOT_HG_INO
        {
            return reply.error(Errno::EPERM);
        }
        let result = self.wc.link(ino.0, newparent.0, newname.as_bytes());
        self.reply_entry("link", result, reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _busy = self.busy.enter();
        if !self.passthrough.on() {
            // No per-open state: with FUSE_NO_OPEN_SUPPORT this is the last open we see.
            return reply.error(Errno::ENOSYS);
        }
        if is_control(ino.0) {
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
        }
        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let truncate = flags.0 & libc::O_TRUNC != 0;
        if !write && !truncate {
            // Its pages may be in the kernel already: no READ would tell.
            self.read_by_lister(req.pid(), ino.0);
        }
        // Held until the open's handle is in the table (which then keeps pushes off).
        let _change = (write || truncate).then(|| self.passthrough.begin_change(ino.0));
        // A writer's open may put the file in the overlay, with handles on a backing file,
        // between this open's look at the file and its decision: then look again.
        for _ in 0..3 {
            let file = match self.wc.passthrough_file(ino.0, write, truncate) {
                Ok(f) => f,
                Err(e) => return reply.error(errno("open", &e)),
            };
            let may_push = !write && !truncate && file.is_none();
            if !write && !truncate {
                self.passthrough.open_delay.wait();
            }
            let decision = match &file {
                Some((_, f)) if !(write && self.set_id(ino.0)) => {
                    let make = || reply.open_backing(&**f);
                    self.passthrough.decide(ino.0, Some(&make), may_push)
                }
                // A write to a set-user-ID or set-group-ID file reaches the daemon, which
                // kills those bits (`killpriv.rs`): the kernel writes a backing file
                // without asking. (Through anyway when the inode has handles on its
                // backing file already: the kernel keeps an inode in one mode.)
                _ => self.passthrough.decide(ino.0, None, may_push),
            };
            match (decision, file) {
                (Decision::Through(backing), Some((id, _))) => {
                    let fh = self.through_handle(id, write);
                    return reply.opened_passthrough(FileHandle(fh), FopenFlags::empty(), &backing);
                }
                (Decision::Cached { keep, push }, file) => {
                    if file.is_some() {
                        self.wc.unpin(ino.0);
                    }
                    let keep = if push {
                        let (keep, filled) = self.push(ino.0);
                        self.passthrough.push_ended(ino.0, filled);
                        keep
                    } else {
                        keep
                    };
                    return reply.opened(FileHandle(0), cached_flags(keep));
                }
                (Decision::Through(_), None) => self.passthrough.released(ino.0, true),
            }
        }
        reply.error(Errno::EIO)
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        let fh = fh.0;
        let through = fh & FH_PASSTHROUGH != 0;
        if through {
            if fh & FH_WRITER != 0 {
                self.wc.writer_closed(fh >> 2);
            }
            self.wc.unpin(ino.0);
        }
        self.passthrough.released(ino.0, through);
        reply.ok()
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _busy = self.busy.enter();
        self.readers.read(offset);
        if offset == 0 {
            self.read_by_lister(req.pid(), ino.0);
        }
        match self.wc.read_file(ino.0, offset, size as usize) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno("read", &e)),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _busy = self.busy.enter();
        if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
            if let Err(e) = self.kill_suidgid(req, ino.0) {
                return reply.error(errno("write", &e));
            }
        }
        match self.wc.write_file(ino.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno("write", &e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        // Writes reach the overlay synchronously: nothing to do at close. After one ENOSYS
        // the kernel stops sending flush on every close.
        reply.error(Errno::ENOSYS)
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        reply_empty("fsync", self.wc.fsync(ino.0), reply)
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        reply_empty("fsyncdir", self.wc.sync_journal(), reply)
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        reply_empty(
            "fallocate",
            self.wc.fallocate(ino.0, offset, length, mode),
            reply,
        )
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _busy = self.busy.enter();
        if reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        let (owner, _) = self.creator(req, parent.0);
        let result = self.wc.create(parent.0, name.as_bytes(), mode & !umask);
        match self.adopt(owner, result) {
            Ok(a) => self.reply_created(&a, flags, reply),
            Err(e) => reply.error(errno("create", &e)),
        }
    }

    fn tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _busy = self.busy.enter();
        if is_control(parent.0) || parent.0 == DOT_HG_INO {
            return reply.error(Errno::EPERM);
        }
        let (owner, _) = self.creator(req, parent.0);
        let result = self.wc.tmpfile(parent.0, mode & !umask);
        match self.adopt(owner, result) {
            Ok(a) => self.reply_created(&a, flags, reply),
            Err(e) => reply.error(errno("tmpfile", &e)),
        }
    }
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _busy = self.busy.enter();
        // No per-directory state: with FUSE_NO_OPENDIR_SUPPORT the kernel stops sending
        // opendir/releasedir and keeps listings cached (as FOPEN_CACHE_DIR does). It drops
        // them itself when a change goes through the mount; revfs invalidates them when it
        // changes the tree behind the kernel.
        reply.error(Errno::ENOSYS)
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let _busy = self.busy.enter();
        self.list(req, ino, offset, reply)
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let _busy = self.busy.enter();
        self.list_plus(req, ino, offset, reply)
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        reply.ok()
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _busy = self.busy.enter();
        // Space is the overlay's: blocks are the state directory's file system's. Inodes:
        // those of the working copy in use (every inode loaded, new files included) and, free,
        // what the state directory's file system has left (each new file takes one there);
        // the total is their sum, so that `df -i` adds up.
        let used = self.wc.inode_count() as u64;
        match nix_statvfs(&self.control.state) {
            Some(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                used.saturating_add(s.f_ffree),
                s.f_ffree,
                s.f_frsize as u32,
                255,
                s.f_frsize as u32,
            ),
            None => reply.statfs(0, 0, 0, used, 0, 4096, 255, 4096),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _busy = self.busy.enter();
        // The kernel checks modes itself (default_permissions).
        reply.ok()
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _busy = self.busy.enter();
        // Asked before every write (security.capability): only `user.` names are kept, so
        // the others are answered at once, without the working copy's lock.
        if !name.as_bytes().starts_with(b"user.") || ino.0 == CONTROL_DIR_INO {
            return reply.error(Errno::ENODATA);
        }
        match self.wc.get_xattr(ino.0, name.as_bytes()) {
            Ok(v) => reply_xattr(&v, size, reply),
            Err(e) => reply.error(errno("getxattr", &e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _busy = self.busy.enter();
        if self.control.target(ino.0).is_some() || ino.0 == CONTROL_DIR_INO {
            return reply.error(Errno::EPERM);
        }
        reply_empty(
            "setxattr",
            self.wc.set_xattr(ino.0, name.as_bytes(), value, flags),
            reply,
        )
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _busy = self.busy.enter();
        if self.control.target(ino.0).is_some() || ino.0 == CONTROL_DIR_INO {
            return reply_xattr(&[], size, reply);
        }
        match self.wc.list_xattrs(ino.0) {
            Ok(names) => reply_xattr(&names, size, reply),
            Err(e) => reply.error(errno("listxattr", &e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _busy = self.busy.enter();
        if self.control.target(ino.0).is_some() || ino.0 == CONTROL_DIR_INO {
            return reply.error(Errno::ENODATA);
        }
        reply_empty(
            "removexattr",
            self.wc.remove_xattr(ino.0, name.as_bytes()),
            reply,
        )
    }

    /// No ioctl is supported. Every Python `open()` asks for one (`TCGETS`, to learn
    /// whether the file is a terminal) and the kernel sends each: answered as ext4 answers
    /// an ioctl it does not know, at once and without a log line (fuser's default logs a
    /// warning per call, which grew the log by 150 bytes per file hg read).
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let _busy = self.busy.enter();
        match self.wc.seek_data(ino.0, offset, whence) {
            Ok(at) => reply.offset(at),
            Err(e) => reply.error(errno("lseek", &e)),
        }
    }
}
