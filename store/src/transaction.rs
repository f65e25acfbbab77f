//! Store transactions in Mercurial 6.3.2's journal format (`M/transaction.py`), so that
//! both [`recover`] and `hg recover` can undo an interrupted write.
//!
//! * `store/journal` gets one line `<unencoded store path>\0<original size>\n` per file,
//!   written and fsynced *before* the first write to that file. Rolling back truncates each
//!   file to its recorded size, or deletes it when the size is 0.
//! * `store/journal.backupfiles` (`2\n`, then `<location>\0<path>\0<backup>\0<0|1>\n` lines,
//!   location `""` = the store) records whole-file replacements (fncache, phaseroots, an
//!   inline index about to be split): the original is copied to `journal.backup.<n>`, or an
//!   empty backup name records that the file did not exist. Rolling back restores or deletes
//!   them, after the truncations.
//! * [`Transaction::close`] deletes the stale `undo*` files of `.hg` and `.hg/store` (so that
//!   `hg rollback` cannot undo an older hg transaction together with ours), then removes the
//!   journal (the commit point) and the backups.
//!
//! The caller must hold the repository locks ([`crate::lock::RepoLocks`]). Dropping a
//! transaction without [`Transaction::close`] or [`Transaction::abort`] leaves the journal
//! in place, exactly like a crash: the next writer refuses to start until [`recover`] (or
//! `hg recover`) has run.

use crate::error::{Result, StoreError};
use crate::pathenc::{encode_store_path, PathEncoding};
use crate::repo::Repo;
use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const JOURNAL: &str = "journal";
const BACKUPFILES: &str = "journal.backupfiles";
/// hg's `transaction.version`.
const BACKUP_VERSION: &str = "2";

/// An open store transaction. See the module documentation.
pub struct Transaction {
    store: PathBuf,
    dot_hg: PathBuf,
    encoding: PathEncoding,
    journal: File,
    journaled: HashSet<Vec<u8>>,
    backups: Option<File>,
    backed_up: HashSet<Vec<u8>>,
    backup_count: usize,
    finished: bool,
}

fn store_file(store: &Path, encoding: PathEncoding, path: &[u8]) -> PathBuf {
    store.join(std::ffi::OsStr::from_bytes(&encode_store_path(
        path, encoding,
    )))
}

impl Transaction {
    /// Starts a transaction on `repo`'s store. Fails with
    /// [`StoreError::AbandonedTransaction`] if a journal is left from an interrupted one.
    pub fn begin(repo: &Repo) -> Result<Transaction> {
        let store = repo.store_path().to_owned();
        let journal_path = store.join(JOURNAL);
        let journal = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&journal_path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::AbandonedTransaction(journal_path))
            }
            Err(e) => return Err(StoreError::io(journal_path, e)),
        };
        // A journal.backupfiles without a journal is a leftover of a finished transaction.
        let stale = store.join(BACKUPFILES);
        match std::fs::remove_file(&stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(stale, e)),
        }
        Ok(Transaction {
            store,
            dot_hg: repo.dot_hg().to_owned(),
            encoding: repo.requirements().path_encoding(),
            journal,
            journaled: HashSet::new(),
            backups: None,
            backed_up: HashSet::new(),
            backup_count: 0,
            finished: false,
        })
    }

    /// The on-disk path of the unencoded store path `path` (e.g. `data/a.txt.i`).
    pub fn store_file(&self, path: &[u8]) -> PathBuf {
        store_file(&self.store, self.encoding, path)
    }

    /// Records that the store file `path` (unencoded, e.g. `data/a.txt.i`) had `size` bytes
    /// before this transaction. Must be called before the first write to the file; later
    /// calls for the same file are ignored. The journal line is fsynced before returning.
    pub fn journal_file(&mut self, path: &[u8], size: u64) -> Result<()> {
        if path.contains(&0) || path.contains(&b'\n') || path.is_empty() {
            return Err(StoreError::Other(format!(
                "cannot journal store path {:?}",
                String::from_utf8_lossy(path)
            )));
        }
        if !self.journaled.insert(path.to_vec()) {
            return Ok(());
        }
        let mut line = path.to_vec();
        line.push(0);
        line.extend_from_slice(size.to_string().as_bytes());
        line.push(b'\n');
        let jp = self.store.join(JOURNAL);
        self.journal
            .write_all(&line)
            .and_then(|_| self.journal.sync_data())
            .map_err(|e| StoreError::io(jp, e))
    }

    /// Whether `path` was already journaled in this transaction.
    pub fn is_journaled(&self, path: &[u8]) -> bool {
        self.journaled.contains(path)
    }

    /// Saves the current content of the store file `path` (unencoded) before it is
    /// replaced as a whole, or records that it does not exist yet. Later calls for the same
    /// file are ignored.
    pub fn backup_file(&mut self, path: &[u8]) -> Result<()> {
        if path.contains(&0) || path.contains(&b'\n') || path.is_empty() {
            return Err(StoreError::Other(format!(
                "cannot back up store path {:?}",
                String::from_utf8_lossy(path)
            )));
        }
        if !self.backed_up.insert(path.to_vec()) {
            return Ok(());
        }
        let original = self.store_file(path);
        let backup_name = match std::fs::symlink_metadata(&original) {
            Ok(_) => {
                self.backup_count += 1;
                let name = format!("{JOURNAL}.backup.{}", self.backup_count);
                let backup = self.store.join(&name);
                std::fs::copy(&original, &backup).map_err(|e| StoreError::io(&backup, e))?;
                File::open(&backup)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| StoreError::io(&backup, e))?;
                name.into_bytes()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::io(original, e)),
        };
        let bp = self.store.join(BACKUPFILES);
        if self.backups.is_none() {
            let mut f = File::create(&bp).map_err(|e| StoreError::io(&bp, e))?;
            f.write_all(format!("{BACKUP_VERSION}\n").as_bytes())
                .map_err(|e| StoreError::io(&bp, e))?;
            self.backups = Some(f);
        }
        let mut line = vec![0u8];
        line.extend_from_slice(path);
        line.push(0);
        line.extend_from_slice(&backup_name);
        line.extend_from_slice(b"\x000\n");
        if let Some(f) = self.backups.as_mut() {
            f.write_all(&line)
                .and_then(|_| f.sync_data())
                .map_err(|e| StoreError::io(&bp, e))?;
        }
        Ok(())
    }

    /// Replaces the store file `path` (unencoded) with `content` atomically (temporary file
    /// plus rename), backing up the old content first.
    pub fn replace_file(&mut self, path: &[u8], content: &[u8]) -> Result<()> {
        self.backup_file(path)?;
        let target = self.store_file(path);
        let mut tmp_name = target.as_os_str().to_owned();
        tmp_name.push(format!(".revfs-tmp-{}", std::process::id()));
        let tmp = PathBuf::from(tmp_name);
        let io_t = |e| StoreError::io(&tmp, e);
        let mut f = File::create(&tmp).map_err(io_t)?;
        f.write_all(content).map_err(io_t)?;
        f.sync_all().map_err(io_t)?;
        drop(f);
        std::fs::rename(&tmp, &target).map_err(|e| StoreError::io(&target, e))
    }

    /// Commits the transaction: deletes stale `undo*` files, then the journal and backups.
    pub fn close(mut self) -> Result<()> {
        self.finished = true;
        for dir in [&self.dot_hg, &self.store] {
            remove_undo_files(dir)?;
        }
        let jp = self.store.join(JOURNAL);
        std::fs::remove_file(&jp).map_err(|e| StoreError::io(&jp, e))?;
        remove_backups(&self.store)
    }

    /// Rolls the transaction back: truncates journaled files, restores backups, removes
    /// the journal.
    pub fn abort(mut self) -> Result<()> {
        self.finished = true;
        rollback(&self.store, self.encoding)
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.finished {
            tracing::warn!(
                "transaction on {} dropped without close or abort; run recover",
                self.store.display()
            );
        }
    }
}

/// Deletes `undo*` files (hg's rollback information) directly in `dir`.
fn remove_undo_files(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        if entry.file_name().as_bytes().starts_with(b"undo") {
            let p = entry.path();
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if !is_dir {
                std::fs::remove_file(&p).map_err(|e| StoreError::io(&p, e))?;
            }
        }
    }
    Ok(())
}

/// Removes `journal.backupfiles` and every `journal.backup.*` file of the store.
fn remove_backups(store: &Path) -> Result<()> {
    let entries = std::fs::read_dir(store).map_err(|e| StoreError::io(store, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(store, e))?;
        let name = entry.file_name();
        if name.as_bytes() == BACKUPFILES.as_bytes()
            || name.as_bytes().starts_with(b"journal.backup.")
        {
            let p = entry.path();
            std::fs::remove_file(&p).map_err(|e| StoreError::io(&p, e))?;
        }
    }
    Ok(())
}

/// Rolls back an interrupted transaction of `repo`, like `hg recover`. Returns whether
/// there was one. The caller must hold the repository locks.
pub fn recover(repo: &Repo) -> Result<bool> {
    let store = repo.store_path();
    if !store.join(JOURNAL).exists() {
        return Ok(false);
    }
    rollback(store, repo.requirements().path_encoding())?;
    // The revlogs may now be shorter than a docket written during the transaction.
    crate::nodemap::forget(store)?;
    Ok(true)
}

fn unlink_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// Plays the journal of `store` back (hg's `transaction._playback`).
fn rollback(store: &Path, encoding: PathEncoding) -> Result<()> {
    let jp = store.join(JOURNAL);
    let text = std::fs::read(&jp).map_err(|e| StoreError::io(&jp, e))?;
    // Later lines win, as in hg's `dict(entries)`.
    let mut entries: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(2, |&b| b == 0);
        let (Some(path), Some(size)) = (parts.next(), parts.next()) else {
            tracing::warn!(
                "couldn't read journal entry {:?}",
                String::from_utf8_lossy(line)
            );
            continue;
        };
        let Some(size) = std::str::from_utf8(size)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        else {
            tracing::warn!(
                "couldn't read journal entry {:?}",
                String::from_utf8_lossy(line)
            );
            continue;
        };
        entries.insert(path.to_vec(), size);
    }
    for (path, size) in &entries {
        let file = store_file(store, encoding, path);
        if *size == 0 {
            unlink_if_exists(&file)?;
            continue;
        }
        let f = OpenOptions::new()
            .write(true)
            .open(&file)
            .map_err(|e| StoreError::io(&file, e))?;
        let len = f.metadata().map_err(|e| StoreError::io(&file, e))?.len();
        if len < *size {
            return Err(StoreError::Other(format!(
                "attempted to truncate {} to {size} bytes, but it was already {len} bytes",
                file.display()
            )));
        }
        f.set_len(*size)
            .and_then(|_| f.sync_all())
            .map_err(|e| StoreError::io(&file, e))?;
    }

    let bp = store.join(BACKUPFILES);
    let backups = match std::fs::read(&bp) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(StoreError::io(bp, e)),
    };
    let mut lines = backups.split(|&b| b == b'\n');
    let version_ok = match lines.next() {
        None => true,
        Some(v) => v.is_empty() || v == BACKUP_VERSION.as_bytes(),
    };
    if !version_ok {
        return Err(StoreError::Other(format!(
            "{}: journal was created by a different version of Mercurial",
            bp.display()
        )));
    }
    for line in lines.filter(|l| !l.is_empty()) {
        let fields: Vec<&[u8]> = line.split(|&b| b == 0).collect();
        let [location, path, backup, _cache] = fields[..] else {
            return Err(StoreError::Other(format!(
                "{}: malformed line {:?}",
                bp.display(),
                String::from_utf8_lossy(line)
            )));
        };
        let base = match location {
            b"" => store.to_owned(),
            b"plain" => store
                .parent()
                .map(Path::to_owned)
                .unwrap_or_else(|| store.to_owned()),
            other => {
                tracing::warn!(
                    "unknown backup location {:?}",
                    String::from_utf8_lossy(other)
                );
                continue;
            }
        };
        let target = if location.is_empty() {
            store_file(store, encoding, path)
        } else {
            base.join(std::ffi::OsStr::from_bytes(path))
        };
        if !path.is_empty() && !backup.is_empty() {
            let src = base.join(std::ffi::OsStr::from_bytes(backup));
            let mut tmp_name = target.as_os_str().to_owned();
            tmp_name.push(".revfs-restore");
            let tmp = PathBuf::from(tmp_name);
            std::fs::copy(&src, &tmp).map_err(|e| StoreError::io(&src, e))?;
            std::fs::rename(&tmp, &target).map_err(|e| StoreError::io(&target, e))?;
        } else {
            let t = if path.is_empty() {
                base.join(std::ffi::OsStr::from_bytes(backup))
            } else {
                target
            };
            unlink_if_exists(&t)?;
        }
    }
    std::fs::remove_file(&jp).map_err(|e| StoreError::io(&jp, e))?;
    remove_backups(store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::tests::{hg, hg_available, pseudo_random, request, set, tip, tree, verify};
    use crate::commit::{append_file, commit, compression_of, prepare_file, update_fncache};
    use crate::lock::RepoLocks;
    use crate::manifest::FileFlag;

    /// A repository made by `hg init` with one commit of ours: a small file and an inline
    /// filelog close to the split limit.
    fn setup(tmp: &Path) -> PathBuf {
        let dir = tmp.join("repo");
        hg(tmp, &["init", dir.to_str().unwrap()]);
        let repo = Repo::open(&dir).unwrap();
        commit(
            &repo,
            &request(
                crate::Node::NULL,
                vec![
                    ("a.txt", set(b"a\n", FileFlag::Regular)),
                    (
                        "grow.txt",
                        set(&pseudo_random(7, 100_000), FileFlag::Regular),
                    ),
                ],
                "base",
                1_700_000_000,
            ),
        )
        .unwrap();
        dir
    }

    /// Writes filelogs (an append, a new file, an inline split) and the fncache inside a
    /// transaction, then drops it without closing: an interrupted commit.
    fn interrupted(dir: &Path) -> Transaction {
        let locks = RepoLocks::acquire(&Repo::open(dir).unwrap()).unwrap();
        let repo = Repo::open(dir).unwrap();
        let mut tr = Transaction::begin(&repo).unwrap();
        let m1 = repo.manifest_of(0).unwrap();
        let m2 = crate::manifest::Manifest::empty();
        let mut fncache = Vec::new();
        let linkrev = repo.changelog().len() as i32;
        for (path, data) in [
            (&b"a.txt"[..], b"a\nb\n".to_vec()),
            (b"new.txt", b"new\n".to_vec()),
            (b"grow.txt", pseudo_random(8, 100_000)),
        ] {
            let prepared = prepare_file(
                &repo,
                &tr,
                path,
                &data,
                None,
                &m1,
                &m2,
                linkrev,
                true,
                compression_of(&repo),
            )
            .unwrap();
            append_file(&mut tr, prepared, &mut fncache).unwrap();
        }
        assert!(
            fncache.contains(&b"data/grow.txt.d".to_vec()),
            "{fncache:?}"
        );
        update_fncache(&repo, &mut tr, &fncache).unwrap();
        drop(locks);
        tr
    }

    #[test]
    fn recover_rolls_back_an_interrupted_transaction() {
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = setup(tmp.path());
        let store = dir.join(".hg/store");
        let before = tree(&store);
        let tip_before = tip(&dir);
        drop(interrupted(&dir));
        assert!(store.join("journal").exists());
        assert!(store.join("data/grow.txt.d").exists());
        let repo = Repo::open(&dir).unwrap();
        assert!(matches!(
            Transaction::begin(&repo),
            Err(StoreError::AbandonedTransaction(_))
        ));
        let err = commit(
            &repo,
            &request(
                tip_before,
                vec![("x", set(b"x", FileFlag::Regular))],
                "x",
                5,
            ),
        )
        .unwrap_err();
        assert!(err.to_string().contains("abandoned transaction"), "{err}");
        assert!(recover(&repo).unwrap());
        assert!(!recover(&repo).unwrap());
        assert_eq!(tree(&store), before);
        verify(&dir);
        // Writing works again afterwards.
        commit(
            &repo,
            &request(
                tip_before,
                vec![("x", set(b"x", FileFlag::Regular))],
                "x",
                5,
            ),
        )
        .unwrap();
        verify(&dir);
    }

    #[test]
    fn hg_recover_accepts_our_journal() {
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = setup(tmp.path());
        let store = dir.join(".hg/store");
        let before = tree(&store);
        drop(interrupted(&dir));
        let (ok, out, err) = crate::commit::tests::hg_run(&dir, &["verify"]);
        assert!(
            err.contains("abandoned transaction") || out.contains("abandoned transaction") || !ok
        );
        let out = hg(&dir, &["recover"]);
        assert!(
            out.contains("rolling back interrupted transaction"),
            "{out}"
        );
        assert_eq!(tree(&store), before);
        verify(&dir);
    }

    #[test]
    fn abort_restores_everything() {
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = setup(tmp.path());
        let store = dir.join(".hg/store");
        let before = tree(&store);
        interrupted(&dir).abort().unwrap();
        assert_eq!(tree(&store), before);
        verify(&dir);
    }

    #[test]
    fn close_removes_journal_and_stale_undo_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        crate::commit::init(&dir).unwrap();
        std::fs::write(dir.join(".hg/undo.desc"), "0\ncommit\n").unwrap();
        std::fs::write(dir.join(".hg/store/undo"), "x\x000\n").unwrap();
        let repo = Repo::open(&dir).unwrap();
        let mut tr = Transaction::begin(&repo).unwrap();
        tr.journal_file(b"data/x.i", 0).unwrap();
        tr.journal_file(b"data/x.i", 5).unwrap();
        assert_eq!(
            std::fs::read(dir.join(".hg/store/journal")).unwrap(),
            b"data/x.i\x000\n"
        );
        tr.replace_file(b"fncache", b"data/x.i\n").unwrap();
        assert_eq!(
            std::fs::read(dir.join(".hg/store/journal.backupfiles")).unwrap(),
            b"2\n\x00fncache\x00\x000\n"
        );
        assert!(tr.journal_file(b"bad\npath", 0).is_err());
        tr.close().unwrap();
        for f in [
            ".hg/undo.desc",
            ".hg/store/undo",
            ".hg/store/journal",
            ".hg/store/journal.backupfiles",
        ] {
            assert!(!dir.join(f).exists(), "{f}");
        }
        assert_eq!(
            std::fs::read(dir.join(".hg/store/fncache")).unwrap(),
            b"data/x.i\n"
        );
    }
}
