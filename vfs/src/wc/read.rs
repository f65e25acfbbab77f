//! Reading a working copy: attributes, lookups, listings and file contents.

use super::*;
use crate::wc::content::{ReadBytes, StoreText};
use revfs_store::filelog::FileText;

/// The most file revisions one lookup asks a server for (its directory's).
const FETCH_BATCH: usize = 1000;

/// The size of revision `node` of `path`, under the working copy's lock: known already (by
/// node: the same text at another path counts), or from what this machine has. A file
/// revision that must come from a server (a repository cloned from one) is never waited
/// for under the lock: the callers that need one fetch it first, under no lock
/// (`size_ahead`, `readlink`), so this fails only when that fetch did, whose reason is in
/// the log.
fn size_here(inner: &Inner, path: &[u8], node: &Node) -> Result<u64> {
    if let Some(s) = inner.repo.known_size(node) {
        return Ok(s);
    }
    if inner.repo.has_file_locally(path, node) {
        return Ok(inner.repo.file_size(path, node)?);
    }
    Err(WcError::Store(revfs_store::StoreError::NotFetched {
        path: String::from_utf8_lossy(path).into_owned(),
        node: node.to_hex(),
        reason: "not fetched from the server (see the log for why)".into(),
    }))
}

impl WorkingCopy {
    // ----- reading -----

    pub(super) fn attr_of(&self, inner: &Inner, ino: u64) -> Result<Attr> {
        let e = inner.entry(ino)?;
        let mtime = e.mtime.unwrap_or(self.checkout_time);
        let ctime = e.ctime.unwrap_or(mtime);
        let mut blocks = None;
        let (kind, size, mtime) = match &e.kind {
            Kind::Dir { .. } => (EntryType::Dir, 4096, mtime),
            Kind::Symlink(LinkData::Local(t)) => (EntryType::Symlink, t.len() as u64, mtime),
            Kind::Special { kind, .. } => (EntryType::Special(*kind), 0, mtime),
            Kind::Symlink(LinkData::Store { path, node }) => {
                (EntryType::Symlink, size_here(inner, path, node)?, mtime)
            }
            Kind::File(FileData::Store { path, node, size }) => {
                let s = match size.get() {
                    Some(s) => *s,
                    None => {
                        let s = size_here(inner, path, node)?;
                        let _ = size.set(s);
                        s
                    }
                };
                (EntryType::File, s, mtime)
            }
            Kind::File(FileData::Overlay { id }) => {
                let meta = self.overlay.metadata(*id)?;
                blocks = Some(std::os::unix::fs::MetadataExt::blocks(&meta));
                (
                    EntryType::File,
                    meta.len(),
                    meta.modified().unwrap_or(mtime),
                )
            }
        };
        let rdev = match e.kind {
            Kind::Special { rdev, .. } => rdev,
            _ => 0,
        };
        let nlink = match &e.kind {
            // "." and the entry in the parent, and each subdirectory's "..".
            Kind::Dir { children, source } => {
                let subdirs = match (children, source) {
                    (Some(c), _) => c.subdirs() as usize,
                    // A manifest that cannot be listed fails the listing (which names
                    // it), not the attributes.
                    (None, Some(src)) => src.manifest.children(&src.path).map_or(0, |c| {
                        c.iter()
                            .filter(|c| matches!(c, revfs_store::manifest::Child::Dir { .. }))
                            .count()
                    }),
                    (None, None) => 0,
                };
                2 + subdirs as u32
            }
            // Each name of a file (hard links), none once unlinked.
            _ => e.nlink(),
        };
        Ok(Attr {
            ino,
            kind,
            size,
            // Counted as ext4 allocates: whole 4 KiB blocks.
            blocks: blocks.unwrap_or(size.div_ceil(4096) * 8),
            rdev,
            perm: (e.mode & 0o7777) as u16,
            atime: e.atime.unwrap_or(mtime),
            owner: e.owner,
            nlink,
            mtime,
            ctime: if kind == EntryType::File
                && matches!(e.kind, Kind::File(FileData::Overlay { .. }))
            {
                mtime.max(ctime)
            } else {
                ctime
            },
        })
    }

    /// The store revision `ino`'s content is, if it is a store file's.
    pub fn store_node(&self, ino: u64) -> Option<Node> {
        match &self.read().entry(ino).ok()?.kind {
            Kind::File(FileData::Store { node, .. }) => Some(*node),
            _ => None,
        }
    }

    /// Attributes of `ino`.
    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        self.attr_of(&self.read(), ino)
    }

    /// Looks up `name` in `parent`; a found entry gains one kernel reference.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Option<Attr>> {
        if name.len() > NAME_MAX {
            return Err(WcError::NameTooLong);
        }
        let fetched = self.size_ahead(parent, name);
        match self.lookup_locked(parent, name) {
            // A file that must come from a server, in a directory not listed yet: its
            // listing is there now, and the directory's files are fetched under no lock.
            Err(WcError::Store(StoreError::NotFetched { .. })) if !fetched => {
                self.size_ahead(parent, name);
                self.lookup_locked(parent, name)
            }
            r => r,
        }
    }

    fn lookup_locked(&self, parent: u64, name: &[u8]) -> Result<Option<Attr>> {
        let mut inner = self.write();
        let Some(ino) = inner.child(parent, name)? else {
            return Ok(None);
        };
        let attr = self.attr_of(&inner, ino)?;
        inner.entry_mut(ino)?.nlookup += 1;
        Ok(Some(attr))
    }

    /// Before a lookup of `name` in `parent`: when it names a store file whose size is
    /// not known yet, finds the size (opening its filelog) under no lock, so that the
    /// lookup's exclusive hold of the lock does no I/O and other requests go on meanwhile.
    /// In a repository cloned from a server, a file this machine lacks comes with every
    /// other file of its directory this machine lacks, in one request. Whether it asked a
    /// server.
    fn size_ahead(&self, parent: u64, name: &[u8]) -> bool {
        let (repo, target, walk) = {
            let inner = self.read();
            let Ok(Kind::Dir {
                children: Some(c), ..
            }) = inner.entry(parent).map(|e| &e.kind)
            else {
                return false;
            };
            // In a repository cloned from a server, the walk ahead learns where the
            // program is (wc/fetch_ahead.rs).
            let walk = self
                .fetch_ahead
                .as_ref()
                .filter(|fa| !fa.same_dir(parent))
                .and_then(|fa| Some((fa, c.store_path(name)?, inner.base.clone())));
            let known = |node: &Node| inner.repo.known_size(node).is_some();
            let target = match c.get_full(name) {
                Some((_, Some((node, _)))) if !known(&node) => {
                    c.store_path(name).map(|path| (path, node))
                }
                Some((ino, None)) => match inner.entries.get(&ino).map(|e| &e.kind) {
                    Some(Kind::File(FileData::Store { path, node, size }))
                        if size.get().is_none() && !known(node) =>
                    {
                        Some((path.to_vec(), *node))
                    }
                    _ => None,
                },
                _ => None,
            };
            (inner.repo.clone(), target, walk)
        };
        let seen = |fetched: bool| {
            if let Some((fa, path, base)) = &walk {
                fa.seen(parent, path, base, fetched);
            }
        };
        let Some((path, node)) = target else {
            seen(false);
            return false;
        };
        // Whether it is here is asked of the disk under no lock; only the directory's
        // names are read under it.
        let asked = repo.is_shallow() && !repo.has_file_locally(&path, &node);
        if asked {
            let mut keys = vec![(path.clone(), node)];
            self.directory_files(parent, &(path.clone(), node), &mut keys);
            let keys: Vec<(&[u8], Node)> = keys.iter().map(|(p, n)| (p.as_slice(), *n)).collect();
            let fetched = repo.fetch_files(&keys);
            // After the directory's own request: a walk that starts here finds it done.
            seen(true);
            if let Err(e) = fetched {
                // Not asked again for the size: the lookup reports it, without waiting.
                tracing::debug!("fetching a directory's files: {e}");
                return true;
            }
        } else {
            seen(false);
        }
        // An error is the lookup's to report, as before.
        let _ = repo.file_size(&path, &node);
        asked
    }

    /// Adds to `out` the store files of directory `parent` not looked up yet (the revisions
    /// a repository cloned from a server may lack; the fetch leaves out those this machine
    /// has), all but `skip`, up to [`FETCH_BATCH`] in all.
    fn directory_files(&self, parent: u64, skip: &(Vec<u8>, Node), out: &mut Vec<(Vec<u8>, Node)>) {
        let inner = self.read();
        let Ok(Kind::Dir {
            children: Some(c), ..
        }) = inner.entry(parent).map(|e| &e.kind)
        else {
            return;
        };
        let frozen = c
            .frozen_nodes()
            .filter_map(|(name, _, node)| Some((c.store_path(name)?, node)));
        let loaded =
            c.iter()
                .filter_map(|(_, ino)| match inner.entries.get(&ino).map(|e| &e.kind) {
                    Some(Kind::File(FileData::Store { path, node, size }))
                        if size.get().is_none() =>
                    {
                        Some((path.to_vec(), *node))
                    }
                    _ => None,
                });
        for key in frozen.chain(loaded) {
            if out.len() >= FETCH_BATCH {
                return;
            }
            if key != *skip {
                out.push(key);
            }
        }
    }

    /// The kernel dropped `n` references to `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        let mut inner = self.write();
        let Some(e) = inner.entries.get_mut(&ino) else {
            return;
        };
        e.nlookup = e.nlookup.saturating_sub(n);
        if e.nlookup == 0 && ino != ROOT_INO {
            let (parent, dir) = (e.parent, matches!(e.kind, Kind::Dir { .. }));
            if parent == 0 {
                if let Some(id) = inner.free(ino) {
                    let _ = self.overlay.remove(id);
                }
            } else if dir {
                inner.unload_upwards(ino);
            } else if inner.freeze(ino)
                && inner.entries.get(&parent).is_some_and(|p| p.nlookup == 0)
            {
                inner.unload_upwards(parent);
            }
        }
    }

    /// The entries of directory `ino`, sorted by name, with `..`'s inode.
    pub fn readdir(&self, ino: u64) -> Result<Listing> {
        self.readdir_locked(&mut self.write(), ino)
    }

    /// [`WorkingCopy::readdir`] with the lock already held.
    pub(crate) fn readdir_locked(&self, inner: &mut Inner, ino: u64) -> Result<Listing> {
        inner.load(ino)?;
        let inner = &*inner;
        let Kind::Dir {
            children: Some(children),
            ..
        } = &inner.entry(ino)?.kind
        else {
            return Err(WcError::NotDir);
        };
        let out = children
            .iter_full()
            .map(|(n, i, frozen)| {
                let t = match frozen {
                    Some(FileFlag::Symlink) => EntryType::Symlink,
                    Some(_) => EntryType::File,
                    None => match inner.entries.get(&i).map(|e| &e.kind) {
                        Some(Kind::Dir { .. }) => EntryType::Dir,
                        Some(Kind::Symlink(_)) => EntryType::Symlink,
                        Some(Kind::Special { kind, .. }) => EntryType::Special(*kind),
                        _ => EntryType::File,
                    },
                };
                (Box::from(n), i, t)
            })
            .collect();
        Ok((inner.entry(ino)?.parent, out))
    }

    /// Every path below directory `ino` (at `path`), loading directories as it goes: the
    /// files, and the directories too when `dirs`.
    pub(crate) fn paths_below(
        &self,
        inner: &mut Inner,
        ino: u64,
        path: &[u8],
        dirs: bool,
        out: &mut BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        let mut stack = vec![(ino, path.to_vec())];
        while let Some((dir, prefix)) = stack.pop() {
            let (_, children) = self.readdir_locked(inner, dir)?;
            for (name, child, kind) in children {
                let mut p = prefix.clone();
                if !p.is_empty() {
                    p.push(b'/');
                }
                p.extend_from_slice(&name);
                let is_dir = kind == EntryType::Dir;
                if is_dir {
                    stack.push((child, p.clone()));
                }
                if !is_dir || dirs {
                    out.insert(p);
                }
            }
        }
        Ok(())
    }

    /// Up to `size` bytes of file `ino` from `offset` (a small store text's shared with the
    /// text cache).
    pub fn read_file(&self, ino: u64, offset: u64, size: usize) -> Result<ReadBytes> {
        let (path, node, repo) = {
            let inner = self.read();
            let e = inner.entry(ino)?;
            match &e.kind {
                // Read under the (shared) lock: commit may drop an overlay file once its
                // content is in the store, and does so under the exclusive lock.
                Kind::File(FileData::Overlay { id }) => {
                    return Ok(ReadBytes::Owned(self.overlay.read(*id, offset, size)?))
                }
                Kind::File(FileData::Store { path, node, .. }) => {
                    if offset == 0 {
                        if let Some(text) = self.read_ahead_after(&inner, e, node) {
                            return Ok(StoreText::Small(text).read(0, size)?);
                        }
                    }
                    (path.clone(), *node, inner.repo.clone())
                }
                Kind::Dir { .. } => return Err(WcError::IsDir),
                Kind::Symlink(_) | Kind::Special { .. } => return Err(WcError::Invalid),
            }
        };
        // Outside the lock: a big text's first read rebuilds it.
        Ok(self.store_text(&repo, &path, &node)?.read(offset, size)?)
    }

    /// A store file (`e`, revision `node`) is read from its start: the store files after it
    /// in its directory are queued for read-ahead, once a while per directory
    /// (`readahead.rs`): frozen ones, and loaded ones (a listing while a program reads
    /// gives its entries with their attributes, which loads them: `readers.rs`).
    /// Returns the text when it was read ahead: the reader needs no filelog.
    fn read_ahead_after(&self, inner: &Inner, e: &Entry, node: &Node) -> Option<FileText> {
        let ra = self.readahead.get()?;
        let text = ra.read_by_reader(node);
        self.queue_round(ra, inner, e.parent, &e.name, 0);
        text
    }

    /// Queues the store files of directory `dir` named after `after` for read-ahead (a
    /// program's round, before what is queued), unless `dir` had its round lately; the
    /// first `unpushed` are not pushed into the page cache.
    pub(super) fn queue_round(
        &self,
        ra: &crate::readahead::Readahead,
        inner: &Inner,
        dir: u64,
        after: &[u8],
        unpushed: usize,
    ) {
        if !matches!(
            inner.entry(dir).map(|p| &p.kind),
            Ok(Kind::Dir {
                children: Some(_),
                ..
            })
        ) || !ra.starts_round(dir)
        {
            return;
        }
        let jobs = super::ahead::round_jobs(inner, dir, after, crate::readahead::PER_DIR, unpushed);
        ra.queue(&inner.repo, jobs);
    }

    /// Starts read-ahead (`mount.readahead_threads` threads, `mount.readahead_size` bytes);
    /// off when either is 0. Once per working copy.
    pub fn start_readahead(&self, threads: usize, bytes: u64) {
        if let Some(ra) = crate::readahead::Readahead::start(threads, bytes) {
            let _ = self.readahead.set(ra);
        }
    }

    /// Who fills the kernel's pages of files read ahead (`readahead.rs`'s [`Pusher`]).
    ///
    /// [`Pusher`]: crate::readahead::Pusher
    pub fn set_readahead_pusher(&self, pusher: Arc<dyn crate::readahead::Pusher>) {
        if let Some(ra) = self.readahead.get() {
            ra.set_pusher(pusher);
        }
    }

    /// What read-ahead did (`None`: off).
    pub fn readahead_stats(&self) -> Option<crate::readahead::ReadaheadStats> {
        self.readahead.get().map(|r| r.stats())
    }

    /// A symlink's target.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        // The store's text is read under no lock (it may have to come from a server).
        let (repo, path, node) = {
            let inner = self.read();
            match &inner.entry(ino)?.kind {
                Kind::Symlink(LinkData::Local(t)) => return Ok(t.to_vec()),
                Kind::Symlink(LinkData::Store { path, node }) => {
                    (inner.repo.clone(), path.to_vec(), *node)
                }
                _ => return Err(WcError::Invalid),
            }
        };
        let fl = repo.filelog(&path)?;
        Ok(fl.read(fl.rev_of(&node)?)?.to_vec())
    }
}
