//! `revfs revert` in a mount: Mercurial 6.3.2's `cmdutil.revert` to the working copy's
//! parent, with its messages, backups and exit code.
//!
//! The named files and patterns are walked in the working copy (unknown files included)
//! and in the parent's manifest (a named file in neither gets "no such file in rev");
//! then each file gets hg's action by its status: an added file is forgotten, a modified
//! one saved as `.orig` and reverted, a missing one reverted, a removed one undeleted (a
//! file standing in its place saved as `.orig` when it differs), a clean one named
//! exactly gets "no changes needed", an unknown one named exactly "file not managed".
//! Messages name the files found by directories and patterns, not those named exactly
//! (all with `-v`), in hg's order: forgetting, reverting, undeleting.
//!
//! Not supported (refused by the argument parser): `-r`, `-d`, `-i`, `-I`/`-X`.

use super::dirstate::warn;
use super::error::{abort, Result};
use super::status::fetch;
use super::walk::walk_silent;
use super::{lossy, Workspace};
use crate::service::control::Request;
use crate::wc::journal::Track;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_hg::paths::is_under;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// `hg revert`'s flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct RevertOptions {
    /// `-a/--all`: revert every file when none is named.
    pub all: bool,
    /// `-C/--no-backup`: no `.orig` copies.
    pub no_backup: bool,
    /// `-n/--dry-run`.
    pub dry_run: bool,
    /// `-v/--verbose`: name the files named exactly too.
    pub verbose: bool,
}

/// hg's revert actions, in the order it performs them (and prints their messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Forget,
    Revert,
    Undelete,
}

impl Action {
    fn message(self) -> &'static str {
        match self {
            Action::Forget => "forgetting",
            Action::Revert => "reverting",
            Action::Undelete => "undeleting",
        }
    }
}

/// `hg revert FILE...`: back to the working-copy parent's content for the named files.
pub fn revert(ws: &Workspace, files: &[String], args: RevertOptions) -> Result<u8> {
    let _wlock = ws.wlock()?;
    ws.refuse_merge("revert")?;
    let always = files.is_empty();
    // The working copy's status, with clean and unknown files when files are named.
    let fetched = fetch(ws, !always, false, !always)?;
    if always && !args.all {
        let dirty = fetched
            .entries
            .iter()
            .any(|(l, _)| matches!(l, 'M' | 'A' | 'R' | '!'));
        if dirty {
            return Err(abort("no files or directories specified\n(uncommitted changes, use --all to discard all changes)"));
        }
        return Err(abort(
            "no files or directories specified\n(use --all to revert all files)",
        ));
    }
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, files)?;
    let rev = ws.resolve_single(Some("."))?;
    let base = ws.repo()?.manifest_of(rev)?;
    let short = ws.repo()?.changelog().node(rev)?.short();
    let cfg = revfs_hg::config::Config::load(Some(ws.repo_root()))?;
    let verbose = args.verbose
        || cfg.get_bool("ui", "verbose")?.unwrap_or(false)
        || cfg.get_bool("ui", "debug")?.unwrap_or(false);
    // Every status line, and the copy sources.
    let all: BTreeMap<Vec<u8>, char> = fetched
        .entries
        .iter()
        .map(|(l, p)| (p.clone(), *l))
        .collect();
    let (mut names, mut letters, copies) =
        named_files(ws, &ctx, &matcher, &base, &short, always, fetched)?;
    // A renamed file's removed source is reverted with it (as if named exactly).
    let mut sources = Vec::new();
    for (p, l) in &letters {
        if let (Some(src), 'M' | 'A') = (copies.get(p), l) {
            if !names.contains_key(src) && all.get(src) == Some(&'R') {
                sources.push(src.clone());
            }
        }
    }
    for src in sources {
        names.insert(src.clone(), true);
        letters.insert(src, 'R');
    }
    let disk = |p: &[u8]| -> PathBuf { ws.root.join(OsStr::from_bytes(p)) };
    let mut actions: Vec<(Action, Vec<u8>, bool)> = Vec::new();
    // Removed files with a file in their place, as hg sees them before it starts.
    let mut present: std::collections::BTreeSet<&Vec<u8>> = Default::default();
    for (p, l) in &letters {
        if *l == 'R' && names.contains_key(p) && std::fs::symlink_metadata(disk(p)).is_ok() {
            present.insert(p);
        }
    }
    // hg's backups, made in path order as it goes: a backup may land on a file that is
    // itself backed up next (`a` to `a.orig`, then `a.orig` to `a.orig.orig`).
    let backup = |p: &[u8]| -> Result<()> {
        if !args.dry_run {
            let f = disk(p);
            let mut orig = f.clone().into_os_string();
            orig.push(".orig");
            std::fs::rename(&f, &orig)?;
        }
        Ok(())
    };
    for (p, &exact) in &names {
        let l = letters.get(p).copied().unwrap_or('C');
        let action = match l {
            'A' => Action::Forget,
            'M' => {
                if !args.no_backup {
                    backup(p)?;
                }
                Action::Revert
            }
            '!' if base.find(p)?.is_some() => Action::Revert,
            '!' => Action::Forget,
            'R' => {
                if present.contains(p)
                    && !args.no_backup
                    && std::fs::symlink_metadata(disk(p)).is_ok()
                    && differs_from_parent(ws, &base, p)?
                {
                    backup(p)?;
                }
                Action::Undelete
            }
            'C' => {
                if exact {
                    warn(&format!(
                        "no changes needed to {}\n",
                        lossy(&ctx.display(p))
                    ));
                }
                continue;
            }
            _ => {
                if exact {
                    warn(&format!("file not managed: {}\n", lossy(&ctx.display(p))));
                }
                continue;
            }
        };
        if args.dry_run && (verbose || !exact) {
            println!("{} {}", action.message(), lossy(&ctx.display(p)));
        }
        actions.push((action, p.clone(), exact));
    }
    if args.dry_run {
        return Ok(0);
    }
    apply(ws, &ctx, actions, verbose)
}

/// The files a revert looks at: repository path -> named exactly, with the status letter
/// of each ('?' for files on disk the walk did not list: ignored ones, named), and the copy
/// sources. All changed files without names; with names, the working copy's walk of them
/// and hg's warning for a named file that is neither there nor in the parent.
#[allow(clippy::type_complexity)]
fn named_files(
    ws: &Workspace,
    ctx: &PathContext,
    matcher: &Matcher,
    base: &revfs_store::manifest::Manifest,
    short: &str,
    always: bool,
    fetched: super::status::Status,
) -> Result<(
    BTreeMap<Vec<u8>, bool>,
    BTreeMap<Vec<u8>, char>,
    BTreeMap<Vec<u8>, Vec<u8>>,
)> {
    // names: repository path -> named exactly; with the status letter of each ('?' for
    // files on disk the walk did not list: ignored ones, named).
    let mut names: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
    let mut letters: BTreeMap<Vec<u8>, char> = BTreeMap::new();
    let copies = if always {
        for (l, p) in &fetched.entries {
            names.insert(p.clone(), false);
            letters.insert(p.clone(), *l);
        }
        fetched.copies
    } else {
        // The working copy's walk, its warnings silenced (hg's `badmatch(m, False)`).
        let walked = walk_silent(ws, ctx, matcher, fetched);
        for (l, p) in walked.entries() {
            names.insert(p.clone(), matcher.exact(p));
            letters.insert(p.clone(), *l);
        }
        for f in matcher.files() {
            if walked.named_file(f) && matcher.matches(f) && !names.contains_key(f) {
                names.insert(f.clone(), true);
                letters.insert(f.clone(), '?');
            }
        }
        // The parent's manifest: its files add nothing the dirstate lacks; a named file
        // in neither gets hg's warning.
        let (_, missing) = super::walk::manifest_walk(base, matcher)?;
        for f in missing {
            if names.contains_key(&f) || names.keys().any(|n| is_under(n, &f)) {
                continue;
            }
            warn(&format!(
                "{}: no such file in rev {short}\n",
                lossy(&ctx.display(&f))
            ));
        }
        walked.copies
    };
    Ok((names, letters, copies))
}

/// Carries out the `actions` (hg's order: forgetting, reverting, undeleting, each by
/// path), saying what each does unless it was named exactly (all with `verbose`).
fn apply(
    ws: &Workspace,
    ctx: &PathContext,
    mut actions: Vec<(Action, Vec<u8>, bool)>,
    verbose: bool,
) -> Result<u8> {
    actions.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut untrack = Vec::new();
    let mut restore = Vec::new();
    for (action, p, exact) in &actions {
        if verbose || !exact {
            println!("{} {}", action.message(), lossy(&ctx.display(p)));
        }
        match action {
            Action::Forget => untrack.push(p.clone()),
            Action::Revert => restore.push(p.clone()),
            Action::Undelete => {
                untrack.push(p.clone());
                restore.push(p.clone());
            }
        }
    }
    if !untrack.is_empty() {
        ws.request(&Request::Track {
            paths: untrack,
            track: Track::Default,
            txn: false,
        })?;
    }
    if !restore.is_empty() {
        ws.request(&Request::Restore { paths: restore })?;
    }
    Ok(0)
}

/// Whether the working copy's file `p` differs from the parent's (`filectx.cmp`): its bytes
/// (a symbolic link's target), not its mode.
fn differs_from_parent(
    ws: &Workspace,
    base: &revfs_store::manifest::Manifest,
    p: &[u8],
) -> Result<bool> {
    let Some(entry) = base.find(p)? else {
        return Ok(true);
    };
    let data = super::dirstate::read_working(&ws.root, p)?;
    let fl = ws.repo()?.filelog(p)?;
    let text = fl.read(fl.rev_of(&entry.node)?)?;
    Ok(data.as_slice() != &text[..])
}
