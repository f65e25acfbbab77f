//! The FUSE filesystem: translates kernel requests into [`WorkingCopy`] operations.
//!
//! The tree changes only through this filesystem (or through revfs itself, which then
//! invalidates explicitly), so the kernel is told to cache hard: long entry and attribute
//! timeouts (negative entries included), no open/release round trips (the kernel then keeps
//! each file's pages), symlink caching, large requests. A hidden directory `.revfs` at the
//! root (not listed, but found by lookup) holds symlinks to the control socket, the
//! repository and the state directory.

use crate::busy::Busy;
use crate::journal::SpecialKind;
use crate::passthrough::{Decision, Passthrough, FH_PASSTHROUGH, FH_WRITER};
use crate::readers::Readers;
use crate::wc::{
    Attr, EntryType, SetAttr, WcError, WorkingCopy, RENAME_EXCHANGE, RENAME_NOREPLACE, ROOT_INO,
};
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel may trust entries and attributes. revfs invalidates explicitly
/// whenever it changes the tree behind the kernel's back, so this can be long.
const TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Name of the hidden control directory at the root.
pub const CONTROL_DIR: &str = ".revfs";
const CONTROL_DIR_INO: u64 = 0xFFFF_FFFF_0000_0001;
const CONTROL_LINKS: [(&str, u64); 3] = [
    ("socket", 0xFFFF_FFFF_0000_0002),
    ("repo", 0xFFFF_FFFF_0000_0003),
    ("state", 0xFFFF_FFFF_0000_0004),
];

/// The working copy's `.hg` at the root: a symbolic link (found by lookup, not listed) to
/// the hg share that the mount's state directory holds (docs/FORMATS.md), so that real hg
/// finds the working copy and its extension, and keeps its files off the mount.
pub const DOT_HG: &str = ".hg";
const DOT_HG_INO: u64 = 0xFFFF_FFFF_0000_0005;

/// What the control directory and `.hg` point at.
#[derive(Debug, Clone)]
pub struct ControlTargets {
    pub socket: PathBuf,
    pub repo: PathBuf,
    pub state: PathBuf,
    /// The hg share in the state directory, which `.hg` names.
    pub dot_hg: PathBuf,
}

impl ControlTargets {
    fn target(&self, ino: u64) -> Option<&PathBuf> {
        if ino == DOT_HG_INO {
            return Some(&self.dot_hg);
        }
        match CONTROL_LINKS.iter().position(|(_, i)| *i == ino)? {
            0 => Some(&self.socket),
            1 => Some(&self.repo),
            _ => Some(&self.state),
        }
    }
}

/// The mounted filesystem.
pub struct RevFs {
    wc: Arc<WorkingCopy>,
    control: ControlTargets,
    uid: u32,
    gid: u32,
    /// Time shown for the control entries.
    started: SystemTime,
    /// The requests being served (for the control socket's `Ping`).
    busy: Arc<Busy>,
    /// Kernel passthrough of overlay files, and the open files (`passthrough.rs`).
    passthrough: Arc<Passthrough>,
    /// Whether a program is reading files now: listings then carry attributes.
    readers: Readers,
    /// Fills store files' pages: at an open, and after read-ahead.
    filler: Arc<PageFiller>,
}

impl RevFs {
    pub fn new(
        wc: Arc<WorkingCopy>,
        control: ControlTargets,
        passthrough: Arc<Passthrough>,
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
        }
    }

    /// Where the daemon puts the session's notifier once the session is made.
    pub fn notifier_slot(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.filler.notifier.clone()
    }

    /// Fills the page cache of `ino`, a store file whose first read-only open
    /// `Passthrough::decide` chose to push (see [`PageFiller::fill`]); a first read from
    /// the start, as far as listings go (`readers.rs`).
    fn push(&self, ino: u64) -> (bool, bool) {
        self.readers.read(0);
        self.filler.fill(ino)
    }

    /// What this filesystem is serving right now, shared with the control socket.
    pub fn busy(&self) -> Arc<Busy> {
        self.busy.clone()
    }

    fn file_attr(&self, a: &Attr) -> FileAttr {
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
    fn creator(&self, req: &Request, parent: u64) -> ((u32, u32), bool) {
        match self.wc.owner_and_mode(parent) {
            Ok(((_, dir_gid), mode)) if mode & libc::S_ISGID != 0 => ((req.uid(), dir_gid), true),
            _ => ((req.uid(), req.gid()), false),
        }
    }

    /// Gives a just-created entry its creator as owner, when that is not the mounting user.
    fn adopt(&self, owner: (u32, u32), result: Result<Attr, WcError>) -> Result<Attr, WcError> {
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
    fn reply_entry(&self, op: &str, result: Result<Attr, WcError>, reply: ReplyEntry) {
        match result {
            Ok(a) => reply.entry(&TTL, &self.file_attr(&a), Generation(0)),
            Err(e) => reply.error(errno(op, &e)),
        }
    }

    fn control_attr(&self, ino: u64) -> Option<FileAttr> {
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

    /// The handle of an open through overlay file `id`'s backing: the id and the kinds,
    /// for `release`. A writer's handle keeps the overlay from remembering comparisons of
    /// the file until it is released.
    fn through_handle(&self, id: u64, write: bool) -> u64 {
        if write {
            self.wc.writer_opened(id);
            (id << 2) | FH_PASSTHROUGH | FH_WRITER
        } else {
            (id << 2) | FH_PASSTHROUGH
        }
    }

    /// Whether `req` comes from the daemon's own lease helper (`lease.rs`), not a program.
    fn is_helper(&self, req: &Request) -> bool {
        self.passthrough.leases.helper_pid() == Some(req.pid())
    }

    /// A program listed directory `dir` from its start (`offset` 0): the walk ahead learns how far the program it follows is (`wc/ahead.rs`), and a
    /// directory the walk had not come to, listed while a program reads files, gets its
    /// round and starts the walk again from it.
    fn listed(&self, req: &Request, dir: u64, offset: u64) {
        if offset != 0 || Self::is_control(dir) {
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
    fn read_by_lister(&self, pid: u32, ino: u64) {
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

    fn is_control(ino: u64) -> bool {
        ino >= CONTROL_DIR_INO
    }

    /// Names no request may create, remove or rename: those in the control directory,
    /// and the control directory and `.hg` at the root.
    fn reserved(parent: INodeNo, name: &OsStr) -> bool {
        Self::is_control(parent.0)
            || (parent.0 == ROOT_INO && (name == CONTROL_DIR || name == DOT_HG))
    }
}

/// The largest file pushed into the page cache at an open (passthrough on); bigger ones are
/// read with READs, 1 MiB at a time.
const PUSH_MAX: u64 = 1 << 20;
/// The largest text read-ahead pushes with passthrough off: any it holds in memory (a
/// bigger one goes to the on-disk cache of big texts, and is pushed from there a piece at a
/// time). Its READs would be on the reader's path, 1 MiB at a time.
const BACKGROUND_PUSH_MAX: u64 = crate::content::BIG_TEXT;
/// A big text (in the on-disk cache) is pushed this much at a time.
const BIG_PUSH_PIECE: usize = 1 << 20;

/// Fills store files' pages in the kernel's page cache (`FUSE_NOTIFY_STORE`): at a
/// read-only open that `Passthrough::decide` chose to push, and in the background for the
/// files read-ahead rebuilt (the [`Pusher`]), so that a reader's open finds them there.
/// A push writes over whatever pages the kernel holds, so no writer may have the file
/// open: with opens answered (passthrough on) the open table tells; with passthrough off
/// a read lease on the file does (`lease.rs`).
///
/// [`Pusher`]: crate::readahead::Pusher
struct PageFiller {
    /// Weak: the working copy holds read-ahead, which holds this.
    wc: std::sync::Weak<WorkingCopy>,
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    passthrough: Arc<Passthrough>,
}

impl PageFiller {
    /// Fills `ino`'s pages with its content (files up to [`PUSH_MAX`]), for a program's
    /// open (a first read, as far as read-ahead goes). Returns (whether the kernel may keep
    /// the pages it has, whether pages were filled): not to keep when the file is no longer
    /// that revision after the push (an update changed it meanwhile).
    fn fill(&self, ino: u64) -> (bool, bool) {
        let Some(wc) = self.wc.upgrade() else {
            return (true, false);
        };
        let Some(node) = wc.store_node(ino) else {
            return (true, false);
        };
        let size = match wc.getattr(ino) {
            Ok(a) if a.size > 0 && a.size <= PUSH_MAX => a.size,
            _ => return (true, false),
        };
        match wc.read_file(ino, 0, size as usize) {
            Ok(content) => self.store(&wc, ino, node, &content),
            Err(e) => {
                tracing::debug!(ino, "push: {e}");
                (true, false)
            }
        }
    }

    /// Fills `ino`'s pages with `content`, revision `node`'s (what [`PageFiller::fill`]
    /// returns).
    fn store(
        &self,
        wc: &WorkingCopy,
        ino: u64,
        node: revfs_store::Node,
        content: &[u8],
    ) -> (bool, bool) {
        let Some(notifier) = self.notifier.get() else {
            return (true, false);
        };
        self.passthrough.push_delay.wait();
        let filled = match notifier.store(INodeNo(ino), 0, content) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(ino, "push: {e}");
                false
            }
        };
        self.passthrough.push_delay.wait();
        (wc.store_node(ino) == Some(node), filled)
    }

    /// Read-ahead's push of `content`, revision `node` of `ino` (just rebuilt: no read).
    fn fill_with(&self, ino: u64, node: revfs_store::Node, content: &[u8]) -> (bool, bool) {
        let Some(wc) = self.wc.upgrade() else {
            return (true, false);
        };
        // With passthrough on, an open decides for a file over PUSH_MAX (`passthrough.rs`).
        let max = if self.passthrough.on() {
            PUSH_MAX
        } else {
            BACKGROUND_PUSH_MAX
        };
        if content.is_empty() || content.len() as u64 > max || wc.store_node(ino) != Some(node) {
            return (true, false);
        }
        self.store(&wc, ino, node, content)
    }
}

impl PageFiller {
    /// Whether `ino` is a store file of revision `node` now.
    fn is_revision(&self, ino: u64, node: &revfs_store::Node) -> bool {
        self.wc
            .upgrade()
            .is_some_and(|wc| wc.store_node(ino) == Some(*node))
    }

    /// The listings the lease helper made (`lease.rs`, `DirCache`) go from the kernel's
    /// cache: a program listing one of those directories is answered by the daemon, and
    /// the walk ahead learns where it is. The entries the listing made stay.
    fn drop_helper_listings(&self) {
        let dirs = self.passthrough.leases.take_listed();
        if let Some(n) = self.notifier.get() {
            for dir in dirs {
                let _ = n.inval_inode(INodeNo(dir), 0, 0);
            }
        }
    }

    /// After a push that found the file changed (`keep` false): whatever was pushed goes
    /// (the change's own invalidation may have come before it).
    fn drop_if_changed(&self, ino: u64, keep: bool) {
        if !keep {
            if let Some(n) = self.notifier.get() {
                let _ = n.inval_inode(INodeNo(ino), 0, 0);
            }
        }
    }
}

impl crate::readahead::Pusher for PageFiller {
    fn push(
        &self,
        files: &[(&crate::readahead::Job, &[u8])],
        still_ahead: &dyn Fn(&crate::readahead::Job) -> bool,
    ) -> Vec<bool> {
        if !self.passthrough.background_pushes() {
            return vec![false; files.len()];
        }
        if self.passthrough.on() {
            // Opens seen: the open table says whether a handle has it.
            return files
                .iter()
                .map(|(job, content)| {
                    let Some(ino) = job.ino else {
                        return false;
                    };
                    if !self.is_revision(ino, &job.node) || !self.passthrough.claim_push(ino) {
                        return false;
                    }
                    let (keep, filled) = self.fill_with(ino, job.node, content);
                    self.passthrough.background_push_ended(ino, filled, keep);
                    self.drop_if_changed(ino, keep);
                    filled && keep
                })
                .collect();
        }
        // Opens not seen: under read leases, which no writer's descriptor can be open
        // beside, and which an open for writing or a truncate waits for (until all of
        // them are let go, after the last push).
        let paths: Vec<&[u8]> = files.iter().map(|(job, _)| job.path.as_slice()).collect();
        let leases = self.passthrough.leases.take(&paths);
        self.drop_helper_listings();
        let pushed = files
            .iter()
            .enumerate()
            .map(|(i, (job, content))| {
                let Some(ino) = leases.ino(i) else {
                    return false;
                };
                // The leases took a round trip to the helper, and the pushes before this
                // one time: the reader may have come meanwhile (its READ was answered,
                // the pages are there).
                if !still_ahead(job) {
                    return false;
                }
                let (keep, filled) = self.fill_with(ino, job.node, content);
                self.drop_if_changed(ino, keep);
                filled && keep
            })
            .collect();
        drop(leases);
        pushed
    }

    fn push_big(
        &self,
        job: &crate::readahead::Job,
        text: &revfs_store::bigtext::BigText,
        unread: &dyn Fn() -> bool,
    ) -> bool {
        // With passthrough on, a read-only open pushes a file up to PUSH_MAX only: one
        // this big is read through the daemon, and left alone here.
        if !self.passthrough.background_pushes() || self.passthrough.on() {
            return false;
        }
        let Some(wc) = self.wc.upgrade() else {
            return false;
        };
        let Some(notifier) = self.notifier.get() else {
            return false;
        };
        let leases = self.passthrough.leases.take(&[job.path.as_slice()]);
        self.drop_helper_listings();
        let Some(ino) = leases.ino(0) else {
            return false;
        };
        if !unread() || wc.store_node(ino) != Some(job.node) {
            return false;
        }
        self.passthrough.push_delay.wait();
        let mut filled = true;
        let mut at = 0;
        while filled && at < text.len() {
            filled = match text.read(at, BIG_PUSH_PIECE) {
                Ok(piece) if !piece.is_empty() => {
                    let stored = notifier.store(INodeNo(ino), at, &piece);
                    at += piece.len() as u64;
                    stored.is_ok()
                }
                _ => false,
            };
        }
        self.passthrough.push_delay.wait();
        let keep = wc.store_node(ino) == Some(job.node);
        // A piece that failed leaves the file's pages as the kernel had them plus the
        // pieces before (each the file's own bytes).
        self.drop_if_changed(ino, keep);
        drop(leases);
        filled && keep
    }
}

/// The open flags of a handle in the kernel's page cache: keep the pages it holds, unless
/// they may be older than the file.
fn cached_flags(keep: bool) -> FopenFlags {
    if keep {
        FopenFlags::FOPEN_KEEP_CACHE
    } else {
        FopenFlags::empty()
    }
}

/// Logs a failure (store errors are the interesting ones) and gives the errno.
fn errno(op: &str, err: &WcError) -> Errno {
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
fn reply_xattr(value: &[u8], size: u32, reply: ReplyXattr) {
    if size == 0 {
        reply.size(value.len() as u32)
    } else if (size as usize) < value.len() {
        reply.error(Errno::ERANGE)
    } else {
        reply.data(value)
    }
}

/// Answers a request that returns nothing on success.
fn reply_empty(op: &str, result: Result<(), WcError>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(op, &e)),
    }
}

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

fn file_type(t: EntryType) -> FileType {
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
fn special_kind(mode: u32) -> Option<SpecialKind> {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => Some(SpecialKind::Fifo),
        libc::S_IFSOCK => Some(SpecialKind::Socket),
        libc::S_IFCHR => Some(SpecialKind::Char),
        libc::S_IFBLK => Some(SpecialKind::Block),
        _ => None,
    }
}

fn time_of(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

/// The attributes of an entry a listing names without making it (node id 0): the kernel
/// reads only the inode number and the type.
fn name_only(ino: u64, kind: FileType) -> FileAttr {
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
        let _ = config.set_max_readahead(crate::bdi::READ_AHEAD);
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
        match self.wc.lookup(parent, name.as_bytes()) {
            Ok(Some(a)) => {
                // A file looked up one by one: a program stats the tree's files (`ls -l`,
                // `find -size`, rsync, make), so listings carry attributes for a while.
                if !matches!(a.kind, EntryType::Dir) && !self.is_helper(req) {
                    self.readers.looked_up();
                }
                reply.entry(&TTL, &self.file_attr(&a), Generation(0))
            }
            // A negative entry (inode 0) that the kernel may cache as long as a positive one.
            Ok(None) => {
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
                reply.entry(&TTL, &attr, Generation(0))
            }
            Err(e) => reply.error(errno("lookup", &e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _busy = self.busy.enter();
        if !Self::is_control(ino.0) {
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
        reply: ReplyAttr,
    ) {
        let _busy = self.busy.enter();
        if Self::is_control(ino.0) {
            return reply.error(Errno::EPERM);
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
        if Self::reserved(parent, name) {
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
        if Self::reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        let (owner, setgid) = self.creator(req, parent.0);
        let mode = (mode & !umask) | if setgid { libc::S_ISGID } else { 0 };
        let result = self.wc.mkdir(parent.0, name.as_bytes(), mode);
        self.reply_entry("mkdir", self.adopt(owner, result), reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _busy = self.busy.enter();
        if Self::reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        reply_empty("unlink", self.wc.unlink(parent.0, name.as_bytes()), reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _busy = self.busy.enter();
        if Self::reserved(parent, name) {
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
        if Self::reserved(parent, link_name) {
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
        if Self::reserved(parent, name) || Self::reserved(newparent, newname) {
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
        if Self::reserved(newparent, newname)
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
        if Self::is_control(ino.0) {
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
                Some((_, f)) => {
                    let make = || reply.open_backing(&**f);
                    self.passthrough.decide(ino.0, Some(&make), may_push)
                }
                None => self.passthrough.decide(ino.0, None, may_push),
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
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _busy = self.busy.enter();
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
        if Self::reserved(parent, name) {
            return reply.error(Errno::EPERM);
        }
        let (owner, _) = self.creator(req, parent.0);
        let result = self.wc.create(parent.0, name.as_bytes(), mode & !umask);
        let a = match self.adopt(owner, result) {
            Ok(a) => a,
            Err(e) => return reply.error(errno("create", &e)),
        };
        let attr = self.file_attr(&a);
        if !self.passthrough.on() {
            return reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            );
        }
        // A new file is an overlay file: written by the kernel directly from the start.
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
        mut reply: ReplyDirectory,
    ) {
        let _busy = self.busy.enter();
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
        let (parent, children) = match self.wc.readdir(ino.0) {
            Ok(x) => x,
            Err(e) => return reply.error(errno("readdir", &e)),
        };
        let dots = [
            (ino.0, EntryType::Dir, &b"."[..]),
            (parent, EntryType::Dir, &b".."[..]),
        ];
        let all = dots
            .into_iter()
            .chain(children.iter().map(|(n, i, t)| (*i, *t, &n[..])));
        for (i, (child, t, name)) in all.enumerate().skip(offset as usize) {
            if reply.add(
                INodeNo(child),
                i as u64 + 1,
                file_type(t),
                OsStr::from_bytes(name),
            ) {
                break;
            }
        }
        self.listed(req, ino.0, offset);
        reply.ok()
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _busy = self.busy.enter();
        if ino.0 == CONTROL_DIR_INO {
            // Names only (node id 0), as readdir gives them.
            for (i, (child, kind, name)) in control_entries()
                .into_iter()
                .enumerate()
                .skip(offset as usize)
            {
                if reply.add(
                    INodeNo(0),
                    i as u64 + 1,
                    name,
                    &TTL,
                    &name_only(child, kind),
                    Generation(0),
                ) {
                    break;
                }
            }
            return reply.ok();
        }
        let (parent, children) = match self.wc.readdir(ino.0) {
            Ok(x) => x,
            Err(e) => return reply.error(errno("readdirplus", &e)),
        };
        // Entries with attributes only while a program reads files (`readers.rs`): each is
        // a lookup (the kernel counts it as one) and thaws the entry. Otherwise node id 0:
        // the kernel takes the name and makes no entry, as for a plain readdir.
        let plus = self.readers.active();
        let dots = [
            (ino.0, EntryType::Dir, &b"."[..]),
            (parent, EntryType::Dir, &b".."[..]),
        ];
        let all = dots
            .into_iter()
            .chain(children.iter().map(|(n, i, t)| (*i, *t, &n[..])));
        for (i, (child, t, name)) in all.enumerate().skip(offset as usize) {
            let looked_up = if plus && i >= 2 {
                match self.wc.lookup(ino.0, name) {
                    Ok(Some(a)) => Some(a),
                    // Gone since the listing.
                    Ok(None) => continue,
                    // Its attributes cannot be had (its filelog is missing or damaged):
                    // the name alone, as a plain listing gives it. Its own lookup fails
                    // then, not the whole listing.
                    Err(_) => None,
                }
            } else {
                None
            };
            let full = match &looked_up {
                Some(a) => reply.add(
                    INodeNo(a.ino),
                    i as u64 + 1,
                    OsStr::from_bytes(name),
                    &TTL,
                    &self.file_attr(a),
                    Generation(0),
                ),
                None => reply.add(
                    INodeNo(0),
                    i as u64 + 1,
                    OsStr::from_bytes(name),
                    &TTL,
                    &name_only(child, file_type(t)),
                    Generation(0),
                ),
            };
            if full {
                if let Some(a) = looked_up {
                    self.wc.forget(a.ino, 1);
                }
                break;
            }
        }
        // A program reading files lists the directory it reads next.
        self.listed(req, ino.0, offset);
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

/// (blocks, free, available, block size) of the file system holding `path`.
fn nix_statvfs(path: &Path) -> Option<libc::statvfs> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the struct we pass; the path is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(s)
}
