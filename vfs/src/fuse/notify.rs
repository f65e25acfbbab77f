//! Kernel cache invalidations, sent from a thread of their own.
//!
//! Telling the kernel to forget an entry or an inode (`FUSE_NOTIFY_INVAL_*`) is a write to
//! `/dev/fuse` that the kernel handles synchronously: it takes the directory's inode lock,
//! which a process in the middle of a request on that directory holds while it waits for
//! the daemon. A notification sent from a FUSE request thread, or while holding a lock a
//! request needs, therefore waits on itself. So notifications go through one thread that
//! holds no lock of the working copy and serves no request ([`Invalidator`]); whoever
//! needs them sent (a control request, after releasing its locks) hands over a batch and
//! waits for it, reporting progress as items complete so that a client's deadline sees a
//! daemon that works, and the log names an item that makes no progress.

use crate::wc::Invalidation;
use crate::wc::{WorkingCopy, ROOT_INO};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// After this long without one item completing, the log says which one is waiting.
const STALL_WARNING: Duration = Duration::from_secs(5);

/// One batch handed to the thread, and how far it has come.
struct Batch {
    items: Vec<Invalidation>,
    state: Arc<BatchState>,
}

#[derive(Default)]
struct BatchState {
    /// Items sent so far.
    sent: AtomicUsize,
    finished: Mutex<bool>,
    wake: Condvar,
}

/// Sends kernel invalidations from its own thread (see the module documentation).
pub struct Invalidator {
    tx: Mutex<Sender<Batch>>,
}

impl Invalidator {
    /// Starts the thread that owns `notifier`.
    pub fn start(notifier: fuser::Notifier) -> std::io::Result<Invalidator> {
        let (tx, rx) = mpsc::channel::<Batch>();
        std::thread::Builder::new()
            .name("revfs-notify".into())
            .spawn(move || {
                for batch in rx {
                    for item in &batch.items {
                        send(&notifier, item);
                        batch.state.sent.fetch_add(1, Ordering::Release);
                        batch.state.wake.notify_all();
                    }
                    *batch
                        .state
                        .finished
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = true;
                    batch.state.wake.notify_all();
                }
            })?;
        Ok(Invalidator { tx: Mutex::new(tx) })
    }

    /// Sends `items` in order and returns when the kernel has taken every one, calling
    /// `progress(done, total)` as they complete. The caller must hold no lock of the
    /// working copy: the kernel may call back into the filesystem before it answers.
    pub fn send_all(&self, items: Vec<Invalidation>, progress: &dyn Fn(u64, u64)) {
        if items.is_empty() {
            return;
        }
        let total = items.len();
        let state = Arc::new(BatchState::default());
        let first = items.first().cloned();
        let batch = Batch {
            items,
            state: state.clone(),
        };
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(batch)
            .is_ok();
        if !sent {
            tracing::error!("the invalidation thread is gone: {total} invalidations not sent");
            return;
        }
        let mut finished = state.finished.lock().unwrap_or_else(|p| p.into_inner());
        let mut last = (0, Instant::now());
        let mut warned = false;
        while !*finished {
            finished = match state
                .wake
                .wait_timeout(finished, Duration::from_millis(200))
            {
                Ok((f, _)) => f,
                Err(p) => p.into_inner().0,
            };
            let done = state.sent.load(Ordering::Acquire);
            if done != last.0 {
                last = (done, Instant::now());
                progress(done as u64, total as u64);
            } else if !warned && last.1.elapsed() > STALL_WARNING {
                warned = true;
                tracing::warn!(
                    done,
                    total,
                    first = ?first,
                    "a kernel invalidation has waited {STALL_WARNING:?}: a process holds a \
                     directory of the mount while it waits for this daemon"
                );
            }
        }
    }
}

fn send(notifier: &fuser::Notifier, inv: &Invalidation) {
    let r = match inv {
        Invalidation::Entry { parent, name } => {
            notifier.inval_entry(fuser::INodeNo(*parent), OsStr::from_bytes(name))
        }
        Invalidation::Inode(ino) => notifier.inval_inode(fuser::INodeNo(*ino), 0, 0),
    };
    if let Err(e) = r {
        // ENOENT: the kernel did not know it, which is fine.
        if e.raw_os_error() != Some(libc::ENOENT) {
            tracing::debug!(?inv, "invalidation failed: {e}");
        }
    }
}

/// What the kernel must forget after revfs changed `path` behind its back: the names
/// leading to it (negative entries included), the cached listings of the directories on
/// the way, and the inode itself. A directory on the way that the kernel already knows
/// keeps its name: its dentry is right, and dropping it would leave a process whose
/// current directory it is without one (`getcwd` fails). Each lookup takes the working
/// copy's lock briefly; none is held when this returns.
pub fn path_invalidations(wc: &WorkingCopy, path: &[u8], out: &mut Vec<Invalidation>) {
    let mut parent = ROOT_INO;
    let mut end = 0;
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    for (i, part) in parts.iter().enumerate() {
        end += part.len();
        let found = wc.ino_known(&path[..end]);
        let last = i + 1 == parts.len();
        if last || !matches!(found, Ok(Some((_, true)))) {
            out.push(Invalidation::Entry {
                parent,
                name: (*part).into(),
            });
        }
        out.push(Invalidation::Inode(parent));
        match found {
            Ok(Some((ino, _))) => parent = ino,
            _ => return,
        }
        end += 1;
    }
    out.push(Invalidation::Inode(parent));
}
