//! `status` of a working copy: which paths differ from the base revision, computed from the
//! dirty set that every change feeds, never by walking or stat'ing the tree. Only `-c`
//! (clean files) enumerates the base manifest, and it does not look at unchanged files.
//!
//! Letters and rules are hg's: `M` modified, `A` added, `R` removed, `!` missing (tracked
//! but gone), `?` unknown, `I` ignored, `C` clean. A modified file is compared by flags,
//! then by size, then by content, so a file written back to its original bytes is clean.

use crate::wc::journal::Track;
use crate::wc::{
    EntryType, FileData, Inner, Kind, LinkData, Result, Walk, WcError, WorkingCopy, ROOT_INO,
};
use revfs_hg::ignore::{FileSource, Ignore};
use revfs_store::manifest::FileFlag;
use revfs_store::{Node, Repo};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// What `status` is asked to report.
#[derive(Debug, Clone, Default)]
pub struct StatusRequest {
    pub clean: bool,
    pub ignored: bool,
    pub unknown: bool,
    /// The ignore files `ui.ignore` and `ui.ignore.*` name in the configuration of the
    /// program that asks (its `--config`, `HGRCPATH`, hgrc files), `$VAR` and `~`
    /// expanded: relative to the working copy's root, or absolute. `None`: those of the
    /// daemon's own configuration.
    pub ignore_files: Option<Vec<Vec<u8>>>,
}

/// One line of status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    pub letter: char,
    pub path: Vec<u8>,
}

/// A working-copy path as it is now, captured under the lock and compared after it.
#[derive(Debug)]
enum Now {
    Absent,
    Dir,
    StoreFile {
        path: Box<[u8]>,
        node: Node,
        exec: bool,
    },
    OverlayFile {
        id: u64,
        exec: bool,
    },
    StoreLink {
        path: Box<[u8]>,
        node: Node,
    },
    LocalLink(Box<[u8]>),
}

/// A path's entry in the base manifest: its file node and flag.
type BaseEntry = Option<(Node, FileFlag)>;

/// A set of paths and what lies on their way: the paths themselves, their ancestor
/// directories and everything below them. What an update's checks must see of the working
/// copy for the paths its diff touches (`WorkingCopy::status_within`).
#[derive(Debug, Default)]
pub(crate) struct Scope {
    paths: HashSet<Vec<u8>>,
    dirs: HashSet<Vec<u8>>,
}

impl Scope {
    pub(crate) fn new<'a>(paths: impl IntoIterator<Item = &'a [u8]>) -> Scope {
        let mut s = Scope::default();
        for p in paths {
            for (i, _) in p.iter().enumerate().filter(|(_, &b)| b == b'/') {
                if !s.dirs.contains(&p[..i]) {
                    s.dirs.insert(p[..i].to_vec());
                }
            }
            s.paths.insert(p.to_vec());
        }
        s
    }

    /// True when `path` is one of the paths, an ancestor of one (the root included), or
    /// below one.
    pub(crate) fn covers(&self, path: &[u8]) -> bool {
        path.is_empty()
            || self.paths.contains(path)
            || self.dirs.contains(path)
            || path
                .iter()
                .enumerate()
                .any(|(i, &b)| b == b'/' && self.paths.contains(&path[..i]))
    }
}

/// hg's order of status letters: the order it prints the groups in.
pub(crate) const ORDER: [char; 7] = ['M', 'A', 'R', '!', '?', 'I', 'C'];

impl WorkingCopy {
    fn now_of(&self, inner: &mut Inner, walk: &mut Walk, path: &[u8]) -> Result<Now> {
        let Some(ino) = inner.resolve_walk(walk, path)? else {
            return Ok(Now::Absent);
        };
        let Some(e) = inner.entries.get(&ino) else {
            return Ok(Now::Absent);
        };
        let exec = e.mode & 0o100 != 0;
        Ok(match &e.kind {
            Kind::Dir { .. } => Now::Dir,
            Kind::File(FileData::Store { path, node, .. }) => Now::StoreFile {
                path: path.clone(),
                node: *node,
                exec,
            },
            Kind::File(FileData::Overlay { id }) => Now::OverlayFile { id: *id, exec },
            Kind::Symlink(LinkData::Store { path, node }) => Now::StoreLink {
                path: path.clone(),
                node: *node,
            },
            Kind::Symlink(LinkData::Local(t)) => Now::LocalLink(t.clone()),
            // Fifos, sockets and devices are not files hg can track: like hg, status does not
            // list them (and a tracked file replaced by one is missing).
            Kind::Special { .. } => Now::Dir,
        })
    }

    /// The paths status must look at: everything the journal touched, expanded to the files
    /// below touched directories (in the base manifest and in the working copy). Each comes
    /// with its base entry when the search found it (`Some`: looked up, `None` inside it
    /// when the base lacks it), so that status does not search the manifest again.
    ///
    /// With a `scope`, only the paths it covers.
    fn candidates(
        &self,
        inner: &mut Inner,
        scope: Option<&Scope>,
    ) -> Result<BTreeMap<Vec<u8>, Option<BaseEntry>>> {
        let covered = |p: &[u8]| scope.is_none_or(|s| s.covers(p));
        // Paths with a tracking override are always looked at: an added file that is gone
        // is missing (`!`).
        let mut out: BTreeMap<Vec<u8>, Option<BaseEntry>> = inner
            .tracking
            .keys()
            .filter(|p| covered(p))
            .map(|p| (p.clone(), None))
            .collect();
        // So are the files of a merge (modified whatever their content).
        out.extend(
            inner
                .from_p2
                .iter()
                .filter(|p| covered(p))
                .map(|p| (p.clone(), None)),
        );
        let dirty: Vec<Vec<u8>> = inner.dirty.iter().filter(|p| covered(p)).cloned().collect();
        let base = inner.base.clone();
        let mut walk = Walk::default();
        for p in &dirty {
            if let Some(e) = base.find(p)? {
                // A file of the base: no base file below it (a manifest never has both).
                out.insert(p.clone(), Some(Some((e.node, e.flag))));
            } else {
                out.insert(p.clone(), Some(None));
                let mut prefix = p.clone();
                prefix.push(b'/');
                for e in base.iter_prefix(&prefix) {
                    let e = e?;
                    if covered(e.path) {
                        out.insert(e.path.to_vec(), Some(Some((e.node, e.flag))));
                    }
                }
            }
            match inner.resolve_walk(&mut walk, p)? {
                Some(ino) if ino == ROOT_INO => {}
                Some(ino)
                    if matches!(
                        inner.entries.get(&ino).map(|e| &e.kind),
                        Some(Kind::Dir { .. })
                    ) =>
                {
                    let mut below = BTreeSet::new();
                    self.paths_below(inner, ino, p, false, &mut below)?;
                    for q in below.into_iter().filter(|q| covered(q)) {
                        out.entry(q).or_insert(None);
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// The paths a status looks at (every path with a change recorded, no content
    /// compared) and the copy sources: what a bounded cache of file revisions keeps the
    /// working-copy parent's revisions of, for status, diff, revert and commit.
    pub fn changed_paths(&self) -> Result<Vec<Vec<u8>>> {
        let mut inner = self.write();
        let mut paths: Vec<Vec<u8>> = self.candidates(&mut inner, None)?.into_keys().collect();
        paths.extend(inner.copies.values().cloned());
        Ok(paths)
    }

    /// Computes status.
    pub fn status(&self, req: StatusRequest) -> Result<Vec<StatusEntry>> {
        self.status_within(req, None)
    }

    /// [`WorkingCopy::status`] of the paths `scope` covers only (all with `None`): what
    /// an update asks of the paths its diff touches, in time that does not grow with the
    /// local changes elsewhere. Not with `req.clean`.
    pub(crate) fn status_within(
        &self,
        req: StatusRequest,
        scope: Option<&Scope>,
    ) -> Result<Vec<StatusEntry>> {
        debug_assert!(scope.is_none() || !req.clean);
        // Capture the state of every candidate under the lock, compare outside it.
        let (captured, nested, tracking, base, repo, from_p2) = {
            let mut inner = self.write();
            let candidates = self.candidates(&mut inner, scope)?;
            let mut captured = Vec::with_capacity(candidates.len());
            let mut walk = Walk::default();
            let mut nested = BTreeSet::new();
            for (p, known) in candidates {
                if req.unknown {
                    if let Some(root) = nested_root_candidate(&p) {
                        if !nested.contains(root) && is_nested_repo(&mut inner, root) {
                            nested.insert(root.to_vec());
                        }
                    }
                }
                let now = self.now_of(&mut inner, &mut walk, &p)?;
                captured.push((p, known, now));
            }
            (
                captured,
                nested,
                inner.tracking.clone(),
                inner.base.clone(),
                inner.repo.clone(),
                inner.from_p2.clone(),
            )
        };
        // A broken .hgignore aborts status, as in hg.
        let ignore = if req.ignored || req.unknown {
            Some(
                self.ignore_matcher(req.ignore_files.as_deref())
                    .map_err(|e| {
                        let root = self
                            .root_path
                            .get()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default();
                        WcError::Ignore(e.rooted(&root).to_string())
                    })?,
            )
        } else {
            None
        };
        let mut groups: BTreeMap<char, Vec<Vec<u8>>> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for (path, known, now) in captured {
            let base = match known {
                Some(entry) => entry,
                None => base.find(&path)?.map(|e| (e.node, e.flag)),
            };
            let track = tracking.get(&path).copied();
            let is_file = !matches!(now, Now::Absent | Now::Dir);
            let letter = match (base, track) {
                (Some(_), Some(Track::Removed)) => Some('R'),
                (Some(_), Some(Track::Dropped)) => match &ignore {
                    _ if !is_file => None,
                    Some(ig) if ig.is_ignored(&path) => Some('I'),
                    _ => Some('?'),
                },
                (None, Some(Track::Claimed)) => Some(if is_file { 'M' } else { '!' }),
                // hg's dirstate says added, whatever the parent has.
                (Some(_), Some(Track::Readded)) => Some(if is_file { 'A' } else { '!' }),
                // hg's dirstate: a file of the merge is modified, whatever its content.
                (Some(_), _) | (None, Some(Track::Added)) if from_p2.contains(&path) => {
                    Some(if is_file { 'M' } else { '!' })
                }
                (Some((node, flag)), _) => {
                    if !is_file {
                        Some('!')
                    } else if self.differs(&repo, node, flag, &path, &now)? {
                        Some('M')
                    } else {
                        Some('C')
                    }
                }
                (None, Some(Track::Added)) => Some(if is_file { 'A' } else { '!' }),
                (None, _) if is_file => match &ignore {
                    Some(ig) if ig.is_ignored(&path) => Some('I'),
                    _ => Some('?'),
                },
                (None, _) => None,
            };
            seen.insert(path.clone());
            if let Some(l) = letter {
                groups.entry(l).or_default().push(path);
            }
        }
        // A tracked file in a nested repository is missing when unknown files are listed:
        // hg's walk does not enter the repository, and the files of the dirstate it did
        // not see are then missing to its path auditor (dirstate.walk's step 3). Nested
        // repositories are found among the changes: a `.hg` made below the root is one.
        let covered = |p: &[u8]| scope.is_none_or(|s| s.covers(p));
        let mut missing: BTreeSet<Vec<u8>> = BTreeSet::new();
        for root in &nested {
            let mut prefix = root.clone();
            prefix.push(b'/');
            for e in base.iter_prefix(&prefix) {
                let e = e?;
                if covered(e.path)
                    && !matches!(tracking.get(e.path), Some(Track::Removed | Track::Dropped))
                {
                    missing.insert(e.path.to_vec());
                }
            }
            missing.extend(
                tracking
                    .range(prefix.clone()..)
                    .take_while(|(p, _)| p.starts_with(&prefix))
                    .filter(|(p, t)| **t == Track::Added && covered(p))
                    .map(|(p, _)| p.clone()),
            );
        }
        if !missing.is_empty() {
            for l in ['M', 'A', 'C', '!'] {
                if let Some(paths) = groups.get_mut(&l) {
                    paths.retain(|p| !missing.contains(p));
                }
            }
            seen.extend(missing.iter().cloned());
            groups.entry('!').or_default().extend(missing);
        }
        // Nothing in a nested repository (a directory below the root with a `.hg`
        // directory) or in a `.hg` directory is unknown or ignored: hg's walk does not
        // list them.
        if groups.contains_key(&'?') || groups.contains_key(&'I') {
            let mut inner = self.write();
            let mut nested: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
            for l in ['?', 'I'] {
                if let Some(paths) = groups.get_mut(&l) {
                    paths.retain(|p| !in_nested_repo(&mut inner, p, &mut nested));
                }
            }
        }
        if req.clean {
            let clean = groups.entry('C').or_default();
            for e in base.iter() {
                let e = e?;
                if !seen.contains(e.path)
                    && !matches!(tracking.get(e.path), Some(Track::Removed | Track::Dropped))
                {
                    clean.push(e.path.to_vec());
                }
            }
        }
        let mut out = Vec::new();
        for letter in ORDER {
            let wanted = match letter {
                '?' => req.unknown,
                'I' => req.ignored,
                'C' => req.clean,
                _ => true,
            };
            if !wanted {
                continue;
            }
            if let Some(mut paths) = groups.remove(&letter) {
                paths.sort();
                out.extend(paths.into_iter().map(|path| StatusEntry { letter, path }));
            }
        }
        Ok(out)
    }

    /// The directories a purge may find empty once the unknown and ignored files are gone
    /// (what hg's purge asks its walk for): every directory at or below a changed path and
    /// their ancestors, sorted. A directory nothing changed below holds its base files,
    /// so it is never empty and never listed. Directories in `.hg` or below a nested
    /// repository are not listed (hg's walk does not enter them).
    pub fn changed_dirs(&self) -> Result<Vec<Vec<u8>>> {
        let mut inner = self.write();
        let dirty: Vec<Vec<u8>> = inner.dirty.iter().cloned().collect();
        let mut out: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut walked: BTreeSet<Vec<u8>> = BTreeSet::new();
        for p in &dirty {
            // The ancestors first (the root excluded).
            for (i, _) in p.iter().enumerate().filter(|(_, &b)| b == b'/') {
                let a = &p[..i];
                if !out.contains(a) {
                    if let Some(ino) = inner.resolve(a)? {
                        if inner.is_dir(ino) {
                            out.insert(a.to_vec());
                        }
                    }
                }
            }
            let Some(ino) = inner.resolve(p)? else {
                continue;
            };
            // A directory below one walked already was walked with it.
            if ino == ROOT_INO || !inner.is_dir(ino) || walked.contains(p.as_slice()) {
                continue;
            }
            let mut stack = vec![(ino, p.clone())];
            while let Some((dir, path)) = stack.pop() {
                let (_, children) = self.readdir_locked(&mut inner, dir)?;
                for (name, child, kind) in children {
                    if kind == EntryType::Dir && *name != *b".hg" {
                        let mut q = path.clone();
                        q.push(b'/');
                        q.extend_from_slice(&name);
                        stack.push((child, q));
                    }
                }
                walked.insert(path.clone());
                out.insert(path);
            }
        }
        let mut nested = BTreeMap::new();
        Ok(out
            .into_iter()
            .filter(|d| !in_nested_repo(&mut inner, d, &mut nested))
            .collect())
    }

    /// True when the working file differs from base file (`node`, `flag`).
    fn differs(
        &self,
        repo: &Repo,
        node: Node,
        flag: FileFlag,
        path: &[u8],
        now: &Now,
    ) -> Result<bool> {
        let base_text = || -> Result<revfs_store::filelog::FileText> {
            let fl = repo.filelog(path)?;
            Ok(fl.read(fl.rev_of(&node)?)?)
        };
        Ok(match now {
            Now::Absent | Now::Dir => true,
            Now::StoreFile {
                path: p,
                node: n,
                exec,
            } => {
                if flag == FileFlag::Symlink || *exec != (flag == FileFlag::Executable) {
                    true
                } else if *n == node {
                    false
                } else {
                    // Another revision (a copy): sizes first, then contents in blocks.
                    let ours = self.store_text(repo, p, n)?;
                    let theirs = self.store_text(repo, path, &node)?;
                    ours.len() != theirs.len()
                        || !crate::wc::content::same_content(
                            &mut ours.reader(),
                            &mut theirs.reader(),
                        )?
                }
            }
            Now::OverlayFile { id, exec } => {
                if flag == FileFlag::Symlink || *exec != (flag == FileFlag::Executable) {
                    true
                } else if let Some(same) = self.overlay.known(*id, &node) {
                    // Compared by an earlier status, and not written since.
                    !same
                } else {
                    // A change after this is not recorded; one before it is what the
                    // comparison reads.
                    let ticket = self.overlay.begin_check(*id);
                    let same = self.overlay.size(*id)? == repo.file_size(path, &node)? && {
                        let theirs = self.store_text(repo, path, &node)?;
                        let ours = self.overlay.file(*id)?;
                        let same = crate::wc::content::same_content(
                            &mut crate::wc::content::FileReader::new(&ours),
                            &mut theirs.reader(),
                        )?;
                        same
                    };
                    self.overlay.end_check(*id, ticket, node, same);
                    !same
                }
            }
            Now::StoreLink { path: p, node: n } => {
                if flag != FileFlag::Symlink {
                    true
                } else if *n == node {
                    false
                } else {
                    let fl = repo.filelog(p)?;
                    *fl.read(fl.rev_of(n)?)? != *base_text()?
                }
            }
            Now::LocalLink(target) => flag != FileFlag::Symlink || **target != *base_text()?,
        })
    }

    /// The `.hgignore` matcher for the working copy as it is now, compiled again only when
    /// one of the files it was compiled from (`.hgignore` and what it includes) changed.
    fn ignore_matcher(
        &self,
        names: Option<&[Vec<u8>]>,
    ) -> std::result::Result<Arc<Ignore>, revfs_hg::ignore::IgnoreError> {
        let extra = self.ui_ignore_files(names);
        let mut cache = self.ignore_cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ig) = &*cache {
            if ig.extra_inputs() == extra.as_slice()
                && ig
                    .inputs()
                    .iter()
                    .all(|(path, content)| self.read_path(path) == *content)
            {
                return Ok(ig.clone());
            }
        }
        let ig = Arc::new(Ignore::load_with(self, &extra)?);
        for w in ig.warnings() {
            tracing::warn!("{w}");
        }
        *cache = Some(ig.clone());
        Ok(ig)
    }

    /// The warnings hg prints while it reads the ignore files the last status compiled,
    /// with the files named by their full path.
    pub fn ignore_warnings(&self) -> Vec<String> {
        let cache = self.ignore_cache.lock().unwrap_or_else(|p| p.into_inner());
        let root = self
            .root_path
            .get()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        cache
            .as_ref()
            .map(|ig| ig.warnings_rooted(&root))
            .unwrap_or_default()
    }

    /// The ignore files `ui.ignore` and `ui.ignore.*` name (`names`, as the program that
    /// asks expanded them; `None`: the daemon's own configuration, the repository's
    /// `.hg/hgrc` included), with their content: hg's names for them (joined to the
    /// working copy's root when relative), read through the working copy when they are in
    /// it (from the repository when in its `.hg`). A configuration that cannot be read
    /// names none (status then says why).
    fn ui_ignore_files(&self, names: Option<&[Vec<u8>]>) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        use std::os::unix::ffi::OsStrExt;
        let repo = self.repo();
        let own;
        let names = match names {
            Some(n) => n,
            None => {
                let env = revfs_hg::config::Env::from_process();
                let Ok(cfg) = revfs_hg::config::Config::load_env(&env, Some(repo.root())) else {
                    return Vec::new();
                };
                own = cfg.ignore_paths(&env);
                &own[..]
            }
        };
        let root = self.root_path.get().cloned().unwrap_or_default();
        names
            .iter()
            .map(|p| {
                let abs = root.join(std::ffi::OsStr::from_bytes(p));
                let inside = abs.strip_prefix(&root).ok().filter(|rel| {
                    !root.as_os_str().is_empty()
                        && rel
                            .components()
                            .all(|c| matches!(c, std::path::Component::Normal(_)))
                });
                let content = match inside {
                    // The working copy has no `.hg` of its own: the repository's stands
                    // for it.
                    Some(rel) if rel.starts_with(".hg") => {
                        std::fs::read(repo.root().join(rel)).ok()
                    }
                    Some(rel) => self.read_path(rel.as_os_str().as_bytes()),
                    None => std::fs::read(&abs).ok(),
                };
                (abs.as_os_str().as_bytes().to_vec(), content)
            })
            .collect()
    }

    /// The content of a working-copy file by path, if it is a regular file.
    pub fn read_path(&self, path: &[u8]) -> Option<Vec<u8>> {
        let ino = self.ino_of(path).ok()??;
        let size = self.getattr(ino).ok()?.size;
        self.read_file(ino, 0, size as usize).ok().map(Vec::from)
    }
}

impl FileSource for WorkingCopy {
    fn read(&self, path: &[u8]) -> Option<Vec<u8>> {
        self.read_path(path)
    }
}

/// The directory below the root that would be a nested repository holding `path`: the
/// part before its first `.hg` component, when that is not the first component.
fn nested_root_candidate(path: &[u8]) -> Option<&[u8]> {
    let mut start = 0;
    for part in path.split(|&b| b == b'/') {
        if part == b".hg" {
            return (start > 0).then(|| &path[..start - 1]);
        }
        start += part.len() + 1;
    }
    None
}

/// Whether the directory `dir` (below the root) has a `.hg` directory.
fn is_nested_repo(inner: &mut Inner, dir: &[u8]) -> bool {
    let dot_hg = [dir, b"/.hg"].concat();
    matches!(inner.resolve(&dot_hg), Ok(Some(ino)) if inner.is_dir(ino))
}

/// Whether `path` has a `.hg` component, or lies in a directory (below the root) that has
/// a `.hg` directory: a nested repository, whose files hg's walk does not list. `cache`
/// remembers the answer per directory.
fn in_nested_repo(inner: &mut Inner, path: &[u8], cache: &mut BTreeMap<Vec<u8>, bool>) -> bool {
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    if parts.iter().any(|p| *p == b".hg") {
        return true;
    }
    let mut end = 0;
    for part in &parts[..parts.len().saturating_sub(1)] {
        end += part.len();
        let dir = &path[..end];
        let nested = match cache.get(dir) {
            Some(&n) => n,
            None => {
                let n = is_nested_repo(inner, dir);
                cache.insert(dir.to_vec(), n);
                n
            }
        };
        if nested {
            return true;
        }
        end += 1;
    }
    false
}
