//! Where a working-copy command works: a repository seen from its own working directory or
//! from a revfs mount of it, and, in a mount, the connection to its daemon (with the
//! deadline, and what to tell the user when the daemon does not answer) and hg's
//! working-directory lock.

use super::error::{abort, ClientError, Result};
use super::kernel::{self, KernelMount};
use crate::config::Config;
use crate::fuse::CONTROL_DIR;
use crate::service::control::{self, ControlError, Request, Response};
use crate::service::state::StateDir;
use revfs_store::revset::{self, Scope};
use revfs_store::{Node, Repo, Rev, StoreError};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Where a command works: a repository, seen either from its own working directory or
/// from a revfs mount of it.
pub struct Workspace {
    /// The repository's root (its working directory, which holds `.hg`).
    repo_root: PathBuf,
    /// The repository, opened at its first use ([`Workspace::repo`]): `revfs status` in a
    /// mount needs only the daemon's answer, and opening a repository (its requirements,
    /// the changelog's and manifest's indexes mapped, then unmapped at exit) cost it about
    /// 0.1 ms of 2.5 (docs/BENCHMARKS.md, "Start-up").
    repo: std::cell::OnceCell<Repo>,
    /// The directory that paths are relative to: the repository root or the mountpoint.
    pub root: PathBuf,
    /// What `.` means here.
    pub scope: Scope,
    /// The mount, when the workspace is one.
    pub mount: Option<MountRef>,
}

/// A mount a command works in: how to reach its daemon, and what to tell the user when
/// the daemon does not answer.
pub struct MountRef {
    pub mountpoint: PathBuf,
    pub socket: PathBuf,
    /// The daemon's process id, from its last answer.
    pub pid: std::cell::Cell<Option<u32>>,
    /// The connection to the daemon, kept from one request to the next.
    client: std::cell::RefCell<Option<control::Client>>,
    state_dir: StateDir,
    /// Whether the daemon has answered a ping yet (a deferred check goes with the first
    /// request, see [`open_workspace_deferred`]).
    checked: std::cell::Cell<bool>,
}

/// A mount's daemon did not answer within the deadline. Printed with hg's layout: the
/// abort line, then the way out as a hint.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.message())]
pub struct NotAnswering {
    pub mountpoint: PathBuf,
    pub pid: Option<u32>,
    pub why: String,
}

impl NotAnswering {
    fn message(&self) -> String {
        let pid = self.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        format!(
            "the revfs daemon of {}{pid} is not answering: {}",
            self.mountpoint.display(),
            self.why
        )
    }

    /// The complete stderr text: the abort and its hint.
    pub fn hg_message(&self) -> String {
        format!(
            "abort: {}\n(free the mount with: revfs unmount --force {}; revfs mount then resumes the working copy)\n",
            self.message(),
            self.mountpoint.display()
        )
    }
}

/// How long a command waits for a mount's daemon: `control.timeout` of the configuration.
pub fn control_deadline() -> Result<Duration, crate::config::ConfigError> {
    static DEADLINE: OnceLock<Duration> = OnceLock::new();
    if let Some(d) = DEADLINE.get() {
        return Ok(*d);
    }
    let d = Config::load()?.control.timeout;
    Ok(*DEADLINE.get_or_init(|| d))
}

impl MountRef {
    /// The working copy's `.hg`: an hg share of the repository (docs/FORMATS.md).
    pub fn share_dir(&self) -> PathBuf {
        crate::service::share::dir(self.state_dir.path())
    }

    /// The mount's state directory.
    pub fn state_dir(&self) -> &StateDir {
        &self.state_dir
    }

    /// The daemon's pid: from its last answer, else as its state directory records it.
    fn daemon_pid(&self) -> Option<u32> {
        self.pid
            .get()
            .or_else(|| kernel::daemon_pid(&self.state_dir, &self.mountpoint).map(|p| p as u32))
    }

    /// The error for a failed exchange with this mount's daemon.
    pub fn error(&self, e: ControlError) -> ClientError {
        match e {
            ControlError::NotAnswering { waited, .. } => NotAnswering {
                mountpoint: self.mountpoint.clone(),
                pid: self.daemon_pid(),
                why: format!("nothing heard for {}", control::seconds(waited)),
            }
            .into(),
            ControlError::FilesystemStuck { waited, .. } => NotAnswering {
                mountpoint: self.mountpoint.clone(),
                pid: self.daemon_pid(),
                why: format!(
                    "a filesystem request has waited {}",
                    control::seconds(Duration::from_secs(waited.as_secs()))
                ),
            }
            .into(),
            other => other.into(),
        }
    }

    /// Sends `req` on the mount's connection (made, or made again, as needed), with the
    /// deadline; progress lines go to `on_progress`.
    pub fn exchange(
        &self,
        req: &Request,
        on_progress: Option<control::OnProgress>,
    ) -> Result<Response, ControlError> {
        let deadline = control_deadline().map_err(|e| ControlError::Protocol {
            path: self.socket.clone(),
            reason: with_causes(&e),
        })?;
        let mut slot = self.client.borrow_mut();
        let mut client = match slot.take() {
            Some(c) if c.fresh() => c,
            _ => control::Client::connect(&self.socket, deadline)?,
        };
        if !self.checked.get() {
            // The deferred check, in the same round trip as the (read-only) request.
            client.send(&Request::Ping, false)?;
            client.send(req, on_progress.is_some())?;
            let pong = client.receive(None)?;
            self.checked.set(true);
            // On an error the request's answer is not read: the connection goes.
            self.judge(pong, deadline)?;
            let answer = client.receive(on_progress)?;
            *slot = Some(client);
            return Ok(answer);
        }
        let answer = client.request(req, on_progress)?;
        *slot = Some(client);
        Ok(answer)
    }

    /// What a ping's answer says: the daemon's pid, and whether its filesystem has had a
    /// request waiting longer than the deadline.
    fn judge(&self, pong: Response, deadline: Duration) -> Result<(), ControlError> {
        if let Response::Pong { pid, busy_ms, .. } = pong {
            self.pid.set(Some(pid));
            if Duration::from_millis(busy_ms) > deadline {
                return Err(ControlError::FilesystemStuck {
                    path: self.socket.clone(),
                    waited: Duration::from_millis(busy_ms),
                });
            }
        }
        Ok(())
    }

    /// Asks the daemon whether it and its filesystem answer, before anything touches the
    /// mount. A daemon that cannot be reached at all (gone) is left for the first request
    /// to report; one that does not answer, or whose filesystem has had a request waiting
    /// longer than the deadline, stops the command here.
    fn check_alive(&self) -> Result<()> {
        self.checked.set(true);
        match self.exchange(&Request::Ping, None) {
            Ok(pong) => self
                .judge(pong, control_deadline()?)
                .map_err(|e| self.error(e)),
            Err(ControlError::Connect { .. }) => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }
}

/// Opens the working copy of the revfs mount `m`. Its state directory is found from the
/// mountpoint (under this user's state root); only when it is not there (another
/// `REVFS_STATE_DIR`) is the mount's `.revfs/state` link read, under the deadline.
fn open_mount(m: &KernelMount, defer_check: bool) -> Result<Workspace> {
    let deadline = control_deadline()?;
    let own = StateDir::for_mountpoint(&m.mountpoint)?;
    let (state_dir, state) = match own.load() {
        Ok(Some(s)) if s.mountpoint == m.mountpoint => (own, s),
        _ => {
            let sd = StateDir::at(
                read_link_within(&m.mountpoint.join(CONTROL_DIR).join("state"), deadline).map_err(
                    |e| match e {
                        None => NotAnswering {
                            mountpoint: m.mountpoint.clone(),
                            pid: None,
                            why: format!("nothing heard for {}", control::seconds(deadline)),
                        }
                        .into(),
                        Some(e) => ClientError::Io {
                            path: m.mountpoint.clone(),
                            source: e,
                        },
                    },
                )?,
            );
            let state = sd
                .load()?
                .ok_or_else(|| abort(format!("{}: mount state is missing", sd.path().display())))?;
            (sd, state)
        }
    };
    let mount = MountRef {
        mountpoint: m.mountpoint.clone(),
        socket: state_dir.socket(),
        pid: Default::default(),
        client: Default::default(),
        state_dir: state_dir.clone(),
        checked: Default::default(),
    };
    if !defer_check {
        mount.check_alive()?;
    }
    // The journal names the working-copy parent; mount.json follows it.
    let node = match state_dir.journal_parent()? {
        Some(node) => node,
        None => Node::from_hex(state.node.as_bytes())
            .ok_or_else(|| abort(format!("{}: bad node", state_dir.state_file().display())))?,
    };
    Ok(Workspace {
        repo_root: std::path::absolute(&state.repo).map_err(ClientError::io(&state.repo))?,
        repo: std::cell::OnceCell::new(),
        root: m.mountpoint.clone(),
        scope: Scope {
            working_parent: Some(node),
        },
        mount: Some(mount),
    })
}

/// `readlink` of a path inside a mount, given up after `deadline` (`Err(None)`). The
/// thread left waiting ends with the process.
fn read_link_within(path: &Path, deadline: Duration) -> Result<PathBuf, Option<std::io::Error>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let p = path.to_owned();
    std::thread::Builder::new()
        .name("readlink".into())
        .spawn(move || {
            let _ = tx.send(std::fs::read_link(&p));
        })
        .map_err(Some)?;
    match rx.recv_timeout(deadline) {
        Ok(r) => r.map_err(Some),
        Err(_) => Err(None),
    }
}

/// Gives a shallow repository its server and cache (crate::shallow) before a command reads
/// its files; a problem is the command's when it reads a file that needs them.
fn attach_shallow(repo: &Repo) {
    if !repo.is_shallow() {
        return;
    }
    let timeout = crate::config::Config::load()
        .map(|c| c.remote.timeout)
        .unwrap_or(crate::config::DEFAULT_REMOTE_TIMEOUT);
    if let Err(e) = crate::shallow::attach(repo, timeout) {
        tracing::warn!("{}: {e}", repo.root().display());
    }
}

fn repo_at(dir: &Path) -> Result<Workspace> {
    // Opened at once: outside a mount, every command reads the repository.
    let repo = Repo::open(dir)?;
    attach_shallow(&repo);
    Ok(Workspace {
        repo_root: repo.root().to_path_buf(),
        repo: std::cell::OnceCell::from(repo),
        root: dir.to_path_buf(),
        scope: Scope::default(),
        mount: None,
    })
}

/// Opens the workspace named by `-R` (`repository`: a repository or a mountpoint), or the
/// nearest one containing the current directory. Which mount a path is in comes from the
/// kernel's mount table: nothing inside a mount is looked at before its daemon has
/// answered.
pub fn open(repository: Option<&Path>) -> Result<Workspace> {
    open_with(repository, false)
}

/// [`open`] for a command whose first step is a read-only request to the daemon
/// (`status`): the daemon's check goes with that request, in one round trip. The command
/// must not touch the mount before its first request.
pub fn open_deferred(repository: Option<&Path>) -> Result<Workspace> {
    open_with(repository, true)
}

fn open_with(repository: Option<&Path>, defer_check: bool) -> Result<Workspace> {
    let mounts = kernel::revfs_mounts().unwrap_or_default();
    if let Some(path) = repository {
        let resolved = kernel::resolve(path, &mounts)?;
        if let Some(m) = mounts.iter().find(|m| m.mountpoint == resolved) {
            return open_mount(m, defer_check);
        }
        if kernel::containing(&resolved, &mounts).is_some() || !path.join(".hg").is_dir() {
            return Err(abort(format!("repository {} not found", path.display())));
        }
        return repo_at(path);
    }
    let cwd = std::env::current_dir()?;
    for dir in cwd.ancestors() {
        if let Some(m) = mounts.iter().find(|m| m.mountpoint == dir) {
            return open_mount(m, defer_check);
        }
        if kernel::containing(dir, &mounts).is_some() {
            continue;
        }
        if dir.join(".hg").is_dir() {
            return repo_at(dir);
        }
    }
    Err(StoreError::NotARepository(cwd).into())
}

impl Workspace {
    /// The repository, opened at the first call (in a mount: the repository it serves).
    pub fn repo(&self) -> Result<&Repo> {
        if let Some(repo) = self.repo.get() {
            return Ok(repo);
        }
        let repo = Repo::open(&self.repo_root).map_err(|source| match &self.mount {
            Some(m) => ClientError::MountRepo {
                mountpoint: m.mountpoint.clone(),
                source,
            },
            None => ClientError::Store(source),
        })?;
        attach_shallow(&repo);
        Ok(self.repo.get_or_init(|| repo))
    }

    /// The repository's root, without opening it.
    pub fn repo_root(&self) -> &Path {
        &self.repo_root
    }

    /// hg's working-directory lock of the mount (its share's `wlock`), taken as every hg
    /// command that changes the working copy takes it, so that revfs and hg never
    /// interleave their changes. While hg holds it, prints hg's `waiting for lock` line and
    /// waits (`ui.timeout`, 600 s by default). `None` outside a mount.
    pub fn wlock(&self) -> Result<Option<revfs_store::lock::Lock>> {
        use revfs_store::lock;
        let Some(mount) = &self.mount else {
            return Ok(None);
        };
        let path = mount.share_dir().join("wlock");
        let desc = format!("working directory of {}", self.root.display());
        match lock::acquire(&path, Duration::ZERO) {
            Ok(l) => return Ok(Some(l)),
            Err(StoreError::LockHeld { holder, .. }) => {
                let (host, pid) = holder.split_once(':').unwrap_or(("", &holder));
                eprintln!("waiting for lock on {desc} held by process '{pid}' on host '{host}'");
            }
            Err(e) => return Err(e.into()),
        }
        let timeout = revfs_hg::config::Config::load(Some(self.repo_root()))
            .ok()
            .and_then(|c| c.get("ui", "timeout").map(<[u8]>::to_vec))
            .and_then(|v| String::from_utf8(v).ok()?.trim().parse::<u64>().ok())
            .map_or(lock::DEFAULT_TIMEOUT, Duration::from_secs);
        let t0 = std::time::Instant::now();
        match lock::acquire(&path, timeout) {
            Ok(l) => {
                eprintln!("got lock after {} seconds", t0.elapsed().as_secs().max(1));
                Ok(Some(l))
            }
            Err(StoreError::LockHeld { holder, .. }) => Err(abort(format!(
                "{desc}: timed out waiting for lock held by '{holder}'"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// The mount, or an abort outside one.
    pub fn mount(&self) -> Result<&MountRef> {
        self.mount.as_ref().ok_or_else(|| {
            abort(format!("{} is not a revfs mount (working-copy commands run inside a mount, or with -R MOUNTPOINT)", self.root.display()))
        })
    }

    /// Sends a request to the mount's daemon; aborts outside a mount, and when the daemon
    /// does not answer within the deadline.
    pub fn request(&self, req: &Request) -> Result<Response> {
        self.request_with_progress(req, &mut NoProgress)
    }

    /// [`Workspace::request`] for a long request (commit, update, prefetch), whose progress
    /// the daemon reports to `progress` while it works, when `progress` is enabled.
    pub fn request_with_progress(
        &self,
        req: &Request,
        progress: &mut dyn Progress,
    ) -> Result<Response> {
        let mount = self.mount()?;
        let answer = if progress.enabled() {
            mount.exchange(req, Some(&mut |w, d, t| progress.update(w, d, t)))
        } else {
            mount.exchange(req, None)
        };
        progress.finish();
        match answer {
            Ok(Response::Error { message }) => Err(ClientError::Refused(message)),
            Ok(other) => Ok(other),
            Err(e) => Err(mount.error(e)),
        }
    }

    /// The second parent of a merge hg is making in the mount (asked of the daemon), if any.
    pub fn merge_parent(&self) -> Result<Option<Node>> {
        if self.mount.is_none() {
            return Ok(None);
        }
        match self.request(&Request::Info)? {
            Response::Info(info) => Ok(info
                .p2
                .and_then(|hex| Node::from_hex(hex.as_bytes()))
                .filter(|n| !n.is_null())),
            other => Err(unexpected(&other)),
        }
    }

    /// An abort for a revfs command that does not know a merge in progress, when one is.
    pub fn refuse_merge(&self, what: &str) -> Result<()> {
        if self.merge_parent()?.is_some() {
            return Err(abort(format!(
                "revfs {what} does not work during a merge (hg {what} does, in the mount)"
            )));
        }
        Ok(())
    }

    /// Resolves `-r` arguments to revisions, in order, without repeats.
    pub fn resolve_revs(&self, specs: &[String]) -> Result<Vec<Rev>> {
        let mut out: Vec<Rev> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for spec in specs {
            for rev in revset::resolve_in(self.repo()?, spec, self.scope)? {
                if seen.insert(rev) {
                    out.push(rev);
                }
            }
        }
        Ok(out)
    }

    /// Resolves one `-r` argument to a single revision (the last of a range), default `.`.
    pub fn resolve_single(&self, spec: Option<&str>) -> Result<Rev> {
        let revs = revset::resolve_in(self.repo()?, spec.unwrap_or("."), self.scope)?;
        revs.last()
            .copied()
            .ok_or_else(|| abort("empty revision set"))
    }
}

/// Where a long request's progress goes: the binary's bar on a terminal, or nowhere.
pub trait Progress {
    /// The request about `what` ("committing", "updating") starts now.
    fn start(&mut self, what: &str);
    /// Whether progress is shown at all (the daemon is asked for it only then).
    fn enabled(&self) -> bool;
    /// `done` of `total` units of `what` are done (`total` 0: unknown).
    fn update(&mut self, what: &str, done: u64, total: u64);
    /// The request has ended; called before the command prints its result.
    fn finish(&mut self);
}

/// No progress shown.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&mut self, _what: &str) {}
    fn enabled(&self) -> bool {
        false
    }
    fn update(&mut self, _what: &str, _done: u64, _total: u64) {}
    fn finish(&mut self) {}
}

/// The error for an answer of the wrong kind.
pub fn unexpected(answer: &Response) -> ClientError {
    abort(format!("unexpected answer from the daemon: {answer:?}"))
}

/// An error's message followed by each cause (as `{:#}` of an `anyhow` error shows it).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
