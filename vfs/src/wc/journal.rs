//! The change journal: an append-only log of every mutation made through the mount, by
//! path, replayed at mount time over the base revision's tree to rebuild the working copy.
//!
//! File format (version 7; versions 1 to 6, which lack some records, are still read and
//! are marked version 7 when opened, before anything is appended),
//! described in docs/FORMATS.md:
//! ```text
//! header:  b"RVFSJRNL" | version u32 BE | base node (20 bytes)
//! record:  payload length u32 BE | crc32 of payload u32 BE | payload
//! payload: tag u8 | fields (paths and byte strings as u32 BE length + bytes; integers BE)
//! ```
//! A record is appended with one `write(2)` before the operation is acknowledged, so it
//! survives a killed daemon; `sync` (called for fsync through the mount) makes it durable.
//! Replay stops at the first record that is cut short or fails its checksum: that can only
//! be the last one, written when the machine itself went down.

use revfs_store::Node;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"RVFSJRNL";
/// The journal format version this code reads and writes.
pub const JOURNAL_VERSION: u32 = 7;
/// The oldest journal format version this code reads.
pub const JOURNAL_MIN_VERSION: u32 = 1;
const HEADER_LEN: usize = 32;
/// Records longer than this are corrupt, not real.
const MAX_RECORD: usize = 64 << 20;

/// How a path is tracked, overriding what the base manifest says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Track {
    /// Back to the default: tracked if and only if in the base manifest.
    Default = 0,
    /// `revfs add`: tracked although not in the base manifest.
    Added = 1,
    /// `revfs remove` / `revfs forget`: untracked although in the base manifest.
    Removed = 2,
    /// Version 6: not in hg's dirstate at all although in the base manifest (hg's update
    /// merging a local rename drops the source's entry): never removed nor missing, unknown
    /// when on disk.
    Dropped = 3,
    /// Version 6: tracked as if in the base manifest although it is not (hg's update merging
    /// a local rename keeps the destination's entry as its parent's): modified.
    Claimed = 4,
}

/// One journaled mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A new regular file whose content lives in overlay file `id`.
    Create {
        path: Vec<u8>,
        id: u64,
        mode: u32,
    },
    /// The existing file at `path` was copied up into overlay file `id`.
    Materialize {
        path: Vec<u8>,
        id: u64,
    },
    Mkdir {
        path: Vec<u8>,
        mode: u32,
    },
    Symlink {
        path: Vec<u8>,
        target: Vec<u8>,
    },
    Unlink {
        path: Vec<u8>,
    },
    Rmdir {
        path: Vec<u8>,
    },
    /// `flags`: 0, or `RENAME_NOREPLACE` (1) / `RENAME_EXCHANGE` (2) as in renameat2.
    Rename {
        from: Vec<u8>,
        to: Vec<u8>,
        flags: u32,
    },
    /// Version 7: a new name `to` for the file at `from` (link(2)): both names are one
    /// inode, with one overlay file.
    Link {
        from: Vec<u8>,
        to: Vec<u8>,
    },
    /// Permission bits (07777).
    SetMode {
        path: Vec<u8>,
        mode: u32,
    },
    /// Modification time of a file not in the overlay (overlay files keep their own).
    SetMtime {
        path: Vec<u8>,
        secs: i64,
        nanos: u32,
    },
    Track {
        path: Vec<u8>,
        track: Track,
    },
    /// Owner and group of an entry not owned by the mounting user (chown, or created by
    /// another user through an `allow_other` mount).
    SetOwner {
        path: Vec<u8>,
        uid: u32,
        gid: u32,
    },
    /// Access time (utimensat).
    SetAtime {
        path: Vec<u8>,
        secs: i64,
        nanos: u32,
    },
    /// The file at `path` returns to the base revision's content and mode (revert).
    Restore {
        path: Vec<u8>,
    },
    /// `dest` is a copy of `source` (`hg copy`, or a rename found by `addremove`);
    /// `source` empty clears it.
    Copy {
        dest: Vec<u8>,
        source: Vec<u8>,
    },
    /// A fifo, socket or device node (never tracked by hg; local to the working copy).
    Special {
        path: Vec<u8>,
        kind: SpecialKind,
        mode: u32,
        rdev: u32,
    },
    /// Whatever is at `path` (a directory with everything below it) is gone; nothing
    /// happens when nothing is there. Written when the journal is rewritten.
    Remove {
        path: Vec<u8>,
    },
    /// The next record was made at this time (version 5): replaying it stamps the times it
    /// changes (the new entry's, its directory's mtime and ctime, a renamed entry's ctime)
    /// with this time rather than the time of the replay.
    Clock {
        secs: i64,
        nanos: u32,
    },
    /// The entry at `path` has these times (version 5): its modification time (`None`: as
    /// it is, for an overlay file whose content keeps its own) and its change time. Written
    /// when the journal is rewritten, for entries whose times a replay would not rebuild.
    Times {
        path: Vec<u8>,
        mtime: Option<(i64, u32)>,
        ctime: (i64, u32),
    },
    /// The entry at `path` has extended attribute `name` (a `user.` name) set to `value`
    /// (version 5).
    SetXattr {
        path: Vec<u8>,
        name: Vec<u8>,
        value: Vec<u8>,
    },
    /// The entry at `path` no longer has extended attribute `name` (version 5).
    RemoveXattr {
        path: Vec<u8>,
        name: Vec<u8>,
    },
    /// The working copy's second parent, during a merge hg is making (version 6); the
    /// null node ends the merge, and every path's `FromP2` with it.
    MergeParent {
        node: Node,
    },
    /// hg's merge information for `path` (its dirstate's `p2_info`: the file was merged,
    /// or taken from the second parent), set or cleared (version 6).
    FromP2 {
        path: Vec<u8>,
        on: bool,
    },
    /// `path` holds exactly this entry (replacing a file there). Written when the journal is
    /// rewritten after a commit or an update, to describe the working copy against its new
    /// parent.
    Put {
        path: Vec<u8>,
        entry: PutEntry,
        mode: u32,
        /// Modification time (seconds, nanoseconds) of an entry whose content is not in the
        /// overlay; `None` means the checkout time.
        mtime: Option<(i64, u32)>,
    },
}

/// The kinds of special files (stored as one byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialKind {
    Fifo = 1,
    Socket = 2,
    Char = 3,
    Block = 4,
}

impl SpecialKind {
    fn from_u8(b: u8) -> Option<SpecialKind> {
        Some(match b {
            1 => SpecialKind::Fifo,
            2 => SpecialKind::Socket,
            3 => SpecialKind::Char,
            4 => SpecialKind::Block,
            _ => return None,
        })
    }
}

/// What a [`Record::Put`] puts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutEntry {
    /// A fifo, socket or device node.
    Special { kind: SpecialKind, rdev: u32 },
    /// A new, empty directory.
    Dir,
    /// A file whose content is revision `node` of filelog `source`.
    StoreFile { source: Vec<u8>, node: Node },
    /// A file whose content is in overlay file `id`.
    OverlayFile { id: u64 },
    /// A symlink whose target is revision `node` of filelog `source`.
    StoreLink { source: Vec<u8>, node: Node },
    /// A symlink with this target.
    LocalLink { target: Vec<u8> },
}

/// Errors reading or writing the journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a revfs journal", path.display())]
    BadMagic { path: PathBuf },
    #[error("{}: journal format version {found} is not supported (this revfs reads versions {JOURNAL_MIN_VERSION} to {JOURNAL_VERSION})", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("{}: journal is for base {found}, the mount expects {expected}; run `revfs doctor`", path.display())]
    WrongBase {
        path: PathBuf,
        found: String,
        expected: String,
    },
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(64);
        match self {
            Record::Create { path, id, mode } => {
                p.push(1);
                put_bytes(&mut p, path);
                p.extend_from_slice(&id.to_be_bytes());
                p.extend_from_slice(&mode.to_be_bytes());
            }
            Record::Materialize { path, id } => {
                p.push(2);
                put_bytes(&mut p, path);
                p.extend_from_slice(&id.to_be_bytes());
            }
            Record::Mkdir { path, mode } => {
                p.push(3);
                put_bytes(&mut p, path);
                p.extend_from_slice(&mode.to_be_bytes());
            }
            Record::Symlink { path, target } => {
                p.push(4);
                put_bytes(&mut p, path);
                put_bytes(&mut p, target);
            }
            Record::Unlink { path } => {
                p.push(5);
                put_bytes(&mut p, path);
            }
            Record::Rmdir { path } => {
                p.push(6);
                put_bytes(&mut p, path);
            }
            Record::Rename { from, to, flags } => {
                p.push(7);
                put_bytes(&mut p, from);
                put_bytes(&mut p, to);
                p.extend_from_slice(&flags.to_be_bytes());
            }
            Record::Link { from, to } => {
                p.push(20);
                put_bytes(&mut p, from);
                put_bytes(&mut p, to);
            }
            Record::SetMode { path, mode } => {
                p.push(8);
                put_bytes(&mut p, path);
                p.extend_from_slice(&mode.to_be_bytes());
            }
            Record::SetMtime { path, secs, nanos } => {
                p.push(9);
                put_bytes(&mut p, path);
                p.extend_from_slice(&secs.to_be_bytes());
                p.extend_from_slice(&nanos.to_be_bytes());
            }
            Record::SetOwner { path, uid, gid } => {
                p.push(16);
                put_bytes(&mut p, path);
                p.extend_from_slice(&uid.to_be_bytes());
                p.extend_from_slice(&gid.to_be_bytes());
            }
            Record::SetAtime { path, secs, nanos } => {
                p.push(17);
                put_bytes(&mut p, path);
                p.extend_from_slice(&secs.to_be_bytes());
                p.extend_from_slice(&nanos.to_be_bytes());
            }
            Record::Track { path, track } => {
                p.push(10);
                put_bytes(&mut p, path);
                p.push(*track as u8);
            }
            Record::Restore { path } => {
                p.push(11);
                put_bytes(&mut p, path);
            }
            Record::Copy { dest, source } => {
                p.push(12);
                put_bytes(&mut p, dest);
                put_bytes(&mut p, source);
            }
            Record::Remove { path } => {
                p.push(13);
                put_bytes(&mut p, path);
            }
            Record::MergeParent { node } => {
                p.push(23);
                p.extend_from_slice(&node.0);
            }
            Record::FromP2 { path, on } => {
                p.push(24);
                put_bytes(&mut p, path);
                p.push(u8::from(*on));
            }
            Record::Special {
                path,
                kind,
                mode,
                rdev,
            } => {
                p.push(15);
                put_bytes(&mut p, path);
                p.push(*kind as u8);
                p.extend_from_slice(&mode.to_be_bytes());
                p.extend_from_slice(&rdev.to_be_bytes());
            }
            Record::SetXattr { path, name, value } => {
                p.push(21);
                put_bytes(&mut p, path);
                put_bytes(&mut p, name);
                put_bytes(&mut p, value);
            }
            Record::RemoveXattr { path, name } => {
                p.push(22);
                put_bytes(&mut p, path);
                put_bytes(&mut p, name);
            }
            Record::Clock { secs, nanos } => {
                p.push(18);
                p.extend_from_slice(&secs.to_be_bytes());
                p.extend_from_slice(&nanos.to_be_bytes());
            }
            Record::Times { path, mtime, ctime } => {
                p.push(19);
                put_bytes(&mut p, path);
                match mtime {
                    None => p.push(0),
                    Some((secs, nanos)) => {
                        p.push(1);
                        p.extend_from_slice(&secs.to_be_bytes());
                        p.extend_from_slice(&nanos.to_be_bytes());
                    }
                }
                p.extend_from_slice(&ctime.0.to_be_bytes());
                p.extend_from_slice(&ctime.1.to_be_bytes());
            }
            Record::Put {
                path,
                entry,
                mode,
                mtime,
            } => {
                p.push(14);
                put_bytes(&mut p, path);
                p.extend_from_slice(&mode.to_be_bytes());
                match mtime {
                    None => p.push(0),
                    Some((secs, nanos)) => {
                        p.push(1);
                        p.extend_from_slice(&secs.to_be_bytes());
                        p.extend_from_slice(&nanos.to_be_bytes());
                    }
                }
                match entry {
                    PutEntry::Dir => p.push(0),
                    PutEntry::StoreFile { source, node } => {
                        p.push(1);
                        put_bytes(&mut p, source);
                        p.extend_from_slice(&node.0);
                    }
                    PutEntry::OverlayFile { id } => {
                        p.push(2);
                        p.extend_from_slice(&id.to_be_bytes());
                    }
                    PutEntry::StoreLink { source, node } => {
                        p.push(3);
                        put_bytes(&mut p, source);
                        p.extend_from_slice(&node.0);
                    }
                    PutEntry::LocalLink { target } => {
                        p.push(4);
                        put_bytes(&mut p, target);
                    }
                    PutEntry::Special { kind, rdev } => {
                        p.push(5);
                        p.push(*kind as u8);
                        p.extend_from_slice(&rdev.to_be_bytes());
                    }
                }
            }
        }
        p
    }

    fn decode(p: &[u8]) -> Option<Record> {
        let mut r = Reader { buf: p };
        let tag = r.u8()?;
        let rec = match tag {
            1 => Record::Create {
                path: r.bytes()?,
                id: r.u64()?,
                mode: r.u32()?,
            },
            2 => Record::Materialize {
                path: r.bytes()?,
                id: r.u64()?,
            },
            3 => Record::Mkdir {
                path: r.bytes()?,
                mode: r.u32()?,
            },
            4 => Record::Symlink {
                path: r.bytes()?,
                target: r.bytes()?,
            },
            5 => Record::Unlink { path: r.bytes()? },
            6 => Record::Rmdir { path: r.bytes()? },
            7 => Record::Rename {
                from: r.bytes()?,
                to: r.bytes()?,
                flags: r.u32()?,
            },
            8 => Record::SetMode {
                path: r.bytes()?,
                mode: r.u32()?,
            },
            20 => Record::Link {
                from: r.bytes()?,
                to: r.bytes()?,
            },
            9 => Record::SetMtime {
                path: r.bytes()?,
                secs: r.u64()? as i64,
                nanos: r.u32()?,
            },
            10 => Record::Track {
                path: r.bytes()?,
                track: match r.u8()? {
                    0 => Track::Default,
                    1 => Track::Added,
                    2 => Track::Removed,
                    3 => Track::Dropped,
                    4 => Track::Claimed,
                    _ => return None,
                },
            },
            11 => Record::Restore { path: r.bytes()? },
            12 => Record::Copy {
                dest: r.bytes()?,
                source: r.bytes()?,
            },
            13 => Record::Remove { path: r.bytes()? },
            16 => Record::SetOwner {
                path: r.bytes()?,
                uid: r.u32()?,
                gid: r.u32()?,
            },
            17 => Record::SetAtime {
                path: r.bytes()?,
                secs: r.u64()? as i64,
                nanos: r.u32()?,
            },
            21 => Record::SetXattr {
                path: r.bytes()?,
                name: r.bytes()?,
                value: r.bytes()?,
            },
            22 => Record::RemoveXattr {
                path: r.bytes()?,
                name: r.bytes()?,
            },
            23 => Record::MergeParent {
                node: Node::from_slice(r.take(20)?)?,
            },
            24 => Record::FromP2 {
                path: r.bytes()?,
                on: match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                },
            },
            18 => Record::Clock {
                secs: r.u64()? as i64,
                nanos: r.u32()?,
            },
            19 => Record::Times {
                path: r.bytes()?,
                mtime: match r.u8()? {
                    0 => None,
                    1 => Some((r.u64()? as i64, r.u32()?)),
                    _ => return None,
                },
                ctime: (r.u64()? as i64, r.u32()?),
            },
            15 => Record::Special {
                path: r.bytes()?,
                kind: SpecialKind::from_u8(r.u8()?)?,
                mode: r.u32()?,
                rdev: r.u32()?,
            },
            14 => {
                let path = r.bytes()?;
                let mode = r.u32()?;
                let mtime = match r.u8()? {
                    0 => None,
                    1 => Some((r.u64()? as i64, r.u32()?)),
                    _ => return None,
                };
                let entry = match r.u8()? {
                    0 => PutEntry::Dir,
                    1 => PutEntry::StoreFile {
                        source: r.bytes()?,
                        node: Node::from_slice(r.take(20)?)?,
                    },
                    2 => PutEntry::OverlayFile { id: r.u64()? },
                    3 => PutEntry::StoreLink {
                        source: r.bytes()?,
                        node: Node::from_slice(r.take(20)?)?,
                    },
                    4 => PutEntry::LocalLink { target: r.bytes()? },
                    5 => PutEntry::Special {
                        kind: SpecialKind::from_u8(r.u8()?)?,
                        rdev: r.u32()?,
                    },
                    _ => return None,
                };
                Record::Put {
                    path,
                    entry,
                    mode,
                    mtime,
                }
            }
            _ => return None,
        };
        r.buf.is_empty().then_some(rec)
    }

    /// A short description for messages: the record's kind and its paths, readable.
    pub fn describe(&self) -> String {
        let kind = match self {
            Record::Create { .. } => "create",
            Record::Materialize { .. } => "materialize",
            Record::Mkdir { .. } => "mkdir",
            Record::Symlink { .. } => "symlink",
            Record::Unlink { .. } => "unlink",
            Record::Rmdir { .. } => "rmdir",
            Record::Rename { .. } => "rename",
            Record::Link { .. } => "link",
            Record::SetMode { .. } => "chmod",
            Record::SetMtime { .. } => "utimens",
            Record::SetAtime { .. } => "utimens (atime)",
            Record::SetOwner { .. } => "chown",
            Record::Track { .. } => "track",
            Record::Restore { .. } => "restore",
            Record::Copy { .. } => "copy",
            Record::Remove { .. } => "remove",
            Record::Special { .. } => "mknod",
            Record::Put { .. } => "put",
            Record::Clock { .. } => "clock",
            Record::SetXattr { .. } => "setxattr",
            Record::RemoveXattr { .. } => "removexattr",
            Record::Times { .. } => "times",
            Record::MergeParent { .. } => "merge parent",
            Record::FromP2 { .. } => "merge info",
        };
        let paths: Vec<String> = match self {
            Record::SetMtime { path, .. }
            | Record::SetAtime { path, .. }
            | Record::Times { path, .. }
            | Record::SetXattr { path, .. }
            | Record::RemoveXattr { path, .. }
            | Record::SetOwner { path, .. } => vec![String::from_utf8_lossy(path).into_owned()],
            other => other
                .paths()
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
        };
        format!("{kind} {}", paths.join(" -> "))
    }

    /// The paths whose status the record may change (they go to the dirty set). A new
    /// modification or access time, or an owner, changes no status.
    pub fn paths(&self) -> Vec<&[u8]> {
        match self {
            Record::SetMtime { .. }
            | Record::SetAtime { .. }
            | Record::SetOwner { .. }
            | Record::Clock { .. }
            | Record::SetXattr { .. }
            | Record::RemoveXattr { .. }
            | Record::MergeParent { .. }
            | Record::Times { .. } => vec![],
            Record::Create { path, .. }
            | Record::Materialize { path, .. }
            | Record::Mkdir { path, .. }
            | Record::Symlink { path, .. }
            | Record::Unlink { path }
            | Record::Rmdir { path }
            | Record::SetMode { path, .. }
            | Record::Remove { path }
            | Record::Special { path, .. }
            | Record::Put { path, .. }
            | Record::Track { path, .. }
            | Record::Restore { path }
            | Record::Copy { dest: path, .. }
            | Record::FromP2 { path, .. } => vec![path],
            Record::Rename { from, to, .. } | Record::Link { from, to } => vec![from, to],
        }
    }
}

/// Appends `rec` to `buf` as a framed record (length, crc32, payload).
fn frame(rec: &Record, buf: &mut Vec<u8>) {
    let payload = rec.encode();
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(&crc32fast::hash(&payload).to_be_bytes());
    buf.extend_from_slice(&payload);
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        self.take(n).map(<[u8]>::to_vec)
    }
}

/// An open journal, positioned at its end for appending.
pub struct Journal {
    path: PathBuf,
    file: File,
    /// Length of the file (where the next record goes).
    len: u64,
    /// Disk space is allocated up to here (see [`Journal::reserve`]).
    reserved: u64,
}

/// Room kept allocated ahead of the next record, and how much is allocated at a time.
const RESERVE_SLACK: u64 = 64 << 10;
const RESERVE_CHUNK: u64 = 1 << 20;

impl Journal {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
        move |source| JournalError::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// Opens the journal at `path` for base `base`, creating it when missing, and returns
    /// it with the records to replay. A damaged tail is cut off (and logged).
    pub fn open(path: &Path, base: &Node) -> Result<(Journal, Vec<Record>), JournalError> {
        let io = Self::io(path);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(Self::io(path))?;
        if bytes.is_empty() {
            let mut header = Vec::with_capacity(HEADER_LEN);
            header.extend_from_slice(MAGIC);
            header.extend_from_slice(&JOURNAL_VERSION.to_be_bytes());
            header.extend_from_slice(&base.0);
            file.write_all(&header).map_err(Self::io(path))?;
            file.sync_data().map_err(Self::io(path))?;
            return Ok((
                Journal {
                    path: path.to_owned(),
                    file,
                    len: HEADER_LEN as u64,
                    reserved: 0,
                },
                Vec::new(),
            ));
        }
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err(JournalError::BadMagic {
                path: path.to_owned(),
            });
        }
        let version = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if !(JOURNAL_MIN_VERSION..=JOURNAL_VERSION).contains(&version) {
            return Err(JournalError::Version {
                path: path.to_owned(),
                found: version,
            });
        }
        let found = Node::from_slice(&bytes[12..32]).unwrap_or_default();
        if found != *base {
            return Err(JournalError::WrongBase {
                path: path.to_owned(),
                found: found.to_hex(),
                expected: base.to_hex(),
            });
        }
        if version < JOURNAL_VERSION {
            // Records of this version may follow: an older revfs must refuse the file rather
            // than stop replaying at the first record it does not know.
            Self::mark_current(path)?;
        }
        let mut records = Vec::new();
        let mut pos = HEADER_LEN;
        while pos < bytes.len() {
            let Some(head) = bytes.get(pos..pos + 8) else {
                break;
            };
            let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let crc = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            if len > MAX_RECORD {
                break;
            }
            let Some(payload) = bytes.get(pos + 8..pos + 8 + len) else {
                break;
            };
            if crc32fast::hash(payload) != crc {
                break;
            }
            let Some(rec) = Record::decode(payload) else {
                break;
            };
            records.push(rec);
            pos += 8 + len;
        }
        if pos < bytes.len() {
            tracing::warn!(
                journal = %path.display(),
                kept = pos,
                dropped = bytes.len() - pos,
                "journal has a damaged tail; cutting it off"
            );
            file.set_len(pos as u64).map_err(Self::io(path))?;
            file.sync_data().map_err(Self::io(path))?;
        }
        Ok((
            Journal {
                path: path.to_owned(),
                file,
                len: pos as u64,
                reserved: 0,
            },
            records,
        ))
    }

    /// Writes the current format version into the header of the journal at `path`, durably.
    fn mark_current(path: &Path) -> Result<(), JournalError> {
        use std::os::unix::fs::FileExt;
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(Self::io(path))?;
        f.write_all_at(&JOURNAL_VERSION.to_be_bytes(), 8)
            .map_err(Self::io(path))?;
        f.sync_data().map_err(Self::io(path))
    }

    /// Appends one record with a single write.
    pub fn append(&mut self, rec: &Record) -> Result<(), JournalError> {
        self.append_all(std::slice::from_ref(rec))
    }

    /// Appends records with a single write.
    pub fn append_all(&mut self, recs: &[Record]) -> Result<(), JournalError> {
        let mut buf = Vec::new();
        for rec in recs {
            frame(rec, &mut buf);
        }
        self.file.write_all(&buf).map_err(Self::io(&self.path))?;
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Makes sure disk space is allocated for the next records (past the end of the file,
    /// which keeps its size), so that when the disk is full a change is refused with ENOSPC
    /// before it is made, never made and then left out of the journal.
    pub fn reserve(&mut self) -> Result<(), JournalError> {
        use std::os::unix::io::AsRawFd;
        if self.len + RESERVE_SLACK <= self.reserved {
            return Ok(());
        }
        let fd = self.file.as_raw_fd();
        let allocate = |len: u64| -> std::io::Result<()> {
            // SAFETY: fallocate on our own open descriptor; KEEP_SIZE leaves the length alone.
            let rc = unsafe {
                libc::fallocate(
                    fd,
                    libc::FALLOC_FL_KEEP_SIZE,
                    self.len as libc::off_t,
                    len as libc::off_t,
                )
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        // A whole chunk, or at least the slack; with neither, what is left of the last
        // reservation still takes small records (so that files can be deleted to make room).
        for want in [RESERVE_SLACK + RESERVE_CHUNK, RESERVE_SLACK] {
            match allocate(want) {
                Ok(()) => {
                    self.reserved = self.len + want;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    // No preallocation here: appends are then the only check.
                    self.reserved = u64::MAX;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => continue,
                Err(e) => return Err(Self::io(&self.path)(e)),
            }
        }
        if self.len + 4096 <= self.reserved {
            return Ok(());
        }
        Err(Self::io(&self.path)(std::io::Error::from_raw_os_error(
            libc::ENOSPC,
        )))
    }

    /// The base node named by the journal at `path`, if there is one.
    pub fn peek_base(path: &Path) -> Result<Option<Node>, JournalError> {
        let mut header = [0u8; HEADER_LEN];
        let mut f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::io(path)(e)),
        };
        match f.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(Self::io(path)(e)),
        }
        if &header[..8] != MAGIC {
            return Err(JournalError::BadMagic {
                path: path.to_owned(),
            });
        }
        Ok(Node::from_slice(&header[12..32]))
    }

    /// Replaces this journal with one for `base` holding `records`, atomically: the new file
    /// is written and synced beside the old one, then renamed over it. A crash leaves either
    /// the old journal or the new one.
    pub fn rewrite(&mut self, base: &Node, records: &[Record]) -> Result<(), JournalError> {
        let tmp = self.path.with_extension("new");
        let io = Self::io(&tmp);
        let mut buf = Vec::with_capacity(HEADER_LEN + records.len() * 64);
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&JOURNAL_VERSION.to_be_bytes());
        buf.extend_from_slice(&base.0);
        for rec in records {
            frame(rec, &mut buf);
        }
        let mut f = File::create(&tmp).map_err(io)?;
        f.write_all(&buf).map_err(Self::io(&tmp))?;
        f.sync_all().map_err(Self::io(&tmp))?;
        drop(f);
        std::fs::rename(&tmp, &self.path).map_err(Self::io(&self.path))?;
        if let Some(dir) = self.path.parent() {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(Self::io(&self.path))?;
        self.len = buf.len() as u64;
        self.reserved = 0;
        Ok(())
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.file.sync_data().map_err(Self::io(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_records() -> Vec<Record> {
        vec![
            Record::Create {
                path: b"a".to_vec(),
                id: 7,
                mode: 0o644,
            },
            Record::Materialize {
                path: b"d/b".to_vec(),
                id: 8,
            },
            Record::Mkdir {
                path: b"d/e".to_vec(),
                mode: 0o755,
            },
            Record::Symlink {
                path: b"l".to_vec(),
                target: b"../x y".to_vec(),
            },
            Record::Unlink {
                path: b"a".to_vec(),
            },
            Record::SetOwner {
                path: b"d/b".to_vec(),
                uid: 65534,
                gid: 65533,
            },
            Record::SetAtime {
                path: b"d/b".to_vec(),
                secs: 4_102_444_800,
                nanos: 999_999_999,
            },
            Record::Rmdir {
                path: b"d/e".to_vec(),
            },
            Record::Rename {
                from: b"d".to_vec(),
                to: b"\xc3\xa9".to_vec(),
                flags: 1,
            },
            Record::Link {
                from: b"x".to_vec(),
                to: b"d/x2".to_vec(),
            },
            Record::SetMode {
                path: b"x".to_vec(),
                mode: 0o755,
            },
            Record::SetMtime {
                path: b"x".to_vec(),
                secs: -5,
                nanos: 999,
            },
            Record::Track {
                path: b"t".to_vec(),
                track: Track::Removed,
            },
            Record::Restore {
                path: b"r".to_vec(),
            },
            Record::Copy {
                dest: b"c".to_vec(),
                source: b"a".to_vec(),
            },
            Record::Remove {
                path: b"gone/dir".to_vec(),
            },
            Record::MergeParent {
                node: Node([7; 20]),
            },
            Record::FromP2 {
                path: b"merged".to_vec(),
                on: true,
            },
            Record::Special {
                path: b"fifo".to_vec(),
                kind: SpecialKind::Fifo,
                mode: 0o640,
                rdev: 0,
            },
            Record::Put {
                path: b"dev".to_vec(),
                entry: PutEntry::Special {
                    kind: SpecialKind::Block,
                    rdev: 0x0701,
                },
                mode: 0o600,
                mtime: None,
            },
            Record::Put {
                path: b"d".to_vec(),
                entry: PutEntry::Dir,
                mode: 0o700,
                mtime: None,
            },
            Record::Put {
                path: b"d/f".to_vec(),
                entry: PutEntry::StoreFile {
                    source: b"old/f".to_vec(),
                    node: Node([7; 20]),
                },
                mode: 0o755,
                mtime: Some((-3, 5)),
            },
            Record::Put {
                path: b"d/o".to_vec(),
                entry: PutEntry::OverlayFile { id: 99 },
                mode: 0o600,
                mtime: None,
            },
            Record::Put {
                path: b"d/l".to_vec(),
                entry: PutEntry::StoreLink {
                    source: b"l".to_vec(),
                    node: Node([9; 20]),
                },
                mode: 0o777,
                mtime: Some((1_700_000_000, 0)),
            },
            Record::Put {
                path: b"d/m".to_vec(),
                entry: PutEntry::LocalLink {
                    target: b"../t".to_vec(),
                },
                mode: 0o777,
                mtime: None,
            },
            Record::Clock {
                secs: 1_800_000_000,
                nanos: 123_456_789,
            },
            Record::Times {
                path: b"d".to_vec(),
                mtime: Some((1_800_000_001, 1)),
                ctime: (1_800_000_002, 2),
            },
            Record::Times {
                path: b"d/o".to_vec(),
                mtime: None,
                ctime: (-1, 999_999_999),
            },
            Record::SetXattr {
                path: b"d".to_vec(),
                name: b"user.mime_type".to_vec(),
                value: b"\0binary\xff".to_vec(),
            },
            Record::RemoveXattr {
                path: b"d/o".to_vec(),
                name: b"user.x".to_vec(),
            },
        ]
    }

    #[test]
    fn rewrite_replaces_the_journal_atomically_with_a_new_base() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("journal");
        let (mut j, _) = Journal::open(&path, &Node([1; 20])).unwrap();
        j.append(&all_records()[0]).unwrap();
        let recs = all_records();
        j.rewrite(&Node([2; 20]), &recs[3..]).unwrap();
        j.append(&recs[0]).unwrap();
        assert_eq!(Journal::peek_base(&path).unwrap(), Some(Node([2; 20])));
        assert!(matches!(
            Journal::open(&path, &Node([1; 20])),
            Err(JournalError::WrongBase { .. })
        ));
        let (_, back) = Journal::open(&path, &Node([2; 20])).unwrap();
        let mut want = recs[3..].to_vec();
        want.push(recs[0].clone());
        assert_eq!(back, want);
        assert!(!path.with_extension("new").exists());
    }

    #[test]
    fn records_round_trip_through_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("journal");
        let base = Node([3; 20]);
        let (mut j, recs) = Journal::open(&path, &base).unwrap();
        assert!(recs.is_empty());
        for r in all_records() {
            j.append(&r).unwrap();
        }
        drop(j);
        let (_, recs) = Journal::open(&path, &base).unwrap();
        assert_eq!(recs, all_records());
    }

    #[test]
    fn a_torn_tail_is_cut_and_the_rest_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("journal");
        let base = Node([3; 20]);
        let (mut j, _) = Journal::open(&path, &base).unwrap();
        for r in all_records() {
            j.append(&r).unwrap();
        }
        drop(j);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let (mut j, recs) = Journal::open(&path, &base).unwrap();
        assert_eq!(recs.len(), all_records().len() - 1);
        j.append(&Record::Unlink {
            path: b"z".to_vec(),
        })
        .unwrap();
        drop(j);
        let (_, recs) = Journal::open(&path, &base).unwrap();
        assert_eq!(
            recs.last(),
            Some(&Record::Unlink {
                path: b"z".to_vec()
            })
        );
    }

    #[test]
    fn an_older_journal_is_read_and_marked_current_before_new_records() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("journal");
        let (mut j, _) = Journal::open(&path, &Node([1; 20])).unwrap();
        let old = Record::Unlink {
            path: b"z".to_vec(),
        };
        j.append(&old).unwrap();
        drop(j);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[11] = 3;
        std::fs::write(&path, &bytes).unwrap();
        let (_, records) = Journal::open(&path, &Node([1; 20])).unwrap();
        assert_eq!(records, vec![old]);
        assert_eq!(
            std::fs::read(&path).unwrap()[8..12],
            JOURNAL_VERSION.to_be_bytes()
        );
    }

    #[test]
    fn other_versions_and_bases_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("journal");
        let (j, _) = Journal::open(&path, &Node([1; 20])).unwrap();
        drop(j);
        assert!(matches!(
            Journal::open(&path, &Node([2; 20])),
            Err(JournalError::WrongBase { .. })
        ));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[11] = 9;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            Journal::open(&path, &Node([1; 20])),
            Err(JournalError::Version { found: 9, .. })
        ));
        std::fs::write(&path, b"garbage garbage garbage garbage garbage").unwrap();
        assert!(matches!(
            Journal::open(&path, &Node([1; 20])),
            Err(JournalError::BadMagic { .. })
        ));
    }
}
