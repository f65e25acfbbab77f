//! What leaves the inode table: files frozen back into their directory's listing when
//! nothing needs their entry (see [`crate::wc::children`]); the listings of directories the
//! kernel forgot, when they hold nothing but what the base manifest gives them (their
//! subdirectories' entries go with them); and, past `mount.loaded_files`
//! entries, the oldest files the kernel still holds named for it to drop, so that it forgets
//! them and they can be frozen: the daemon's memory follows what is in use, not what was
//! ever read.

use super::*;
use crate::wc::Invalidation;

/// The default of `mount.loaded_files`.
pub const DEFAULT_LOADED_FILES: usize = 200_000;

/// The default of `mount.listed_files`.
pub const DEFAULT_LISTED_FILES: usize = 500_000;

impl Inner {
    /// Freezes file `ino` (see [`Children`]) if nothing but its directory needs its entry:
    /// no kernel reference, an unchanged store file at its directory's origin path, with
    /// the default mode, one name and no time, owner or attribute of its own. The entry
    /// built when it is next looked up is the same, inode number included.
    pub(crate) fn freeze(&mut self, ino: u64) -> bool {
        let Some(e) = self.entries.get(&ino) else {
            return false;
        };
        if e.nlookup != 0 {
            return false;
        }
        let Some((node, flag, store_path)) = frozen_form(e) else {
            return false;
        };
        let store_path: Box<[u8]> = store_path.into();
        let parent = e.parent;
        let name = e.name.clone();
        let Some(Entry {
            kind:
                Kind::Dir {
                    children: Some(children),
                    ..
                },
            ..
        }) = self.entries.get_mut(&parent).map(|e| &mut **e)
        else {
            return false;
        };
        if children.get(&name) != Some(ino)
            || !children.is_store_path(&name, &store_path)
            || !children.freeze(&name, node, flag)
        {
            return false;
        }
        self.entries.remove(&ino);
        true
    }

    /// After the kernel forgot `dir` or something in it: drops the listing of `dir`, then of
    /// each directory above it, while they can be (see [`Inner::unload_listing`]).
    /// A directory kept when its parent's listing was dropped goes too, once the kernel
    /// forgot it and it is not listed ([`Inner::drop_kept`]).
    pub(crate) fn unload_upwards(&mut self, mut dir: u64) {
        while dir != ROOT_INO {
            let Some(parent) = self.entries.get(&dir).map(|e| e.parent) else {
                return;
            };
            let unloaded = self.unload_listing(dir, false);
            let dropped = self.drop_kept(dir);
            if !(unloaded || dropped) || parent == 0 {
                return;
            }
            dir = parent;
        }
    }

    /// True when `dir`'s listing was dropped while entries of some of its subdirectories
    /// stayed: they are found again only by listing it from the revision it was listed
    /// from.
    pub(crate) fn keeps_entries_below(&self, dir: u64) -> bool {
        self.kept_under.contains_key(&dir)
    }

    /// Drops the entry of directory `dir`, kept when its parent's listing was dropped (see
    /// [`Inner::unload_listing`]), if the parent's next listing makes the same one: the
    /// kernel holds no reference to it, it is not listed, has nothing of its own, takes its
    /// entries from the manifest its parent would list it from, and keeps no entries of its
    /// own children. The next listing of the parent gives it the same number.
    pub(crate) fn drop_kept(&mut self, dir: u64) -> bool {
        let Some(e) = self.entries.get(&dir) else {
            return false;
        };
        if e.nlookup != 0 || !plain_dir(e) || self.kept_under.contains_key(&dir) {
            return false;
        }
        let Kind::Dir {
            children: None,
            source: Some(own),
        } = &e.kind
        else {
            return false;
        };
        let Some(Kind::Dir {
            children: None,
            source: Some(theirs),
        }) = self.entries.get(&e.parent).map(|p| &p.kind)
        else {
            return false;
        };
        // Its own path is its parent's followed by its name.
        let at_its_path = match own.path.strip_prefix(&*theirs.path) {
            Some(rest) if theirs.path.is_empty() => *rest == *e.name,
            Some(rest) => rest.first() == Some(&b'/') && rest[1..] == *e.name,
            None => false,
        };
        if !Arc::ptr_eq(&own.manifest, &theirs.manifest) || !at_its_path {
            return false;
        }
        let parent = e.parent;
        let Some(count) = self.kept_under.get_mut(&parent) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            self.kept_under.remove(&parent);
        }
        // Its block of numbers (`blocks.rs`) stays: listed again, its children get the same.
        self.entries.remove(&dir);
        true
    }

    /// Drops the listing of directory `dir` if listing it again gives the same entries:
    /// the kernel holds no reference to it, it has nothing of its own (mode, times, owner,
    /// attributes), and each child is what the base manifest has at the path it was listed
    /// from, under the inode number it got then (a frozen file with the same node and flag,
    /// or a directory not listed, with nothing of its own either, taking its entries from
    /// the base). The directory then takes its entries from the base again, and its
    /// subdirectories' entries are dropped: the next listing makes them again, with the
    /// same numbers (`blocks.rs`).
    ///
    /// With `held`, the kernel may hold the directory (a sweep of listings past
    /// `mount.listed_files`): the directory keeps its entry and takes its entries from the
    /// base again, as one looked up and not listed; a subdirectory the kernel holds or that
    /// is listed itself (whatever its listing holds) keeps its entry, which the next listing
    /// finds under its number.
    pub(crate) fn unload_listing(&mut self, dir: u64, held: bool) -> bool {
        let Some(e) = self.entries.get(&dir) else {
            return false;
        };
        let Kind::Dir {
            children: Some(children),
            source: None,
        } = &e.kind
        else {
            return false;
        };
        if (e.nlookup != 0 && !held) || !plain_dir(e) {
            return false;
        }
        let Some(origin) = children.origin().map(<[u8]>::to_vec) else {
            return false;
        };
        if children.frozen() + children.subdirs() != children.len() as u32 {
            return false;
        }
        let Some(first) = self.block_first(dir) else {
            return false;
        };
        let base = self.base.clone();
        let Ok(listing) = base.children(&origin) else {
            return false;
        };
        let mut count = 0;
        let mut kept = 0u32;
        let mut subdirs = Vec::new();
        for (i, child) in listing.iter().enumerate() {
            let ino = first + i as u64;
            match child {
                Child::File { name, entry } => {
                    if unsafe_manifest_name(name).is_some() {
                        continue;
                    }
                    if children.get_full(name) != Some((ino, Some((entry.node, entry.flag)))) {
                        return false;
                    }
                }
                Child::Dir { name } => {
                    if unsafe_manifest_name(name).is_some() {
                        continue;
                    }
                    if children.get_full(name) != Some((ino, None)) {
                        return false;
                    }
                    let Some(sub) = self.entries.get(&ino) else {
                        return false;
                    };
                    if sub.parent != dir || *sub.name != **name {
                        return false;
                    }
                    let unlisted_from_base = matches!(&sub.kind, Kind::Dir {
                            children: None,
                            source: Some(s),
                        } if Arc::ptr_eq(&s.manifest, &base)
                            && children.is_store_path(name, &s.path));
                    let listed = matches!(
                        &sub.kind,
                        Kind::Dir {
                            children: Some(_),
                            ..
                        }
                    );
                    // One that keeps entries of its own children stays (their parent).
                    let keeps = self.kept_under.contains_key(&ino);
                    if unlisted_from_base && sub.nlookup == 0 && plain_dir(sub) && !keeps {
                        subdirs.push(ino);
                    } else if held && (listed || unlisted_from_base) {
                        kept += 1;
                    } else {
                        return false;
                    }
                }
            }
            count += 1;
        }
        if count != children.len() {
            return false;
        }
        for ino in subdirs {
            self.entries.remove(&ino);
        }
        if kept > 0 {
            self.kept_under.insert(dir, kept);
        }
        self.listed_names = self.listed_names.saturating_sub(count);
        if let Some(e) = self.entries.get_mut(&dir) {
            e.kind = Kind::Dir {
                source: Some(DirSource {
                    manifest: base,
                    path: origin.into(),
                }),
                children: None,
            };
        }
        true
    }

    /// Up to `max` names of the oldest thawed files to drop from the kernel's cache, when
    /// more than `limit` entries are loaded: files that could be frozen but for the kernel's
    /// reference (those it does not hold are frozen here). Changed files leave the queue:
    /// their entries stay.
    pub(crate) fn sweep(&mut self, limit: usize, max: usize) -> Vec<Invalidation> {
        let mut out = Vec::new();
        let over = self.entries.len().saturating_sub(limit);
        if over == 0 {
            return out;
        }
        // Some room below the limit, so that sweeps come in batches.
        let want = (over + limit / 8).min(max);
        let mut done = 0;
        while done < want {
            let Some(ino) = self.thawed.pop_front() else {
                break;
            };
            let Some(e) = self.entries.get(&ino) else {
                continue;
            };
            if e.parent == 0 || frozen_form(e).is_none() {
                continue;
            }
            if e.nlookup == 0 {
                self.freeze(ino);
            } else {
                out.push(Invalidation::Entry {
                    parent: e.parent,
                    name: e.name.clone(),
                });
            }
            done += 1;
        }
        // Inodes frozen or freed since they were queued: dropped when they would make up
        // most of the queue.
        if self.thawed.len() > 2 * self.entries.len() + 1024 {
            let entries = &self.entries;
            self.thawed.retain(|i| entries.contains_key(i));
        }
        out
    }
}

impl Inner {
    /// Drops the oldest listings that hold only what the base gives them (see
    /// [`Inner::unload_listing`], the kernel's references allowed), when the listings hold
    /// more than `limit` names, until they hold 7/8 of it; looks at `max` directories at
    /// most. A listing with changes goes to the back of the queue. Returns the listings
    /// dropped.
    pub(crate) fn sweep_listings(&mut self, limit: usize, max: usize) -> usize {
        if self.listed_names <= limit {
            return 0;
        }
        let goal = limit - limit / 8;
        let mut dropped = 0;
        for _ in 0..max {
            if self.listed_names <= goal {
                break;
            }
            let Some(dir) = self.listed.pop_front() else {
                break;
            };
            let listed = matches!(
                self.entries.get(&dir).map(|e| &e.kind),
                Some(Kind::Dir {
                    children: Some(_),
                    ..
                })
            );
            if !listed {
                continue;
            }
            if dir != ROOT_INO && self.unload_listing(dir, true) {
                dropped += 1;
                // Kept under a parent whose listing went before, and not held by the
                // kernel: it goes now (and so on upwards).
                self.unload_upwards(dir);
            } else {
                self.listed.push_back(dir);
            }
        }
        dropped
    }
}

/// Whether directory entry `e` has nothing of its own that a listing would not give it.
fn plain_dir(e: &Entry) -> bool {
    e.parent != 0
        && e.mode == 0o755
        && e.mtime.is_none()
        && e.ctime.is_none()
        && e.atime.is_none()
        && e.owner.is_none()
        && e.xattrs.is_none()
}

/// The node and flag file entry `e` freezes to, and its filelog path, if its entry can be
/// rebuilt from them (whatever its kernel references): an unchanged store file or symlink with the default
/// mode, one name, and no time, owner or attribute of its own. (Its path is checked
/// against its directory's by [`Inner::freeze`].)
fn frozen_form(e: &Entry) -> Option<(Node, FileFlag, &[u8])> {
    if e.parent == 0
        || e.mtime.is_some()
        || e.ctime.is_some()
        || e.atime.is_some()
        || e.owner.is_some()
        || e.xattrs.is_some()
        || e.links.is_some()
    {
        return None;
    }
    match &e.kind {
        Kind::File(FileData::Store { node, path, .. }) => match e.mode {
            0o644 => Some((*node, FileFlag::Regular, path)),
            0o755 => Some((*node, FileFlag::Executable, path)),
            _ => None,
        },
        Kind::Symlink(LinkData::Store { node, path }) if e.mode == 0o777 => {
            Some((*node, FileFlag::Symlink, path))
        }
        _ => None,
    }
}

impl WorkingCopy {
    /// Sets `mount.loaded_files`.
    pub fn set_loaded_files(&self, n: usize) {
        self.loaded_files
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets `mount.listed_files`.
    pub fn set_listed_files(&self, n: usize) {
        self.listed_files
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Drops the oldest unchanged listings past `mount.listed_files` names (looking at
    /// `max` directories at most); the number dropped. Nothing to tell the kernel: a
    /// directory whose listing is dropped lists the same names under the same numbers.
    pub fn sweep_listings(&self, max: usize) -> usize {
        let limit = self.listed_files.load(std::sync::atomic::Ordering::Relaxed);
        if self.read().listed_names <= limit {
            return 0;
        }
        self.write().sweep_listings(limit, max)
    }

    /// The kernel invalidations that make it forget the oldest unchanged files it holds,
    /// when more than `mount.loaded_files` entries are loaded (at most `max`); empty
    /// otherwise. The caller sends them without holding the working copy's lock.
    pub fn sweep(&self, max: usize) -> Vec<Invalidation> {
        let limit = self.loaded_files.load(std::sync::atomic::Ordering::Relaxed);
        if self.read().entries.len() <= limit {
            return Vec::new();
        }
        self.write().sweep(limit, max)
    }
}
