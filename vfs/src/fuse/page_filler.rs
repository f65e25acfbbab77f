//! Filling store files' pages in the kernel's page cache (`FUSE_NOTIFY_STORE`): at an open
//! that passthrough chose to push, and for read-ahead (its [`crate::readahead::Pusher`]).

use crate::fuse::passthrough::Passthrough;
use crate::wc::WorkingCopy;
use fuser::INodeNo;
use std::sync::Arc;

/// The largest file pushed into the page cache at an open (passthrough on); bigger ones are
/// read with READs, 1 MiB at a time.
const PUSH_MAX: u64 = 1 << 20;
/// The largest text read-ahead pushes with passthrough off: any it holds in memory (a
/// bigger one goes to the on-disk cache of big texts, and is pushed from there a piece at a
/// time). Its READs would be on the reader's path, 1 MiB at a time.
const BACKGROUND_PUSH_MAX: u64 = revfs_store::bigtext::BIG_TEXT;
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
pub(super) struct PageFiller {
    /// Weak: the working copy holds read-ahead, which holds this.
    pub(super) wc: std::sync::Weak<WorkingCopy>,
    pub(super) notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    pub(super) passthrough: Arc<Passthrough>,
}

impl PageFiller {
    /// Fills `ino`'s pages with its content (files up to [`PUSH_MAX`]), for a program's
    /// open (a first read, as far as read-ahead goes). Returns (whether the kernel may keep
    /// the pages it has, whether pages were filled): not to keep when the file is no longer
    /// that revision after the push (an update changed it meanwhile).
    pub(super) fn fill(&self, ino: u64) -> (bool, bool) {
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
            Ok(content) => self.store(&wc, ino, node, &content, false),
            Err(e) => {
                tracing::debug!(ino, "push: {e}");
                (true, false)
            }
        }
    }

    /// Fills `ino`'s pages with `content`, revision `node`'s (what [`PageFiller::fill`]
    /// returns); `background`: a push of read-ahead's, not an open's.
    fn store(
        &self,
        wc: &WorkingCopy,
        ino: u64,
        node: revfs_store::Node,
        content: &[u8],
        background: bool,
    ) -> (bool, bool) {
        let Some(notifier) = self.notifier.get() else {
            return (true, false);
        };
        self.passthrough.push_delay.before(ino, background);
        let filled = match notifier.store(INodeNo(ino), 0, content) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(ino, "push: {e}");
                false
            }
        };
        self.passthrough.push_delay.after();
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
        self.store(&wc, ino, node, content, true)
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
    pub(super) fn drop_helper_listings(&self) {
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
        // beside, and which an open for writing or a truncate waits for (each let go
        // right after its file's push).
        let paths: Vec<&[u8]> = files.iter().map(|(job, _)| job.path.as_slice()).collect();
        let mut leases = self.passthrough.leases.take(&paths);
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
                // A test's hold or delay stops this push: the files pushed before it are
                // let go first, or their writers would wait for it.
                if self.passthrough.push_delay.may_wait() {
                    leases.tell_now();
                }
                let (keep, filled) = self.fill_with(ino, job.node, content);
                leases.let_go(i);
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
        self.passthrough.push_delay.before(ino, true);
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
        self.passthrough.push_delay.after();
        let keep = wc.store_node(ino) == Some(job.node);
        // A piece that failed leaves the file's pages as the kernel had them plus the
        // pieces before (each the file's own bytes).
        self.drop_if_changed(ino, keep);
        drop(leases);
        filled && keep
    }
}
