//! The shared cache of remotefilelog blobs, as Mercurial's remotefilelog client keeps it
//! (`remotefilelog.cachepath`, then `remotefilelog.reponame`): one loose file per file
//! revision, `<cache>/<sha1hex(path)[:2]>/<sha1hex(path)[2:]>/<hex filenode>`, holding the
//! decompressed blob (blob.rs), mode 0444 in directories 0775, and packs in `packs/`
//! (pack/): revfs writes a batch of [`PACK_MIN`] or more blobs as one data pack and one
//! history pack, and reads those and `hg repack`'s; hg's client reads packs first, then
//! loose blobs, and so does revfs. What hg fetched, revfs reads; what revfs fetched, hg reads.
//!
//! Nothing enters the cache unverified: [`SharedCache::insert`] checks the blob's hash and
//! writes it whole (a temporary file renamed into place), so a cut download or a wrong
//! byte leaves nothing behind. A blob read back is verified again before its text is used
//! (hg's client checks only its name), but for one the same process inserted
//! ([`SharedCache::get_written`]).
//!
//! The cache is bounded by [`SharedCache::evict`]: least recently used blobs and packs out
//! first, as hg's own `gc` orders them, by access time (which a read here sets, relatime or
//! not), never a blob the caller keeps (a kept one in a pack is written loose before its pack
//! goes). Only blobs and packs are removed: hg's temporary files and anything else stay.

use super::blob::{Blob, ShallowError};
use super::pack::{set::PackFile, PackError, PackSet};
use crate::node::Node;
use sha1::{Digest, Sha1};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// One repository's part of the shared cache: `<cachepath>/<reponame>`.
#[derive(Debug, Clone)]
pub struct SharedCache {
    root: PathBuf,
    /// `<root>/packs`, shared by every clone of this cache.
    packs: std::sync::Arc<PackSet>,
}

/// The fewest blobs [`SharedCache::insert_many`] writes as a pack (fewer go loose: a pack
/// per small batch would leave hg, which looks through its packs one by one, many to look
/// through).
pub const PACK_MIN: usize = 64;

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
    #[error(transparent)]
    Pack(#[from] PackError),
}

impl SharedCache {
    /// The cache of repository `reponame` under `cachepath` (an empty name: the cache's
    /// root, as hg's default).
    pub fn new(cachepath: &Path, reponame: &str) -> SharedCache {
        let root = cachepath.join(reponame);
        SharedCache {
            packs: std::sync::Arc::new(PackSet::new(root.join("packs"))),
            root,
        }
    }

    /// The cache's packs.
    pub fn packs(&self) -> &PackSet {
        &self.packs
    }

    /// Whether the cache holds `path` at `node`, in a pack or loose.
    pub fn contains(&self, path: &[u8], node: &Node) -> bool {
        self.blob_path(path, node).exists() || self.packs.contains(path, node)
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
        self.read(path, node, true)
    }

    /// [`SharedCache::get`] of a blob this process wrote with [`SharedCache::insert`],
    /// which verified it then: parsed, not hashed again.
    pub fn get_written(&self, path: &[u8], node: &Node) -> Result<Option<Blob>, CacheError> {
        self.read(path, node, false)
    }

    fn read(&self, path: &[u8], node: &Node, verify: bool) -> Result<Option<Blob>, CacheError> {
        use std::io::Read;
        if let Some(blob) = self.packs.blob(path, node)? {
            if verify {
                blob.verify(path, node)?;
            }
            return Ok(Some(blob));
        }
        let file = self.blob_path(path, node);
        let io = |source| CacheError::Io {
            path: file.clone(),
            source,
        };
        let mut f = match std::fs::File::open(&file) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).map_err(io)?;
        let blob = if verify {
            Blob::parse_verified(path, node, &bytes)?
        } else {
            Blob::parse(path, node, &bytes)?
        };
        // Used now: its access time orders the eviction (relatime would leave it at its
        // first read for a day). A blob hg wrote as another user keeps its time.
        let _ = f.set_times(std::fs::FileTimes::new().set_accessed(std::time::SystemTime::now()));
        Ok(Some(blob))
    }

    /// Verifies `bytes` (a decompressed blob fetched for `path` at `node`) and adds it to the
    /// cache as hg's client does: a temporary file in the blob's directory, made read-only
    /// and renamed into place. Returns the parsed blob.
    pub fn insert(&self, path: &[u8], node: &Node, bytes: &[u8]) -> Result<Blob, CacheError> {
        let blob = Blob::parse_verified(path, node, bytes)?;
        self.write_loose(path, node, bytes)?;
        Ok(blob)
    }

    /// Writes verified `bytes` as the loose blob of `path` at `node`.
    fn write_loose(&self, path: &[u8], node: &Node, bytes: &[u8]) -> Result<(), CacheError> {
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
        let tmp = super::write_read_only_temp(dir, "", bytes)
            .map_err(|(path, source)| CacheError::Io { path, source })?;
        tmp.persist(&file).map_err(|e| CacheError::Io {
            path: file.clone(),
            source: e.error,
        })?;
        Ok(())
    }

    /// [`SharedCache::insert`] of a batch: each blob verified, then, for [`PACK_MIN`] or
    /// more, one data pack and one history pack instead of a file each (loose if the packs
    /// cannot be written). Answers in the batch's order.
    pub fn insert_many(&self, batch: &[(&[u8], Node, &[u8])]) -> Vec<Result<Blob, CacheError>> {
        let parsed: Vec<Result<Blob, CacheError>> = batch
            .iter()
            .map(|(path, node, bytes)| Ok(Blob::parse_verified(path, node, bytes)?))
            .collect();
        let good: Vec<usize> = (0..batch.len()).filter(|&i| parsed[i].is_ok()).collect();
        let loose = if good.len() < PACK_MIN {
            good
        } else {
            let items: Vec<(&[u8], Node, &Blob)> = good
                .iter()
                .filter_map(|&i| Some((batch[i].0, batch[i].1, parsed[i].as_ref().ok()?)))
                .collect();
            match self.packs.write(&items) {
                Ok(left_out) => {
                    self.packs.wrote();
                    left_out.into_iter().map(|k| good[k]).collect()
                }
                Err(e) => {
                    tracing::warn!("fetched revisions go loose: a pack could not be written: {e}");
                    good
                }
            }
        };
        let mut out = parsed;
        for i in loose {
            let (path, node, bytes) = batch[i];
            if let Err(e) = self.write_loose(path, &node, bytes) {
                out[i] = Err(e);
            }
        }
        out
    }

    /// The cache's blobs with their sizes and access times (what [`SharedCache::evict`]
    /// orders). A directory that cannot be read is skipped.
    pub fn blobs(&self) -> Vec<CachedBlob> {
        let mut out = Vec::new();
        let level = |dir: &Path| -> Vec<std::fs::DirEntry> {
            std::fs::read_dir(dir).map_or_else(|_| Vec::new(), |e| e.flatten().collect())
        };
        for a in level(&self.root) {
            if !is_hex(&a.file_name(), 2) {
                continue;
            }
            for b in level(&a.path()) {
                if !is_hex(&b.file_name(), 38) {
                    continue;
                }
                for f in level(&b.path()) {
                    if !is_hex(&f.file_name(), 40) {
                        continue;
                    }
                    let Ok(meta) = f.metadata() else { continue };
                    if !meta.is_file() {
                        continue;
                    }
                    use std::os::unix::fs::MetadataExt;
                    out.push(CachedBlob {
                        path: f.path(),
                        size: meta.len(),
                        atime: (meta.atime(), meta.atime_nsec()),
                    });
                }
            }
        }
        out
    }

    /// When the cache holds more than `limit` bytes, removes the least recently used blobs
    /// and packs until it holds at most `target`, never a blob `keep` names: one in a pack
    /// is written loose before the first pack goes. Returns what was there (blobs and packs
    /// counted alike) and what was removed.
    pub fn evict(&self, limit: u64, target: u64, keep: &[(Vec<u8>, Node)]) -> Evicted {
        // No merge meanwhile (it removes packs too).
        let _one = self.packs.maintenance();
        enum Unit {
            Loose(CachedBlob),
            Pack(PackFile),
        }
        let mut units: Vec<(u64, (i64, i64), Unit)> = self
            .blobs()
            .into_iter()
            .map(|b| (b.size, b.atime, Unit::Loose(b)))
            .collect();
        units.extend(
            self.packs
                .files()
                .into_iter()
                .map(|p| (p.size, p.atime, Unit::Pack(p))),
        );
        let total: u64 = units.iter().map(|u| u.0).sum();
        let mut out = Evicted {
            blobs: units.len(),
            bytes: total,
            ..Evicted::default()
        };
        if total <= limit {
            return out;
        }
        let kept: std::collections::HashSet<PathBuf> =
            keep.iter().map(|(p, n)| self.blob_path(p, n)).collect();
        let mut rescued = false;
        // The set forgets the packs removed at the end, at once.
        let mut gone = Vec::new();
        units.sort_by_key(|u| u.1);
        let mut left = total;
        for (size, _, unit) in units {
            if left <= target {
                break;
            }
            let removed = match unit {
                Unit::Loose(b) if !kept.contains(&b.path) => {
                    let gone = std::fs::remove_file(&b.path).is_ok();
                    // The blob's directory goes with its last blob (hg's own gc leaves them;
                    // an empty one costs a lookup for nothing).
                    if let (true, Some(dir)) = (gone, b.path.parent()) {
                        let _ = std::fs::remove_dir(dir);
                    }
                    gone
                }
                Unit::Loose(_) => false,
                Unit::Pack(p) => {
                    if !std::mem::replace(&mut rescued, true) {
                        self.rescue(keep);
                    }
                    let removed = PackSet::unlink(p.kind, &p.base).is_ok();
                    if removed {
                        gone.push((p.kind, p.base));
                    }
                    removed
                }
            };
            // Not removed: kept, gone already (hg's gc, another mount), or not ours.
            if removed {
                left -= size;
                out.removed += 1;
                out.removed_bytes += size;
            }
        }
        self.packs.forget(&gone);
        out
    }

    /// Merges the cache's small packs once no pack has been written for a while
    /// (pack/merge.rs), in a thread of its own.
    pub fn merge_packs_when_quiet(&self) {
        self.packs.merge_when_quiet();
    }

    /// Writes loose each of `keep` that only a pack holds, so that removing packs keeps it.
    fn rescue(&self, keep: &[(Vec<u8>, Node)]) {
        for (path, node) in keep {
            if self.blob_path(path, node).exists() {
                continue;
            }
            match self.packs.blob(path, node) {
                Ok(Some(blob)) if blob.verify(path, node).is_ok() => {
                    if let Err(e) = self.write_loose(path, node, &blob.to_bytes()) {
                        tracing::warn!("a kept revision could not be written out of its pack: {e}");
                    }
                }
                _ => {}
            }
        }
    }
}

/// A blob in the cache, as [`SharedCache::blobs`] finds it.
#[derive(Debug, Clone)]
pub struct CachedBlob {
    pub path: PathBuf,
    pub size: u64,
    /// Access time (seconds, nanoseconds).
    pub atime: (i64, i64),
}

/// What [`SharedCache::evict`] found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evicted {
    pub blobs: usize,
    pub bytes: u64,
    pub removed: usize,
    pub removed_bytes: u64,
}

/// Whether `name` is `len` lowercase hex digits (a part of a blob's path).
fn is_hex(name: &std::ffi::OsStr, len: usize) -> bool {
    let b = name.as_encoded_bytes();
    b.len() == len && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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

    #[test]
    fn eviction_removes_the_least_recently_used_blobs_but_never_a_kept_one() {
        let dir = tempfile::tempdir().unwrap();
        let c = SharedCache::new(dir.path(), "r");
        let mut keys = Vec::new();
        for i in 0..6u8 {
            let text = vec![b'a' + i; 1000];
            let node = Node::hash_revision(&Node::NULL, &Node::NULL, &text);
            let mut bytes = format!("{}\0", text.len()).into_bytes();
            bytes.extend_from_slice(&text);
            bytes.extend_from_slice(&node.0);
            bytes.extend_from_slice(&[0; 60]);
            bytes.push(0);
            let path = format!("f{i}").into_bytes();
            c.insert(&path, &node, &bytes).unwrap();
            // Used i hours ago, in reverse: f5 oldest.
            let f = std::fs::File::open(c.blob_path(&path, &node)).unwrap();
            let when = std::time::SystemTime::now()
                - std::time::Duration::from_secs(3600 * (10 - i as u64));
            f.set_times(std::fs::FileTimes::new().set_accessed(when))
                .unwrap();
            keys.push((path, node));
        }
        let size = std::fs::metadata(c.blob_path(&keys[0].0, &keys[0].1))
            .unwrap()
            .len();
        // Reading f0 makes it the newest.
        assert!(c.get(&keys[0].0, &keys[0].1).unwrap().is_some());
        // Under the limit: nothing goes.
        let none = c.evict(6 * size, 0, &[]);
        assert_eq!((none.blobs, none.removed), (6, 0));
        // Over it: down to 3 blobs, f1 kept although it is the oldest after f0's read.
        let e = c.evict(5 * size, 3 * size, &[keys[1].clone()]);
        assert_eq!(
            (e.blobs, e.bytes, e.removed, e.removed_bytes),
            (6, 6 * size, 3, 3 * size)
        );
        let left: Vec<bool> = keys
            .iter()
            .map(|(p, n)| c.blob_path(p, n).exists())
            .collect();
        assert_eq!(left, [true, true, false, false, false, true]);
        // A removed blob's directory goes with it; what is not a blob stays.
        assert!(!c
            .blob_path(&keys[2].0, &keys[2].1)
            .parent()
            .unwrap()
            .exists());
        std::fs::write(dir.path().join("r/notes"), b"x").unwrap();
        c.evict(0, 0, &[]);
        assert!(dir.path().join("r/notes").exists());
        assert!(c.blobs().is_empty());
    }

    /// The loose bytes of `text` at `path`, with `parent` as p1 (null for none), `copy` as
    /// its copy source, and `more` records after its own.
    fn blob_bytes(
        text: &[u8],
        parent: Node,
        copy: &[u8],
        more: &[(Node, Node)],
    ) -> (Node, Vec<u8>) {
        let b = Blob {
            text: text.to_vec(),
            flags: 0,
            ancestors: vec![crate::shallow::Ancestor {
                node: Node::NULL,
                p1: parent,
                p2: Node::NULL,
                linknode: Node([0xaa; 20]),
                copy_from: (!copy.is_empty()).then(|| copy.to_vec()),
            }],
        };
        let (p1, p2) = b.revlog_parents();
        let node = Node::hash_revision(&p1, &p2, &b.raw_text());
        let mut b = b;
        b.ancestors[0].node = node;
        for (n, p) in more {
            b.ancestors.push(crate::shallow::Ancestor {
                node: *n,
                p1: *p,
                p2: Node::NULL,
                linknode: Node([0xaa; 20]),
                copy_from: None,
            });
        }
        (node, b.to_bytes())
    }

    #[test]
    fn a_big_batch_goes_into_packs_reads_back_verified_and_its_kept_blob_outlives_them() {
        let dir = tempfile::tempdir().unwrap();
        let c = SharedCache::new(dir.path(), "r");
        // src@s0 is copied to copy@c (its ancestry names src's record); the rest plain,
        // one of them starting like a metadata block.
        let (s0, src) = blob_bytes(b"source\n", Node::NULL, b"", &[]);
        let (cn, copy) = blob_bytes(b"copied\n", s0, b"src", &[(s0, Node::NULL)]);
        let mut batch: Vec<(Vec<u8>, Node, Vec<u8>)> =
            vec![(b"src".to_vec(), s0, src), (b"dir/copy".to_vec(), cn, copy)];
        for i in 0..PACK_MIN {
            let text = if i == 0 {
                b"\x01\nodd\n".to_vec()
            } else {
                format!("file {i}\n").into_bytes()
            };
            let (n, bytes) = blob_bytes(&text, Node::NULL, b"", &[]);
            batch.push((format!("d/f{i}").into_bytes(), n, bytes));
        }
        // One flipped byte: refused, the others stored.
        let mut bad = batch[5].2.clone();
        bad[3] ^= 1;
        batch.push((b"bad".to_vec(), batch[5].1, bad));
        let items: Vec<(&[u8], Node, &[u8])> =
            batch.iter().map(|(p, n, b)| (&p[..], *n, &b[..])).collect();
        let out = c.insert_many(&items);
        assert_eq!(out.iter().filter(|r| r.is_ok()).count(), batch.len() - 1);
        assert!(matches!(out.last(), Some(Err(CacheError::Blob(_)))));
        // Two packs (data, history), no loose blob.
        assert!(c.blobs().is_empty());
        let files = c.packs().files();
        assert_eq!(files.len(), 2);
        // A fresh cache on the same directory reads them all back, verified.
        let c2 = SharedCache::new(dir.path(), "r");
        for (p, n, bytes) in &batch[..batch.len() - 1] {
            let want = Blob::parse(p, n, bytes).unwrap();
            let got = c2.get(p, n).unwrap().unwrap();
            assert_eq!(got.text, want.text, "{}", String::from_utf8_lossy(p));
            assert_eq!(got.ancestors, want.ancestors);
            assert!(c2.contains(p, n));
        }
        assert!(c2.get(b"bad", &Node([1; 20])).unwrap().is_none());
        // Evicting everything but the copy: the packs go, the copy stays, loose.
        let e = c2.evict(0, 0, &[(b"dir/copy".to_vec(), cn)]);
        assert_eq!(e.removed, 2);
        assert!(c2.packs().files().is_empty());
        assert!(c2.blob_path(b"dir/copy", &cn).exists());
        assert_eq!(c2.get(b"dir/copy", &cn).unwrap().unwrap().text, b"copied\n");
        assert!(c2.get(b"src", &s0).unwrap().is_none());
    }
}
