//! Redirections (`revfs redirect`): directories of a working copy that are bind mounts of
//! directories on local disk, for what must run at native speed (build outputs, package
//! caches), as EdenFS's `eden redirect` offers. What is written there never reaches the
//! daemon: status shows it only as ignored (`-i`), and the journal does not record it.
//!
//! Owns the list of a mount's redirections (`redirections.json` in its state directory,
//! docs/FORMATS.md), the directories that hold their files (`redirections/<16 hex>`), the
//! checks a new one must pass, and the binds themselves. The daemon decides and binds (it
//! checks a path against its working copy, and binds again at each mount); `revfs list`
//! and `revfs unmount` read the list.

use crate::wc::WorkingCopy;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Version of the `redirections.json` format this code writes and reads.
pub const REDIRECTIONS_VERSION: u32 = 1;

/// Why a redirection cannot be made, removed or read.
#[derive(Debug, thiserror::Error)]
pub enum RedirectError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a valid redirection list: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{}: redirection list format version {found} is not supported (this revfs reads version {REDIRECTIONS_VERSION})", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: {reason}")]
    BadPath { path: String, reason: &'static str },
    #[error("{path} {what}: a redirection would hide {}", if *what == "is tracked" { "it" } else { "them" })]
    Tracked { path: String, what: &'static str },
    #[error("{path} is in the redirection {redirection}: revfs does not track what is there")]
    Redirected { path: String, redirection: String },
    #[error("{path} is already a redirection")]
    Exists { path: String },
    #[error("{path} overlaps the redirection {other}")]
    Overlaps { path: String, other: String },
    #[error("{path} is not empty: move its files away first (a redirection would hide them)")]
    NotEmpty { path: String },
    #[error("{path}: {what} is in the way")]
    InTheWay { path: String, what: String },
    #[error("{path} is not a redirection")]
    NotARedirection { path: String },
    #[error("the redirection {path} is not empty (remove it with what it holds: --force)")]
    Holds { path: String },
    #[error("cannot bind-mount {}: {source}{}", path.display(), if source.raw_os_error() == Some(libc::EPERM) { " (a redirection is a bind mount: the daemon must run as root)" } else { "" })]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is busy: a process still has files open in it (close them, or use --force)", path.display())]
    Busy { path: PathBuf },
    #[error("cannot unmount {}: {source}", path.display())]
    Unbind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    WorkingCopy(#[from] crate::wc::WcError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RedirectError + '_ {
    move |source| RedirectError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `redirections.json`.
#[derive(Debug, Serialize, Deserialize)]
struct ListFile {
    version: u32,
    /// Repository paths, `/`-separated, sorted.
    redirections: Vec<String>,
}

/// The redirections of one mount, as its state directory keeps them.
#[derive(Debug, Clone)]
pub struct Redirections {
    state_dir: PathBuf,
}

impl Redirections {
    pub fn of(state_dir: &Path) -> Redirections {
        Redirections {
            state_dir: state_dir.to_owned(),
        }
    }

    fn file(&self) -> PathBuf {
        self.state_dir.join("redirections.json")
    }

    /// Where the files of redirection `path` live: named by a hash of the path, so that
    /// any repository path gives a plain file name.
    pub fn backing(&self, path: &str) -> PathBuf {
        let digest = Sha1::digest(path.as_bytes());
        self.state_dir
            .join("redirections")
            .join(hex::encode(&digest[..8]))
    }

    /// The redirections, sorted (none when there is no list).
    pub fn load(&self) -> Result<Vec<String>, RedirectError> {
        let path = self.file();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&path)(e)),
        };
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        let corrupt = |reason: String| RedirectError::Corrupt {
            path: path.clone(),
            reason,
        };
        let v: VersionOnly = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if v.version != REDIRECTIONS_VERSION {
            return Err(RedirectError::Version {
                path,
                found: v.version,
            });
        }
        let list: ListFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        let mut out = Vec::with_capacity(list.redirections.len());
        for p in list.redirections {
            let p = check_path(p.as_bytes()).map_err(|e| corrupt(e.to_string()))?;
            if let Some(other) = overlapping(&out, &p) {
                return Err(corrupt(format!("{p} overlaps {other}")));
            }
            out.push(p);
        }
        out.sort();
        Ok(out)
    }

    /// Writes the list atomically and durably.
    fn save(&self, paths: &[String]) -> Result<(), RedirectError> {
        let path = self.file();
        let tmp = self.state_dir.join("redirections.json.tmp");
        let mut sorted = paths.to_vec();
        sorted.sort();
        let list = ListFile {
            version: REDIRECTIONS_VERSION,
            redirections: sorted,
        };
        let mut bytes = serde_json::to_vec_pretty(&list).map_err(|e| RedirectError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        bytes.push(b'\n');
        crate::service::state::write_durably(&tmp, &path, &bytes)
            .map_err(|(path, source)| RedirectError::Io { path, source })
    }
}

/// A redirection's path as given (a repository path), checked: relative, normalized,
/// UTF-8 (the list is JSON text), and outside `.hg`.
pub fn check_path(path: &[u8]) -> Result<String, RedirectError> {
    let shown = String::from_utf8_lossy(path).into_owned();
    let bad = |reason| RedirectError::BadPath {
        path: shown.clone(),
        reason,
    };
    let Ok(text) = std::str::from_utf8(path) else {
        return Err(bad("a redirection's path must be UTF-8"));
    };
    if text.is_empty() {
        return Err(bad("the root of the working copy cannot be a redirection"));
    }
    if text.starts_with('/') || text.ends_with('/') {
        return Err(bad("not a path inside the working copy"));
    }
    for part in text.split('/') {
        match part {
            "" | "." | ".." => return Err(bad("not a normalized path")),
            ".hg" => return Err(bad("a redirection cannot be in .hg")),
            _ if part.contains('\0') => return Err(bad("not a path inside the working copy")),
            _ => {}
        }
    }
    Ok(text.to_owned())
}

/// Whether repository path `a` is `b` or inside it.
fn within(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) && a.get(b.len()).is_none_or(|&c| c == b'/')
}

/// The redirection of `list` that is `path`, or holds it, or is inside it.
pub fn overlapping<'a>(list: &'a [String], path: &str) -> Option<&'a String> {
    list.iter()
        .find(|o| within(path.as_bytes(), o.as_bytes()) || within(o.as_bytes(), path.as_bytes()))
}

/// A redirection's directory in the mount.
pub fn target(mountpoint: &Path, path: &str) -> PathBuf {
    mountpoint.join(path)
}

/// Whether the kernel has a mount at redirection `path` of the mount at `mountpoint`.
pub fn is_bound(bound: &[PathBuf], mountpoint: &Path, path: &str) -> bool {
    let t = target(mountpoint, path);
    bound.contains(&t)
}

/// The mounts inside the mount at `mountpoint` (empty when the table cannot be read).
pub fn bound_below(mountpoint: &Path) -> Vec<PathBuf> {
    crate::fuse::mount_table::mountpoints_below(mountpoint).unwrap_or_default()
}

/// Makes the directories of `path` in the mount as needed, through the mount (from a
/// thread that serves no filesystem request), and opens the last one (`O_PATH`): the bind
/// is made on that descriptor, so a component another user swaps for a symbolic link
/// meanwhile cannot send it elsewhere. Says whether it made the last directory. A symbolic
/// link or a file on the way is refused: the bind must land inside the mount, on a
/// directory.
fn make_target(mountpoint: &Path, path: &str) -> Result<(OwnedFd, bool), RedirectError> {
    let open = |dir: Option<&OwnedFd>, name: &std::ffi::CStr, follow: bool| {
        let flags = libc::O_PATH
            | libc::O_DIRECTORY
            | libc::O_CLOEXEC
            | if follow { 0 } else { libc::O_NOFOLLOW };
        let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
        // SAFETY: openat reads a NUL-terminated name; the descriptor returned is ours.
        let fd = unsafe { libc::openat(at, name.as_ptr(), flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened, owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let mut cur = open(None, &c_path(mountpoint)?, true).map_err(io_err(mountpoint))?;
    let mut at = mountpoint.to_path_buf();
    let mut made = false;
    for part in path.split('/') {
        at.push(part);
        let name = c_path(Path::new(part))?;
        made = false;
        let next = match open(Some(&cur), &name, false) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                // SAFETY: mkdirat reads a NUL-terminated name relative to a directory we hold.
                if unsafe { libc::mkdirat(cur.as_raw_fd(), name.as_ptr(), 0o777) } != 0 {
                    return Err(io_err(&at)(std::io::Error::last_os_error()));
                }
                made = true;
                open(Some(&cur), &name, false).map_err(io_err(&at))?
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                let link = std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
                let rel = at.strip_prefix(mountpoint).unwrap_or(&at);
                let what = if link { "a symbolic link" } else { "a file" };
                return Err(RedirectError::InTheWay {
                    path: path.to_owned(),
                    what: format!("{what} ({})", rel.display()),
                });
            }
            Err(e) => return Err(io_err(&at)(e)),
        };
        cur = next;
    }
    Ok((cur, made))
}

/// The path through which the kernel reaches what `fd` is open on.
fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn c_path(path: &Path) -> Result<std::ffi::CString, RedirectError> {
    std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| RedirectError::BadPath {
        path: path.display().to_string(),
        reason: "a path with a NUL byte",
    })
}

/// Bind-mounts `source` on `on` (a descriptor's path), which is redirection `target`.
fn bind(source: &Path, on: &Path, target: &Path) -> Result<(), RedirectError> {
    let (s, t) = (c_path(source)?, c_path(on)?);
    // SAFETY: mount(2) reads two NUL-terminated paths; the type and data may be null for a
    // bind.
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(RedirectError::Bind {
            path: target.to_owned(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Unmounts the bind at `target`: at once when nothing in it is open, else (`lazy`)
/// detached now and gone when the last file closes, or refused as busy.
fn unbind(target: &Path, lazy: bool) -> Result<(), RedirectError> {
    let t = c_path(target)?;
    let flags = libc::UMOUNT_NOFOLLOW | if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: umount2 reads a NUL-terminated path.
    if unsafe { libc::umount2(t.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let source = std::io::Error::last_os_error();
    match source.raw_os_error() {
        Some(libc::EBUSY) => Err(RedirectError::Busy {
            path: target.to_owned(),
        }),
        _ => Err(RedirectError::Unbind {
            path: target.to_owned(),
            source,
        }),
    }
}

/// `revfs redirect add`: `path` becomes a redirection of the mount at `mountpoint`, whose
/// working copy is `wc`. Refused on a tracked path (or a directory of tracked files), on
/// one that overlaps another redirection, and on a directory that is not empty.
pub fn add(
    reds: &Redirections,
    wc: &WorkingCopy,
    mountpoint: &Path,
    path: &[u8],
) -> Result<(), RedirectError> {
    let path = check_path(path)?;
    let mut list = reds.load()?;
    if list.contains(&path) {
        return Err(RedirectError::Exists { path });
    }
    if let Some(other) = overlapping(&list, &path) {
        return Err(RedirectError::Overlaps {
            path,
            other: other.clone(),
        });
    }
    if let Some(what) = tracked_at(wc, &path)? {
        return Err(RedirectError::Tracked { path, what });
    }
    let (dir, made) = make_target(mountpoint, &path)?;
    let target = target(mountpoint, &path);
    let mut entries = std::fs::read_dir(fd_path(&dir)).map_err(io_err(&target))?;
    if entries.next().is_some() {
        return Err(RedirectError::NotEmpty { path });
    }
    let backing = reds.backing(&path);
    std::fs::create_dir_all(&backing).map_err(io_err(&backing))?;
    if let Err(e) = bind(&backing, &fd_path(&dir), &target) {
        // Nothing left behind: the empty directories this made.
        let _ = std::fs::remove_dir(&backing);
        if made {
            let _ = std::fs::remove_dir(&target);
        }
        return Err(e);
    }
    list.push(path.clone());
    if let Err(e) = reds.save(&list) {
        let _ = unbind(&target, true);
        return Err(e);
    }
    tracing::info!(path = %path, backing = %backing.display(), "redirection added");
    Ok(())
}

/// What keeps `path` from being a redirection: a tracked file at it or below it (or a
/// removed one, which an update could bring back), as hg's dirstate has them.
fn tracked_at(wc: &WorkingCopy, path: &str) -> Result<Option<&'static str>, RedirectError> {
    let state = wc.path_states(&[path.as_bytes().to_vec()])?;
    let Some(s) = state.first() else {
        return Ok(None);
    };
    Ok(if s.p1 || s.wc {
        Some("is tracked")
    } else if s.dir {
        Some("holds tracked files")
    } else {
        None
    })
}

/// Refuses to track `paths` (add, copy) when one is in a redirection: its files never
/// reach the daemon, so a tracked one would only ever be missing.
pub fn refuse_tracking(reds: &Redirections, paths: &[&[u8]]) -> Result<(), RedirectError> {
    let list = reds.load()?;
    for p in paths {
        let found = list.iter().find(|r| within(p, r.as_bytes()));
        if let Some(r) = found {
            return Err(RedirectError::Redirected {
                path: String::from_utf8_lossy(p).into_owned(),
                redirection: r.clone(),
            });
        }
    }
    Ok(())
}

/// `revfs redirect remove`: unbinds redirection `path` and deletes its files (refused when
/// it holds any, unless `force`), and removes its now empty directory from the mount.
pub fn remove(
    reds: &Redirections,
    mountpoint: &Path,
    path: &[u8],
    force: bool,
) -> Result<(), RedirectError> {
    let path = check_path(path)?;
    let mut list = reds.load()?;
    let Some(at) = list.iter().position(|p| *p == path) else {
        return Err(RedirectError::NotARedirection { path });
    };
    let backing = reds.backing(&path);
    let holds = match std::fs::read_dir(&backing) {
        Ok(mut d) => d.next().is_some(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io_err(&backing)(e)),
    };
    if holds && !force {
        return Err(RedirectError::Holds { path });
    }
    let target = target(mountpoint, &path);
    if is_bound(&bound_below(mountpoint), mountpoint, &path) {
        unbind(&target, false)?;
    }
    list.remove(at);
    reds.save(&list)?;
    match std::fs::remove_dir_all(&backing) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(&backing)(e)),
    }
    // The directory the bind covered, empty since the redirection was made.
    let _ = std::fs::remove_dir(&target);
    tracing::info!(path = %path, "redirection removed");
    Ok(())
}

/// Binds every redirection not bound yet (at the daemon's start, and after an unmount
/// that could not finish): errors are logged, and the mount serves without the binds
/// that failed (`revfs redirect list` shows them as not bound).
pub fn bind_all(reds: &Redirections, mountpoint: &Path) {
    let list = match reds.load() {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("no redirection is bound: {e}");
            return;
        }
    };
    if list.is_empty() {
        return;
    }
    let bound = bound_below(mountpoint);
    for path in list {
        if is_bound(&bound, mountpoint, &path) {
            continue;
        }
        let backing = reds.backing(&path);
        let made = std::fs::create_dir_all(&backing)
            .map_err(io_err(&backing))
            .and_then(|()| make_target(mountpoint, &path))
            .and_then(|(dir, _)| bind(&backing, &fd_path(&dir), &target(mountpoint, &path)));
        match made {
            Ok(()) => tracing::info!(path = %path, "redirection bound"),
            Err(e) => tracing::error!(path = %path, "redirection not bound: {e}"),
        }
    }
}

/// Unbinds every bound redirection (before the mount itself is unmounted): the first that
/// is busy stops it (`lazy`: none is, each is detached). Returns the paths unbound, for
/// [`bind_all`] to bind again if the unmount does not go ahead.
pub fn unbind_all(
    reds: &Redirections,
    mountpoint: &Path,
    lazy: bool,
) -> Result<Vec<String>, RedirectError> {
    let bound = bound_below(mountpoint);
    let mut done = Vec::new();
    for path in reds.load()? {
        if !is_bound(&bound, mountpoint, &path) {
            continue;
        }
        unbind(&target(mountpoint, &path), lazy)?;
        done.push(path);
    }
    Ok(done)
}

/// What the redirections hold, as repository paths (unsorted): their files and symbolic
/// links, which status lists as ignored, and the directories below them (not their roots,
/// which are mountpoints), which hg's purge may remove once the files are gone. Read from
/// their directories on local disk, never through the mount.
pub fn contents(reds: &Redirections, list: &[String]) -> Result<Contents, RedirectError> {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    for path in list {
        let root = reds.backing(path);
        let mut stack = vec![(root, path.clone().into_bytes())];
        while let Some((dir, rel)) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&dir)(e)),
            };
            for entry in entries {
                let entry = entry.map_err(io_err(&dir))?;
                let kind = entry.file_type().map_err(io_err(&entry.path()))?;
                let mut child = rel.clone();
                child.push(b'/');
                child.extend_from_slice(entry.file_name().as_bytes());
                if kind.is_dir() {
                    dirs.push(child.clone());
                    stack.push((entry.path(), child));
                } else if kind.is_file() || kind.is_symlink() {
                    files.push(child);
                }
            }
        }
    }
    Ok(Contents { files, dirs })
}

/// What the redirections hold ([`contents`]).
#[derive(Debug, Default)]
pub struct Contents {
    /// Files and symbolic links.
    pub files: Vec<Vec<u8>>,
    /// Directories below the redirections' own.
    pub dirs: Vec<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked_and_overlaps_found() {
        assert_eq!(check_path(b"build/out").unwrap(), "build/out");
        for bad in [
            &b""[..],
            b"/abs",
            b"a/",
            b"a//b",
            b"./a",
            b"a/../b",
            b".hg",
            b"x/.hg/y",
            b"\xff",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        let list = vec!["build".to_owned(), "node_modules".to_owned()];
        assert_eq!(
            overlapping(&list, "build/x").map(String::as_str),
            Some("build")
        );
        assert_eq!(
            overlapping(&list, "node_modules").map(String::as_str),
            Some("node_modules")
        );
        assert_eq!(
            overlapping(&["a/b".to_owned()], "a").map(String::as_str),
            Some("a/b")
        );
        assert_eq!(overlapping(&list, "buildx"), None);
        assert_eq!(overlapping(&list, "node"), None);
    }

    #[test]
    fn the_list_round_trips_and_its_version_is_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let reds = Redirections::of(tmp.path());
        assert!(reds.load().unwrap().is_empty());
        reds.save(&["z".to_owned(), "a/b".to_owned()]).unwrap();
        assert_eq!(reds.load().unwrap(), ["a/b", "z"]);
        let text = std::fs::read_to_string(reds.file()).unwrap();
        std::fs::write(
            reds.file(),
            text.replace("\"version\": 1", "\"version\": 2"),
        )
        .unwrap();
        assert!(matches!(
            reds.load(),
            Err(RedirectError::Version { found: 2, .. })
        ));
        std::fs::write(
            reds.file(),
            "{\"version\":1,\"redirections\":[\"a\",\"a/b\"]}",
        )
        .unwrap();
        assert!(matches!(reds.load(), Err(RedirectError::Corrupt { .. })));
        std::fs::write(reds.file(), "{\"version\":1,\"redirections\":[\"../x\"]}").unwrap();
        assert!(matches!(reds.load(), Err(RedirectError::Corrupt { .. })));
        assert_ne!(reds.backing("a"), reds.backing("b"));
    }
}
