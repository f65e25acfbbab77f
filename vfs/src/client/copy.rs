//! `revfs copy` (`cp`) and `revfs rename` (`move`, `mv`) in a mount: Mercurial 6.3's
//! `cmdutil.copy`, with its messages, warnings and exit codes.
//!
//! `SOURCE... DEST`: each source is a file or a directory (its tracked files, recursively)
//! or a `glob:`/`re:` pattern; with several sources, or a pattern, DEST must be an existing
//! directory. Files are copied through the mount's own paths (a symlink as a symlink, a
//! file with its mode; a rename moves the file with `rename(2)`, which keeps its mode and
//! times as hg's copy-then-delete does, and then removes the directories it left empty).
//! The daemon then records, as hg's dirstate would: the destination tracked with its copy
//! source (the original source when the source is itself a copy; none, with hg's warning,
//! when the source is only added), the source of a rename removed (or forgotten when it
//! was only added). `-A/--after` records a copy or rename already made, `-f/--force`
//! overwrites a file hg would not, `-n/--dry-run` only prints, `--forget` unmarks copies,
//! `-v` prints `copying a to b` / `moving a to b` for explicitly named files too (hg prints
//! it for files found in directories and patterns always).
//!
//! Exit status 1 when a file could not be copied, 255 for hg's aborts (`no source or
//! destination specified`, `no files to copy`, `with multiple sources, destination must be
//! an existing directory`, ...). Not supported: `--at-rev`, `-I`/`-X`.

use super::dirstate::{warn, Dirstate, State};
use super::error::{abort, Result};
use super::walk::{bad_files, lstat_named};
use super::{lossy, Workspace};
use crate::service::control::Request;
use revfs_hg::config::strerror;
use revfs_hg::matcher::is_pattern;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_hg::paths::{basename, is_under, join, split};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `hg copy`'s and `hg rename`'s flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyOptions {
    /// `--forget`: unmark destination files as copied.
    pub forget: bool,
    /// `-A/--after`: record a copy that has already occurred.
    pub after: bool,
    /// `-f/--force`: copy over an existing managed file.
    pub force: bool,
    /// `-n/--dry-run`.
    pub dry_run: bool,
    /// `-v/--verbose`.
    pub verbose: bool,
    /// `-q/--quiet`.
    pub quiet: bool,
}

/// One run of copy or rename: the working copy as the daemon reports it, with the
/// changes made so far.
struct Copier<'a> {
    ds: Dirstate<'a>,
    /// The process's current directory, which hg's file system checks of the arguments
    /// are relative to.
    cwd: PathBuf,
    rename: bool,
}

/// The copy code asks its dirstate most questions directly (`c.state(p)`, `c.base`).
impl<'a> std::ops::Deref for Copier<'a> {
    type Target = Dirstate<'a>;
    fn deref(&self) -> &Dirstate<'a> {
        &self.ds
    }
}

impl std::ops::DerefMut for Copier<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.ds
    }
}

fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

/// What went wrong copying one file's bytes.
enum CopyFailure {
    /// The source is gone (hg: "deleted in working directory", not an error).
    SourceMissing,
    Other(std::io::Error),
}

impl<'a> Copier<'a> {
    fn new(ws: &'a Workspace, rename: bool, args: &CopyOptions) -> Result<Copier<'a>> {
        let display = PathContext::new(&ws.root)?;
        let status = super::status::fetch(ws, false, false, true)?;
        let ds = Dirstate::new(ws, display, &status, args.verbose, args.quiet)?;
        Ok(Copier {
            ds,
            cwd: std::env::current_dir()?,
            rename,
        })
    }

    /// A user argument as the file system path hg would use (relative to the current
    /// directory; to the root when running from outside the mount).
    fn os_path(&self, arg: &[u8]) -> PathBuf {
        if arg.is_empty() {
            return self.cwd.clone();
        }
        self.cwd.join(os(arg))
    }

    fn lexists(path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }

    /// `pathutil.canonpath(root, cwd, name)` with its path auditor.
    fn canonpath(&self, name: &[u8]) -> Result<Vec<u8>> {
        Ok(self.display.canonpath(name)?)
    }

    /// `ctx.walk(match)` for one pattern: the dirstate's files it matches, plus a named
    /// file on disk that the dirstate does not know; with whether each was named exactly.
    /// A name that matches nothing anywhere gets hg's "No such file or directory".
    fn walk(&self, pat: &str) -> Result<Sources> {
        let m = Matcher::new(&self.display, &[pat.to_owned()])?;
        let mut found: BTreeSet<Vec<u8>> = BTreeSet::new();
        let known = |p: &[u8]| self.state(p) != State::Unknown;
        let explicit = m.args().first().cloned();
        let candidates_in = |dir: &[u8], out: &mut BTreeSet<Vec<u8>>| -> Result<()> {
            if !dir.is_empty() && self.in_base(dir) {
                out.insert(dir.to_vec());
            }
            let mut prefix = dir.to_vec();
            if !prefix.is_empty() {
                prefix.push(b'/');
            }
            let iter = if prefix.is_empty() {
                self.base.iter()
            } else {
                self.base.iter_prefix(&prefix)
            };
            for e in iter {
                out.insert(e?.path.to_vec());
            }
            for p in self.letters.keys().chain(self.states.keys()) {
                if p == dir || is_under(p, dir) {
                    out.insert(p.clone());
                }
            }
            Ok(())
        };
        // One `lstat` of each name the pattern has.
        let named = lstat_named(self.ws, &m);
        match &explicit {
            Some(p) => {
                let mut cands = BTreeSet::new();
                candidates_in(p, &mut cands)?;
                found.extend(cands.into_iter().filter(|c| known(c)));
                let file = |t: &std::io::Result<std::fs::FileType>| {
                    t.as_ref().is_ok_and(|t| t.is_file() || t.is_symlink())
                };
                if named.get(p).is_some_and(file) {
                    found.insert(p.clone());
                }
            }
            None => {
                let mut cands = BTreeSet::new();
                candidates_in(b"", &mut cands)?;
                found.extend(cands.into_iter().filter(|c| known(c) && m.matches(c)));
            }
        }
        // hg's `match.bad` for what the pattern names (`dirstate._walkexplicit`).
        let mut failed = None;
        let in_dirstate = |f: &[u8]| {
            let mut cands = BTreeSet::new();
            match candidates_in(f, &mut cands) {
                Ok(()) => cands.iter().any(|c| known(c)),
                Err(e) => {
                    failed.get_or_insert(e);
                    true
                }
            }
        };
        bad_files(&self.display, &m, &named, in_dirstate, true);
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(found
            .into_iter()
            .map(|f| {
                let exact = explicit.as_ref() == Some(&f);
                (f, exact)
            })
            .collect())
    }

    /// `walkpat`: the sources a pattern gives, with hg's warnings for the others.
    fn walkpat(&self, pat: &str, after: bool) -> Result<Sources> {
        let mut srcs = Vec::new();
        for (abs, exact) in self.walk(pat)? {
            match self.state(&abs) {
                State::Added | State::Normal => {}
                State::Removed => {
                    if !after {
                        if exact {
                            warn(&format!(
                                "{}: not copying - file has been marked for remove\n",
                                self.rel(&abs)
                            ));
                        }
                        continue;
                    }
                }
                State::Unknown => {
                    if exact {
                        warn(&format!(
                            "{}: not copying - file is not managed\n",
                            self.rel(&abs)
                        ));
                    }
                    continue;
                }
            }
            srcs.push((abs, exact));
        }
        Ok(srcs)
    }
}

/// Sources found for one pattern: (repository path, named exactly).
type Sources = Vec<(Vec<u8>, bool)>;

/// How a source maps to its target (hg's `targetpathfn` / `targetpathafterfn`): the
/// destination (as typed) joined with a suffix of the source's repository path.
enum TargetFn {
    /// `dest/<source[strip..]>`.
    Strip(usize),
    /// `dest/<basename of source>`.
    Basename,
    /// `dest` itself.
    Dest,
}

impl TargetFn {
    fn apply(&self, dest: &[u8], src: &[u8]) -> Vec<u8> {
        match self {
            TargetFn::Strip(n) => join(dest, src.get(*n..).unwrap_or_default()),
            TargetFn::Basename => join(dest, basename(src)),
            TargetFn::Dest => dest.to_vec(),
        }
    }
}

/// `hg copy SOURCE... DEST` (`rename`: `hg rename`): the exit code, 1 when a file could
/// not be copied.
pub fn copy(ws: &Workspace, files: &[String], args: &CopyOptions, rename: bool) -> Result<u8> {
    let _wlock = ws.wlock()?;
    if ws.mount.is_none() {
        // Outside a mount: the same error as the other working-copy commands.
        ws.request(&Request::Ping)?;
    }
    let mut c = Copier::new(ws, rename, args)?;
    if args.forget && args.dry_run {
        return Err(abort("cannot specify both --forget and --dry-run"));
    }
    if args.forget {
        return forget(&mut c, files);
    }
    let mut pats = files.to_vec();
    if pats.is_empty() {
        return Err(abort("no source or destination specified"));
    }
    if pats.len() == 1 {
        return Err(abort("no destination specified"));
    }
    let dest = pats.pop().unwrap_or_default();
    let destb = dest.as_bytes();
    let dest_path = c.os_path(destb);
    // isdir and not islink (a trailing slash makes lstat follow the link, as in Python).
    let destdirexists = std::fs::symlink_metadata(&dest_path).is_ok_and(|m| m.is_dir());
    if !destdirexists {
        if pats.len() > 1 || is_pattern(&pats[0]) {
            return Err(abort(
                "with multiple sources, destination must be an existing directory",
            ));
        }
        if dest.ends_with('/') {
            return Err(abort(format!("destination {dest} is not a directory")));
        }
    }
    let mut copylist: Vec<(TargetFn, Sources)> = Vec::new();
    for pat in &pats {
        let srcs = c.walkpat(pat, args.after)?;
        if srcs.is_empty() {
            continue;
        }
        let tfn = if args.after {
            target_after(&c, pat, destb, destdirexists, &srcs)?
        } else {
            target_copy(&c, pat, destdirexists)?
        };
        copylist.push((tfn, srcs));
    }
    if copylist.is_empty() {
        if rename {
            return Err(abort(
                "no files to copy\n(maybe you meant to use --after --at-rev=.)",
            ));
        }
        return Err(abort("no files to copy"));
    }
    let mut targets: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut errors = 0;
    for (tfn, srcs) in &copylist {
        for (abssrc, exact) in srcs {
            let otarget = tfn.apply(destb, abssrc);
            match copyfile(&mut c, args, &mut targets, abssrc, &otarget, *exact) {
                Ok(true) => errors += 1,
                Ok(false) => {}
                Err(e) => {
                    c.flush()?;
                    return Err(e);
                }
            }
        }
    }
    c.flush()?;
    Ok(if errors != 0 { 1 } else { 0 })
}

/// `targetpathfn`.
fn target_copy(c: &Copier, pat: &str, destdirexists: bool) -> Result<TargetFn> {
    if c.os_path(pat.as_bytes()).is_dir() {
        let abspfx = c.canonpath(pat.as_bytes())?;
        let prefix = if destdirexists {
            split(&abspfx).0
        } else {
            &abspfx[..]
        };
        Ok(TargetFn::Strip(past_slash(prefix)))
    } else {
        Ok(file_target(destdirexists))
    }
}

/// hg's `striplen`: the length of `prefix` and the slash after it (0 for the root).
fn past_slash(prefix: &[u8]) -> usize {
    if prefix.is_empty() {
        0
    } else {
        prefix.len() + 1
    }
}

/// Where a file (not a directory) named by the source pattern goes: into the destination
/// directory under its own name, or to the destination itself.
fn file_target(destdirexists: bool) -> TargetFn {
    if destdirexists {
        TargetFn::Basename
    } else {
        TargetFn::Dest
    }
}

/// `targetpathafterfn`.
fn target_after(
    c: &Copier,
    pat: &str,
    dest: &[u8],
    destdirexists: bool,
    srcs: &[(Vec<u8>, bool)],
) -> Result<TargetFn> {
    if is_pattern(pat) {
        return Ok(TargetFn::Basename);
    }
    let abspfx = c.canonpath(pat.as_bytes())?;
    let first_len = srcs.first().map_or(0, |s| s.0.len());
    if abspfx.len() < first_len {
        // A directory: the target may or may not contain its last component.
        let evalpath = |striplen: usize| {
            srcs.iter()
                .filter(|(s, _)| {
                    let t = join(dest, s.get(striplen..).unwrap_or_default());
                    Copier::lexists(&c.os_path(&t))
                })
                .count()
        };
        let mut striplen = past_slash(&abspfx);
        if c.os_path(&join(dest, split(&abspfx).1)).is_dir() {
            let score = evalpath(striplen);
            let striplen1 = past_slash(split(&abspfx).0);
            if evalpath(striplen1) > score {
                striplen = striplen1;
            }
        }
        Ok(TargetFn::Strip(striplen))
    } else {
        Ok(file_target(destdirexists))
    }
}

/// hg's `copyfile`: true when this file failed.
fn copyfile(
    c: &mut Copier,
    args: &CopyOptions,
    targets: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    abssrc: &[u8],
    otarget: &[u8],
    exact: bool,
) -> Result<bool> {
    let rename = c.rename;
    let abstarget = c.canonpath(otarget)?;
    let reltarget = c.rel(&abstarget);
    let relsrc = c.rel(abssrc);
    let target = c.disk(&abstarget);
    let src = c.disk(abssrc);
    let already_committed = c.state(&abstarget) == State::Normal;
    c.checkportable(&abstarget)?;

    if let Some(prevsrc) = targets.get(&abstarget) {
        warn(&format!(
            "{reltarget}: not overwriting - {} collides with {}\n",
            c.rel(abssrc),
            c.rel(prevsrc)
        ));
        return Ok(true);
    }

    let exists = Copier::lexists(&target);
    if ((!args.after && exists) || (args.after && already_committed)) && !args.force {
        let (what, hint) = if already_committed {
            let looks_like_copy = looks_like_copy_in_parent(c, abssrc, &abstarget)?;
            let cmd = if rename { "rename" } else { "copy" };
            let hint = if looks_like_copy {
                format!(
                    "('hg {cmd} --at-rev .' to record the {cmd} in the parent of the working copy)\n"
                )
            } else {
                let flags = if args.after {
                    "--after --force"
                } else {
                    "--force"
                };
                format!("('hg {cmd} {flags}' to replace the file by recording a {cmd})\n")
            };
            ("file already committed", hint)
        } else if rename {
            (
                "file exists",
                "('hg rename --after' to record the rename)\n".to_owned(),
            )
        } else {
            (
                "file exists",
                "('hg copy --after' to record the copy)\n".to_owned(),
            )
        };
        warn(&format!("{reltarget}: not overwriting - {what}\n"));
        warn(&hint);
        return Ok(true);
    }

    let mut srcexists = true;
    let mut moved = false;
    if args.after {
        if !exists {
            let what = if rename { "move" } else { "copy" };
            warn(&format!(
                "{relsrc}: not recording {what} - {reltarget} does not exist\n"
            ));
            return Ok(true);
        }
    } else if !args.dry_run {
        match copy_bytes(&src, &target, exists, rename) {
            Ok(()) => moved = rename,
            Err(CopyFailure::SourceMissing) => {
                warn(&format!("{relsrc}: deleted in working directory\n"));
                srcexists = false;
            }
            Err(CopyFailure::Other(e)) => {
                warn(&format!("{relsrc}: cannot copy - {}\n", strerror(&e)));
                return Ok(true);
            }
        }
    }

    if c.verbose || !exact {
        let verb = if rename { "moving" } else { "copying" };
        c.status(&format!("{verb} {relsrc} to {reltarget}\n"));
    }
    targets.insert(abstarget.clone(), abssrc.to_vec());

    dirstatecopy(c, abssrc, &abstarget, args.dry_run)?;
    if rename && !args.dry_run {
        if !args.after && srcexists {
            if !moved {
                let _ = std::fs::remove_file(&src);
            }
            if c.cfg
                .get_bool("experimental", "removeemptydirs")?
                .unwrap_or(true)
            {
                c.remove_empty_parents(abssrc);
            }
        }
        if !c.set_untracked(abssrc) {
            warn(&format!("{} not tracked!\n", c.rel(abssrc)));
        }
    }
    Ok(false)
}

/// hg's hint test: the target was added in the parent and the source existed before it.
fn looks_like_copy_in_parent(c: &Copier, abssrc: &[u8], abstarget: &[u8]) -> Result<bool> {
    if !c.in_base(abstarget) {
        return Ok(false);
    }
    let rev = c.ws.resolve_single(Some("."))?;
    if rev < 0 {
        return Ok(false);
    }
    let [p1, p2] = c.ws.repo()?.changelog().parents(rev)?;
    let mut parents = vec![p1];
    if p2 >= 0 {
        parents.push(p2);
    }
    for p in parents {
        let m = c.ws.repo()?.manifest_of(p)?;
        if m.find(abssrc)?.is_some() && m.find(abstarget)?.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The copy itself (hg's `os.unlink`, `os.makedirs`, `util.copyfile`), or the move.
fn copy_bytes(src: &Path, target: &Path, exists: bool, rename: bool) -> Result<(), CopyFailure> {
    let fail = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CopyFailure::SourceMissing
        } else {
            CopyFailure::Other(e)
        }
    };
    if exists {
        std::fs::remove_file(target).map_err(fail)?;
    }
    if let Some(dir) = target.parent() {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
    }
    let meta = std::fs::symlink_metadata(src).map_err(fail)?;
    if meta.is_dir() {
        return Err(CopyFailure::Other(std::io::Error::from_raw_os_error(
            libc::EISDIR,
        )));
    }
    if rename {
        return std::fs::rename(src, target).map_err(fail);
    }
    if meta.file_type().is_symlink() {
        let link = std::fs::read_link(src).map_err(fail)?;
        return std::os::unix::fs::symlink(link, target).map_err(fail);
    }
    std::fs::copy(src, target).map(|_| ()).map_err(fail)
}

/// `scmutil.dirstatecopy`.
fn dirstatecopy(c: &mut Copier, src: &[u8], dst: &[u8], dryrun: bool) -> Result<()> {
    let origsrc = c.copies.get(src).cloned().unwrap_or_else(|| src.to_vec());
    if dst == origsrc.as_slice() {
        let s = c.state(dst);
        if (s == State::Added || !s.tracked()) && !dryrun {
            c.set_tracked(dst);
        }
        return Ok(());
    }
    if c.state(&origsrc) == State::Added && origsrc.as_slice() == src {
        if !c.quiet {
            warn(&format!(
                "{} has not been committed yet, so no copy data will be stored for {}.\n",
                c.rel(&origsrc),
                c.rel(dst)
            ));
        }
        if !c.state(dst).tracked() && !dryrun {
            wctx_add(c, dst)?;
        }
    } else if !dryrun {
        wctx_copy(c, &origsrc, dst);
    }
    Ok(())
}

/// `workingctx.add([f])`.
fn wctx_add(c: &mut Copier, f: &[u8]) -> Result<()> {
    c.ds.add(&[f.to_vec()])?;
    Ok(())
}

/// `workingctx.copy(source, dest)`.
fn wctx_copy(c: &mut Copier, source: &[u8], dest: &[u8]) {
    let meta = match std::fs::symlink_metadata(c.disk(dest)) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            warn(&format!("{} does not exist!\n", c.rel(dest)));
            return;
        }
        Err(_) => return,
    };
    let ft = meta.file_type();
    if !(ft.is_file() || ft.is_symlink()) {
        warn(&format!(
            "copy failed: {} is not a file or a symbolic link\n",
            c.rel(dest)
        ));
        return;
    }
    c.set_tracked(dest);
    c.mark_copy(Some(source), dest);
}

/// `hg copy --forget FILE...`: unmark copies (every copy without arguments).
fn forget(c: &mut Copier, pats: &[String]) -> Result<u8> {
    // The walk of all patterns together; warnings use repository paths (hg's
    // `getuipathfn` without the legacy relative value), "No such file" relative ones.
    let mut walked: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
    if pats.is_empty() {
        for dst in c.copies.keys() {
            walked.insert(dst.clone(), false);
        }
    } else {
        for pat in pats {
            for (f, exact) in c.walk(pat)? {
                *walked.entry(f).or_insert(false) |= exact;
            }
        }
    }
    for (f, exact) in walked {
        // ctx.p1copies(): recorded copies of tracked files from files of the parent.
        let current = c
            .copies
            .get(&f)
            .is_some_and(|src| c.in_base(src) && c.state(&f).tracked());
        if current {
            c.mark_copy(None, &f);
        } else if exact {
            warn(&format!(
                "{}: not unmarking as copy - file is not marked as copied\n",
                lossy(&f)
            ));
        }
    }
    c.flush()?;
    Ok(0)
}
