//! Moving a working copy to a new parent revision without a checkout: `commit` (the new
//! changeset becomes the parent and the committed changes stop being changes) and `update`
//! (the tree becomes another revision's, in place, with the local changes carried over).
//!
//! Both work in time proportional to what changed: commit reads only the committed paths,
//! update walks the manifest diff and touches only the inodes on it (unchanged files keep
//! their inodes and the kernel's caches). Both end by rewriting the journal against the new
//! parent ([`WorkingCopy::rebase_journal`]): the rewritten journal describes, with `Remove`,
//! `Put`, `SetMode`, `SetMtime`, `Track` and `Copy` records, exactly how the working copy
//! differs from the new parent, so a remount (or a daemon killed afterwards) finds it again.
//! The journal's header is the authority on the working-copy parent: it is renamed into place
//! in one step, after the store has the new changeset.

use crate::journal::{PutEntry, Record, Track};
use crate::status::StatusRequest;
use crate::wc::{
    perm_of_flag, unix_time, DirSource, FileData, Inner, Kind, LinkData, Result, WcError,
    WorkingCopy, ROOT_INO,
};
use revfs_store::commit::{Change, CommitRequest};
use revfs_store::manifest::{FileFlag, Manifest};
use revfs_store::{Node, Repo, StoreError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

/// What the kernel must forget after revfs changed the tree behind its back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidation {
    /// Name `name` in directory `parent` (negative entries included).
    Entry { parent: u64, name: Box<[u8]> },
    /// The data, attributes and (for a directory) cached listing of an inode.
    Inode(u64),
}

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
}

/// A committed path as it was read for the commit.
#[derive(Debug, PartialEq, Eq)]
enum Captured {
    File { data: Vec<u8>, exec: bool },
    Link(Vec<u8>),
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

/// What the new parent's manifest has at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Absent,
    Dir,
    File(Node, FileFlag),
}

fn target_at(m: &Manifest, path: &[u8]) -> Result<Target> {
    if path.is_empty() {
        return Ok(Target::Dir);
    }
    if let Some(e) = m.find(path)? {
        return Ok(Target::File(e.node, e.flag));
    }
    let mut prefix = path.to_vec();
    prefix.push(b'/');
    Ok(if m.iter_prefix(&prefix).next().is_some() {
        Target::Dir
    } else {
        Target::Absent
    })
}

/// The proper ancestors of `path` ("a", "a/b" for "a/b/c").
fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.iter()
        .enumerate()
        .filter(|(_, &b)| b == b'/')
        .map(move |(i, _)| &path[..i])
}

fn under_any(set: &BTreeSet<Vec<u8>>, path: &[u8]) -> bool {
    !set.is_empty() && ancestors(path).any(|a| set.contains(a))
}

fn join(parts: &[&[u8]]) -> Vec<u8> {
    parts.join(&b'/')
}

impl WorkingCopy {
    fn cur_at(&self, inner: &mut Inner, path: &[u8]) -> Result<Cur> {
        let Some(ino) = inner.resolve(path)? else {
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

    /// Rewrites the journal so that it describes the working copy against `inner.base`
    /// (already the new parent), and rebuilds the dirty set from it. `committed` paths
    /// lose their tracking overrides and copy sources.
    pub(crate) fn rebase_journal(
        &self,
        inner: &mut Inner,
        committed: &BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        let base = inner.base.clone();
        // The paths that may differ from the new parent: the dirty ones, their ancestors,
        // everything below dirty directories, here and in the new parent.
        let mut cands: BTreeSet<Vec<u8>> = BTreeSet::new();
        let dirty: Vec<Vec<u8>> = inner.dirty.iter().cloned().collect();
        for d in &dirty {
            if d.is_empty() {
                continue;
            }
            for a in ancestors(d) {
                cands.insert(a.to_vec());
            }
            cands.insert(d.clone());
            if let Some(ino) = inner.resolve(d)? {
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
        for p in cands {
            if under_any(&done, &p) {
                continue;
            }
            let target = if under_any(&fresh, &p) {
                Target::Absent
            } else {
                target_at(&base, &p)?
            };
            match self.cur_at(inner, &p)? {
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
        // Attributes no record above carries, in one pass over the inodes: owners, access
        // times and extended attributes, then the times a replay of the records would not
        // rebuild (`Times`): every entry with a change time or (not an overlay file) a
        // modification time of its own, what the records put, and the directories they put
        // into or remove from (their replay stamps them). None changes a status.
        let mut timed: BTreeSet<Vec<u8>> = put_paths;
        for r in &records {
            if let Record::Put { path, .. } | Record::Remove { path } = r {
                timed.insert(parent_of(path).to_vec());
            }
        }
        let own_time = |e: &crate::wc::Entry| {
            e.ctime.is_some()
                || (e.mtime.is_some() && !matches!(e.kind, Kind::File(FileData::Overlay { .. })))
        };
        let mut attrs: Vec<u64> = inner
            .entries
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
        for path in timed {
            let Some(ino) = inner.resolve(&path)? else {
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
        // Tracking overrides that still mean something against the new parent.
        let mut tracking = BTreeMap::new();
        for (p, t) in std::mem::take(&mut inner.tracking) {
            let in_base = base.find(&p)?.is_some();
            let keep = !committed.contains(&p)
                && match t {
                    Track::Added => !in_base,
                    Track::Removed => in_base,
                    Track::Default => false,
                };
            if keep {
                records.push(Record::Track {
                    path: p.clone(),
                    track: t,
                });
                tracking.insert(p, t);
            }
        }
        inner.tracking = tracking;
        let copies: BTreeMap<Vec<u8>, Vec<u8>> = std::mem::take(&mut inner.copies)
            .into_iter()
            .filter(|(dest, _)| !committed.contains(dest))
            .collect();
        for (dest, source) in &copies {
            records.push(Record::Copy {
                dest: dest.clone(),
                source: source.clone(),
            });
        }
        inner.copies = copies;
        if let Err(e) = self.journal().rewrite(&inner.base_node, &records) {
            tracing::error!(
                "rewriting the journal failed: {e}; refusing further changes until a remount"
            );
            self.journal_stale
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(e.into());
        }
        inner.dirty = records
            .iter()
            .flat_map(|r| r.paths().into_iter().map(<[u8]>::to_vec))
            .collect();
        tracing::info!(
            records = records.len(),
            changed = inner.dirty.len(),
            parent = %inner.base_node.to_hex(),
            "journal rewritten"
        );
        Ok(())
    }

    fn capture(&self, inner: &mut Inner, path: &[u8]) -> Result<Option<Captured>> {
        let Some(ino) = inner.resolve(path)? else {
            return Ok(None);
        };
        let e = inner.entry(ino)?;
        let exec = e.mode & 0o100 != 0;
        let read_store = |p: &[u8], n: &Node| -> Result<Vec<u8>> {
            let fl = inner.repo.filelog(p)?;
            Ok(fl.read(fl.rev_of(n)?)?.to_vec())
        };
        Ok(Some(match &e.kind {
            Kind::Dir { .. } => return Ok(None),
            Kind::File(FileData::Overlay { id }) => Captured::File {
                data: self.overlay.read_all(*id)?,
                exec,
            },
            Kind::File(FileData::Store { path, node, .. }) => Captured::File {
                data: read_store(path, node)?,
                exec,
            },
            Kind::Symlink(LinkData::Local(t)) => Captured::Link(t.to_vec()),
            Kind::Symlink(LinkData::Store { path, node }) => {
                Captured::Link(read_store(path, node)?)
            }
            // Not something a commit can hold.
            Kind::Special { .. } => return Ok(None),
        }))
    }

    /// Commits the working copy's changes (all, or `spec.paths`) as a child of its parent,
    /// makes the new changeset the parent and returns its node. A write that races with the
    /// commit is either in it or still a change afterwards: the committed overlay copies are
    /// only dropped when their content is still what was committed.
    ///
    /// `progress` hears of the phases: `checking` (status), `reading` (per file captured),
    /// `writing` (the store transaction, no count), `finishing` (per committed file
    /// compared with what the store now has), `saving` (the journal rewrite, no count).
    pub fn commit(&self, spec: &CommitSpec, progress: Option<ProgressFn>) -> Result<Node> {
        let _one = self.transition_lock();
        let t0 = std::time::Instant::now();
        tick(progress, "checking", 0, 0);
        let status = self.status(StatusRequest::default())?;
        let t_status = t0.elapsed();
        let wanted: Option<BTreeSet<&[u8]>> = spec
            .paths
            .as_ref()
            .map(|v| v.iter().map(Vec::as_slice).collect());
        let chosen: Vec<(char, Vec<u8>)> = status
            .into_iter()
            .filter(|e| matches!(e.letter, 'M' | 'A' | 'R'))
            .filter(|e| {
                wanted
                    .as_ref()
                    .is_none_or(|w| w.contains(e.path.as_slice()))
            })
            .map(|e| (e.letter, e.path))
            .collect();
        if chosen.is_empty() {
            return Err(WcError::NothingChanged);
        }
        let (p1, repo, base, files, captured) = {
            let mut inner = self.write();
            let (p1, repo, base) = (inner.base_node, inner.repo.clone(), inner.base.clone());
            let mut files = BTreeMap::new();
            let mut captured = BTreeMap::new();
            let total = chosen.len();
            for (i, (letter, path)) in chosen.into_iter().enumerate() {
                tick(progress, "reading", i, total);
                if letter == 'R' {
                    files.insert(path, Change::Remove);
                    continue;
                }
                let Some(cap) = self.capture(&mut inner, &path)? else {
                    continue;
                };
                let copy_from = inner
                    .copies
                    .get(&path)
                    .filter(|src| matches!(base.find(src), Ok(Some(_))))
                    .cloned();
                let (data, flag) = match &cap {
                    Captured::File { data, exec } => (
                        data.clone(),
                        if *exec {
                            FileFlag::Executable
                        } else {
                            FileFlag::Regular
                        },
                    ),
                    Captured::Link(t) => (t.clone(), FileFlag::Symlink),
                };
                files.insert(
                    path.clone(),
                    Change::Set {
                        data,
                        flag,
                        copy_from,
                    },
                );
                captured.insert(path, cap);
            }
            tick(progress, "reading", total, total);
            (p1, repo, base, files, captured)
        };
        let t_read = t0.elapsed();
        drop(base);
        if files.is_empty() {
            return Err(WcError::NothingChanged);
        }
        let branch = match repo.changelog().rev_of(&p1) {
            Some(rev) if !p1.is_null() => {
                let b = repo.changeset(rev)?.branch().to_vec();
                (b != b"default").then_some(b)
            }
            _ => None,
        };
        let req = CommitRequest {
            p1,
            p2: Node::NULL,
            files,
            user: spec.user.clone(),
            time: spec.time,
            tz: spec.tz,
            description: spec.description.clone(),
            branch,
        };
        tick(progress, "writing", 0, 0);
        let (node, manifest) = revfs_store::commit::commit_with_manifest(&repo, &req)?;
        let t_write = t0.elapsed();
        let repo = Arc::new(Repo::open(repo.root())?);
        if repo.changelog().rev_of(&node).is_none() {
            return Err(StoreError::UnknownRevision(node.to_hex()).into());
        }
        // The manifest just written, without reading it back.
        let new_base = Arc::new(manifest);

        let mut freed = Vec::new();
        let mut inner = self.write();
        let total = captured.len();
        for (i, (path, cap)) in captured.iter().enumerate() {
            tick(progress, "finishing", i, total);
            let Some(ino) = inner.resolve(path)? else {
                continue;
            };
            let Some(me) = new_base.find(path)? else {
                continue;
            };
            let (mnode, mflag) = (me.node, me.flag);
            // Still what was committed (a write that raced with the commit keeps its copy)?
            if self.capture(&mut inner, path)?.as_ref() != Some(cap) {
                continue;
            }
            let e = inner.entry(ino)?;
            let mtime = match e.kind {
                Kind::File(FileData::Overlay { id }) => self.overlay.mtime(id).ok(),
                _ => e.mtime,
            };
            let kind = Kind::from_store(path, mnode, mflag);
            let e = inner.entry_mut(ino)?;
            if let Kind::File(FileData::Overlay { id }) = std::mem::replace(&mut e.kind, kind) {
                freed.push(id);
            }
            e.mtime = mtime.or(Some(SystemTime::now()));
        }
        tick(progress, "finishing", total, total);
        let t_finish = t0.elapsed();
        tick(progress, "saving", 0, 0);
        inner.base = new_base;
        inner.base_node = node;
        inner.repo = repo;
        let committed: BTreeSet<Vec<u8>> = req.files.keys().cloned().collect();
        self.rebase_journal(&mut inner, &committed)?;
        drop(inner);
        tracing::debug!(
            ?t_status,
            ?t_read,
            ?t_write,
            ?t_finish,
            total = ?t0.elapsed(),
            files = req.files.len(),
            "commit timings"
        );
        for id in freed {
            let _ = self.overlay.remove(id);
        }
        Ok(node)
    }

    /// Switches the working copy to revision `node` of `repo` (a fresh handle that knows
    /// it). Local changes are kept when the update does not touch them; otherwise it stops
    /// with [`WcError::UncommittedChanges`] and changes nothing, unless `clean`, which
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
        let _one = self.transition_lock();
        let t0 = std::time::Instant::now();
        tick(progress, "checking", 0, 0);
        let target = Arc::new(if node.is_null() {
            Manifest::empty()
        } else {
            let rev = repo
                .changelog()
                .rev_of(&node)
                .ok_or_else(|| StoreError::UnknownRevision(node.to_hex()))?;
            repo.manifest_of(rev)?
        });
        let mut out = UpdateOutcome::default();
        let mut reverted: BTreeSet<Vec<u8>> = BTreeSet::new();
        // Tracked files already gone (R, !): hg's working manifest does not have them, so
        // an update that removes them too neither touches nor counts them.
        let mut gone: BTreeSet<Vec<u8>> = BTreeSet::new();
        if clean {
            let base = self.base_manifest();
            for e in self.status(StatusRequest::default())? {
                let added = e.letter == 'A' || (e.letter == '!' && base.find(&e.path)?.is_none());
                match e.letter {
                    _ if added => self.set_tracking(&e.path, Track::Default)?,
                    _ => {
                        if e.letter == 'R' {
                            self.set_tracking(&e.path, Track::Default)?;
                        }
                        if matches!(e.letter, 'R' | '!') {
                            gone.insert(e.path.clone());
                        }
                        self.restore(&e.path)?;
                        reverted.insert(e.path);
                    }
                }
            }
            for dest in self.copies().into_keys() {
                self.set_copy(&dest, None)?;
            }
        }
        let t_manifest = t0.elapsed();
        let local: BTreeMap<Vec<u8>, char> = self
            .status(StatusRequest {
                unknown: true,
                ignored: true,
                clean: false,
            })?
            .into_iter()
            .map(|e| (e.path, e.letter))
            .collect();

        let mut inner = self.write();
        let base = inner.base.clone();
        let t_status = t0.elapsed();
        let diff = base.diff(&target)?;
        let t_diff = t0.elapsed();
        // Refuse before changing anything.
        let mut conflicts: Vec<Vec<u8>> = Vec::new();
        let mut replace: BTreeSet<Vec<u8>> = BTreeSet::new();
        for c in &diff {
            let p = &c.path;
            let mut dir_prefix = p.clone();
            dir_prefix.push(b'/');
            let below = local
                .range(dir_prefix.clone()..)
                .next()
                .is_some_and(|(q, _)| q.starts_with(&dir_prefix));
            let above: Vec<&[u8]> = ancestors(p).filter(|a| local.contains_key(*a)).collect();
            match local.get(p) {
                Some('?' | 'I') if c.new.is_some() => {
                    if clean || self.same_as(&mut inner, &repo, p, c.new)? {
                        replace.insert(p.clone());
                    } else {
                        conflicts.push(p.clone());
                    }
                }
                Some('R' | '!') if c.new.is_none() => {
                    gone.insert(p.clone());
                }
                Some(_) => conflicts.push(p.clone()),
                None if below => conflicts.push(p.clone()),
                None if !above.is_empty() => {
                    if clean
                        && c.new.is_some()
                        && above
                            .iter()
                            .all(|a| matches!(local.get(*a), Some('?' | 'I')))
                    {
                        replace.extend(above.iter().map(|a| a.to_vec()));
                    } else {
                        conflicts.push(p.clone());
                    }
                }
                None => {
                    if c.new.is_some()
                        && target_at(&base, p)? != Target::Dir
                        && self.dir_in_the_way(&mut inner, p)?
                    {
                        conflicts.push(p.clone());
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(WcError::UncommittedChanges(conflicts));
        }

        let now = SystemTime::now();
        let mut freed = Vec::new();
        let mut touched: BTreeSet<u64> = BTreeSet::new();
        let mut emptied: BTreeSet<u64> = BTreeSet::new();
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
            match c.new {
                Some(_) => {
                    updated.insert(c.path.clone());
                }
                None if gone.contains(&c.path) => {
                    if !clean {
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
                if self.retarget(&mut inner, dir, &join(&parts[..i]), &target, &mut out)? {
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
                        if let Some(file) = other {
                            // An untracked file where the target has a directory (--clean).
                            freed.extend(inner.detach_tree(file));
                        }
                        let source = DirSource {
                            manifest: target.clone(),
                            path: join(&parts[..=i]).into(),
                        };
                        let kind = Kind::Dir {
                            source: Some(source),
                            children: None,
                        };
                        inner.link_new(dir, part, kind, 0o755)?;
                        out.invalidations.push(Invalidation::Entry {
                            parent: dir,
                            name: (*part).into(),
                        });
                        touched.insert(dir);
                        reached = false;
                        break;
                    }
                }
            }
            if !reached || self.retarget(&mut inner, dir, &join(dirs), &target, &mut out)? {
                continue;
            }
            let existing = inner.child(dir, last)?;
            match (c.new, existing) {
                (None, Some(ino)) => {
                    if !inner.is_dir(ino) {
                        freed.extend(inner.detach(ino));
                        out.invalidations.push(Invalidation::Entry {
                            parent: dir,
                            name: (*last).into(),
                        });
                        touched.insert(dir);
                        emptied.insert(dir);
                    }
                }
                (None, None) => {}
                (Some((fnode, flag)), existing) => {
                    let kind = Kind::from_store(&c.path, fnode, flag);
                    // A file whose only change is its mode keeps its inode.
                    let mode_only = existing.is_some_and(|ino| {
                        matches!(inner.entries.get(&ino).map(|e| &e.kind),
                            Some(Kind::File(FileData::Store { node, .. }))
                                if *node == fnode && flag != FileFlag::Symlink)
                    });
                    if let (true, Some(ino)) = (mode_only, existing) {
                        let e = inner.entry_mut(ino)?;
                        e.mode = perm_of_flag(flag);
                        e.ctime = Some(now);
                        out.invalidations.push(Invalidation::Inode(ino));
                    } else {
                        // Any other change is a new inode, as a checkout that writes a new
                        // file and renames it into place makes one: a process that has the
                        // old file open goes on reading the old revision, whole, and never
                        // a mix of the two.
                        if let Some(ino) = existing {
                            freed.extend(inner.detach_tree(ino));
                        }
                        let ino = inner.link_new(dir, last, kind, perm_of_flag(flag))?;
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
        // Directories left empty by removals go too, as hg removes them.
        for mut dir in emptied {
            while dir != ROOT_INO {
                let empty = matches!(
                    inner.entries.get(&dir).map(|e| &e.kind),
                    Some(Kind::Dir { children: Some(c), .. }) if c.is_empty()
                );
                let Some(e) = inner.entries.get(&dir).filter(|e| e.parent != 0 && empty) else {
                    break;
                };
                let (parent, name) = (e.parent, e.name.clone());
                freed.extend(inner.detach(dir));
                out.invalidations.push(Invalidation::Entry { parent, name });
                touched.insert(parent);
                dir = parent;
            }
        }
        out.invalidations
            .extend(touched.into_iter().map(Invalidation::Inode));
        out.updated = updated.len();
        out.reverted = reverted.into_iter().collect();

        inner.base = target;
        inner.base_node = node;
        inner.repo = repo;
        let t_apply = t0.elapsed();
        self.rebase_journal(&mut inner, &BTreeSet::new())?;
        tracing::debug!(
            ?t_manifest,
            ?t_status,
            ?t_diff,
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

    /// Reads the files `paths` of revision `node` (the working-copy parent when `None`)
    /// through the mount's repository handle, in parallel, so that what the mount reads
    /// from is warm before anyone opens the files: the handle's open filelogs, its cache of
    /// rebuilt texts (bounded in bytes: the last files read stay), and the kernel's page
    /// cache of the revlogs. Paths the revision does not have are skipped. `progress`
    /// hears of `prefetching`, per file read.
    pub fn prefetch(
        &self,
        node: Option<Node>,
        paths: &[Vec<u8>],
        progress: Option<ProgressFn>,
    ) -> Result<PrefetchOutcome> {
        use rayon::prelude::*;
        use std::sync::atomic::{AtomicU64, Ordering};
        let (repo, base_node, base) = {
            let inner = self.read();
            (inner.repo.clone(), inner.base_node, inner.base.clone())
        };
        let (repo, manifest) = match node {
            None => (repo, base),
            Some(n) if n == base_node => (repo, base),
            Some(n) => {
                // A revision hg added since the handle was opened: a fresh handle still
                // warms the page cache.
                let repo = if repo.changelog().rev_of(&n).is_some() {
                    repo
                } else {
                    Arc::new(Repo::open(repo.root())?)
                };
                let rev = repo
                    .changelog()
                    .rev_of(&n)
                    .ok_or_else(|| StoreError::UnknownRevision(n.to_hex()))?;
                let m = Arc::new(repo.manifest_of(rev)?);
                (repo, m)
            }
        };
        let mut wanted: Vec<(&[u8], Node)> = Vec::with_capacity(paths.len());
        for p in paths {
            if let Some(e) = manifest.find(p)? {
                wanted.push((p, e.node));
            }
        }
        let total = wanted.len() as u64;
        let done = AtomicU64::new(0);
        let bytes = AtomicU64::new(0);
        tick(progress, "prefetching", 0, wanted.len());
        wanted
            .par_iter()
            .try_for_each(|(path, fnode)| -> Result<()> {
                // A big text goes to the on-disk cache, where reads will find it.
                let text = self.store_text(&repo, path, fnode)?;
                bytes.fetch_add(text.len(), Ordering::Relaxed);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d & 31 == 0 || d == total {
                    if let Some(f) = progress {
                        f("prefetching", d, total);
                    }
                }
                Ok(())
            })?;
        Ok(PrefetchOutcome {
            files: total,
            bytes: bytes.into_inner(),
        })
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
        match &inner.entry(dir)?.kind {
            Kind::Dir {
                source: Some(_),
                children: None,
            } => {}
            _ => return Ok(false),
        }
        let exists = target_at(target, dir_path)? == Target::Dir;
        let e = inner.entry_mut(dir)?;
        let Kind::Dir {
            source: Some(source),
            children: None,
        } = &mut e.kind
        else {
            return Ok(false);
        };
        if Arc::ptr_eq(&source.manifest, target) {
            return Ok(true);
        }
        if *source.path != *dir_path {
            // A directory moved before it was ever listed: its entries are local changes
            // (the conflict check keeps the update away from them).
            return Ok(true);
        }
        if exists || dir == ROOT_INO {
            source.manifest = target.clone();
        } else {
            let (parent, name) = (e.parent, e.name.clone());
            let freed = inner.detach_tree(dir);
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
                let same = crate::content::same_content(
                    &mut crate::content::FileReader::new(&ours),
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
                    && crate::content::same_content(&mut &data[..], &mut want.reader())?
            }
            Captured::Link(t) => {
                flag == FileFlag::Symlink
                    && t.len() as u64 == want.len()
                    && crate::content::same_content(&mut &t[..], &mut want.reader())?
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

/// The directory part of a repository path ("" for a path at the root).
fn parent_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => &[],
    }
}
