//! Moving a working copy to a new parent revision without a checkout: `commit` (the new
//! changeset becomes the parent and the committed changes stop being changes) and `update`
//! (the tree becomes another revision's, in place, with the local changes carried over).
//!
//! Both work in time proportional to what changed: commit reads only the committed paths,
//! update walks the manifest diff and touches only the inodes on it (unchanged files keep
//! their inodes and the kernel's caches). Both end by rewriting the journal against the new
//! parent ([`WorkingCopy::rebase_journal`], here): the rewritten journal describes, with
//! `Remove`, `Put`, `SetMode`, `SetOwner`, `Times`, xattr, `Track` and `Copy` records, exactly how
//! the working copy differs from the new parent, so a remount (or a daemon killed afterwards)
//! finds it again. The journal's header is the authority on the working-copy parent: it is
//! renamed into place in one step, after the store has the new changeset.
//!
//! Submodules: `commit` (capture and commit), `update` (the manifest diff
//! applied in place) and `prefetch` (a revision's files read ahead).

mod commit;
mod prefetch;
mod reparent;
pub use reparent::HgFiles;
mod update;
pub use update::UpdateHow;

use crate::wc::journal::{PutEntry, Record, Track};
use crate::wc::Invalidation;
use crate::wc::{
    perm_of_flag, target_at, unix_time, FileData, Inner, Kind, LinkData, PathChange, Result,
    Target, Walk, WcError, WorkingCopy, ROOT_INO,
};
use revfs_store::manifest::{FileFlag, Manifest};
use revfs_store::Node;
use std::collections::BTreeSet;
use std::time::SystemTime;

/// Receives how far a long operation has come: `(what, done, total)`, `total` 0 when the
/// amount of work is unknown. Called per unit of work at most (per file captured, applied
/// or read); the receiver rate-limits what it shows, so it must be cheap.
pub type ProgressFn<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// Calls `progress`, if any.
fn tick(progress: Option<ProgressFn>, what: &str, done: usize, total: usize) {
    if let Some(f) = progress {
        f(what, done as u64, total as u64);
    }
}

/// What a prefetch read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchOutcome {
    pub files: u64,
    pub bytes: u64,
}

/// What a commit is made of, besides the changes.
#[derive(Debug, Clone)]
pub struct CommitSpec {
    /// Paths to commit (those that are M, A or R); `None` commits every change.
    pub paths: Option<Vec<Vec<u8>>>,
    pub user: Vec<u8>,
    /// Seconds since the epoch.
    pub time: i64,
    /// Seconds west of UTC.
    pub tz: i32,
    pub description: Vec<u8>,
    /// The working copy's branch (the share's `branch` file, which `hg branch` sets);
    /// `None`: the parent's.
    pub branch: Option<Vec<u8>>,
}

/// What an update did.
#[derive(Debug, Default)]
pub struct UpdateOutcome {
    /// Files written (added or changed), as hg counts "files updated".
    pub updated: usize,
    /// Files removed.
    pub removed: usize,
    /// Inodes and names the kernel must forget.
    pub invalidations: Vec<Invalidation>,
    /// Paths reverted by `--clean` (invalidated by path).
    pub reverted: Vec<Vec<u8>>,
    /// The paths changed, what each was and is, for inotify watchers (`fuse/events.rs`
    /// orders the calls that tell them).
    pub changes: Vec<PathChange>,
    /// The new parent's branch name (`default` for the null revision).
    pub branch: Vec<u8>,
}

/// A working-copy path as the journal rewrite sees it.
enum Cur {
    Absent,
    Dir {
        mode: u32,
    },
    Item {
        entry: PutEntry,
        mode: u32,
        mtime: Option<SystemTime>,
        /// The store revision the content is, when it comes from the store.
        store: Option<Node>,
        link: bool,
    },
}

/// The proper ancestors of `path` ("a", "a/b" for "a/b/c").
fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.iter()
        .enumerate()
        .filter(|(_, &b)| b == b'/')
        .map(move |(i, _)| &path[..i])
}

/// For a name of a file with hard links that is not its first, the path of the first
/// (which a rewritten journal puts, then links the others to).
fn other_name_of(inner: &Inner, ino: Option<u64>, path: &[u8]) -> Result<Option<Vec<u8>>> {
    let Some(ino) = ino else {
        return Ok(None);
    };
    if inner.entry(ino)?.links.is_none() {
        return Ok(None);
    }
    Ok(inner.path_of(ino).filter(|first| first.as_slice() != path))
}

fn under_any(set: &BTreeSet<Vec<u8>>, path: &[u8]) -> bool {
    !set.is_empty() && ancestors(path).any(|a| set.contains(a))
}

fn join(parts: &[&[u8]]) -> Vec<u8> {
    parts.join(&b'/')
}

impl WorkingCopy {
    fn cur_at(&self, inner: &mut Inner, path: &[u8]) -> Result<Cur> {
        let ino = inner.resolve(path)?;
        self.cur_of(inner, ino)
    }

    /// What is at inode `ino` (a path's, resolved), as the journal rewrite sees it.
    fn cur_of(&self, inner: &Inner, ino: Option<u64>) -> Result<Cur> {
        let Some(ino) = ino else {
            return Ok(Cur::Absent);
        };
        let e = inner.entry(ino)?;
        let mode = e.mode;
        let mtime = e.mtime;
        Ok(match &e.kind {
            Kind::Dir { .. } => Cur::Dir { mode },
            Kind::File(FileData::Store { path, node, .. }) => Cur::Item {
                entry: PutEntry::StoreFile {
                    source: path.to_vec(),
                    node: *node,
                },
                mode,
                mtime,
                store: Some(*node),
                link: false,
            },
            Kind::File(FileData::Overlay { id }) => Cur::Item {
                entry: PutEntry::OverlayFile { id: *id },
                mode,
                mtime: None,
                store: None,
                link: false,
            },
            Kind::Symlink(LinkData::Store { path, node }) => Cur::Item {
                entry: PutEntry::StoreLink {
                    source: path.to_vec(),
                    node: *node,
                },
                mode,
                mtime,
                store: Some(*node),
                link: true,
            },
            Kind::Symlink(LinkData::Local(t)) => Cur::Item {
                entry: PutEntry::LocalLink { target: t.to_vec() },
                mode,
                mtime,
                store: None,
                link: true,
            },
            Kind::Special { kind, rdev } => Cur::Item {
                entry: PutEntry::Special {
                    kind: *kind,
                    rdev: *rdev,
                },
                mode,
                mtime,
                store: None,
                link: false,
            },
        })
    }

    /// While the parent is provisional (set inside an hg transaction, which may be rolled
    /// back) the journal keeps the last parent set outside one (see
    /// [`Self::rebase_journal`]): an update then journals what it
    /// made of each of `paths` as state records (`Put`, `Remove`), so that a replay on the
    /// committed parent gives the files as they are now (as a clone whose transaction is
    /// rolled back keeps the files the update wrote). A file revision the transaction
    /// added, which its rollback takes away, is copied into the overlay first. Paths whose
    /// content is local (overlay files, local links) were not the update's doing and are
    /// in the journal already.
    pub(crate) fn journal_pending_update(
        &self,
        inner: &mut Inner,
        paths: &BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        let repo = inner.repo().clone();
        tracing::info!(
            paths = paths.len(),
            "provisional parent: the update's files journaled"
        );
        for p in paths {
            match self.cur_at(inner, p)? {
                Cur::Absent => {
                    // The highest directory gone with it goes in the same record.
                    let mut top = p.as_slice();
                    for a in ancestors(p) {
                        if inner.resolve(a)?.is_none() {
                            top = a;
                            break;
                        }
                    }
                    self.record(inner, Record::Remove { path: top.to_vec() })?;
                }
                Cur::Item {
                    entry,
                    mode,
                    mtime,
                    store: Some(node),
                    link,
                } => {
                    let entry = match entry {
                        PutEntry::StoreFile { source, .. } | PutEntry::StoreLink { source, .. }
                            if repo.is_pending_file(&source, &node)? =>
                        {
                            let ino = inner.resolve(p)?.ok_or(WcError::NotFound)?;
                            if link {
                                let text = self.store_text(&repo, &source, &node)?;
                                let mut target = Vec::new();
                                std::io::Read::read_to_end(&mut text.reader(), &mut target)?;
                                inner.entry_mut(ino)?.kind =
                                    Kind::Symlink(LinkData::Local(target.as_slice().into()));
                                PutEntry::LocalLink { target }
                            } else {
                                let id = inner.new_overlay_id();
                                self.copy_to_overlay(id, &repo, &source, &node)?;
                                let _ = self
                                    .overlay
                                    .set_mtime(id, mtime.unwrap_or(self.checkout_time));
                                inner.entry_mut(ino)?.kind = Kind::File(FileData::Overlay { id });
                                PutEntry::OverlayFile { id }
                            }
                        }
                        e => e,
                    };
                    self.record(
                        inner,
                        Record::Put {
                            path: p.clone(),
                            entry,
                            mode,
                            mtime: mtime.map(unix_time),
                        },
                    )?;
                }
                Cur::Item { .. } | Cur::Dir { .. } => {}
            }
        }
        Ok(())
    }

    /// Rewrites the journal so that it describes the working copy against `inner.base()`
    /// (already the new parent), and rebuilds the dirty set from it. `committed` paths
    /// lose their tracking overrides and copy sources.
    pub(crate) fn rebase_journal(
        &self,
        inner: &mut Inner,
        committed: &BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        if inner.provisional() {
            // The parent was set inside an hg transaction, which may still be rolled back:
            // the journal keeps the last parent set outside one and its records; file changes
            // are appended to it as they come, so that a daemon killed now comes back as a
            // clone whose transaction was rolled back: the parent of before, the files as
            // written. The dirty set stays a superset of what differs from the parent; the
            // journal is rewritten when a parent comes from outside a transaction again.
            // Tracking overrides are settled against it as below, in memory only.
            inner.settle_tracking(committed)?;
            tracing::info!(parent = %inner.base_node().to_hex(), "provisional parent: journal kept");
            return Ok(());
        }
        let t0 = std::time::Instant::now();
        let base = inner.base().clone();
        let cands = self.rebase_candidates(inner, &base)?;
        let t_cands = t0.elapsed();
        let (mut records, put_paths) = self.path_records(inner, &base, cands)?;
        let t_paths = t0.elapsed();
        let t_attrs = self.attribute_records(inner, put_paths, &mut records, t0)?;
        // Tracking overrides and copies that still mean something against the new parent.
        inner.settle_tracking(committed)?;
        for (path, &track) in inner.tracking() {
            records.push(Record::Track {
                path: path.clone(),
                track,
            });
        }
        for (dest, source) in inner.copies() {
            records.push(Record::Copy {
                dest: dest.clone(),
                source: source.clone(),
            });
        }
        if !inner.p2().is_null() {
            records.push(Record::MergeParent { node: inner.p2() });
            for path in inner.merged_from_p2() {
                records.push(Record::FromP2 {
                    path: path.clone(),
                    on: true,
                });
            }
        }
        let t_records = t0.elapsed();
        // The feed's last batch goes out first: after the rewrite the journal no longer
        // names its paths (`wc/changes.rs`).
        self.flush_feed();
        if let Err(e) = self.journal().rewrite(&inner.base_node(), &records) {
            tracing::error!(
                "rewriting the journal failed: {e}; refusing further changes until a remount"
            );
            self.journal_stale
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(e.into());
        }
        // The tracking is journaled whole: nothing tentative is left.
        inner.journaled(
            records
                .iter()
                .flat_map(|r| r.paths().into_iter().map(<[u8]>::to_vec))
                .collect(),
        );
        tracing::debug!(?t_cands, ?t_paths, ?t_attrs, ?t_records, total = ?t0.elapsed(), "rebase timings");
        tracing::info!(
            records = records.len(),
            changed = inner.dirty().len(),
            parent = %inner.base_node().to_hex(),
            "journal rewritten"
        );
        Ok(())
    }

    /// The paths that may differ from the new parent `base`: the dirty ones, their
    /// ancestors, everything below dirty directories, here and in the new parent.
    fn rebase_candidates(&self, inner: &mut Inner, base: &Manifest) -> Result<BTreeSet<Vec<u8>>> {
        let mut cands: BTreeSet<Vec<u8>> = BTreeSet::new();
        let dirty: Vec<Vec<u8>> = inner.dirty().iter().cloned().collect();
        let mut walk = Walk::default();
        for d in &dirty {
            if d.is_empty() {
                continue;
            }
            for a in ancestors(d) {
                if !cands.contains(a) {
                    cands.insert(a.to_vec());
                }
            }
            cands.insert(d.clone());
            if let Some(ino) = inner.resolve_walk(&mut walk, d)? {
                if inner.is_dir(ino) {
                    self.paths_below(inner, ino, d, true, &mut cands)?;
                }
            }
            let mut prefix = d.clone();
            prefix.push(b'/');
            for e in base.iter_prefix(&prefix) {
                let e = e?;
                for a in ancestors(e.path).filter(|a| a.len() > d.len()) {
                    cands.insert(a.to_vec());
                }
                cands.insert(e.path.to_vec());
            }
        }
        Ok(cands)
    }

    /// The records that put each candidate path as the working copy has it against the
    /// new parent `base` (a removal, a mode, a put), the other names of hard-linked files
    /// last; and the paths put.
    fn path_records(
        &self,
        inner: &mut Inner,
        base: &Manifest,
        cands: BTreeSet<Vec<u8>>,
    ) -> Result<(Vec<Record>, BTreeSet<Vec<u8>>)> {
        let mut records = Vec::new();
        if let Ok(root) = inner.entry(ROOT_INO) {
            if root.mode != 0o755 {
                records.push(Record::SetMode {
                    path: Vec::new(),
                    mode: root.mode,
                });
            }
        }
        // Subtrees already described (nothing below them needs a record) and directories
        // that are new (nothing below them is in the parent).
        let mut done: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut fresh: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut put_paths: BTreeSet<Vec<u8>> = BTreeSet::new();
        // The other names of files with hard links, made after everything is put.
        let mut links: Vec<Record> = Vec::new();
        // The candidates are sorted: each path resolves from the directories it shares with
        // the one before.
        let mut walk = Walk::default();
        for p in cands {
            if under_any(&done, &p) {
                continue;
            }
            let target = if under_any(&fresh, &p) {
                Target::Absent
            } else {
                target_at(base, &p)?
            };
            let ino = inner.resolve_walk(&mut walk, &p)?;
            if let Some(from) = other_name_of(inner, ino, &p)? {
                if target != Target::Absent {
                    records.push(Record::Remove { path: p.clone() });
                }
                links.push(Record::Link {
                    from,
                    to: p.clone(),
                });
                done.insert(p);
                continue;
            }
            match self.cur_of(inner, ino)? {
                Cur::Absent => {
                    if target != Target::Absent {
                        records.push(Record::Remove { path: p.clone() });
                    }
                    done.insert(p);
                }
                Cur::Dir { mode } => match target {
                    Target::Dir => {
                        if mode != 0o755 {
                            records.push(Record::SetMode { path: p, mode });
                        }
                    }
                    Target::File(..) | Target::Absent => {
                        if target != Target::Absent {
                            records.push(Record::Remove { path: p.clone() });
                        }
                        records.push(Record::Put {
                            path: p.clone(),
                            entry: PutEntry::Dir,
                            mode,
                            mtime: None,
                        });
                        fresh.insert(p);
                    }
                },
                Cur::Item {
                    entry,
                    mode,
                    mtime,
                    store,
                    link,
                } => {
                    let same = match target {
                        Target::File(node, flag) => {
                            store == Some(node)
                                && link == (flag == FileFlag::Symlink)
                                && (link || mode == perm_of_flag(flag))
                        }
                        _ => false,
                    };
                    if !same {
                        if target == Target::Dir {
                            records.push(Record::Remove { path: p.clone() });
                        }
                        records.push(Record::Put {
                            path: p.clone(),
                            entry,
                            mode,
                            mtime: mtime.map(unix_time),
                        });
                        put_paths.insert(p.clone());
                    }
                    done.insert(p);
                }
            }
        }
        records.extend(links);
        Ok((records, put_paths))
    }

    /// Appends the records of attributes no path record carries (owners, access times,
    /// extended attributes) and of the times a replay would not rebuild; returns when the
    /// attributes were done, from `t0`, for the timings.
    fn attribute_records(
        &self,
        inner: &mut Inner,
        put_paths: BTreeSet<Vec<u8>>,
        records: &mut Vec<Record>,
        t0: std::time::Instant,
    ) -> Result<std::time::Duration> {
        // Attributes no record above carries, in one pass over the inodes: owners, access
        // times and extended attributes, then the times a replay of the records would not
        // rebuild (`Times`): every entry with a change time or (not an overlay file) a
        // modification time of its own, what the records put, and the directories they put
        // into or remove from (their replay stamps them). None changes a status.
        let mut timed: BTreeSet<Vec<u8>> = put_paths;
        for r in records.iter() {
            if let Record::Put { path, .. } | Record::Remove { path } = r {
                timed.insert(parent_of(path).to_vec());
            }
        }
        let own_time = |e: &crate::wc::Entry| {
            e.ctime.is_some()
                || (e.mtime.is_some() && !matches!(e.kind, Kind::File(FileData::Overlay { .. })))
        };
        let mut attrs: Vec<u64> = inner
            .entries()
            .iter()
            .filter(|(ino, e)| {
                (e.parent != 0 || **ino == ROOT_INO)
                    && (own_time(e) || e.owner.is_some() || e.atime.is_some() || e.xattrs.is_some())
            })
            .map(|(ino, _)| *ino)
            .collect();
        attrs.sort_unstable();
        for ino in attrs {
            let (Some(path), Ok(e)) = (inner.path_of(ino), inner.entry(ino)) else {
                continue;
            };
            if ino != ROOT_INO {
                if let Some((uid, gid)) = e.owner {
                    records.push(Record::SetOwner {
                        path: path.clone(),
                        uid,
                        gid,
                    });
                }
                if let Some(t) = e.atime {
                    let (secs, nanos) = unix_time(t);
                    records.push(Record::SetAtime {
                        path: path.clone(),
                        secs,
                        nanos,
                    });
                }
            }
            for (name, value) in e.xattrs.iter().flat_map(|x| x.iter()) {
                records.push(Record::SetXattr {
                    path: path.clone(),
                    name: name.to_vec(),
                    value: value.to_vec(),
                });
            }
            if own_time(e) {
                timed.insert(path);
            }
        }
        let mut walk = Walk::default();
        let t_attrs = t0.elapsed();
        for path in timed {
            let Some(ino) = inner.resolve_walk(&mut walk, &path)? else {
                continue;
            };
            let e = inner.entry(ino)?;
            let mtime = e.mtime.unwrap_or(self.checkout_time);
            let ctime = e.ctime.unwrap_or(mtime);
            let mtime =
                (!matches!(e.kind, Kind::File(FileData::Overlay { .. }))).then(|| unix_time(mtime));
            records.push(Record::Times {
                path,
                mtime,
                ctime: unix_time(ctime),
            });
        }
        Ok(t_attrs)
    }
}

/// The directory part of a repository path ("" for a path at the root).
fn parent_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => &[],
    }
}
