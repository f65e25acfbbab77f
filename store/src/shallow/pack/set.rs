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
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
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
struct Loaded<P> {
    pack: P,
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
    /// When the directory was last listed.
    listed: Option<Instant>,
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
    /// The data pack that answered last, tried first.
    last_data: AtomicUsize,
}

impl PackSet {
    /// The packs in `dir` (which need not exist yet), listed on first use.
    pub fn new(dir: PathBuf) -> PackSet {
        PackSet {
            dir,
            packs: RwLock::new(Packs::default()),
            listing: Mutex::new(()),
            last_data: AtomicUsize::new(0),
        }
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
        let mut p = self.write_lock();
        p.data = data;
        p.hist = hist;
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
        let n = p.data.len();
        let first = self.last_data.load(Ordering::Relaxed);
        for i in (0..n).map(|k| (first + k) % n.max(1)) {
            let l = &p.data[i];
            if let Ok(Some(e)) = l.pack.entry(node) {
                if e.name == path {
                    self.last_data.store(i, Ordering::Relaxed);
                    return Some(l.clone());
                }
            }
        }
        None
    }

    /// Whether a data pack holds `path` at `node`.
    pub fn contains(&self, path: &[u8], node: &Node) -> bool {
        self.data_pack(path, node).is_some()
    }

    /// The record of `path` at `node` in any history pack.
    fn record(&self, path: &[u8], node: &Node) -> Result<Option<Ancestor>, PackError> {
        let found = {
            let p = self.read();
            let mut found = None;
            for l in &p.hist {
                if let Some(r) = l.pack.record(path, node)? {
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
    fn fulltext(
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
        // Each entry: its text, name, two nodes and sizes, a zlib frame, the metadata.
        let room = blobs
            .iter()
            .map(|(path, _, b)| b.raw_len() + path.len() + 80)
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
        if !p.hist.iter().any(|l| l.pack.base() == hist_base) {
            p.hist.push(Loaded::new(hist_pack));
        }
        if !p.data.iter().any(|l| l.pack.base() == data_base) {
            p.data.push(Loaded::new(data_pack));
        }
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
        let (p, i) = file.kind.suffixes();
        let with = |s: &str| PathBuf::from(format!("{}{s}", file.base.display()));
        std::fs::remove_file(with(i))?;
        let _ = std::fs::remove_file(with(p));
        let mut packs = self.write_lock();
        match file.kind {
            PackKind::Data => packs.data.retain(|l| l.pack.base() != file.base),
            PackKind::Hist => packs.hist.retain(|l| l.pack.base() != file.base),
        }
        Ok(())
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
