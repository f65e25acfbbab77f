//! `revfs mount`, `revfs unmount` and `revfs list`: start a filesystem daemon for a
//! repository revision, stop it, and show the active mounts.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use revfs_store::{names, revset, Node, Repo};
use revfs_vfs::client::kernel::{
    self as mounts, mountpoint_path, process_running, revfs_mounts, KernelMount,
};
use revfs_vfs::client::{control_deadline, NotAnswering};
use revfs_vfs::config::Config;
use revfs_vfs::service::control::{self, ControlError, RedirectOp, Request, Response};
use revfs_vfs::service::daemon::{self, MountRequest};
use revfs_vfs::service::kept;
use revfs_vfs::service::redirect::{self, Redirections};
use revfs_vfs::service::state::StateDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Revision to check out (default: the tip of the default branch)")))]
pub struct MountArgs {
    #[command(flatten)]
    rev: super::RevArg,
    /// Stay attached to the terminal (for debugging and systemd)
    #[arg(long)]
    foreground: bool,
    /// FUSE request threads (default: mount.threads in the configuration, else 8)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=revfs_vfs::config::MAX_THREADS as i64))]
    threads: Option<u16>,
    /// Let other users access the mount (needs user_allow_other in /etc/fuse.conf; default:
    /// mount.allow_other in the configuration)
    #[arg(long, overrides_with = "no_allow_other")]
    allow_other: bool,
    /// Only this user may access the mount, whatever the configuration says
    #[arg(long, overrides_with = "allow_other")]
    no_allow_other: bool,
    /// The repository (the directory holding .hg)
    repo: PathBuf,
    /// Where to mount the working copy
    mountpoint: PathBuf,
}

#[derive(Args, Debug)]
pub struct UnmountArgs {
    /// Detach now, even with files open or a daemon that does not answer: the daemon ends,
    /// open files fail, the working copy is kept for the next mount
    #[arg(short = 'f', long)]
    force: bool,
    mountpoint: PathBuf,
}

#[derive(Args, Debug)]
pub struct DiscardArgs {
    /// Discard uncommitted changes and unknown files too
    #[arg(short = 'f', long)]
    force: bool,
    /// Remove the repository too, when revfs clone made it in revfs's state directory and
    /// no other working copy uses it (with --force, even if it has draft changesets)
    #[arg(long = "remove-repo")]
    remove_repo: bool,
    /// The mountpoint whose kept working copy goes (it must not be mounted)
    mountpoint: PathBuf,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Output format (only `json`)
    #[arg(short = 'T', long = "template", value_name = "TEMPLATE")]
    template: Option<String>,
}

fn is_mounted(mountpoint: &Path) -> Result<bool> {
    Ok(revfs_mounts()?.iter().any(|m| m.mountpoint == mountpoint))
}

/// Mounts `repo`'s default revision at `mountpoint` with the configuration's settings
/// (`revfs clone`).
pub fn mount_fresh(repo: &Path, mountpoint: &Path) -> Result<u8> {
    mount(&MountArgs {
        rev: super::RevArg::default(),
        foreground: false,
        threads: None,
        allow_other: false,
        no_allow_other: false,
        repo: repo.to_owned(),
        mountpoint: mountpoint.to_owned(),
    })
}

pub fn mount(args: &MountArgs) -> Result<u8> {
    if args.foreground {
        become_daemon_executable()?;
    }
    // The configuration first: a bad one stops here, before anything is mounted.
    let config = Config::load()?;
    let threads = args.threads.map_or(config.mount.threads, usize::from);
    let allow_other = if args.allow_other {
        true
    } else if args.no_allow_other {
        false
    } else {
        config.mount.allow_other
    };
    let repo_root = std::fs::canonicalize(&args.repo)
        .map_err(|_| anyhow!("repository {} not found", args.repo.display()))?;
    if !repo_root.join(".hg").is_dir() {
        bail!("repository {} not found", args.repo.display());
    }
    let repo = Repo::open(&repo_root)?;
    let mountpoint = mountpoint_path(&args.mountpoint)?;
    if is_mounted(&mountpoint)? {
        bail!("{} is already a revfs mount", mountpoint.display());
    }
    let meta = std::fs::metadata(&mountpoint)
        .with_context(|| format!("cannot mount on {}", mountpoint.display()))?;
    if !meta.is_dir() {
        bail!("cannot mount on {}: not a directory", mountpoint.display());
    }
    let state_dir = StateDir::for_mountpoint(&mountpoint)?;
    // The daemon reads the store and its state directory; through its own mount it would
    // wait on itself.
    for (what, path) in [
        ("the repository", &repo_root),
        ("its state directory", &state_dir.path().to_path_buf()),
    ] {
        if path.starts_with(&mountpoint) {
            bail!(
                "cannot mount on {}: {what} {} is inside it (the daemon would read it through its own mount)",
                mountpoint.display(),
                path.display()
            );
        }
    }
    // The working copy kept here, if any: its repository and, from the journal, its parent.
    let saved = state_dir.load()?;
    let saved_repo = saved.as_ref().map(|s| s.repo.clone());
    let journal_parent = state_dir.journal_parent()?;
    // The working copy kept for this mountpoint belongs to one repository: never mix.
    if let Some(saved) = &saved {
        if saved.repo != repo_root && journal_parent.is_some() {
            bail!(
                "{} holds a working copy of {} (state in {}); mount that repository there, or move the state directory away to start afresh",
                mountpoint.display(),
                saved.repo.display(),
                state_dir.path().display()
            );
        }
    }
    let node = match &args.rev.rev {
        Some(spec) => {
            let revs = revset::resolve(&repo, spec)?;
            let rev = *revs.last().ok_or_else(|| anyhow!("empty revision set"))?;
            repo.changelog().node(rev)?
        }
        None => match saved.filter(|s| s.repo == repo_root) {
            // A remount resumes the working copy it had.
            // The journal is the authority on the working-copy parent (a commit or an update
            // cut short may have left mount.json behind it).
            Some(saved) => match journal_parent {
                Some(node) if repo.changelog().rev_of(&node).is_some() || node.is_null() => node,
                _ => Node::from_hex(saved.node.as_bytes())
                    .ok_or_else(|| anyhow!("{}: bad node", state_dir.state_file().display()))?,
            },
            None => {
                let rev = names::branch_tip(&repo, b"default")?.unwrap_or(repo.changelog().tip());
                repo.changelog().node(rev)?
            }
        },
    };
    drop(repo);
    // A working copy kept here at another parent goes to the revision asked for, as `revfs
    // update` would take it, when it has no uncommitted changes.
    let kept_elsewhere = args.rev.rev.is_some()
        && saved_repo.as_deref() == Some(repo_root.as_path())
        && journal_parent.is_some_and(|p| p != node);
    if kept_elsewhere {
        refuse_changed_kept_copy(&state_dir, &repo_root, &mountpoint)?;
    }
    let request = MountRequest {
        repo: repo_root,
        mountpoint: mountpoint.clone(),
        node,
        threads,
        allow_other,
        config,
    };
    if args.foreground {
        daemon::run(request)?;
        return Ok(0);
    }
    spawn_daemon(&request, &state_dir)?;
    Ok(0)
}

/// The allocator's settings a daemon runs with, unless the environment sets them: mimalloc
/// commits its arenas as it uses them (by default it commits them whole, which took the
/// memory test's daemon from 125 to 168 MiB; docs/BENCHMARKS.md). The systemd unit sets the
/// same.
pub const ALLOCATOR_ENV: [(&str, &str); 1] = [("MIMALLOC_ARENA_EAGER_COMMIT", "0")];

/// Stops a switch of the working copy kept for `mountpoint` to another revision when it
/// holds uncommitted changes (unknown files included: an update would keep them, but they
/// are easy to forget), listing them and naming the choices.
fn refuse_changed_kept_copy(state_dir: &StateDir, repo: &Path, mountpoint: &Path) -> Result<()> {
    let kept = kept::inspect(state_dir).map_err(|e| {
        anyhow!(
            "the working copy kept for {} cannot be read: {e}
(see revfs doctor {})",
            mountpoint.display(),
            mountpoint.display()
        )
    })?;
    if let Some(k) = kept.filter(|k| !k.changes.is_empty()) {
        bail!(
            "the working copy kept for {} has uncommitted changes (parent {}):\n{}\
             (mount without -r to resume it: revfs mount {} {}; or discard it: revfs discard \
             --force {})",
            mountpoint.display(),
            &k.parent.to_hex()[..12],
            k.status_lines(),
            repo.display(),
            mountpoint.display(),
            mountpoint.display()
        );
    }
    Ok(())
}

/// The daemon program installed beside this one, when there is one. An installed revfs is
/// two builds of this binary (packaging/build.sh): `bin/revfs`, static and linked with musl,
/// whose commands start in a fraction of a dynamically linked program's time, and
/// `lib/revfs/revfs-daemon` beside it, linked with glibc, whose memcmp and memcpy the
/// daemon's lookups and status spend their time in (a musl daemon took 1.65x as long over
/// 1,000 changed files), and which is position-independent (the daemon reads repositories
/// and serves requests for as long as the mount lives). A binary with no daemon beside it
/// (`cargo build`) is its own daemon: None.
fn separate_daemon(exe: &Path) -> Option<PathBuf> {
    let daemon = exe.parent()?.parent()?.join("lib/revfs/revfs-daemon");
    (daemon.is_file() && daemon != exe).then_some(daemon)
}

/// A command running `program` as a mount's daemon, with the allocator settings of
/// [`ALLOCATOR_ENV`] unless the environment sets them.
fn daemon_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for (key, value) in ALLOCATOR_ENV {
        if std::env::var_os(key).is_none() {
            cmd.env(key, value);
        }
    }
    cmd
}

/// `revfs mount --foreground` run as the command (the systemd unit does): replaced by the
/// same command in [`separate_daemon`], with the same arguments and process id, when there
/// is one.
fn become_daemon_executable() -> Result<()> {
    let exe = std::env::current_exe().context("finding the revfs executable")?;
    let Some(daemon) = separate_daemon(&exe) else {
        return Ok(());
    };
    use std::os::unix::process::CommandExt;
    // exec returns only when it failed.
    let err = daemon_command(&daemon)
        .args(std::env::args_os().skip(1))
        .exec();
    Err(anyhow!(
        "cannot run the revfs daemon {}: {err}",
        daemon.display()
    ))
}

/// Starts the daemon as a detached process and waits until the mount answers.
fn spawn_daemon(req: &MountRequest, state_dir: &StateDir) -> Result<()> {
    state_dir.create()?;
    // A daemon just killed may still hold the working copy's lock for a moment, until its
    // last thread is gone: wait for that (a live one is for the new daemon to report).
    let recorded: Option<i32> = std::fs::read_to_string(state_dir.pid_file())
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let dying = |pid: i32| {
        Path::new(&format!("/proc/{pid}")).exists()
            && (!process_running(pid) || revfs_vfs::client::kernel::process_exiting(pid))
    };
    let until = Instant::now() + Duration::from_secs(5);
    while recorded.is_some_and(dying) && state_dir.is_locked() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let log = state_dir.log_file();
    let log_out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)?;
    let log_len = log_out.metadata().map(|m| m.len()).unwrap_or(0);
    let exe = std::env::current_exe().context("finding the revfs executable")?;
    let mut cmd = daemon_command(&separate_daemon(&exe).unwrap_or(exe));
    cmd.arg("mount")
        .arg("--foreground")
        .arg("-r")
        .arg(req.node.to_hex())
        .arg("--threads")
        .arg(req.threads.to_string())
        .arg(if req.allow_other {
            "--allow-other"
        } else {
            "--no-allow-other"
        });
    cmd.arg(&req.repo).arg(&req.mountpoint);
    cmd.stdin(Stdio::null())
        .stdout(log_out.try_clone()?)
        .stderr(log_out);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("starting the revfs daemon")?;
    // Ready when the kernel lists the mount and the daemon answers on its socket; the mount
    // itself is never touched (a daemon that hangs while starting would hang us too).
    let socket = state_dir.socket();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read(&log).unwrap_or_default();
            let tail = String::from_utf8_lossy(&text[(log_len as usize).min(text.len())..]);
            let msg = tail
                .lines()
                .rev()
                .find(|l| l.starts_with("abort: "))
                .map(|l| l.trim_start_matches("abort: ").to_owned());
            bail!(
                "{}",
                msg.unwrap_or_else(|| format!(
                    "the revfs daemon exited ({status}); see {}",
                    log.display()
                ))
            );
        }
        if socket.exists()
            && is_mounted(&req.mountpoint)?
            && matches!(
                control::request(&socket, &Request::Ping, Duration::from_secs(2)),
                Ok(Response::Pong { .. })
            )
        {
            // The daemon primes the kernel's cache of `.hg` too; done here as well, the
            // mount is primed when this command returns. Bounded: a daemon that hangs now
            // leaves the thread waiting, and the process's exit ends it.
            let (done, wait) = std::sync::mpsc::channel();
            let mountpoint = req.mountpoint.clone();
            std::thread::spawn(move || {
                revfs_vfs::service::share::prime_kernel_cache(&mountpoint);
                let _ = done.send(());
            });
            let _ = wait.recv_timeout(Duration::from_secs(5));
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the mount did not answer within 30 s; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the daemon of a mount says when asked, within `deadline`.
enum Health {
    /// It answers, and its filesystem has no request waiting longer than the deadline.
    Answers,
    /// It does not answer, or a filesystem request has waited too long: the reason.
    Stuck(String),
    /// Nothing listens on its socket: the daemon is gone.
    Gone,
}

fn health(state_dir: &StateDir, deadline: Duration) -> Health {
    match control::request(&state_dir.socket(), &Request::Ping, deadline) {
        Ok(Response::Pong { busy_ms, .. }) if Duration::from_millis(busy_ms) > deadline => {
            Health::Stuck(format!(
                "a filesystem request has waited {}",
                control::seconds(Duration::from_secs(busy_ms / 1000))
            ))
        }
        Ok(_) => Health::Answers,
        Err(ControlError::NotAnswering { waited, .. }) => {
            Health::Stuck(format!("nothing heard for {}", control::seconds(waited)))
        }
        Err(_) => Health::Gone,
    }
}

/// Waits up to `limit` for the daemon `pid` of `state_dir` to end, until its last thread
/// has let go of the working copy's lock; true when it has.
fn wait_exit(state_dir: &StateDir, pid: Option<i32>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while pid.is_some_and(process_running) || state_dir.is_locked() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// As root, asks the kernel to unmount `mountpoint` (`umount2` with `flags`, not following
/// a symlink): `None` when not root; `Ok` too when it is not mounted any more (EINVAL).
fn kernel_unmount(
    mountpoint: &Path,
    flags: libc::c_int,
) -> Result<Option<std::result::Result<(), std::io::Error>>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())?;
    // SAFETY: umount2 reads a NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags | libc::UMOUNT_NOFOLLOW) } == 0 {
        return Ok(Some(Ok(())));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINVAL) && !is_mounted(mountpoint)? {
        return Ok(Some(Ok(())));
    }
    Ok(Some(Err(e)))
}

/// Unmounts a mount that nothing holds: as root the kernel is asked directly (a machine
/// without fuse3 can still unmount what root mounted), otherwise fusermount3. A mount
/// still in use is refused as busy.
fn unmount_plain(mountpoint: &Path) -> Result<()> {
    let busy = || {
        anyhow::anyhow!(
            "{} is busy: a process still has files open in it (close them, or use --force)",
            mountpoint.display()
        )
    };
    if let Some(done) = kernel_unmount(mountpoint, 0)? {
        return match done {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(busy()),
            Err(e) => bail!("unmounting {} failed: {e}", mountpoint.display()),
        };
    }
    let out = Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .output()
        .context("running fusermount3 (is fuse3 installed?)")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("busy") {
            return Err(busy());
        }
        bail!("unmounting {} failed: {}", mountpoint.display(), err.trim());
    }
    Ok(())
}

/// Detaches the mount at once, busy or not. Never waits on the daemon: as root the
/// kernel is asked directly, otherwise fusermount3, given a few seconds.
fn detach(mountpoint: &Path) -> Result<()> {
    if let Some(Ok(())) = kernel_unmount(mountpoint, libc::MNT_DETACH)? {
        return Ok(());
    }
    let mut child = Command::new("fusermount3")
        .arg("-uz")
        .arg(mountpoint)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running fusermount3 (is fuse3 installed?)")?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() || !is_mounted(mountpoint)? {
                return Ok(());
            }
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            bail!("unmounting {} failed: {}", mountpoint.display(), err.trim());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "unmounting {} failed: fusermount3 did not finish",
                mountpoint.display()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ends a mount whose daemon does not answer: its FUSE connection is aborted (every process
/// waiting on the mount gets ENOTCONN at once), the daemon killed, the mount detached. The
/// overlay and the journal stay as they are; what the daemon acknowledged is in them.
fn end_connection(km: &KernelMount, state_dir: &StateDir, pid: Option<i32>) -> Result<()> {
    let aborted = match km.conn {
        Some(conn) => mounts::abort_connection(conn).is_ok(),
        None => false,
    };
    if let Some(pid) = pid {
        // SAFETY: kill sends a signal to a pid we checked is this mount's daemon.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    detach(&km.mountpoint)?;
    if !wait_exit(state_dir, pid, Duration::from_secs(5)) {
        bail!(
            "{} is detached, but its daemon (pid {}) did not end{}",
            km.mountpoint.display(),
            pid.unwrap_or(0),
            if aborted {
                ""
            } else {
                " (the FUSE control filesystem was not available to end its connection)"
            }
        );
    }
    Ok(())
}

pub fn unmount(args: &UnmountArgs) -> Result<u8> {
    let mountpoint = mountpoint_path(&args.mountpoint)?;
    let table = revfs_mounts()?;
    let Some(km) = table.iter().find(|m| m.mountpoint == mountpoint) else {
        bail!("{} is not a revfs mount", mountpoint.display());
    };
    let state_dir = StateDir::for_mountpoint(&mountpoint)?;
    let pid = mounts::daemon_pid(&state_dir, &mountpoint);
    let deadline = control_deadline()?;
    // --force must free the mount within a few seconds: it waits less for an answer.
    let ask = if args.force {
        deadline.min(Duration::from_secs(2))
    } else {
        deadline
    };
    let health = health(&state_dir, ask);
    let gone = matches!(health, Health::Gone);
    if !args.force {
        if let Health::Stuck(why) = health {
            return Err(NotAnswering {
                mountpoint,
                pid: pid.map(|p| p as u32),
                why,
            }
            .into());
        }
        // Read-ahead's descriptors in the mount (its read leases) would make it busy: the
        // daemon lets them go and takes no new one for a while. An older daemon does not
        // know the request; it has none.
        let _ = control::request(&state_dir.socket(), &Request::Quiesce, ask);
        // A bind on the mount would make its unmount fail as busy: the daemon unbinds its
        // redirections first, and binds them again if the unmount does not go ahead.
        let redirected = !Redirections::of(state_dir.path())
            .load()
            .unwrap_or_default()
            .is_empty();
        if redirected && gone {
            // No daemon to unbind them or to flush anything: the mount is detached with
            // its binds.
            detach(&mountpoint)?;
            return Ok(0);
        }
        if redirected {
            let unbind = Request::Redirect {
                op: RedirectOp::Unbind,
            };
            match control::request(&state_dir.socket(), &unbind, ask) {
                Ok(Response::Error { message }) => bail!("{message}"),
                Ok(_) => {}
                Err(e) => bail!("unmounting {}: {e}", mountpoint.display()),
            }
        }
        let rebind = || {
            if redirected {
                let bind = Request::Redirect {
                    op: RedirectOp::Bind,
                };
                let _ = control::request(&state_dir.socket(), &bind, ask);
            }
        };
        if let Err(e) = unmount_plain(&mountpoint) {
            rebind();
            return Err(e);
        }
        // Wait for the daemon to finish so that its state is flushed when we return.
        wait_exit(&state_dir, pid, Duration::from_secs(10));
        return Ok(0);
    }
    match health {
        Health::Answers => {
            detach(&mountpoint)?;
            // With nothing open the daemon ends by itself; files still open keep it
            // serving them, so it is asked to sync and end.
            if !wait_exit(&state_dir, pid, Duration::from_millis(500)) {
                let _ = control::request(&state_dir.socket(), &Request::Shutdown, ask);
                if !wait_exit(&state_dir, pid, Duration::from_secs(2)) {
                    end_connection(km, &state_dir, pid)?;
                }
            }
        }
        Health::Gone => {
            detach(&mountpoint)?;
        }
        Health::Stuck(why) => {
            eprintln!(
                "revfs: the daemon of {}{} is not answering ({why}): ending its connection",
                mountpoint.display(),
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
            );
            end_connection(km, &state_dir, pid)?;
        }
    }
    Ok(0)
}

/// `revfs discard`: deletes the working copy kept for a mountpoint that is not mounted,
/// after checking that nothing uncommitted would go with it (unless forced).
pub fn discard(args: &DiscardArgs) -> Result<u8> {
    let mountpoint = mountpoint_path(&args.mountpoint)?;
    let mp = mountpoint.display();
    if is_mounted(&mountpoint)? {
        bail!("{mp} is mounted\n(unmount it first: revfs unmount {mp})");
    }
    let state_dir = StateDir::for_mountpoint(&mountpoint)?;
    if !state_dir.path().exists() {
        bail!("no working copy is kept for {mp}");
    }
    let kept = match kept::inspect(&state_dir) {
        Ok(k) => k,
        Err(e) if args.force => {
            eprintln!("revfs: the working copy kept for {mp} cannot be read ({e}); discarding it");
            None
        }
        Err(e) => bail!(
            "the working copy kept for {mp} cannot be read: {e}\n(discard it anyway: revfs \
             discard --force {mp})"
        ),
    };
    if let Some(k) = kept
        .as_ref()
        .filter(|k| !k.changes.is_empty() && !args.force)
    {
        bail!(
            "the working copy kept for {mp} has uncommitted changes (parent {}):\n{}(resume it: \
             revfs mount {} {mp}; or discard them too: revfs discard --force {mp})",
            &k.parent.to_hex()[..12],
            k.status_lines(),
            k.state.repo.display()
        );
    }
    let repo = state_dir.load().ok().flatten().map(|s| s.repo);
    if args.remove_repo {
        match &repo {
            Some(r) => super::cloned::check_removable(r, &state_dir, args.force)?,
            None => bail!("the working copy kept for {mp} does not say its repository"),
        }
    }
    // The files of its redirections go with the state directory.
    let reds = Redirections::of(state_dir.path());
    let redirected = reds.load().unwrap_or_default();
    let redirected_files = redirect::contents(&reds, &redirected).map_or(0, |c| c.files.len());
    kept::discard(&state_dir)?;
    match kept {
        Some(k) => {
            let plural =
                |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
            println!(
                "discarded the working copy of {} at {mp} (parent {}): {}, {} dropped",
                k.state.repo.display(),
                &k.parent.to_hex()[..12],
                plural(k.changes.len(), "uncommitted change"),
                plural(k.ignored, "ignored file")
            );
        }
        None => println!("discarded the working copy kept for {mp}"),
    }
    if !redirected.is_empty() {
        println!(
            "removed its redirection{} {} and the {redirected_files} file{} in {}",
            if redirected.len() == 1 { "" } else { "s" },
            redirected.join(", "),
            if redirected_files == 1 { "" } else { "s" },
            if redirected.len() == 1 { "it" } else { "them" },
        );
    }
    if let Some(r) = repo.filter(|r| super::cloned::is_revfs_clone(r)) {
        let from = super::cloned::server(&r)
            .map(|u| format!(" (cloned from {u})"))
            .unwrap_or_default();
        if args.remove_repo {
            std::fs::remove_dir_all(&r)
                .with_context(|| format!("removing the repository {}", r.display()))?;
            println!("removed the repository {}{from}", r.display());
        } else {
            println!(
                "the repository {}{from} stays (remove it with its last working copy: revfs \
                 discard --remove-repo)",
                r.display()
            );
        }
    }
    Ok(0)
}

/// The redirections kept for a working copy, each with whether it is bound when it is
/// mounted at `mounted` (`None`: not mounted), for `revfs list`. Read from the state
/// directory and the kernel's mount table, never through the mount.
fn redirections(state_dir: &StateDir, mounted: Option<&Path>) -> Vec<(String, Option<bool>)> {
    let Ok(list) = Redirections::of(state_dir.path()).load() else {
        return Vec::new();
    };
    let bound = match mounted {
        Some(m) if !list.is_empty() => redirect::bound_below(m),
        _ => Vec::new(),
    };
    list.into_iter()
        .map(|p| {
            let b = mounted.map(|m| redirect::is_bound(&bound, m, &p));
            (p, b)
        })
        .collect()
}

/// A repository as `revfs list` shows it: its path, and the server it was cloned from.
fn from_server(repo: &Path) -> String {
    match super::cloned::server(repo) {
        Some(u) => format!("{} (from {u})", repo.display()),
        None => repo.display().to_string(),
    }
}

pub fn list(args: &ListArgs) -> Result<u8> {
    let json = match args.template.as_deref() {
        None => false,
        Some("json") => true,
        Some(other) => bail!("unsupported template '{other}' (only 'json' is supported)"),
    };
    let mut rows = Vec::new();
    let table = revfs_mounts()?;
    for km in &table {
        let state_dir = StateDir::for_mountpoint(&km.mountpoint)?;
        let state = state_dir.load().ok().flatten();
        let health = health(&state_dir, Duration::from_secs(2));
        let reds = redirections(&state_dir, Some(&km.mountpoint));
        rows.push((km.mountpoint.clone(), state, health, reds));
    }
    // Working copies kept for mountpoints that are not mounted.
    let mut kept_rows = Vec::new();
    for sd in StateDir::all()? {
        let Ok(Some(state)) = sd.load() else { continue };
        if table.iter().any(|m| m.mountpoint == state.mountpoint) {
            continue;
        }
        let kept = kept::inspect(&sd);
        let reds = redirections(&sd, None);
        kept_rows.push((state, kept, reds));
    }
    kept_rows.sort_by(|a, b| a.0.mountpoint.cmp(&b.0.mountpoint));
    if json {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|(m, s, health, reds)| {
                serde_json::json!({
                    "mountpoint": m,
                    "repo": s.as_ref().map(|s| &s.repo),
                    "server": s.as_ref().and_then(|s| super::cloned::server(&s.repo)),
                    "node": s.as_ref().map(|s| &s.node),
                    "mounted": true,
                    "running": !matches!(health, Health::Gone),
                    "answering": matches!(health, Health::Answers),
                    "redirections": reds.iter().map(|(p, _)| p).collect::<Vec<_>>(),
                })
            })
            .chain(kept_rows.iter().map(|(s, kept, reds)| {
                let (node, changes, error) = match kept {
                    Ok(Some(k)) => (k.parent.to_hex(), Some(k.changes.len()), None),
                    Ok(None) => (s.node.clone(), Some(0), None),
                    Err(e) => (s.node.clone(), None, Some(e.to_string())),
                };
                serde_json::json!({
                    "mountpoint": s.mountpoint,
                    "repo": s.repo,
                    "server": super::cloned::server(&s.repo),
                    "node": node,
                    "mounted": false,
                    "changes": changes,
                    "error": error,
                    "redirections": reds.iter().map(|(p, _)| p).collect::<Vec<_>>(),
                })
            }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
    } else {
        let show = |reds: &[(String, Option<bool>)]| {
            for (path, bound) in reds {
                let note = if *bound == Some(false) {
                    " (not bound)"
                } else {
                    ""
                };
                println!("  redirection {path}{note}");
            }
        };
        for (m, s, health, reds) in rows {
            let (repo, node) = match &s {
                Some(s) => (from_server(&s.repo), s.node[..12].to_owned()),
                None => ("?".into(), "?".into()),
            };
            let note = match health {
                Health::Answers => String::new(),
                Health::Gone => format!("  (daemon not running: revfs unmount {})", m.display()),
                Health::Stuck(why) => format!(
                    "  (daemon not answering, {why}: revfs unmount --force {})",
                    m.display()
                ),
            };
            println!("{}  {repo}  {node}{note}", m.display());
            show(&reds);
        }
        for (s, kept, reds) in &kept_rows {
            let (node, note) = match kept {
                Ok(Some(k)) => (
                    k.parent.to_hex()[..12].to_owned(),
                    match k.changes.len() {
                        0 => "no uncommitted changes".to_owned(),
                        1 => "1 uncommitted change".to_owned(),
                        n => format!("{n} uncommitted changes"),
                    },
                ),
                Ok(None) => (s.node.chars().take(12).collect(), "nothing kept".into()),
                Err(e) => (
                    s.node.chars().take(12).collect(),
                    format!("cannot be read: {e}; see revfs doctor"),
                ),
            };
            println!(
                "{}  {}  {node}  (not mounted; {note})",
                s.mountpoint.display(),
                from_server(&s.repo)
            );
            show(reds);
        }
    }
    Ok(0)
}
