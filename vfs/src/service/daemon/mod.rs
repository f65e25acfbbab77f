//! The filesystem daemon of one mount: opens the repository, loads or creates the mount's
//! state, serves the tree over FUSE with several request threads, answers the control
//! socket, and unmounts cleanly on SIGTERM or SIGINT.

use crate::config::LogLevel;
use crate::fuse::notify::Invalidator;
use crate::fuse::{ControlTargets, RevFs};
use crate::service::control::{self, Response};
use crate::service::state::{MountState, StateDir, StateError, MOUNT_STATE_VERSION};
use crate::wc::{WcError, WorkingCopy};
use fuser::{Config, MountOption, SessionACL};
use revfs_store::repo::RepoOptions;
use revfs_store::{Node, Repo, StoreError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

mod dispatch;
mod start;

use dispatch::{handle, Ctx};
use start::{log_settings, open_working_copy, session_config};

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
    #[error(transparent)]
    Shallow(#[from] crate::shallow::ShallowSetupError),
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
    // A `Targets` filter (`debug`, `revfs_vfs=debug,fuser=warn`), not an `EnvFilter`: the
    // latter's directives need regex-automata's DFA builder, and with it every regex a
    // `revfs` command compiled (hg's configuration syntax) was built as a full DFA, which
    // cost a `revfs status` a sixth of its CPU (docs/BENCHMARKS.md, "Start-up").
    let from_env = std::env::var("REVFS_LOG")
        .ok()
        .and_then(|s| Some((s.parse::<Targets>().ok()?, s)));
    let (filter, described) = match from_env {
        Some((f, s)) => (f, format!("{s} (REVFS_LOG)")),
        None => (
            level
                .as_str()
                .parse::<Targets>()
                .unwrap_or_else(|_| Targets::new().with_default(tracing::Level::INFO)),
            level.as_str().to_owned(),
        ),
    };
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::sync::Mutex::new(file))
                .with_ansi(false),
        )
        .with(filter)
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
    // (glibc's malloc: the daemon runs mimalloc, but a C library allocates through it.)
    // SAFETY: mallopt only tunes the allocator; called before the threads start.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    let state_dir = StateDir::for_mountpoint(&req.mountpoint)?;
    state_dir.create()?;
    // Held until the process ends: a second daemon for this working copy stops here.
    let _lock = state_dir.lock()?;
    log_settings(&req, &state_dir)?;
    let (wc, state) = open_working_copy(&req, &state_dir)?;

    let pid = std::process::id();
    let pid_file = state_dir.pid_file();
    std::fs::write(&pid_file, format!("{pid}\n")).map_err(|source| DaemonError::Io {
        path: pid_file.clone(),
        source,
    })?;

    // The working copy's `.hg` for real hg (an hg share of the repository).
    let dot_hg = crate::service::share::write(
        state_dir.path(),
        &req.repo,
        &req.mountpoint,
        &state_dir.socket(),
    )
    .map_err(|source| DaemonError::Io {
        path: crate::service::share::dir(state_dir.path()),
        source,
    })?;
    let passthrough = Arc::new(crate::fuse::passthrough::Passthrough::new(
        req.config.mount.passthrough,
    ));
    let events = Arc::new(crate::fuse::events::Events::default());
    let fs = RevFs::new(
        wc.clone(),
        ControlTargets {
            socket: state_dir.socket(),
            repo: req.repo.clone(),
            state: state_dir.path().to_owned(),
            dot_hg: dot_hg.clone(),
        },
        passthrough.clone(),
        events.clone(),
    );
    let (config, uring_prepared) = session_config(&req);
    let mount_err = |source| DaemonError::Mount {
        path: req.mountpoint.clone(),
        source,
    };
    let busy = fs.busy();
    if let Err(e) = crate::busy::start_clock() {
        tracing::warn!("no clock thread: a wait through a stop of the daemon counts whole: {e}");
    }
    if let Some(us) = req.config.mount.cpu_latency_us {
        if let Err(e) = crate::cpu_latency::start(us) {
            tracing::warn!("mount.cpu_latency_us: no thread to hold the request: {e}");
        }
    }
    let notifier_slot = fs.notifier_slot();
    let mut session = fuser::Session::new(fs, &req.mountpoint, &config).map_err(mount_err)?;
    let _ = notifier_slot.set(session.notifier());
    let requests = crate::fuse::uring::mode(session.io_uring_rings(), &uring_prepared);
    tracing::info!("requests through {requests}");
    let mut unmounter = session.unmount_callable();
    // Before the control socket answers, which is when `revfs mount` returns.
    match crate::fuse::bdi::raise_read_ahead(&req.mountpoint) {
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
    crate::service::share::prime_kernel_cache(&req.mountpoint);
    // The redirections are bound again (through the mount, which serves by now) before
    // `revfs mount` returns.
    let redirections = crate::service::redirect::Redirections::of(state_dir.path());
    crate::service::redirect::bind_all(&redirections, &req.mountpoint);
    // From a thread that serves no request: it looks at the mount's root.
    passthrough.leases.start(&req.mountpoint);
    events.start(&req.mountpoint);
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
            events,
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
        let mountpoint = req.mountpoint.clone();
        let _ = std::thread::Builder::new()
            .name("revfs-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    tracing::info!(sig, "signal received, unmounting");
                    // A bind on the mount would make its unmount fail as busy.
                    if let Err(e) =
                        crate::service::redirect::unbind_all(&redirections, &mountpoint, true)
                    {
                        tracing::error!("redirections not unbound: {e}");
                    }
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
    wc.close_feed();
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
