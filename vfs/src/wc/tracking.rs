//! What hg tracks beyond the tree: added and removed files (`add`, `remove`, `forget`),
//! copy sources (`copy`, `rename`), and `revert`.

use super::*;

/// One path's dirstate facts, as hg's dirstate asks for them (the control request `lookup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PathState {
    /// Tracked in the working copy's parent (its manifest has the file).
    pub p1: bool,
    /// Tracked in the working copy (added, or in the parent and not removed).
    pub wc: bool,
    /// A directory holding files tracked in the working copy or removed from it.
    pub dir: bool,
    /// Merged, or taken from the second parent, in the merge hg is making (hg's
    /// `p2_info`; version 4, absent: false).
    #[serde(default)]
    pub p2: bool,
    /// The parent's manifest has the file, whatever hg's dirstate says of it (a file hg
    /// has no entry for, or has as added: `p1` false), so that hg's add and forget of it
    /// say `readded` and `dropped` (absent from older daemons: false).
    #[serde(default)]
    pub base: bool,
}

impl WorkingCopy {
    // ----- tracking (add / remove / forget / revert) -----

    /// Journals a tracking change.
    pub fn set_tracking(&self, path: &[u8], track: Track) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        set_track(&mut inner, path, track);
        self.record(
            &mut inner,
            Record::Track {
                path: path.to_vec(),
                track,
            },
        )
    }

    /// Journals a copy source for `dest` (`None` clears it).
    pub fn set_copy(&self, dest: &[u8], source: Option<&[u8]>) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        let source = source.unwrap_or_default();
        set_copy(&mut inner, dest, source);
        self.record(
            &mut inner,
            Record::Copy {
                dest: dest.to_vec(),
                source: source.to_vec(),
            },
        )
    }

    /// A tracking change made inside an hg transaction: applied, journaled only once the
    /// transaction is over ([`Self::confirm_tracking`]).
    pub fn set_tracking_tentative(&self, path: &[u8], track: Track) -> Result<()> {
        let mut inner = self.write();
        set_track(&mut inner, path, track);
        inner.dirty.insert(path.to_vec());
        inner.tentative.insert(path.to_vec());
        Ok(())
    }

    /// A copy source set (or cleared) inside an hg transaction, as
    /// [`Self::set_tracking_tentative`].
    pub fn set_copy_tentative(&self, dest: &[u8], source: Option<&[u8]>) -> Result<()> {
        let mut inner = self.write();
        set_copy(&mut inner, dest, source.unwrap_or_default());
        inner.dirty.insert(dest.to_vec());
        inner.tentative.insert(dest.to_vec());
        Ok(())
    }

    /// hg's transaction is over: the tentative tracking changes are journaled as they
    /// stand now (each path's tracking, then its copy source).
    pub fn confirm_tracking(&self) -> Result<()> {
        if self.read().tentative.is_empty() {
            return Ok(());
        }
        self.room()?;
        let mut inner = self.write();
        let paths = std::mem::take(&mut inner.tentative);
        let mut records = Vec::with_capacity(2 * paths.len());
        for path in paths {
            let track = inner.tracking.get(&path).copied().unwrap_or(Track::Default);
            let source = inner.copies.get(&path).cloned().unwrap_or_default();
            records.push(Record::Track {
                path: path.clone(),
                track,
            });
            records.push(Record::Copy { dest: path, source });
        }
        for rec in records {
            self.record(&mut inner, rec)?;
        }
        Ok(())
    }

    /// hg's dirstate facts for `paths`: tracked in the parent, tracked in the working
    /// copy, a directory of tracked or removed files (`dirstate.hasdir`).
    pub fn path_states(&self, paths: &[Vec<u8>]) -> Result<Vec<PathState>> {
        let inner = self.read();
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            use crate::wc::{target_at, Target};
            let in_base = target_at(&inner.base, path)?;
            let base = matches!(in_base, Target::File(..));
            let mut p1 = base;
            let wc = match inner.tracking.get(path.as_slice()) {
                Some(Track::Added) => true,
                Some(Track::Removed) => false,
                // As hg's dirstate has them: no entry, or one as if in the parent.
                Some(Track::Dropped) => {
                    p1 = false;
                    false
                }
                Some(Track::Claimed) => {
                    p1 = true;
                    true
                }
                Some(Track::Readded) => {
                    p1 = false;
                    true
                }
                _ => p1,
            };
            let prefix = [path.as_slice(), b"/"].concat();
            let dir = in_base == Target::Dir
                || inner
                    .tracking
                    .range::<[u8], _>((
                        std::ops::Bound::Included(&prefix[..]),
                        std::ops::Bound::Unbounded,
                    ))
                    .next()
                    .is_some_and(|(p, _)| p.starts_with(&prefix));
            let p2 = inner.from_p2.contains(path.as_slice());
            out.push(PathState {
                p1,
                wc,
                dir,
                p2,
                base,
            });
        }
        Ok(out)
    }

    /// The copy sources, destination -> source.
    pub fn copies(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.read().copies.clone()
    }

    /// Restores `path` to the base revision's content and mode (if the base has it);
    /// returns the inode that had the name before and keeps others (a file with hard links:
    /// its link count changed behind the kernel's back).
    pub fn restore(&self, path: &[u8]) -> Result<Option<u64>> {
        self.room()?;
        let mut inner = self.write();
        if inner.base.find(path)?.is_none() {
            return Ok(None);
        }
        let linked = inner
            .resolve(path)?
            .filter(|&i| inner.entry(i).is_ok_and(|e| e.nlink() > 1));
        if let Some(id) = self.do_restore(&mut inner, path)? {
            let _ = self.overlay.remove(id);
        }
        self.record(
            &mut inner,
            Record::Restore {
                path: path.to_vec(),
            },
        )?;
        Ok(linked)
    }

    pub(super) fn do_restore(&self, inner: &mut Inner, path: &[u8]) -> Result<Option<u64>> {
        let Some(entry) = inner.base.find(path)? else {
            return Ok(None);
        };
        let (node, flag) = (entry.node, entry.flag);
        // Create missing parent directories, replacing files that stand in their way.
        let mut dir = ROOT_INO;
        let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
        let mut freed = None;
        for part in &parts[..parts.len() - 1] {
            dir = match inner.child(dir, part)? {
                Some(c) if inner.is_dir(c) => c,
                other => {
                    if let Some(c) = other {
                        freed = inner.detach(c, dir, part).or(freed);
                    }
                    let d = Kind::Dir {
                        source: None,
                        children: Some(Children::new()),
                    };
                    inner.link_new(dir, part, d, 0o755)?
                }
            };
        }
        let name = parts[parts.len() - 1];
        let kind = Kind::from_store(path, node, flag);
        let mut existing = inner.child(dir, name)?;
        if let Some(ino) = existing.filter(|&i| {
            inner.entry(i).is_ok_and(|e| e.nlink() > 1) || WorkingCopy::is_pinned(inner, i)
        }) {
            // One name of a file with hard links: restored as a new file, as hg's revert
            // writes one; the other names keep theirs. So is a file the kernel writes
            // directly (passthrough): its open handles keep the old one.
            inner.detach(ino, dir, name);
            existing = None;
        }
        if let Some(existing) = existing {
            if inner.is_dir(existing) {
                return Err(WcError::IsDir);
            }
            let inner_now = inner.now();
            let e = inner.entry_mut(existing)?;
            let old = std::mem::replace(&mut e.kind, kind);
            e.mode = perm_of_flag(flag);
            e.mtime = Some(inner_now);
            e.ctime = e.mtime;
            if let Kind::File(FileData::Overlay { id }) = old {
                freed = Some(id);
            }
        } else {
            let ino = inner.link_new(dir, name, kind, perm_of_flag(flag))?;
            inner.entry_mut(ino)?.mode = perm_of_flag(flag);
        }
        Ok(freed)
    }

    /// The inode of a linked path, if any (for the filesystem layer after restore).
    pub fn ino_of(&self, path: &[u8]) -> Result<Option<u64>> {
        let mut inner = self.write();
        inner.resolve(path)
    }

    /// The inode of `path` and whether the kernel holds a name for it (a lookup not yet
    /// forgotten): then its dentry is right and must not be dropped, as a process may
    /// have it as its current directory.
    pub fn ino_known(&self, path: &[u8]) -> Result<Option<(u64, bool)>> {
        let mut inner = self.write();
        let Some(ino) = inner.resolve(path)? else {
            return Ok(None);
        };
        let known = inner.entries.get(&ino).is_some_and(|e| e.nlookup > 0);
        Ok(Some((ino, known)))
    }
}

pub(super) fn set_copy(inner: &mut Inner, dest: &[u8], source: &[u8]) {
    if source.is_empty() {
        inner.copies.remove(dest);
    } else {
        inner.copies.insert(dest.to_vec(), source.to_vec());
    }
}

pub(super) fn set_track(inner: &mut Inner, path: &[u8], track: Track) {
    // A file that stops being added or tracked loses its copy source, as in hg.
    if !matches!(track, Track::Added | Track::Claimed | Track::Readded) {
        inner.copies.remove(path);
    }
    match track {
        Track::Default => {
            inner.tracking.remove(path);
        }
        t => {
            inner.tracking.insert(path.to_vec(), t);
        }
    }
}

/// A path as hg's `encoding.lower` folds it with a UTF-8 local encoding: ASCII folding
/// for ASCII names, Unicode folding for UTF-8 ones, ASCII folding of the bytes otherwise.
pub fn fold_case(path: &[u8]) -> Vec<u8> {
    if path.is_ascii() {
        return path.to_ascii_lowercase();
    }
    match std::str::from_utf8(path) {
        Ok(s) => s.to_lowercase().into_bytes(),
        Err(_) => path.to_ascii_lowercase(),
    }
}

impl WorkingCopy {
    /// The paths hg's dirstate iterates (tracked, or removed) that equal `path` but for
    /// case, `path` itself aside: for hg's case-collision warning on `add`, asked per new
    /// file instead of folding every tracked path. Found through the working tree's
    /// directories whose names fold alike (loading them), and the removed files.
    pub fn case_variants(&self, path: &[u8]) -> Result<Vec<Vec<u8>>> {
        let want = fold_case(path);
        let parts: Vec<Vec<u8>> = path.split(|&b| b == b'/').map(fold_case).collect();
        let mut inner = self.write();
        // (inode, its path) of the directories matching the components so far.
        let mut level: Vec<(u64, Vec<u8>)> = vec![(ROOT_INO, Vec::new())];
        let mut found = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let mut next = Vec::new();
            for (ino, prefix) in &level {
                if !inner.is_dir(*ino) {
                    continue;
                }
                let matching: Vec<(Vec<u8>, u64)> = inner
                    .children(*ino)?
                    .iter()
                    .filter(|(n, _)| fold_case(n) == *part)
                    .map(|(n, i)| (n.to_vec(), i))
                    .collect();
                for (name, child) in matching {
                    let full = if prefix.is_empty() {
                        name
                    } else {
                        [prefix.as_slice(), b"/", &name].concat()
                    };
                    if last {
                        found.push(full);
                    } else {
                        next.push((child, full));
                    }
                }
            }
            level = next;
        }
        drop(inner);
        let removed: Vec<Vec<u8>> = {
            let inner = self.read();
            inner
                .tracking
                .iter()
                .filter(|(p, t)| **t == Track::Removed && fold_case(p) == want)
                .map(|(p, _)| p.clone())
                .collect()
        };
        found.extend(removed);
        found.retain(|p| p.as_slice() != path);
        let states = self.path_states(&found)?;
        let mut out: Vec<Vec<u8>> = found
            .into_iter()
            .zip(states)
            .filter(|(_, s)| s.p1 || s.wc)
            .map(|(p, _)| p)
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
}
