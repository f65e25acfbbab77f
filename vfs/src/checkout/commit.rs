//! `commit` of a working copy: the changed paths read, the changeset written, the journal
//! rebased on it.

use super::*;
use crate::wc::status::StatusRequest;
use crate::wc::{FileData, Inner, Kind, LinkData, Result, WcError, WorkingCopy};
use revfs_store::commit::{Change, CommitRequest};
use revfs_store::manifest::{FileFlag, Manifest};
use revfs_store::{Node, Repo, StoreError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

/// A committed path as it was read for the commit.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Captured {
    File { data: Vec<u8>, exec: bool },
    Link(Vec<u8>),
}

impl WorkingCopy {
    pub(super) fn capture(&self, inner: &mut Inner, path: &[u8]) -> Result<Option<Captured>> {
        let Some(ino) = inner.resolve(path)? else {
            return Ok(None);
        };
        let e = inner.entry(ino)?;
        let exec = e.mode & 0o100 != 0;
        let read_store = |p: &[u8], n: &Node| -> Result<Vec<u8>> {
            let fl = inner.repo().filelog(p)?;
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
        let (p1, repo, base, files, captured) = self.read_chosen(chosen, progress)?;
        let t_read = t0.elapsed();
        drop(base);
        if files.is_empty() {
            return Err(WcError::NothingChanged);
        }
        let branch = match (&spec.branch, repo.changelog().rev_of(&p1)) {
            (Some(b), _) => (b != b"default").then(|| b.clone()),
            (None, Some(rev)) if !p1.is_null() => {
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
        let held = self.base_manifest();
        let (node, manifest) = revfs_store::commit::commit_over(&repo, &req, Some(&held))?;
        drop(held);
        let t_write = t0.elapsed();
        let repo = Arc::new(Repo::open(repo.root())?);
        if repo.changelog().rev_of(&node).is_none() {
            return Err(StoreError::UnknownRevision(node.to_hex()).into());
        }
        // The manifest just written, without reading it back.
        let new_base = Arc::new(manifest);

        let mut inner = self.write();
        let freed = self.settle_committed(&mut inner, &captured, &new_base, progress)?;
        let t_finish = t0.elapsed();
        tick(progress, "saving", 0, 0);
        let committed: BTreeSet<Vec<u8>> = req.files.keys().cloned().collect();
        inner.move_base(new_base, node, repo, &committed);
        // A commit of revfs's own is never inside an hg transaction.
        inner.set_provisional(false);
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

    /// Reads the chosen paths (`letter`, `path`) as they are now, under the lock: each
    /// file's content and flag, with its copy source when the parent has it; the parent,
    /// its repository handle and manifest, the changes to commit and what was read of each.
    #[allow(clippy::type_complexity)]
    fn read_chosen(
        &self,
        chosen: Vec<(char, Vec<u8>)>,
        progress: Option<ProgressFn>,
    ) -> Result<(
        Node,
        Arc<Repo>,
        Arc<Manifest>,
        BTreeMap<Vec<u8>, Change>,
        BTreeMap<Vec<u8>, Captured>,
    )> {
        let mut inner = self.write();
        let (p1, repo, base) = (
            inner.base_node(),
            inner.repo().clone(),
            inner.base().clone(),
        );
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
                .copies()
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
        Ok((p1, repo, base, files, captured))
    }

    /// The committed files that are still what was committed become the new parent's
    /// (`new_base`) store files again, their times kept; returns the overlay files they
    /// held, to remove once the lock is released.
    fn settle_committed(
        &self,
        inner: &mut Inner,
        captured: &BTreeMap<Vec<u8>, Captured>,
        new_base: &Manifest,
        progress: Option<ProgressFn>,
    ) -> Result<Vec<u64>> {
        let mut freed = Vec::new();
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
            if self.capture(inner, path)?.as_ref() != Some(cap) {
                continue;
            }
            // The times stay what the user saw: an overlay file's are its content's (its
            // change time the later of the two); a file of the store keeps its own.
            let e = inner.entry(ino)?;
            if e.nlink() > 1 || WorkingCopy::is_pinned(inner, ino) {
                // A file with hard links stays in the overlay, one inode for its names (its
                // content is the committed one: status compares it and finds it clean); so
                // does one the kernel writes directly (passthrough), which its writers keep
                // writing.
                continue;
            }
            let overlay_mtime = match e.kind {
                Kind::File(FileData::Overlay { id }) => {
                    Some(self.overlay.mtime(id).unwrap_or_else(|_| SystemTime::now()))
                }
                _ => None,
            };
            let kind = Kind::from_store(path, mnode, mflag);
            let e = inner.entry_mut(ino)?;
            if let Kind::File(FileData::Overlay { id }) = std::mem::replace(&mut e.kind, kind) {
                freed.push(id);
            }
            if let Some(mtime) = overlay_mtime {
                e.mtime = Some(mtime);
                e.ctime = Some(e.ctime.map_or(mtime, |c| c.max(mtime)));
            }
        }
        tick(progress, "finishing", total, total);
        Ok(freed)
    }
}
