//! The filesystem daemon of one mount: opens the repository, loads or creates the mount's
//! state, serves the tree over FUSE with several request threads, answers the control
//! socket, and unmounts cleanly on SIGTERM or SIGINT.

use crate::busy::Busy;
use crate::checkout::CommitSpec;
use crate::config::LogLevel;
use crate::control::{self, MountInfo, Request, Response};
use crate::fs::{ControlTargets, RevFs};
use crate::notify::{path_invalidations, Invalidator};
use crate::state::{MountState, StateDir, StateError, MOUNT_STATE_VERSION};
use crate::status::StatusRequest;
use crate::wc::{WcError, WorkingCopy};
use fuser::{Config, MountOption, SessionACL};
use revfs_store::repo::RepoOptions;
use revfs_store::{Node, Repo, StoreError};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Errors that stop a mount from starting.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Control(#[from] control::ControlError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the working copy in the state directory cannot be restored: {0}")]
    WorkingCopy(#[from] WcError),
    #[error("revision {0} is not in the repository")]
    UnknownNode(String),
    #[error("the working copy kept for {} has uncommitted changes to {} (mount without -r to resume it)", mountpoint.display(), paths.join(", "))]
    Switch {
        mountpoint: PathBuf,
        paths: Vec<String>,
    },
    #[error("cannot mount on {}: {source}", path.display())]
    Mount {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What to mount where.
#[derive(Debug, Clone)]
pub struct MountRequest {
    /// Repository root.
    pub repo: PathBuf,
    /// Canonical mountpoint.
    pub mountpoint: PathBuf,
    /// Working-copy parent to serve.
    pub node: Node,
    /// FUSE request threads.
    pub threads: usize,
    /// Let other users in (`allow_other`).
    pub allow_other: bool,
    /// The user's configuration (`~/.config/revfs/config.toml`): the daemon applies its
    /// cache sizes and log level. `threads` and `allow_other` above are already resolved
    /// (command line over configuration).
    pub config: crate::config::Config,
}

/// The state a mount starts from: the saved state when it names the same repository and
/// revision (so a remount keeps its checkout time), else a fresh checkout now.
pub fn prepare_state(state_dir: &StateDir, req: &MountRequest) -> Result<MountState, DaemonError> {
    let node = req.node.to_hex();
    if let Some(saved) = state_dir.load()? {
        if saved.repo == req.repo && saved.node == node {
            return Ok(saved);
        }
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let state = MountState {
        version: MOUNT_STATE_VERSION,
        repo: req.repo.clone(),
        mountpoint: req.mountpoint.clone(),
        node,
        checkout_time: now,
    };
    state_dir.save(&state)?;
    Ok(state)
}

/// What the control handler works with.
struct Ctx {
    wc: Arc<WorkingCopy>,
    invalidator: Arc<Invalidator>,
    busy: Arc<Busy>,
    pid_file: PathBuf,
    state_dir: StateDir,
    state: std::sync::Mutex<MountState>,
    mountpoint: PathBuf,
    repo: PathBuf,
    passthrough: Arc<crate::passthrough::Passthrough>,
    /// How the kernel hands the mount its requests (`uring::mode`).
    requests: String,
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
            protocol: crate::control::PROTOCOL_VERSION,
            p2: Some(self.wc.merge_parent())
                .filter(|n| !n.is_null())
                .map(|n| n.to_hex()),
            passthrough: Some(self.passthrough.mode().to_string()),
            requests: Some(self.requests.clone()),
        }
    }

    /// The working copy's `.hg` (an hg share).
    fn share_dir(&self) -> PathBuf {
        crate::share::dir(self.state_dir.path())
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
}

/// Answers one control request. Kernel invalidations are sent (through the invalidation
/// thread) after the working copy's locks are released, and before the answer.
fn handle(ctx: &Ctx, req: Request, progress: &control::Progress) -> Result<Response, WcError> {
    let wc = &*ctx.wc;
    let report = |what: &str, done, total| progress.report(what, done, total);
    let report = progress
        .wanted()
        .then_some(&report as crate::checkout::ProgressFn);
    let invalidate = |items| {
        ctx.invalidator.send_all(items, &|done, total| {
            progress.report("invalidating kernel caches", done, total)
        })
    };
    Ok(match req {
        Request::Ping => {
            let (busy, oldest) = ctx.busy.snapshot();
            Response::Pong {
                pid: std::process::id(),
                busy_ms: oldest.as_millis() as u64,
                busy,
            }
        }
        Request::Info => Response::Info(ctx.info()),
        Request::Stats => {
            let s = wc.memory_stats();
            Response::Stats {
                entries: s.entries,
                frozen: s.frozen,
                manifests: s.manifests,
                manifest_bytes: s.manifest_bytes,
                mapped_manifest_bytes: s.mapped_manifest_bytes,
                listed: s.listed,
                readahead: wc.readahead_stats(),
                open_filelogs: wc.repo().open_filelogs().0 as u64,
                passthrough_opens: ctx.passthrough.counts().0,
                cached_opens: ctx.passthrough.counts().1,
                pushed_opens: ctx.passthrough.counts().2,
                lease_listings: ctx.passthrough.leases.listings(),
            }
        }
        Request::Status {
            clean,
            ignored,
            unknown,
            dirs,
        } => {
            let entries = wc.status(StatusRequest {
                clean,
                ignored,
                unknown,
            })?;
            Response::Status {
                entries: entries.into_iter().map(|e| (e.letter, e.path)).collect(),
                copies: wc.copies().into_iter().collect(),
                warnings: if ignored || unknown {
                    wc.ignore_warnings()
                } else {
                    Vec::new()
                },
                dirs: if dirs { wc.changed_dirs()? } else { Vec::new() },
            }
        }
        Request::Copies => Response::Copies {
            copies: wc.copies().into_iter().collect(),
        },
        Request::Lookup { paths } => Response::Lookup {
            entries: wc.path_states(&paths)?,
        },
        Request::Track { paths, track, txn } => {
            for p in paths {
                if txn {
                    wc.set_tracking_tentative(&p, track)?;
                } else {
                    wc.set_tracking(&p, track)?;
                }
            }
            Response::Done
        }
        Request::Copy { copies, txn } => {
            for (dest, source) in copies {
                if txn {
                    wc.set_copy_tentative(&dest, source.as_deref())?;
                } else {
                    wc.set_copy(&dest, source.as_deref())?;
                }
            }
            Response::Done
        }
        Request::ConfirmTracking => {
            wc.confirm_tracking()?;
            Response::Done
        }
        Request::Restore { paths } => {
            let mut items = Vec::new();
            let mut result = Ok(());
            for p in &paths {
                match wc.restore(p) {
                    Ok(linked) => items.extend(linked.map(crate::checkout::Invalidation::Inode)),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                path_invalidations(wc, p, &mut items);
            }
            // What was restored before an error is invalidated all the same.
            invalidate(items);
            result?;
            Response::Done
        }
        Request::Commit {
            paths,
            user,
            time,
            tz,
            message,
        } => {
            let spec = CommitSpec {
                paths,
                user,
                time,
                tz,
                description: message,
                branch: Some(crate::share::branch(&ctx.share_dir())),
            };
            match wc.commit(&spec, report) {
                Ok(node) => {
                    ctx.save_parent(node);
                    tracing::info!(node = %node.to_hex(), "committed");
                    Response::Committed {
                        node: node.to_hex(),
                    }
                }
                Err(WcError::NothingChanged) => Response::NothingChanged,
                Err(e) => return Err(e),
            }
        }
        Request::CaseVariants { paths } => Response::CaseVariants {
            entries: paths
                .iter()
                .map(|p| wc.case_variants(p))
                .collect::<Result<_, _>>()?,
        },
        Request::SetParent {
            node,
            files,
            p2,
            from_p2,
            in_p1,
            pending,
        } => {
            let node = Node::from_hex(node.as_bytes())
                .ok_or_else(|| WcError::Store(StoreError::UnknownRevision(node.clone())))?;
            let p2 = match p2 {
                Some(hex) => Node::from_hex(hex.as_bytes())
                    .ok_or(WcError::Store(StoreError::UnknownRevision(hex)))?,
                None => Node::default(),
            };
            let count = files.len();
            let hg = crate::checkout::HgFiles {
                tracked: files,
                in_p1: in_p1.map(|v| v.into_iter().collect()),
                from_p2: from_p2.into_iter().collect(),
            };
            wc.set_parent(node, p2, &hg, pending)?;
            ctx.save_parent(node);
            tracing::info!(node = %node.to_hex(), files = count, "new parent, working copy kept");
            Response::Done
        }
        Request::Update {
            node,
            clean,
            keep,
            dry_run,
            pending,
        } => {
            let node = Node::from_hex(node.as_bytes())
                .ok_or_else(|| WcError::Store(StoreError::UnknownRevision(node.clone())))?;
            if clean && (dry_run || !keep.is_empty()) {
                return Err(WcError::Invalid);
            }
            let keep: BTreeSet<Vec<u8>> = keep.into_iter().collect();
            let repo = wc.repo_for(&node, pending)?;
            let how = crate::checkout::UpdateHow {
                clean,
                hg_paths: &keep,
                dry_run,
                pending,
            };
            match wc.update_around(repo, node, &how, report) {
                Ok(outcome) if dry_run => Response::Updated {
                    updated: outcome.updated,
                    removed: outcome.removed,
                    branch: outcome.branch,
                },
                Ok(outcome) => {
                    ctx.save_parent(node);
                    // hg's update writes the branch of its target; so does the daemon's,
                    // whoever asked for it.
                    if let Err(e) = crate::share::set_branch(&ctx.share_dir(), &outcome.branch) {
                        tracing::error!("writing the share's branch: {e}");
                    }
                    // After the lock is released: the kernel may call back into us.
                    let invalidations = outcome.invalidations.len();
                    let mut items = outcome.invalidations;
                    for p in &outcome.reverted {
                        path_invalidations(wc, p, &mut items);
                    }
                    invalidate(items);
                    tracing::info!(node = %node.to_hex(), updated = outcome.updated, removed = outcome.removed, invalidations, "updated");
                    Response::Updated {
                        updated: outcome.updated,
                        removed: outcome.removed,
                        branch: outcome.branch,
                    }
                }
                Err(WcError::UncommittedChanges(paths)) => Response::Conflicts {
                    paths,
                    untracked: false,
                },
                Err(WcError::UntrackedDiffers(paths)) => Response::Conflicts {
                    paths,
                    untracked: true,
                },
                Err(e) => return Err(e),
            }
        }
        Request::Prefetch { node, paths } => {
            let node = match node {
                Some(hex) => Some(
                    Node::from_hex(hex.as_bytes())
                        .ok_or(WcError::Store(StoreError::UnknownRevision(hex)))?,
                ),
                None => None,
            };
            let t0 = std::time::Instant::now();
            let done = wc.prefetch(node, &paths, report)?;
            tracing::info!(files = done.files, bytes = done.bytes, elapsed = ?t0.elapsed(), "prefetched");
            Response::Prefetched {
                files: done.files,
                bytes: done.bytes,
            }
        }
        Request::Shutdown => {
            tracing::info!("shutdown requested: syncing the journal and ending the daemon");
            if let Err(e) = wc.sync_journal() {
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
        Request::Quiesce => {
            ctx.passthrough
                .leases
                .quiesce(control::QUIESCE_PAUSE, control::QUIESCE_WAIT);
            Response::Done
        }
        Request::DebugNoPush => {
            if !cfg!(debug_assertions) {
                return Ok(Response::Error {
                    message: "debug_no_push is only available in debug builds".into(),
                });
            }
            ctx.passthrough.stop_background_pushes();
            ctx.wc.stop_walking();
            Response::Done
        }
        Request::DebugPushDelay { ms }
        | Request::DebugOpenDelay { ms }
        | Request::DebugLookupDelay { ms } => {
            let (cmd, delay) = match req {
                Request::DebugPushDelay { .. } => ("debug_push_delay", &ctx.passthrough.push_delay),
                Request::DebugOpenDelay { .. } => ("debug_open_delay", &ctx.passthrough.open_delay),
                _ => ("debug_lookup_delay", &ctx.passthrough.lookup_delay),
            };
            if !cfg!(debug_assertions) {
                return Ok(Response::Error {
                    message: format!("{cmd} is only available in debug builds"),
                });
            }
            delay.set(Duration::from_millis(ms));
            Response::Done
        }
        Request::DebugHang => {
            if !cfg!(debug_assertions) {
                return Ok(Response::Error {
                    message: "debug_hang is only available in debug builds".into(),
                });
            }
            tracing::warn!("debug_hang: holding the working copy's lock forever");
            let wc = ctx.wc.clone();
            // Answered once the lock is held, so that what the client does next hangs.
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
            let _ = held_rx.recv_timeout(std::time::Duration::from_secs(10));
            Response::Done
        }
    })
}

/// Sends tracing output to the mount's log file, with the level from `REVFS_LOG` when it is
/// set (and valid), else `level` (the configuration's `[log] level`). Returns the filter
/// in effect, for the log.
pub fn init_logging(log_file: &Path, level: LogLevel) -> Result<String, DaemonError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file)
        .map_err(|source| DaemonError::Io {
            path: log_file.to_owned(),
            source,
        })?;
    let (filter, described) = match tracing_subscriber::EnvFilter::try_from_env("REVFS_LOG") {
        Ok(f) => {
            let d = format!("{f} (REVFS_LOG)");
            (f, d)
        }
        Err(_) => (
            tracing_subscriber::EnvFilter::new(level.as_str()),
            level.as_str().to_owned(),
        ),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .try_init();
    Ok(described)
}

/// Raises the soft limit on open descriptors to the hard limit: the soft limit before, and
/// the soft and hard limits now. (The daemon's descriptors are bounded by its settings, not
/// by the number of files; the raise leaves room for kernel and tool bursts.)
pub fn raise_descriptor_limit() -> std::io::Result<(u64, u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let was = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
    }
    Ok((was, lim.rlim_cur, lim.rlim_max))
}

/// Runs the daemon in this process until the filesystem is unmounted.
pub fn run(req: MountRequest) -> Result<(), DaemonError> {
    // Many request threads each get a malloc arena by default; the texts they free then
    // stay mapped in their arena. Two arenas keep the RSS near what is really in use
    // (measured: 410 MB against 140 MB after reading drivers/ of the linux tree).
    // SAFETY: mallopt only tunes the allocator; called before the threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    let state_dir = StateDir::for_mountpoint(&req.mountpoint)?;
    state_dir.create()?;
    // Held until the process ends: a second daemon for this working copy stops here.
    let _lock = state_dir.lock()?;
    let log_filter = init_logging(&state_dir.log_file(), req.config.log.level)?;
    // Every repository handle of this process (the ones reopened after a commit or an
    // update too) gets the configured cache sizes.
    let options = req.config.repo_options();
    RepoOptions::set_process_default(options);
    let config_file = match &req.config.file {
        Some(p) => p.display().to_string(),
        None => "none".to_owned(),
    };
    tracing::info!(
        config = %config_file,
        threads = req.threads.max(1),
        allow_other = req.allow_other,
        text_cache_size = options.text_cache_bytes,
        open_filelogs = options.open_filelogs,
        filelog_cache_size = options.filelog_cache_bytes,
        manifest_cache_size = options.manifest_cache_bytes,
        size_cache_size = options.size_cache_bytes,
        open_files = req.config.mount.open_files,
        loaded_files = req.config.mount.loaded_files,
        listed_files = req.config.mount.listed_files,
        readahead_threads = req.config.mount.readahead_threads,
        readahead_size = req.config.mount.readahead_size,
        passthrough = req.config.mount.passthrough,
        io_uring = req.config.mount.io_uring,
        log = %log_filter,
        "settings"
    );
    match raise_descriptor_limit() {
        Ok((was, soft, hard)) => {
            tracing::info!(soft_limit = soft, hard_limit = hard, was, "descriptors")
        }
        Err(e) => tracing::warn!("the descriptor limit cannot be read or raised: {e}"),
    }
    // A working copy kept here at another parent goes to the requested one as `update`
    // would take it there: opened at its own parent, then updated (the command checked that
    // it has no uncommitted changes; an update keeps unknown and ignored files).
    let kept_parent = match state_dir.load()? {
        Some(saved) if saved.repo == req.repo => {
            state_dir.journal_parent()?.filter(|p| *p != req.node)
        }
        _ => None,
    };
    let open_at = kept_parent.unwrap_or(req.node);
    let mut state = prepare_state(
        &state_dir,
        &MountRequest {
            node: open_at,
            ..req.clone()
        },
    )?;
    let repo = Arc::new(Repo::open(&req.repo)?);
    // The base manifest: mapped from the repository's manifest cache when an earlier mount
    // or commit at this revision wrote it there (a mount then reads only the pages it needs),
    // else rebuilt into a new cache file and mapped from it (kept in the background).
    let manifest_node = repo
        .manifest_node_at(&open_at)?
        .ok_or_else(|| DaemonError::UnknownNode(open_at.to_hex()))?;
    let t0 = std::time::Instant::now();
    let (manifest, new_file) = repo.kept_manifest(&manifest_node)?;
    tracing::info!(
        node = %manifest_node.to_hex(),
        mapped = manifest.text().is_mapped(),
        rebuilt = new_file.is_some(),
        bytes = manifest.text().len(),
        elapsed = ?t0.elapsed(),
        "base manifest"
    );
    let checkout_time = UNIX_EPOCH + Duration::from_secs(state.checkout_time.max(0) as u64);
    let wc = Arc::new(WorkingCopy::open(
        repo.clone(),
        open_at,
        manifest,
        state_dir.path(),
        checkout_time,
        req.config.mount.open_files,
    )?);
    wc.set_root_path(req.mountpoint.clone());
    wc.set_loaded_files(req.config.mount.loaded_files);
    wc.set_listed_files(req.config.mount.listed_files);
    wc.start_readahead(
        req.config.mount.readahead_threads,
        req.config.mount.readahead_size,
    );
    match new_file {
        // Checked against its node as it was written.
        Some(file) => file.keep_in_background(),
        None => wc.verify_base_in_background(),
    }
    wc.map_base_in_background();
    if kept_parent.is_some() {
        if repo.changelog().rev_of(&req.node).is_none() && !req.node.is_null() {
            return Err(DaemonError::UnknownNode(req.node.to_hex()));
        }
        match wc.update(repo.clone(), req.node, false, None) {
            Ok(outcome) => {
                tracing::info!(from = %open_at.to_hex(), node = %req.node.to_hex(), updated = outcome.updated, removed = outcome.removed, "kept working copy updated");
                wc.map_base_in_background();
                state.node = req.node.to_hex();
                state_dir.save(&state)?;
            }
            Err(WcError::UncommittedChanges(paths) | WcError::UntrackedDiffers(paths)) => {
                return Err(DaemonError::Switch {
                    mountpoint: req.mountpoint.clone(),
                    paths: paths
                        .iter()
                        .map(|p| String::from_utf8_lossy(p).into_owned())
                        .collect(),
                })
            }
            Err(e) => return Err(e.into()),
        }
    }

    let pid = std::process::id();
    let pid_file = state_dir.pid_file();
    std::fs::write(&pid_file, format!("{pid}\n")).map_err(|source| DaemonError::Io {
        path: pid_file.clone(),
        source,
    })?;

    // The working copy's `.hg` for real hg (an hg share of the repository).
    let dot_hg = crate::share::write(state_dir.path(), &req.repo, &state_dir.socket()).map_err(
        |source| DaemonError::Io {
            path: crate::share::dir(state_dir.path()),
            source,
        },
    )?;
    let passthrough = Arc::new(crate::passthrough::Passthrough::new(
        req.config.mount.passthrough,
    ));
    let fs = RevFs::new(
        wc.clone(),
        ControlTargets {
            socket: state_dir.socket(),
            repo: req.repo.clone(),
            state: state_dir.path().to_owned(),
            dot_hg: dot_hg.clone(),
        },
        passthrough.clone(),
    );
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("revfs:{}", req.repo.display())),
        MountOption::Subtype("revfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    config.acl = if req.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(req.threads.max(1));
    config.clone_fd = true;
    let uring_prepared = crate::uring::prepare(req.config.mount.io_uring);
    config.io_uring = uring_prepared.is_ok();
    config.io_uring_threads = crate::uring::THREADS_PER_CPU;
    let mount_err = |source| DaemonError::Mount {
        path: req.mountpoint.clone(),
        source,
    };
    let busy = fs.busy();
    let notifier_slot = fs.notifier_slot();
    let mut session = fuser::Session::new(fs, &req.mountpoint, &config).map_err(mount_err)?;
    let _ = notifier_slot.set(session.notifier());
    let requests = crate::uring::mode(session.io_uring_rings(), &uring_prepared);
    tracing::info!("requests through {requests}");
    let mut unmounter = session.unmount_callable();
    // Before the control socket answers, which is when `revfs mount` returns.
    match crate::bdi::raise_read_ahead(&req.mountpoint) {
        Ok(kib) => tracing::info!("read-ahead {kib} KiB"),
        Err(e) => tracing::info!("read-ahead left as the kernel set it: {e}"),
    }
    let invalidator =
        Arc::new(
            Invalidator::start(session.notifier()).map_err(|source| DaemonError::Io {
                path: req.mountpoint.clone(),
                source,
            })?,
        );
    let sweeping = Arc::new(std::sync::atomic::AtomicBool::new(true));
    {
        let (wc, invalidator, sweeping) = (wc.clone(), invalidator.clone(), sweeping.clone());
        let _ = std::thread::Builder::new()
            .name("revfs-sweep".into())
            .spawn(move || sweep_loop(&wc, &invalidator, &sweeping));
    }
    // The session serves from its own thread, so that the kernel learns the way to the share
    // before the control socket answers (which is when `revfs mount` returns): a lookup of
    // ours still under way would make an unmount right after the mount fail as busy.
    let serving = std::thread::Builder::new()
        .name("revfs-session".into())
        .spawn(move || session.run())
        .map_err(|source| DaemonError::Io {
            path: req.mountpoint.clone(),
            source,
        })?;
    crate::share::prime_kernel_cache(&req.mountpoint);
    // From a thread that serves no request: it looks at the mount's root.
    passthrough.leases.start(&req.mountpoint);
    {
        let ctx = Ctx {
            wc: wc.clone(),
            invalidator: invalidator.clone(),
            busy,
            pid_file: pid_file.clone(),
            state_dir: state_dir.clone(),
            state: std::sync::Mutex::new(state.clone()),
            mountpoint: req.mountpoint.clone(),
            repo: req.repo.clone(),
            passthrough: passthrough.clone(),
            requests,
        };
        let served = control::serve(
            &state_dir.socket(),
            Arc::new(
                move |r, progress: &control::Progress| match handle(&ctx, r, progress) {
                    Ok(resp) => resp,
                    Err(e) => Response::Error {
                        message: e.to_string(),
                    },
                },
            ),
        );
        if let Err(e) = served {
            // No control socket, no mount: the session ends with its unmount.
            let _ = unmounter.unmount();
            let _ = serving.join();
            return Err(e.into());
        }
    }

    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ]);
    if let Ok(mut signals) = signals {
        let _ = std::thread::Builder::new()
            .name("revfs-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    tracing::info!(sig, "signal received, unmounting");
                    if let Err(e) = unmounter.unmount() {
                        tracing::error!("unmount on signal failed: {e}");
                    }
                }
            });
    }
    tracing::info!(repo = %req.repo.display(), mountpoint = %req.mountpoint.display(), node = %state.node, "mounted");
    let result = match serving.join() {
        Ok(r) => r.map_err(mount_err),
        Err(_) => Err(mount_err(std::io::Error::other(
            "the FUSE session panicked",
        ))),
    };
    tracing::info!("session ended");
    sweeping.store(false, std::sync::atomic::Ordering::Relaxed);
    if let Err(e) = wc.sync_journal() {
        tracing::error!("final journal sync: {e}");
    }
    // The file sizes learned since they were last written, for the next mount.
    wc.repo().save_size_cache();
    let _ = std::fs::remove_file(&pid_file);
    let _ = std::fs::remove_file(state_dir.socket());
    result
}

/// Keeps the loaded entries near `mount.loaded_files`: every 100 ms (at once after a full
/// batch), asks the working copy which unchanged files the kernel should forget and tells
/// the kernel, from this thread (it holds no lock and serves no request); and the names in
/// listings near `mount.listed_files` (nothing to tell the kernel).
fn sweep_loop(
    wc: &WorkingCopy,
    invalidator: &Invalidator,
    running: &std::sync::atomic::AtomicBool,
) {
    const BATCH: usize = 4096;
    const LISTINGS: usize = 512;
    while running.load(std::sync::atomic::Ordering::Relaxed) {
        let items = wc.sweep(BATCH);
        // Fewer listings a round than files: each costs a listing's worth of comparisons
        // under the working copy's lock.
        let listings = wc.sweep_listings(LISTINGS);
        if listings > 0 {
            tracing::debug!(listings, "unchanged listings dropped");
        }
        let full = items.len() == BATCH;
        if !items.is_empty() {
            tracing::debug!(
                entries = items.len(),
                "asking the kernel to forget unchanged files"
            );
            invalidator.send_all(items, &|_, _| {});
        }
        if !full {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
