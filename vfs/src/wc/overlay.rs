//! The overlay: local files holding the content of every materialized or new file, one file
//! per overlay id under `<state>/overlay/`. Files not in the overlay are read from the store.
//! It also remembers which of its files a status found equal to a store revision, or
//! different from it, until they are written again (as hg's dirstate remembers a clean
//! file's size and mtime), so that a file is compared (its size looked at, its bytes read)
//! once after its last write, not by every status.

use lru::LruCache;
use revfs_store::Node;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::num::NonZeroUsize;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How many overlay files stay open when the configuration says nothing.
pub const DEFAULT_OPEN_FILES: usize = 256;

/// The overlay directory and a cache of open overlay files, bounded by count: a file is
/// opened when it is read or written and closed when it falls out of the cache, so the
/// daemon's descriptors never grow with the number of files written through the mount.
/// (A caller holding a file keeps it open until it is done with it: at most one per FUSE
/// worker thread beyond the bound.)
pub struct Overlay {
    dir: PathBuf,
    open: Mutex<LruCache<u64, Arc<File>>>,
    /// What comparisons found of files' contents (see [`Overlay::begin_check`]).
    verdicts: Mutex<HashMap<u64, Verdict>>,
    next_ticket: AtomicU64,
    /// Files open for writing through kernel passthrough, with how many handles: their
    /// writes never pass through here, so nothing is known of their content while they are
    /// open (see [`Overlay::writer_opened`]).
    writers: Mutex<HashMap<u64, u32>>,
}

/// What is known of an overlay file's content against the store.
enum Verdict {
    /// A comparison began (its ticket) and nothing was written since.
    Checking(u64),
    /// Equal to this file revision's text, and nothing written since.
    Same(Node),
    /// Different from this file revision's text, and nothing written since.
    Differs(Node),
}

impl Overlay {
    /// Opens (creating) the overlay directory; at most `open_files` files stay open.
    pub fn open(dir: &Path, open_files: usize) -> std::io::Result<Overlay> {
        std::fs::create_dir_all(dir)?;
        let cap = NonZeroUsize::new(open_files).unwrap_or(NonZeroUsize::MIN);
        Ok(Overlay {
            dir: dir.to_owned(),
            open: Mutex::new(LruCache::new(cap)),
            verdicts: Mutex::new(HashMap::new()),
            next_ticket: AtomicU64::new(1),
            writers: Mutex::new(HashMap::new()),
        })
    }

    fn verdicts(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Verdict>> {
        self.verdicts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether file `id` was found equal to file revision `node` (`Some(true)`) or
    /// different from it (`Some(false)`) with nothing written to it since; `None` when it
    /// was not compared since its last change.
    pub fn known(&self, id: u64, node: &Node) -> Option<bool> {
        if self.being_written(id) {
            return None;
        }
        match self.verdicts().get(&id) {
            Some(Verdict::Same(n)) if n == node => Some(true),
            Some(Verdict::Differs(n)) if n == node => Some(false),
            _ => None,
        }
    }

    fn writers(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u32>> {
        self.writers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn being_written(&self, id: u64) -> bool {
        self.writers().contains_key(&id)
    }

    /// File `id` was opened for writing through kernel passthrough: its writes go straight
    /// to it, unseen, until [`Overlay::writer_closed`]; meanwhile no comparison of it is
    /// remembered, and what was known before is forgotten now.
    pub fn writer_opened(&self, id: u64) {
        *self.writers().entry(id).or_insert(0) += 1;
        self.changed(id);
    }

    /// A handle [`Overlay::writer_opened`] counted was closed (its writes are done).
    pub fn writer_closed(&self, id: u64) {
        {
            let mut w = self.writers();
            if let Some(n) = w.get_mut(&id) {
                *n -= 1;
                if *n == 0 {
                    w.remove(&id);
                }
            }
        }
        self.changed(id);
    }

    /// Starts a comparison of file `id`'s content; [`Overlay::end_check`] records its
    /// outcome only if nothing changed the file in between (every change of a file's
    /// content goes through this type and forgets what was known of it once done).
    pub fn begin_check(&self, id: u64) -> u64 {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.verdicts().insert(id, Verdict::Checking(ticket));
        ticket
    }

    /// Ends the comparison `ticket` of file `id` with file revision `node`: records whether
    /// it found them equal, unless the file changed since it began.
    pub fn end_check(&self, id: u64, ticket: u64, node: Node, same: bool) {
        let written = self.being_written(id);
        let mut verdicts = self.verdicts();
        if written {
            verdicts.remove(&id);
        } else if matches!(verdicts.get(&id), Some(Verdict::Checking(t)) if *t == ticket) {
            let verdict = if same {
                Verdict::Same(node)
            } else {
                Verdict::Differs(node)
            };
            verdicts.insert(id, verdict);
        }
    }

    /// Forgets what was known of file `id`'s content: called after each change of it
    /// (a comparison that overlapped the change is not recorded).
    fn changed(&self, id: u64) {
        self.verdicts().remove(&id);
    }

    fn path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id:016x}"))
    }

    /// Every overlay id present on disk.
    pub fn ids(&self) -> std::io::Result<Vec<u64>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            if let Some(id) = e
                .file_name()
                .to_str()
                .and_then(|n| u64::from_str_radix(n, 16).ok())
            {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Creates overlay file `id` holding `content` (written before any journal record
    /// names it, so that a record never points at a file that is not there).
    pub fn create(&self, id: u64, content: &[u8]) -> std::io::Result<Arc<File>> {
        let path = self.path(id);
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let written = f.write_all(content);
        self.changed(id);
        written?;
        let f = Arc::new(f);
        self.keep(id, f.clone());
        Ok(f)
    }

    /// Creates overlay file `id` with what `content` reads (in bounded blocks).
    pub fn create_from(&self, id: u64, content: &mut dyn std::io::Read) -> std::io::Result<()> {
        let f = self.create(id, &[])?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &*f);
        let copied = std::io::copy(content, &mut w).and_then(|_| w.flush());
        drop(w);
        self.changed(id);
        copied
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, LruCache<u64, Arc<File>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `f` in the cache; the file it pushes out is closed outside the lock.
    fn keep(&self, id: u64, f: Arc<File>) {
        let evicted = self.cache().push(id, f);
        drop(evicted);
    }

    /// The open overlay file `id` (opened now, outside the cache's lock, if it is not in the
    /// cache).
    pub fn file(&self, id: u64) -> std::io::Result<Arc<File>> {
        if let Some(f) = self.cache().get(&id) {
            return Ok(f.clone());
        }
        let f = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.path(id))?,
        );
        self.keep(id, f.clone());
        Ok(f)
    }

    /// The metadata of overlay file `id`, without opening it when it is not open.
    pub fn metadata(&self, id: u64) -> std::io::Result<std::fs::Metadata> {
        let open = self.cache().peek(&id).cloned();
        match open {
            Some(f) => f.metadata(),
            None => std::fs::metadata(self.path(id)),
        }
    }

    /// Size of overlay file `id`.
    pub fn size(&self, id: u64) -> std::io::Result<u64> {
        Ok(self.metadata(id)?.len())
    }

    /// Reads up to `size` bytes at `offset`.
    pub fn read(&self, id: u64, offset: u64, size: usize) -> std::io::Result<Vec<u8>> {
        let f = self.file(id)?;
        let mut buf = vec![0u8; size];
        let mut done = 0;
        while done < size {
            let n = f.read_at(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        buf.truncate(done);
        Ok(buf)
    }

    /// The whole content of overlay file `id`.
    pub fn read_all(&self, id: u64) -> std::io::Result<Vec<u8>> {
        let size = self.size(id)?;
        self.read(id, 0, size as usize)
    }

    pub fn write(&self, id: u64, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let written = self.file(id)?.write_all_at(data, offset);
        self.changed(id);
        written
    }

    pub fn truncate(&self, id: u64, size: u64) -> std::io::Result<()> {
        let done = self.file(id)?.set_len(size);
        self.changed(id);
        done
    }

    /// fallocate(2) on overlay file `id`, any mode (reserving, KEEP_SIZE, PUNCH_HOLE,
    /// ZERO_RANGE, ...): the backing file system decides, as it would for the file itself.
    pub fn allocate(&self, id: u64, mode: i32, offset: u64, len: u64) -> std::io::Result<()> {
        use std::os::unix::io::AsRawFd;
        let f = self.file(id)?;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
        };
        // SAFETY: fallocate on an fd we own.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset, len) };
        // Punching a hole or zeroing a range changes the content.
        self.changed(id);
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// lseek(2) with SEEK_DATA or SEEK_HOLE on overlay file `id`: where the next data or
    /// hole at or after `offset` starts, as the backing file system knows it. (Reads and
    /// writes use pread and pwrite: the descriptor's own offset means nothing to them.)
    pub fn seek(&self, id: u64, offset: i64, whence: i32) -> std::io::Result<i64> {
        use std::os::unix::io::AsRawFd;
        let f = self.file(id)?;
        // SAFETY: lseek on an fd we own.
        let at = unsafe { libc::lseek(f.as_raw_fd(), offset, whence) };
        if at < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(at)
    }

    /// Makes overlay file `id` durable, its directory entry included.
    pub fn sync(&self, id: u64) -> std::io::Result<()> {
        self.file(id)?.sync_data()?;
        File::open(&self.dir)?.sync_all()
    }

    /// Sets the modification time of overlay file `id`.
    pub fn set_mtime(&self, id: u64, mtime: std::time::SystemTime) -> std::io::Result<()> {
        self.file(id)?.set_modified(mtime)
    }

    pub fn mtime(&self, id: u64) -> std::io::Result<std::time::SystemTime> {
        self.metadata(id)?.modified()
    }

    /// Deletes overlay file `id`.
    pub fn remove(&self, id: u64) -> std::io::Result<()> {
        let closed = self.cache().pop(&id);
        drop(closed);
        self.changed(id);
        match std::fs::remove_file(self.path(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
