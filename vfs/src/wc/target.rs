//! What a manifest has at a path ([`Target`]): a file, a directory of files, or nothing.
//! Asked by status and tracking of the base, and by checkout of the new parent.

use super::Result;
use revfs_store::manifest::{FileFlag, Manifest};
use revfs_store::Node;

/// What a manifest (a new parent's, or the base) has at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Absent,
    Dir,
    File(Node, FileFlag),
}

pub fn target_at(m: &Manifest, path: &[u8]) -> Result<Target> {
    if path.is_empty() {
        return Ok(Target::Dir);
    }
    Ok(match m.at(path)? {
        Ok(e) => Target::File(e.node, e.flag),
        Err(true) => Target::Dir,
        Err(false) => Target::Absent,
    })
}
