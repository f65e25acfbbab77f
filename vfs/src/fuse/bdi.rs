//! The mount's backing device in the kernel (`/sys/class/bdi/0:N`, N its FUSE connection):
//! its read-ahead.
//!
//! The kernel caps a FUSE mount's read-ahead at the smaller of what the daemon asks in INIT
//! (`max_readahead`: [`READ_AHEAD`]) and its backing device's default, 128 KiB; only the
//! device's `read_ahead_kb` (root may write it) raises that cap. With the cap higher the
//! kernel's first read of a file asks for more of it at once when the program reads more
//! than a page (a `tar`: 64 KiB instead of 32 KiB), and later windows grow to 1 MiB
//! instead of 128 KiB, so fewer files need a second READ (docs/BENCHMARKS.md, "The mount's
//! read-ahead").

use crate::fuse::mount_table::revfs_mounts;
use std::io::{Error, ErrorKind};
use std::path::{Path, PathBuf};

/// The read-ahead the daemon asks for, in bytes (`max_readahead` in INIT, and the backing
/// device's `read_ahead_kb` here).
pub const READ_AHEAD: u32 = 1 << 20;

/// Where the backing device of the revfs mount at `mountpoint` (as the mount table names
/// it) keeps its read-ahead. Found from the mount table, so the mount need not serve yet.
pub fn read_ahead_file(mountpoint: &Path) -> std::io::Result<PathBuf> {
    // The last one: a mount over an earlier one on the same directory hides it.
    let conn = revfs_mounts()?
        .into_iter()
        .rev()
        .find(|m| m.mountpoint == mountpoint)
        .and_then(|m| m.conn)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("{} is not in the mount table", mountpoint.display()),
            )
        })?;
    Ok(read_ahead_path(conn))
}

/// Where the backing device of FUSE connection `conn` keeps its read-ahead: a FUSE
/// mount's device is anonymous, major 0 and its connection number as minor.
fn read_ahead_path(conn: u32) -> PathBuf {
    PathBuf::from(format!("/sys/class/bdi/0:{conn}/read_ahead_kb"))
}

/// The read-ahead of FUSE connection `conn`, in KiB.
pub fn read_ahead_kib(conn: u32) -> std::io::Result<u32> {
    read_kib(&read_ahead_path(conn))
}

fn read_kib(file: &Path) -> std::io::Result<u32> {
    let text = std::fs::read_to_string(file)?;
    text.trim().parse().map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("{}: {text:?}: {e}", file.display()),
        )
    })
}

/// Raises the read-ahead of the revfs mount at `mountpoint` to [`READ_AHEAD`] if it is
/// lower; never lowers it (an administrator may have set more). Returns the value now in
/// force, in KiB. Fails, changing nothing, where the file cannot be read or written (not
/// root, no sysfs).
pub fn raise_read_ahead(mountpoint: &Path) -> std::io::Result<u32> {
    let file = read_ahead_file(mountpoint)?;
    let now = read_kib(&file)?;
    let want = READ_AHEAD / 1024;
    if now >= want {
        return Ok(now);
    }
    std::fs::write(&file, want.to_string())?;
    Ok(want)
}
