//! `revfs add`, `forget`, `remove` and `addremove` in a mount: Mercurial 6.3.2's
//! `cmdutil.add`, `cmdutil.forget`, `cmdutil.remove` and `scmutil.addremove`, over hg's walk
//! of the named files and patterns ([`super::walk`]) and the dirstate the daemon keeps
//! ([`super::dirstate`]), with hg's messages, warnings and exit codes.
//!
//! Not supported (refused by the argument parser): `-I`/`-X`, `-S`, `-i`; `addremove -s`
//! with a similarity other than 100 or 0 aborts (hg's inexact rename detection).

use super::dirstate::{read_working, warn, Dirstate, State};
use super::error::{abort, Result};
use super::status::fetch;
use super::walk::{walk, Walk};
use super::Workspace;
use crate::service::control::Request;
use crate::wc::journal::Track;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_hg::paths::is_under;
use std::collections::{BTreeMap, BTreeSet};

/// `hg remove`'s flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoveOptions {
    /// `-A/--after`: record the removal of missing files only.
    pub after: bool,
    /// `-f/--force`: forget added files, delete modified ones.
    pub force: bool,
    /// `-n/--dry-run`.
    pub dry_run: bool,
}

/// The files a status request adds to the changes.
#[derive(Clone, Copy)]
enum With {
    Clean,
    Unknown,
}

/// What each command starts from: the dirstate over the daemon's status (with the clean or
/// the unknown files), the matcher of the named files and patterns, and hg's walk with it.
fn walked<'a>(
    ws: &'a Workspace,
    files: &[String],
    with: With,
) -> Result<(Dirstate<'a>, Matcher, Walk)> {
    let clean = matches!(with, With::Clean);
    let fetched = fetch(ws, clean, false, !clean)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, files)?;
    let ds = Dirstate::new(ws, ctx, &fetched, false, false)?;
    let walked = walk(ws, &ds.display, &matcher, fetched);
    Ok((ds, matcher, walked))
}

fn exists_following_links(ds: &Dirstate, f: &[u8]) -> bool {
    std::fs::metadata(ds.disk(f)).is_ok()
}

fn lexists(ds: &Dirstate, f: &[u8]) -> bool {
    std::fs::symlink_metadata(ds.disk(f)).is_ok()
}

/// `hg add FILE...`: start tracking files (every unknown one without arguments). The exit
/// code: 1 when a named file could not be added.
pub fn add(ws: &Workspace, files: &[String], dry_run: bool) -> Result<u8> {
    let _wlock = ws.wlock()?;
    let (mut ds, matcher, walked) = walked(ws, files, With::Unknown)?;
    // The walk's results: what it saw, and the named files on disk (ignored ones too).
    let mut results: BTreeSet<Vec<u8>> = walked.entries().map(|(_, p)| p.clone()).collect();
    for f in matcher.files() {
        if walked.named_file(f) && matcher.matches(f) {
            results.insert(f.clone());
        }
    }
    let mut names = Vec::new();
    {
        let mut cca = ds.case_auditor()?;
        for f in &results {
            let exact = matcher.exact(f);
            if exact || (!ds.state(f).tracked() && lexists(&ds, f)) {
                if let Some(cca) = cca.as_mut() {
                    cca.check(f)?;
                }
                names.push(f.clone());
                if ds.verbose || !exact {
                    ds.status(&format!("adding {}\n", ds.rel(f)));
                }
            }
        }
    }
    let mut bad: Vec<Vec<u8>> = walked.bad.into_iter().map(|(f, _)| f).collect();
    if !dry_run {
        let rejected = ds.add(&names)?;
        bad.extend(rejected.into_iter().filter(|f| matcher.files().contains(f)));
        ds.flush()?;
    }
    Ok(if bad.is_empty() { 0 } else { 1 })
}

/// Aborts as hg does when a command that needs files was given none.
pub fn need_files(files: &[String]) -> Result<()> {
    if files.is_empty() {
        return Err(abort("no files specified"));
    }
    Ok(())
}

/// `hg forget FILE...`: stop tracking files without deleting them. Call
/// [`need_files`] before opening the workspace.
pub fn forget(ws: &Workspace, files: &[String], dry_run: bool) -> Result<u8> {
    need_files(files)?;
    let _wlock = ws.wlock()?;
    let (mut ds, matcher, walked) = walked(ws, files, With::Clean)?;
    let mut forget: Vec<Vec<u8>> = walked
        .entries()
        .filter(|(l, _)| matches!(l, 'M' | 'A' | '!' | 'C'))
        .map(|(_, p)| p.clone())
        .collect();
    forget.sort();
    let mut bad: Vec<Vec<u8>> = walked.bad.iter().map(|(f, _)| f.clone()).collect();
    for f in matcher.files() {
        let isdir = f.is_empty() || std::fs::metadata(ds.disk(f)).is_ok_and(|m| m.is_dir());
        if ds.state(f) == State::Unknown && !isdir {
            if exists_following_links(&ds, f) {
                warn(&format!(
                    "not removing {}: file is already untracked\n",
                    ds.rel(f)
                ));
            }
            bad.push(f.clone());
        }
    }
    for f in &forget {
        if ds.verbose || !matcher.exact(f) {
            ds.status(&format!("removing {}\n", ds.rel(f)));
        }
    }
    if !dry_run {
        let rejected = ds.forget(&forget);
        bad.extend(rejected.into_iter().filter(|f| matcher.files().contains(f)));
        ds.flush()?;
    }
    Ok(if bad.is_empty() { 0 } else { 1 })
}

/// The abort of `hg remove` without files, before the workspace is opened.
pub fn check_remove(files: &[String], args: RemoveOptions) -> Result<()> {
    if args.after {
        return Ok(());
    }
    need_files(files)
}

/// `hg remove FILE...`: delete tracked files and record their removal.
pub fn remove(ws: &Workspace, files: &[String], args: RemoveOptions) -> Result<u8> {
    check_remove(files, args)?;
    let _wlock = ws.wlock()?;
    let (mut ds, matcher, walked) = walked(ws, files, With::Clean)?;
    let of = |letter: char| -> Vec<Vec<u8>> {
        walked
            .entries()
            .filter(|(l, _)| *l == letter)
            .map(|(_, p)| p.clone())
            .collect()
    };
    let (modified, added, deleted, clean) = (of('M'), of('A'), of('!'), of('C'));
    let mut ret = 0;
    let mut warnings = Vec::new();
    // Named files that are neither in the dirstate nor a directory of tracked files.
    let in_dirstate: BTreeSet<&[u8]> = walked.all.iter().map(|(_, p)| p.as_slice()).collect();
    // hg's `workingctx.hasdir`: a directory of the working manifest (the parent's files
    // and the added ones, removed and missing ones not); or one of the missing files the
    // walk found.
    let hasdir = |f: &[u8]| {
        walked
            .all
            .iter()
            .any(|(l, p)| matches!(l, 'C' | 'M' | 'A') && is_under(p, f))
            || deleted.iter().any(|p| is_under(p, f))
    };
    for f in matcher.files() {
        if in_dirstate.contains(f.as_slice()) || f == b"." || hasdir(f) {
            continue;
        }
        if let Ok(meta) = std::fs::metadata(ds.disk(f)) {
            let what = if meta.is_dir() {
                "no tracked files"
            } else {
                "file is untracked"
            };
            warnings.push(format!("not removing {}: {what}\n", ds.rel(f)));
        }
        ret = 1;
    }
    let mut list: Vec<Vec<u8>> = if args.force {
        [&modified[..], &deleted, &clean, &added].concat()
    } else if args.after {
        for f in modified.iter().chain(&added).chain(&clean) {
            if ds.verbose || matcher.files().contains(f) {
                warnings.push(format!("not removing {}: file still exists\n", ds.rel(f)));
            }
            ret = 1;
        }
        deleted.clone()
    } else {
        for f in &modified {
            warnings.push(format!(
                "not removing {}: file is modified (use -f to force removal)\n",
                ds.rel(f)
            ));
            ret = 1;
        }
        for f in &added {
            warnings.push(format!(
                "not removing {}: file has been marked for add (use 'hg forget' to undo add)\n",
                ds.rel(f)
            ));
            ret = 1;
        }
        [&deleted[..], &clean].concat()
    };
    list.sort();
    for f in &list {
        if ds.verbose || !matcher.exact(f) {
            ds.status(&format!("removing {}\n", ds.rel(f)));
        }
    }
    if !args.dry_run {
        if !args.after {
            let added: BTreeSet<&Vec<u8>> = added.iter().collect();
            for f in list.iter().filter(|f| !added.contains(f)) {
                // hg never deletes an added file on remove; it removes the directories a
                // deletion left empty (`experimental.removeemptydirs`).
                match std::fs::remove_file(ds.disk(f)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(super::ClientError::Os(e)),
                }
                ds.remove_empty_parents(f);
            }
        }
        ds.forget(&list);
        ds.flush()?;
    }
    for w in warnings {
        warn(&w);
    }
    Ok(ret)
}

/// `hg addremove -s`'s similarity, checked before the workspace is opened: true for exact
/// renames (100), false for none (0); anything between aborts (hg's inexact rename
/// detection is not supported).
pub fn exact_renames(similarity: Option<&str>) -> Result<bool> {
    let similarity = match similarity {
        None => 100.0,
        Some(s) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| abort("similarity must be a number"))?,
    };
    if !(0.0..=100.0).contains(&similarity) {
        return Err(abort("similarity must be between 0 and 100"));
    }
    if similarity != 100.0 && similarity != 0.0 {
        return Err(abort(
            "addremove -s below 100 (similar renames) is not supported by revfs (use hg instead)",
        ));
    }
    Ok(similarity == 100.0)
}

/// `hg addremove FILE...`: add every unknown file, remove every missing one, and record
/// renames (exact ones only, see [`exact_renames`]).
pub fn addremove(ws: &Workspace, files: &[String], exact: bool, dry_run: bool) -> Result<u8> {
    let _wlock = ws.wlock()?;
    // Paths relative to the current directory only when files were named.
    let relative = !files.is_empty();
    Ok(addremove_files(ws, files, exact, relative, dry_run)?.0)
}

/// What undoes an addremove (hg's dirstate guard, when the command it served stops):
/// the tracking each changed file had before.
pub struct Undo(Vec<(Vec<u8>, Track)>);

impl Undo {
    /// Puts the files back as they were (copies recorded go with the added files).
    pub fn apply(self, ws: &Workspace) -> Result<()> {
        for track in [Track::Default, Track::Added, Track::Removed] {
            let paths: Vec<Vec<u8>> = self
                .0
                .iter()
                .filter(|(_, t)| *t == track)
                .map(|(p, _)| p.clone())
                .collect();
            if !paths.is_empty() {
                ws.request(&Request::Track {
                    paths,
                    track,
                    txn: false,
                })?;
            }
        }
        Ok(())
    }
}

/// `scmutil.addremove`: with `exact_renames`, a removed file whose content an added file
/// has is recorded as renamed to it; `relative` paths in messages are relative to the
/// current directory (hg's `addremove`, and `commit -A` with patterns), else to the root.
/// Returns 1 when a named file could not be used.
pub fn addremove_files(
    ws: &Workspace,
    files: &[String],
    exact_renames: bool,
    relative: bool,
    dry_run: bool,
) -> Result<(u8, Undo)> {
    let (mut ds, matcher, walked) = walked(ws, files, With::Unknown)?;
    let shown = |ds: &Dirstate, p: &[u8]| -> String {
        if relative {
            ds.rel(p)
        } else {
            String::from_utf8_lossy(p).into_owned()
        }
    };
    // `_interestingfiles` over the walk's results.
    let mut results: BTreeMap<Vec<u8>, char> =
        walked.entries().map(|(l, p)| (p.clone(), *l)).collect();
    for f in matcher.files() {
        if walked.named_file(f) && matcher.matches(f) {
            results.entry(f.clone()).or_insert('?');
        }
    }
    let (mut added, mut unknown, mut deleted, mut removed, mut forgotten) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (p, l) in results {
        match (ds.state(&p), l) {
            (State::Unknown, _) => unknown.push(p),
            (State::Removed, _) if lexists(&ds, &p) => forgotten.push(p),
            (State::Removed, _) => removed.push(p),
            (_, '!') => deleted.push(p),
            (State::Added, _) => added.push(p),
            _ => {}
        }
    }
    let mut toprint: Vec<(&Vec<u8>, &str)> = unknown
        .iter()
        .chain(&forgotten)
        .map(|p| (p, "adding"))
        .chain(deleted.iter().map(|p| (p, "removing")))
        .collect();
    toprint.sort();
    for (p, what) in toprint {
        if ds.verbose || !matcher.exact(p) {
            ds.status(&format!("{what} {}\n", shown(&ds, p)));
        }
    }
    let renames = if exact_renames {
        find_exact_renames(
            &ds,
            &[&added[..], &unknown].concat(),
            &[&removed[..], &deleted].concat(),
        )?
    } else {
        Vec::new()
    };
    for (old, new) in &renames {
        if ds.verbose || !matcher.exact(old) || !matcher.exact(new) {
            ds.status(&format!(
                "recording removal of {} as rename to {} (100% similar)\n",
                shown(&ds, old),
                shown(&ds, new)
            ));
        }
    }
    let mut undo = Vec::new();
    if !dry_run {
        for p in &deleted {
            // A missing file of the parent becomes removed; a missing added one unknown.
            let was = if ds.state(p) == State::Added {
                Track::Added
            } else {
                Track::Default
            };
            undo.push((p.clone(), was));
        }
        undo.extend(unknown.iter().map(|p| (p.clone(), Track::Default)));
        undo.extend(forgotten.iter().map(|p| (p.clone(), Track::Removed)));
        ds.forget(&deleted);
        ds.add(&[&unknown[..], &forgotten].concat())?;
        for (old, new) in &renames {
            wctx_copy(&mut ds, old, new);
        }
        ds.flush()?;
    }
    Ok((if walked.bad.is_empty() { 0 } else { 1 }, Undo(undo)))
}

/// `workingctx.copy(source, dest)` for a rename addremove found (the destination exists
/// and is tracked by then).
fn wctx_copy(ds: &mut Dirstate, source: &[u8], dest: &[u8]) {
    if !lexists(ds, dest) {
        warn(&format!("{} does not exist!\n", ds.rel(dest)));
        return;
    }
    if ds.state(dest) == State::Unknown {
        ds.set_tracked(dest);
    }
    ds.mark_copy(Some(source), dest);
}

/// `similar._findexactmatches` as `findrenames` calls it: (old, new) for each added file
/// (in path order, empty ones left out) whose bytes a removed file of the parent had (the
/// first in path order).
fn find_exact_renames(
    ds: &Dirstate,
    added: &[Vec<u8>],
    removed: &[Vec<u8>],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut removed: Vec<&Vec<u8>> = removed.iter().collect();
    removed.sort();
    // Content hash -> the removed files with it, and their bytes.
    type Removed = Vec<(Vec<u8>, Vec<u8>)>;
    let mut by_hash: BTreeMap<Vec<u8>, Removed> = BTreeMap::new();
    for p in removed {
        let Some(entry) = ds.base.find(p)? else {
            continue;
        };
        let fl = ds.ws.repo()?.filelog(p)?;
        let text = fl.read(fl.rev_of(&entry.node)?)?.to_vec();
        if !text.is_empty() {
            by_hash
                .entry(sha1_of(&text))
                .or_default()
                .push((p.clone(), text));
        }
    }
    let mut renames = Vec::new();
    if by_hash.is_empty() {
        return Ok(renames);
    }
    let mut added: Vec<&Vec<u8>> = added.iter().collect();
    added.sort();
    for p in added {
        let Ok(data) = read_working(&ds.ws.root, p) else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        if let Some(cands) = by_hash.get(&sha1_of(&data)) {
            if let Some((old, _)) = cands.iter().find(|(_, t)| *t == data) {
                renames.push((old.clone(), p.clone()));
            }
        }
    }
    Ok(renames)
}

fn sha1_of(data: &[u8]) -> Vec<u8> {
    use sha1::{Digest, Sha1};
    Sha1::digest(data).to_vec()
}
