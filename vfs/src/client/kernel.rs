//! The kernel's side of revfs mounts, read without ever touching a mount: the mount table,
//! each mount's FUSE connection (`/sys/fs/fuse/connections/N`), its daemon process, and
//! paths resolved up to a mountpoint but never through one.
//!
//! A process that stats, opens or lists anything in a mount whose daemon is frozen waits
//! with it, and may not even be killable. So the commands find out whether a path is in a
//! mount, and which mount, from `/proc/self/mountinfo` and the state directory alone, and
//! ask the daemon (with a deadline) before anything looks inside.

use super::error::{ClientError, Result};
use crate::service::state::StateDir;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Where the kernel shows FUSE connections.
const FUSECTL: &str = "/sys/fs/fuse/connections";

pub use crate::fuse::mount_table::KernelMount;

/// The mounts the kernel knows of whose type is `fuse.revfs`.
pub fn revfs_mounts() -> Result<Vec<KernelMount>> {
    crate::fuse::mount_table::revfs_mounts()
        .map_err(ClientError::io("reading /proc/self/mountinfo"))
}

/// The mount whose mountpoint is `path` or the nearest ancestor of it (lexically).
pub fn containing<'a>(path: &Path, mounts: &'a [KernelMount]) -> Option<&'a KernelMount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mountpoint))
        .max_by_key(|m| m.mountpoint.as_os_str().len())
}

/// `path` made absolute with its symlinks resolved, except that nothing at or below a
/// revfs mountpoint is looked at: from there on the path is taken as written. The
/// current directory (already canonical) is never resolved again.
pub fn resolve(path: &Path, mounts: &[KernelMount]) -> std::io::Result<PathBuf> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let mut rest: std::collections::VecDeque<OsString> = abs
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut done = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = rest.pop_front() {
        if c == ".." {
            done.pop();
            continue;
        }
        let next = done.join(&c);
        if containing(&next, mounts).is_some() {
            done = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
                }
                let target = std::fs::read_link(&next)?;
                if target.is_absolute() {
                    done = PathBuf::from("/");
                }
                for (i, part) in target
                    .components()
                    .filter_map(|c| match c {
                        Component::Normal(s) => Some(s.to_owned()),
                        Component::ParentDir => Some("..".into()),
                        _ => None,
                    })
                    .enumerate()
                {
                    rest.insert(i, part);
                }
            }
            _ => done = next,
        }
    }
    Ok(done)
}

/// The absolute form of a mountpoint, never touching it (a dead or frozen mount cannot be
/// stat'ed): the path up to it resolved, the last component kept.
pub fn mountpoint_path(p: &Path) -> Result<PathBuf> {
    let mounts = revfs_mounts().unwrap_or_default();
    let abs = std::path::absolute(p)?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => Ok(resolve(parent, &mounts)
            .map_err(ClientError::io(parent))?
            .join(name)),
        _ => Ok(abs),
    }
}

/// True while process `pid` exists and has not exited (a zombie waiting for its parent to
/// reap it counts as exited).
/// Whether process `pid` is on its way out: killed, its threads still ending (one may be in
/// the middle of an fsync). Its state may still say running (`D`, `R`): the kernel's
/// PF_EXITING flag says it.
pub fn process_exiting(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // After the command name: state, ppid, pgrp, session, tty_nr, tpgid, flags.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(6))
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_EXITING != 0)
}

pub fn process_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z') | Some('X') | None)
}

/// The daemon of the mount at `mountpoint`: the pid its state directory records, if that
/// process is running and is a revfs daemon of this mountpoint (its command line ends with
/// it), so that a stale pid file never names another process.
pub fn daemon_pid(sd: &StateDir, mountpoint: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(sd.pid_file())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if pid <= 0 || !process_running(pid) {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .collect();
    let is_daemon = args.iter().any(|a| *a == b"--foreground")
        && args.last() == Some(&mountpoint.as_os_str().as_bytes());
    is_daemon.then_some(pid)
}

/// Requests of FUSE connection `conn` that wait for the daemon (`None`: not visible).
pub fn waiting_requests(conn: u32) -> Option<u64> {
    std::fs::read_to_string(format!("{FUSECTL}/{conn}/waiting"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Ends FUSE connection `conn`: every request waiting on it, and every later one, fails
/// with ENOTCONN at once. Mounts the FUSE control filesystem first when it is not.
pub fn abort_connection(conn: u32) -> std::io::Result<()> {
    let abort = PathBuf::from(format!("{FUSECTL}/{conn}/abort"));
    if !abort.exists() && Path::new(FUSECTL).is_dir() {
        // Only root can mount it; it is usually mounted at boot.
        let _ = std::process::Command::new("mount")
            .args(["-t", "fusectl", "none", FUSECTL])
            .stderr(std::process::Stdio::null())
            .status();
    }
    std::fs::write(&abort, b"1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containing_finds_the_mount_a_path_is_in() {
        let m = [
            KernelMount {
                mountpoint: "/tmp/a b/mnt".into(),
                source: "revfs:/src/repo".into(),
                conn: Some(63),
            },
            KernelMount {
                mountpoint: "/tmp/c".into(),
                source: "revfs:/r".into(),
                conn: Some(65),
            },
        ];
        assert_eq!(
            containing(Path::new("/tmp/a b/mnt/x/y"), &m).map(|k| k.conn),
            Some(Some(63))
        );
        assert!(containing(Path::new("/tmp/a b/mntx"), &m).is_none());
        assert!(containing(Path::new("/tmp/a b"), &m).is_none());
    }

    #[test]
    fn resolve_follows_symlinks_outside_mounts_and_stops_at_them() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(base.join("real/sub")).unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
        std::os::unix::fs::symlink("real/sub", base.join("rel")).unwrap();
        assert_eq!(
            resolve(&base.join("link/sub/../sub"), &[]).unwrap(),
            base.join("real/sub")
        );
        assert_eq!(
            resolve(&base.join("rel"), &[]).unwrap(),
            base.join("real/sub")
        );
        // Inside a mount (here a plain directory standing for one) nothing is looked at:
        // a symlink there stays as written.
        std::os::unix::fs::symlink("/nowhere", base.join("real/sub/l")).unwrap();
        let fake = [KernelMount {
            mountpoint: base.join("real"),
            source: "revfs:/r".into(),
            conn: None,
        }];
        assert_eq!(
            resolve(&base.join("link/sub/l"), &fake).unwrap(),
            base.join("real/sub/l")
        );
    }
}
