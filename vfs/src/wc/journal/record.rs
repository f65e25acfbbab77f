//! The journal's records: what each mutation of the working copy journals, and its
//! encoding (a tag byte, then fields: paths and byte strings as a u32 BE length and the
//! bytes, integers BE; docs/FORMATS.md), framed with its length and CRC-32.

use revfs_store::Node;

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
    /// Version 8: tracked as added although in the base manifest (hg's resolve keeping a
    /// file the other side of a rebase or graft deleted): added.
    Readded = 5,
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

/// A record's payload as it is written: fields appended in order, integers big-endian, a
/// byte string after its length (u32), as [`Reader`] reads them back.
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }

    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }

    fn node(&mut self, n: &Node) -> &mut Self {
        self.0.extend_from_slice(&n.0);
        self
    }

    /// (seconds, nanoseconds).
    fn time(&mut self, (secs, nanos): (i64, u32)) -> &mut Self {
        self.i64(secs).u32(nanos)
    }

    /// An optional time: a flag byte, then the time when there is one.
    fn maybe_time(&mut self, t: Option<(i64, u32)>) -> &mut Self {
        match t {
            None => self.u8(0),
            Some(t) => self.u8(1).time(t),
        }
    }
}

impl PutEntry {
    fn encode(&self, w: &mut Writer) {
        match self {
            PutEntry::Dir => w.u8(0),
            PutEntry::StoreFile { source, node } => w.u8(1).bytes(source).node(node),
            PutEntry::OverlayFile { id } => w.u8(2).u64(*id),
            PutEntry::StoreLink { source, node } => w.u8(3).bytes(source).node(node),
            PutEntry::LocalLink { target } => w.u8(4).bytes(target),
            PutEntry::Special { kind, rdev } => w.u8(5).u8(*kind as u8).u32(*rdev),
        };
    }
}

impl Record {
    /// The payload: the record's tag (docs/FORMATS.md), then its fields.
    fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        match self {
            Record::Create { path, id, mode } => w.u8(1).bytes(path).u64(*id).u32(*mode),
            Record::Materialize { path, id } => w.u8(2).bytes(path).u64(*id),
            Record::Mkdir { path, mode } => w.u8(3).bytes(path).u32(*mode),
            Record::Symlink { path, target } => w.u8(4).bytes(path).bytes(target),
            Record::Unlink { path } => w.u8(5).bytes(path),
            Record::Rmdir { path } => w.u8(6).bytes(path),
            Record::Rename { from, to, flags } => w.u8(7).bytes(from).bytes(to).u32(*flags),
            Record::Link { from, to } => w.u8(20).bytes(from).bytes(to),
            Record::SetMode { path, mode } => w.u8(8).bytes(path).u32(*mode),
            Record::SetMtime { path, secs, nanos } => w.u8(9).bytes(path).time((*secs, *nanos)),
            Record::SetOwner { path, uid, gid } => w.u8(16).bytes(path).u32(*uid).u32(*gid),
            Record::SetAtime { path, secs, nanos } => w.u8(17).bytes(path).time((*secs, *nanos)),
            Record::Track { path, track } => w.u8(10).bytes(path).u8(*track as u8),
            Record::Restore { path } => w.u8(11).bytes(path),
            Record::Copy { dest, source } => w.u8(12).bytes(dest).bytes(source),
            Record::Remove { path } => w.u8(13).bytes(path),
            Record::MergeParent { node } => w.u8(23).node(node),
            Record::FromP2 { path, on } => w.u8(24).bytes(path).u8(u8::from(*on)),
            Record::Special {
                path,
                kind,
                mode,
                rdev,
            } => w.u8(15).bytes(path).u8(*kind as u8).u32(*mode).u32(*rdev),
            Record::SetXattr { path, name, value } => w.u8(21).bytes(path).bytes(name).bytes(value),
            Record::RemoveXattr { path, name } => w.u8(22).bytes(path).bytes(name),
            Record::Clock { secs, nanos } => w.u8(18).time((*secs, *nanos)),
            Record::Times { path, mtime, ctime } => {
                w.u8(19).bytes(path).maybe_time(*mtime).time(*ctime)
            }
            Record::Put {
                path,
                entry,
                mode,
                mtime,
            } => {
                w.u8(14).bytes(path).u32(*mode).maybe_time(*mtime);
                entry.encode(&mut w);
                &mut w
            }
        };
        w.0
    }

    pub(super) fn decode(p: &[u8]) -> Option<Record> {
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
                    5 => Track::Readded,
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
pub(super) fn frame(rec: &Record, buf: &mut Vec<u8>) {
    crate::wc::framed::frame(&rec.encode(), buf);
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
