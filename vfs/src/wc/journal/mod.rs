//! The change journal: an append-only log of every mutation made through the mount, by
//! path, replayed at mount time over the base revision's tree to rebuild the working copy.
//!
//! File format (version 8; versions 1 to 7, which lack some records, are still read and
//! are marked version 8 when opened, before anything is appended),
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
pub const JOURNAL_VERSION: u32 = 8;
/// The oldest journal format version this code reads.
pub const JOURNAL_MIN_VERSION: u32 = 1;
const HEADER_LEN: usize = 32;
/// Records longer than this are corrupt, not real.
const MAX_RECORD: usize = 64 << 20;

mod record;

use crate::wc::framed::payload_at;
use record::frame;
pub use record::{PutEntry, Record, SpecialKind, Track};

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
        while let Some(payload) = payload_at(&bytes, pos, MAX_RECORD) {
            let Some(rec) = Record::decode(payload) else {
                break;
            };
            records.push(rec);
            pos += 8 + payload.len();
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
