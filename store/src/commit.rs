//! Writing changesets the way Mercurial 6.3.2's `localrepo.commitctx` does, and creating
//! repositories like `hg init`.
//!
//! [`commit`] takes the repository locks, opens a [`Transaction`], and then writes, in hg's
//! order: the filelogs (with copy metadata and hg's file-parent rules), the fncache, the
//! manifest (the first parent's manifest with the changes applied), the changelog last,
//! and the phase roots (a new changeset is a draft root unless a parent is already draft
//! or secret). It deletes `.hg/cache/*` and closes the transaction; on any error the
//! transaction is rolled back. The working directory and dirstate are not touched.
//!
//! [`init`] creates the files of a fresh `hg init` (share-safe, zstd, fncache, dotencode,
//! generaldelta, sparserevlog).

use crate::changelog::Changeset;
use crate::error::{Result, StoreError};
use crate::lock::RepoLocks;
use crate::manifest::{FileFlag, Manifest};
use crate::node::{Node, Rev, NULL_REV};
use crate::pathenc::encode_dir;
use crate::phases::{self, Phase};
use crate::repo::Repo;
use crate::revlog_writer::{Compression, RevlogWriter};
use crate::transaction::Transaction;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// hg's `_maxinline`: an inline revlog reaching this many data bytes is split.
const MAX_INLINE: u64 = 131072;

/// One file change of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The file gets this content and flag; `copy_from` names the path it was copied or
    /// renamed from (which must exist in a parent manifest).
    Set {
        data: Vec<u8>,
        flag: FileFlag,
        copy_from: Option<Vec<u8>>,
    },
    /// The file is removed.
    Remove,
}

/// Everything a new changeset is made of.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub p1: Node,
    pub p2: Node,
    /// Changes relative to the manifest of `p1`. In a merge, files taken from `p2` must be
    /// listed here too.
    pub files: BTreeMap<Vec<u8>, Change>,
    pub user: Vec<u8>,
    /// Seconds since the epoch.
    pub time: i64,
    /// Seconds **west** of UTC (hg's convention: UTC+1 is -3600).
    pub tz: i32,
    pub description: Vec<u8>,
    /// `None` (or `default`) is the default branch.
    pub branch: Option<Vec<u8>>,
}

/// hg's `stripdesc`: strips trailing whitespace of each line, and leading and trailing
/// blank lines.
pub fn stripdesc(desc: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut rest = desc;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(rest.len());
        lines.push(&rest[..end]);
        let mut next = end;
        if rest.get(end) == Some(&b'\r') && rest.get(end + 1) == Some(&b'\n') {
            next += 2;
        } else if end < rest.len() {
            next += 1;
        }
        rest = &rest[next..];
    }
    let mut out = Vec::with_capacity(desc.len());
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        let keep = line
            .iter()
            .rposition(|b| !b" \t\r\n\x0b\x0c".contains(b))
            .map_or(0, |p| p + 1);
        out.extend_from_slice(&line[..keep]);
    }
    let start = out.iter().position(|&b| b != b'\n').unwrap_or(out.len());
    let end = out
        .iter()
        .rposition(|&b| b != b'\n')
        .map_or(start, |p| p + 1);
    out[start..end].to_vec()
}

/// hg's `changelog._string_escape` of one `key:value` extra.
fn escape_extra(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0 => out.extend_from_slice(b"\\0"),
            _ => out.push(b),
        }
    }
    out
}

/// The changelog text of a changeset (`changelog.add`).
pub fn changelog_text(
    manifest: &Node,
    user: &[u8],
    time: i64,
    tz: i32,
    extra: &BTreeMap<Vec<u8>, Vec<u8>>,
    files: &BTreeSet<Vec<u8>>,
    description: &[u8],
) -> Vec<u8> {
    let mut text = manifest.to_hex().into_bytes();
    text.push(b'\n');
    text.extend_from_slice(user);
    text.push(b'\n');
    text.extend_from_slice(format!("{time} {tz}").as_bytes());
    if !extra.is_empty() {
        text.push(b' ');
        for (i, (k, v)) in extra.iter().enumerate() {
            if i > 0 {
                text.push(0);
            }
            let mut kv = k.clone();
            kv.push(b':');
            kv.extend_from_slice(v);
            text.extend_from_slice(&escape_extra(&kv));
        }
    }
    text.push(b'\n');
    for f in files {
        text.extend_from_slice(f);
        text.push(b'\n');
    }
    text.push(b'\n');
    text.extend_from_slice(&stripdesc(description));
    text
}

/// A filelog raw text: content with an optional metadata header (`filelog.add`).
pub fn file_rawtext(meta: &BTreeMap<&[u8], Vec<u8>>, data: &[u8]) -> Vec<u8> {
    if meta.is_empty() && !data.starts_with(b"\x01\n") {
        return data.to_vec();
    }
    let mut raw = b"\x01\n".to_vec();
    for (k, v) in meta {
        raw.extend_from_slice(k);
        raw.extend_from_slice(b": ");
        raw.extend_from_slice(v);
        raw.push(b'\n');
    }
    raw.extend_from_slice(b"\x01\n");
    raw.extend_from_slice(data);
    raw
}

fn changelog_rev(repo: &Repo, node: &Node, which: &str) -> Result<Rev> {
    if node.is_null() {
        return Ok(NULL_REV);
    }
    repo.changelog()
        .rev_of(node)
        .ok_or_else(|| StoreError::UnknownRevision(format!("{which} {node}")))
}

/// The engine of new chunks: hg's `compengine`, named by a `revlog-compression-*` or
/// `exp-compression-*` requirement (of several, hg takes the last it iterates over; revfs
/// the last in sorted order), zlib without one.
pub(crate) fn compression_of(repo: &Repo) -> Compression {
    let engine = repo
        .requirements()
        .iter()
        .filter_map(|r| {
            r.strip_prefix("revlog-compression-")
                .or_else(|| r.strip_prefix("exp-compression-"))
        })
        .last();
    match engine {
        Some("zstd") => Compression::Zstd,
        Some("none") => Compression::None,
        _ => Compression::Zlib,
    }
}

/// Journals a revlog's files before `finish` writes them. An inline index that may be
/// split (rewritten as a whole) is backed up instead of truncated.
pub(crate) fn journal_revlog(
    tr: &mut Transaction,
    stem: &[u8],
    writer: &RevlogWriter,
    added_bytes: u64,
) -> Result<()> {
    let (isize, dsize) = writer.original_sizes();
    let mut i = stem.to_vec();
    i.extend_from_slice(b".i");
    let mut d = stem.to_vec();
    d.extend_from_slice(b".d");
    let may_split = isize > 0 && dsize == 0 && isize + added_bytes >= MAX_INLINE;
    if may_split {
        tr.backup_file(&i)?;
    } else {
        tr.journal_file(&i, isize)?;
    }
    tr.journal_file(&d, dsize)
}

/// Opens the writer of the revlog `stem` (unencoded store path without `.i`), creating
/// the directories of a new one.
pub(crate) fn open_writer(
    tr: &Transaction,
    stem: &[u8],
    generaldelta: bool,
    compression: Compression,
) -> Result<RevlogWriter> {
    let mut i = stem.to_vec();
    i.extend_from_slice(b".i");
    let mut d = stem.to_vec();
    d.extend_from_slice(b".d");
    let ipath = tr.store_file(&i);
    if let Some(parent) = ipath.parent() {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, e))?;
    }
    RevlogWriter::open(&ipath, &tr.store_file(&d), generaldelta, compression)
}

/// Creates the changeset described by `req` and returns its node. See the module
/// documentation. `repo` may be stale: the repository is reopened under the locks.
pub fn commit(repo: &Repo, req: &CommitRequest) -> Result<Node> {
    Ok(commit_with_manifest(repo, req)?.0)
}

/// [`commit`], also returning the new changeset's manifest (so that a caller that moves a
/// working copy to it need not read it back).
pub fn commit_with_manifest(repo: &Repo, req: &CommitRequest) -> Result<(Node, Manifest)> {
    commit_over(repo, req, None)
}

/// [`commit_with_manifest`] where the caller holds a manifest that may be p1's (a working
/// copy's base): used instead of reading p1's again when its node is p1's manifest node, so
/// that a commit holds the old manifest once and the new one once, whatever their size.
pub fn commit_over(
    repo: &Repo,
    req: &CommitRequest,
    held: Option<&Manifest>,
) -> Result<(Node, Manifest)> {
    let locks = RepoLocks::acquire(repo)?;
    let repo = Repo::open(repo.root())?;
    check_request(&repo, req)?;
    let mut tr = Transaction::begin(&repo)?;
    if let Err(e) = crate::nodemap::forget(repo.store_path()) {
        if let Err(abort_err) = tr.abort() {
            tracing::error!("rolling back the commit failed: {abort_err}");
        }
        return Err(e);
    }
    match write_commit(&repo, req, held, &mut tr) {
        Ok(done) => {
            tr.close()?;
            drop(locks);
            Ok(done)
        }
        Err(e) => {
            if let Err(abort_err) = tr.abort() {
                tracing::error!("rolling back the commit failed: {abort_err}");
            }
            Err(e)
        }
    }
}

fn check_request(repo: &Repo, req: &CommitRequest) -> Result<()> {
    let bad = |msg: String| Err(StoreError::Other(msg));
    for r in ["treemanifest", "revlogv2", "changelogv2"] {
        if repo.requirements().contains(r) {
            return bad(format!("committing to a {r} repository is not supported"));
        }
    }
    if !repo.requirements().contains("revlogv1") {
        return bad("committing needs a revlogv1 repository".into());
    }
    if req.user.is_empty() {
        return bad("empty username".into());
    }
    if req.user.contains(&b'\n') || req.user.contains(&b'\r') {
        return bad("username contains a newline".into());
    }
    if let Some(b) = &req.branch {
        if [&b"."[..], b"null", b"tip"].contains(&b.as_slice()) {
            return bad(format!(
                "the name '{}' is reserved",
                String::from_utf8_lossy(b)
            ));
        }
        if b.contains(&b'\n') || b.contains(&b'\r') || b.contains(&0) {
            return bad("branch name contains a newline or NUL".into());
        }
    }
    if req.p1 == req.p2 && !req.p1.is_null() {
        return bad("both parents are the same changeset".into());
    }
    for path in req.files.keys() {
        if path.contains(&b'\n') || path.contains(&b'\r') {
            return bad(format!(
                "'\\n' and '\\r' disallowed in filenames: {:?}",
                String::from_utf8_lossy(path)
            ));
        }
        if let Err(e) = crate::pathaudit::audit(path) {
            return bad(format!("{}: {e}", String::from_utf8_lossy(path)));
        }
    }
    Ok(())
}

fn write_commit(
    repo: &Repo,
    req: &CommitRequest,
    held: Option<&Manifest>,
    tr: &mut Transaction,
) -> Result<(Node, Manifest)> {
    let compression = compression_of(repo);
    let generaldelta = repo.requirements().contains("generaldelta");
    let (mut p1, mut p2) = (req.p1, req.p2);
    if p1.is_null() {
        std::mem::swap(&mut p1, &mut p2);
    }
    let p1rev = changelog_rev(repo, &p1, "first parent")?;
    let p2rev = changelog_rev(repo, &p2, "second parent")?;
    let linkrev = Rev::try_from(repo.changelog().len())
        .map_err(|_| StoreError::Other("changelog too large".into()))?;
    let cs1 = repo.changeset(p1rev)?;
    let cs2 = repo.changeset(p2rev)?;
    let t0 = std::time::Instant::now();
    let m1 = match held {
        Some(m) if m.node() == cs1.manifest => m.clone(),
        _ => repo.manifest(&cs1.manifest)?,
    };
    let m2 = repo.manifest(&cs2.manifest)?;

    // The new manifest, as changes to p1's: path -> new entry (None: removed).
    let mut changes: BTreeMap<Vec<u8>, Option<(Node, FileFlag)>> = BTreeMap::new();
    let mut new_fncache: Vec<Vec<u8>> = Vec::new();
    // File revisions are hashed, diffed and compressed in parallel, in memory; then
    // journaled and appended one by one.
    type Set<'a> = (&'a Vec<u8>, &'a Vec<u8>, FileFlag, Option<&'a [u8]>);
    let sets: Vec<Set> = req
        .files
        .iter()
        .filter_map(|(path, change)| match change {
            Change::Set {
                data,
                flag,
                copy_from,
            } => Some((path, data, *flag, copy_from.as_deref())),
            Change::Remove => None,
        })
        .collect();
    tracing::debug!(elapsed = ?t0.elapsed(), "commit: parent manifests");
    let prepared: Vec<Result<PreparedFile>> = {
        use rayon::prelude::*;
        let tr: &Transaction = tr;
        sets.par_iter()
            .map(|(path, data, _, copy_from)| {
                prepare_file(
                    repo,
                    tr,
                    path,
                    data,
                    *copy_from,
                    &m1,
                    &m2,
                    linkrev,
                    generaldelta,
                    compression,
                )
            })
            .collect()
    };
    let mut blobs = Vec::new();
    for ((path, _, flag, _), prepared) in sets.iter().zip(prepared) {
        let prepared = prepared?;
        if let PreparedFile::Shallow(b) = &prepared {
            blobs.push(b.clone());
        }
        let node = append_file(tr, prepared, &mut new_fncache)?;
        changes.insert((*path).clone(), Some((node, *flag)));
    }
    for (path, change) in &req.files {
        if let Change::Remove = change {
            changes.insert(path.clone(), None);
        }
    }
    // Changed = every path whose manifest entry (node or flag) differs from p1's.
    tracing::debug!(elapsed = ?t0.elapsed(), "commit: file revisions");
    let mut files: BTreeSet<Vec<u8>> = BTreeSet::new();
    for (path, new) in &changes {
        if m1.get(path)? != *new {
            files.insert(path.clone());
        }
    }

    // The manifest: p1's when nothing changed (`_commit_manifest`).
    let (manifest_node, new_manifest) = if files.is_empty() {
        (cs1.manifest, m1.clone())
    } else {
        write_manifest(
            tr,
            &cs1.manifest,
            &cs2.manifest,
            &m1,
            &changes,
            linkrev,
            generaldelta,
            compression,
            t0,
        )?
    };

    tracing::debug!(elapsed = ?t0.elapsed(), "commit: manifest");
    // fncache (atomically replaced, backed up in the transaction).
    if repo.requirements().contains("fncache") && !new_fncache.is_empty() {
        update_fncache(repo, tr, &new_fncache)?;
    }

    // The changelog, last.
    let mut extra = BTreeMap::new();
    if let Some(b) = &req.branch {
        if !b.is_empty() && b.as_slice() != b"default" {
            extra.insert(b"branch".to_vec(), b.clone());
        }
    }
    let text = changelog_text(
        &manifest_node,
        &req.user,
        req.time,
        req.tz,
        &extra,
        &files,
        &req.description,
    );
    // Parse our own text back: it must be readable by the reader of this crate.
    Changeset::parse(&text, &Node::NULL)?;
    let stem = b"00changelog";
    let mut w = open_writer(tr, stem, false, compression)?.store_deltas(false);
    let before = w.len();
    let (rev, node) = w.add(&text, p1rev, p2rev, linkrev, false)?;
    if w.len() == before {
        // The very same changeset exists already: nothing new was written.
        return Ok((node, new_manifest));
    }
    if rev != linkrev {
        return Err(StoreError::Other(format!(
            "changelog changed while committing (rev {rev}, expected {linkrev})"
        )));
    }
    // A shallow repository's new file revisions, linked to the changeset, before the
    // changeset is written: a reader never sees it without them.
    if !blobs.is_empty() {
        let source = crate::shallow::source::registered(repo.store_path()).ok_or_else(|| {
            StoreError::Other(
                "this repository was cloned from a server, and this process has no access to it"
                    .into(),
            )
        })?;
        for b in &blobs {
            source.write_local(b, &node)?;
        }
    }
    journal_revlog(tr, stem, &w, text.len() as u64 + 65)?;
    w.finish()?;

    tracing::debug!(elapsed = ?t0.elapsed(), "commit: changelog");
    update_phaseroots(repo, tr, node, [p1rev, p2rev])?;
    clear_cache(repo.dot_hg())?;
    Ok((node, new_manifest))
}

/// Appends the manifest of p1's (`m1`, node `mp1_node`; the second parent's `mp2_node`)
/// with `changes`: its node, and the manifest, whose one copy of the text the writer
/// shares (for the deltas of later revisions).
#[allow(clippy::too_many_arguments)]
fn write_manifest(
    tr: &mut Transaction,
    mp1_node: &Node,
    mp2_node: &Node,
    m1: &Manifest,
    changes: &BTreeMap<Vec<u8>, Option<(Node, FileFlag)>>,
    linkrev: Rev,
    generaldelta: bool,
    compression: Compression,
    t0: std::time::Instant,
) -> Result<(Node, Manifest)> {
    let stem = b"00manifest";
    let mut w = open_writer(tr, stem, generaldelta, compression)?;
    let mut mp1 = w.rev_of(mp1_node).unwrap_or(NULL_REV);
    let mut mp2 = w.rev_of(mp2_node).unwrap_or(NULL_REV);
    if (mp1 == NULL_REV) != mp1_node.is_null() || (mp2 == NULL_REV) != mp2_node.is_null() {
        return Err(StoreError::Other(
            "a parent's manifest is missing from the manifest log".into(),
        ));
    }
    if mp1 == NULL_REV {
        std::mem::swap(&mut mp1, &mut mp2);
    }
    // One copy of the new manifest, shared by the writer (for the deltas of later
    // revisions) and the manifest returned.
    let text: std::sync::Arc<[u8]> = std::sync::Arc::from(m1.with_changes(changes));
    if !mp1_node.is_null() {
        if let Some(r) = w.rev_of(mp1_node) {
            w.known_text(r, m1.text().clone());
        }
    }
    tracing::debug!(elapsed = ?t0.elapsed(), "commit: manifest text");
    let before = w.len();
    let (_, node) = w.add_shared(text.clone(), mp1, mp2, linkrev, true)?;
    tracing::debug!(elapsed = ?t0.elapsed(), "commit: manifest revision");
    if w.len() > before {
        journal_revlog(tr, stem, &w, text.len() as u64 + 65)?;
        // A split 00manifest.d is not an fncache entry (only data/ and meta/ are).
        w.finish()?;
    }
    let manifest = Manifest::new(text, node)?;
    Ok((node, manifest))
}

/// A file revision ready to be appended (or an existing one to reuse).
pub(crate) enum PreparedFile {
    Reused(Node),
    /// A file revision of a shallow repository: a blob written into its local store once
    /// the changeset's node (the blob's link) is known.
    Shallow(crate::shallow::source::LocalBlob),
    New {
        stem: Vec<u8>,
        writer: Box<RevlogWriter>,
        node: Node,
        raw_len: u64,
        was_new: bool,
    },
}

/// Journals and appends a prepared file revision; returns its node.
pub(crate) fn append_file(
    tr: &mut Transaction,
    prepared: PreparedFile,
    new_fncache: &mut Vec<Vec<u8>>,
) -> Result<Node> {
    let (stem, w, node, raw_len, was_new) = match prepared {
        PreparedFile::Reused(node) => return Ok(node),
        PreparedFile::Shallow(blob) => return Ok(blob.node),
        PreparedFile::New {
            stem,
            writer,
            node,
            raw_len,
            was_new,
        } => (stem, writer, node, raw_len, was_new),
    };
    journal_revlog(tr, &stem, &w, raw_len + 65)?;
    let split = w.finish()?;
    if was_new {
        let mut i = stem.clone();
        i.extend_from_slice(b".i");
        new_fncache.push(i);
    }
    if split {
        let mut d = stem.clone();
        d.extend_from_slice(b".d");
        new_fncache.push(d);
    }
    Ok(node)
}

/// The first half of `commit._filecommit`: everything of a file revision that needs no lock on the transaction: parents, copy
/// metadata, reuse of an identical parent, and the new revision in memory (hashed, diffed,
/// compressed).
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_file(
    repo: &Repo,
    tr: &Transaction,
    path: &[u8],
    data: &[u8],
    copy_from: Option<&[u8]>,
    m1: &Manifest,
    m2: &Manifest,
    linkrev: Rev,
    generaldelta: bool,
    compression: Compression,
) -> Result<PreparedFile> {
    let flog = repo.filelog_uncached(path)?;
    let mut fparent1 = m1.get(path)?.map_or(Node::NULL, |e| e.0);
    let mut fparent2 = m2.get(path)?.map_or(Node::NULL, |e| e.0);
    let mut meta: BTreeMap<&[u8], Vec<u8>> = BTreeMap::new();
    if let Some(src) = copy_from {
        let cnode = m1.get(src)?.or(m2.get(src)?).map(|e| e.0).ok_or_else(|| {
            StoreError::Other(format!(
                "copy source {} of {} is in no parent manifest",
                String::from_utf8_lossy(src),
                String::from_utf8_lossy(path)
            ))
        })?;
        meta.insert(b"copy", src.to_vec());
        meta.insert(b"copyrev", cnode.to_hex().into_bytes());
        // Copy information is signalled by a null first parent.
        fparent1 = Node::NULL;
    } else if fparent1.is_null() {
        fparent1 = fparent2;
        fparent2 = Node::NULL;
    } else if !fparent2.is_null() {
        if fparent1 == fparent2 {
            fparent2 = Node::NULL;
        } else {
            let r1 = flog.rev_of(&fparent1)?;
            let r2 = flog.rev_of(&fparent2)?;
            if flog.is_ancestor(r1, r2)? {
                fparent1 = fparent2;
                fparent2 = Node::NULL;
            } else if flog.is_ancestor(r2, r1)? {
                fparent2 = Node::NULL;
            }
        }
    }
    let raw = file_rawtext(&meta, data);
    // Unchanged content: reuse the parent's revision (`filelog.cmp`, which compares the
    // data without its copy metadata, so that a renamed revision is reused too).
    if meta.is_empty() && fparent2.is_null() && !fparent1.is_null() {
        let r1 = flog.rev_of(&fparent1)?;
        let stored = flog.read_uncached(r1)?;
        if *stored == *data {
            return Ok(PreparedFile::Reused(fparent1));
        }
    }
    if flog.revlog().is_none() {
        // A shallow repository's file: a blob in its local store (crate::shallow).
        let node = Node::hash_revision(&fparent1, &fparent2, &raw);
        if repo.has_file_locally(path, &node) {
            return Ok(PreparedFile::Reused(node));
        }
        let copy = copy_from.map(|src| {
            let rev = meta.get(&b"copyrev"[..]).and_then(|h| Node::from_hex(h));
            (src.to_vec(), rev.unwrap_or(Node::NULL))
        });
        return Ok(PreparedFile::Shallow(crate::shallow::source::LocalBlob {
            path: path.to_vec(),
            node,
            text: data.to_vec(),
            p1: fparent1,
            p2: fparent2,
            copy,
        }));
    }
    let mut stem = b"data/".to_vec();
    stem.extend_from_slice(path);
    let mut w = open_writer(tr, &stem, generaldelta, compression)?;
    let rev_of = |w: &RevlogWriter, n: &Node| -> Result<Rev> {
        if n.is_null() {
            return Ok(NULL_REV);
        }
        w.rev_of(n).ok_or_else(|| StoreError::UnknownNode {
            revlog: String::from_utf8_lossy(&stem).into_owned(),
            node: n.to_hex(),
        })
    };
    let fp1 = rev_of(&w, &fparent1)?;
    let fp2 = rev_of(&w, &fparent2)?;
    let was_new = w.is_empty();
    let before = w.len();
    let (_, node) = w.add(&raw, fp1, fp2, linkrev, false)?;
    if w.len() == before {
        return Ok(PreparedFile::Reused(node));
    }
    Ok(PreparedFile::New {
        stem,
        writer: Box::new(w),
        node,
        raw_len: raw.len() as u64,
        was_new,
    })
}

/// Adds `entries` (unencoded store paths) to `store/fncache`, atomically.
pub(crate) fn update_fncache(repo: &Repo, tr: &mut Transaction, entries: &[Vec<u8>]) -> Result<()> {
    let path = repo.store_path().join("fncache");
    let mut text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let existing: BTreeSet<Vec<u8>> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    let before = text.len();
    for e in entries {
        let enc = encode_dir(e);
        if !existing.contains(&enc) {
            text.extend_from_slice(&enc);
            text.push(b'\n');
        }
    }
    if text.len() == before {
        return Ok(());
    }
    tr.replace_file(b"fncache", &text)
}

/// Makes `node` a draft root unless a parent is draft or secret already.
fn update_phaseroots(
    repo: &Repo,
    tr: &mut Transaction,
    node: Node,
    parents: [Rev; 2],
) -> Result<()> {
    let phases = phases::compute(repo.store_path(), repo.changelog())?;
    let inherited = parents
        .iter()
        .filter(|&&p| p != NULL_REV)
        .filter_map(|&p| usize::try_from(p).ok().and_then(|p| phases.get(p).copied()))
        .max()
        .unwrap_or(Phase::Public);
    if inherited >= Phase::Draft {
        return Ok(());
    }
    let path = repo.store_path().join("phaseroots");
    let mut text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    text.extend_from_slice(format!("1 {}\n", node.to_hex()).as_bytes());
    tr.replace_file(b"phaseroots", &text)
}

/// Deletes the files of `.hg/cache` (branch heads, tags, rev-branch caches), which a new
/// changeset makes stale; not revfs's own (`cache/revfs`: texts keyed by node, which no
/// commit changes).
pub(crate) fn clear_cache(dot_hg: &Path) -> Result<()> {
    let dir = dot_hg.join("cache");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(&dir, e))?;
        if entry.file_name() == "revfs" {
            continue;
        }
        let p = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let res = if is_dir {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        match res {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(p, e)),
        }
    }
    Ok(())
}

/// The dummy `.hg/00changelog.i` hg writes so that old clients refuse the repository.
const DUMMY_CHANGELOG: &[u8] = b"\0\0\xff\xff dummy changelog to prevent using the old repo layout";

/// Creates an empty repository in `dir` exactly like Debian's `hg init` 6.3.2 (zstd).
pub fn init(dir: &Path) -> Result<()> {
    init_with(dir, Compression::Zstd)
}

/// Creates an empty repository in `dir`, like `hg init` with
/// `format.revlog-compression` set to the given engine.
pub fn init_with(dir: &Path, compression: Compression) -> Result<()> {
    let dot_hg = dir.join(".hg");
    if std::fs::symlink_metadata(&dot_hg).is_ok() {
        return Err(StoreError::Other(format!(
            "repository {} already exists",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    std::fs::create_dir(&dot_hg).map_err(|e| StoreError::io(&dot_hg, e))?;
    let write = |path: &Path, content: &[u8]| {
        std::fs::write(path, content).map_err(|e| StoreError::io(path, e))
    };
    let mkdir = |path: &Path| std::fs::create_dir(path).map_err(|e| StoreError::io(path, e));
    mkdir(&dot_hg.join("cache"))?;
    mkdir(&dot_hg.join("wcache"))?;
    mkdir(&dot_hg.join("store"))?;
    write(&dot_hg.join("00changelog.i"), DUMMY_CHANGELOG)?;
    let mut reqs = vec![
        "dotencode",
        "fncache",
        "generaldelta",
        "revlogv1",
        "sparserevlog",
        "store",
    ];
    match compression {
        Compression::Zstd => reqs.push("revlog-compression-zstd"),
        Compression::None => reqs.push("exp-compression-none"),
        Compression::Zlib => {}
    }
    reqs.sort_unstable();
    let store_requires: String = reqs.iter().map(|r| format!("{r}\n")).collect();
    write(
        &dot_hg.join("store").join("requires"),
        store_requires.as_bytes(),
    )?;
    // Written last: a `.hg` without `requires` is not a usable repository yet.
    write(&dot_hg.join("requires"), b"share-safe\n")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::process::Command;

    /// Whether the `hg` oracle can run; without it, fails under CI and skips otherwise.
    pub(crate) fn hg_available() -> bool {
        let ok = Command::new("hg")
            .arg("--version")
            .env("HGPLAIN", "1")
            .env("HGRCPATH", "")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            assert!(std::env::var_os("CI").is_none(), "hg is required under CI");
            eprintln!("SKIPPED: hg not found");
        }
        ok
    }

    /// Runs hg in `dir`; returns (success, stdout, stderr).
    pub(crate) fn hg_run(dir: &Path, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("hg")
            .args(args)
            .current_dir(dir)
            .env("HGPLAIN", "1")
            .env("HGRCPATH", "")
            .env("HGUSER", "Test <test@example.invalid>")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs hg in `dir` and asserts success; returns stdout.
    pub(crate) fn hg(dir: &Path, args: &[&str]) -> String {
        let (ok, out, err) = hg_run(dir, args);
        assert!(ok, "hg {args:?} failed:\n{out}\n{err}");
        out
    }

    /// `hg verify` must pass without warnings.
    pub(crate) fn verify(dir: &Path) {
        let (ok, out, err) = hg_run(dir, &["verify"]);
        assert!(ok, "hg verify failed:\n{out}\n{err}");
        assert!(!err.contains("warning"), "hg verify warned:\n{out}\n{err}");
    }

    pub(crate) fn set(data: &[u8], flag: FileFlag) -> Change {
        Change::Set {
            data: data.to_vec(),
            flag,
            copy_from: None,
        }
    }

    pub(crate) fn request(
        p1: Node,
        files: Vec<(&str, Change)>,
        desc: &str,
        time: i64,
    ) -> CommitRequest {
        CommitRequest {
            p1,
            p2: Node::NULL,
            files: files
                .into_iter()
                .map(|(p, c)| (p.as_bytes().to_vec(), c))
                .collect(),
            user: b"Alice <alice@example.invalid>".to_vec(),
            time,
            tz: -3600,
            description: desc.as_bytes().to_vec(),
            branch: None,
        }
    }

    pub(crate) fn tip(dir: &Path) -> Node {
        let repo = Repo::open(dir).unwrap();
        let cl = repo.changelog();
        if cl.is_empty() {
            Node::NULL
        } else {
            cl.node(cl.tip()).unwrap()
        }
    }

    pub(crate) fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"abcdefghij \n0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(x % 48) as usize]
            })
            .collect()
    }

    #[test]
    fn stripdesc_and_changelog_text() {
        assert_eq!(stripdesc(b"\n\n  a  \r\nb\t\n\n\n"), b"  a\nb");
        assert_eq!(stripdesc(b""), b"");
        assert_eq!(stripdesc(b"\n \n"), b"");
        let mut extra = BTreeMap::new();
        extra.insert(b"branch".to_vec(), b"x\ny\\z\0".to_vec());
        let files: BTreeSet<Vec<u8>> = [b"b".to_vec(), b"a".to_vec()].into_iter().collect();
        let t = changelog_text(&Node::NULL, b"u", 5, -3600, &extra, &files, b"d \n");
        assert_eq!(
            t,
            format!(
                "{}\nu\n5 -3600 branch:x\\ny\\\\z\\0\na\nb\n\nd",
                Node::NULL.to_hex()
            )
            .as_bytes()
        );
        let mut meta = BTreeMap::new();
        assert_eq!(file_rawtext(&meta, b"\x01\nx"), b"\x01\n\x01\n\x01\nx");
        meta.insert(&b"copyrev"[..], b"00".to_vec());
        meta.insert(&b"copy"[..], b"a".to_vec());
        assert_eq!(
            file_rawtext(&meta, b"x"),
            b"\x01\ncopy: a\ncopyrev: 00\n\x01\nx"
        );
    }

    pub(crate) fn tree(root: &Path) -> Vec<(String, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                    out.push((rel, None));
                } else {
                    out.push((rel, Some(std::fs::read(e.path()).unwrap())));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn init_matches_hg_init() {
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        for (name, compression, extra) in [
            ("zstd", Compression::Zstd, None),
            (
                "zlib",
                Compression::Zlib,
                Some("format.revlog-compression=zlib"),
            ),
        ] {
            let ours = tmp.path().join(format!("ours-{name}"));
            let theirs = tmp.path().join(format!("theirs-{name}"));
            init_with(&ours, compression).unwrap();
            let mut args = vec!["init"];
            if let Some(c) = extra {
                args.extend(["--config", c]);
            }
            let t = theirs.to_str().unwrap();
            args.push(t);
            hg(tmp.path(), &args);
            assert_eq!(tree(&ours), tree(&theirs), "{name}");
            verify(&ours);
            let fmt = hg(&ours, &["debugformat"]);
            assert!(fmt.contains("share-safe:         yes"), "{fmt}");
            assert!(init(&ours).is_err());
            // Our own reader opens it, and a first commit works on it.
            let repo = Repo::open(&ours).unwrap();
            let node = commit(
                &repo,
                &request(
                    Node::NULL,
                    vec![("a", set(b"a\n", FileFlag::Regular))],
                    "first",
                    1,
                ),
            )
            .unwrap();
            verify(&ours);
            assert_eq!(
                hg(&ours, &["log", "-r", "0", "-T", "{node}"]),
                node.to_hex()
            );
            assert_eq!(hg(&ours, &["cat", "-r", "0", "a"]), "a\n");
        }
    }

    /// What one commit should look like to hg.
    struct Expected {
        rev: usize,
        files: Vec<String>,
        desc: String,
        date: String,
        branch: String,
        copies: String,
        status: String,
        /// The full content of the changeset: path -> (data, flag).
        content: BTreeMap<Vec<u8>, (Vec<u8>, FileFlag)>,
    }

    type Content = BTreeMap<Vec<u8>, (Vec<u8>, FileFlag)>;

    /// Commits `req` with [`commit`] and records what hg should report.
    fn do_commit(
        dir: &Path,
        req: CommitRequest,
        base: &Content,
        expected: &mut Vec<Expected>,
        states: &mut BTreeMap<Node, Content>,
    ) -> Node {
        let repo = Repo::open(dir).unwrap();
        let rev = repo.changelog().len();
        let node = commit(&repo, &req).unwrap();
        let mut content = base.clone();
        let mut files = Vec::new();
        let mut status = Vec::new();
        let mut copies = Vec::new();
        for (path, change) in &req.files {
            let p = String::from_utf8_lossy(path).into_owned();
            match change {
                Change::Remove => {
                    if content.remove(path).is_some() {
                        files.push(p.clone());
                        status.push(format!("R {p}"));
                    }
                }
                Change::Set {
                    data,
                    flag,
                    copy_from,
                } => {
                    let old = content.insert(path.clone(), (data.clone(), *flag));
                    if let Some(src) = copy_from {
                        copies.push(format!("{p} ({})", String::from_utf8_lossy(src)));
                    }
                    match old {
                        None => {
                            files.push(p.clone());
                            status.push(format!("A {p}"));
                        }
                        Some(o) if o != (data.clone(), *flag) || copy_from.is_some() => {
                            files.push(p.clone());
                            status.push(format!("M {p}"));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        // hg status lists modified, added, removed in that order.
        status.sort_by_key(|s| (!s.starts_with('M'), !s.starts_with('A'), s.clone()));
        expected.push(Expected {
            rev,
            files,
            desc: String::from_utf8_lossy(&stripdesc(&req.description)).into_owned(),
            date: format!("{} {}", req.time, req.tz),
            branch: req.branch.as_ref().map_or("default".into(), |b| {
                String::from_utf8_lossy(b).into_owned()
            }),
            copies: copies.join(" "),
            status: status.iter().map(|s| format!("{s}\n")).collect(),
            content: content.clone(),
        });
        states.insert(node, content);
        node
    }

    fn check(dir: &Path, e: &Expected) {
        let r = e.rev.to_string();
        let log = hg(
            dir,
            &[
                "log",
                "-r",
                &r,
                "-T",
                "{files}|{desc}|{author}|{date|hgdate}|{branch}|{phase}|{file_copies}\n",
            ],
        );
        assert_eq!(
            log,
            format!(
                "{}|{}|Alice <alice@example.invalid>|{}|{}|draft|{}\n",
                e.files.join(" "),
                e.desc,
                e.date,
                e.branch,
                e.copies
            ),
            "rev {r}"
        );
        assert_eq!(hg(dir, &["status", "--change", &r]), e.status, "rev {r}");
        let out = tempfile::tempdir().unwrap();
        let pattern = format!("{}/%p", out.path().display());
        let manifest = hg(dir, &["manifest", "-r", &r, "-v"]);
        let mut expected_manifest = String::new();
        for (p, (_, flag)) in &e.content {
            let (perm, mark) = match flag {
                FileFlag::Regular => ("644", " "),
                FileFlag::Executable => ("755", "*"),
                FileFlag::Symlink => ("644", "@"),
            };
            expected_manifest.push_str(&format!("{perm} {mark} {}\n", String::from_utf8_lossy(p)));
        }
        assert_eq!(manifest, expected_manifest, "rev {r}");
        if e.content.is_empty() {
            return;
        }
        let mut args = vec!["cat", "-r", &r, "-o", &pattern];
        let names: Vec<String> = e
            .content
            .keys()
            .map(|p| format!("path:{}", String::from_utf8_lossy(p)))
            .collect();
        args.extend(names.iter().map(String::as_str));
        hg(dir, &args);
        for (p, (data, _)) in &e.content {
            let got = std::fs::read(out.path().join(String::from_utf8_lossy(p).as_ref())).unwrap();
            assert!(got == *data, "rev {r} file {}", String::from_utf8_lossy(p));
        }
    }

    #[test]
    fn thirty_commits_on_hg_init_read_back_by_hg() {
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        hg(tmp.path(), &["init", dir.to_str().unwrap()]);
        let mut expected = Vec::new();
        let mut states: BTreeMap<Node, Content> = BTreeMap::new();
        states.insert(Node::NULL, Content::new());
        let mut t = 1_700_000_000;
        let mut next = |p1: Node, files: Vec<(&str, Change)>, desc: &str| {
            t += 60;
            request(p1, files, desc, t)
        };
        let r = |x: &str| x.as_bytes().to_vec();

        // 0: adds with every flag.
        let req = next(
            Node::NULL,
            vec![
                ("a.txt", set(b"alpha\n", FileFlag::Regular)),
                ("b/c.txt", set(b"c\n", FileFlag::Regular)),
                ("run.sh", set(b"#!/bin/sh\necho hi\n", FileFlag::Executable)),
                ("link", set(b"a.txt", FileFlag::Symlink)),
                (
                    ".hidden/Upper Case.TXT",
                    set(b"dotencoded\n", FileFlag::Regular),
                ),
            ],
            "initial import\n\n  with trailing space   \n\n",
        );
        let base = states[&Node::NULL].clone();
        let mut head = do_commit(&dir, req, &base, &mut expected, &mut states);
        verify(&dir);

        macro_rules! step {
            ($files:expr, $desc:expr) => {{
                let req = next(head, $files, $desc);
                let base = states[&head].clone();
                head = do_commit(&dir, req, &base, &mut expected, &mut states);
            }};
        }
        // 1: modification.
        step!(
            vec![("a.txt", set(b"alpha\nbeta\n", FileFlag::Regular))],
            "modify a"
        );
        // 2: content starting with \1\n.
        step!(
            vec![("meta.bin", set(b"\x01\nnot meta\n", FileFlag::Regular))],
            "escape"
        );
        // 3: removal.
        step!(vec![("b/c.txt", Change::Remove)], "remove c");
        // 4: a copy with metadata.
        step!(
            vec![(
                "d.txt",
                Change::Set {
                    data: r("alpha\nbeta\n"),
                    flag: FileFlag::Regular,
                    copy_from: Some(b"a.txt".to_vec()),
                }
            )],
            "copy a to d"
        );
        // 5: flag-only change, and a symlink retarget.
        step!(
            vec![
                ("run.sh", set(b"#!/bin/sh\necho hi\n", FileFlag::Regular)),
                ("link", set(b"d.txt", FileFlag::Symlink)),
            ],
            "flags"
        );
        // 6: a large file that splits on its first revision.
        let big = pseudo_random(1, 200_000);
        step!(vec![("big.bin", set(&big, FileFlag::Regular))], "big file");
        // 7: modify it (appends to a split revlog).
        let mut big2 = big.clone();
        big2.extend_from_slice(b"tail\n");
        step!(
            vec![("big.bin", set(&big2, FileFlag::Regular))],
            "big file grows"
        );
        // 8-15: a file growing past the inline limit (split of an existing inline revlog).
        for i in 0..8u64 {
            // Unrelated texts: no useful delta, so the inline data passes 128 KiB.
            let grow = pseudo_random(100 + i, 40_000);
            step!(
                vec![("grow.txt", set(&grow, FileFlag::Regular))],
                &format!("grow {i}")
            );
        }
        verify(&dir);
        // Interleave commits made by hg itself.
        hg(&dir, &["update", "-C", "tip"]);
        std::fs::write(dir.join("hg.txt"), "made by hg\n").unwrap();
        hg(
            &dir,
            &["commit", "-A", "-m", "hg commit", "-d", "1700100000 0"],
        );
        let hg_node = tip(&dir);
        let mut hg_state = states[&head].clone();
        hg_state.insert(
            b"hg.txt".to_vec(),
            (b"made by hg\n".to_vec(), FileFlag::Regular),
        );
        states.insert(hg_node, hg_state);
        head = hg_node;
        // 17: ours on top of hg's.
        step!(
            vec![("hg.txt", set(b"made by hg\nand revfs\n", FileFlag::Regular))],
            "on top of hg"
        );
        let default_head = head;
        // 18-19: a named branch from rev 3's descendant line.
        let fork = expected[5].rev;
        let fork_node =
            Node::from_hex(hg(&dir, &["log", "-r", &fork.to_string(), "-T", "{node}"]).as_bytes())
                .unwrap();
        head = fork_node;
        let mut req = next(
            head,
            vec![("f.txt", set(b"feature\n", FileFlag::Regular))],
            "start feature",
        );
        req.branch = Some(b"feature".to_vec());
        let base = states[&head].clone();
        head = do_commit(&dir, req, &base, &mut expected, &mut states);
        let mut req = next(
            head,
            vec![("a.txt", set(b"alpha\nbeta\nfeature\n", FileFlag::Regular))],
            "feature change",
        );
        req.branch = Some(b"feature".to_vec());
        let base = states[&head].clone();
        head = do_commit(&dir, req, &base, &mut expected, &mut states);
        let feature_head = head;
        // 20: merge feature into default: f.txt from p2, a.txt merged.
        let mut req = next(
            default_head,
            vec![
                ("f.txt", set(b"feature\n", FileFlag::Regular)),
                ("a.txt", set(b"alpha\nbeta\nfeature\n", FileFlag::Regular)),
            ],
            "merge feature",
        );
        req.p2 = feature_head;
        let base = states[&default_head].clone();
        head = do_commit(&dir, req, &base, &mut expected, &mut states);
        verify(&dir);
        let parents = hg(&dir, &["log", "-r", "tip", "-T", "{p1node} {p2node}"]);
        assert_eq!(
            parents,
            format!("{} {}", default_head.to_hex(), feature_head.to_hex())
        );
        // 21-29: more modifications, a rename (copy + remove), removal and re-add.
        step!(
            vec![
                (
                    "e.txt",
                    Change::Set {
                        data: r("\x01\ncopied escaped\n"),
                        flag: FileFlag::Executable,
                        copy_from: Some(b"meta.bin".to_vec()),
                    }
                ),
                ("meta.bin", Change::Remove),
            ],
            "rename meta.bin to e.txt"
        );
        step!(vec![("d.txt", Change::Remove)], "remove d");
        step!(
            vec![("d.txt", set(b"back\n", FileFlag::Regular))],
            "re-add d"
        );
        for i in 0..6 {
            let mut a = b"alpha\nbeta\nfeature\n".to_vec();
            for j in 0..=i {
                a.extend_from_slice(format!("line {j}\n").as_bytes());
            }
            step!(
                vec![
                    ("a.txt", set(&a, FileFlag::Regular)),
                    (
                        "sub/dir/n.txt",
                        set(format!("{i}\n").as_bytes(), FileFlag::Regular)
                    ),
                ],
                &format!("more {i}")
            );
        }
        // A commit with no effective change reuses p1's manifest.
        step!(
            vec![("d.txt", set(b"back\n", FileFlag::Regular))],
            "empty commit"
        );
        assert!(expected.len() >= 30, "{}", expected.len());
        let _ = head;
        verify(&dir);
        for e in &expected {
            check(&dir, e);
        }
        // The empty commit lists no files and reuses the manifest node.
        let mf = hg(&dir, &["log", "-r", "tip~1:tip", "-T", "{manifest}\n"]);
        let lines: Vec<&str> = mf.lines().collect();
        assert_eq!(lines[0], lines[1]);
        // Only the first changeset is a draft root; the feature branch descends from a draft.
        let roots = std::fs::read_to_string(dir.join(".hg/store/phaseroots")).unwrap();
        assert_eq!(roots.lines().count(), 1, "{roots}");
        // Caches were deleted and no journal or undo files are left.
        let store = dir.join(".hg/store");
        for f in ["journal", "journal.backupfiles", "undo", "lock"] {
            assert!(!store.join(f).exists(), "{f}");
        }
        assert!(!dir.join(".hg/wlock").exists());
        // fncache lists every store file exactly once.
        let fncache = std::fs::read_to_string(store.join("fncache")).unwrap();
        let mut lines: Vec<&str> = fncache.lines().collect();
        let n = lines.len();
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(n, lines.len());
        assert!(lines.contains(&"data/big.bin.d"), "{fncache}");
        assert!(lines.contains(&"data/grow.txt.d"), "{fncache}");
        // hg can still commit on top of ours, and the result verifies.
        hg(&dir, &["update", "-C", "tip"]);
        std::fs::write(dir.join("a.txt"), "by hg again\n").unwrap();
        hg(&dir, &["commit", "-m", "hg again", "-d", "1700200000 0"]);
        verify(&dir);
        // hg rollback must not undo any of our commits beyond hg's own last one.
        hg(&dir, &["rollback"]);
        assert_eq!(
            tip(&dir),
            head_of(&dir, expected.last().map(|e| e.rev).unwrap_or(0))
        );
        verify(&dir);
    }

    fn head_of(dir: &Path, rev: usize) -> Node {
        Node::from_hex(hg(dir, &["log", "-r", &rev.to_string(), "-T", "{node}"]).as_bytes())
            .unwrap()
    }

    #[test]
    fn hg_respects_our_locks_and_commit_waits_for_nothing() {
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        init(&dir).unwrap();
        let repo = Repo::open(&dir).unwrap();
        let locks = RepoLocks::acquire(&repo).unwrap();
        std::fs::write(dir.join("x"), "x\n").unwrap();
        let (ok, _, err) = hg_run(
            &dir,
            &["--config", "ui.timeout=1", "commit", "-A", "-m", "x"],
        );
        assert!(!ok);
        assert!(err.contains("lock held by"), "{err}");
        drop(locks);
        hg(&dir, &["commit", "-A", "-m", "x", "-d", "1 0"]);
        verify(&dir);
    }

    #[test]
    fn bad_requests_are_refused_and_leave_no_journal() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        init(&dir).unwrap();
        let repo = Repo::open(&dir).unwrap();
        let mut req = request(
            Node::NULL,
            vec![("a", set(b"a", FileFlag::Regular))],
            "d",
            1,
        );
        req.user = Vec::new();
        assert!(commit(&repo, &req).is_err());
        let mut req = request(
            Node::NULL,
            vec![("../a", set(b"a", FileFlag::Regular))],
            "d",
            1,
        );
        assert!(commit(&repo, &req).is_err());
        req.files = [(
            b"b".to_vec(),
            Change::Set {
                data: b"b".to_vec(),
                flag: FileFlag::Regular,
                copy_from: Some(b"nope".to_vec()),
            },
        )]
        .into_iter()
        .collect();
        let err = commit(&repo, &req).unwrap_err();
        assert!(err.to_string().contains("copy source"), "{err}");
        assert!(!dir.join(".hg/store/journal").exists());
        assert!(!dir.join(".hg/store/data/b.i").exists());
        req.files.clear();
        req.p1 = Node([7; 20]);
        assert!(commit(&repo, &req).is_err());
        req.p1 = Node::NULL;
        req.branch = Some(b"tip".to_vec());
        assert!(commit(&repo, &req).is_err());
        req.branch = None;
        let n = commit(&repo, &req).unwrap();
        assert_eq!(tip(&dir), n);
    }
}
