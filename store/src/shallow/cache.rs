//! The shared cache of remotefilelog blobs, as Mercurial's remotefilelog client keeps it
//! (`remotefilelog.cachepath`, then `remotefilelog.reponame`): one loose file per file
//! revision, `<cache>/<sha1hex(path)[:2]>/<sha1hex(path)[2:]>/<hex filenode>`, holding the
//! decompressed blob (blob.rs), mode 0444 in directories 0775. What hg fetched, revfs reads;
//! what revfs fetched, hg reads. Packs (`packs/`, written by `hg repack`) are not read yet.
//!
//! Nothing enters the cache unverified: [`SharedCache::insert`] checks the blob's hash and
//! writes it whole (a temporary file renamed into place), so a cut download or a wrong
//! byte leaves nothing behind. A blob read back is verified again before its text is used:
//! hg's client checks only its name.

use super::blob::{Blob, ShallowError};
use crate::node::Node;
use sha1::{Digest, Sha1};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One repository's part of the shared cache: `<cachepath>/<reponame>`.
#[derive(Debug, Clone)]
pub struct SharedCache {
    root: PathBuf,
}

/// Why the cache could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Blob(#[from] ShallowError),
}

impl SharedCache {
    /// The cache of repository `reponame` under `cachepath` (an empty name: the cache's
    /// root, as hg's default).
    pub fn new(cachepath: &Path, reponame: &str) -> SharedCache {
        SharedCache {
            root: cachepath.join(reponame),
        }
    }

    /// Where the blob of `path` at `node` lives.
    pub fn blob_path(&self, path: &[u8], node: &Node) -> PathBuf {
        let key = hex::encode(Sha1::digest(path));
        self.root
            .join(&key[..2])
            .join(&key[2..])
            .join(node.to_hex())
    }

    /// The verified blob of `path` at `node`, if the cache has it. A cached blob that does
    /// not verify is an error naming it (it is not used, and not removed: hg's own check
    /// renames what it refuses).
    pub fn get(&self, path: &[u8], node: &Node) -> Result<Option<Blob>, CacheError> {
        let file = self.blob_path(path, node);
        let bytes = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(CacheError::Io {
                    path: file,
                    source: e,
                })
            }
        };
        Ok(Some(Blob::parse_verified(path, node, &bytes)?))
    }

    /// Verifies `bytes` (a decompressed blob fetched for `path` at `node`) and adds it to the
    /// cache as hg's client does: a temporary file in the blob's directory, made read-only
    /// and renamed into place. Returns the parsed blob.
    pub fn insert(&self, path: &[u8], node: &Node, bytes: &[u8]) -> Result<Blob, CacheError> {
        let blob = Blob::parse_verified(path, node, bytes)?;
        let file = self.blob_path(path, node);
        let dir = file.parent().unwrap_or(&self.root);
        let io = |p: &Path| {
            let p = p.to_owned();
            move |source| CacheError::Io { path: p, source }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o775)
            .create(dir)
            .map_err(io(dir))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".revfs-")
            .tempfile_in(dir)
            .map_err(io(dir))?;
        tmp.write_all(bytes).map_err(io(tmp.path()))?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o444))
            .map_err(io(tmp.path()))?;
        tmp.persist(&file).map_err(|e| CacheError::Io {
            path: file.clone(),
            source: e.error,
        })?;
        Ok(blob)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blob_path_is_hgs_cache_key() {
        // hg's shallowutil.getcachekey: sha1("a.txt") = cfc7b488...
        let c = SharedCache::new(Path::new("/c"), "master");
        let node = Node::from_hex(b"de31fbdef77265ac6f6641c23e4102853c9ac991").unwrap();
        assert_eq!(
            c.blob_path(b"a.txt", &node),
            Path::new(
                "/c/master/cf/c7b4885384957ae445bc14914d4588f607651c/de31fbdef77265ac6f6641c23e4102853c9ac991"
            )
        );
    }

    #[test]
    fn a_blob_that_does_not_verify_never_enters_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let c = SharedCache::new(dir.path(), "r");
        let node = Node::hash_revision(&Node::NULL, &Node::NULL, b"x\n");
        let mut bytes = b"2\0y\n".to_vec();
        bytes.extend_from_slice(&node.0);
        bytes.extend_from_slice(&[0; 60]);
        bytes.push(0);
        assert!(c.insert(b"f", &node, &bytes).is_err());
        assert!(!c.blob_path(b"f", &node).exists());
        assert_eq!(c.get(b"f", &node).unwrap(), None);
        bytes[2] = b'x';
        c.insert(b"f", &node, &bytes).unwrap();
        assert_eq!(c.get(b"f", &node).unwrap().unwrap().text, b"x\n");
        let mode = std::fs::metadata(c.blob_path(b"f", &node))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o444);
    }
}
