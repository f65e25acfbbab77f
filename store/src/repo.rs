//! An open repository: where its `.hg` and store are, its requirements, and access to the
//! changelog, the manifest log and filelogs through one shared text cache.

use crate::changelog::Changeset;
use crate::error::{Result, StoreError};
use crate::filelog::Filelog;
use crate::manifest::Manifest;
use crate::manifest_cache::{ManifestCache, PendingManifest};
use crate::node::{Node, Rev, NULL_REV};
use crate::pathenc::{encode_store_path, PathEncoding};
use crate::requirements::Requirements;
use crate::revlog::{Revlog, TextCache};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Tunables for an open repository.
#[derive(Debug, Clone, Copy)]
pub struct RepoOptions {
    /// Bytes of reconstructed revision texts kept in memory.
    pub text_cache_bytes: usize,
    /// Filelogs kept open at once.
    pub open_filelogs: usize,
    /// Bytes of memory the open filelogs may hold (indexes and data files read rather than
    /// mapped, node maps): past it the least recently used are closed.
    pub filelog_cache_bytes: usize,
    /// Bytes of rebuilt big texts kept on disk (a mount's [`crate::bigtext::BigTextCache`]).
    pub big_text_cache_bytes: u64,
    /// Bytes of full manifest texts kept in the repository's cache directory
    /// ([`crate::manifest_cache`]); 0 keeps none.
    pub manifest_cache_bytes: u64,
    /// Bytes of file sizes kept in the repository's cache directory
    /// ([`crate::size_cache`], 28 bytes a file revision); 0 keeps none.
    pub size_cache_bytes: u64,
}

impl RepoOptions {
    /// The built-in defaults: 64 MiB of texts in memory, 1024 open filelogs holding 16 MiB
    /// at most, 2 GiB of big texts on disk, 1 GiB of manifests on disk.
    pub const DEFAULT: RepoOptions = RepoOptions {
        text_cache_bytes: 64 << 20,
        open_filelogs: 1024,
        filelog_cache_bytes: 16 << 20,
        big_text_cache_bytes: 2 << 30,
        manifest_cache_bytes: 1 << 30,
        size_cache_bytes: 64 << 20,
    };

    /// Makes `options` what [`Repo::open`] uses in this process from now on. The mount
    /// daemon applies the user's configuration this way, so that every handle it opens (a
    /// fresh one after each commit and update too) gets the configured cache sizes.
    pub fn set_process_default(options: RepoOptions) {
        *PROCESS_DEFAULT.write().unwrap_or_else(|p| p.into_inner()) = options;
    }

    /// What [`Repo::open`] uses: [`RepoOptions::DEFAULT`] unless
    /// [`RepoOptions::set_process_default`] said otherwise.
    pub fn process_default() -> RepoOptions {
        *PROCESS_DEFAULT.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for RepoOptions {
    fn default() -> Self {
        RepoOptions::DEFAULT
    }
}

static PROCESS_DEFAULT: RwLock<RepoOptions> = RwLock::new(RepoOptions::DEFAULT);

/// File sizes kept by [`Repo::file_size`]: 32,768 entries, about 2 MiB.
const SIZE_CACHE_ENTRIES: NonZeroUsize = match NonZeroUsize::new(32 << 10) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

/// Opens revlogs of one store: encodes their paths and gives each a slot in the shared cache.
struct RevlogOpener {
    store: PathBuf,
    encoding: PathEncoding,
    cache: TextCache,
    next_cache_id: AtomicU32,
}

impl RevlogOpener {
    /// Whether the revlog `stem` has an index on disk.
    fn exists(&self, stem: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let mut unencoded = stem.to_vec();
        unencoded.extend_from_slice(b".i");
        let encoded = encode_store_path(&unencoded, self.encoding);
        self.store
            .join(std::ffi::OsStr::from_bytes(&encoded))
            .exists()
    }

    fn open(&self, stem: &[u8]) -> Result<Revlog> {
        self.open_index(stem, b".i")
    }

    /// Opens the revlog `stem` whose index is `stem` + `index_suffix` (`.i`, or `.i.a`: a
    /// changelog's pending index).
    fn open_index(&self, stem: &[u8], index_suffix: &[u8]) -> Result<Revlog> {
        use std::os::unix::ffi::OsStrExt;
        let path_of = |suffix: &[u8]| {
            let mut unencoded = Vec::with_capacity(stem.len() + suffix.len());
            unencoded.extend_from_slice(stem);
            unencoded.extend_from_slice(suffix);
            let encoded = encode_store_path(&unencoded, self.encoding);
            self.store.join(std::ffi::OsStr::from_bytes(&encoded))
        };
        let index = path_of(index_suffix);
        let name = format!("{}.i", String::from_utf8_lossy(stem));
        let id = self.next_cache_id.fetch_add(1, Ordering::Relaxed);
        Revlog::open_with_data(&index, || path_of(b".d"), name, self.cache.clone(), id)
    }
}

/// A Mercurial repository opened for reading.
pub struct Repo {
    root: PathBuf,
    dot_hg: PathBuf,
    requirements: Requirements,
    opener: RevlogOpener,
    changelog: Revlog,
    manifestlog: Revlog,
    filelogs: Mutex<OpenFilelogs>,
    /// File sizes by file node ([`Repo::file_size`]): a size the index does not give
    /// (a text with a metadata header, or one whose start a delta chain rewrites) costs
    /// decompressions that status would otherwise pay on every call.
    sizes: Mutex<LruCache<Node, u64>>,
    /// The size cache on disk: where and how big, and the cache once opened.
    size_cache_at: (PathBuf, u64),
    size_cache: std::sync::OnceLock<Option<Arc<crate::size_cache::SizeCache>>>,
    /// Opened with a transaction's pending changelog ([`Repo::open_pending`]): the revisions
    /// from this one on are not committed yet.
    pending_from: Option<usize>,
    /// Full manifest texts kept on disk, mapped instead of rebuilt.
    manifests: ManifestCache,
}

impl Repo {
    /// Opens the repository rooted at `root` (the directory holding `.hg`), with this
    /// process's default options ([`RepoOptions::process_default`]).
    pub fn open(root: &Path) -> Result<Repo> {
        Self::open_with(root, RepoOptions::process_default())
    }

    /// Finds the repository containing `start` (itself or an ancestor) and opens it.
    pub fn discover(start: &Path) -> Result<Repo> {
        let abs = std::path::absolute(start).map_err(|e| StoreError::io(start, e))?;
        for dir in abs.ancestors() {
            if dir.join(".hg").is_dir() {
                return Self::open(dir);
            }
        }
        Err(StoreError::NotARepository(abs))
    }

    /// Opens the repository rooted at `root` with explicit options.
    pub fn open_with(root: &Path, options: RepoOptions) -> Result<Repo> {
        Self::open_inner(root, options, true)
    }

    /// Opens the repository's layout (requirements, store, path encoding) without reading
    /// the changelog or the manifest log, which an interrupted transaction may have left
    /// half-written: for `recover`. Its changelog and manifest log look empty.
    pub fn open_for_recovery(root: &Path) -> Result<Repo> {
        Self::open_inner(root, RepoOptions::default(), false)
    }

    /// Opens the repository as hg's hooks see it during a transaction (`HG_PENDING`): the
    /// changelog's pending index (`00changelog.i.a`, written by the transaction's
    /// `writepending`) when there is one, so that its uncommitted changesets are found.
    /// The other revlogs are written in place during a transaction: they have them anyway.
    pub fn open_pending(root: &Path) -> Result<Repo> {
        Self::open_inner(root, RepoOptions::process_default(), true).and_then(|mut repo| {
            let pending = repo.opener.store.join("00changelog.i.a");
            if pending.exists() {
                let committed = repo.changelog.len();
                repo.changelog = repo.opener.open_index(b"00changelog", b".i.a")?;
                repo.pending_from = Some(committed);
            }
            Ok(repo)
        })
    }

    fn open_inner(root: &Path, options: RepoOptions, read_logs: bool) -> Result<Repo> {
        let root = std::path::absolute(root).map_err(|e| StoreError::io(root, e))?;
        let dot_hg = root.join(".hg");
        if !dot_hg.is_dir() {
            return Err(StoreError::NotARepository(root));
        }
        let working = Requirements::load_working(&dot_hg)?;
        let source_hg = if working.contains("shared") || working.contains("relshared") {
            let link = dot_hg.join("sharedpath");
            let target = std::fs::read(&link).map_err(|e| StoreError::io(&link, e))?;
            let target = PathBuf::from(
                String::from_utf8(target)
                    .map_err(|_| StoreError::Other(format!("{}: not UTF-8", link.display())))?
                    .trim_end_matches('\n'),
            );
            dot_hg.join(target)
        } else {
            dot_hg.clone()
        };
        if source_hg != dot_hg {
            share_safe_agrees(&working, &source_hg)?;
        }
        let store_probe = source_hg.join("store");
        let requirements = Requirements::load(&dot_hg, &store_probe)?;
        let store = if requirements.contains("store") {
            store_probe
        } else {
            source_hg.clone()
        };
        let opener = RevlogOpener {
            store,
            encoding: requirements.path_encoding(),
            cache: TextCache::new(options.text_cache_bytes),
            next_cache_id: AtomicU32::new(0),
        };
        let (changelog, manifestlog) = if read_logs {
            (opener.open(b"00changelog")?, opener.open(b"00manifest")?)
        } else {
            let none = |name: &str| {
                let missing = Path::new("/nonexistent/revfs-recovery");
                Revlog::open(
                    missing,
                    missing,
                    name.to_owned(),
                    opener.cache.clone(),
                    u32::MAX,
                )
            };
            (none("00changelog.i")?, none("00manifest.i")?)
        };
        let open_filelogs = NonZeroUsize::new(options.open_filelogs).unwrap_or(NonZeroUsize::MIN);
        Ok(Repo {
            root,
            dot_hg,
            requirements,
            opener,
            changelog,
            manifestlog,
            filelogs: Mutex::new(OpenFilelogs {
                lru: LruCache::new(open_filelogs),
                bytes: 0,
                budget: options.filelog_cache_bytes,
            }),
            sizes: Mutex::new(LruCache::new(SIZE_CACHE_ENTRIES)),
            pending_from: None,
            manifests: ManifestCache::new(
                crate::manifest_cache::cache_dir(&source_hg),
                options.manifest_cache_bytes,
            ),
            size_cache_at: (
                crate::size_cache::cache_path(&source_hg),
                options.size_cache_bytes,
            ),
            size_cache: std::sync::OnceLock::new(),
        })
    }

    /// Whether a strip (hg strip, rebase, histedit) rewrote the store since this handle
    /// was opened: its changelog's last entry is not where it was. Its revlogs may then
    /// number revisions differently from the files: reads through it can fail (never give
    /// another revision's bytes: `Revlog::rev_of`, `revlog/guarded_map.rs`), and a handle
    /// opened now reads them.
    pub fn stripped_since_open(&self) -> bool {
        self.changelog.rewritten_on_disk()
    }

    /// Whether this handle sees a transaction's uncommitted changesets.
    pub fn sees_pending(&self) -> bool {
        self.pending_from.is_some()
    }

    /// Whether file revision `node` of `path` was added by the transaction under way (its
    /// changeset is pending, so a rollback takes the revision away). Always false for an
    /// ordinary handle.
    pub fn is_pending_file(&self, path: &[u8], node: &Node) -> Result<bool> {
        let Some(from) = self.pending_from else {
            return Ok(false);
        };
        let fl = self.filelog(path)?;
        let link = fl.linkrev(fl.rev_of(node)?, self.changelog())?;
        Ok(link >= 0 && link as usize >= from)
    }

    /// Opens the revlog whose unencoded store path, without `.i`/`.d`, is `stem`
    /// (e.g. `data/a.txt`).
    pub fn open_revlog(&self, stem: &[u8]) -> Result<Revlog> {
        self.opener.open(stem)
    }

    /// The working directory root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `.hg` directory.
    pub fn dot_hg(&self) -> &Path {
        &self.dot_hg
    }

    /// The store directory (`.hg/store`, or the share source's).
    pub fn store_path(&self) -> &Path {
        &self.opener.store
    }

    pub fn requirements(&self) -> &Requirements {
        &self.requirements
    }

    pub fn changelog(&self) -> &Revlog {
        &self.changelog
    }

    pub fn manifestlog(&self) -> &Revlog {
        &self.manifestlog
    }

    /// The shared cache of reconstructed texts.
    pub fn text_cache(&self) -> &TextCache {
        &self.opener.cache
    }

    /// The parsed changeset of changelog revision `rev` (the null revision gives an empty one).
    pub fn changeset(&self, rev: Rev) -> Result<Changeset> {
        if rev == NULL_REV {
            return Ok(Changeset::default());
        }
        let text = self.changelog.revision(rev)?;
        Changeset::parse(&text, &self.changelog.node(rev)?)
    }

    /// The first lines of changeset `rev` (its manifest, user, date and extras, the branch
    /// among them), with no files and no description. A big changeset (a first one lists
    /// every file of the tree, megabytes of them) is read from the start of its text only,
    /// without rebuilding or hash-checking the rest; a small one, or a head that does not
    /// parse, is read whole and checked, so that damage is reported as the revlog's.
    pub fn changeset_head(&self, rev: Rev) -> Result<Changeset> {
        if rev == NULL_REV {
            return Ok(Changeset::default());
        }
        const PEEK: usize = 4096;
        let whole = || -> Result<Changeset> {
            let mut c = self.changeset(rev)?;
            c.files.clear();
            c.description.clear();
            Ok(c)
        };
        if self.changelog.raw_len(rev)?.unwrap_or(0) <= 16 * PEEK {
            return whole();
        }
        let prefix = self.changelog.text_prefix(rev, PEEK)?;
        let ends: Vec<usize> = memchr::memchr_iter(b'\n', &prefix).take(3).collect();
        match ends.get(2) {
            Some(&end) => {
                let mut head = prefix[..end].to_vec();
                head.extend_from_slice(b"\n\n");
                Changeset::parse(&head, &self.changelog.node(rev)?).or_else(|_| whole())
            }
            None => whole(),
        }
    }

    /// The manifest with the given node: mapped from the manifest cache when it is there
    /// (see [`Repo::keep_manifest`]), else rebuilt from the manifest log.
    pub fn manifest(&self, node: &Node) -> Result<Manifest> {
        if node.is_null() {
            return Ok(Manifest::empty());
        }
        let (rev, cached) = self.cached_manifest(node)?;
        match cached {
            Some(m) => Ok(m),
            None => Manifest::new(self.manifestlog.revision(rev)?, *node),
        }
    }

    /// The manifest with the given node for a working copy's base: mapped from the manifest
    /// cache, or, when it is not there, rebuilt straight into a new cache file and mapped
    /// from it ([`ManifestCache::rebuild`]), so that even a first mount at a revision never
    /// holds the whole text in memory. The new file is returned too: the caller keeps it
    /// ([`PendingManifest::keep_in_background`]). When the cache is off or cannot be
    /// written, the text is rebuilt in memory, as [`Repo::manifest`] does.
    pub fn kept_manifest(&self, node: &Node) -> Result<(Manifest, Option<PendingManifest>)> {
        if node.is_null() || !self.manifests.enabled() {
            return Ok((self.manifest(node)?, None));
        }
        let (rev, cached) = self.cached_manifest(node)?;
        if let Some(m) = cached {
            return Ok((m, None));
        }
        match self.manifests.rebuild(&self.manifestlog, rev, node) {
            Ok((m, pending)) => Ok((m, Some(pending))),
            Err(e) => {
                tracing::warn!("manifest cache: {e}: the manifest is rebuilt in memory");
                Ok((Manifest::new(self.manifestlog.revision(rev)?, *node)?, None))
            }
        }
    }

    /// The manifest log's revision of manifest `node`, and its text mapped from the
    /// manifest cache when it is there (a file that fails the checks is removed, with a
    /// warning).
    fn cached_manifest(&self, node: &Node) -> Result<(Rev, Option<Manifest>)> {
        let rev = self
            .manifestlog
            .rev_of(node)
            .ok_or_else(|| StoreError::UnknownNode {
                revlog: self.manifestlog.name().to_owned(),
                node: node.to_hex(),
            })?;
        let len = self.manifestlog.raw_len(rev)?;
        match self.manifests.open(node, len) {
            Ok(m) => Ok((rev, m)),
            Err(e) => {
                tracing::warn!("manifest cache: {e} (removed)");
                Ok((rev, None))
            }
        }
    }

    /// Adds `manifest` (one the caller trusts: rebuilt and hash-checked, or just committed)
    /// to the manifest cache and maps it from there; `None` when it cannot be kept.
    /// A mount keeps its base this way (in the background, [`Repo::manifest`] having given
    /// it from the manifest log): the next mount at that revision maps it. The cache failing
    /// (a read-only repository, a full disk) only costs that. A manifest mapped already is
    /// marked as used, so that eviction keeps it longer.
    pub fn keep_manifest(&self, manifest: &Manifest) -> Option<Manifest> {
        if manifest.text().is_mapped() {
            self.manifests.touch(&manifest.node());
            return None;
        }
        if !self.manifests.enabled() || manifest.node().is_null() {
            return None;
        }
        if let Err(e) = self.manifests.store(manifest) {
            tracing::warn!("manifest cache: {e}");
            return None;
        }
        match self
            .manifests
            .open(&manifest.node(), Some(manifest.text().len()))
        {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("manifest cache: {e} (removed)");
                None
            }
        }
    }

    /// Checks that the cached text of manifest `node` hashes to it (what the manifest log
    /// checks of every text it rebuilds); a file that does not is removed. `Ok(true)` when
    /// there is nothing to check.
    pub fn verify_cached_manifest(&self, node: &Node) -> Result<bool> {
        let Some(rev) = self.manifestlog.rev_of(node) else {
            return Ok(true);
        };
        let [p1, p2] = self.manifestlog.parents(rev)?;
        let (p1, p2) = (self.manifestlog.node(p1)?, self.manifestlog.node(p2)?);
        Ok(self.manifests.verify(node, &p1, &p2)?)
    }

    /// The manifest cache.
    pub fn manifest_cache(&self) -> &ManifestCache {
        &self.manifests
    }

    /// The manifest of changeset `node` (empty for the null node); `None` when the changelog
    /// does not have it, which each caller reports in its own words.
    pub fn manifest_at(&self, node: &Node) -> Result<Option<Manifest>> {
        match self.manifest_node_at(node)? {
            Some(m) => self.manifest(&m).map(Some),
            None => Ok(None),
        }
    }

    /// The manifest node of changeset `node` (null for the null node); `None` when the
    /// changelog does not have it.
    pub fn manifest_node_at(&self, node: &Node) -> Result<Option<Node>> {
        if node.is_null() {
            return Ok(Some(Node::NULL));
        }
        match self.changelog.rev_of(node) {
            Some(rev) => Ok(Some(self.changeset_head(rev)?.manifest)),
            None => Ok(None),
        }
    }

    /// The manifest of changelog revision `rev`.
    pub fn manifest_of(&self, rev: Rev) -> Result<Manifest> {
        self.manifest(&self.changeset_head(rev)?.manifest)
    }

    /// The content size of file revision `node` of `path` (metadata excluded), kept by node:
    /// a node names one text, whatever the path.
    pub fn file_size(&self, path: &[u8], node: &Node) -> Result<u64> {
        if let Some(size) = self.known_size(node) {
            return Ok(size);
        }
        let fl = self.filelog(path)?;
        let size = fl.size(fl.rev_of(node)?)?;
        if let Some(c) = self.size_cache() {
            c.put(*node, size);
        }
        self.remember_size(*node, size);
        Ok(size)
    }

    fn remember_size(&self, node: Node, size: u64) {
        self.sizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .put(node, size);
    }

    /// The repository's size cache on disk (opened at first use; `None` when off).
    fn size_cache(&self) -> Option<&Arc<crate::size_cache::SizeCache>> {
        self.size_cache
            .get_or_init(|| {
                let (path, limit) = &self.size_cache_at;
                crate::size_cache::SizeCache::shared(path.clone(), *limit)
            })
            .as_ref()
    }

    /// Writes the sizes learned since the size cache was last written (at the end of a
    /// mount).
    pub fn save_size_cache(&self) {
        if let Some(c) = self.size_cache.get().and_then(Option::as_ref) {
            c.save();
        }
    }

    /// The size of file revision `node` when [`Repo::file_size`] has it without opening
    /// its filelog: in memory, or in the size cache (then kept in memory too, so that the
    /// `file_size` that follows a lookup's early ask finds it there).
    pub fn known_size(&self, node: &Node) -> Option<u64> {
        let known = self
            .sizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .copied();
        if known.is_some() {
            return known;
        }
        let size = self.size_cache()?.get(node)?;
        self.remember_size(*node, size);
        Some(size)
    }

    /// Opens the filelog of `path` without keeping it open in the repository's set of open
    /// filelogs: for one-shot reads over many files.
    pub fn filelog_uncached(&self, path: &[u8]) -> Result<Filelog> {
        // A hostile manifest path must not lead the reader out of the store.
        crate::pathaudit::audit(path).map_err(|why| {
            StoreError::Other(format!(
                "unsafe path {:?} in manifest: {why}",
                String::from_utf8_lossy(path)
            ))
        })?;
        let mut stem = b"data/".to_vec();
        stem.extend_from_slice(path);
        // A shallow repository keeps filelogs only for what its clone excluded from
        // shallowness (`.hgtags`); every other file's revisions are blobs.
        if self.is_shallow() && !self.has_filelog(path) {
            return match crate::shallow::source::registered(self.store_path()) {
                Some(source) => Ok(Filelog::shallow(path.to_vec(), source)),
                None => Err(StoreError::NotFetched {
                    path: String::from_utf8_lossy(path).into_owned(),
                    node: String::new(),
                    reason: "this repository was cloned from a server, and this process \
                             has no access to it"
                        .into(),
                }),
            };
        }
        let mut revlog = self.open_revlog(&stem)?;
        if let Some(c) = self.size_cache() {
            revlog = revlog.with_checked_texts(Arc::new(CheckedInSizeCache(c.clone())));
        }
        Ok(Filelog::new(path.to_vec(), revlog))
    }

    /// The filelog tracking repository path `path` (it may be empty if never committed).
    pub fn filelog(&self, path: &[u8]) -> Result<Arc<Filelog>> {
        let mut cache = self.filelogs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((f, _)) = cache.lru.get(path) {
            return Ok(f.clone());
        }
        drop(cache);
        let filelog = Arc::new(self.filelog_uncached(path)?);
        cache = self.filelogs.lock().unwrap_or_else(|p| p.into_inner());
        cache.put(path.to_vec(), filelog.clone());
        Ok(filelog)
    }

    /// Whether this is a shallow repository (file revisions from a server: crate::shallow).
    pub fn is_shallow(&self) -> bool {
        self.requirements.contains(crate::shallow::REQUIREMENT)
    }

    /// Whether file revision `node` of `path` can be read without asking a server: always,
    /// but in a shallow repository for a revision neither it nor the cache holds.
    pub fn has_file_locally(&self, path: &[u8], node: &Node) -> bool {
        if !self.is_shallow() || self.has_filelog(path) {
            return true;
        }
        crate::shallow::source::registered(self.store_path())
            .is_some_and(|s| s.is_local(path, node))
    }

    /// Whether `path` has a filelog in the store (in a shallow repository: a file its
    /// clone kept out of shallowness, `.hgtags`).
    fn has_filelog(&self, path: &[u8]) -> bool {
        let mut stem = b"data/".to_vec();
        stem.extend_from_slice(path);
        self.opener.exists(&stem)
    }

    /// In a shallow repository, fetches those of the file revisions `keys` this machine
    /// lacks, in one request to the server (the source leaves out what it has); returns how
    /// many came. Elsewhere nothing to do.
    pub fn fetch_files(&self, keys: &[(&[u8], Node)]) -> Result<usize> {
        if !self.is_shallow() {
            return Ok(0);
        }
        let Some(source) = crate::shallow::source::registered(self.store_path()) else {
            return Ok(0);
        };
        let wanted: Vec<(&[u8], Node)> = keys
            .iter()
            .filter(|(p, _)| !self.has_filelog(p))
            .copied()
            .collect();
        source.fetch_many(&wanted)
    }

    /// (open filelogs, the bytes they hold) in the set of open filelogs.
    pub fn open_filelogs(&self) -> (usize, usize) {
        let cache = self.filelogs.lock().unwrap_or_else(|p| p.into_inner());
        (cache.lru.len(), cache.bytes)
    }
}

/// The filelogs a repository keeps open: at most a count of them (each may hold a map) and
/// a budget of the memory they hold, least recently used out first (the last one opened
/// always stays).
struct OpenFilelogs {
    lru: LruCache<Vec<u8>, (Arc<Filelog>, usize)>,
    bytes: usize,
    budget: usize,
}

impl OpenFilelogs {
    fn put(&mut self, path: Vec<u8>, filelog: Arc<Filelog>) {
        let size = filelog.heap_bytes();
        self.bytes += size;
        if let Some((_, (_, old))) = self.lru.push(path, (filelog, size)) {
            self.bytes -= old;
        }
        while self.bytes > self.budget && self.lru.len() > 1 {
            match self.lru.pop_lru() {
                Some((_, (_, old))) => self.bytes -= old,
                None => break,
            }
        }
    }
}

/// A filelog's texts checked against their node, remembered in the size cache with their
/// content size ([`crate::size_cache::SizeCache::put_checked`]).
struct CheckedInSizeCache(Arc<crate::size_cache::SizeCache>);

impl crate::revlog::CheckedTexts for CheckedInSizeCache {
    fn checked(&self, node: &Node, chunk_crc: u32) -> bool {
        self.0.checked_chunk(node) == Some(chunk_crc)
    }

    fn remember(&self, node: &Node, chunk_crc: u32, text: &[u8]) {
        if let Some(start) = crate::filelog::content_start(text) {
            self.0
                .put_checked(*node, (text.len() - start) as u64, chunk_crc);
        }
    }
}

/// hg's checks of a share against its source (`localrepo.makelocalrepository`): a
/// share-safe share needs a share-safe source, and a share-safe source a share-safe share.
fn share_safe_agrees(working: &Requirements, source_hg: &Path) -> Result<()> {
    let source = Requirements::load_working(source_hg)?;
    let message = match (working.contains("share-safe"), source.contains("share-safe")) {
        (true, false) => "share source does not support share-safe requirement",
        (false, true) => {
            "version mismatch: source uses share-safe functionality while the current share does not"
        }
        _ => return Ok(()),
    };
    Err(StoreError::ShareSafeMismatch {
        share_source: source_hg.to_owned(),
        message,
    })
}
