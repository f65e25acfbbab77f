//! `update` of a working copy: the manifest diff applied in place, the local changes
//! carried over.

use super::commit::Captured;
use super::*;
use crate::wc::children::Children;
use crate::wc::journal::Track;
use crate::wc::status::{Scope, StatusRequest};
use crate::wc::{
    perm_of_flag, DirSource, EntryType, FileData, Inner, Kind, PathChange, Result, WcError,
    WorkingCopy, ROOT_INO,
};
use revfs_store::changelog::Changeset;
use revfs_store::manifest::{FileFlag, Manifest, ManifestChange};
use revfs_store::{Node, Repo, StoreError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

/// How [`WorkingCopy::update_around`] updates.
#[derive(Debug, Clone, Copy)]
pub struct UpdateHow<'a> {
    /// Local changes are discarded (`hg update --clean`).
    pub clean: bool,
    /// hg's paths (see `update_around`); not with `clean`.
    pub hg_paths: &'a BTreeSet<Vec<u8>>,
    /// The checks only, nothing changed; not with `clean`.
    pub dry_run: bool,
    /// hg asks from inside a transaction, which may be rolled back: the parent is
    /// provisional ([`WorkingCopy::journal_pending_update`]).
    pub pending: bool,
}

impl WorkingCopy {
    /// Switches the working copy to revision `node` of `repo` (a fresh handle that knows
    /// it). Local changes are kept when the update does not touch them; otherwise it stops
    /// with [`WcError::UntrackedDiffers`] (an untracked file in the way of another) or
    /// [`WcError::UncommittedChanges`] and changes nothing, unless `clean`, which
    /// first reverts every change (added files become unknown, as in hg).
    ///
    /// `progress` hears of the phases: `checking` (status and the manifest diff) and
    /// `updating` (per path of the diff applied).
    pub fn update(
        &self,
        repo: Arc<Repo>,
        node: Node,
        clean: bool,
        progress: Option<ProgressFn>,
    ) -> Result<UpdateOutcome> {
        let none = BTreeSet::new();
        let how = UpdateHow {
            clean,
            hg_paths: &none,
            dry_run: false,
            pending: false,
        };
        self.update_around(repo, node, &how, progress)
    }

    /// [`update`](Self::update) around hg's merge of an update over local changes: the
    /// paths of `how.hg_paths` are hg's (it merges, writes or removes them through the
    /// mount, and names their tracking with the parent it sets next): they are neither
    /// checked nor touched, and keep their tracking (a tracked file stays tracked, an
    /// untracked one untracked) until hg names it.
    pub fn update_around(
        &self,
        repo: Arc<Repo>,
        node: Node,
        how: &UpdateHow<'_>,
        progress: Option<ProgressFn>,
    ) -> Result<UpdateOutcome> {
        let UpdateHow {
            clean,
            hg_paths,
            dry_run,
            pending,
        } = *how;
        let _one = self.transition_lock();
        if !clean && !self.read().p2().is_null() {
            return Err(WcError::UncommittedMerge);
        }
        let t0 = std::time::Instant::now();
        tick(progress, "checking", 0, 0);
        let (target, branch) = target_of(&repo, &node)?;
        let mut out = UpdateOutcome {
            branch,
            ..UpdateOutcome::default()
        };
        // hg looks at the working copy's manifest: the parent's, or a `.hgsubstate` added
        // since (an interrupted update leaves one on disk, which addremove adds).
        let has_substate = {
            let inner = self.read();
            matches!(
                inner.tracking().get(SUBSTATE),
                Some(Track::Added | Track::Claimed | Track::Readded)
            ) || inner.base().get(SUBSTATE)?.is_some()
        };
        if has_substate || target.get(SUBSTATE)?.is_some() {
            return Err(WcError::Subrepos);
        }
        let mut pass = Pass::default();
        if clean {
            self.start_clean(&target, &mut out, &mut pass)?;
        }
        let t_manifest = t0.elapsed();
        // The parent cannot change meanwhile (the transition lock is held).
        let base = self.read().base().clone();
        let diff = base.diff(&target)?;
        let t_diff = t0.elapsed();
        let local = self.local_changes_on(&diff)?;
        let t_status = t0.elapsed();

        let mut inner = self.write();
        self.refuse_conflicts(&mut inner, &repo, &base, &diff, &local, how, &mut pass)?;
        if dry_run {
            return Ok(out);
        }
        let freed = self.apply_diff(&mut inner, &target, &diff, how, &mut out, pass, progress)?;

        let changed: BTreeSet<Vec<u8>> = diff.iter().map(|c| c.path.clone()).collect();
        inner.move_base(target, node, repo, &changed);
        // An update ends any merge (only --clean gets here during one).
        inner.end_merge();
        inner.set_provisional(pending);
        if pending {
            let mut paths: BTreeSet<Vec<u8>> = diff
                .iter()
                .filter(|c| !hg_paths.contains(&c.path))
                .map(|c| c.path.clone())
                .collect();
            paths.extend(out.reverted.iter().cloned());
            self.journal_pending_update(&mut inner, &paths)?;
        }
        let t_apply = t0.elapsed();
        self.feed_update(&diff, &out.changes);
        self.rebase_journal(&mut inner, &BTreeSet::new())?;
        tracing::debug!(
            ?t_manifest,
            ?t_diff,
            ?t_status,
            ?t_apply,
            total = ?t0.elapsed(),
            "update timings"
        );
        drop(inner);
        for id in freed {
            let _ = self.overlay.remove(id);
        }
        Ok(out)
    }

    /// `--clean`'s first step: every local change reverted (hg's entries that disagree
    /// with the parent, added files forgotten, removed and missing ones put back, copy
    /// sources dropped), and files a merge took from its second parent removed unless the
    /// target has them; what it reverted, and what it leaves gone or untracked, in `pass`.
    fn start_clean(
        &self,
        target: &Manifest,
        out: &mut UpdateOutcome,
        pass: &mut Pass,
    ) -> Result<()> {
        // hg's entries that disagree with the parent (a path it dropped, or keeps as
        // the parent's although the parent lacks it, or has as added although the parent
        // has it) go first: --clean starts afresh. But a path hg has no entry for, which
        // the target has as the parent does, keeps having none: hg's merge sees it as the
        // parent's, unchanged, and does nothing to it.
        let odd: Vec<Vec<u8>> = {
            let inner = self.read();
            let mut odd = Vec::new();
            for (p, t) in inner.tracking() {
                let unchanged = || -> Result<bool> {
                    Ok(match (inner.base().get(p)?, target.get(p)?) {
                        (Some(a), Some(b)) => a == b,
                        _ => false,
                    })
                };
                match t {
                    Track::Dropped if unchanged()? => {}
                    Track::Dropped | Track::Claimed | Track::Readded => odd.push(p.clone()),
                    _ => {}
                }
            }
            odd
        };
        for p in odd {
            self.set_tracking(&p, Track::Default)?;
        }
        let base = self.base_manifest();
        let merged = self.read().merged_from_p2().clone();
        for e in self.status(StatusRequest::default())? {
            if merged.contains(&e.path) && base.find(&e.path)?.is_none() {
                // A file a merge took from its second parent: tracked, so the update
                // removes it (hg's remove action), unless the target has it too.
                self.set_tracking(&e.path, Track::Default)?;
                if e.letter != '!' && target.find(&e.path)?.is_none() {
                    let (parent, name) = {
                        let mut inner = self.write();
                        let (parent, name) = inner.resolve_parent(&e.path)?;
                        (parent, name.to_vec())
                    };
                    let old = self.entry_at(&e.path);
                    self.unlink(parent, &name)?;
                    out.changes.push(PathChange {
                        path: e.path.clone(),
                        old,
                        new: None,
                        content: true,
                    });
                    out.removed += 1;
                    pass.reverted.insert(e.path);
                }
                continue;
            }
            let added = e.letter == 'A' || (e.letter == '!' && base.find(&e.path)?.is_none());
            if e.letter == 'R' && target.find(&e.path)?.is_none() && self.ino_of(&e.path)?.is_some()
            {
                pass.kept.insert(e.path);
                continue;
            }
            match e.letter {
                _ if added => self.set_tracking(&e.path, Track::Default)?,
                _ => {
                    if e.letter == 'R' {
                        self.set_tracking(&e.path, Track::Default)?;
                    }
                    if matches!(e.letter, 'R' | '!') {
                        pass.gone.insert(e.path.clone());
                        if target.find(&e.path)?.is_none() {
                            // Not in hg's working manifest, so nothing to remove: the
                            // file stays gone and its directories stay as they are.
                            continue;
                        }
                    }
                    let old = self.entry_at(&e.path);
                    if let Some(ino) = self.restore(&e.path)? {
                        pass.relinked.push(ino);
                    }
                    out.changes.push(PathChange {
                        path: e.path.clone(),
                        old,
                        new: self.entry_at(&e.path),
                        content: true,
                    });
                    pass.reverted.insert(e.path);
                }
            }
        }
        for dest in self.copies().into_keys() {
            self.set_copy(&dest, None)?;
        }
        Ok(())
    }

    /// What the checks of an update need of the working copy: the status of the paths on
    /// the `diff`, their directories and what is below them; local changes elsewhere are
    /// neither looked at nor compared.
    fn local_changes_on(&self, diff: &[ManifestChange]) -> Result<BTreeMap<Vec<u8>, char>> {
        let scope = Scope::new(diff.iter().map(|c| c.path.as_slice()));
        Ok(self
            .status_within(
                StatusRequest {
                    unknown: true,
                    ignored: true,
                    clean: false,
                    ignore_files: None,
                },
                Some(&scope),
            )?
            .into_iter()
            .map(|e| (e.path, e.letter))
            .collect())
    }

    /// Refuses the update before anything changes: an untracked (or ignored) file the
    /// target has with other content (hg's `merge.checkunknown` abort, which comes first),
    /// then a local change on a path the update changes. Paths already gone that the
    /// update removes join `pass.gone`.
    #[allow(clippy::too_many_arguments)]
    fn refuse_conflicts(
        &self,
        inner: &mut Inner,
        repo: &Repo,
        base: &Manifest,
        diff: &[ManifestChange],
        local: &BTreeMap<Vec<u8>, char>,
        how: &UpdateHow<'_>,
        pass: &mut Pass,
    ) -> Result<()> {
        let clean = how.clean;
        let mut conflicts: Vec<Vec<u8>> = Vec::new();
        let mut untracked: Vec<Vec<u8>> = Vec::new();
        for c in diff {
            let p = &c.path;
            if how.hg_paths.contains(p) {
                continue;
            }
            let mut dir_prefix = p.clone();
            dir_prefix.push(b'/');
            let below = local
                .range(dir_prefix.clone()..)
                .next()
                .is_some_and(|(q, _)| q.starts_with(&dir_prefix));
            let above: Vec<&[u8]> = ancestors(p).filter(|a| local.contains_key(*a)).collect();
            match local.get(p) {
                Some('?' | 'I') if c.new.is_some() => {
                    // Replaced by the update when --clean or already the target's.
                    if !(clean || self.same_as(inner, repo, p, c.new)?) {
                        untracked.push(p.clone());
                    }
                }
                Some('R' | '!') if c.new.is_none() => {
                    pass.gone.insert(p.clone());
                }
                Some(_) => conflicts.push(p.clone()),
                None if below => conflicts.push(p.clone()),
                None if !above.is_empty() => {
                    // Untracked files where the target has directories are replaced
                    // with --clean.
                    let replaced = clean
                        && c.new.is_some()
                        && above
                            .iter()
                            .all(|a| matches!(local.get(*a), Some('?' | 'I')));
                    if !replaced {
                        conflicts.push(p.clone());
                    }
                }
                None => {
                    if c.new.is_some()
                        && target_at(base, p)? != Target::Dir
                        && self.dir_in_the_way(inner, p)?
                    {
                        conflicts.push(p.clone());
                    }
                }
            }
        }
        if !untracked.is_empty() {
            return Err(WcError::UntrackedDiffers(untracked));
        }
        if !conflicts.is_empty() {
            return Err(WcError::UncommittedChanges(conflicts));
        }
        Ok(())
    }

    /// Applies `diff` to the inode table: each path the target changes, adds or removes
    /// (hg's paths left to hg, their tracking kept), then the directories left empty;
    /// the counts, invalidations and reverted paths into `out`. Returns the overlay files
    /// the entries it dropped held, to remove once the lock is released.
    #[allow(clippy::too_many_arguments)]
    fn apply_diff(
        &self,
        inner: &mut Inner,
        target: &Arc<Manifest>,
        diff: &[ManifestChange],
        how: &UpdateHow<'_>,
        out: &mut UpdateOutcome,
        pass: Pass,
        progress: Option<ProgressFn>,
    ) -> Result<Vec<u64>> {
        let Pass {
            reverted,
            mut relinked,
            gone,
            kept,
        } = pass;
        let now = SystemTime::now();
        // The parent's manifest (the base moves to the target after this).
        let base = inner.base().clone();
        let mut freed = Vec::new();
        let mut touched: BTreeSet<u64> = BTreeSet::new();
        // Directories that removals may have left empty, with their paths.
        let mut emptied: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        // hg's counts: files written, and tracked files that were there and are removed.
        let mut updated: BTreeSet<Vec<u8>> = BTreeSet::new();
        for p in &reverted {
            if target.find(p)?.is_some() {
                updated.insert(p.clone());
            }
        }
        let total = diff.len();
        for (i, c) in diff.iter().enumerate() {
            tick(progress, "updating", i, total);
            if how.hg_paths.contains(&c.path) {
                inner.keep_tracking(&c.path, c.old.is_some(), c.new.is_some());
                continue;
            }
            match c.new {
                Some(_) => {
                    updated.insert(c.path.clone());
                    inner.got_by_update(&c.path);
                }
                None if kept.contains(&c.path) => continue,
                None if gone.contains(&c.path) => {
                    if !how.clean {
                        // Already gone here (a forgotten file stays as it is, untracked).
                        continue;
                    }
                }
                None => out.removed += 1,
            }
            let parts: Vec<&[u8]> = c.path.split(|&b| b == b'/').collect();
            let (last, dirs) = match parts.split_last() {
                Some(x) => x,
                None => continue,
            };
            let mut dir = ROOT_INO;
            let mut reached = true;
            for (i, part) in dirs.iter().enumerate() {
                load_if_held(inner, dir, &join(&parts[..i]))?;
                if self.retarget(inner, dir, &join(&parts[..i]), target, out)? {
                    reached = false;
                    break;
                }
                match inner.child(dir, part)? {
                    Some(child) if inner.is_dir(child) => dir = child,
                    other => {
                        if c.new.is_none() {
                            reached = false;
                            break;
                        }
                        let old = other.map(|f| (f, type_of(inner, f)));
                        if let Some(file) = other {
                            // An untracked file where the target has a directory (--clean).
                            freed.extend(inner.detach_tree(file, dir, part));
                        }
                        let path = join(&parts[..=i]);
                        // A directory the parent has and the working copy does not (the
                        // user removed it) comes back holding only what the update
                        // writes, as hg makes it: the target's files that did not change
                        // stay removed (hg's "keep absent"). A directory new to the target
                        // holds only files the update adds, so the target lists it.
                        let removed_here = !how.clean && matches!(base.at(&path)?, Err(true));
                        let kind = if removed_here {
                            Kind::Dir {
                                source: None,
                                children: Some(Children::new()),
                            }
                        } else {
                            Kind::Dir {
                                source: Some(DirSource {
                                    manifest: target.clone(),
                                    path: path.clone().into(),
                                }),
                                children: None,
                            }
                        };
                        let new = inner.link_new(dir, part, kind, 0o755)?;
                        out.changes.push(PathChange {
                            path: join(&parts[..=i]),
                            old,
                            new: Some((new, EntryType::Dir)),
                            content: true,
                        });
                        out.invalidations.push(Invalidation::Entry {
                            parent: dir,
                            name: (*part).into(),
                        });
                        touched.insert(dir);
                        if removed_here {
                            // On down to the file, made below like any other.
                            dir = new;
                            continue;
                        }
                        reached = false;
                        break;
                    }
                }
            }
            if !reached {
                continue;
            }
            load_if_held(inner, dir, &join(dirs))?;
            if self.retarget(inner, dir, &join(dirs), target, out)? {
                continue;
            }
            let existing = inner.child(dir, last)?;
            match (c.new, existing) {
                (None, Some(ino)) => {
                    if !inner.is_dir(ino) {
                        out.changes.push(PathChange {
                            path: c.path.clone(),
                            old: Some((ino, type_of(inner, ino))),
                            new: None,
                            content: true,
                        });
                        freed.extend(inner.detach(ino, dir, last));
                        relinked.extend(still_named(inner, ino));
                        out.invalidations.push(Invalidation::Entry {
                            parent: dir,
                            name: (*last).into(),
                        });
                        touched.insert(dir);
                        emptied.insert(dir, join(dirs));
                    }
                }
                (None, None) => {}
                (Some((fnode, flag)), existing) => {
                    let kind = Kind::from_store(&c.path, fnode, flag);
                    // A file whose only change is its mode keeps its inode.
                    let mode_only = existing.is_some_and(|ino| {
                        matches!(inner.entries().get(&ino).map(|e| &e.kind),
                            Some(Kind::File(FileData::Store { node, .. }))
                                if *node == fnode && flag != FileFlag::Symlink)
                    });
                    if let (true, Some(ino)) = (mode_only, existing) {
                        let e = inner.entry_mut(ino)?;
                        e.mode = perm_of_flag(flag);
                        e.ctime = Some(now);
                        out.changes.push(PathChange {
                            path: c.path.clone(),
                            old: Some((ino, EntryType::File)),
                            new: Some((ino, EntryType::File)),
                            content: false,
                        });
                        out.invalidations.push(Invalidation::Inode(ino));
                    } else {
                        // Any other change is a new inode, as a checkout that writes a new
                        // file and renames it into place makes one: a process that has the
                        // old file open goes on reading the old revision, whole, and never
                        // a mix of the two.
                        let old = existing.map(|ino| (ino, type_of(inner, ino)));
                        if let Some(ino) = existing {
                            freed.extend(inner.detach_tree(ino, dir, last));
                            relinked.extend(still_named(inner, ino));
                        }
                        let ino = inner.link_new(dir, last, kind, perm_of_flag(flag))?;
                        let link = flag == FileFlag::Symlink;
                        out.changes.push(PathChange {
                            path: c.path.clone(),
                            old,
                            new: Some((
                                ino,
                                if link {
                                    EntryType::Symlink
                                } else {
                                    EntryType::File
                                },
                            )),
                            content: true,
                        });
                        inner.entry_mut(ino)?.mtime = Some(now);
                        out.invalidations.push(Invalidation::Entry {
                            parent: dir,
                            name: (*last).into(),
                        });
                        touched.insert(dir);
                    }
                }
            }
        }
        tick(progress, "updating", total, total);
        drop_emptied(inner, emptied, &mut freed, &mut touched, out);
        out.invalidations
            .extend(touched.into_iter().map(Invalidation::Inode));
        out.updated = updated.len();
        out.reverted = reverted.into_iter().collect();
        out.invalidations
            .extend(relinked.into_iter().map(Invalidation::Inode));
        Ok(freed)
    }

    /// For an update: when `dir` is not loaded yet, makes it take its entries from the
    /// target (or drops it when the target has no such directory) and returns true: nothing
    /// below it needs more work.
    fn retarget(
        &self,
        inner: &mut Inner,
        dir: u64,
        dir_path: &[u8],
        target: &Arc<Manifest>,
        out: &mut UpdateOutcome,
    ) -> Result<bool> {
        let (current, moved) = match &inner.entry(dir)?.kind {
            Kind::Dir {
                source: Some(source),
                children: None,
            } => (
                Arc::ptr_eq(&source.manifest, target),
                *source.path != *dir_path,
            ),
            _ => return Ok(false),
        };
        // A directory moved before it was ever listed: its entries are local changes (the
        // conflict check keeps the update away from them).
        if current || moved {
            return Ok(true);
        }
        if inner.keeps_entries_below(dir) {
            // Its listing was dropped while entries of subdirectories stayed (listed, or
            // held by the kernel): listed again from its own revision, they are its
            // children again, and the update goes on below it as in any listed directory.
            inner.load(dir)?;
            return Ok(false);
        }
        let exists = target_at(target, dir_path)? == Target::Dir;
        let e = inner.entry_mut(dir)?;
        let Kind::Dir {
            source: Some(source),
            ..
        } = &mut e.kind
        else {
            return Ok(false);
        };
        if exists || dir == ROOT_INO {
            source.manifest = target.clone();
        } else {
            let (parent, name) = (e.parent, e.name.clone());
            let freed = inner.detach_tree(dir, parent, &name);
            debug_assert!(freed.is_empty());
            out.invalidations.push(Invalidation::Entry { parent, name });
            out.invalidations.push(Invalidation::Inode(parent));
        }
        Ok(true)
    }

    /// True when an untracked file at `path` has the target's content and flags already.
    fn same_as(
        &self,
        inner: &mut Inner,
        repo: &Repo,
        path: &[u8],
        new: Option<(Node, FileFlag)>,
    ) -> Result<bool> {
        let Some((node, flag)) = new else {
            return Ok(false);
        };
        // A file is compared in blocks (it may be big); a symlink's target is small.
        if let Some(ino) = inner.resolve(path)? {
            let e = inner.entry(ino)?;
            let exec = e.mode & 0o100 != 0;
            if let Kind::File(FileData::Overlay { id }) = e.kind {
                if flag == FileFlag::Symlink || exec != (flag == FileFlag::Executable) {
                    return Ok(false);
                }
                let want = self.store_text(repo, path, &node)?;
                if self.overlay.size(id)? != want.len() {
                    return Ok(false);
                }
                let ours = self.overlay.file(id)?;
                let same = crate::wc::content::same_content(
                    &mut crate::wc::content::FileReader::new(&ours),
                    &mut want.reader(),
                )?;
                return Ok(same);
            }
        }
        let Some(cap) = self.capture(inner, path)? else {
            return Ok(false);
        };
        let want = self.store_text(repo, path, &node)?;
        Ok(match cap {
            Captured::File { data, exec } => {
                flag != FileFlag::Symlink
                    && exec == (flag == FileFlag::Executable)
                    && data.len() as u64 == want.len()
                    && crate::wc::content::same_content(&mut &data[..], &mut want.reader())?
            }
            Captured::Link(t) => {
                flag == FileFlag::Symlink
                    && t.len() as u64 == want.len()
                    && crate::wc::content::same_content(&mut &t[..], &mut want.reader())?
            }
        })
    }

    /// True when a directory stands where the target puts a file (a directory that status
    /// does not show, because nothing tracked or untracked is in it).
    fn dir_in_the_way(&self, inner: &mut Inner, path: &[u8]) -> Result<bool> {
        // Only loaded directories can differ from the parent; do not load anything here.
        let mut ino = ROOT_INO;
        for part in path.split(|&b| b == b'/') {
            match &inner.entry(ino)?.kind {
                Kind::Dir {
                    children: Some(c), ..
                } => match c.get(part) {
                    Some(child) => ino = child,
                    None => return Ok(false),
                },
                _ => return Ok(false),
            }
        }
        Ok(inner.is_dir(ino))
    }
}

/// `ino` if it still has a name after one of its names went (a file with hard links): the
/// kernel's attributes for it (its link count) must go.
fn still_named(inner: &Inner, ino: u64) -> Option<u64> {
    inner
        .entries()
        .get(&ino)
        .filter(|e| e.parent != 0)
        .map(|_| ino)
}

/// What `--clean`'s first step and the checks hand the update: paths reverted, inodes
/// whose other names lost a link, tracked files already gone (R, !: hg's working manifest
/// does not have them, so an update that removes them too neither touches nor counts
/// them), and removed files on disk again that the target does not have (hg forgets them;
/// the file stays as it is, untracked, even with --clean).
#[derive(Default)]
struct Pass {
    reverted: BTreeSet<Vec<u8>>,
    relinked: Vec<u64>,
    gone: BTreeSet<Vec<u8>>,
    kept: BTreeSet<Vec<u8>>,
}

/// The target revision's manifest (kept in the manifest cache) and branch, from one read
/// of its changeset.
/// The file that records a revision's subrepositories: hg's update visits them whenever
/// the working copy's parent has one (to see whether they are dirty) or the target does.
const SUBSTATE: &[u8] = b".hgsubstate";

fn target_of(repo: &Repo, node: &Node) -> Result<(Arc<Manifest>, Vec<u8>)> {
    let changeset = if node.is_null() {
        Changeset::default()
    } else {
        let rev = repo
            .changelog()
            .rev_of(node)
            .ok_or_else(|| StoreError::UnknownRevision(node.to_hex()))?;
        repo.changeset_head(rev)?
    };
    let (target, new_file) = repo.kept_manifest(&changeset.manifest)?;
    if let Some(file) = new_file {
        file.keep_in_background();
    }
    Ok((Arc::new(target), changeset.branch().to_vec()))
}

/// Directories left empty by removals go too, as hg removes them, up to the first that
/// is not empty.
fn drop_emptied(
    inner: &mut Inner,
    emptied: BTreeMap<u64, Vec<u8>>,
    freed: &mut Vec<u64>,
    touched: &mut BTreeSet<u64>,
    out: &mut UpdateOutcome,
) {
    for (mut dir, mut path) in emptied {
        while dir != ROOT_INO {
            let empty = matches!(
                inner.entries().get(&dir).map(|e| &e.kind),
                Some(Kind::Dir { children: Some(c), .. }) if c.is_empty()
            );
            let Some(e) = inner.entries().get(&dir).filter(|e| e.parent != 0 && empty) else {
                break;
            };
            let (parent, name) = (e.parent, e.name.clone());
            out.changes.push(PathChange {
                path: path.clone(),
                old: Some((dir, EntryType::Dir)),
                new: None,
                content: true,
            });
            freed.extend(inner.detach(dir, parent, &name));
            out.invalidations.push(Invalidation::Entry { parent, name });
            touched.insert(parent);
            dir = parent;
            path.truncate(path.iter().rposition(|&b| b == b'/').unwrap_or(0));
        }
    }
}

/// What entry `ino` is (a file when it cannot be said).
fn type_of(inner: &Inner, ino: u64) -> EntryType {
    inner
        .entries()
        .get(&ino)
        .map_or(EntryType::File, |e| e.kind.entry_type())
}

/// A directory the kernel holds that nobody listed yet gets its entries from its source
/// before an update changes what is in it: each change is then one of its entries', which
/// watchers of the directory hear of (`fuse/events.rs`); a directory the kernel does not
/// hold has no watcher. One that moved before it was listed stays as it is (its entries are
/// local changes, which the update keeps away from).
fn load_if_held(inner: &mut Inner, dir: u64, dir_path: &[u8]) -> Result<()> {
    let held = inner.entries().get(&dir).is_some_and(|e| {
        e.nlookup > 0
            && matches!(&e.kind, Kind::Dir { source: Some(src), children: None }
                if *src.path == *dir_path)
    });
    if held {
        inner.load(dir)?;
    }
    Ok(())
}
