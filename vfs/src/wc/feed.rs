//! The change feed: what changed in the working copy, in order, a number (a sequence) each,
//! kept across remounts, so that a tool (`revfs watch`) can ask what changed since a
//! cursor it was given, after a restart of its own or of the daemon, as Watchman's clock
//! allows (docs/FORMATS.md, "The change feed").
//!
//! A change is a path and a kind: created, modified or removed. The working copy pushes
//! them as it makes them (its journal's records, writes to files, an update's or a
//! revert's paths). At most [`MAX_CHANGES`] are kept: past that the older half is
//! dropped, and a cursor from before what is kept is answered
//! [`Since::Fresh`] (the tool looks at the whole tree again, as after a Watchman recrawl).
//! A mount checks the file's records but keeps in memory only the changes it pushes; the
//! file is read when a tool asks about a cursor older than those.
//! They reach the file `changes` in the mount's state directory in batches, one `write`
//! each: when a tool asks, when [`BATCH`] are waiting, before an update returns, at
//! unmount. A daemon killed between two batches loses the last one's changes from the
//! file, but not from the working copy's journal, which recorded each before it was
//! acknowledged: the file's header says whether the feed was closed, and the mount after
//! a kill adds the journal's paths as modified ([`Feed::crashed`]).
//!
//! ```text
//! header (32 bytes): b"RVFSFEED" | version u32 BE | flags u32 BE (bit 0: closed)
//!                    | instance u64 BE | first sequence u64 BE
//! record:            framed (`framed.rs`): payload length, crc32 of payload, payload
//! payload:           sequence u64 BE | kind u8 (b'c', b'm', b'd') | path
//! ```

use crate::wc::framed::{self, payload_at};
use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"RVFSFEED";
/// The feed format version this code reads and writes.
pub const FEED_VERSION: u32 = 1;
const HEADER_LEN: usize = 32;
/// Header flag: the daemon closed the feed (every change it pushed is in the file).
const CLOSED: u32 = 1;
/// Changes kept; past this, the older half goes.
pub const MAX_CHANGES: usize = 200_000;
/// Changes waiting in memory before they are written without being asked for.
pub const BATCH: usize = 4096;
/// A record longer than this is damage, not a path.
const MAX_RECORD: usize = 1 << 20;

/// Errors reading or writing the feed.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a revfs change feed", path.display())]
    BadMagic { path: PathBuf },
    #[error("{}: change feed format version {found} is not supported (this revfs reads version {FEED_VERSION})", path.display())]
    Version { path: PathBuf, found: u32 },
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Created,
    Modified,
    Removed,
}

impl ChangeKind {
    fn byte(self) -> u8 {
        match self {
            ChangeKind::Created => b'c',
            ChangeKind::Modified => b'm',
            ChangeKind::Removed => b'd',
        }
    }

    fn from_byte(b: u8) -> Option<ChangeKind> {
        match b {
            b'c' => Some(ChangeKind::Created),
            b'm' => Some(ChangeKind::Modified),
            b'd' => Some(ChangeKind::Removed),
            _ => None,
        }
    }

    /// The word `revfs watch` prints.
    pub fn word(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Removed => "removed",
        }
    }
}

/// One change: its sequence number, its kind, its path from the working copy's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub seq: u64,
    pub kind: ChangeKind,
    pub path: Box<[u8]>,
}

/// Where a tool is in a feed: the feed's instance and the last sequence it has seen (0:
/// none). Written `INSTANCE:SEQ`, the instance in 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub instance: u64,
    pub seq: u64,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}:{}", self.instance, self.seq)
    }
}

impl std::str::FromStr for Cursor {
    type Err = String;
    fn from_str(s: &str) -> Result<Cursor, String> {
        let bad = || format!("not a revfs watch cursor: {s:?} (it looks like 0123456789abcdef:42)");
        let (instance, seq) = s.split_once(':').ok_or_else(bad)?;
        if instance.len() != 16 {
            return Err(bad());
        }
        Ok(Cursor {
            instance: u64::from_str_radix(instance, 16).map_err(|_| bad())?,
            seq: seq.parse().map_err(|_| bad())?,
        })
    }
}

/// The answer to "what changed since this cursor".
#[derive(Debug, PartialEq, Eq)]
pub enum Since<'a> {
    /// The changes after it, oldest first (possibly none).
    Changes(Vec<&'a Change>),
    /// The cursor is of another feed (the mount was discarded and made again), or from
    /// before the oldest change kept: what changed cannot be told; look at the whole tree.
    Fresh,
}

/// An open change feed.
pub struct Feed {
    path: PathBuf,
    file: File,
    instance: u64,
    /// Changes in memory, oldest first: every change kept once `loaded`, otherwise those
    /// pushed since the feed was opened (the file holds the others, read when a cursor
    /// older than these is asked about: a mount does not read what may be 200,000 changes
    /// before it serves). The last `unwritten` are not in the file yet.
    changes: VecDeque<Change>,
    loaded: bool,
    unwritten: usize,
    /// The sequence of the oldest change kept, or of the next one when none is kept.
    first_seq: u64,
    next_seq: u64,
    /// The daemon before did not close the feed.
    crashed: bool,
    /// Files written since the last cursor handed out, whose write was pushed: their next
    /// writes need no change of their own until a tool asks again.
    touched: HashSet<u64>,
}

impl Feed {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FeedError + '_ {
        move |source| FeedError::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// Opens the feed at `path`, creating it when missing (a new instance), and marks it
    /// open (not closed) before anything is pushed. A damaged tail is cut off.
    pub fn open(path: &Path) -> Result<Feed, FeedError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(Self::io(path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(Self::io(path))?;
        if bytes.is_empty() {
            let instance = new_instance();
            file.write_all(&header(instance, 0, 1))
                .map_err(Self::io(path))?;
            file.sync_data().map_err(Self::io(path))?;
            return Ok(Feed {
                path: path.to_owned(),
                file,
                instance,
                changes: VecDeque::new(),
                loaded: true,
                unwritten: 0,
                first_seq: 1,
                next_seq: 1,
                crashed: false,
                touched: HashSet::new(),
            });
        }
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err(FeedError::BadMagic {
                path: path.to_owned(),
            });
        }
        let be32 = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let be64 = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_be_bytes(b)
        };
        let version = be32(8);
        if version != FEED_VERSION {
            return Err(FeedError::Version {
                path: path.to_owned(),
                found: version,
            });
        }
        let flags = be32(12);
        let instance = be64(16);
        let first_seq = be64(24).max(1);
        // The records are checked, not kept (`changes`).
        let (pos, next_seq) = walk(&bytes, first_seq, |_, _, _| {});
        if pos < bytes.len() {
            tracing::warn!(
                feed = %path.display(),
                kept = pos,
                dropped = bytes.len() - pos,
                "the change feed has a damaged tail; cutting it off"
            );
            file.set_len(pos as u64).map_err(Self::io(path))?;
        }
        let crashed = flags & CLOSED == 0;
        // Open: a kill from now on is seen by the next mount.
        file.write_all_at(&0u32.to_be_bytes(), 12)
            .map_err(Self::io(path))?;
        file.sync_data().map_err(Self::io(path))?;
        Ok(Feed {
            path: path.to_owned(),
            file,
            instance,
            changes: VecDeque::new(),
            loaded: next_seq == first_seq,
            unwritten: 0,
            first_seq,
            next_seq,
            crashed,
            touched: HashSet::new(),
        })
    }

    /// Whether the daemon before this one did not close the feed (it was killed): the
    /// changes of its last batch may be missing, and the caller pushes what its journal
    /// names.
    pub fn crashed(&self) -> bool {
        self.crashed
    }

    /// The cursor of the latest change: a tool given it is told of what comes after.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            instance: self.instance,
            seq: self.next_seq - 1,
        }
    }

    /// Pushes a change; writes the waiting ones once [`BATCH`] wait. A failed write is
    /// logged and tried again with the next batch: the change stays in memory.
    pub fn push(&mut self, kind: ChangeKind, path: &[u8]) {
        self.changes.push_back(Change {
            seq: self.next_seq,
            kind,
            path: Box::from(path),
        });
        self.next_seq += 1;
        self.unwritten += 1;
        if self.unwritten >= BATCH {
            if let Err(e) = self.flush() {
                tracing::warn!("the change feed: {e}");
            }
        }
        if self.next_seq - self.first_seq > MAX_CHANGES as u64 {
            self.drop_older_half();
        }
    }

    /// The content of file `ino`, at `path()`, changed: pushed as modified, unless it was
    /// since the last cursor handed out (a tool that asks hears of the file once).
    pub fn touched(&mut self, ino: u64, path: impl FnOnce() -> Option<Vec<u8>>) {
        if self.touched.contains(&ino) {
            return;
        }
        if let Some(p) = path() {
            self.push(ChangeKind::Modified, &p);
            self.touched.insert(ino);
        }
    }

    /// File `ino` was just pushed as made or modified (by a journal record): its writes
    /// need no change of their own until a cursor is handed out.
    pub fn covered(&mut self, ino: u64) {
        self.touched.insert(ino);
    }

    /// The cursor of now, handed to a tool: a write after it is a change again.
    pub fn hand_out(&mut self) -> Cursor {
        self.touched.clear();
        self.cursor()
    }

    /// Writes the changes not yet in the file, with one `write`.
    pub fn flush(&mut self) -> Result<(), FeedError> {
        if self.unwritten == 0 {
            return Ok(());
        }
        let mut buf = Vec::new();
        let from = self.changes.len() - self.unwritten;
        for c in self.changes.range(from..) {
            frame(c, &mut buf);
        }
        use std::io::Seek;
        self.file
            .seek(std::io::SeekFrom::End(0))
            .map_err(Self::io(&self.path))?;
        self.file.write_all(&buf).map_err(Self::io(&self.path))?;
        self.unwritten = 0;
        Ok(())
    }

    /// What changed after `cursor` (the file is read when the changes in memory begin
    /// after it; one that cannot be read makes the answer fresh).
    pub fn since(&mut self, cursor: &Cursor) -> Since<'_> {
        if cursor.instance != self.instance
            || cursor.seq + 1 < self.first_seq
            || cursor.seq >= self.next_seq
        {
            return Since::Fresh;
        }
        let in_memory = self.changes.front().map_or(self.next_seq, |c| c.seq);
        if cursor.seq + 1 < in_memory {
            if let Err(e) = self.load() {
                tracing::warn!("the change feed: {e}");
                return Since::Fresh;
            }
        }
        let from = self.changes.front().map_or(self.next_seq, |c| c.seq);
        let skip = (cursor.seq + 1 - from) as usize;
        Since::Changes(self.changes.range(skip..).collect())
    }

    /// Reads every change kept into memory (what is waiting is written first).
    fn load(&mut self) -> Result<(), FeedError> {
        if self.loaded {
            return Ok(());
        }
        self.flush()?;
        let bytes = std::fs::read(&self.path).map_err(Self::io(&self.path))?;
        let mut changes = VecDeque::with_capacity((self.next_seq - self.first_seq) as usize);
        let (_, next_seq) = walk(&bytes, self.first_seq, |seq, kind, path| {
            changes.push_back(Change {
                seq,
                kind,
                path: Box::from(path),
            })
        });
        if next_seq != self.next_seq {
            return Err(FeedError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(format!(
                    "holds changes up to {} of {}",
                    next_seq - 1,
                    self.next_seq - 1
                )),
            });
        }
        self.changes = changes;
        self.loaded = true;
        Ok(())
    }

    /// Writes what is waiting and marks the feed closed: the next mount knows it holds
    /// every change.
    pub fn close(&mut self) -> Result<(), FeedError> {
        self.flush()?;
        self.file
            .write_all_at(&CLOSED.to_be_bytes(), 12)
            .map_err(Self::io(&self.path))?;
        self.file.sync_data().map_err(Self::io(&self.path))
    }

    /// Drops the older half of the kept changes: the file is written anew (to a temporary
    /// name, then renamed) with the rest.
    fn drop_older_half(&mut self) {
        if let Err(e) = self.load() {
            tracing::warn!("the change feed: {e}");
            return;
        }
        let keep = self.changes.len() / 2;
        let drop = self.changes.len() - keep;
        self.changes.drain(..drop);
        self.unwritten = self.unwritten.min(self.changes.len());
        self.first_seq = self.changes.front().map_or(self.next_seq, |c| c.seq);
        if let Err(e) = self.rewrite() {
            tracing::warn!("the change feed: {e}");
        }
    }

    fn rewrite(&mut self) -> Result<(), FeedError> {
        let tmp = self.path.with_extension("tmp");
        let mut buf = header(self.instance, 0, self.first_seq).to_vec();
        for c in &self.changes {
            frame(c, &mut buf);
        }
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(Self::io(&tmp))?;
        f.write_all(&buf).map_err(Self::io(&tmp))?;
        f.sync_data().map_err(Self::io(&tmp))?;
        std::fs::rename(&tmp, &self.path).map_err(Self::io(&self.path))?;
        self.file = f;
        self.unwritten = 0;
        Ok(())
    }
}

/// Walks the records after the header of `bytes`, from sequence `first_seq`: hands each
/// whole one whose sequence follows to `each` (sequence, kind, path); returns where the last of them ends and the
/// sequence after it. A record cut short, failing its checksum, of an unknown kind or out
/// of sequence ends the walk (damage).
fn walk(
    bytes: &[u8],
    first_seq: u64,
    mut each: impl FnMut(u64, ChangeKind, &[u8]),
) -> (usize, u64) {
    let (mut pos, mut next_seq) = (HEADER_LEN, first_seq);
    while let Some(payload) = payload_at(bytes, pos, MAX_RECORD) {
        let Some((seq, kind)) = payload.get(..9).and_then(|head| {
            let mut seq = [0u8; 8];
            seq.copy_from_slice(&head[..8]);
            Some((u64::from_be_bytes(seq), ChangeKind::from_byte(head[8])?))
        }) else {
            break;
        };
        if seq != next_seq {
            break;
        }
        each(seq, kind, &payload[9..]);
        next_seq = seq + 1;
        pos += 8 + payload.len();
    }
    (pos, next_seq)
}

fn header(instance: u64, flags: u32, first_seq: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&FEED_VERSION.to_be_bytes());
    h[12..16].copy_from_slice(&flags.to_be_bytes());
    h[16..24].copy_from_slice(&instance.to_be_bytes());
    h[24..32].copy_from_slice(&first_seq.to_be_bytes());
    h
}

fn frame(c: &Change, buf: &mut Vec<u8>) {
    let mut payload = Vec::with_capacity(9 + c.path.len());
    payload.extend_from_slice(&c.seq.to_be_bytes());
    payload.push(c.kind.byte());
    payload.extend_from_slice(&c.path);
    framed::frame(&payload, buf);
}

/// A number that tells this feed from one made at another time or by another process at
/// the same path (a mount discarded and made again): the time in nanoseconds and the
/// process id, mixed.
fn new_instance() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos ^ (u64::from(std::process::id()) << 40);
    // splitmix64's finalizer: neighbouring inputs give unrelated outputs.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(s: Since<'_>) -> Vec<(ChangeKind, String)> {
        match s {
            Since::Changes(v) => v
                .into_iter()
                .map(|c| (c.kind, String::from_utf8_lossy(&c.path).into_owned()))
                .collect(),
            Since::Fresh => panic!("fresh"),
        }
    }

    #[test]
    fn a_cursor_is_told_what_came_after_it_across_a_reopen_and_nothing_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("changes");
        let mut f = Feed::open(&path).unwrap();
        assert!(!f.crashed());
        let start = f.cursor();
        f.push(ChangeKind::Created, b"a");
        let mid = f.cursor();
        f.push(ChangeKind::Modified, b"d/b");
        f.push(ChangeKind::Removed, b"a");
        f.close().unwrap();
        drop(f);
        let mut f = Feed::open(&path).unwrap();
        assert!(!f.crashed(), "closed before");
        assert_eq!(
            paths(f.since(&start)),
            vec![
                (ChangeKind::Created, "a".into()),
                (ChangeKind::Modified, "d/b".into()),
                (ChangeKind::Removed, "a".into())
            ]
        );
        assert_eq!(
            paths(f.since(&mid)),
            vec![
                (ChangeKind::Modified, "d/b".into()),
                (ChangeKind::Removed, "a".into())
            ]
        );
        let end = f.cursor();
        assert_eq!(paths(f.since(&end)), vec![]);
        f.push(ChangeKind::Created, b"c");
        assert_eq!(
            paths(f.since(&end)),
            vec![(ChangeKind::Created, "c".into())]
        );
        assert_eq!(end.to_string().parse::<Cursor>(), Ok(end));
    }

    #[test]
    fn writes_to_a_file_are_one_change_between_two_cursors() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = Feed::open(&dir.path().join("changes")).unwrap();
        let start = f.hand_out();
        for _ in 0..3 {
            f.touched(7, || Some(b"w".to_vec()));
        }
        assert_eq!(
            paths(f.since(&start)),
            vec![(ChangeKind::Modified, "w".into())]
        );
        let next = f.hand_out();
        f.touched(7, || Some(b"w".to_vec()));
        f.touched(8, || None); // no path (unlinked): nothing
        assert_eq!(
            paths(f.since(&next)),
            vec![(ChangeKind::Modified, "w".into())]
        );
    }

    #[test]
    fn changes_pushed_after_a_reopen_follow_those_read_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("changes");
        let mut f = Feed::open(&path).unwrap();
        let start = f.cursor();
        f.push(ChangeKind::Created, b"before");
        f.close().unwrap();
        drop(f);
        let mut f = Feed::open(&path).unwrap();
        let reopened = f.cursor();
        f.push(ChangeKind::Removed, b"after");
        // From memory alone, then with the file read (the waiting change written first).
        assert_eq!(
            paths(f.since(&reopened)),
            vec![(ChangeKind::Removed, "after".into())]
        );
        assert_eq!(
            paths(f.since(&start)),
            vec![
                (ChangeKind::Created, "before".into()),
                (ChangeKind::Removed, "after".into())
            ]
        );
        f.push(ChangeKind::Modified, b"later");
        assert_eq!(paths(f.since(&start)).len(), 3);
    }

    #[test]
    fn a_feed_not_closed_says_so_and_keeps_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("changes");
        let mut f = Feed::open(&path).unwrap();
        let start = f.cursor();
        f.push(ChangeKind::Created, b"written");
        f.flush().unwrap();
        f.push(ChangeKind::Created, b"lost");
        drop(f); // as a kill: no close
        let mut f = Feed::open(&path).unwrap();
        assert!(f.crashed());
        assert_eq!(
            paths(f.since(&start)),
            vec![(ChangeKind::Created, "written".into())]
        );
    }

    #[test]
    fn a_damaged_tail_is_cut_and_a_foreign_or_old_cursor_is_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("changes");
        let mut f = Feed::open(&path).unwrap();
        let start = f.cursor();
        f.push(ChangeKind::Created, b"a");
        f.push(ChangeKind::Created, b"b");
        f.close().unwrap();
        drop(f);
        let len = std::fs::metadata(&path).unwrap().len();
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len - 1).unwrap();
        let mut f = Feed::open(&path).unwrap();
        assert_eq!(
            paths(f.since(&start)),
            vec![(ChangeKind::Created, "a".into())]
        );
        let foreign = Cursor {
            instance: start.instance ^ 1,
            seq: 0,
        };
        assert_eq!(f.since(&foreign), Since::Fresh);
        let ahead = Cursor { seq: 99, ..start };
        assert_eq!(f.since(&ahead), Since::Fresh);
        assert!("xyz".parse::<Cursor>().is_err());
    }

    #[test]
    fn past_the_bound_the_older_half_goes_and_its_cursors_are_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("changes");
        let mut f = Feed::open(&path).unwrap();
        let start = f.cursor();
        for i in 0..=MAX_CHANGES {
            f.push(ChangeKind::Modified, format!("f{i}").as_bytes());
        }
        assert_eq!(f.since(&start), Since::Fresh);
        let recent = Cursor {
            seq: MAX_CHANGES as u64,
            ..start
        };
        assert_eq!(
            paths(f.since(&recent)),
            vec![(ChangeKind::Modified, format!("f{MAX_CHANGES}"))]
        );
        f.close().unwrap();
        drop(f);
        let mut f = Feed::open(&path).unwrap();
        assert_eq!(f.since(&start), Since::Fresh);
        assert_eq!(
            paths(f.since(&recent)),
            vec![(ChangeKind::Modified, format!("f{MAX_CHANGES}"))]
        );
    }
}
