//! The working copy: the tree of one base revision, built lazily from its manifest, with
//! every change made through the mount applied on top. Changes are journaled by path
//! ([`crate::wc::journal`]) and file contents that differ from the store live in the
//! [`crate::wc::overlay`]; at mount time the journal is replayed over the base tree, so a
//! remount (even after the daemon was killed) finds the working copy as it was.
//!
//! Inode numbers are handed out the first time an entry is seen and never reused while the
//! daemon runs: a directory's listing from the manifest gets a block of them, the same each
//! time it is listed again with the same names. Entries come from the manifest only when their directory is
//! first listed or looked up in, and files only when looked up; what the kernel forgets and
//! a listing would give again leaves the table (`unload.rs`). Every path a change touches
//! goes to the dirty set that `status` reads.
//!
//! This file holds `Inner` and `WorkingCopy`, opening and journaling; the types are
//! `types.rs`, replay `replay.rs`, the inode table `inodes.rs`, the blocks of numbers
//! listings get `blocks.rs`, what leaves the table `unload.rs`, the base mapped from the
//! manifest cache `mapped_base.rs`, reading `read.rs` (content: `content.rs`), changes
//! `write.rs`, extended attributes `xattr.rs`, tracking and copies `tracking.rs`, the
//! parents and what a move does to tracking `parents.rs`, status `status.rs`, the journal
//! `journal/`, the overlay `overlay.rs`.

mod ahead;
mod blocks;
mod changes;
pub mod children;
pub mod content;
pub mod feed;
mod fetch_ahead;
mod framed;
mod inodes;
pub mod journal;
mod kernel_view;
mod mapped_base;
mod open;
pub mod overlay;
mod parents;
mod read;
mod replay;
pub mod status;
#[cfg(test)]
mod strip_tests;
mod target;
#[cfg(test)]
mod test_repo;
mod tracking;
mod types;
mod unload;
mod walk;
mod write;
mod xattr;

pub use changes::ChangesSince;
pub use target::{target_at, Target};
pub use tracking::{fold_case, PathState};
use tracking::{set_copy, set_track};
pub use types::*;
pub use unload::{DEFAULT_LISTED_FILES, DEFAULT_LOADED_FILES};
pub(crate) use walk::Walk;

use crate::wc::children::Children;
use crate::wc::journal::{Journal, JournalError, PutEntry, Record, SpecialKind, Track};
use crate::wc::overlay::Overlay;
use revfs_store::manifest::{Child, FileFlag, Manifest};
use revfs_store::{Node, Repo, StoreError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockWriteGuard};
use std::time::SystemTime;

pub(crate) struct Inner {
    /// Boxed: the table's slots stay small (its growth doubles them, and most entries are
    /// files that come and go as the kernel looks them up and forgets them).
    pub(in crate::wc) entries: HashMap<u64, Box<Entry>>,
    next_ino: u64,
    pub(in crate::wc) next_id: u64,
    /// Paths touched since the base revision (files or directories).
    pub(in crate::wc) dirty: BTreeSet<Vec<u8>>,
    /// Tracking overrides (only `Added` and `Removed` are kept).
    pub(in crate::wc) tracking: BTreeMap<Vec<u8>, Track>,
    /// Copy sources of copied or renamed files: destination -> source.
    pub(in crate::wc) copies: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The second parent while hg makes a merge (null otherwise), and the paths hg marked
    /// as merged or taken from it (its dirstate's `p2_info`: status shows them modified).
    pub(in crate::wc) p2: Node,
    pub(in crate::wc) from_p2: BTreeSet<Vec<u8>>,
    /// The working-copy parent: its node and manifest, and the repository it is read from
    /// (all three change together at commit and update).
    pub(in crate::wc) base: Arc<Manifest>,
    pub(in crate::wc) base_node: Node,
    pub(in crate::wc) repo: Arc<Repo>,
    /// The time of the operation under way: taken from the clock once per hold of the write
    /// lock, journaled (`Record::Clock`) before its records, and during replay taken from
    /// them, so that the times it stamps come back exactly after a remount.
    op_time: Option<SystemTime>,
    /// The parent was set inside an hg transaction that may still be rolled back (hg sent
    /// it `pending`: shelve, unshelve, a rebase in one transaction): the journal keeps the
    /// last parent set outside one (`rebase_journal`) until a parent comes from outside.
    pub(in crate::wc) provisional: bool,
    /// Paths whose tracking or copy source hg changed inside a transaction it has not
    /// closed yet (`set_tracking_tentative`): changed here, not journaled until hg says
    /// the transaction is over (`confirm_tracking`) or the journal is rewritten, so that a
    /// daemon killed before comes back with the tracking of before, as a clone whose
    /// transaction was rolled back.
    pub(in crate::wc) tentative: BTreeSet<Vec<u8>>,
    /// Files thawed, oldest first (some frozen or freed since): where a sweep
    /// (`unload.rs`) looks for entries to drop.
    pub(in crate::wc) thawed: std::collections::VecDeque<u64>,
    /// The block of inode numbers a directory's listing from a manifest got (child i of
    /// the listing is first + i), kept while the directory lives: a listing dropped and
    /// made again with the same names gives the same numbers (`blocks.rs`).
    pub(in crate::wc) blocks: HashMap<u64, blocks::Block>,
    /// Directories listed from a manifest, oldest first (some dropped or freed since): where
    /// a sweep of listings (`unload.rs`) looks for listings to drop.
    pub(in crate::wc) listed: std::collections::VecDeque<u64>,
    /// Names in the listings made from a manifest and not dropped since (changes made in
    /// them through the mount aside): what `mount.listed_files` bounds.
    pub(in crate::wc) listed_names: usize,
    /// Directories whose listing a sweep dropped while it kept some of their subdirectories'
    /// entries (held by the kernel, or listed), with how many: each such entry is dropped
    /// once nothing needs it (`Inner::drop_kept`), and the count goes when the directory is
    /// listed again (the entries are its children again).
    pub(in crate::wc) kept_under: HashMap<u64, u32>,
    /// Files whose overlay file the kernel reads and writes directly (passthrough opens,
    /// `open.rs`), with how many handles: kept in place while held.
    pub(in crate::wc) pinned: HashMap<u64, u32>,
}

/// The mutable working copy of one mount.
pub struct WorkingCopy {
    pub(crate) checkout_time: SystemTime,
    /// The user and group the daemon runs as: the owner of every entry without its own.
    mount_owner: (u32, u32),
    pub(crate) overlay: Overlay,
    /// Rebuilt big texts, on disk in the state directory (`texts/`).
    pub(crate) texts: revfs_store::bigtext::BigTextCache,
    texts_dir: PathBuf,
    pub(crate) inner: RwLock<Inner>,
    journal: Mutex<Journal>,
    /// What changed, for tools that ask since a cursor (`changes.rs`, `feed.rs`); locked
    /// after `inner` and the journal.
    feed: Mutex<feed::Feed>,
    /// The compiled `.hgignore` (it knows the files it was compiled from).
    pub(crate) ignore_cache: Mutex<Option<Arc<revfs_hg::ignore::Ignore>>>,
    /// Where the working copy is seen (the mountpoint): what relative `ui.ignore` paths
    /// are relative to.
    pub(crate) root_path: std::sync::OnceLock<PathBuf>,
    /// Held by a commit or an update from start to end: one at a time.
    transition: Mutex<()>,
    /// Set when the journal could not be rewritten after a commit or an update: the tree in
    /// memory is ahead of the journal on disk, so no further change is accepted (the journal
    /// still describes the working copy as it was before, which a remount restores).
    pub(crate) journal_stale: std::sync::atomic::AtomicBool,
    /// `mount.loaded_files`.
    loaded_files: std::sync::atomic::AtomicUsize,
    /// `mount.listed_files`.
    listed_files: std::sync::atomic::AtomicUsize,
    /// Read-ahead of a directory's files (`mount.readahead_threads`), when on.
    pub(crate) readahead: OnceLock<crate::readahead::Readahead>,
    /// Where read-ahead's walk ahead of a program is (`ahead.rs`).
    walk_cursor: ahead::WalkCursor,
    /// In a repository cloned from a server: fetching ahead of a program that walks the
    /// tree (`fetch_ahead.rs`).
    pub(crate) fetch_ahead: Option<fetch_ahead::FetchAhead>,
}

pub(crate) fn perm_of_flag(flag: FileFlag) -> u32 {
    match flag {
        FileFlag::Executable => 0o755,
        FileFlag::Symlink => 0o777,
        FileFlag::Regular => 0o644,
    }
}

/// The longest file name (`NAME_MAX`), as ext4 and most Linux filesystems allow.
pub const NAME_MAX: usize = 255;

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(WcError::Invalid);
    }
    Ok(())
}

/// A name a new entry may get through the mount: a valid one of at most [`NAME_MAX`] bytes.
/// (Replay does not check the length, so that a journal written before the limit existed
/// still opens.)
fn check_new_name(name: &[u8]) -> Result<()> {
    check_name(name)?;
    if name.len() > NAME_MAX {
        return Err(WcError::NameTooLong);
    }
    Ok(())
}

/// Names that must never appear in a working copy from the manifest.
fn unsafe_manifest_name(name: &[u8]) -> Option<&'static str> {
    match name {
        b"" => Some("empty path component"),
        b"." | b".." => Some("'.' or '..' path component"),
        n if n.eq_ignore_ascii_case(b".hg") => Some("path inside .hg"),
        _ => None,
    }
}

impl WorkingCopy {
    /// Opens the working copy of `base_node` kept in `state` (overlay and journal), replaying
    /// the journal over the base tree.
    pub fn open(
        repo: Arc<Repo>,
        base_node: Node,
        base: Manifest,
        state: &Path,
        checkout_time: SystemTime,
        open_files: usize,
    ) -> Result<WorkingCopy> {
        let base = Arc::new(base);
        let overlay = Overlay::open(&state.join("overlay"), open_files)?;
        let texts_dir = state.join("texts");
        let texts = revfs_store::bigtext::BigTextCache::open(
            &texts_dir,
            revfs_store::repo::RepoOptions::process_default().big_text_cache_bytes,
        )?;
        let (journal, records) = Journal::open(&state.join("journal"), &base_node)?;
        let feed = changes::open_feed(&state.join("changes"), &records)?;
        let mut entries = HashMap::new();
        entries.insert(
            ROOT_INO,
            Box::new(Entry::new(
                ROOT_INO,
                b"",
                Kind::Dir {
                    source: Some(DirSource {
                        manifest: base.clone(),
                        path: Box::from(&b""[..]),
                    }),
                    children: None,
                },
                0o755,
                1,
            )),
        );
        let on_disk = overlay.ids()?;
        let fetch_ahead = repo
            .is_shallow()
            .then(|| fetch_ahead::FetchAhead::new(repo.clone()));
        let wc = WorkingCopy {
            checkout_time,
            // SAFETY: getuid/getgid have no preconditions.
            mount_owner: unsafe { (libc::getuid(), libc::getgid()) },
            overlay,
            texts,
            texts_dir,
            inner: RwLock::new(Inner {
                entries,
                next_ino: ROOT_INO + 1,
                next_id: on_disk.iter().max().map_or(1, |m| m + 1),
                dirty: BTreeSet::new(),
                tracking: BTreeMap::new(),
                copies: BTreeMap::new(),
                p2: Node::default(),
                from_p2: BTreeSet::new(),
                base,
                base_node,
                repo,
                op_time: None,
                provisional: false,
                tentative: BTreeSet::new(),
                thawed: Default::default(),
                blocks: HashMap::new(),
                listed: Default::default(),
                listed_names: 0,
                kept_under: HashMap::new(),
                pinned: HashMap::new(),
            }),
            journal: Mutex::new(journal),
            feed: Mutex::new(feed),
            ignore_cache: Mutex::new(None),
            root_path: std::sync::OnceLock::new(),
            transition: Mutex::new(()),
            journal_stale: std::sync::atomic::AtomicBool::new(false),
            loaded_files: std::sync::atomic::AtomicUsize::new(DEFAULT_LOADED_FILES),
            listed_files: std::sync::atomic::AtomicUsize::new(DEFAULT_LISTED_FILES),
            readahead: OnceLock::new(),
            walk_cursor: ahead::WalkCursor::default(),
            fetch_ahead,
        };
        {
            let mut inner = wc.write();
            for (index, rec) in records.iter().enumerate() {
                wc.apply(&mut inner, rec).map_err(|cause| WcError::Replay {
                    index,
                    record: rec.describe(),
                    cause: Box::new(cause),
                })?;
                // A clock applies to the one record after it; records without one (older
                // journals, a rewritten journal) are stamped with the time of the replay.
                if !matches!(rec, Record::Clock { .. }) {
                    inner.op_time = None;
                }
                if let Record::Create { id, .. }
                | Record::Materialize { id, .. }
                | Record::Put {
                    entry: PutEntry::OverlayFile { id },
                    ..
                } = rec
                {
                    inner.next_id = inner.next_id.max(id + 1);
                }
            }
            // Overlay files nothing points at any more (files unlinked while open when the
            // daemon stopped) are garbage.
            let live: BTreeSet<u64> = inner
                .entries
                .values()
                .filter_map(|e| match e.kind {
                    Kind::File(FileData::Overlay { id }) => Some(id),
                    _ => None,
                })
                .collect();
            for id in on_disk.into_iter().filter(|id| !live.contains(id)) {
                let _ = wc.overlay.remove(id);
            }
            if !records.is_empty() {
                tracing::info!(
                    records = records.len(),
                    changed = inner.dirty.len(),
                    "journal replayed"
                );
            }
        }
        Ok(wc)
    }

    /// The repository the working copy reads from (a fresh one after commit and update).
    /// Where the on-disk text cache is.
    pub(crate) fn texts_dir(&self) -> &Path {
        &self.texts_dir
    }

    /// Tells the working copy where it is seen (its mountpoint), once.
    pub fn set_root_path(&self, path: PathBuf) {
        let _ = self.root_path.set(path);
    }

    pub fn repo(&self) -> Arc<Repo> {
        self.read().repo.clone()
    }

    /// Whether the working-copy parent is provisional: set inside an hg transaction that
    /// may still be rolled back (not journaled nor saved until one comes from outside).
    pub fn parent_provisional(&self) -> bool {
        self.read().provisional
    }

    /// The handle to read `node` with: the current one (warm caches) when it knows it, sees
    /// no transaction under way and no strip rewrote the store since it was opened;
    /// otherwise one opened afresh (hg has just written the revision, or renumbered them),
    /// as hg's hooks see the store when `pending` (`node` may be a changeset of the hg
    /// transaction under way).
    pub fn repo_for(&self, node: &Node, pending: bool) -> Result<Arc<Repo>> {
        let current = self.repo();
        Ok(if pending {
            Arc::new(Repo::open_pending(current.root())?)
        } else if !current.sees_pending()
            && (node.is_null() || current.changelog().rev_of(node).is_some())
            && !current.stripped_since_open()
        {
            current
        } else {
            Arc::new(Repo::open(current.root())?)
        })
    }

    /// The working-copy parent.
    pub fn base_node(&self) -> Node {
        self.read().base_node
    }

    /// The second parent of a merge hg is making (null otherwise).
    pub fn merge_parent(&self) -> Node {
        self.read().p2
    }

    /// The working-copy parent's manifest.
    pub fn base_manifest(&self) -> Arc<Manifest> {
        self.read().base.clone()
    }

    /// The working copy, for a change: an operation's time is taken afresh (once) under
    /// each hold.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        inner.op_time = None;
        inner
    }

    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The owner (uid, gid) of entries that have none of their own: the mounting user.
    pub fn mount_owner(&self) -> (u32, u32) {
        self.mount_owner
    }

    /// The owner (uid, gid) and permission bits of `ino`, without the rest of its
    /// attributes (no size, no subdirectory count).
    pub fn owner_and_mode(&self, ino: u64) -> Result<((u32, u32), u32)> {
        let inner = self.read();
        let e = inner.entry(ino)?;
        Ok((e.owner.unwrap_or(self.mount_owner), e.mode))
    }

    /// Number of inodes built so far.
    pub fn inode_count(&self) -> usize {
        self.read().entries.len()
    }

    /// What the working copy holds (walks the inode table).
    pub fn memory_stats(&self) -> MemoryStats {
        let inner = self.read();
        let mut held: Vec<&Arc<Manifest>> = vec![&inner.base];
        let mut frozen = 0;
        for e in inner.entries.values() {
            match &e.kind {
                Kind::Dir {
                    source: Some(s), ..
                } if !held.iter().any(|m| Arc::ptr_eq(m, &s.manifest)) => held.push(&s.manifest),
                Kind::Dir {
                    children: Some(c), ..
                } => frozen += u64::from(c.frozen()),
                _ => {}
            }
        }
        MemoryStats {
            entries: inner.entries.len() as u64,
            frozen,
            manifests: held.len() as u64,
            manifest_bytes: held
                .iter()
                .filter(|m| !m.text().is_mapped())
                .map(|m| m.text().len() as u64)
                .sum(),
            mapped_manifest_bytes: held
                .iter()
                .filter(|m| m.text().is_mapped())
                .map(|m| m.text().len() as u64)
                .sum(),
            listed: inner.listed_names as u64,
        }
    }

    /// Makes room in the journal for the record of a change about to be made, so that a
    /// full disk refuses the change (ENOSPC) instead of leaving it out of the journal.
    pub(crate) fn room(&self) -> Result<()> {
        Ok(self.journal().reserve()?)
    }

    pub(crate) fn transition_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.transition.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a mutation: into the journal (when the inode has a path) and the dirty set.
    pub(crate) fn record(&self, inner: &mut Inner, rec: Record) -> Result<()> {
        if self
            .journal_stale
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(WcError::JournalStale);
        }
        // Every record but tracking and copy marks changes times: the operation's time goes
        // first (taken now if the operation has not taken it yet: a record may be written
        // before the change it describes is made).
        if matches!(
            rec,
            Record::Track { .. }
                | Record::Copy { .. }
                | Record::MergeParent { .. }
                | Record::FromP2 { .. }
        ) {
            self.journal().append(&rec)?;
        } else {
            let (secs, nanos) = unix_time(inner.now());
            self.journal()
                .append_all(&[Record::Clock { secs, nanos }, rec.clone()])?;
        }
        for p in rec.paths() {
            inner.dirty.insert(p.to_vec());
        }
        self.feed_record(&rec);
        Ok(())
    }
}

/// The path of name `name` in directory `parent`.
fn child_path(inner: &Inner, parent: u64, name: &[u8]) -> Result<Vec<u8>> {
    let mut p = inner.path_of(parent).ok_or(WcError::NotFound)?;
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    Ok(p)
}

pub(crate) fn unix_time(t: SystemTime) -> (i64, u32) {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            if d.subsec_nanos() == 0 {
                (-(d.as_secs() as i64), 0)
            } else {
                (-(d.as_secs() as i64) - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    }
}

pub(crate) fn system_time(secs: i64, nanos: u32) -> SystemTime {
    let base = if secs >= 0 {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64)
    } else {
        SystemTime::UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs())
    };
    base + std::time::Duration::from_nanos(nanos as u64)
}
