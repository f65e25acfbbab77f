//! Files the kernel reads and writes directly (FUSE passthrough, `fs.rs`): an open of an
//! overlay file hands the kernel the overlay file itself, so reads, writes and mmap of it
//! skip the daemon. The working copy learns of such a file at its open for writing (the
//! file is materialized then, and nothing is remembered of its content until the last
//! writer closes it) and keeps it in place while the kernel holds it: a commit leaves it in
//! the overlay, and a revert gives its name a new inode instead of changing this one.

use super::*;

impl WorkingCopy {
    /// For an open through passthrough: the overlay file holding `ino`'s content, and its
    /// id. A file opened for writing is materialized first (emptied rather than copied
    /// when the open truncates it); a store file opened for reading gives `None` (the
    /// kernel caches it), as does anything but a regular file. A returned file is pinned
    /// (see [`WorkingCopy::unpin`]).
    pub fn passthrough_file(
        &self,
        ino: u64,
        write: bool,
        truncate: bool,
    ) -> Result<Option<(u64, Arc<std::fs::File>)>> {
        loop {
            {
                let mut inner = self.write();
                match inner.entry(ino)?.kind {
                    Kind::File(FileData::Overlay { id }) => {
                        *inner.pinned.entry(ino).or_insert(0) += 1;
                        drop(inner);
                        return match self.overlay.file(id) {
                            Ok(f) => Ok(Some((id, f))),
                            Err(e) => {
                                self.unpin(ino);
                                Err(e.into())
                            }
                        };
                    }
                    Kind::File(FileData::Store { .. }) if write => {}
                    _ => return Ok(None),
                }
            }
            self.materialize(ino, !truncate)?;
        }
    }

    /// Ends a pin of [`WorkingCopy::passthrough_file`] (the handle was closed, or not used
    /// for passthrough after all).
    pub fn unpin(&self, ino: u64) {
        let mut inner = self.write();
        if let Some(n) = inner.pinned.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                inner.pinned.remove(&ino);
            }
        }
    }

    /// Overlay file `id` was opened for writing through passthrough: its writes are not
    /// seen until [`WorkingCopy::writer_closed`].
    pub fn writer_opened(&self, id: u64) {
        self.overlay.writer_opened(id);
    }

    /// A writer of [`WorkingCopy::writer_opened`] was closed.
    pub fn writer_closed(&self, id: u64) {
        self.overlay.writer_closed(id);
    }

    /// True while the kernel reads or writes `ino`'s overlay file directly.
    pub(crate) fn is_pinned(inner: &Inner, ino: u64) -> bool {
        inner.pinned.contains_key(&ino)
    }
}
