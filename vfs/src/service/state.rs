//! The state directory of one mount: where the daemon keeps what must outlive it.
//!
//! Layout (described in docs/FORMATS.md):
//! ```text
//! $REVFS_STATE_DIR (default $XDG_STATE_HOME/revfs, else ~/.local/state/revfs)
//!   mounts/<first 16 hex digits of sha1(canonical mountpoint)>/
//!     mount.json     format version, repository, mountpoint, revision, checkout time
//!     daemon.log     the daemon's log (tracing)
//!     control.sock   the daemon's control socket, while it runs
//!     daemon.pid     the daemon's process id, while it runs
//!     lock           flock'd by the daemon while it runs: one daemon per working copy
//!     journal        the change journal (its header names the working-copy parent)
//!     overlay/       content of changed files
//!     texts/         rebuilt texts of big store files (revfs_store::bigtext)
//! ```
//! `mount.json` is written atomically (temporary file, fsync, rename) and checked on open:
//! an unknown format version or a mismatched mountpoint is refused.

use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version of the `mount.json` format this code writes and reads.
pub const MOUNT_STATE_VERSION: u32 = 1;

/// Errors about a mount's state directory.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a valid mount state file: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{}: mount state format version {found} is not supported (this revfs reads version {MOUNT_STATE_VERSION})", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("cannot find a state directory: set REVFS_STATE_DIR or HOME")]
    NoStateRoot,
    #[error("{}: this working copy is in use by another revfs daemon{}", path.display(), holder.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    InUse { path: PathBuf, holder: Option<u32> },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The persistent description of a mount (`mount.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountState {
    pub version: u32,
    /// Repository root (the directory holding `.hg`).
    pub repo: PathBuf,
    /// Canonical mountpoint.
    pub mountpoint: PathBuf,
    /// The working-copy parent, 40 hex digits.
    pub node: String,
    /// When this working copy was last checked out (seconds since the epoch). Every file
    /// that comes unchanged from the store shows this as its mtime and ctime.
    pub checkout_time: i64,
}

/// The root under which every mount's state directory lives.
pub fn state_root() -> Result<PathBuf, StateError> {
    if let Some(dir) = std::env::var_os("REVFS_STATE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("revfs"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|h| PathBuf::from(h).join(".local/state/revfs"))
        .ok_or(StateError::NoStateRoot)
}

/// The state directory of one mountpoint.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// The state directory for a canonical mountpoint (not created).
    pub fn for_mountpoint(mountpoint: &Path) -> Result<StateDir, StateError> {
        use std::os::unix::ffi::OsStrExt;
        let digest = Sha1::digest(mountpoint.as_os_str().as_bytes());
        let name = hex::encode(&digest[..8]);
        Ok(StateDir {
            dir: state_root()?.join("mounts").join(name),
        })
    }

    /// The state directory at a known path (e.g. read from a mount's `.revfs/state`).
    pub fn at(dir: PathBuf) -> StateDir {
        StateDir { dir }
    }

    /// Every existing state directory.
    pub fn all() -> Result<Vec<StateDir>, StateError> {
        let mounts = state_root()?.join("mounts");
        let entries = match std::fs::read_dir(&mounts) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&mounts)(e)),
        };
        let mut out: Vec<StateDir> = entries
            .flatten()
            .map(|e| StateDir { dir: e.path() })
            .filter(|s| s.state_file().exists())
            .collect();
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(out)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn create(&self) -> Result<(), StateError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io_err(&self.dir))
    }

    /// Takes the working copy's lock (an exclusive `flock` on `lock`, released when the
    /// returned file is closed or the process dies): only one daemon serves a working copy.
    pub fn lock(&self) -> Result<std::fs::File, StateError> {
        use std::os::unix::io::AsRawFd;
        let path = self.dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let holder = std::fs::read_to_string(self.pid_file())
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                return Err(StateError::InUse {
                    path: self.dir.clone(),
                    holder,
                });
            }
            return Err(io_err(&path)(e));
        }
        Ok(file)
    }

    /// Whether a daemon holds this working copy's lock now (a daemon that is still ending
    /// holds it until its last thread is gone, after its pid already looks dead).
    pub fn is_locked(&self) -> bool {
        use std::os::unix::io::AsRawFd;
        let Ok(file) = std::fs::File::open(self.dir.join("lock")) else {
            return false;
        };
        // SAFETY: flock on a descriptor we own; the lock (if taken) goes with it.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
    }

    pub fn state_file(&self) -> PathBuf {
        self.dir.join("mount.json")
    }
    pub fn log_file(&self) -> PathBuf {
        self.dir.join("daemon.log")
    }
    pub fn socket(&self) -> PathBuf {
        self.dir.join("control.sock")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("daemon.pid")
    }
    pub fn journal_file(&self) -> PathBuf {
        self.dir.join("journal")
    }

    /// The working-copy parent named by the journal, which is the authority on it (commit
    /// and update rename a new journal into place before `mount.json` follows).
    pub fn journal_parent(&self) -> Result<Option<revfs_store::Node>, StateError> {
        crate::wc::journal::Journal::peek_base(&self.journal_file()).map_err(|e| {
            StateError::Corrupt {
                path: self.journal_file(),
                reason: e.to_string(),
            }
        })
    }

    /// Reads and checks `mount.json`; `Ok(None)` when there is none.
    pub fn load(&self) -> Result<Option<MountState>, StateError> {
        let path = self.state_file();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        let corrupt = |e: serde_json::Error| StateError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        };
        let v: VersionOnly = serde_json::from_slice(&bytes).map_err(corrupt)?;
        if v.version != MOUNT_STATE_VERSION {
            return Err(StateError::Version {
                path,
                found: v.version,
            });
        }
        let state: MountState = serde_json::from_slice(&bytes).map_err(corrupt)?;
        if state.node.len() != 40 || !state.node.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StateError::Corrupt {
                path,
                reason: format!("bad node {:?}", state.node),
            });
        }
        Ok(Some(state))
    }

    /// Writes `mount.json` atomically and durably.
    pub fn save(&self, state: &MountState) -> Result<(), StateError> {
        self.create()?;
        let path = self.state_file();
        let tmp = self.dir.join("mount.json.tmp");
        let mut bytes = serde_json::to_vec_pretty(state).map_err(|e| StateError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        bytes.push(b'\n');
        write_durably(&tmp, &path, &bytes).map_err(|(p, source)| StateError::Io { path: p, source })
    }
}

/// Writes `bytes` to `path` atomically and durably: into `tmp` (beside it), fsync'd, renamed
/// over `path`, its directory synced. A failure names the file it was about.
pub(crate) fn write_durably(
    tmp: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<(), (PathBuf, std::io::Error)> {
    let at_tmp = |e| (tmp.to_owned(), e);
    let mut f = std::fs::File::create(tmp).map_err(at_tmp)?;
    f.write_all(bytes).map_err(at_tmp)?;
    f.sync_all().map_err(at_tmp)?;
    std::fs::rename(tmp, path).map_err(|e| (path.to_owned(), e))?;
    if let Some(Ok(d)) = path.parent().map(std::fs::File::open) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(dir: &Path) -> MountState {
        MountState {
            version: MOUNT_STATE_VERSION,
            repo: dir.join("repo"),
            mountpoint: dir.join("mnt"),
            node: "0123456789abcdef0123456789abcdef01234567".into(),
            checkout_time: 1_700_000_000,
        }
    }

    #[test]
    fn state_round_trips_and_versions_are_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let sd = StateDir {
            dir: tmp.path().join("m"),
        };
        assert_eq!(sd.load().unwrap(), None);
        let s = state(tmp.path());
        sd.save(&s).unwrap();
        assert_eq!(sd.load().unwrap(), Some(s));
        let text = std::fs::read_to_string(sd.state_file()).unwrap();
        std::fs::write(
            sd.state_file(),
            text.replace("\"version\": 1", "\"version\": 9"),
        )
        .unwrap();
        assert!(matches!(
            sd.load(),
            Err(StateError::Version { found: 9, .. })
        ));
        std::fs::write(sd.state_file(), "{garbage").unwrap();
        assert!(matches!(sd.load(), Err(StateError::Corrupt { .. })));
    }
}
