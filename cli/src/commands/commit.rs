//! `revfs commit` and `revfs update`: the daemon of the mount does the work (it holds the
//! working copy); this side chooses the files, finds the user and the date, and prints what
//! hg prints. A long commit or update shows a progress bar on a terminal (see
//! [`crate::progress`]).

use super::Workspace;
use crate::progress::{self, Progress};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_store::bookmarks::{self, Bookmarks};
use revfs_store::commit::stripdesc;
use revfs_store::lock;
use revfs_store::{Node, Repo, Rev};
use revfs_vfs::service::control::{Request, Response};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;

#[derive(Args, Debug)]
pub struct CommitArgs {
    /// Use text as commit message
    #[arg(
        short = 'm',
        long = "message",
        value_name = "TEXT",
        allow_hyphen_values = true
    )]
    message: Option<String>,
    /// Read commit message from file
    #[arg(
        short = 'l',
        long = "logfile",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    logfile: Option<std::path::PathBuf>,
    /// Record the specified user as committer
    #[arg(
        short = 'u',
        long = "user",
        value_name = "USER",
        allow_hyphen_values = true
    )]
    user: Option<String>,
    /// Record the specified date as commit date
    #[arg(
        short = 'd',
        long = "date",
        value_name = "DATE",
        allow_hyphen_values = true
    )]
    date: Option<String>,
    /// Mark new/missing files as added/removed before committing
    #[arg(short = 'A', long = "addremove")]
    addremove: bool,
    /// Say what is committed
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Say nothing
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Files or directories to commit (default: every change)
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Revision")))]
pub struct UpdateArgs {
    /// Discard uncommitted changes (no backup)
    #[arg(short = 'C', long = "clean")]
    clean: bool,
    #[command(flatten)]
    rev: super::RevArg,
    /// Say nothing
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Revision (as with -r)
    #[arg(
        value_name = "REV",
        conflicts_with = "rev",
        allow_negative_numbers = true
    )]
    target: Option<String>,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn mount_only(ws: &Workspace) -> Result<()> {
    if ws.mount.is_none() {
        bail!(
            "{} is not a revfs mount (commit and update run inside a mount, or with -R MOUNTPOINT)",
            ws.root.display()
        );
    }
    Ok(())
}

fn working_parent(ws: &Workspace) -> Node {
    ws.scope.working_parent.unwrap_or(Node::NULL)
}

/// hg's branch heads: open revisions of `branch` without a child on the same branch,
/// oldest first.
fn branch_heads(repo: &Repo, branch: &[u8]) -> Result<Vec<Rev>> {
    let cl = repo.changelog();
    let mut on_branch = vec![false; cl.len()];
    let mut has_child = vec![false; cl.len()];
    for rev in 0..cl.len() as Rev {
        if repo.changeset(rev)?.branch() == branch {
            on_branch[rev as usize] = true;
            for p in cl.parents(rev)? {
                if p >= 0 {
                    has_child[p as usize] = true;
                }
            }
        }
    }
    let mut out = Vec::new();
    for rev in 0..cl.len() as Rev {
        if on_branch[rev as usize]
            && !has_child[rev as usize]
            && !repo.changeset(rev)?.closes_branch()
        {
            out.push(rev);
        }
    }
    Ok(out)
}

fn branch_of(repo: &Repo, node: &Node) -> Result<Vec<u8>> {
    Ok(match repo.changelog().rev_of(node) {
        Some(rev) if !node.is_null() => repo.changeset(rev)?.branch().to_vec(),
        _ => b"default".to_vec(),
    })
}

pub fn commit(cli: &crate::Cli, args: &CommitArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    mount_only(&ws)?;
    let _wlock = ws.wlock()?;
    ws.refuse_merge("commit")?;
    let message = match (&args.message, &args.logfile) {
        (Some(_), Some(_)) => bail!("options --message and --logfile are mutually exclusive"),
        (Some(m), None) => m.clone().into_bytes(),
        (None, Some(f)) if f.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
            buf
        }
        (None, Some(f)) => std::fs::read(f)
            .map_err(|e| anyhow!("can't read commit message '{}': {e}", f.display()))?,
        (None, None) => Vec::new(),
    };
    // hg's order: the date, addremove, the named files, "nothing changed", the message,
    // then the user (inside the transaction).
    let cfg = revfs_hg::config::Config::load(Some(ws.repo.root()))?;
    let (time, tz) = revfs_hg::date::commit_date(args.date.as_deref())?;
    // A `.hgsub` that the commit would track makes hg commit subrepositories; refused
    // before anything changes (hg's dirstate guard undoes `-A` when it stops).
    let hgsub_on_disk = std::fs::symlink_metadata(ws.root.join(".hgsub")).is_ok();
    if args.addremove && hgsub_on_disk {
        bail!(".hgsub: subrepositories are not supported by revfs (use hg instead)");
    }
    let mut undo = None;
    if args.addremove {
        // hg's `commit -A`: no rename detection; paths relative to the current directory
        // only when files were named.
        let relative = !args.files.is_empty();
        let (code, u) =
            revfs_vfs::client::track::addremove_files(&ws, &args.files, false, relative, false)?;
        if code != 0 {
            u.apply(&ws)?;
            bail!("failed to mark all new/missing files as added/removed");
        }
        undo = Some(u);
    }
    // hg's dirstate guard: when the commit stops, what `-A` did is undone.
    match commit_checked(args, &ws, cfg, (time, tz), message) {
        Err(e) => {
            if let Some(u) = undo {
                u.apply(&ws)?;
            }
            Err(e)
        }
        ok => ok,
    }
}

/// The commit after `-A`: the named files checked, then the daemon's commit.
fn commit_checked(
    args: &CommitArgs,
    ws: &Workspace,
    cfg: revfs_hg::config::Config,
    (time, tz): (i64, i32),
    message: Vec<u8>,
) -> Result<u8> {
    let fetched = revfs_vfs::client::status::fetch(ws, false, false, false)?;
    let ctx = PathContext::new(&ws.root)?;
    let matcher = Matcher::new(&ctx, &args.files)?;
    let walked = revfs_vfs::client::walk::walk_silent(ws, &ctx, &matcher, fetched);
    // A named file the walk cannot use stops the commit (paths as in the repository).
    if let Some((f, msg)) = walked.bad.first() {
        bail!("{}: {msg}", lossy(f));
    }
    let letters: BTreeMap<&[u8], char> =
        walked.all.iter().map(|(l, p)| (p.as_slice(), *l)).collect();
    let base = ws.repo.manifest_of(ws.resolve_single(Some("."))?)?;
    // A tracked `.hgsub` makes hg commit subrepositories and write `.hgsubstate`.
    let base_has_hgsub = base.find(b".hgsub")?.is_some();
    let hgsub = letters.get(&b".hgsub"[..]).copied();
    if (base_has_hgsub && hgsub != Some('R')) || hgsub == Some('A') {
        bail!(".hgsub: subrepositories are not supported by revfs (use hg instead)");
    }
    let chosen: Vec<Vec<u8>> = walked
        .entries()
        .filter(|(l, _)| matches!(l, 'M' | 'A' | 'R'))
        .map(|(_, p)| p.clone())
        .collect();
    // `checkcommitpatterns`: files and directories named exactly must have changes.
    if matcher.only_paths() {
        for f in matcher.files() {
            // The root among other paths is a directory with nothing under "/" (hg's
            // quirk: ": no match under directory!"); alone it matches everything.
            if (f.is_empty() && matcher.is_always()) || chosen.contains(f) {
                continue;
            }
            if letters.get(f.as_slice()) == Some(&'!') {
                bail!("{}: file not found!", lossy(f));
            }
            let dir = [f.as_slice(), b"/"].concat();
            let on_disk_dir = std::fs::metadata(ws.root.join(std::ffi::OsStr::from_bytes(f)))
                .is_ok_and(|m| m.is_dir());
            if on_disk_dir || base.iter_prefix(&dir).next().is_some() {
                if !chosen.iter().any(|c| c.starts_with(&dir)) {
                    bail!("{}: no match under directory!", lossy(f));
                }
            } else if !letters.contains_key(f.as_slice()) && base.find(f)?.is_none() {
                bail!("{}: file not tracked!", lossy(f));
            }
        }
    }
    // hg's commit refuses while an update or a merge left conflicts (after `-A`, which
    // its dirstate guard undoes, and the named files).
    if revfs_hg::mergestate::unresolved(&ws.mount()?.share_dir())? > 0 {
        bail!("unresolved merge conflicts (see 'hg help resolve')");
    }
    if chosen.is_empty() {
        if !args.quiet {
            let missing = walked.entries().filter(|(l, _)| *l == '!').count();
            if missing > 0 {
                println!("nothing changed ({missing} missing files, see 'hg status')");
            } else {
                println!("nothing changed");
            }
        }
        return Ok(1);
    }
    // A message given is taken as it is (hg strips it; whitespace only makes an empty
    // description); without one hg runs an editor, which revfs does not.
    if message.is_empty() {
        bail!("empty commit message");
    }
    let description = stripdesc(&message);
    let user = match cfg.commit_user(
        args.user.as_deref(),
        &revfs_hg::config::Env::from_process(),
        &mut revfs_hg::config::StdConsole,
    ) {
        Ok(u) => u,
        Err(e) => {
            if matches!(
                e,
                revfs_hg::config::IdentityError::Empty
                    | revfs_hg::config::IdentityError::NewlineInCommit(_)
            ) {
                // hg finds these inside its transaction.
                eprintln!("transaction abort!\nrollback completed");
            }
            return Err(e.into());
        }
    };
    let p1 = working_parent(ws);
    // The working copy's branch (`hg branch` sets it), which the daemon commits on.
    let share = ws.mount()?.share_dir();
    let branch = revfs_vfs::service::share::branch(&share);
    let heads_before = branch_heads(&ws.repo, &branch)?;
    let p1rev = ws.repo.changelog().rev_of(&p1).filter(|_| !p1.is_null());
    let mut bar = Progress::new(
        progress::wanted(args.quiet, Some(ws.repo.root())),
        "committing",
    );
    let req = Request::Commit {
        paths: Some(chosen.clone()),
        user: user.into_bytes(),
        time,
        tz,
        message: description,
    };
    let node = match progress::request(ws, &req, &mut bar)? {
        Response::Committed { node } => {
            Node::from_hex(node.as_bytes()).ok_or_else(|| anyhow!("bad node from the daemon"))?
        }
        Response::NothingChanged => {
            if !args.quiet {
                println!("nothing changed");
            }
            return Ok(1);
        }
        other => bail!("unexpected answer from the daemon: {other:?}"),
    };
    if args.verbose && !args.quiet {
        println!("committing files:");
        for p in chosen
            .iter()
            .filter(|p| letters.get(p.as_slice()) != Some(&'R'))
        {
            println!("{}", lossy(p));
        }
        println!("committing manifest");
        println!("committing changelog");
    }
    if !args.quiet && !heads_before.is_empty() && !p1rev.is_some_and(|r| heads_before.contains(&r))
    {
        println!("created new head");
    }
    if let Some(r) = p1rev {
        let cs = ws.repo.changeset(r)?;
        if !args.quiet && cs.closes_branch() && cs.branch() == branch.as_slice() {
            println!("reopening closed branch head {r}");
        }
    }
    // hg's commit moves the active bookmark along (`bookmarks.update`), silently.
    let repo = Repo::open(ws.repo.root())?;
    move_active_bookmark(&repo, &share, &mut Bookmarks::load(&repo)?, &[p1], node)?;
    if args.verbose && !args.quiet {
        let rev = repo.changelog().rev_of(&node).map_or(-1, |r| r as i64);
        println!("committed changeset {rev}:{}", &node.to_hex()[..12]);
    }
    Ok(0)
}

/// hg's `bookmarks.update(repo, parents, node)`: the active bookmark of `marks` follows a
/// commit or an update from one of `parents` to `node`. True when it moved (or a divergent
/// copy went): `marks` is written under the repository's store lock, as hg writes them.
fn move_active_bookmark(
    repo: &Repo,
    share: &std::path::Path,
    marks: &mut Bookmarks,
    parents: &[Node],
    node: Node,
) -> Result<bool> {
    let Some(active) = bookmarks::active(share, marks) else {
        return Ok(false);
    };
    if !marks.advance(repo, &active, parents, node)? {
        return Ok(false);
    }
    let _lock = lock::acquire(&repo.store_path().join("lock"), lock::DEFAULT_TIMEOUT)?;
    marks.write()?;
    Ok(true)
}

pub fn update(cli: &crate::Cli, args: &UpdateArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    mount_only(&ws)?;
    let _wlock = ws.wlock()?;
    let spec = args.rev.rev.as_deref().or(args.target.as_deref());
    let p1 = working_parent(&ws);
    let p1rev = ws
        .repo
        .changelog()
        .rev_of(&p1)
        .filter(|_| !p1.is_null())
        .unwrap_or(-1);
    let share = ws.mount()?.share_dir();
    let mut marks = Bookmarks::load(&ws.repo)?;
    let active = bookmarks::active(&share, &marks);
    let Destination {
        rev,
        announce,
        brev,
        movemarkfrom,
    } = destination(&ws, args, spec, p1, p1rev, &share, &marks, active.as_ref())?;
    let node = if rev < 0 {
        Node::NULL
    } else {
        ws.repo.changelog().node(rev)?
    };
    // hg checks subrepositories out with the revision.
    if rev >= 0 && ws.repo.manifest_of(rev)?.find(b".hgsub")?.is_some() {
        bail!("revision {rev} has subrepositories (.hgsub), which revfs does not support (use hg instead)");
    }
    if !args.clean {
        // hg's checks of an update that would leave a merge unfinished.
        if ws.merge_parent()?.is_some() {
            bail!("outstanding uncommitted merge");
        }
        if revfs_hg::mergestate::unresolved(&share)? > 0 {
            bail!("outstanding merge conflicts\n(use 'hg resolve' to resolve)");
        }
        // hg's `commands.update.check=linear`: across branches, any uncommitted change
        // (missing files included, unknown ones not) stops the update.
        let cl = ws.repo.changelog();
        let linear = cl.is_ancestor(p1rev, rev)? || cl.is_ancestor(rev, p1rev)?;
        if !linear {
            let status = revfs_vfs::client::status::fetch(&ws, false, false, false)?;
            if status
                .entries
                .iter()
                .any(|(l, _)| matches!(l, 'M' | 'A' | 'R' | '!'))
            {
                bail!(UncommittedChanges);
            }
        }
    }
    // hg tells a user whose current directory the update removed.
    let had_cwd = std::env::current_dir().is_ok();
    let mut bar = Progress::new(
        progress::wanted(args.quiet, Some(ws.repo.root())),
        "updating",
    );
    let req = Request::Update {
        node: node.to_hex(),
        clean: args.clean,
        keep: Vec::new(),
        dry_run: false,
        pending: false,
    };
    match progress::request(&ws, &req, &mut bar)? {
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
            if !args.quiet {
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
                bail!(
                    "untracked files in working directory differ from files in requested revision"
                );
            }
            // hg merges local changes into the files a linear update changes; revfs does
            // not merge.
            bail!("uncommitted changes in files this update changes would need a merge, which revfs does not do (use hg instead)");
        }
        other => bail!("unexpected answer from the daemon: {other:?}"),
    }
    after_update(
        &ws,
        args,
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
    ws: &super::Workspace,
    args: &UpdateArgs,
    spec: Option<&str>,
    p1: Node,
    p1rev: Rev,
    share: &std::path::Path,
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
                    if !args.quiet {
                        println!("updating to active bookmark {}", lossy(name));
                    }
                    brev = Some(name.clone());
                    let rev = ws.repo.changelog().rev_of(&node).unwrap_or(-1);
                    (rev, true)
                }
                _ => {
                    if on_parent {
                        movemarkfrom = Some(p1);
                    }
                    // The tipmost head of the working copy's branch (the parent's with
                    // --clean) that descends from the parent.
                    let branch = if args.clean {
                        branch_of(&ws.repo, &p1)?
                    } else {
                        revfs_vfs::service::share::branch(share)
                    };
                    let mut dest = p1rev;
                    for h in branch_heads(&ws.repo, &branch)? {
                        if h > dest && ws.repo.changelog().is_ancestor(p1rev, h)? {
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
    ws: &super::Workspace,
    args: &UpdateArgs,
    share: &std::path::Path,
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
        if !args.quiet {
            println!("{line}");
        }
    };
    let repo = &ws.repo;
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
    if announce && !args.quiet {
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
    if announce && !args.quiet && rev >= 0 {
        let branch = branch_of(&ws.repo, &node)?;
        let others = branch_heads(&ws.repo, &branch)?
            .into_iter()
            .filter(|&h| h != rev)
            .count();
        if others > 0 {
            let cs = ws.repo.changeset(rev)?;
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

/// hg's abort for an update over overlapping changes, with its hint.
#[derive(Debug)]
struct UncommittedChanges;

impl std::fmt::Display for UncommittedChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "uncommitted changes\n(commit or update --clean to discard changes)"
        )
    }
}

impl std::error::Error for UncommittedChanges {}
