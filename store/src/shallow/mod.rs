//! History from a server: file revisions as Mercurial's remotefilelog keeps them, one
//! blob per (path, filenode), fetched from a server on first use instead of held in
//! filelogs. This module owns their format ([`blob`]: parsed once, at the edge, and
//! verified against the node before anything uses the text) and the shared cache hg's
//! client and revfs both read and write ([`cache`]). docs/research/remotefilelog-protocol.md
//! has the sources it rests on; docs/FORMATS.md describes what revfs writes.

pub mod blob;
pub mod cache;
pub mod pack;
pub mod source;

/// The requirement of a shallow repository (remotefilelog's `SHALLOWREPO_REQUIREMENT`).
pub const REQUIREMENT: &str = "exp-remotefilelog-repo-req-1";

/// Writes `bytes` to a new temporary file in `dir` (`.revfs-XXXXXX` then `suffix`), made
/// read-only as hg makes its blobs and packs, for the caller to rename into place. An error
/// names the file or directory it concerns.
pub(crate) fn write_read_only_temp(
    dir: &std::path::Path,
    suffix: &str,
    bytes: &[u8],
) -> Result<tempfile::TempPath, (std::path::PathBuf, std::io::Error)> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = tempfile::Builder::new()
        .prefix(".revfs-")
        .suffix(suffix)
        .tempfile_in(dir)
        .map_err(|e| (dir.to_owned(), e))?;
    let written = tmp.write_all(bytes).and_then(|()| {
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o444))
    });
    written.map_err(|e| (tmp.path().to_owned(), e))?;
    Ok(tmp.into_temp_path())
}

pub use blob::{Ancestor, Blob, ShallowError};
pub use cache::{CacheError, SharedCache};
pub use source::{Fetcher, ShallowSource};
