//! The entries of a mount that are not the working copy's: the hidden control directory
//! `.revfs` at the root (symbolic links to the control socket, the repository and the
//! state directory) and `.hg` (a symbolic link to the hg share in the state directory).
//! Found by lookup, never listed, never created, removed or renamed by a request.

use crate::wc::ROOT_INO;
use fuser::{FileType, INodeNo};
use std::ffi::OsStr;
use std::path::PathBuf;

/// Name of the hidden control directory at the root.
pub const CONTROL_DIR: &str = ".revfs";
pub(super) const CONTROL_DIR_INO: u64 = 0xFFFF_FFFF_0000_0001;
pub(super) const CONTROL_LINKS: [(&str, u64); 3] = [
    ("socket", 0xFFFF_FFFF_0000_0002),
    ("repo", 0xFFFF_FFFF_0000_0003),
    ("state", 0xFFFF_FFFF_0000_0004),
];

/// The working copy's `.hg` at the root: a symbolic link (found by lookup, not listed) to
/// the hg share that the mount's state directory holds (docs/FORMATS.md), so that real hg
/// finds the working copy and its extension, and keeps its files off the mount.
pub const DOT_HG: &str = ".hg";
pub(super) const DOT_HG_INO: u64 = 0xFFFF_FFFF_0000_0005;

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
    pub(super) fn target(&self, ino: u64) -> Option<&PathBuf> {
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

/// Whether inode `ino` is the control directory or one of its links (or `.hg`).
pub(super) fn is_control(ino: u64) -> bool {
    ino >= CONTROL_DIR_INO
}

/// Names no request may create, remove or rename: those in the control directory,
/// and the control directory and `.hg` at the root.
pub(super) fn reserved(parent: INodeNo, name: &OsStr) -> bool {
    is_control(parent.0) || (parent.0 == ROOT_INO && (name == CONTROL_DIR || name == DOT_HG))
}

pub(super) fn control_entries() -> Vec<(u64, FileType, &'static str)> {
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
