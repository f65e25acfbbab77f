//! The daemon's answers to control requests: [`handle`] dispatches each request to one
//! function of its own. Kernel invalidations are sent (through the invalidation thread)
//! after the working copy's locks are released, and before the answer.

use crate::busy::Busy;
use crate::checkout::{CommitSpec, ProgressFn};
use crate::fuse::notify::{path_invalidations, Invalidator};
use crate::fuse::passthrough::Passthrough;
use crate::service::control::{self, MountInfo, Progress, RedirectOp, Request, Response};
use crate::service::redirect::{self, Redirections};
use crate::service::state::{MountState, StateDir};
use crate::wc::status::StatusRequest;
use crate::wc::Invalidation;
use crate::wc::{PathChange, WcError, WorkingCopy};
use revfs_store::{Node, StoreError};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

type Answer = Result<Response, WcError>;

/// What the control handler works with.
pub(super) struct Ctx {
    pub(super) wc: Arc<WorkingCopy>,
    pub(super) invalidator: Arc<Invalidator>,
    pub(super) busy: Arc<Busy>,
    pub(super) pid_file: PathBuf,
    pub(super) state_dir: StateDir,
    pub(super) state: std::sync::Mutex<MountState>,
    pub(super) mountpoint: PathBuf,
    pub(super) repo: PathBuf,
    pub(super) passthrough: Arc<Passthrough>,
    /// Tells inotify watchers of the daemon's own changes (`fuse/events.rs`).
    pub(super) events: Arc<crate::fuse::events::Events>,
    /// How the kernel hands the mount its requests (`uring::mode`).
    pub(super) requests: String,
}

impl Ctx {
    fn info(&self) -> MountInfo {
        let node = self.wc.base_node();
        let rev = self
            .wc
            .repo()
            .changelog()
            .rev_of(&node)
            .map_or(-1, |r| r as i64);
        MountInfo {
            pid: std::process::id(),
            repo: self.repo.clone(),
            mountpoint: self.mountpoint.clone(),
            node: node.to_hex(),
            rev,
            inodes: self.wc.inode_count() as u64,
            protocol: control::PROTOCOL_VERSION,
            p2: Some(self.wc.merge_parent())
                .filter(|n| !n.is_null())
                .map(|n| n.to_hex()),
            passthrough: Some(self.passthrough.mode().to_string()),
            requests: Some(self.requests.clone()),
        }
    }

    /// The working copy's `.hg` (an hg share).
    fn share_dir(&self) -> PathBuf {
        crate::service::share::dir(self.state_dir.path())
    }

    /// Follows a new working-copy parent in `mount.json` (the journal already names it),
    /// unless it is provisional (set inside an hg transaction), which the journal does not
    /// name either.
    fn save_parent(&self, node: Node) {
        self.wc.map_base_in_background();
        if self.wc.parent_provisional() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.node = node.to_hex();
        if let Err(e) = self.state_dir.save(&state) {
            tracing::error!("saving the mount state: {e}");
        }
    }

    /// Sends `items` to the kernel, reporting how far it came as `progress`.
    fn invalidate(&self, items: Vec<Invalidation>, progress: &Progress) {
        self.invalidator.send_all(items, &|done, total| {
            progress.report("invalidating kernel caches", done, total)
        })
    }

    /// Sends `items`, the kernel's invalidations of `changes`, and tells inotify watchers
    /// of `changes` (`events.rs`: its names are answered before the invalidations, its
    /// calls made after them).
    fn invalidate_and_tell(
        &self,
        items: Vec<Invalidation>,
        changes: &[PathChange],
        progress: &Progress,
    ) {
        self.events.tell(
            &self.wc,
            changes,
            || self.invalidate(items, progress),
            &|done, total| progress.report("telling watchers", done, total),
        )
    }
}

/// Answers one control request.
pub(super) fn handle(ctx: &Ctx, req: Request, progress: &Progress) -> Answer {
    let report = |what: &str, done, total| progress.report(what, done, total);
    let report = progress.wanted().then_some(&report as ProgressFn);
    match req {
        Request::Ping => Ok(ping(ctx)),
        Request::Info => Ok(Response::Info(ctx.info())),
        Request::Stats => Ok(stats(ctx)),
        Request::Status {
            clean,
            ignored,
            unknown,
            dirs,
            ignore_files,
        } => status(
            ctx,
            StatusRequest {
                clean,
                ignored,
                unknown,
                ignore_files,
            },
            dirs,
        ),
        Request::Copies => Ok(Response::Copies {
            copies: ctx.wc.copies().into_iter().collect(),
        }),
        Request::Lookup { paths } => Ok(Response::Lookup {
            entries: ctx.wc.path_states(&paths)?,
        }),
        Request::Track { paths, track, txn } => track_paths(ctx, paths, track, txn),
        Request::Copy { copies, txn } => copy(ctx, copies, txn),
        Request::ConfirmTracking => {
            ctx.wc.confirm_tracking()?;
            Ok(Response::Done)
        }
        Request::Restore { paths } => restore(ctx, &paths, progress),
        Request::Commit {
            paths,
            user,
            time,
            tz,
            message,
        } => commit(
            ctx,
            CommitSpec {
                paths,
                user,
                time,
                tz,
                description: message,
                branch: Some(crate::service::share::branch(&ctx.share_dir())),
            },
            report,
        ),
        Request::CaseVariants { paths } => Ok(Response::CaseVariants {
            entries: paths
                .iter()
                .map(|p| ctx.wc.case_variants(p))
                .collect::<Result<_, _>>()?,
        }),
        Request::SetParent {
            node,
            files,
            p2,
            from_p2,
            in_p1,
            pending,
        } => {
            let hg = crate::checkout::HgFiles {
                tracked: files,
                in_p1: in_p1.map(|v| v.into_iter().collect()),
                from_p2: from_p2.into_iter().collect(),
            };
            set_parent(ctx, node, p2, &hg, pending)
        }
        Request::Update {
            node,
            clean,
            keep,
            dry_run,
            pending,
        } => {
            let keep: BTreeSet<Vec<u8>> = keep.into_iter().collect();
            let how = crate::checkout::UpdateHow {
                clean,
                hg_paths: &keep,
                dry_run,
                pending,
            };
            update(ctx, node, &how, report, progress)
        }
        Request::Prefetch { node, paths } => prefetch(ctx, node, &paths, report),
        Request::Changes { since } => changes(ctx, since.as_deref()),
        Request::Shutdown => Ok(shutdown(ctx)),
        Request::Quiesce => {
            ctx.passthrough
                .leases
                .quiesce(control::QUIESCE_PAUSE, control::QUIESCE_WAIT);
            Ok(Response::Done)
        }
        Request::Redirect { op } => redirect(ctx, op),
        Request::DebugNoPush => Ok(debug_only("debug_no_push", || {
            ctx.passthrough.stop_background_pushes();
            ctx.wc.stop_walking();
        })),
        Request::DebugPushDelay { ms } => Ok(debug_only("debug_push_delay", || {
            ctx.passthrough.push_delay.set(Duration::from_millis(ms))
        })),
        Request::DebugPushHold { on } => Ok(debug_only("debug_push_hold", || {
            ctx.passthrough.push_delay.hold(on)
        })),
        Request::DebugPushHeld { ms } => Ok(match debug_only("debug_push_held", || ()) {
            Response::Done => Response::PushHeld {
                inos: ctx.passthrough.push_delay.held(Duration::from_millis(ms)),
            },
            refused => refused,
        }),
        Request::DebugPushRelease { ino } => Ok(match debug_only("debug_push_release", || ()) {
            Response::Done if !ctx.passthrough.push_delay.release(ino) => Response::Error {
                message: format!("no push of inode {ino} is stopped"),
            },
            answer => answer,
        }),
        Request::DebugOpenDelay { ms } => Ok(debug_only("debug_open_delay", || {
            ctx.passthrough.open_delay.set(Duration::from_millis(ms))
        })),
        Request::DebugLookupDelay { ms } => Ok(debug_only("debug_lookup_delay", || {
            ctx.passthrough.lookup_delay.set(Duration::from_millis(ms))
        })),
        Request::DebugHang => Ok(debug_only("debug_hang", || debug_hang(ctx))),
    }
}

/// A node named in hex by a request.
fn node_of(hex: String) -> Result<Node, WcError> {
    Node::from_hex(hex.as_bytes()).ok_or(WcError::Store(StoreError::UnknownRevision(hex)))
}

fn ping(ctx: &Ctx) -> Response {
    let (busy, oldest) = ctx.busy.snapshot();
    Response::Pong {
        pid: std::process::id(),
        busy_ms: oldest.as_millis() as u64,
        busy,
    }
}

fn stats(ctx: &Ctx) -> Response {
    let wc = &ctx.wc;
    let s = wc.memory_stats();
    let (passthrough_opens, cached_opens, pushed_opens) = ctx.passthrough.counts();
    Response::Stats {
        entries: s.entries,
        frozen: s.frozen,
        manifests: s.manifests,
        manifest_bytes: s.manifest_bytes,
        mapped_manifest_bytes: s.mapped_manifest_bytes,
        listed: s.listed,
        readahead: wc.readahead_stats(),
        open_filelogs: wc.repo().open_filelogs().0 as u64,
        passthrough_opens,
        cached_opens,
        pushed_opens,
        lease_listings: ctx.passthrough.leases.listings(),
        requests: fuser::request_counts().into_iter().collect(),
    }
}

fn status(ctx: &Ctx, req: StatusRequest, dirs: bool) -> Answer {
    let wc = &ctx.wc;
    let warnings = req.ignored || req.unknown;
    let ignored = req.ignored;
    let want_dirs = dirs;
    let mut entries: Vec<(char, Vec<u8>)> = wc
        .status(req)?
        .into_iter()
        .map(|e| (e.letter, e.path))
        .collect();
    // The files in redirections are ignored, as if `.hgignore` named them: the daemon
    // never sees them, they are listed from their directories on local disk; the
    // directories below them are among those a purge of ignored files may empty, and a
    // redirection's own directory, a mountpoint, is never one.
    let mut dirs = if dirs { wc.changed_dirs()? } else { Vec::new() };
    if ignored || !dirs.is_empty() {
        let redirect_err =
            |e: redirect::RedirectError| WcError::Io(std::io::Error::other(e.to_string()));
        let reds = Redirections::of(ctx.state_dir.path());
        let list = reds.load().map_err(redirect_err)?;
        dirs.retain(|d| !list.iter().any(|r| r.as_bytes() == d.as_slice()));
        if ignored && !list.is_empty() {
            let redirect::Contents {
                files,
                dirs: redirected_dirs,
            } = redirect::contents(&reds, &list).map_err(redirect_err)?;
            if !files.is_empty() {
                entries.extend(files.into_iter().map(|p| ('I', p)));
                let rank = |l: char| crate::wc::status::ORDER.iter().position(|&o| o == l);
                entries.sort_by(|a, b| (rank(a.0), &a.1).cmp(&(rank(b.0), &b.1)));
            }
            if want_dirs && !redirected_dirs.is_empty() {
                dirs.extend(redirected_dirs);
                dirs.sort();
            }
        }
    }
    Ok(Response::Status {
        entries,
        copies: wc.copies().into_iter().collect(),
        warnings: if warnings {
            wc.ignore_warnings()
        } else {
            Vec::new()
        },
        dirs,
    })
}

/// A change to the redirections: each answered once its binds are made or undone.
fn redirect(ctx: &Ctx, op: RedirectOp) -> Answer {
    let reds = Redirections::of(ctx.state_dir.path());
    let done = match op {
        RedirectOp::Add { path } => {
            redirect::add(&reds, &ctx.wc, &ctx.mountpoint, &path).map(|()| Response::Done)
        }
        RedirectOp::Remove { path, force } => {
            redirect::remove(&reds, &ctx.mountpoint, &path, force).map(|()| Response::Done)
        }
        RedirectOp::Unbind => redirect::unbind_all(&reds, &ctx.mountpoint, false).map(|paths| {
            if !paths.is_empty() {
                tracing::info!(
                    redirections = paths.len(),
                    "redirections unbound for an unmount"
                );
            }
            Response::Done
        }),
        RedirectOp::Bind => {
            redirect::bind_all(&reds, &ctx.mountpoint);
            Ok(Response::Done)
        }
    };
    Ok(done.unwrap_or_else(|e| Response::Error {
        message: e.to_string(),
    }))
}

/// An update to a revision that tracks files in a redirection is refused: they would go
/// into the mount under the bind, where no program sees them.
fn redirect_tracked_in(
    ctx: &Ctx,
    repo: &revfs_store::Repo,
    node: &Node,
) -> Result<Option<Response>, WcError> {
    let list = match Redirections::of(ctx.state_dir.path()).load() {
        Ok(l) if l.is_empty() => return Ok(None),
        Ok(l) => l,
        Err(e) => {
            return Ok(Some(Response::Error {
                message: e.to_string(),
            }))
        }
    };
    let Some(manifest) = repo.manifest_at(node)? else {
        return Ok(None);
    };
    for r in list {
        let prefix = format!("{r}/");
        let tracked = match manifest.find(r.as_bytes())? {
            Some(_) => Some(r.clone()),
            None => match manifest.iter_prefix(prefix.as_bytes()).next() {
                Some(e) => Some(String::from_utf8_lossy(e?.path).into_owned()),
                None => None,
            },
        };
        if let Some(path) = tracked {
            return Ok(Some(Response::Error {
                message: format!(
                    "revision {} tracks {path}, in the redirection {r} (remove it first: revfs redirect remove {r})",
                    &node.to_hex()[..12]
                ),
            }));
        }
    }
    Ok(None)
}

/// `add`/`forget` of paths; inside an hg transaction (`txn`), tentatively.
fn track_paths(
    ctx: &Ctx,
    paths: Vec<Vec<u8>>,
    track: crate::wc::journal::Track,
    txn: bool,
) -> Answer {
    if track == crate::wc::journal::Track::Added {
        let added: Vec<&[u8]> = paths.iter().map(Vec::as_slice).collect();
        if let Err(e) = redirect::refuse_tracking(&Redirections::of(ctx.state_dir.path()), &added) {
            return Ok(Response::Error {
                message: e.to_string(),
            });
        }
    }
    for p in paths {
        if txn {
            ctx.wc.set_tracking_tentative(&p, track)?;
        } else {
            ctx.wc.set_tracking(&p, track)?;
        }
    }
    Ok(Response::Done)
}

/// Copy sources set or cleared; inside an hg transaction (`txn`), tentatively.
fn copy(ctx: &Ctx, copies: Vec<(Vec<u8>, Option<Vec<u8>>)>, txn: bool) -> Answer {
    let dests: Vec<&[u8]> = copies
        .iter()
        .filter(|(_, s)| s.is_some())
        .map(|(d, _)| d.as_slice())
        .collect();
    if let Err(e) = redirect::refuse_tracking(&Redirections::of(ctx.state_dir.path()), &dests) {
        return Ok(Response::Error {
            message: e.to_string(),
        });
    }
    for (dest, source) in copies {
        if txn {
            ctx.wc.set_copy_tentative(&dest, source.as_deref())?;
        } else {
            ctx.wc.set_copy(&dest, source.as_deref())?;
        }
    }
    Ok(Response::Done)
}

/// Paths put back as the parent has them (revert).
fn restore(ctx: &Ctx, paths: &[Vec<u8>], progress: &Progress) -> Answer {
    let wc = &*ctx.wc;
    let mut items = Vec::new();
    let mut changes = Vec::new();
    let mut result = Ok(());
    for p in paths {
        let old = wc.entry_at(p);
        // The first directory on the way that is not there: the restore makes it (none
        // when the file's own directory is there).
        let parent = &p[..p.iter().rposition(|&b| b == b'/').unwrap_or(0)];
        let missing = if parent.is_empty() || wc.entry_at(parent).is_some() {
            None
        } else {
            (0..p.len())
                .filter(|&i| p[i] == b'/')
                .map(|i| &p[..i])
                .find(|dir| wc.entry_at(dir).is_none())
        };
        match wc.restore(p) {
            Ok(linked) => items.extend(linked.map(Invalidation::Inode)),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        if let Some(dir) = missing {
            changes.push(PathChange {
                path: dir.to_vec(),
                old: None,
                new: wc.entry_at(dir),
                content: true,
            });
        }
        changes.push(PathChange {
            path: p.clone(),
            old,
            new: wc.entry_at(p),
            content: true,
        });
        path_invalidations(wc, p, &mut items);
    }
    // What was restored before an error is invalidated and told all the same.
    ctx.invalidate_and_tell(items, &changes, progress);
    result?;
    Ok(Response::Done)
}

/// What changed since a cursor (`revfs watch`).
fn changes(ctx: &Ctx, since: Option<&str>) -> Answer {
    let cursor = match since.map(str::parse::<crate::wc::feed::Cursor>) {
        // `revfs watch` checks the cursor before it asks.
        Some(Err(_)) => return Err(WcError::Invalid),
        Some(Ok(c)) => Some(c),
        None => None,
    };
    let answer = ctx.wc.changes_since(cursor.as_ref());
    Ok(Response::Changes {
        cursor: answer.cursor.to_string(),
        fresh: answer.fresh,
        changes: answer
            .changes
            .into_iter()
            .map(|(seq, kind, path)| (seq, kind.word().to_string(), path))
            .collect(),
    })
}

fn commit(ctx: &Ctx, spec: CommitSpec, report: Option<ProgressFn>) -> Answer {
    match ctx.wc.commit(&spec, report) {
        Ok(node) => {
            ctx.save_parent(node);
            tracing::info!(node = %node.to_hex(), "committed");
            Ok(Response::Committed {
                node: node.to_hex(),
            })
        }
        Err(WcError::NothingChanged) => Ok(Response::NothingChanged),
        Err(e) => Err(e),
    }
}

/// A new parent, the working copy kept (hg's commit, amend, `strip --keep`).
fn set_parent(
    ctx: &Ctx,
    node: String,
    p2: Option<String>,
    hg: &crate::checkout::HgFiles,
    pending: bool,
) -> Answer {
    let node = node_of(node)?;
    let p2 = match p2 {
        Some(hex) => node_of(hex)?,
        None => Node::default(),
    };
    ctx.wc.set_parent(node, p2, hg, pending)?;
    ctx.save_parent(node);
    tracing::info!(node = %node.to_hex(), files = hg.tracked.len(), "new parent, working copy kept");
    Ok(Response::Done)
}

fn update(
    ctx: &Ctx,
    node: String,
    how: &crate::checkout::UpdateHow,
    report: Option<ProgressFn>,
    progress: &Progress,
) -> Answer {
    let wc = &*ctx.wc;
    let node = node_of(node)?;
    if how.clean && (how.dry_run || !how.hg_paths.is_empty()) {
        return Err(WcError::Invalid);
    }
    let repo = wc.repo_for(&node, how.pending)?;
    if let Some(refusal) = redirect_tracked_in(ctx, &repo, &node)? {
        return Ok(refusal);
    }
    match wc.update_around(repo, node, how, report) {
        Ok(outcome) if how.dry_run => Ok(Response::Updated {
            updated: outcome.updated,
            removed: outcome.removed,
            branch: outcome.branch,
        }),
        Ok(outcome) => {
            ctx.save_parent(node);
            // hg's update writes the branch of its target; so does the daemon's, whoever
            // asked for it.
            if let Err(e) = crate::service::share::set_branch(&ctx.share_dir(), &outcome.branch) {
                tracing::error!("writing the share's branch: {e}");
            }
            // After the lock is released: the kernel may call back into us.
            let invalidations = outcome.invalidations.len();
            let mut items = outcome.invalidations;
            for p in &outcome.reverted {
                path_invalidations(wc, p, &mut items);
            }
            ctx.invalidate_and_tell(items, &outcome.changes, progress);
            tracing::info!(node = %node.to_hex(), updated = outcome.updated, removed = outcome.removed, invalidations, "updated");
            Ok(Response::Updated {
                updated: outcome.updated,
                removed: outcome.removed,
                branch: outcome.branch,
            })
        }
        Err(WcError::UncommittedChanges(paths)) => Ok(Response::Conflicts {
            paths,
            untracked: false,
        }),
        Err(WcError::UntrackedDiffers(paths)) => Ok(Response::Conflicts {
            paths,
            untracked: true,
        }),
        Err(WcError::Subrepos) => Ok(Response::Subrepos),
        Err(e) => Err(e),
    }
}

fn prefetch(
    ctx: &Ctx,
    node: Option<String>,
    paths: &[Vec<u8>],
    report: Option<ProgressFn>,
) -> Answer {
    let node = node.map(node_of).transpose()?;
    let t0 = std::time::Instant::now();
    let done = ctx.wc.prefetch(node, paths, report)?;
    tracing::info!(files = done.files, bytes = done.bytes, elapsed = ?t0.elapsed(), "prefetched");
    Ok(Response::Prefetched {
        files: done.files,
        bytes: done.bytes,
    })
}

fn shutdown(ctx: &Ctx) -> Response {
    tracing::info!("shutdown requested: syncing the journal and ending the daemon");
    if let Err(e) = ctx.wc.sync_journal() {
        tracing::error!("final journal sync: {e}");
    }
    let _ = std::fs::remove_file(&ctx.pid_file);
    let _ = std::fs::remove_file(ctx.state_dir.socket());
    // After the answer has gone out. Exiting closes /dev/fuse: the kernel ends the
    // connection, and whatever still waits on the mount gets an error.
    let _ = std::thread::Builder::new()
        .name("revfs-shutdown".into())
        .spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            std::process::exit(0);
        });
    Response::Done
}

/// Runs `f` for request `cmd` in a debug build; a release build answers with an error.
fn debug_only(cmd: &str, f: impl FnOnce()) -> Response {
    if !cfg!(debug_assertions) {
        return Response::Error {
            message: format!("{cmd} is only available in debug builds"),
        };
    }
    f();
    Response::Done
}

/// Holds the working copy's lock forever (tests of a frozen daemon), answered once the
/// lock is held, so that what the client does next hangs.
fn debug_hang(ctx: &Ctx) {
    tracing::warn!("debug_hang: holding the working copy's lock forever");
    let wc = ctx.wc.clone();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let _ = std::thread::Builder::new()
        .name("revfs-dbg-hang".into())
        .spawn(move || {
            let _held = wc.write();
            let _ = held_tx.send(());
            loop {
                std::thread::park();
            }
        });
    let _ = held_rx.recv_timeout(Duration::from_secs(10));
}
