//! The parents recorded in a working copy's `.hg/dirstate` (dirstate-v1: the first 40 bytes).

use crate::error::{Result, StoreError};
use crate::node::Node;
use std::path::Path;

/// The working-directory parents, or `None` when there is no dirstate file.
pub fn parents(dot_hg: &Path) -> Result<Option<[Node; 2]>> {
    let path = dot_hg.join("dirstate");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    if bytes.is_empty() {
        return Ok(None);
    }
    let (Some(p1), Some(p2)) = (
        bytes.get(0..20).and_then(Node::from_slice),
        bytes.get(20..40).and_then(Node::from_slice),
    ) else {
        return Err(StoreError::Other(format!(
            "{}: working directory state appears damaged",
            path.display()
        )));
    };
    Ok(Some([p1, p2]))
}
