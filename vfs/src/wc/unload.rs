//! What leaves the inode table: files frozen back into their directory's listing when
//! nothing needs their entry (see [`crate::children`]), and, past `mount.loaded_files`
//! entries, the oldest files the kernel still holds named for it to drop, so that it forgets
//! them and they can be frozen: the daemon's memory follows what is in use, not what was
//! ever read.

use super::*;
use crate::checkout::Invalidation;

/// The default of `mount.loaded_files`.
pub const DEFAULT_LOADED_FILES: usize = 200_000;

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
        let Some((node, flag)) = frozen_form(e) else {
            return false;
        };
        let store_path = match &e.kind {
            Kind::File(FileData::Store { path, .. })
            | Kind::Symlink(LinkData::Store { path, .. }) => path,
            _ => return false,
        };
        let parent = e.parent;
        let name = e.name.clone();
        let store_path: Box<[u8]> = store_path.clone();
        let Some(Entry {
            kind:
                Kind::Dir {
                    children: Some(children),
                    ..
                },
            ..
        }) = self.entries.get_mut(&parent)
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

/// The node and flag file entry `e` freezes to, if its entry can be rebuilt from them
/// (whatever its kernel references): an unchanged store file or symlink with the default
/// mode, one name, and no time, owner or attribute of its own. (Its path is checked
/// against its directory's by [`Inner::freeze`].)
fn frozen_form(e: &Entry) -> Option<(Node, FileFlag)> {
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
        Kind::File(FileData::Store { node, .. }) => match e.mode {
            0o644 => Some((*node, FileFlag::Regular)),
            0o755 => Some((*node, FileFlag::Executable)),
            _ => None,
        },
        Kind::Symlink(LinkData::Store { node, .. }) if e.mode == 0o777 => {
            Some((*node, FileFlag::Symlink))
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
