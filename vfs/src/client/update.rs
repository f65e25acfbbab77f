//! `revfs update` in a mount: Mercurial 6.3.2's `update` (`hg.updatetotally`) of the
//! working copy the daemon keeps. This side finds the destination as hg's `destupdate`
//! does, refuses what hg refuses (an unfinished merge, conflicts, uncommitted changes
//! across branches, subrepositories), has the daemon update, then keeps hg's bookmark
//! bookkeeping and prints what hg prints.
//!
//! Not supported: merging local changes into the files an update changes (refused with an
//! abort that says so), `--check`, `--merge`, `--tool`, `--date`.

use super::commit::{branch_heads, branch_of, mount_only, move_active_bookmark, working_parent};
use super::error::{abort, Result};
use super::workspace::{unexpected, Progress};
use super::{lossy, Workspace};
use crate::service::control::{Request, Response};
use revfs_store::bookmarks::{self, Bookmarks};
use revfs_store::{Node, Rev};
use std::path::Path;

/// `hg update`'s flags.
#[derive(Debug, Clone, Default)]
pub struct UpdateOptions {
    /// `-C/--clean`: discard uncommitted changes (no backup).
    pub clean: bool,
    /// The revision, from `-r REV` or the argument.
    pub rev: Option<String>,
    /// `-q/--quiet`.
    pub quiet: bool,
}

/// `hg update [REV]` in the mount of `ws`; the exit code.
pub fn update(ws: &Workspace, opts: &UpdateOptions, progress: &mut dyn Progress) -> Result<u8> {
    mount_only(ws)?;
    let _wlock = ws.wlock()?;
    let spec = opts.rev.as_deref();
    let p1 = working_parent(ws);
    let p1rev = ws
        .repo()?
        .changelog()
        .rev_of(&p1)
        .filter(|_| !p1.is_null())
        .unwrap_or(-1);
    let share = ws.mount()?.share_dir();
    let mut marks = Bookmarks::load(ws.repo()?)?;
    let active = bookmarks::active(&share, &marks);
    let Destination {
        rev,
        announce,
        brev,
        movemarkfrom,
    } = destination(ws, opts, spec, p1, p1rev, &share, &marks, active.as_ref())?;
    let node = if rev < 0 {
        Node::NULL
    } else {
        ws.repo()?.changelog().node(rev)?
    };
    // hg checks subrepositories out with the revision.
    if rev >= 0 && ws.repo()?.manifest_of(rev)?.find(b".hgsub")?.is_some() {
        return Err(abort(format!("revision {rev} has subrepositories (.hgsub), which revfs does not support (use hg instead)")));
    }
    if !opts.clean {
        // hg's checks of an update that would leave a merge unfinished.
        if ws.merge_parent()?.is_some() {
            return Err(abort("outstanding uncommitted merge"));
        }
        if revfs_hg::mergestate::unresolved(&share)? > 0 {
            return Err(abort(
                "outstanding merge conflicts\n(use 'hg resolve' to resolve)",
            ));
        }
        // hg's `commands.update.check=linear`: across branches, any uncommitted change
        // (missing files included, unknown ones not) stops the update.
        let cl = ws.repo()?.changelog();
        let linear = cl.is_ancestor(p1rev, rev)? || cl.is_ancestor(rev, p1rev)?;
        if !linear {
            let status = super::status::fetch(ws, false, false, false)?;
            if status
                .entries
                .iter()
                .any(|(l, _)| matches!(l, 'M' | 'A' | 'R' | '!'))
            {
                return Err(abort(
                    "uncommitted changes\n(commit or update --clean to discard changes)",
                ));
            }
        }
    }
    // hg tells a user whose current directory the update removed.
    let had_cwd = std::env::current_dir().is_ok();
    progress.start("updating");
    let req = Request::Update {
        node: node.to_hex(),
        clean: opts.clean,
        keep: Vec::new(),
        dry_run: false,
        pending: false,
    };
    match ws.request_with_progress(&req, progress)? {
        Response::Updated {
            updated, removed, ..
        } => {
            // hg's update ends any merge state (resolved files, or --clean's discarded ones).
            match std::fs::remove_dir_all(share.join("merge")) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    eprintln!("warning: removing {}: {e}", share.join("merge").display())
                }
                _ => {}
            }
            if had_cwd && std::env::current_dir().is_err() {
                eprintln!(
                    "current directory was removed\n(consider changing to repo root: {})",
                    ws.root.display()
                );
            }
            if !opts.quiet {
                println!(
                    "{updated} files updated, 0 files merged, {removed} files removed, 0 files unresolved"
                );
            }
        }
        Response::Conflicts { paths, untracked } => {
            tracing_conflicts(&paths);
            if untracked {
                // hg's `merge.checkunknown=abort`.
                let mut paths = paths;
                paths.sort();
                for p in &paths {
                    eprintln!("{}: untracked file differs", lossy(p));
                }
                return Err(abort(
                    "untracked files in working directory differ from files in requested revision",
                ));
            }
            // hg merges local changes into the files a linear update changes; revfs does
            // not merge.
            return Err(abort("uncommitted changes in files this update changes would need a merge, which revfs does not do (use hg instead)"));
        }
        Response::Subrepos => {
            return Err(abort(
                "the working copy's parent has subrepositories, which revfs does not support (use hg instead)",
            ))
        }
        other => return Err(unexpected(&other)),
    }
    after_update(
        ws,
        opts,
        &share,
        &mut marks,
        active,
        brev,
        movemarkfrom,
        announce,
        node,
        rev,
    )
}

/// Where `revfs update` goes, as hg's `update` decides it.
struct Destination {
    rev: Rev,
    /// Whether hg would say more of where it went (no revision was named).
    announce: bool,
    /// hg's `brev`: the name asked for, which may be a bookmark to activate.
    brev: Option<Vec<u8>>,
    /// Where the active bookmark moves from (hg's `movemarkfrom`), without a revision.
    movemarkfrom: Option<Node>,
}

/// The revision `spec` names, or without one hg's `destupdate`: the active bookmark when
/// it is not on the parent, else the tipmost head of the working copy's branch (the
/// parent's with --clean) that descends from the parent.
#[allow(clippy::too_many_arguments)]
fn destination(
    ws: &Workspace,
    opts: &UpdateOptions,
    spec: Option<&str>,
    p1: Node,
    p1rev: Rev,
    share: &Path,
    marks: &Bookmarks,
    active: Option<&Vec<u8>>,
) -> Result<Destination> {
    // hg's `brev`: the name asked for, which may be a bookmark to activate.
    let mut brev: Option<Vec<u8>> = spec.map(|s| s.as_bytes().to_vec());
    // Where the active bookmark moves from (hg's `movemarkfrom`), without a revision.
    let mut movemarkfrom = None;
    let (rev, announce) = match spec {
        Some(s) => (ws.resolve_single(Some(s))?, false),
        None => {
            // hg's `destupdate`: the active bookmark, when it is not on the parent.
            let on_parent = active.and_then(|a| marks.get(a)) == Some(p1);
            match active.and_then(|a| Some((a, marks.get(a)?))) {
                Some((name, node)) if !on_parent => {
                    if !opts.quiet {
                        println!("updating to active bookmark {}", lossy(name));
                    }
                    brev = Some(name.clone());
                    let rev = ws.repo()?.changelog().rev_of(&node).unwrap_or(-1);
                    (rev, true)
                }
                _ => {
                    if on_parent {
                        movemarkfrom = Some(p1);
                    }
                    // The tipmost head of the working copy's branch (the parent's with
                    // --clean) that descends from the parent.
                    let branch = if opts.clean {
                        branch_of(ws.repo()?, &p1)?
                    } else {
                        crate::service::share::branch(share)
                    };
                    let mut dest = p1rev;
                    for h in branch_heads(ws.repo()?, &branch)? {
                        if h > dest && ws.repo()?.changelog().is_ancestor(p1rev, h)? {
                            dest = h;
                        }
                    }
                    (dest, true)
                }
            }
        }
    };
    Ok(Destination {
        rev,
        announce,
        brev,
        movemarkfrom,
    })
}

/// hg's bookkeeping after an update to `node` (`hg.updatetotally`): the active bookmark
/// moved, left or activated, and what hg says of other divergent bookmarks or heads.
#[allow(clippy::too_many_arguments)]
fn after_update(
    ws: &Workspace,
    opts: &UpdateOptions,
    share: &Path,
    marks: &mut Bookmarks,
    active: Option<Vec<u8>>,
    brev: Option<Vec<u8>>,
    movemarkfrom: Option<Node>,
    announce: bool,
    node: Node,
    rev: Rev,
) -> Result<u8> {
    // hg's bookmark bookkeeping after the update (`hg.updatetotally`).
    let say = |line: String| {
        if !opts.quiet {
            println!("{line}");
        }
    };
    let repo = ws.repo()?;
    let mut now_active = active.clone();
    if let (Some(from), Some(name)) = (movemarkfrom, &active) {
        if from != node {
            if move_active_bookmark(repo, share, marks, &[from], node)? {
                say(format!("updating bookmark {}", lossy(name)));
            } else {
                say(format!("(leaving bookmark {})", lossy(name)));
                bookmarks::deactivate(share)?;
                now_active = None;
            }
        }
    } else if let Some(name) = brev.as_ref().filter(|b| marks.get(b).is_some()) {
        if Some(name) != active.as_ref() {
            say(format!("(activating bookmark {})", lossy(name)));
        }
        bookmarks::activate(share, name)?;
        now_active = Some(name.clone());
    } else if brev.as_ref().is_some_and(|b| !b.is_empty()) {
        if let Some(name) = &active {
            say(format!("(leaving bookmark {})", lossy(name)));
        }
        bookmarks::deactivate(share)?;
        now_active = None;
    }
    if announce && !opts.quiet {
        if let Some(name) = &now_active {
            // hg's `_statusotherbook`: only divergent copies of the bookmark count.
            if marks.get(name) == Some(node) {
                let others = marks
                    .divergent_of(name)
                    .into_iter()
                    .filter(|n| *n != node)
                    .count();
                if others > 0 {
                    println!("{others} other divergent bookmarks for \"{}\"", lossy(name));
                }
            }
            return Ok(0);
        }
    }
    if announce && !opts.quiet && rev >= 0 {
        let branch = branch_of(ws.repo()?, &node)?;
        let others = branch_heads(ws.repo()?, &branch)?
            .into_iter()
            .filter(|&h| h != rev)
            .count();
        if others > 0 {
            let cs = ws.repo()?.changeset(rev)?;
            let summary = cs
                .description
                .split(|&b| b == b'\n')
                .next()
                .unwrap_or_default();
            println!(
                "updated to \"{}: {}\"",
                &node.to_hex()[..12],
                lossy(summary)
            );
            println!("{others} other heads for branch \"{}\"", lossy(&branch));
        }
    }
    Ok(0)
}

/// The paths that stopped an update, for `REVFS_DEBUG` users.
fn tracing_conflicts(paths: &[Vec<u8>]) {
    if std::env::var_os("REVFS_DEBUG").is_some() {
        for p in paths {
            eprintln!("conflicting change: {}", lossy(p));
        }
    }
}
