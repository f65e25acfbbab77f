//! Changing a working copy through the mount: creating, copying up and writing files,
//! directories, links and special files; renames and removals; attributes; fsync.

use super::*;

impl WorkingCopy {
    // ----- writing -----

    pub(super) fn new_overlay(&self, inner: &mut Inner, content: &[u8]) -> Result<u64> {
        let id = inner.next_id;
        inner.next_id += 1;
        if let Err(e) = self.overlay.create(id, content) {
            // A copy cut short by a full disk is of no use to anyone.
            let _ = self.overlay.remove(id);
            return Err(e.into());
        }
        Ok(id)
    }

    /// Creates a regular file.
    pub fn create(&self, parent: u64, name: &[u8], mode: u32) -> Result<Attr> {
        self.room()?;
        let mut inner = self.write();
        check_new_name(name)?;
        if inner.child(parent, name)?.is_some() {
            return Err(WcError::Exists);
        }
        let path = child_path(&inner, parent, name)?;
        let id = self.new_overlay(&mut inner, b"")?;
        let mode = mode & 0o7777;
        let ino = inner.link_new(parent, name, Kind::File(FileData::Overlay { id }), mode)?;
        self.record(&mut inner, Record::Create { path, id, mode })?;
        self.feed_covers(ino);
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    /// Creates a regular file with no name (open(2) with `O_TMPFILE` in directory
    /// `parent`): an overlay file that nothing journals until `link` gives it a name, freed
    /// with its overlay file when the kernel forgets it (as a file unlinked while open);
    /// after a crash its overlay file is garbage, as an ext4 orphan is.
    pub fn tmpfile(&self, parent: u64, mode: u32) -> Result<Attr> {
        self.room()?;
        let mut inner = self.write();
        if !inner.is_dir(parent) {
            return Err(WcError::NotDir);
        }
        let id = self.new_overlay(&mut inner, b"")?;
        let ino = inner.alloc(0, b"", Kind::File(FileData::Overlay { id }), mode & 0o7777);
        let now = Some(inner.now());
        let e = inner.entry_mut(ino)?;
        e.mtime = now;
        e.ctime = now;
        e.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    pub fn mkdir(&self, parent: u64, name: &[u8], mode: u32) -> Result<Attr> {
        self.room()?;
        check_new_name(name)?;
        let mut inner = self.write();
        let path = child_path(&inner, parent, name)?;
        let mode = mode & 0o7777;
        let dir = Kind::Dir {
            source: None,
            children: Some(Children::new()),
        };
        let ino = inner.link_new(parent, name, dir, mode)?;
        self.record(&mut inner, Record::Mkdir { path, mode })?;
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    pub fn symlink(&self, parent: u64, name: &[u8], target: &[u8]) -> Result<Attr> {
        self.room()?;
        check_new_name(name)?;
        let mut inner = self.write();
        let path = child_path(&inner, parent, name)?;
        let ino = inner.link_new(
            parent,
            name,
            Kind::Symlink(LinkData::Local(target.into())),
            0o777,
        )?;
        self.record(
            &mut inner,
            Record::Symlink {
                path,
                target: target.to_vec(),
            },
        )?;
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    /// Creates a fifo, socket or device node (local to the working copy).
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: SpecialKind,
        mode: u32,
        rdev: u32,
    ) -> Result<Attr> {
        self.room()?;
        check_new_name(name)?;
        let mut inner = self.write();
        let path = child_path(&inner, parent, name)?;
        let mode = mode & 0o7777;
        let ino = inner.link_new(parent, name, Kind::Special { kind, rdev }, mode)?;
        self.record(
            &mut inner,
            Record::Special {
                path,
                kind,
                mode,
                rdev,
            },
        )?;
        inner.entry_mut(ino)?.nlookup += 1;
        self.attr_of(&inner, ino)
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, false)
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, true)
    }

    pub(super) fn remove_entry(&self, parent: u64, name: &[u8], dir: bool) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        let ino = inner.child(parent, name)?.ok_or(WcError::NotFound)?;
        match (dir, inner.is_dir(ino)) {
            (false, true) => return Err(WcError::IsDir),
            (true, false) => return Err(WcError::NotDir),
            (true, true) if !inner.children(ino)?.is_empty() => {
                return Err(WcError::NotEmpty);
            }
            _ => {}
        }
        let path = child_path(&inner, parent, name)?;
        self.record(
            &mut inner,
            if dir {
                Record::Rmdir { path }
            } else {
                Record::Unlink { path }
            },
        )?;
        if let Some(id) = inner.detach(ino, parent, name) {
            let _ = self.overlay.remove(id);
        }
        Ok(())
    }

    /// A new name `name` in `parent` for file `ino` (link(2)). A store file is copied up
    /// first, so that both names are one inode with one overlay file: a write through
    /// either is seen through the other, and hg sees two files with the same content.
    pub fn link(&self, ino: u64, parent: u64, name: &[u8]) -> Result<Attr> {
        check_new_name(name)?;
        loop {
            if matches!(
                self.read().entry(ino)?.kind,
                Kind::File(FileData::Store { .. })
            ) {
                self.materialize(ino, true)?;
            }
            self.room()?;
            let mut inner = self.write();
            if matches!(inner.entry(ino)?.kind, Kind::File(FileData::Store { .. })) {
                // Back in the store meanwhile (a commit): copied up again.
                continue;
            }
            if !inner.is_dir(parent) {
                return Err(WcError::NotDir);
            }
            let to = child_path(&inner, parent, name)?;
            if inner.entry(ino)?.parent == 0 {
                // A file with no name (`O_TMPFILE`; the kernel links no other nameless
                // file) gets its first.
                self.name_nameless(&mut inner, ino, parent, name, to)?;
                inner.entry_mut(ino)?.nlookup += 1;
                return self.attr_of(&inner, ino);
            }
            let from = inner.path_of(ino).ok_or(WcError::NotFound)?;
            inner.add_name(ino, parent, name)?;
            self.record(&mut inner, Record::Link { from, to })?;
            inner.entry_mut(ino)?.nlookup += 1;
            return self.attr_of(&inner, ino);
        }
    }

    /// Gives nameless file `ino` (an overlay file) the name `name` in `parent`, at `path`,
    /// and journals it as made there with what it holds now: its overlay file, mode, owner,
    /// access time and extended attributes (none of which were journaled while it had no
    /// name).
    fn name_nameless(
        &self,
        inner: &mut Inner,
        ino: u64,
        parent: u64,
        name: &[u8],
        path: Vec<u8>,
    ) -> Result<()> {
        check_new_name(name)?;
        if inner.child(parent, name)?.is_some() {
            return Err(WcError::Exists);
        }
        let e = inner.entry(ino)?;
        let Kind::File(FileData::Overlay { id }) = e.kind else {
            return Err(WcError::NotFound);
        };
        let mode = e.mode;
        let owner = e.owner;
        let atime = e.atime;
        let xattrs: Vec<(Vec<u8>, Vec<u8>)> = e
            .xattrs
            .iter()
            .flat_map(|x| x.iter())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        let mut records = vec![Record::Create {
            path: path.clone(),
            id,
            mode,
        }];
        if let Some((uid, gid)) = owner {
            records.push(Record::SetOwner {
                path: path.clone(),
                uid,
                gid,
            });
        }
        if let Some(t) = atime {
            let (secs, nanos) = unix_time(t);
            records.push(Record::SetAtime {
                path: path.clone(),
                secs,
                nanos,
            });
        }
        for (name, value) in xattrs {
            records.push(Record::SetXattr {
                path: path.clone(),
                name,
                value,
            });
        }
        inner.children_mut(parent)?.insert(name.into(), ino, false);
        inner.touch_dir(parent);
        let now = Some(inner.now());
        let e = inner.entry_mut(ino)?;
        e.parent = parent;
        e.name = name.into();
        e.ctime = now;
        for rec in records {
            self.record(inner, rec)?;
        }
        self.feed_covers(ino);
        Ok(())
    }

    /// Renames; returns nothing, like rename(2). `flags` as renameat2.
    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.room()?;
        let mut inner = self.write();
        check_new_name(newname)?;
        let from = child_path(&inner, parent, name)?;
        let to = child_path(&inner, newparent, newname)?;
        if let Some(id) = self.do_rename(&mut inner, parent, name, newparent, newname, flags)? {
            let _ = self.overlay.remove(id);
        }
        if from != to {
            self.record(&mut inner, Record::Rename { from, to, flags })?;
        }
        Ok(())
    }

    /// The rename itself; returns an overlay id freed by replacing a file.
    pub(super) fn do_rename(
        &self,
        inner: &mut Inner,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<Option<u64>> {
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
            || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        {
            return Err(WcError::Invalid);
        }
        let src = inner.child(parent, name)?.ok_or(WcError::NotFound)?;
        if !inner.is_dir(newparent) {
            return Err(WcError::NotDir);
        }
        let dst = inner.child(newparent, newname)?;
        if dst == Some(src) {
            return Ok(None);
        }
        // A directory cannot move below itself.
        if inner.is_dir(src) && inner.is_within(newparent, src)? {
            return Err(WcError::Invalid);
        }
        let mut freed = None;
        if flags & RENAME_EXCHANGE != 0 {
            let dst = dst.ok_or(WcError::NotFound)?;
            if inner.is_dir(dst) && inner.is_within(parent, dst)? {
                return Err(WcError::Invalid);
            }
            let (src_dir, dst_dir) = (inner.is_dir(src), inner.is_dir(dst));
            inner
                .children_mut(parent)?
                .insert(name.into(), dst, dst_dir);
            inner
                .children_mut(newparent)?
                .insert(newname.into(), src, src_dir);
            inner.move_name(dst, (newparent, newname), (parent, name))?;
        } else {
            if let Some(dst) = dst {
                if flags & RENAME_NOREPLACE != 0 {
                    return Err(WcError::Exists);
                }
                match (inner.is_dir(src), inner.is_dir(dst)) {
                    (true, false) => return Err(WcError::NotDir),
                    (false, true) => return Err(WcError::IsDir),
                    (true, true) if !inner.children(dst)?.is_empty() => {
                        return Err(WcError::NotEmpty)
                    }
                    _ => {}
                }
                freed = inner.detach(dst, newparent, newname);
            }
            let src_dir = inner.is_dir(src);
            inner.children_mut(parent)?.remove(name);
            inner
                .children_mut(newparent)?
                .insert(newname.into(), src, src_dir);
        }
        let now = Some(inner.now());
        inner.move_name(src, (parent, name), (newparent, newname))?;
        inner.entry_mut(src)?.ctime = now;
        inner.touch_dir(parent);
        inner.touch_dir(newparent);
        Ok(freed)
    }

    /// Writes revision `node` of `path` into new overlay file `id`; a copy cut short (a full
    /// disk) is removed.
    pub(crate) fn copy_to_overlay(
        &self,
        id: u64,
        repo: &Repo,
        path: &[u8],
        node: &Node,
    ) -> Result<()> {
        let copied = self.store_text(repo, path, node).and_then(|t| {
            self.overlay
                .create_from(id, &mut t.reader())
                .map_err(WcError::from)
        });
        if copied.is_err() {
            let _ = self.overlay.remove(id);
        }
        copied
    }

    /// Moves a store file into the overlay (copy-up) so that it can be written; returns its
    /// overlay id. `keep` = false starts it empty (truncation to zero). The content is
    /// copied without the working copy's lock (a big file takes a while, and its text may
    /// first be rebuilt), then installed if the inode still holds that store revision.
    pub(super) fn materialize(&self, ino: u64, keep: bool) -> Result<u64> {
        loop {
            let (path, node, repo) = {
                let inner = self.read();
                match &inner.entry(ino)?.kind {
                    Kind::File(FileData::Overlay { id }) => return Ok(*id),
                    Kind::File(FileData::Store { path, node, .. }) => {
                        (path.clone(), *node, inner.repo.clone())
                    }
                    Kind::Dir { .. } => return Err(WcError::IsDir),
                    Kind::Symlink(_) | Kind::Special { .. } => return Err(WcError::Invalid),
                }
            };
            self.room()?;
            let id = {
                let mut inner = self.write();
                let id = inner.next_id;
                inner.next_id += 1;
                id
            };
            let copied = if keep {
                self.copy_to_overlay(id, &repo, &path, &node)
            } else {
                self.overlay
                    .create(id, &[])
                    .map(|_| ())
                    .map_err(WcError::from)
            };
            if let Err(e) = copied {
                // A copy cut short by a full disk is of no use to anyone.
                let _ = self.overlay.remove(id);
                return Err(e);
            }
            let mut inner = self.write();
            let still = match inner.entry(ino) {
                Ok(e) => matches!(&e.kind, Kind::File(FileData::Store { path: p, node: n, .. })
                    if *p == path && *n == node),
                Err(e) => {
                    drop(inner);
                    let _ = self.overlay.remove(id);
                    return Err(e);
                }
            };
            if !still {
                // Copied up by another writer meanwhile, or changed: ours is not needed.
                drop(inner);
                let _ = self.overlay.remove(id);
                continue;
            }
            let mtime = inner.entry(ino)?.mtime.unwrap_or(self.checkout_time);
            let _ = self.overlay.set_mtime(id, mtime);
            inner.entry_mut(ino)?.kind = Kind::File(FileData::Overlay { id });
            if let Some(p) = inner.path_of(ino) {
                self.record(&mut inner, Record::Materialize { path: p, id })?;
                self.feed_covers(ino);
            }
            return Ok(id);
        }
    }

    /// Runs `op` on the overlay file of `ino`, copying the file up first if needed. The
    /// working-copy lock is held (shared) while `op` runs, so that commit, which turns
    /// committed overlay files back into store files under the exclusive lock, never races
    /// with a write.
    pub(super) fn with_overlay<T>(
        &self,
        ino: u64,
        keep: bool,
        op: impl Fn(u64) -> std::io::Result<T>,
    ) -> Result<T> {
        loop {
            {
                let inner = self.read();
                if let Kind::File(FileData::Overlay { id }) = inner.entry(ino)?.kind {
                    let done = op(id)?;
                    self.feed_write(&inner, ino);
                    return Ok(done);
                }
            }
            self.materialize(ino, keep)?;
        }
    }

    /// Writes file content; returns the number of bytes written.
    pub fn write_file(&self, ino: u64, offset: u64, data: &[u8]) -> Result<u32> {
        self.with_overlay(ino, true, |id| self.overlay.write(id, offset, data))?;
        Ok(data.len() as u32)
    }

    /// fallocate, any mode, on the file's overlay file (a store file is copied up first).
    pub fn fallocate(&self, ino: u64, offset: u64, len: u64, mode: i32) -> Result<()> {
        self.with_overlay(ino, true, |id| self.overlay.allocate(id, mode, offset, len))
    }

    /// lseek with SEEK_DATA or SEEK_HOLE (the kernel handles the other kinds itself). An
    /// overlay file answers from its backing file; a store file is all data.
    pub fn seek_data(&self, ino: u64, offset: i64, whence: i32) -> Result<i64> {
        if whence != libc::SEEK_DATA && whence != libc::SEEK_HOLE {
            return Err(WcError::Invalid);
        }
        let id = match &self.read().entry(ino)?.kind {
            Kind::File(FileData::Overlay { id }) => Some(*id),
            Kind::File(FileData::Store { .. }) => None,
            Kind::Dir { .. } => return Err(WcError::IsDir),
            _ => return Err(WcError::Invalid),
        };
        if let Some(id) = id {
            return Ok(self.overlay.seek(id, offset, whence)?);
        }
        let size = self.getattr(ino)?.size as i64;
        if offset < 0 {
            return Err(WcError::Invalid);
        }
        if offset >= size {
            return Err(WcError::NoSuchOffset);
        }
        Ok(if whence == libc::SEEK_DATA {
            offset
        } else {
            size
        })
    }
}
