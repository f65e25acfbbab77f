//! Merges small packs into bigger ones. A program that reads a tree through a lazy mount
//! leaves a data pack and a history pack per batch fetched (512 revisions): a million files,
//! two thousand of each. hg's remotefilelog opens every pack at each command's start and
//! looks through them one by one: measured here, 2,000 small packs made `hg log -p -r tip`
//! 0.4 s -> 0.65-1.0 s and its memory 38 MB -> 484 MB.
//!
//! When no pack has been written for [`QUIET`] and there are at least [`MERGE_AT`] small
//! ones of a kind (fewer than [`SMALL`] entries), they are rewritten as packs of up to
//! [`TARGET_ENTRIES`] entries and [`TARGET_BYTES`] bytes, least recently used together, each
//! new pack in place (written whole, renamed) before the ones it replaces are removed: a
//! reader, revfs's or hg's, finds every revision at every moment. A data pack is merged only
//! if each of its revisions reads whole (a delta chain of `hg repack`'s resolved to its
//! fulltext); one that does not stays as it is. The merged pack keeps the newest access
//! time of its members, so that the eviction (cache.rs) does not take it sooner.

use super::data::{DataPack, DataPackBuilder};
use super::hist::{HistPack, HistPackBuilder};
use super::set::{Loaded, PackKind, PackSet};
use super::PackError;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A pack of fewer entries is small.
pub const SMALL: usize = 4096;
/// The fewest small packs of a kind worth a merge.
pub const MERGE_AT: usize = 16;
/// The most entries of a merged pack: under hg's `SMALLFANOUTCUTOFF` (8,192), past which
/// an index has a fanout of 65,536 slots, which hg reads into a Python list at each
/// command that opens the pack (about 2.4 MB a pack).
pub const TARGET_ENTRIES: usize = 8_191;
/// The most bytes of a merged pack (it is built in memory).
pub const TARGET_BYTES: u64 = 128 << 20;
/// How long without a pack written before a merge starts.
pub const QUIET: Duration = Duration::from_secs(3);

/// What a merge did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Merged {
    /// Packs read and removed.
    pub from: usize,
    /// Packs written.
    pub into: usize,
}

fn atime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).ok()?.accessed().ok()
}

/// Groups `small` (each with its entries, bytes and access time), least recently used
/// first, into runs within the targets; runs of one are left out.
fn groups<T>(
    mut small: Vec<(T, usize, u64, Option<SystemTime>)>,
) -> Vec<Vec<(T, Option<SystemTime>)>> {
    small.sort_by_key(|s| s.3);
    let mut out: Vec<Vec<(T, Option<SystemTime>)>> = Vec::new();
    let (mut entries, mut bytes) = (0usize, 0u64);
    let mut run = Vec::new();
    for (pack, n, size, at) in small {
        if !run.is_empty() && (entries + n > TARGET_ENTRIES || bytes + size > TARGET_BYTES) {
            out.push(std::mem::take(&mut run));
            (entries, bytes) = (0, 0);
        }
        entries += n;
        bytes += size;
        run.push((pack, at));
    }
    out.push(run);
    out.retain(|g| g.len() > 1);
    out
}

impl PackSet {
    /// A pack was written: a merge runs once no pack has been written for [`QUIET`] (in a
    /// thread of its own, which ends with the set).
    pub fn wrote(self: &Arc<Self>) {
        *self
            .idle
            .last_write
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.merge_when_quiet();
    }

    /// Merges small packs once no pack has been written for [`QUIET`] (at once if none
    /// has been yet), in a thread of its own.
    pub fn merge_when_quiet(self: &Arc<Self>) {
        if self.idle.waiting.swap(true, Ordering::SeqCst) {
            return;
        }
        let set = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("revfs-pack-merge".into())
            .spawn(move || loop {
                let Some(me) = set.upgrade() else { return };
                let since = me
                    .idle
                    .last_write
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .map_or(QUIET, |t| t.elapsed());
                if since >= QUIET {
                    me.idle.waiting.store(false, Ordering::SeqCst);
                    let t0 = Instant::now();
                    match me.merge_small() {
                        Ok(m) if m.from > 0 => tracing::info!(
                            from = m.from,
                            into = m.into,
                            elapsed = ?t0.elapsed(),
                            "small packs merged"
                        ),
                        Ok(_) => {}
                        Err(e) => tracing::warn!("merging small packs failed: {e}"),
                    }
                    return;
                }
                drop(me);
                std::thread::sleep(QUIET - since);
            });
        if spawned.is_err() {
            self.idle.waiting.store(false, Ordering::SeqCst);
        }
    }

    /// Merges the small packs of each kind when there are at least [`MERGE_AT`] of them.
    pub fn merge_small(&self) -> Result<Merged, PackError> {
        let _one = self.maintenance();
        let (data, hist) = self.loaded();
        let mut done = Merged::default();
        let small_data: Vec<_> = data
            .into_iter()
            .filter(|l| l.pack.len() < SMALL)
            .map(|l| {
                let (n, size, at) = (l.pack.len(), l.pack.disk_size(), atime(&l.pack.pack_path()));
                (l, n, size, at)
            })
            .collect();
        if small_data.len() >= MERGE_AT {
            for group in groups(small_data) {
                let m = self.merge_data(&group)?;
                done.from += m.from;
                done.into += m.into;
            }
        }
        let small_hist: Vec<_> = hist
            .into_iter()
            .map(|l| {
                let (n, size, at) = (l.pack.len(), l.pack.disk_size(), atime(&l.pack.pack_path()));
                (l, n, size, at)
            })
            .filter(|s| s.1 < SMALL)
            .collect();
        if small_hist.len() >= MERGE_AT {
            for group in groups(small_hist) {
                let m = self.merge_hist(&group)?;
                done.from += m.from;
                done.into += m.into;
            }
        }
        Ok(done)
    }

    /// One data pack of `group`'s revisions, then `group`'s packs removed.
    fn merge_data(
        &self,
        group: &[(Arc<Loaded<DataPack>>, Option<SystemTime>)],
    ) -> Result<Merged, PackError> {
        let room: u64 = group.iter().map(|(l, _)| l.pack.disk_size()).sum();
        let mut b = DataPackBuilder::with_capacity(usize::try_from(room).unwrap_or(0));
        let mut taken = Vec::new();
        // A data pack holds a node once: the name each node has in the merged pack. The
        // same revision at two paths (identical files added at once) may sit in two packs;
        // merged, one path's entry would go, and with it a revision the cache may have to
        // keep (cache.rs's kept revisions): such a pack stays as it is.
        let mut names: std::collections::HashMap<crate::node::Node, Vec<u8>> =
            std::collections::HashMap::new();
        for (l, at) in group {
            // Every revision whole, or the pack stays.
            let mut revs = Vec::with_capacity(l.pack.len());
            let whole = l.pack.entries().all(|e| {
                let Ok(e) = e else { return false };
                if names.get(&e.node).is_some_and(|n| n != e.name) {
                    return false;
                }
                match self.fulltext(l, e.name, &e.node) {
                    Ok(Some((text, flags))) => {
                        revs.push((e.name.to_vec(), e.node, text, flags));
                        true
                    }
                    _ => false,
                }
            });
            if !whole {
                continue;
            }
            for (name, node, text, flags) in revs {
                names.entry(node).or_insert_with(|| name.clone());
                let size = text.len() - crate::filelog::content_start(&text).unwrap_or(0);
                b.add(&name, &node, &text, size as u64, flags);
            }
            taken.push((l.pack.base().to_owned(), *at));
        }
        self.replace(PackKind::Data, b.finish(), &taken)
    }

    /// One history pack of `group`'s records, then `group`'s packs removed.
    fn merge_hist(
        &self,
        group: &[(Arc<Loaded<HistPack>>, Option<SystemTime>)],
    ) -> Result<Merged, PackError> {
        let mut b = HistPackBuilder::new();
        let mut taken = Vec::new();
        for (l, at) in group {
            let Ok(sections) = l.pack.sections() else {
                continue;
            };
            for (file, recs) in &sections {
                for r in recs {
                    b.add_record(file, r);
                }
            }
            taken.push((l.pack.base().to_owned(), *at));
        }
        self.replace(PackKind::Hist, b.finish(), &taken)
    }

    /// Puts the merged pack (`bytes`: pack and index) in place, loads it, gives it the
    /// newest access time of `taken`, then removes `taken`'s packs.
    fn replace(
        &self,
        kind: PackKind,
        bytes: (Vec<u8>, Vec<u8>),
        taken: &[(PathBuf, Option<SystemTime>)],
    ) -> Result<Merged, PackError> {
        if taken.len() < 2 {
            return Ok(Merged::default());
        }
        let suffixes = match kind {
            PackKind::Data => (super::data::PACK_SUFFIX, super::data::INDEX_SUFFIX),
            PackKind::Hist => (super::hist::PACK_SUFFIX, super::hist::INDEX_SUFFIX),
        };
        let base = super::install(self.dir(), &bytes.0, &bytes.1, suffixes)?;
        self.adopt(kind, &base)?;
        if let Some(newest) = taken.iter().filter_map(|t| t.1).max() {
            let pack = PathBuf::from(format!("{}{}", base.display(), suffixes.0));
            if let Ok(f) = std::fs::File::open(pack) {
                let _ = f.set_times(std::fs::FileTimes::new().set_accessed(newest));
            }
        }
        let mut gone = Vec::new();
        for (old, _) in taken {
            // The merged pack may be named as one of its members (the same index).
            if *old == base {
                continue;
            }
            match PackSet::unlink(kind, old) {
                Ok(()) => gone.push((kind, old.clone())),
                // Gone already (hg's repack, another mount's merge or eviction).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    gone.push((kind, old.clone()))
                }
                Err(e) => tracing::warn!("{}: not removed after a merge: {e}", old.display()),
            }
        }
        self.forget(&gone);
        Ok(Merged {
            from: gone.len(),
            into: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Node;
    use crate::shallow::blob::{Ancestor, Blob};

    fn blob(node: Node, parent: Node, text: &[u8]) -> Blob {
        Blob {
            text: text.to_vec(),
            flags: 0,
            ancestors: [
                Ancestor {
                    node,
                    p1: parent,
                    p2: Node::NULL,
                    linknode: Node([7; 20]),
                    copy_from: None,
                },
                Ancestor {
                    node: parent,
                    p1: Node::NULL,
                    p2: Node::NULL,
                    linknode: Node([7; 20]),
                    copy_from: None,
                },
            ]
            .into_iter()
            .filter(|a| !a.node.is_null())
            .collect(),
        }
    }

    fn packs_on_disk(dir: &Path, suffix: &str) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
            .count()
    }

    #[test]
    fn many_small_packs_become_few_with_every_blob_still_read_whole_and_few_stay_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let packs = dir.path().join("packs");
        let set = Arc::new(PackSet::new(packs.clone()));
        let node = |i: u32, j: u8| {
            let mut n = [j; 20];
            n[..4].copy_from_slice(&i.to_be_bytes());
            Node(n)
        };
        let batch = |k: u32| -> Vec<(Vec<u8>, Node, Blob)> {
            (0..8u32)
                .map(|i| {
                    let path = format!("d{k}/f{i}").into_bytes();
                    let (n, p) = (node(k * 100 + i, 1), node(k * 100 + i, 2));
                    let b = blob(n, if i % 2 == 0 { p } else { Node::NULL }, &path);
                    (path, n, b)
                })
                .collect()
        };
        let write = |k: u32| {
            let b = batch(k);
            let refs: Vec<(&[u8], Node, &Blob)> =
                b.iter().map(|(p, n, b)| (&p[..], *n, b)).collect();
            assert!(set.write(&refs).unwrap().is_empty());
        };
        let check = |set: &PackSet, upto: u32| {
            for k in 0..upto {
                for (p, n, b) in batch(k) {
                    let got = set.blob(&p, &n).unwrap().expect("in a pack");
                    assert_eq!(got.text, b.text);
                    assert_eq!(got.ancestors, b.ancestors);
                }
            }
        };
        // Fewer than MERGE_AT: nothing merged.
        for k in 0..(MERGE_AT as u32 - 1) {
            write(k);
        }
        assert_eq!(set.merge_small().unwrap(), Merged::default());
        assert_eq!(packs_on_disk(&packs, ".datapack"), MERGE_AT - 1);
        // MERGE_AT and more: one pack of each kind, every blob still whole, for this set
        // and for a new one that lists the directory (as hg would).
        for k in (MERGE_AT as u32 - 1)..40 {
            write(k);
        }
        let m = set.merge_small().unwrap();
        assert_eq!(m, Merged { from: 80, into: 2 });
        assert_eq!(packs_on_disk(&packs, ".datapack"), 1);
        assert_eq!(packs_on_disk(&packs, ".dataidx"), 1);
        assert_eq!(packs_on_disk(&packs, ".histpack"), 1);
        check(&set, 40);
        check(&PackSet::new(packs.clone()), 40);
        // Merged packs are not small enough to merge again with one more.
        write(40);
        assert_eq!(set.merge_small().unwrap(), Merged::default());
        check(&set, 41);
    }

    #[test]
    fn a_revision_at_two_paths_in_two_packs_keeps_both_paths_readable() {
        let dir = tempfile::tempdir().unwrap();
        let packs = dir.path().join("packs");
        let set = PackSet::new(packs.clone());
        // Names of one length: the two packs' indexes are alike (a name of their own each).
        let twin = Node([0xab; 20]);
        let b = blob(twin, Node::NULL, b"same\n");
        assert!(set.write(&[(b"one/twin", twin, &b)]).unwrap().is_empty());
        assert!(set.write(&[(b"two/twin", twin, &b)]).unwrap().is_empty());
        // Two packs, the second not in place of the first (an index's hash names a pack).
        assert_eq!(packs_on_disk(&packs, ".datapack"), 2);
        for path in [&b"one/twin"[..], b"two/twin"] {
            let fresh = PackSet::new(packs.clone());
            assert!(fresh.blob(path, &twin).unwrap().is_some());
        }
        for k in 0..MERGE_AT as u8 {
            let n = Node([k + 1; 20]);
            let b = blob(n, Node::NULL, b"x");
            assert!(set.write(&[(b"f", n, &b)]).unwrap().is_empty());
        }
        let m = set.merge_small().unwrap();
        // Every data pack but the second twin's merged (the history packs all).
        assert_eq!(m.into, 2);
        assert_eq!(packs_on_disk(&packs, ".datapack"), 2);
        for path in [&b"one/twin"[..], b"two/twin"] {
            assert_eq!(
                set.blob(path, &twin).unwrap().expect("kept").text,
                b"same\n"
            );
        }
    }

    #[test]
    fn a_merge_waits_for_quiet_after_the_last_write() {
        let dir = tempfile::tempdir().unwrap();
        let packs = dir.path().join("packs");
        let set = Arc::new(PackSet::new(packs.clone()));
        for k in 0..MERGE_AT as u8 {
            let n = Node([k + 1; 20]);
            let b = blob(n, Node::NULL, b"x");
            assert!(set.write(&[(b"f", n, &b)]).unwrap().is_empty());
            set.wrote();
        }
        assert_eq!(packs_on_disk(&packs, ".datapack"), MERGE_AT);
        let until = Instant::now() + QUIET * 10;
        while packs_on_disk(&packs, ".datapack") > 1 {
            assert!(Instant::now() < until, "no merge after {:?}", QUIET * 10);
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(set.contains(b"f", &Node([1; 20])));
    }
}
