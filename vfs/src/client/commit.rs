//! `revfs commit` in a mount: Mercurial 6.3.2's `commit` over the working copy the daemon
//! keeps. This side chooses the files (hg's walk and `checkcommitpatterns`), finds the
//! message, the user and the date, refuses what hg would refuse in hg's order, has the
//! daemon write the changeset, moves the active bookmark, and prints what hg prints.
//!
//! Not supported (refused by the argument parser or with an abort): an editor for the
//! message, subrepositories, `--amend`, `-i`, `-I`/`-X`, `--close-branch`.

use super::error::{abort, Result};
use super::workspace::{unexpected, Progress};
use super::{lossy, Workspace};
use crate::service::control::{Request, Response};
use revfs_hg::matcher::{Matcher, PathContext};
use revfs_store::bookmarks::{self, Bookmarks};
use revfs_store::commit::stripdesc;
use revfs_store::lock;
use revfs_store::{Node, Repo, Rev};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `hg commit`'s flags.
#[derive(Debug, Clone, Default)]
pub struct CommitOptions {
    /// `-m/--message TEXT`.
    pub message: Option<String>,
    /// `-l/--logfile FILE` (`-`: standard input).
    pub logfile: Option<PathBuf>,
    /// `-u/--user USER`.
    pub user: Option<String>,
    /// `-d/--date DATE`.
    pub date: Option<String>,
    /// `-A/--addremove`.
    pub addremove: bool,
    /// `-v/--verbose`: say what is committed.
    pub verbose: bool,
    /// `-q/--quiet`.
    pub quiet: bool,
}

/// Commit and update change the working copy, which only a mount's daemon holds.
pub(super) fn mount_only(ws: &Workspace) -> Result<()> {
    if ws.mount.is_none() {
        return Err(abort(format!(
            "{} is not a revfs mount (commit and update run inside a mount, or with -R MOUNTPOINT)",
            ws.root.display()
        )));
    }
    Ok(())
}

pub(super) fn working_parent(ws: &Workspace) -> Node {
    ws.scope.working_parent.unwrap_or(Node::NULL)
}

/// hg's branch heads: open revisions of `branch` without a child on the same branch,
/// oldest first.
pub(super) fn branch_heads(repo: &Repo, branch: &[u8]) -> Result<Vec<Rev>> {
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

/// The branch of the changeset `node` (`default` for the null revision).
pub(super) fn branch_of(repo: &Repo, node: &Node) -> Result<Vec<u8>> {
    Ok(match repo.changelog().rev_of(node) {
        Some(rev) if !node.is_null() => repo.changeset(rev)?.branch().to_vec(),
        _ => b"default".to_vec(),
    })
}

/// hg's `bookmarks.update(repo, parents, node)`: the active bookmark of `marks` follows a
/// commit or an update from one of `parents` to `node`. True when it moved (or a divergent
/// copy went): `marks` is written under the repository's store lock, as hg writes them.
pub(super) fn move_active_bookmark(
    repo: &Repo,
    share: &Path,
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

/// The message `-m` or `-l` gives (empty without either).
fn message(opts: &CommitOptions) -> Result<Vec<u8>> {
    Ok(match (&opts.message, &opts.logfile) {
        (Some(_), Some(_)) => {
            return Err(abort(
                "options --message and --logfile are mutually exclusive",
            ))
        }
        (Some(m), None) => m.clone().into_bytes(),
        (None, Some(f)) if f.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
            buf
        }
        (None, Some(f)) => std::fs::read(f)
            .map_err(|e| abort(format!("can't read commit message '{}': {e}", f.display())))?,
        (None, None) => Vec::new(),
    })
}

/// `hg commit [FILE]...` in the mount of `ws`; the exit code (1: nothing changed).
pub fn commit(
    ws: &Workspace,
    files: &[String],
    opts: &CommitOptions,
    progress: &mut dyn Progress,
) -> Result<u8> {
    mount_only(ws)?;
    let _wlock = ws.wlock()?;
    ws.refuse_merge("commit")?;
    let message = message(opts)?;
    // hg's order: the date, addremove, the named files, "nothing changed", the message,
    // then the user (inside the transaction).
    let cfg = revfs_hg::config::Config::load(Some(ws.repo_root()))?;
    let (time, tz) = revfs_hg::date::commit_date(opts.date.as_deref())?;
    // A `.hgsub` that the commit would track makes hg commit subrepositories; refused
    // before anything changes (hg's dirstate guard undoes `-A` when it stops).
    let hgsub_on_disk = std::fs::symlink_metadata(ws.root.join(".hgsub")).is_ok();
    if opts.addremove && hgsub_on_disk {
        return Err(abort(
            ".hgsub: subrepositories are not supported by revfs (use hg instead)",
        ));
    }
    let mut undo = None;
    if opts.addremove {
        // hg's `commit -A`: no rename detection; paths relative to the current directory
        // only when files were named.
        let relative = !files.is_empty();
        let (code, u) = super::track::addremove_files(ws, files, false, relative, false)?;
        if code != 0 {
            u.apply(ws)?;
            return Err(abort(
                "failed to mark all new/missing files as added/removed",
            ));
        }
        undo = Some(u);
    }
    // hg's dirstate guard: when the commit stops, what `-A` did is undone.
    let commit = Commit {
        ws,
        files,
        opts,
        cfg,
        date: (time, tz),
        message,
    };
    let done = commit.choose().and_then(|chosen| match chosen {
        Some((chosen, committing)) => commit.write(chosen, &committing, progress),
        None => Ok(1),
    });
    match done {
        Err(e) => {
            if let Some(u) = undo {
                u.apply(ws)?;
            }
            Err(e)
        }
        ok => ok,
    }
}

/// A commit past its first checks (and `-A`).
struct Commit<'a> {
    ws: &'a Workspace,
    files: &'a [String],
    opts: &'a CommitOptions,
    cfg: revfs_hg::config::Config,
    date: (i64, i32),
    message: Vec<u8>,
}

impl Commit<'_> {
    /// The files to commit, and those of them not removed (which `-v` names), after hg's
    /// checks of the named files; `None` when nothing changed (said unless quiet).
    #[allow(clippy::type_complexity)]
    fn choose(&self) -> Result<Option<(Vec<Vec<u8>>, Vec<Vec<u8>>)>> {
        let (ws, files, opts) = (self.ws, self.files, self.opts);
        let fetched = super::status::fetch(ws, false, false, false)?;
        let ctx = PathContext::new(&ws.root)?;
        let matcher = Matcher::new(&ctx, files)?;
        let walked = super::walk::walk_silent(ws, &ctx, &matcher, fetched);
        // A named file the walk cannot use stops the commit (paths as in the repository).
        if let Some((f, msg)) = walked.bad.first() {
            return Err(abort(format!("{}: {msg}", lossy(f))));
        }
        let letters: BTreeMap<&[u8], char> =
            walked.all.iter().map(|(l, p)| (p.as_slice(), *l)).collect();
        let base = ws.repo()?.manifest_of(ws.resolve_single(Some("."))?)?;
        // A tracked `.hgsub` makes hg commit subrepositories and write `.hgsubstate`.
        let base_has_hgsub = base.find(b".hgsub")?.is_some();
        let hgsub = letters.get(&b".hgsub"[..]).copied();
        if (base_has_hgsub && hgsub != Some('R')) || hgsub == Some('A') {
            return Err(abort(
                ".hgsub: subrepositories are not supported by revfs (use hg instead)",
            ));
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
                    return Err(abort(format!("{}: file not found!", lossy(f))));
                }
                let dir = [f.as_slice(), b"/"].concat();
                let on_disk_dir = std::fs::metadata(ws.root.join(std::ffi::OsStr::from_bytes(f)))
                    .is_ok_and(|m| m.is_dir());
                if on_disk_dir || base.iter_prefix(&dir).next().is_some() {
                    if !chosen.iter().any(|c| c.starts_with(&dir)) {
                        return Err(abort(format!("{}: no match under directory!", lossy(f))));
                    }
                } else if !letters.contains_key(f.as_slice()) && base.find(f)?.is_none() {
                    return Err(abort(format!("{}: file not tracked!", lossy(f))));
                }
            }
        }
        // hg's commit refuses while an update or a merge left conflicts (after `-A`, which
        // its dirstate guard undoes, and the named files).
        if revfs_hg::mergestate::unresolved(&ws.mount()?.share_dir())? > 0 {
            return Err(abort("unresolved merge conflicts (see 'hg help resolve')"));
        }
        if chosen.is_empty() {
            if !opts.quiet {
                let missing = walked.entries().filter(|(l, _)| *l == '!').count();
                if missing > 0 {
                    println!("nothing changed ({missing} missing files, see 'hg status')");
                } else {
                    println!("nothing changed");
                }
            }
            return Ok(None);
        }
        let committing = chosen
            .iter()
            .filter(|p| letters.get(p.as_slice()) != Some(&'R'))
            .cloned()
            .collect();
        Ok(Some((chosen, committing)))
    }

    /// The message and the user checked, the changeset written by the daemon, the active
    /// bookmark moved; `committing` are the files named by `-v` (those not removed).
    fn write(
        self,
        chosen: Vec<Vec<u8>>,
        committing: &[Vec<u8>],
        progress: &mut dyn Progress,
    ) -> Result<u8> {
        let Commit {
            ws,
            opts,
            cfg,
            date: (time, tz),
            message,
            ..
        } = self;
        // A message given is taken as it is (hg strips it; whitespace only makes an empty
        // description); without one hg runs an editor, which revfs does not.
        if message.is_empty() {
            return Err(abort("empty commit message"));
        }
        let description = stripdesc(&message);
        let user = match cfg.commit_user(
            opts.user.as_deref(),
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
        let branch = crate::service::share::branch(&share);
        let heads_before = branch_heads(ws.repo()?, &branch)?;
        let p1rev = ws.repo()?.changelog().rev_of(&p1).filter(|_| !p1.is_null());
        progress.start("committing");
        let req = Request::Commit {
            paths: Some(chosen),
            user: user.into_bytes(),
            time,
            tz,
            message: description,
        };
        let node = match ws.request_with_progress(&req, progress)? {
            Response::Committed { node } => {
                Node::from_hex(node.as_bytes()).ok_or_else(|| abort("bad node from the daemon"))?
            }
            Response::NothingChanged => {
                if !opts.quiet {
                    println!("nothing changed");
                }
                return Ok(1);
            }
            other => return Err(unexpected(&other)),
        };
        if opts.verbose && !opts.quiet {
            println!("committing files:");
            for p in committing {
                println!("{}", lossy(p));
            }
            println!("committing manifest");
            println!("committing changelog");
        }
        if !opts.quiet
            && !heads_before.is_empty()
            && !p1rev.is_some_and(|r| heads_before.contains(&r))
        {
            println!("created new head");
        }
        if let Some(r) = p1rev {
            let cs = ws.repo()?.changeset(r)?;
            if !opts.quiet && cs.closes_branch() && cs.branch() == branch.as_slice() {
                println!("reopening closed branch head {r}");
            }
        }
        // hg's commit moves the active bookmark along (`bookmarks.update`), silently.
        let repo = Repo::open(ws.repo_root())?;
        move_active_bookmark(&repo, &share, &mut Bookmarks::load(&repo)?, &[p1], node)?;
        if opts.verbose && !opts.quiet {
            let rev = repo.changelog().rev_of(&node).map_or(-1, |r| r as i64);
            println!("committed changeset {rev}:{}", &node.to_hex()[..12]);
        }
        Ok(0)
    }
}
