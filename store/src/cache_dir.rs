//! Owns the making of our cache directories inside a repository's `.hg`
//! (`.hg/cache/revfs/...`): the missing directories are made one by one, and never `.hg`
//! itself, so a cache written late (a mount's last save) into a repository that was removed
//! meanwhile fails instead of bringing back an empty shell of it.

use std::io;
use std::path::Path;

/// Creates `dir` and the missing directories above it, up to (not including) the
/// repository's `.hg`, which must exist.
pub(crate) fn create(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = dir;
    while !cur.is_dir() {
        if cur.file_name().is_some_and(|n| n == ".hg") {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is gone", cur.display()),
            ));
        }
        missing.push(cur);
        cur = match cur.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => break,
        };
    }
    for d in missing.iter().rev() {
        match std::fs::create_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_directories_are_made_below_hg_but_never_hg_itself() {
        let t = tempfile::tempdir().unwrap();
        let hg = t.path().join("repo/.hg");
        let dir = hg.join("cache/revfs/manifests");
        assert_eq!(create(&dir).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(!t.path().join("repo").exists());
        std::fs::create_dir_all(&hg).unwrap();
        create(&dir).unwrap();
        assert!(dir.is_dir());
        create(&dir).unwrap();
    }
}
