//! The packs of one cache directory (`<cache>/packs`): which are there, the blobs in them,
//! and new ones. hg's `repack` may add and remove packs while revfs runs: a lookup that
//! misses looks at the directory again (at most every tenth of a second, as hg's
//! `REFRESHRATE`), and a pack removed stays readable through its mapping until the next
//! look drops it.
//!
//! A blob is read from packs only whole: its text (a fulltext, or a delta chain within the
//! packs), and the record of every revision in its ancestry. Anything less is "not in
//! packs", and the caller fetches it again.

use super::data::{self, DataPack};
use super::hist::{self, HistPack};
use super::PackError;
use crate::node::Node;
use crate::shallow::blob::{Ancestor, Blob};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How often a miss may look at the directory again (hg's `REFRESHRATE`).
const REFRESH: Duration = Duration::from_millis(100);
/// A pack's access time is set again after this long (eviction orders by it; a mapped
/// pack's reads do not set it).
const TOUCH_EVERY: i64 = 60;
/// The longest delta chain followed.
const MAX_CHAIN: usize = 10_000;

/// A loaded pack and when revfs last set its access time.
pub(super) struct Loaded<P> {
    pub(super) pack: P,
    touched: AtomicI64,
}

impl<P> Loaded<P> {
    fn new(pack: P) -> Arc<Self> {
        Arc::new(Loaded {
            pack,
            touched: AtomicI64::new(0),
        })
    }
}

#[derive(Default)]
struct Packs {
    data: Vec<Arc<Loaded<DataPack>>>,
    hist: Vec<Arc<Loaded<HistPack>>>,
    /// Which pack to ask first for a node: its first four bytes to a position in `data` and
    /// in `hist` of a pack holding a node that starts so. A prefix in neither map is in no
    /// pack loaded, so that a miss costs one probe, not a bisection of every pack (a walk
    /// asks for each file before it is fetched, with hundreds of packs loaded).
    data_at: PrefixMap,
    hist_at: PrefixMap,
    /// When the directory was last listed.
    listed: Option<Instant>,
}

type PrefixMap = HashMap<u32, u32, std::hash::BuildHasherDefault<PrefixHasher>>;

/// Hashes a node's prefix, already uniform (a SHA-1's bytes) by one multiplication.
#[derive(Default)]
struct PrefixHasher(u64);

impl std::hash::Hasher for PrefixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

fn prefix(node: &[u8]) -> u32 {
    node.first_chunk::<4>()
        .map_or(0, |p| u32::from_be_bytes(*p))
}

impl Packs {
    /// Adds the nodes of the packs from positions `data_from` and `hist_from` on to the maps.
    fn map_from(&mut self, data_from: usize, hist_from: usize) {
        for (i, l) in self.data.iter().enumerate().skip(data_from) {
            for n in l.pack.nodes() {
                self.data_at.entry(prefix(n)).or_insert(i as u32);
            }
        }
        for (i, l) in self.hist.iter().enumerate().skip(hist_from) {
            for n in l.pack.nodes() {
                self.hist_at.entry(prefix(n)).or_insert(i as u32);
            }
        }
    }

    /// Maps every pack's nodes anew (packs went, and positions moved).
    fn remap(&mut self) {
        self.data_at.clear();
        self.hist_at.clear();
        self.map_from(0, 0);
    }
}

/// One pack on disk, for the eviction.
#[derive(Debug, Clone)]
pub struct PackFile {
    /// The path without suffix.
    pub base: PathBuf,
    pub kind: PackKind,
    pub size: u64,
    /// The pack file's access time (seconds, nanoseconds).
    pub atime: (i64, i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PackKind {
    Data,
    Hist,
}

impl PackKind {
    fn suffixes(self) -> (&'static str, &'static str) {
        match self {
            PackKind::Data => (data::PACK_SUFFIX, data::INDEX_SUFFIX),
            PackKind::Hist => (hist::PACK_SUFFIX, hist::INDEX_SUFFIX),
        }
    }
}

/// The packs of a cache directory.
pub struct PackSet {
    dir: PathBuf,
    packs: RwLock<Packs>,
    /// Serializes listings, so that two misses do not open the same new packs twice.
    listing: Mutex<()>,
    /// Serializes the work that removes packs: merges ([`super::merge`]) and evictions.
    maintenance: Mutex<()>,
    /// When this process last wrote a pack, and whether a merge waits for quiet.
    pub(super) idle: Idle,
}

/// When the set last wrote a pack, and whether a merge waits for quiet (`merge.rs`).
#[derive(Default)]
pub(super) struct Idle {
    pub(super) last_write: std::sync::Mutex<Option<std::time::Instant>>,
    pub(super) waiting: std::sync::atomic::AtomicBool,
}

/// The data and history packs loaded at one time.
pub(super) type LoadedPacks = (Vec<Arc<Loaded<DataPack>>>, Vec<Arc<Loaded<HistPack>>>);

impl PackSet {
    /// The packs in `dir` (which need not exist yet), listed on first use.
    pub fn new(dir: PathBuf) -> PackSet {
        PackSet {
            dir,
            packs: RwLock::new(Packs::default()),
            listing: Mutex::new(()),
            maintenance: Mutex::new(()),
            idle: Idle::default(),
        }
    }

    /// Held while packs are merged or evicted: one such job at a time.
    pub fn maintenance(&self) -> std::sync::MutexGuard<'_, ()> {
        self.maintenance.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The packs loaded now (after a listing), data and history.
    pub(super) fn loaded(&self) -> LoadedPacks {
        self.refresh(true);
        let p = self.read();
        (p.data.clone(), p.hist.clone())
    }

    /// Loads the pack at `base`, just put in place by this process.
    pub(super) fn adopt(&self, kind: PackKind, base: &Path) -> Result<(), PackError> {
        let _one = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        let mut p = self.write_lock();
        let from = (p.data.len(), p.hist.len());
        match kind {
            PackKind::Data => {
                let pack = DataPack::open(base)?;
                if !p.data.iter().any(|l| l.pack.base() == base) {
                    p.data.push(Loaded::new(pack));
                }
            }
            PackKind::Hist => {
                let pack = HistPack::open(base)?;
                if !p.hist.iter().any(|l| l.pack.base() == base) {
                    p.hist.push(Loaded::new(pack));
                }
            }
        }
        p.map_from(from.0, from.1);
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Packs> {
        self.packs.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_lock(&self) -> std::sync::RwLockWriteGuard<'_, Packs> {
        self.packs.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists the directory again if `force` or if it was not listed within [`REFRESH`]:
    /// packs gone are dropped, new ones opened (one that cannot be is skipped, with a
    /// warning, as hg skips it). Returns whether any pack was added.
    pub fn refresh(&self, force: bool) -> bool {
        let fresh = |p: &Packs| p.listed.is_some_and(|t| t.elapsed() < REFRESH);
        if !force && fresh(&self.read()) {
            return false;
        }
        let _one = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        if !force && fresh(&self.read()) {
            return false;
        }
        let (data_ids, hist_ids) = self.list();
        let (mut data, mut hist) = {
            let p = self.read();
            (p.data.clone(), p.hist.clone())
        };
        let before = (data.len(), hist.len());
        data.retain(|l| data_ids.contains(l.pack.base()));
        hist.retain(|l| hist_ids.contains(l.pack.base()));
        let kept = (data.len(), hist.len());
        let have_d: HashSet<PathBuf> = data.iter().map(|l| l.pack.base().to_owned()).collect();
        let have_h: HashSet<PathBuf> = hist.iter().map(|l| l.pack.base().to_owned()).collect();
        for base in data_ids.difference(&have_d) {
            match DataPack::open(base) {
                Ok(p) => data.push(Loaded::new(p)),
                Err(e) => warn_unloadable(&e),
            }
        }
        for base in hist_ids.difference(&have_h) {
            match HistPack::open(base) {
                Ok(p) => hist.push(Loaded::new(p)),
                Err(e) => warn_unloadable(&e),
            }
        }
        let added = data.len() > kept.0 || hist.len() > kept.1;
        let gone = kept != before;
        let mut next = Packs {
            data,
            hist,
            ..Packs::default()
        };
        // Packs went (positions moved): the maps are made anew, before the lock is taken.
        if gone {
            next.remap();
        }
        let mut p = self.write_lock();
        if gone {
            p.data_at = std::mem::take(&mut next.data_at);
            p.hist_at = std::mem::take(&mut next.hist_at);
        }
        p.data = next.data;
        p.hist = next.hist;
        if added && !gone {
            // Only packs added, after those kept: their nodes join the maps.
            p.map_from(kept.0, kept.1);
        }
        p.listed = Some(Instant::now());
        added
    }

    /// The bases of the complete packs in the directory, data and history.
    fn list(&self) -> (HashSet<PathBuf>, HashSet<PathBuf>) {
        let mut seen: HashMap<(PathBuf, PackKind), u8> = HashMap::new();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                for kind in [PackKind::Data, PackKind::Hist] {
                    let (p, i) = kind.suffixes();
                    if let Some(id) = name.strip_suffix(p).or_else(|| name.strip_suffix(i)) {
                        *seen.entry((self.dir.join(id), kind)).or_default() += 1;
                    }
                }
            }
        }
        let (mut d, mut h) = (HashSet::new(), HashSet::new());
        for ((base, kind), n) in seen {
            if n == 2 {
                match kind {
                    PackKind::Data => d.insert(base),
                    PackKind::Hist => h.insert(base),
                };
            }
        }
        (d, h)
    }

    /// The data pack holding `node` as a revision of `path`, looking at the directory
    /// again on a miss.
    fn data_pack(&self, path: &[u8], node: &Node) -> Option<Arc<Loaded<DataPack>>> {
        if let Some(p) = self.data_pack_loaded(path, node) {
            return Some(p);
        }
        if self.refresh(false) {
            return self.data_pack_loaded(path, node);
        }
        None
    }

    fn data_pack_loaded(&self, path: &[u8], node: &Node) -> Option<Arc<Loaded<DataPack>>> {
        let p = self.read();
        let holds =
            |l: &Loaded<DataPack>| matches!(l.pack.entry(node), Ok(Some(e)) if e.name == path);
        let first = p.data.get(*p.data_at.get(&prefix(&node.0))? as usize)?;
        if holds(first) {
            return Some(first.clone());
        }
        // Another node with the same prefix, or the same node for another path: every pack.
        p.data.iter().find(|l| holds(l)).cloned()
    }

    /// Whether a data pack holds `path` at `node`.
    pub fn contains(&self, path: &[u8], node: &Node) -> bool {
        self.data_pack(path, node).is_some()
    }

    /// The record of `path` at `node` in any history pack.
    fn record(&self, path: &[u8], node: &Node) -> Result<Option<Ancestor>, PackError> {
        let found = {
            let p = self.read();
            let Some(&first) = p.hist_at.get(&prefix(&node.0)) else {
                return Ok(None);
            };
            let key: [u8; 20] = <sha1::Sha1 as sha1::Digest>::digest(path).into();
            let mut found = None;
            // The pack the map names, then (another node with the prefix, the node in
            // another file) every pack.
            let order = p.hist.get(first as usize).into_iter().chain(p.hist.iter());
            for l in order {
                if let Some(r) = l.pack.record_of(path, &key, node)? {
                    found = Some((r, l.clone()));
                    break;
                }
            }
            found
        };
        Ok(found.map(|(r, l)| {
            touch(&l, &l.pack.pack_path());
            r
        }))
    }

    /// The blob of `path` at `node`, unverified, if the packs hold it whole: its text and
    /// its ancestry's every record. A garbled pack is an error naming it.
    pub fn blob(&self, path: &[u8], node: &Node) -> Result<Option<Blob>, PackError> {
        let Some(loaded) = self.data_pack(path, node) else {
            return Ok(None);
        };
        touch(&loaded, &loaded.pack.pack_path());
        let Some((fulltext, flags)) = self.fulltext(&loaded, path, node)? else {
            return Ok(None);
        };
        // The ancestry: each record in its file's section, copies followed to the source.
        let mut ancestors = Vec::new();
        let mut seen = HashSet::new();
        let mut queue = std::collections::VecDeque::from([(path.to_vec(), *node)]);
        while let Some((file, n)) = queue.pop_front() {
            if !seen.insert(n) {
                continue;
            }
            let Some(rec) = self.record(&file, &n)? else {
                return Ok(None);
            };
            if !rec.p1.is_null() {
                let f = rec.copy_from.clone().unwrap_or_else(|| file.clone());
                queue.push_back((f, rec.p1));
            }
            if !rec.p2.is_null() {
                queue.push_back((file, rec.p2));
            }
            ancestors.push(rec);
        }
        // An unterminated block is left in the text: the hash check refuses it.
        let start = crate::filelog::content_start(&fulltext).unwrap_or(0);
        let text = match start {
            0 => fulltext,
            start => fulltext[start..].to_vec(),
        };
        Ok(Some(Blob {
            text,
            flags,
            ancestors,
        }))
    }

    /// The fulltext of `path` at `node` from `first` (which holds it), following deltas
    /// through the packs, and its revision flags. `None` when a base is in none.
    pub(super) fn fulltext(
        &self,
        first: &Arc<Loaded<DataPack>>,
        path: &[u8],
        node: &Node,
    ) -> Result<Option<(Vec<u8>, u16)>, PackError> {
        let mut deltas: Vec<Vec<u8>> = Vec::new();
        let (mut pack, mut n) = (first.clone(), *node);
        // The flags are the asked revision's (the chain's first entry).
        let mut own_flags = None;
        loop {
            let Some(e) = pack.pack.entry(&n)? else {
                return Ok(None);
            };
            own_flags.get_or_insert(e.flags);
            let delta = e.delta(pack.pack.base())?;
            if e.delta_base.is_null() {
                let mut text = delta;
                for d in deltas.iter().rev() {
                    text = crate::mpatch::apply(&text, d, text.len()).map_err(|err| {
                        PackError::malformed(
                            pack.pack.base(),
                            format!("a delta of {}: {err}", node.to_hex()),
                        )
                    })?;
                }
                return Ok(Some((text, own_flags.unwrap_or(0))));
            }
            deltas.push(delta);
            if deltas.len() > MAX_CHAIN {
                return Err(PackError::malformed(
                    pack.pack.base(),
                    "a delta chain without end",
                ));
            }
            n = e.delta_base;
            let next = if pack.pack.contains(&n) {
                Some(pack.clone())
            } else {
                self.data_pack(path, &n)
            };
            match next {
                Some(p) => pack = p,
                None => return Ok(None),
            }
        }
    }

    /// Writes one data pack and one history pack of `blobs` (verified, fetched for their
    /// paths) and loads them. Returns the blobs that could not go in (names past hg's
    /// limit), for the caller to store another way.
    pub fn write(&self, blobs: &[(&[u8], Node, &Blob)]) -> Result<Vec<usize>, PackError> {
        let room = blobs
            .iter()
            .map(|(path, _, b)| data::DataPackBuilder::entry_len(path.len(), b.raw_len()))
            .sum();
        let mut d = data::DataPackBuilder::with_capacity(room);
        let mut h = hist::HistPackBuilder::new();
        let mut left_out = Vec::new();
        for (i, (path, node, blob)) in blobs.iter().enumerate() {
            let fits = path.len() <= 0xffff
                && blob
                    .ancestors
                    .iter()
                    .all(|a| a.copy_from.as_ref().is_none_or(|c| c.len() <= 0xffff));
            if !fits {
                left_out.push(i);
                continue;
            }
            d.add(
                path,
                node,
                &blob.raw_text(),
                blob.text.len() as u64,
                blob.flags,
            );
            h.add_blob(path, blob);
        }
        if d.is_empty() {
            return Ok(left_out);
        }
        // Under the listing's lock: a listing that began before these packs were in place
        // would otherwise drop them from memory when it ends.
        let _one = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o775)
            .create(&self.dir)
            .map_err(|source| PackError::Io {
                path: self.dir.clone(),
                source,
            })?;
        let (hp, hi) = h.finish();
        let hist_base = super::install(&self.dir, &hp, &hi, PackKind::Hist.suffixes())?;
        let (dp, di) = d.finish();
        let data_base = super::install(&self.dir, &dp, &di, PackKind::Data.suffixes())?;
        let hist_pack = HistPack::open(&hist_base)?;
        let data_pack = DataPack::open(&data_base)?;
        let mut p = self.write_lock();
        let from = (p.data.len(), p.hist.len());
        if !p.hist.iter().any(|l| l.pack.base() == hist_base) {
            p.hist.push(Loaded::new(hist_pack));
        }
        if !p.data.iter().any(|l| l.pack.base() == data_base) {
            p.data.push(Loaded::new(data_pack));
        }
        p.map_from(from.0, from.1);
        Ok(left_out)
    }

    /// The packs on disk now, with their sizes and access times.
    pub fn files(&self) -> Vec<PackFile> {
        self.refresh(true);
        let p = self.read();
        let stat = |base: &Path, kind: PackKind, size: u64| {
            use std::os::unix::fs::MetadataExt;
            let pack = PathBuf::from(format!("{}{}", base.display(), kind.suffixes().0));
            let meta = std::fs::metadata(pack).ok()?;
            Some(PackFile {
                base: base.to_owned(),
                kind,
                size,
                atime: (meta.atime(), meta.atime_nsec()),
            })
        };
        let data = p
            .data
            .iter()
            .filter_map(|l| stat(l.pack.base(), PackKind::Data, l.pack.disk_size()));
        let hist = p
            .hist
            .iter()
            .filter_map(|l| stat(l.pack.base(), PackKind::Hist, l.pack.disk_size()));
        data.chain(hist).collect()
    }

    /// Removes a pack, its index first (so hg never lists half of it), and forgets it.
    pub fn remove(&self, file: &PackFile) -> std::io::Result<()> {
        Self::unlink(file.kind, &file.base)?;
        self.forget(&[(file.kind, file.base.clone())]);
        Ok(())
    }

    /// Removes a pack's files, its index first (so hg never lists half of it); the set
    /// still reads it until [`PackSet::forget`].
    pub fn unlink(kind: PackKind, base: &Path) -> std::io::Result<()> {
        let (p, i) = kind.suffixes();
        let with = |s: &str| PathBuf::from(format!("{}{s}", base.display()));
        std::fs::remove_file(with(i))?;
        let _ = std::fs::remove_file(with(p));
        Ok(())
    }

    /// Forgets packs removed from the disk: the maps are made once for all of them.
    pub fn forget(&self, gone: &[(PackKind, PathBuf)]) {
        if gone.is_empty() {
            return;
        }
        let (data, hist): (HashSet<&Path>, HashSet<&Path>) = (
            gone.iter()
                .filter(|g| g.0 == PackKind::Data)
                .map(|g| g.1.as_path())
                .collect(),
            gone.iter()
                .filter(|g| g.0 == PackKind::Hist)
                .map(|g| g.1.as_path())
                .collect(),
        );
        let _one = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        let mut packs = self.write_lock();
        packs.data.retain(|l| !data.contains(l.pack.base()));
        packs.hist.retain(|l| !hist.contains(l.pack.base()));
        packs.remap();
    }
}

fn warn_unloadable(e: &PackError) {
    match e {
        PackError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {}
        e => tracing::warn!("unable to load pack: {e}"),
    }
}

/// Sets `pack`'s access time now, at most once a minute per pack: the eviction's order.
fn touch<P>(l: &Loaded<P>, pack: &Path) {
    let now = std::time::SystemTime::now();
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if secs - l.touched.load(Ordering::Relaxed) < TOUCH_EVERY {
        return;
    }
    l.touched.store(secs, Ordering::Relaxed);
    if let Ok(f) = std::fs::File::open(pack) {
        let _ = f.set_times(std::fs::FileTimes::new().set_accessed(now));
    }
}

impl std::fmt::Debug for PackSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackSet")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(node: Node, text: &[u8]) -> Blob {
        Blob {
            text: text.to_vec(),
            flags: 0,
            ancestors: vec![Ancestor {
                node,
                p1: Node::NULL,
                p2: Node::NULL,
                linknode: Node([7; 20]),
                copy_from: None,
            }],
        }
    }

    #[test]
    fn every_packs_blobs_are_found_and_nothing_else_nodes_sharing_a_prefix_included() {
        let dir = tempfile::tempdir().unwrap();
        let set = PackSet::new(dir.path().join("packs"));
        // Three packs; `a` and `b` share their first four bytes and sit in different
        // packs, as do `b` and `c` (the same node under two paths).
        let node = |first: u8, last: u8| {
            let mut n = [first; 20];
            n[19] = last;
            Node(n)
        };
        let (a, b, c) = (node(1, 1), node(1, 2), node(9, 9));
        let batches: [&[(&[u8], Node)]; 3] = [
            &[(b"x/a", a), (b"y", node(2, 2))],
            &[(b"x/b", b), (b"z", node(3, 3))],
            &[(b"x/c", c), (b"x/c2", b)],
        ];
        for batch in batches {
            let blobs: Vec<Blob> = batch.iter().map(|(p, n)| blob(*n, p)).collect();
            let refs: Vec<(&[u8], Node, &Blob)> = batch
                .iter()
                .zip(&blobs)
                .map(|((p, n), b)| (*p, *n, b))
                .collect();
            assert!(set.write(&refs).unwrap().is_empty());
        }
        let check = |set: &PackSet| {
            for batch in batches {
                for (p, n) in batch {
                    let got = set.blob(p, n).unwrap().expect("in a pack");
                    assert_eq!(got.text, *p, "{}", String::from_utf8_lossy(p));
                    assert_eq!(got.ancestors[0].node, *n);
                }
            }
            assert!(!set.contains(b"x/a", &b));
            assert!(!set.contains(b"nowhere", &node(4, 4)));
            assert!(!set.contains(b"x/a", &node(1, 3)));
        };
        check(&set);
        // A new set lists the directory: the same answers from the maps it builds.
        let listed = PackSet::new(dir.path().join("packs"));
        check(&listed);
        // A pack removed: the maps are made again, the other packs' blobs still found.
        let gone = listed
            .files()
            .into_iter()
            .find(|f| {
                f.kind == PackKind::Data && {
                    let d = DataPack::open(&f.base).unwrap();
                    d.contains(&node(2, 2))
                }
            })
            .unwrap();
        listed.remove(&gone).unwrap();
        assert!(!listed.contains(b"y", &node(2, 2)));
        assert!(!listed.contains(b"x/a", &a));
        for (p, n) in [
            (&b"x/b"[..], b),
            (b"z", node(3, 3)),
            (b"x/c", c),
            (b"x/c2", b),
        ] {
            assert!(listed.blob(p, &n).unwrap().is_some());
        }
    }
}
