//! What the working copy tells its change feed (`feed.rs`), and what it answers a tool
//! that asks what changed since a cursor (`revfs watch`): each journal record's paths, a
//! write to a file once between two questions, an update's paths (a revert's are journal
//! records); at a mount after a kill, every path of the replayed journal.

use crate::wc::feed::{ChangeKind, Cursor, Feed, FeedError, Since};
use crate::wc::journal::Record;
use crate::wc::{Inner, PathChange, WorkingCopy, RENAME_EXCHANGE};
use revfs_store::manifest::ManifestChange;
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

/// The answer to "what changed since this cursor".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangesSince {
    /// Where the answer ends: the cursor to ask with next.
    pub cursor: Cursor,
    /// The cursor was of another feed, or too old: what changed cannot be told (the
    /// changes are then empty), look at the whole tree.
    pub fresh: bool,
    /// The changes after the cursor, oldest first: (sequence, kind, path).
    pub changes: Vec<(u64, ChangeKind, Vec<u8>)>,
}

/// Opens the feed at `path`. One that cannot be read as a feed (another format, damage in
/// its header) is kept aside as `changes.bad` and a new one made: tools that had a cursor
/// of it are told to look at the whole tree, and the mount goes on.
pub(crate) fn open_feed(path: &Path, records: &[Record]) -> Result<Feed, FeedError> {
    let mut feed = match Feed::open(path) {
        Err(e @ (FeedError::BadMagic { .. } | FeedError::Version { .. })) => {
            let aside = path.with_extension("bad");
            tracing::warn!("{e}; kept as {} and made anew", aside.display());
            std::fs::rename(path, &aside).map_err(|source| FeedError::Io {
                path: aside,
                source,
            })?;
            Feed::open(path)?
        }
        other => other?,
    };
    if feed.crashed() {
        // The last batch before a kill may be missing; each of its changes was journaled
        // first, so every path the journal names may have changed.
        let paths: BTreeSet<&[u8]> = records.iter().flat_map(|r| r.paths()).collect();
        for p in paths {
            feed.push(ChangeKind::Modified, p);
        }
    }
    Ok(feed)
}

/// The changes a journal record makes, by path.
fn record_changes(rec: &Record, mut push: impl FnMut(ChangeKind, &[u8])) {
    match rec {
        Record::Create { path, .. }
        | Record::Mkdir { path, .. }
        | Record::Symlink { path, .. }
        | Record::Special { path, .. }
        | Record::Put { path, .. } => push(ChangeKind::Created, path),
        Record::Link { to, .. } => push(ChangeKind::Created, to),
        Record::Materialize { path, .. }
        | Record::SetMode { path, .. }
        | Record::Restore { path } => push(ChangeKind::Modified, path),
        Record::Unlink { path } | Record::Rmdir { path } | Record::Remove { path } => {
            push(ChangeKind::Removed, path)
        }
        Record::Rename { from, to, flags } if flags & RENAME_EXCHANGE != 0 => {
            push(ChangeKind::Modified, from);
            push(ChangeKind::Modified, to);
        }
        Record::Rename { from, to, .. } => {
            push(ChangeKind::Removed, from);
            push(ChangeKind::Created, to);
        }
        // Times, owners, extended attributes, hg's tracking and merge state: not a change
        // of a file's name or content.
        _ => {}
    }
}

impl WorkingCopy {
    fn feed(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the feed of a journaled record's changes (the caller holds the working
    /// copy's lock: the feed's order is the journal's).
    pub(crate) fn feed_record(&self, rec: &Record) {
        let mut feed = self.feed();
        record_changes(rec, |kind, path| feed.push(kind, path));
    }

    /// The record just journaled for file `ino` (its creation, its copy-up before a
    /// write) told the feed of it: its writes until the next question are that change.
    pub(crate) fn feed_covers(&self, ino: u64) {
        self.feed().covered(ino);
    }

    /// Tells the feed that the content of `ino` changed (a write, a truncation): once
    /// between two questions of a tool's.
    pub(crate) fn feed_write(&self, inner: &Inner, ino: u64) {
        self.feed().touched(ino, || inner.path_of(ino));
    }

    /// Tells the feed of what an update changed: each path of the manifests' `diff`, and
    /// each other path of the update's `changes` (directories, local changes it reverted).
    /// Called before the journal is rewritten, which the feed's writing then precedes.
    pub(crate) fn feed_update(&self, diff: &[ManifestChange], changes: &[PathChange]) {
        let mut feed = self.feed();
        let kind = |old: bool, new: bool| match (old, new) {
            (false, true) => ChangeKind::Created,
            (true, false) => ChangeKind::Removed,
            _ => ChangeKind::Modified,
        };
        let in_diff: HashSet<&[u8]> = diff.iter().map(|c| c.path.as_slice()).collect();
        for c in diff {
            feed.push(kind(c.old.is_some(), c.new.is_some()), &c.path);
        }
        for c in changes {
            if !in_diff.contains(c.path.as_slice()) {
                feed.push(kind(c.old.is_some(), c.new.is_some()), &c.path);
            }
        }
    }

    /// Writes what the feed holds (before the journal is rewritten: the changes of the
    /// last batch must not depend on the journal's paths from then on).
    pub(crate) fn flush_feed(&self) {
        if let Err(e) = self.feed().flush() {
            tracing::warn!("the change feed: {e}");
        }
    }

    /// What changed since `cursor` (none: nothing, only the cursor of now), and the cursor
    /// to ask with next.
    pub fn changes_since(&self, cursor: Option<&Cursor>) -> ChangesSince {
        let mut feed = self.feed();
        if let Err(e) = feed.flush() {
            tracing::warn!("the change feed: {e}");
        }
        let (fresh, changes) = match cursor.map(|c| feed.since(c)) {
            None => (false, Vec::new()),
            Some(Since::Fresh) => (true, Vec::new()),
            Some(Since::Changes(v)) => (
                false,
                v.into_iter()
                    .map(|c| (c.seq, c.kind, c.path.to_vec()))
                    .collect(),
            ),
        };
        ChangesSince {
            cursor: feed.hand_out(),
            fresh,
            changes,
        }
    }

    /// Closes the feed at the daemon's end: the next mount knows it missed nothing.
    pub fn close_feed(&self) {
        if let Err(e) = self.feed().close() {
            tracing::error!("closing the change feed: {e}");
        }
    }
}
