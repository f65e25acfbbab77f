//! Repository locks compatible with Mercurial 6.3.2 (`M/lock.py`, `M/util.py:makelock`).
//!
//! A lock is a symlink whose target is `<host>:<pid>`, created atomically with
//! `symlink(2)`; on Linux `<host>` is the host name followed by `/` and the hexadecimal inode
//! of `/proc/self/ns/pid`, so that processes in different pid namespaces never mistake each
//! other's pids. A waiter polls every 100 ms; it breaks a lock only when the holder's host
//! part equals its own and the holder's pid is dead, and does so while holding
//! `<lock>.break`, like hg. Releasing a lock (dropping the guard) unlinks it.
//!
//! [`RepoLocks`] takes `.hg/wlock` then `.hg/store/lock`, hg's order, and releases them in
//! the reverse order.

use crate::error::{Result, StoreError};
use crate::repo::Repo;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a waiter sleeps between two attempts.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// hg's default `ui.timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// A held lock; released (unlinked) when dropped.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Lock {
    /// The path of the lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Only unlink a lock that is still ours: a lock broken by someone else must stay.
        if read_holder(&self.path).ok().flatten().as_deref() == Some(lock_info().as_str()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The host part of a lock: `gethostname()` plus, on Linux, `/` and the hex inode of the
/// pid namespace (hg's `_getlockprefix`).
pub fn lock_prefix() -> String {
    let mut host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim_end_matches('\n').to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    if let Ok(meta) = std::fs::metadata("/proc/self/ns/pid") {
        host.push_str(&format!("/{:x}", meta.ino()));
    }
    host
}

/// The content of a lock held by this process: `<host>:<pid>`.
pub fn lock_info() -> String {
    format!("{}:{}", lock_prefix(), std::process::id())
}

/// The holder recorded in a lock (symlink target, or file content), `None` if there is no
/// lock.
fn read_holder(path: &Path) -> Result<Option<String>> {
    match std::fs::read_link(path) {
        Ok(target) => return Ok(Some(target.to_string_lossy().into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => {}
    }
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// Whether a process with this pid exists (in our pid namespace).
fn pid_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Whether `holder` is a lock of a dead process on this host (and pid namespace).
fn is_stale(holder: &str) -> bool {
    let Some((host, pid)) = holder.rsplit_once(':') else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == lock_prefix() && pid != std::process::id() && !pid_alive(pid)
}

/// One attempt to create the lock symlink. `Ok(true)` when created.
fn try_create(path: &Path, info: &str) -> Result<bool> {
    match std::os::unix::fs::symlink(info, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// Breaks `path` if it is still held by the stale `holder`, under `<path>.break`.
fn break_stale(path: &Path, holder: &str, info: &str) -> Result<()> {
    let mut break_name = path.as_os_str().to_owned();
    break_name.push(".break");
    let break_path = PathBuf::from(break_name);
    if !try_create(&break_path, info)? {
        // Someone else is breaking it (or a stale .break lock: break that one first).
        if let Some(b) = read_holder(&break_path)? {
            if is_stale(&b) {
                let _ = std::fs::remove_file(&break_path);
            }
        }
        return Ok(());
    }
    let breaker = Lock { path: break_path };
    if read_holder(path)?.as_deref() == Some(holder) {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(path, e)),
        }
    }
    drop(breaker);
    Ok(())
}

/// Takes the lock at `path`, waiting up to `timeout` for its holder to release it. A lock
/// left by a dead process of this host is broken; any other holder is waited for and then
/// named in the [`StoreError::LockHeld`] error.
pub fn acquire(path: &Path, timeout: Duration) -> Result<Lock> {
    let info = lock_info();
    let deadline = Instant::now() + timeout;
    loop {
        if try_create(path, &info)? {
            return Ok(Lock {
                path: path.to_owned(),
            });
        }
        let holder = read_holder(path)?;
        let Some(holder) = holder else {
            continue; // released between our attempt and the read
        };
        if is_stale(&holder) {
            tracing::warn!("breaking stale lock {} held by {holder}", path.display());
            break_stale(path, &holder, &info)?;
            continue;
        }
        if Instant::now() >= deadline {
            return Err(StoreError::LockHeld {
                path: path.to_owned(),
                holder,
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The working-directory lock and the store lock of one repository. Dropping releases the
/// store lock first, then the wlock.
#[derive(Debug)]
pub struct RepoLocks {
    // Field order is drop order: store lock first.
    lock: Lock,
    wlock: Lock,
}

impl RepoLocks {
    /// Takes `.hg/wlock`, then `.hg/store/lock`, each with hg's default timeout.
    pub fn acquire(repo: &Repo) -> Result<RepoLocks> {
        Self::acquire_with_timeout(repo, DEFAULT_TIMEOUT)
    }

    /// Takes `.hg/wlock`, then the store lock, waiting at most `timeout` for each.
    pub fn acquire_with_timeout(repo: &Repo, timeout: Duration) -> Result<RepoLocks> {
        let wlock = acquire(&repo.dot_hg().join("wlock"), timeout)?;
        let lock = acquire(&repo.store_path().join("lock"), timeout)?;
        Ok(RepoLocks { lock, wlock })
    }

    pub fn wlock(&self) -> &Lock {
        &self.wlock
    }

    pub fn store_lock(&self) -> &Lock {
        &self.lock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_and_release() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        {
            let l = acquire(&p, Duration::from_millis(10)).unwrap();
            assert_eq!(
                std::fs::read_link(l.path()).unwrap().to_str().unwrap(),
                lock_info()
            );
            assert!(lock_info().contains(&format!(":{}", std::process::id())));
        }
        assert!(std::fs::symlink_metadata(&p).is_err());
    }

    #[test]
    fn live_foreign_holder_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("wlock");
        // pid 1 is alive in every namespace; another host is never broken either.
        std::os::unix::fs::symlink(format!("{}:1", lock_prefix()), &p).unwrap();
        let err = acquire(&p, Duration::from_millis(250)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("held by"), "{msg}");
        assert!(msg.contains(&format!("{}:1", lock_prefix())), "{msg}");
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink("otherhost/1:999999", &p).unwrap();
        let err = acquire(&p, Duration::from_millis(150)).unwrap_err();
        assert!(err.to_string().contains("otherhost/1:999999"));
        // The foreign lock is untouched.
        assert_eq!(
            std::fs::read_link(&p).unwrap().to_str().unwrap(),
            "otherhost/1:999999"
        );
    }

    #[test]
    fn stale_same_host_lock_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        // A pid above the kernel's pid_max cannot be alive.
        std::os::unix::fs::symlink(format!("{}:2147483640", lock_prefix()), &p).unwrap();
        let l = acquire(&p, Duration::from_millis(100)).unwrap();
        assert_eq!(
            std::fs::read_link(l.path()).unwrap().to_str().unwrap(),
            lock_info()
        );
        let mut b = p.as_os_str().to_owned();
        b.push(".break");
        assert!(std::fs::symlink_metadata(PathBuf::from(b)).is_err());
    }
}
