//! The walk ahead of a program that reads the tree (`readahead.rs`'s [`Walker`]): from a
//! directory such a program lists, the directories it comes to next, in its order (depth
//! first, each directory's entries in listing order, then on through what follows in its
//! ancestors), each listed here (from the manifest, not through the kernel) and its store
//! files queued for read-ahead, up to `readahead::AHEAD` files past the last directory
//! the program was seen listing. The program's own listing of a directory the walk came to
//! shows how far it is ([`WorkingCopy::program_listed`]).
//!
//! [`Walker`]: crate::readahead::Walker

use super::{EntryType, FileData, Inner, Kind, WorkingCopy, ROOT_INO};
use crate::readahead::Job;
use std::sync::{Arc, Mutex, Weak};

/// Where the walk is: the directories still to come to, a level per entry of the stack,
/// each level's in reverse listing order (the next one last).
#[derive(Default)]
pub(crate) struct Cursor {
    levels: Vec<Vec<u64>>,
}

impl Cursor {
    fn next(&mut self) -> Option<u64> {
        loop {
            let level = self.levels.last_mut()?;
            match level.pop() {
                Some(dir) => return Some(dir),
                None => {
                    self.levels.pop();
                }
            }
        }
    }

    /// The subdirectories of a directory the walk comes to (from its listing), first.
    fn enter(&mut self, listing: &[(Box<[u8]>, u64, EntryType)]) {
        let dirs: Vec<u64> = listing
            .iter()
            .rev()
            .filter(|(_, _, t)| *t == EntryType::Dir)
            .map(|(_, ino, _)| *ino)
            .collect();
        if !dirs.is_empty() {
            self.levels.push(dirs);
        }
    }
}

/// The walker of one working copy, for read-ahead's threads.
struct TreeWalker {
    wc: Weak<WorkingCopy>,
}

impl crate::readahead::Walker for TreeWalker {
    fn walk(&self, from: Option<u64>) {
        if let Some(wc) = self.wc.upgrade() {
            wc.walk_ahead(from);
        }
    }
}

impl WorkingCopy {
    /// Lets read-ahead walk ahead of programs that read the tree, and rebuild big texts
    /// into the on-disk cache (when read-ahead is on).
    pub fn enable_walk(self: &Arc<Self>) {
        if let Some(ra) = self.readahead.get() {
            ra.set_walker(Arc::new(TreeWalker {
                wc: Arc::downgrade(self),
            }));
            ra.set_big_texts(Arc::new(crate::wc::content::BigTextBuilder {
                wc: Arc::downgrade(self),
            }));
        }
    }

    /// No walk from now on (`debug_no_push`).
    pub fn stop_walking(&self) {
        if let Some(ra) = self.readahead.get() {
            ra.stop_walking();
        }
    }

    /// A program lists directory `dir` from its start: true when the walk came to it (the
    /// program reads the tree in the walk's order, and is that far).
    pub fn walk_reached(&self, dir: u64) -> bool {
        self.readahead.get().is_some_and(|ra| ra.reached(dir))
    }

    /// A program listed directory `dir`, which the walk had not come to, while files were
    /// read: its round goes before anything queued. Its first
    /// [`LISTER_READS`](crate::readahead::readers::LISTER_READS) files are read ahead but not pushed:
    /// the lister's reads of them reach the daemon and tell whether it reads the tree
    /// itself ([`WorkingCopy::walk_from`]).
    pub fn listed_while_reading(&self, dir: u64) {
        let Some(ra) = self.readahead.get() else {
            return;
        };
        self.queue_round(
            ra,
            &self.read(),
            dir,
            b"",
            crate::readahead::readers::LISTER_READS,
        );
    }

    /// The program that listed directory `dir` reads its files: the walk starts again from
    /// it.
    pub fn walk_from(&self, dir: u64) {
        if let Some(ra) = self.readahead.get() {
            ra.walk_from(dir);
        }
    }

    /// The directory of file `ino` when it is a store file.
    pub fn store_parent(&self, ino: u64) -> Option<u64> {
        let inner = self.read();
        let e = inner.entry(ino).ok()?;
        matches!(e.kind, Kind::File(FileData::Store { .. })).then_some(e.parent)
    }

    /// Walks on (from after `from`, or where the walk was) while read-ahead has room. On a
    /// read-ahead thread; takes the working copy's lock only to list a directory and to
    /// collect its files, one directory at a time.
    pub(crate) fn walk_ahead(&self, from: Option<u64>) {
        let Some(ra) = self.readahead.get() else {
            return;
        };
        let mut cursor = self.walk_cursor.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = from {
            *cursor = self.cursor_after(dir);
        }
        while ra.walk_room() > 0 {
            let Some(dir) = cursor.next() else {
                return;
            };
            let Ok((_, listing)) = self.readdir(dir) else {
                continue;
            };
            cursor.enter(&listing);
            let inner = self.read();
            let jobs = round_jobs(&inner, dir, b"", crate::readahead::AHEAD, 0);
            ra.queue_walked(&inner.repo, dir, jobs);
        }
    }

    /// The walk from directory `dir` on, its files aside (the program's round has them):
    /// its subdirectories, then the directories after each of its ancestors in theirs.
    fn cursor_after(&self, dir: u64) -> Cursor {
        let mut levels = Vec::new();
        let mut at = dir;
        while at != ROOT_INO {
            let parent = match self.read().entry(at) {
                Ok(e) => e.parent,
                Err(_) => break,
            };
            let Ok((_, listing)) = self.readdir(parent) else {
                break;
            };
            let after: Vec<u64> = listing
                .iter()
                .skip_while(|(_, ino, _)| *ino != at)
                .skip(1)
                .filter(|(_, _, t)| *t == EntryType::Dir)
                .map(|(_, ino, _)| *ino)
                .collect();
            levels.push(after.into_iter().rev().collect::<Vec<u64>>());
            at = parent;
        }
        levels.reverse();
        let mut cursor = Cursor { levels };
        if let Ok((_, listing)) = self.readdir(dir) {
            cursor.enter(&listing);
        }
        cursor
    }
}

/// Up to `max` store files of directory `dir` named after `after`, in listing order, as
/// read-ahead jobs.
pub(super) fn round_jobs(
    inner: &Inner,
    dir: u64,
    after: &[u8],
    max: usize,
    unpushed: usize,
) -> Vec<Job> {
    let Ok(Kind::Dir {
        children: Some(children),
        ..
    }) = inner.entry(dir).map(|p| &p.kind)
    else {
        return Vec::new();
    };
    children
        .files_after(after)
        .filter_map(|(name, file)| match file {
            Ok(node) => Some(Job {
                path: children.store_path(name)?,
                node,
                ino: None,
                push: true,
                walked: false,
            }),
            Err(ino) => match &inner.entry(ino).ok()?.kind {
                Kind::File(FileData::Store { path, node, .. }) => Some(Job {
                    path: path.to_vec(),
                    node: *node,
                    ino: Some(ino),
                    push: true,
                    walked: false,
                }),
                _ => None,
            },
        })
        .take(max)
        .enumerate()
        .map(|(i, job)| Job {
            push: i >= unpushed,
            ..job
        })
        .collect()
}

/// The walk's place, kept by the working copy.
pub(crate) type WalkCursor = Mutex<Cursor>;
