//! The inode table of a working copy (`Inner`): entries by inode, directories loaded
//! from the manifest when first needed, paths resolved, names linked and unlinked, the time
//! of the operation under way.

use super::*;

/// The most names a file may have, as ext4's `EXT4_LINK_MAX`.
pub(crate) const LINK_MAX: u32 = 65000;

impl Inner {
    pub(crate) fn entry(&self, ino: u64) -> Result<&Entry> {
        self.entries
            .get(&ino)
            .map(|e| &**e)
            .ok_or(WcError::NotFound)
    }

    pub(crate) fn entry_mut(&mut self, ino: u64) -> Result<&mut Entry> {
        self.entries
            .get_mut(&ino)
            .map(|e| &mut **e)
            .ok_or(WcError::NotFound)
    }

    pub(crate) fn alloc(&mut self, parent: u64, name: &[u8], kind: Kind, mode: u32) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.insert_entry(ino, parent, name, kind, mode);
        ino
    }

    /// A new entry `ino`, with no kernel reference and nothing of its own.
    fn insert_entry(&mut self, ino: u64, parent: u64, name: &[u8], kind: Kind, mode: u32) {
        self.entries
            .insert(ino, Box::new(Entry::new(parent, name, kind, mode, 0)));
    }

    /// Loads the children of directory `ino` from the base manifest if not done yet.
    pub(crate) fn load(&mut self, ino: u64) -> Result<()> {
        let source = match &self.entry(ino)?.kind {
            Kind::Dir {
                children: Some(_), ..
            } => return Ok(()),
            Kind::Dir {
                children: None,
                source,
            } => source.clone(),
            _ => return Err(WcError::NotDir),
        };
        let mut children = match &source {
            Some(s) => Children::listed_from(&s.path),
            None => Children::new(),
        };
        if let Some(DirSource {
            manifest,
            path: source,
        }) = source
        {
            let listing = manifest.children(&source)?;
            // Subdirectories kept when a listing of this directory was dropped are found
            // below as its children again.
            self.kept_under.remove(&ino);
            // The listing's inode numbers: a block, the same each time the directory is
            // listed again with the same names after its listing was dropped (`blocks.rs`).
            let first = self.block_for(ino, &listing);
            for (i, child) in listing.into_iter().enumerate() {
                let child_ino = first + i as u64;
                let name = match child {
                    Child::File { name, .. } | Child::Dir { name } => name,
                };
                if let Some(why) = unsafe_manifest_name(name) {
                    tracing::warn!(dir = %String::from_utf8_lossy(&source), name = %String::from_utf8_lossy(name), "manifest entry not served: {why}");
                    continue;
                }
                if children.contains(name) {
                    tracing::warn!(name = %String::from_utf8_lossy(name), "manifest names both a file and a directory; serving the first");
                    continue;
                }
                match child {
                    // Files start frozen: an inode number and no entry until looked up.
                    Child::File { entry, .. } => {
                        children.insert_frozen(Box::from(name), child_ino, entry.node, entry.flag);
                    }
                    Child::Dir { .. } => {
                        // Kept when this listing was dropped while the kernel held it or it
                        // was listed itself (`unload_listing`): the same directory.
                        if self.entries.get(&child_ino).is_some_and(|e| {
                            e.parent == ino
                                && *e.name == *name
                                && matches!(e.kind, Kind::Dir { .. })
                        }) {
                            children.insert(Box::from(name), child_ino, true);
                            continue;
                        }
                        let mut path = source.to_vec();
                        if !path.is_empty() {
                            path.push(b'/');
                        }
                        path.extend_from_slice(name);
                        let kind = Kind::Dir {
                            source: Some(DirSource {
                                manifest: manifest.clone(),
                                path: path.into(),
                            }),
                            children: None,
                        };
                        self.insert_entry(child_ino, ino, name, kind, 0o755);
                        children.insert(Box::from(name), child_ino, true);
                    }
                }
            }
        }
        let from_manifest = children.origin().is_some();
        let names = children.len();
        if let Kind::Dir {
            children: slot,
            source,
        } = &mut self.entry_mut(ino)?.kind
        {
            *slot = Some(children);
            // Listed: the manifest it came from is not needed any more (and is not kept
            // alive by it once the base moves on).
            *source = None;
        }
        if from_manifest {
            self.listed.push_back(ino);
            self.listed_names += names;
            // Directories dropped or freed since they were queued, or queued twice: gone
            // when they would make up most of the queue.
            if self.listed.len() > 2 * self.entries.len() + 1024 {
                let mut seen = std::collections::HashSet::new();
                let entries = &self.entries;
                self.listed.retain(|i| {
                    matches!(
                        entries.get(i).map(|e| &e.kind),
                        Some(Kind::Dir {
                            children: Some(_),
                            ..
                        })
                    ) && seen.insert(*i)
                });
            }
        }
        Ok(())
    }

    pub(crate) fn children(&mut self, ino: u64) -> Result<&Children> {
        self.load(ino)?;
        match &self.entry(ino)?.kind {
            Kind::Dir {
                children: Some(c), ..
            } => Ok(c),
            _ => Err(WcError::NotDir),
        }
    }

    /// The inode named `name` in directory `parent` (loading the directory and thawing the
    /// file).
    pub(crate) fn child(&mut self, parent: u64, name: &[u8]) -> Result<Option<u64>> {
        self.load(parent)?;
        let children = self.children_mut(parent)?;
        let Some((ino, frozen)) = children.get_full(name) else {
            return Ok(None);
        };
        if frozen.is_some() {
            let path = children.store_path(name).ok_or(WcError::Invalid)?;
            let (node, flag) = children.thaw(name).ok_or(WcError::Invalid)?;
            let kind = Kind::from_store(&path, node, flag);
            self.insert_entry(ino, parent, name, kind, perm_of_flag(flag));
            self.thawed.push_back(ino);
        }
        Ok(Some(ino))
    }

    pub(crate) fn children_mut(&mut self, ino: u64) -> Result<&mut Children> {
        match &mut self.entry_mut(ino)?.kind {
            Kind::Dir {
                children: Some(c), ..
            } => Ok(c),
            Kind::Dir { .. } => Err(WcError::Invalid),
            _ => Err(WcError::NotDir),
        }
    }

    /// After the base moved from `old` (a commit, an update, a new parent): the directories
    /// not listed yet that take their entries from `old`, at their own path, with nothing
    /// `changed` at or below it (the paths old and new base differ on), take them from the
    /// new base, which has the same entries there: an old manifest is then held by nothing
    /// (one base manifest held, however many times it moved). A directory moved before it
    /// was listed, or one below a changed path, keeps its own.
    pub(crate) fn share_base(&mut self, old: &Arc<Manifest>, changed: &BTreeSet<Vec<u8>>) {
        let new = self.base.clone();
        if Arc::ptr_eq(old, &new) {
            return;
        }
        let unlisted: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                matches!(&e.kind, Kind::Dir { source: Some(s), children: None }
                    if Arc::ptr_eq(&s.manifest, old))
            })
            .map(|(ino, _)| *ino)
            .collect();
        for ino in unlisted {
            let Some(path) = self.path_of(ino) else {
                continue;
            };
            let mut below = path.clone();
            if !below.is_empty() {
                below.push(b'/');
            }
            let touched = changed.contains(&path)
                || changed
                    .range(below.clone()..)
                    .next()
                    .is_some_and(|c| c.starts_with(&below));
            if touched {
                continue;
            }
            if let Some(Entry {
                kind:
                    Kind::Dir {
                        source: Some(source),
                        ..
                    },
                ..
            }) = self.entries.get_mut(&ino).map(|e| &mut **e)
            {
                if *source.path == *path {
                    source.manifest = new.clone();
                }
            }
        }
    }

    /// The repository path of a linked inode (`None` once unlinked).
    pub(crate) fn path_of(&self, mut ino: u64) -> Option<Vec<u8>> {
        let mut parts: Vec<&[u8]> = Vec::new();
        while ino != ROOT_INO {
            let e = self.entries.get(&ino)?;
            if e.parent == 0 {
                return None;
            }
            parts.push(&e.name);
            ino = e.parent;
        }
        parts.reverse();
        Some(parts.join(&b'/'))
    }

    /// The inode at `path`, loading directories on the way.
    pub(crate) fn resolve(&mut self, path: &[u8]) -> Result<Option<u64>> {
        let mut ino = ROOT_INO;
        if path.is_empty() {
            return Ok(Some(ino));
        }
        for part in path.split(|&b| b == b'/') {
            if !matches!(self.entry(ino)?.kind, Kind::Dir { .. }) {
                return Ok(None);
            }
            match self.child(ino, part)? {
                Some(c) => ino = c,
                None => return Ok(None),
            }
        }
        Ok(Some(ino))
    }

    /// [`Inner::resolve`] for paths taken one after another (sorted, typically): each
    /// starts from the deepest directory it shares with the previous one, which `walk`
    /// remembers, so siblings cost one name lookup each. `walk` is valid while no entry is
    /// linked, unlinked or moved (loads and thaws keep it valid).
    pub(crate) fn resolve_walk(&mut self, walk: &mut Walk, path: &[u8]) -> Result<Option<u64>> {
        if path.is_empty() {
            return Ok(Some(ROOT_INO));
        }
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], path),
        };
        // The directories `dir` shares with the walk's: whole components only.
        let common = walk.common_len(dir);
        walk.truncate(common);
        let rest = if common == dir.len() {
            &b""[..]
        } else if common == 0 {
            dir
        } else {
            &dir[common + 1..]
        };
        if !rest.is_empty() {
            for part in rest.split(|&b| b == b'/') {
                let at = walk.last();
                if !self.is_dir(at) {
                    return Ok(None);
                }
                match self.child(at, part)? {
                    Some(c) => walk.push(part, c),
                    None => return Ok(None),
                }
            }
        }
        let at = walk.last();
        if !matches!(self.entry(at)?.kind, Kind::Dir { .. }) {
            return Ok(None);
        }
        self.child(at, name)
    }

    /// The directory that holds `path` and the last component.
    pub(crate) fn resolve_parent<'p>(&mut self, path: &'p [u8]) -> Result<(u64, &'p [u8])> {
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], path),
        };
        let parent = self.resolve(dir)?.ok_or(WcError::NotFound)?;
        if !matches!(self.entry(parent)?.kind, Kind::Dir { .. }) {
            return Err(WcError::NotDir);
        }
        Ok((parent, name))
    }

    /// True when directory `ino` is `ancestor` or below it.
    pub(crate) fn is_within(&self, mut ino: u64, ancestor: u64) -> Result<bool> {
        loop {
            if ino == ancestor {
                return Ok(true);
            }
            if ino == ROOT_INO || ino == 0 {
                return Ok(false);
            }
            ino = self.entry(ino)?.parent;
        }
    }

    pub(crate) fn is_dir(&self, ino: u64) -> bool {
        matches!(
            self.entries.get(&ino).map(|e| &e.kind),
            Some(Kind::Dir { .. })
        )
    }

    /// Replay: changes the entry at `path` with `change`; its ctime becomes the time of the
    /// record's operation when the journal gave one (`Record::Clock`).
    pub(crate) fn change_at(&mut self, path: &[u8], change: impl FnOnce(&mut Entry)) -> Result<()> {
        let ino = self.resolve(path)?.ok_or(WcError::NotFound)?;
        let changed = self.op_time;
        let e = self.entry_mut(ino)?;
        change(e);
        e.ctime = changed.or(e.ctime);
        Ok(())
    }

    /// The time of the operation under way (see `op_time`).
    pub(crate) fn now(&mut self) -> SystemTime {
        *self.op_time.get_or_insert_with(SystemTime::now)
    }

    pub(crate) fn touch_dir(&mut self, ino: u64) {
        let now = Some(self.now());
        if let Some(e) = self.entries.get_mut(&ino) {
            e.mtime = now;
            e.ctime = now;
        }
    }

    /// Adds a new child; fails if the name is taken.
    pub(crate) fn link_new(
        &mut self,
        parent: u64,
        name: &[u8],
        kind: Kind,
        mode: u32,
    ) -> Result<u64> {
        check_name(name)?;
        if self.child(parent, name)?.is_some() {
            return Err(WcError::Exists);
        }
        let dir = matches!(kind, Kind::Dir { .. });
        let ino = self.alloc(parent, name, kind, mode);
        let now = Some(self.now());
        if let Some(e) = self.entries.get_mut(&ino) {
            e.mtime = now;
            e.ctime = now;
        }
        self.children_mut(parent)?.insert(name.into(), ino, dir);
        self.touch_dir(parent);
        Ok(ino)
    }

    /// Removes the name `name` in `parent` of `ino`; once it has no name left, frees it
    /// (and its overlay file) when the kernel holds no reference. Returns an overlay id to
    /// delete, if any. A file with other names (hard links) keeps them: if the name
    /// removed is its first, the next one takes its place.
    pub(crate) fn detach(&mut self, ino: u64, parent: u64, name: &[u8]) -> Option<u64> {
        if let Ok(children) = self.children_mut(parent) {
            if children.get(name) == Some(ino) {
                children.remove(name);
            }
        }
        self.touch_dir(parent);
        let now = Some(self.now());
        let e = self.entries.get_mut(&ino)?;
        e.ctime = now;
        if let Some(links) = e.links.as_mut() {
            if e.parent == parent && *e.name == *name {
                if !links.is_empty() {
                    let (p, n) = links.remove(0);
                    e.parent = p;
                    e.name = n;
                }
            } else if let Some(i) = links.iter().position(|(p, n)| *p == parent && **n == *name) {
                links.remove(i);
            }
            if links.is_empty() {
                e.links = None;
            }
            if e.parent != parent || *e.name != *name {
                return None;
            }
        }
        e.parent = 0;
        if e.nlookup == 0 {
            return self.free(ino);
        }
        None
    }

    /// Adds the name `name` in directory `parent` to file `ino` (a hard link).
    pub(crate) fn add_name(&mut self, ino: u64, parent: u64, name: &[u8]) -> Result<()> {
        check_name(name)?;
        if self.is_dir(ino) {
            return Err(WcError::NotPermitted);
        }
        if self.child(parent, name)?.is_some() {
            return Err(WcError::Exists);
        }
        let e = self.entry(ino)?;
        if e.parent == 0 {
            return Err(WcError::NotFound);
        }
        if e.nlink() >= LINK_MAX {
            return Err(WcError::TooManyLinks);
        }
        self.children_mut(parent)?.insert(name.into(), ino, false);
        self.touch_dir(parent);
        let now = Some(self.now());
        let e = self.entry_mut(ino)?;
        e.links
            .get_or_insert_with(Default::default)
            .push((parent, name.into()));
        e.ctime = now;
        Ok(())
    }

    /// Gives the name `name` in `parent` of `ino` a new place (a rename).
    pub(crate) fn move_name(
        &mut self,
        ino: u64,
        (parent, name): (u64, &[u8]),
        (newparent, newname): (u64, &[u8]),
    ) -> Result<()> {
        let e = self.entry_mut(ino)?;
        if e.parent == parent && *e.name == *name {
            e.parent = newparent;
            e.name = newname.into();
        } else if let Some(l) = e
            .links
            .as_mut()
            .and_then(|l| l.iter_mut().find(|(p, n)| *p == parent && **n == *name))
        {
            *l = (newparent, newname.into());
        }
        Ok(())
    }

    /// Detaches the name `name` in `parent` of `ino` and, for a loaded directory,
    /// everything below it; returns the overlay ids to delete.
    pub(crate) fn detach_tree(&mut self, ino: u64, parent: u64, name: &[u8]) -> Vec<u64> {
        let mut freed = Vec::new();
        let mut stack = vec![(ino, parent, Box::<[u8]>::from(name))];
        let mut order = Vec::new();
        while let Some((i, p, n)) = stack.pop() {
            if let Some(Entry {
                kind: Kind::Dir {
                    children: Some(c), ..
                },
                ..
            }) = self.entries.get(&i).map(|e| &**e)
            {
                stack.extend(c.iter().map(|(cn, ci)| (ci, i, Box::<[u8]>::from(cn))));
            }
            order.push((i, p, n));
        }
        // Children before their directories.
        for (i, p, n) in order.into_iter().rev() {
            freed.extend(self.detach(i, p, &n));
        }
        freed
    }

    /// Makes room for a `Put` of `path` (a directory when `dir`): missing directories
    /// above it are made, a file in the place of one of them is removed, and so is an entry
    /// of the other kind at `path`. Returns the overlay files freed. A journal written
    /// while the parent was provisional describes files against the last parent set
    /// outside an hg transaction, whose tree may differ
    /// (`WorkingCopy::journal_pending_update`).
    pub(crate) fn make_room(&mut self, path: &[u8], dir: bool) -> Result<Vec<u64>> {
        let mut freed = Vec::new();
        let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
        let Some((last, dirs)) = parts.split_last() else {
            return Ok(freed);
        };
        let mut parent = ROOT_INO;
        for part in dirs {
            parent = match self.child(parent, part)? {
                Some(ino) if self.is_dir(ino) => ino,
                other => {
                    if let Some(ino) = other {
                        freed.extend(self.detach_tree(ino, parent, part));
                    }
                    let kind = Kind::Dir {
                        source: None,
                        children: Some(Children::new()),
                    };
                    self.link_new(parent, part, kind, 0o755)?
                }
            };
        }
        if let Some(ino) = self.child(parent, last)? {
            if self.is_dir(ino) != dir {
                freed.extend(self.detach_tree(ino, parent, last));
            }
        }
        Ok(freed)
    }

    /// Makes `path` hold `entry` (see [`Record::Put`]); returns an overlay id it replaced.
    pub(crate) fn put(
        &mut self,
        path: &[u8],
        entry: &PutEntry,
        mode: u32,
        mtime: Option<SystemTime>,
    ) -> Result<Option<u64>> {
        let (parent, name) = self.resolve_parent(path)?;
        let kind = match entry {
            PutEntry::Dir => Kind::Dir {
                source: None,
                children: Some(Children::new()),
            },
            PutEntry::StoreFile { source, node } => Kind::File(FileData::Store {
                path: source.as_slice().into(),
                node: *node,
                size: OnceLock::new(),
            }),
            PutEntry::OverlayFile { id } => Kind::File(FileData::Overlay { id: *id }),
            PutEntry::StoreLink { source, node } => Kind::Symlink(LinkData::Store {
                path: source.as_slice().into(),
                node: *node,
            }),
            PutEntry::LocalLink { target } => {
                Kind::Symlink(LinkData::Local(target.as_slice().into()))
            }
            PutEntry::Special { kind, rdev } => Kind::Special {
                kind: *kind,
                rdev: *rdev,
            },
        };
        let is_dir = matches!(entry, PutEntry::Dir);
        let mut freed = None;
        let mut existing = self.child(parent, name)?;
        if let Some(ino) = existing.filter(|&i| self.entry(i).is_ok_and(|e| e.nlink() > 1)) {
            // One name of a file with hard links: the others keep the file.
            self.detach(ino, parent, name);
            existing = None;
        }
        match existing {
            Some(ino) => {
                let was_dir = self.is_dir(ino);
                let e = self.entry_mut(ino)?;
                match (was_dir, is_dir) {
                    (true, true) => {}
                    (true, false) => return Err(WcError::IsDir),
                    (false, true) => return Err(WcError::Exists),
                    (false, false) => {
                        let old = std::mem::replace(&mut e.kind, kind);
                        if let Kind::File(FileData::Overlay { id }) = old {
                            if !matches!(entry, PutEntry::OverlayFile { id: new } if *new == id) {
                                freed = Some(id);
                            }
                        }
                    }
                }
                e.mode = mode;
                e.mtime = mtime;
            }
            None => {
                let ino = self.link_new(parent, name, kind, mode)?;
                self.entry_mut(ino)?.mtime = mtime;
            }
        }
        Ok(freed)
    }

    /// Frees an unlinked inode with no kernel references.
    pub(crate) fn free(&mut self, ino: u64) -> Option<u64> {
        let e = self.entries.remove(&ino)?;
        self.blocks.remove(&ino);
        self.kept_under.remove(&ino);
        match e.kind {
            Kind::File(FileData::Overlay { id }) => Some(id),
            Kind::Dir {
                children: Some(children),
                ..
            } => {
                // A removed directory is empty; nothing else to free.
                debug_assert!(children.is_empty());
                None
            }
            _ => None,
        }
    }
}
