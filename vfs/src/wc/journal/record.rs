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
