//! The mounted filesystem's state ([`RevFs`]) and what its handlers share: attributes as
//! the kernel sees them, the owner of new entries, replies of entries, handles of opens
//! through the overlay, and the hooks that tell read-ahead a program lists or reads.

use crate::busy::Busy;
use crate::fuse::events::Events;
use crate::fuse::passthrough::{Decision, Passthrough, FH_PASSTHROUGH, FH_WRITER};
use crate::readahead::readers::Readers;
use crate::wc::{Attr, EntryType, SetAttr, WcError, WorkingCopy};
use fuser::{
    FileAttr, FileHandle, FopenFlags, Generation, INodeNo, ReplyCreate, ReplyEntry, Request,
};
use std::sync::Arc;
use std::time::SystemTime;

use super::page_filler::*;
use super::reply::*;
use super::synthetic::*;

/// The mounted filesystem.
pub struct RevFs {
    pub(super) wc: Arc<WorkingCopy>,
    pub(super) control: ControlTargets,
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// Time shown for the control entries.
    pub(super) started: SystemTime,
    /// The requests being served (for the control socket's `Ping`).
    pub(super) busy: Arc<Busy>,
    /// Kernel passthrough of overlay files, and the open files (`passthrough.rs`).
    pub(super) passthrough: Arc<Passthrough>,
    /// Whether a program is reading files now: listings then carry attributes.
    pub(super) readers: Readers,
    /// Fills store files' pages: at an open, and after read-ahead.
    pub(super) filler: Arc<PageFiller>,
    /// The daemon's own changes told to inotify watchers (`events.rs`).
    pub(super) events: Arc<Events>,
}

impl RevFs {
    pub fn new(
        wc: Arc<WorkingCopy>,
        control: ControlTargets,
        passthrough: Arc<Passthrough>,
        events: Arc<Events>,
    ) -> RevFs {
        let (uid, gid) = wc.mount_owner();
        let filler = Arc::new(PageFiller {
            wc: Arc::downgrade(&wc),
            notifier: Arc::default(),
            passthrough: passthrough.clone(),
        });
        wc.set_readahead_pusher(filler.clone());
        wc.enable_walk();
        RevFs {
            wc,
            control,
            uid,
            gid,
            started: SystemTime::now(),
            busy: Arc::new(Busy::default()),
            passthrough,
            readers: Readers::default(),
            filler,
            events,
        }
    }

    /// Where the daemon puts the session's notifier once the session is made.
    pub fn notifier_slot(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.filler.notifier.clone()
    }

    /// Fills the page cache of `ino`, a store file whose first read-only open
    /// `Passthrough::decide` chose to push (see [`PageFiller::fill`]); a first read from
    /// the start, as far as listings go (`readers.rs`).
    pub(super) fn push(&self, ino: u64) -> (bool, bool) {
        self.readers.read(0);
        self.filler.fill(ino)
    }

    /// What this filesystem is serving right now, shared with the control socket.
    pub fn busy(&self) -> Arc<Busy> {
        self.busy.clone()
    }

    pub(super) fn file_attr(&self, a: &Attr) -> FileAttr {
        let kind = file_type(a.kind);
        FileAttr {
            ino: INodeNo(a.ino),
            size: a.size,
            blocks: a.blocks,
            atime: a.atime,
            mtime: a.mtime,
            ctime: a.ctime,
            crtime: a.mtime,
            kind,
            perm: a.perm,
            nlink: a.nlink,
            uid: a.owner.map_or(self.uid, |o| o.0),
            gid: a.owner.map_or(self.gid, |o| o.1),
            rdev: a.rdev,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The owner a new entry in `parent` gets when `req` creates it: the caller, with the
    /// directory's group when the directory is set-group-ID (as on ext4); and whether the
    /// directory is set-group-ID (new directories inherit that bit).
    pub(super) fn creator(&self, req: &Request, parent: u64) -> ((u32, u32), bool) {
        match self.wc.owner_and_mode(parent) {
            Ok(((_, dir_gid), mode)) if mode & libc::S_ISGID != 0 => ((req.uid(), dir_gid), true),
            _ => ((req.uid(), req.gid()), false),
        }
    }

    /// Gives a just-created entry its creator as owner, when that is not the mounting user.
    pub(super) fn adopt(
        &self,
        owner: (u32, u32),
        result: Result<Attr, WcError>,
    ) -> Result<Attr, WcError> {
        let a = result?;
        if owner == (self.uid, self.gid) {
            return Ok(a);
        }
        let change = SetAttr {
            uid: Some(owner.0),
            gid: Some(owner.1),
            ..SetAttr::default()
        };
        self.wc.setattr(a.ino, &change)
    }

    /// Answers a request that creates an entry (the kernel takes one reference to it).
    pub(super) fn reply_entry(&self, op: &str, result: Result<Attr, WcError>, reply: ReplyEntry) {
        match result {
            Ok(a) => reply.entry(&TTL, &self.file_attr(&a), Generation(0)),
            Err(e) => reply.error(errno(op, &e)),
        }
    }

    /// Answers a create or tmpfile that made file `a` (the kernel takes one reference to
    /// it), opened with `flags`: with passthrough on, the kernel writes its overlay file
    /// directly from the start.
    pub(super) fn reply_created(&self, a: &Attr, flags: i32, reply: ReplyCreate) {
        let attr = self.file_attr(a);
        if !self.passthrough.on() {
            return reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            );
        }
        let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let file = self.wc.passthrough_file(a.ino, write, false).ok().flatten();
        let decision = match &file {
            Some((_, f)) => {
                let make = || reply.open_backing(&**f);
                self.passthrough.decide(a.ino, Some(&make), false)
            }
            None => self.passthrough.decide(a.ino, None, false),
        };
        match (decision, file) {
            (Decision::Through(backing), Some((id, _))) => {
                let fh = self.through_handle(id, write);
                reply.created_passthrough(
                    &TTL,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::empty(),
                    &backing,
                )
            }
            (decision, file) => {
                if file.is_some() {
                    self.wc.unpin(a.ino);
                }
                if let Decision::Through(_) = decision {
                    self.passthrough.released(a.ino, true);
                    self.passthrough.decide(a.ino, None, false);
                }
                let keep = !matches!(decision, Decision::Cached { keep: false, .. });
                reply.created(
                    &TTL,
                    &attr,
                    Generation(0),
                    FileHandle(0),
                    cached_flags(keep),
                )
            }
        }
    }

    /// The handle of an open through overlay file `id`'s backing: the id and the kinds,
    /// for `release`. A writer's handle keeps the overlay from remembering comparisons of
    /// the file until it is released.
    pub(super) fn through_handle(&self, id: u64, write: bool) -> u64 {
        if write {
            self.wc.writer_opened(id);
            (id << 2) | FH_PASSTHROUGH | FH_WRITER
        } else {
            (id << 2) | FH_PASSTHROUGH
        }
    }

    /// A negative entry (inode 0), which the kernel keeps for `ttl`.
    pub(super) fn reply_negative(&self, ttl: &std::time::Duration, reply: ReplyEntry) {
        let mut attr = self.file_attr(&Attr {
            ino: 0,
            kind: EntryType::File,
            size: 0,
            perm: 0,
            mtime: self.started,
            ctime: self.started,
            atime: self.started,
            rdev: 0,
            owner: None,
            nlink: 1,
            blocks: 0,
        });
        attr.ino = INodeNo(0);
        reply.entry(ttl, &attr, Generation(0))
    }

    /// The events helper creates `name` in `parent` (`events.rs`): answered with the
    /// entry the daemon made, when a change being told made it; refused otherwise (the
    /// helper never makes anything).
    pub(super) fn reply_made(&self, parent: u64, name: &std::ffi::OsStr, reply: ReplyEntry) {
        use std::os::unix::ffi::OsStrExt;
        if !self.events.created(parent, name.as_bytes()) {
            return reply.error(fuser::Errno::EEXIST);
        }
        match self.wc.lookup(parent, name.as_bytes()) {
            Ok(Some(a)) => reply.entry(&TTL, &self.file_attr(&a), Generation(0)),
            Ok(None) => reply.error(fuser::Errno::ENOENT),
            Err(e) => reply.error(errno("lookup", &e)),
        }
    }

    /// The events helper removes `name` from `parent`: answered as done when it is a
    /// ghost of a change being told; refused otherwise.
    pub(super) fn reply_removed(
        &self,
        parent: u64,
        name: &std::ffi::OsStr,
        reply: fuser::ReplyEmpty,
    ) {
        use std::os::unix::ffi::OsStrExt;
        if self.events.removed(parent, name.as_bytes()) {
            reply.ok()
        } else {
            reply.error(fuser::Errno::EPERM)
        }
    }

    /// Whether `req` comes from the daemon's events helper (`events.rs`), whose calls
    /// change nothing.
    pub(super) fn is_events_helper(&self, req: &Request) -> bool {
        self.events.is_helper(req.pid())
    }

    /// Kills the set-user-ID and set-group-ID bits of file `ino` before a write by a caller
    /// without CAP_FSETID (`killpriv.rs`), and drops the kernel's attributes of it, which
    /// still have them (a write's answer carries none): an `exec` after the write reads
    /// them again.
    pub(super) fn kill_suidgid(&self, req: &Request, ino: u64) -> Result<(), WcError> {
        let Some(mode) = self.killed_mode(req, ino)? else {
            return Ok(());
        };
        let change = SetAttr {
            mode: Some(mode),
            ..SetAttr::default()
        };
        self.wc.setattr(ino, &change)?;
        if let Some(n) = self.filler.notifier.get() {
            // Attributes only (offset -1): takes no lock the writer holds.
            let _ = n.inval_inode(fuser::INodeNo(ino), -1, 0);
        }
        Ok(())
    }

    /// Whether file `ino` is set-user-ID or set-group-ID.
    pub(super) fn set_id(&self, ino: u64) -> bool {
        self.wc
            .owner_and_mode(ino)
            .is_ok_and(|(_, mode)| mode & (libc::S_ISUID | libc::S_ISGID) != 0)
    }

    /// The mode of `ino` without the bits that `req`'s write, truncate or chown kills
    /// (`killpriv.rs`); `None` when nothing goes.
    pub(super) fn killed_mode(&self, req: &Request, ino: u64) -> Result<Option<u32>, WcError> {
        use super::killpriv::{in_group_or_root, killed};
        let ((_, group), mode) = self.wc.owner_and_mode(ino)?;
        Ok(killed(mode, || {
            in_group_or_root(req.pid(), req.uid(), req.gid(), group)
        }))
    }

    /// Whether `req` comes from the daemon's own lease helper (`lease.rs`), not a program.
    pub(super) fn is_helper(&self, req: &Request) -> bool {
        self.passthrough.leases.helper_pid() == Some(req.pid())
    }

    /// A program listed directory `dir` from its start (`offset` 0): the walk ahead learns how far the program it follows is (`wc/ahead.rs`), and a
    /// directory the walk had not come to, listed while a program reads files, gets its
    /// round and starts the walk again from it.
    pub(super) fn listed(&self, req: &Request, dir: u64, offset: u64) {
        if offset != 0 || is_control(dir) {
            return;
        }
        if self.is_helper(req) {
            self.passthrough.leases.helper_listed(dir);
            return;
        }
        if !self.wc.walk_reached(dir) && self.readers.reading() {
            self.wc.listed_while_reading(dir);
            self.readers.listed(req.pid(), dir);
        }
    }

    /// Thread `pid` reads (or opens to read) file `ino` from its start: when it is the
    /// thread that listed the file's directory, and this makes enough of that directory's
    /// files, it reads the tree itself and the walk starts from there (`readers.rs`).
    pub(super) fn read_by_lister(&self, pid: u32, ino: u64) {
        if !self.readers.is_lister(pid) {
            return;
        }
        if let Some(dir) = self
            .wc
            .store_parent(ino)
            .and_then(|dir| self.readers.read_in(pid, dir, ino))
        {
            self.wc.walk_from(dir);
        }
    }

    /// The attributes of the control directory, its links and `.hg`.
    pub(super) fn control_attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, perm, size) = if ino == CONTROL_DIR_INO {
            (EntryType::Dir, 0o555, 4096)
        } else {
            let target = self.control.target(ino)?;
            (EntryType::Symlink, 0o777, target.as_os_str().len() as u64)
        };
        Some(self.file_attr(&Attr {
            ino,
            kind,
            size,
            perm,
            mtime: self.started,
            ctime: self.started,
            atime: self.started,
            rdev: 0,
            owner: None,
            nlink: if kind == EntryType::Dir { 2 } else { 1 },
            blocks: size.div_ceil(512),
        }))
    }
}
