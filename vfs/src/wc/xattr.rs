//! Extended attributes (`user.` names) of working-copy entries: kept with the entry,
//! journaled, changing its ctime.

use super::*;

impl WorkingCopy {
    // ----- extended attributes -----

    /// Checks that `ino` may carry the `user.` attribute `name` (as ext4 does: regular
    /// files and directories only).
    pub(super) fn xattr_allowed(&self, inner: &Inner, ino: u64, name: &[u8]) -> Result<()> {
        if !name.starts_with(b"user.") {
            return Err(WcError::NotSupported);
        }
        if name.len() > XATTR_NAME_MAX {
            return Err(WcError::AttrNameTooLong);
        }
        match inner.entry(ino)?.kind {
            Kind::File(_) | Kind::Dir { .. } => Ok(()),
            _ => Err(WcError::NotPermitted),
        }
    }

    /// setxattr: `flags` XATTR_CREATE (1) fails on an existing name, XATTR_REPLACE (2) on
    /// a missing one. Journaled; changes the ctime.
    pub fn set_xattr(&self, ino: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        if value.len() > XATTR_SIZE_MAX {
            return Err(WcError::AttrTooBig);
        }
        self.room()?;
        let mut inner = self.write();
        self.xattr_allowed(&inner, ino, name)?;
        let exists = inner
            .entry(ino)?
            .xattrs
            .as_ref()
            .is_some_and(|x| x.contains_key(name));
        if flags & libc::XATTR_CREATE != 0 && exists {
            return Err(WcError::Exists);
        }
        if flags & libc::XATTR_REPLACE != 0 && !exists {
            return Err(WcError::NoAttr);
        }
        let now = inner.now();
        let path = inner.path_of(ino);
        let e = inner.entry_mut(ino)?;
        e.xattrs
            .get_or_insert_with(Default::default)
            .insert(name.into(), value.into());
        e.ctime = Some(now);
        if let Some(path) = path {
            let rec = Record::SetXattr {
                path,
                name: name.to_vec(),
                value: value.to_vec(),
            };
            self.record(&mut inner, rec)?;
        }
        Ok(())
    }

    /// getxattr.
    pub fn get_xattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        let inner = self.read();
        inner
            .entry(ino)?
            .xattrs
            .as_ref()
            .and_then(|x| x.get(name))
            .map(|v| v.to_vec())
            .ok_or(WcError::NoAttr)
    }

    /// listxattr: the names, each followed by a NUL.
    pub fn list_xattrs(&self, ino: u64) -> Result<Vec<u8>> {
        let inner = self.read();
        let mut out = Vec::new();
        for name in inner.entry(ino)?.xattrs.iter().flat_map(|x| x.keys()) {
            out.extend_from_slice(name);
            out.push(0);
        }
        Ok(out)
    }

    /// removexattr. Journaled; changes the ctime.
    pub fn remove_xattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        if !name.starts_with(b"user.") {
            return Err(WcError::NotSupported);
        }
        let now = inner.now();
        let path = inner.path_of(ino);
        let e = inner.entry_mut(ino)?;
        let Some(x) = &mut e.xattrs else {
            return Err(WcError::NoAttr);
        };
        if x.remove(name).is_none() {
            return Err(WcError::NoAttr);
        }
        if x.is_empty() {
            e.xattrs = None;
        }
        e.ctime = Some(now);
        if let Some(path) = path {
            let rec = Record::RemoveXattr {
                path,
                name: name.to_vec(),
            };
            self.record(&mut inner, rec)?;
        }
        Ok(())
    }

    /// chmod / chown / truncate / utimens.
    pub fn setattr(&self, ino: u64, change: &SetAttr) -> Result<Attr> {
        if let Some(size) = change.size {
            self.with_overlay(ino, size != 0, |id| self.overlay.truncate(id, size))?;
        }
        let meta = change.mode.is_some()
            || change.mtime.is_some()
            || change.atime.is_some()
            || change.uid.is_some()
            || change.gid.is_some();
        if meta {
            self.room()?;
        }
        let mut inner = self.write();
        let path = inner.path_of(ino);
        let now = inner.now();
        if let Some(mode) = change.mode {
            let mode = mode & 0o7777;
            let e = inner.entry_mut(ino)?;
            e.mode = mode;
            e.ctime = Some(now);
            if let Some(path) = path.clone() {
                self.record(&mut inner, Record::SetMode { path, mode })?;
            }
        }
        if change.uid.is_some() || change.gid.is_some() {
            let (uid0, gid0) = inner.entry(ino)?.owner.unwrap_or(self.mount_owner);
            let owner = (change.uid.unwrap_or(uid0), change.gid.unwrap_or(gid0));
            let e = inner.entry_mut(ino)?;
            e.owner = (owner != self.mount_owner).then_some(owner);
            e.ctime = Some(now);
            if let Some(path) = path.clone() {
                let (uid, gid) = owner;
                self.record(&mut inner, Record::SetOwner { path, uid, gid })?;
            }
        }
        if let Some(t) = change.atime {
            let e = inner.entry_mut(ino)?;
            e.atime = Some(t);
            e.ctime = Some(now);
            if let Some(path) = path.clone() {
                let (secs, nanos) = unix_time(t);
                self.record(&mut inner, Record::SetAtime { path, secs, nanos })?;
            }
        }
        if let Some(t) = change.mtime {
            match inner.entry(ino)?.kind {
                Kind::File(FileData::Overlay { id }) => {
                    // The overlay file keeps the modification time; the journal the change
                    // time (a remount must show the same).
                    self.overlay.set_mtime(id, t)?;
                    self.record_ctime(&mut inner, ino, path.clone(), now)?;
                }
                _ => {
                    let e = inner.entry_mut(ino)?;
                    e.mtime = Some(t);
                    e.ctime = Some(now);
                    if let Some(path) = path.clone() {
                        let (secs, nanos) = unix_time(t);
                        self.record(&mut inner, Record::SetMtime { path, secs, nanos })?;
                    }
                }
            }
        }
        if change.size.is_some() {
            self.record_ctime(&mut inner, ino, path, now)?;
        }
        self.attr_of(&inner, ino)
    }

    /// A change time, set and journaled (an overlay file's modification time is the
    /// overlay file's own, a remount must show the same change time).
    fn record_ctime(
        &self,
        inner: &mut Inner,
        ino: u64,
        path: Option<Vec<u8>>,
        now: std::time::SystemTime,
    ) -> Result<()> {
        inner.entry_mut(ino)?.ctime = Some(now);
        if let Some(path) = path {
            let ctime = unix_time(now);
            self.record(
                inner,
                Record::Times {
                    path,
                    mtime: None,
                    ctime,
                },
            )?;
        }
        Ok(())
    }

    /// fsync: the file's overlay data and the journal reach the disk.
    pub fn fsync(&self, ino: u64) -> Result<()> {
        let id = match self.read().entries.get(&ino).map(|e| &e.kind) {
            Some(Kind::File(FileData::Overlay { id })) => Some(*id),
            _ => None,
        };
        if let Some(id) = id {
            self.overlay.sync(id)?;
        }
        self.sync_journal()
    }

    /// Makes every journaled change durable.
    pub fn sync_journal(&self) -> Result<()> {
        Ok(self.journal().sync()?)
    }
}
