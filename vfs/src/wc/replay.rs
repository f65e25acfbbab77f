//! Replay: a journal record applied to the inode table at mount time (the base tree plus
//! every change made through the mount, as the journal wrote them).

use super::*;

impl WorkingCopy {
    /// Applies a journal record during replay.
    pub(super) fn apply(&self, inner: &mut Inner, rec: &Record) -> Result<()> {
        match rec {
            Record::Create { path, id, mode } => {
                let (parent, name) = inner.resolve_parent(path)?;
                inner.link_new(
                    parent,
                    name,
                    Kind::File(FileData::Overlay { id: *id }),
                    *mode,
                )?;
            }
            Record::Materialize { path, id } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                inner.entry_mut(ino)?.kind = Kind::File(FileData::Overlay { id: *id });
            }
            Record::Mkdir { path, mode } => {
                let (parent, name) = inner.resolve_parent(path)?;
                let dir = Kind::Dir {
                    source: None,
                    children: Some(Children::new()),
                };
                inner.link_new(parent, name, dir, *mode)?;
            }
            Record::Symlink { path, target } => {
                let (parent, name) = inner.resolve_parent(path)?;
                inner.link_new(
                    parent,
                    name,
                    Kind::Symlink(LinkData::Local(target.as_slice().into())),
                    0o777,
                )?;
            }
            Record::Link { from, to } => {
                let ino = inner.resolve(from)?.ok_or(WcError::NotFound)?;
                let (parent, name) = inner.resolve_parent(to)?;
                inner.add_name(ino, parent, name)?;
            }
            Record::Unlink { path } | Record::Rmdir { path } => {
                let (parent, name) = inner.resolve_parent(path)?;
                let ino = inner.child(parent, name)?.ok_or(WcError::NotFound)?;
                if let Some(id) = inner.detach(ino, parent, name) {
                    let _ = self.overlay.remove(id);
                }
            }
            Record::Rename { from, to, flags } => {
                let (sp, sn) = inner.resolve_parent(from)?;
                let (dp, dn) = inner.resolve_parent(to)?;
                if let Some(id) = self.do_rename(inner, sp, sn, dp, dn, *flags)? {
                    let _ = self.overlay.remove(id);
                }
            }
            Record::SetMode { path, mode } => inner.change_at(path, |e| e.mode = *mode)?,
            Record::SetMtime { path, secs, nanos } => {
                inner.change_at(path, |e| e.mtime = Some(system_time(*secs, *nanos)))?
            }
            Record::SetAtime { path, secs, nanos } => {
                inner.change_at(path, |e| e.atime = Some(system_time(*secs, *nanos)))?
            }
            Record::SetOwner { path, uid, gid } => {
                inner.change_at(path, |e| e.owner = Some((*uid, *gid)))?
            }
            Record::Clock { secs, nanos } => inner.op_time = Some(system_time(*secs, *nanos)),
            Record::SetXattr { path, name, value } => inner.change_at(path, |e| {
                e.xattrs
                    .get_or_insert_with(Default::default)
                    .insert(name.as_slice().into(), value.as_slice().into());
            })?,
            Record::RemoveXattr { path, name } => inner.change_at(path, |e| {
                if let Some(x) = &mut e.xattrs {
                    x.remove(name.as_slice());
                    if x.is_empty() {
                        e.xattrs = None;
                    }
                }
            })?,
            Record::Times { path, mtime, ctime } => {
                let ino = inner.resolve(path)?.ok_or(WcError::NotFound)?;
                let e = inner.entry_mut(ino)?;
                if let Some((s, n)) = mtime {
                    if !matches!(e.kind, Kind::File(FileData::Overlay { .. })) {
                        e.mtime = Some(system_time(*s, *n));
                    }
                }
                e.ctime = Some(system_time(ctime.0, ctime.1));
            }
            Record::Track { path, track } => set_track(inner, path, *track),
            Record::Copy { dest, source } => set_copy(inner, dest, source),
            Record::MergeParent { node } => {
                inner.p2 = *node;
                if node.is_null() {
                    inner.from_p2.clear();
                }
            }
            Record::FromP2 { path, on } => {
                if *on {
                    inner.from_p2.insert(path.clone());
                } else {
                    inner.from_p2.remove(path);
                }
            }
            Record::Restore { path } => {
                if let Some(id) = self.do_restore(inner, path)? {
                    let _ = self.overlay.remove(id);
                }
            }
            Record::Special {
                path,
                kind,
                mode,
                rdev,
            } => {
                let (parent, name) = inner.resolve_parent(path)?;
                let special = Kind::Special {
                    kind: *kind,
                    rdev: *rdev,
                };
                inner.link_new(parent, name, special, *mode)?;
            }
            Record::Remove { path } => {
                if let Some(ino) = inner.resolve(path)? {
                    if ino == ROOT_INO {
                        return Err(WcError::Invalid);
                    }
                    let (parent, name) = inner.resolve_parent(path)?;
                    for id in inner.detach_tree(ino, parent, name) {
                        let _ = self.overlay.remove(id);
                    }
                }
            }
            Record::Put {
                path,
                entry,
                mode,
                mtime,
            } => {
                for id in inner.make_room(path, matches!(entry, PutEntry::Dir))? {
                    let _ = self.overlay.remove(id);
                }
                let mtime = mtime.map(|(s, n)| system_time(s, n));
                if let Some(id) = inner.put(path, entry, *mode, mtime)? {
                    let _ = self.overlay.remove(id);
                }
            }
        }
        for p in rec.paths() {
            inner.dirty.insert(p.to_vec());
        }
        Ok(())
    }
}
