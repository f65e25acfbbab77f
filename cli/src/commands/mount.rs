//! `revfs mount`, `revfs unmount` and `revfs list`: start a filesystem daemon for a
//! repository revision, stop it, and show the active mounts.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use revfs_vfs::config::Config;
use revfs_vfs::control::{self, Request, Response};
use revfs_vfs::daemon::{self, MountRequest};
use revfs_vfs::state::StateDir;
use revfs_vfs::store::{names, revset, Node, Repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Revision to check out (default: the tip of the default branch)
    #[arg(
        short = 'r',
        long = "rev",
        value_name = "REV",
        allow_hyphen_values = true
    )]
    rev: Option<String>,
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
    /// Detach now even if files are open (a lazy unmount)
    #[arg(short = 'f', long)]
    force: bool,
    mountpoint: PathBuf,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Output format (only `json`)
    #[arg(short = 'T', long = "template", value_name = "TEMPLATE")]
    template: Option<String>,
}

/// The mounts the kernel knows of whose type is `fuse.revfs`: (mountpoint, source).
pub(crate) fn revfs_mounts() -> Result<Vec<(PathBuf, String)>> {
    let text =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut r = right.split(' ');
        let (fstype, source) = (r.next().unwrap_or(""), r.next().unwrap_or(""));
        // fusermount3 records the subtype only with libfuse; the source name is ours anyway.
        if !(fstype == "fuse.revfs" || (fstype.starts_with("fuse") && source.starts_with("revfs:")))
        {
            continue;
        }
        if let Some(mp) = left.split(' ').nth(4) {
            out.push((PathBuf::from(unescape_mountinfo(mp)), source.to_owned()));
        }
    }
    Ok(out)
}

/// Undoes the octal escapes (`\040` for a space) of /proc/self/mountinfo.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The absolute form of a mountpoint without touching it (a dead mount cannot be stat'ed):
/// the parent is canonicalized, the last component kept.
pub(crate) fn mountpoint_path(p: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(p)?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => Ok(std::fs::canonicalize(parent)
            .with_context(|| format!("{}", parent.display()))?
            .join(name)),
        _ => Ok(abs),
    }
}

fn is_mounted(mountpoint: &Path) -> Result<bool> {
    Ok(revfs_mounts()?.iter().any(|(m, _)| m == mountpoint))
}

pub fn mount(args: &MountArgs) -> Result<u8> {
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
    // The working copy kept here, if any: its repository and, from the journal, its parent.
    let saved = state_dir.load()?;
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
    let node = match &args.rev {
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

/// Starts the daemon as a detached process and waits until the mount answers.
fn spawn_daemon(req: &MountRequest, state_dir: &StateDir) -> Result<()> {
    state_dir.create()?;
    let log = state_dir.log_file();
    let log_out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)?;
    let log_len = log_out.metadata().map(|m| m.len()).unwrap_or(0);
    let exe = std::env::current_exe().context("finding the revfs executable")?;
    let mut cmd = Command::new(exe);
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
    let probe = req
        .mountpoint
        .join(revfs_vfs::fs::CONTROL_DIR)
        .join("socket");
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
        if std::fs::symlink_metadata(&probe).is_ok() {
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

pub fn unmount(args: &UnmountArgs) -> Result<u8> {
    let mountpoint = mountpoint_path(&args.mountpoint)?;
    if !is_mounted(&mountpoint)? {
        bail!("{} is not a revfs mount", mountpoint.display());
    }
    let state_dir = StateDir::for_mountpoint(&mountpoint)?;
    let pid = std::fs::read_to_string(state_dir.pid_file())
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let mut cmd = Command::new("fusermount3");
    cmd.arg(if args.force { "-uz" } else { "-u" })
        .arg(&mountpoint);
    let out = cmd
        .output()
        .context("running fusermount3 (is fuse3 installed?)")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("busy") {
            bail!(
                "{} is busy: a process still has files open in it (close them, or use --force for a lazy unmount)",
                mountpoint.display()
            );
        }
        bail!("unmounting {} failed: {}", mountpoint.display(), err.trim());
    }
    // Wait for the daemon to finish so that its state is flushed when we return.
    if let Some(pid) = pid {
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_running(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(0)
}

/// True while process `pid` exists and has not exited (a zombie waiting for its parent to
/// reap it counts as exited).
pub(crate) fn process_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z') | Some('X') | None)
}

pub fn list(args: &ListArgs) -> Result<u8> {
    let json = match args.template.as_deref() {
        None => false,
        Some("json") => true,
        Some(other) => bail!("unsupported template '{other}' (only 'json' is supported)"),
    };
    let mut rows = Vec::new();
    for (mountpoint, _source) in revfs_mounts()? {
        let state_dir = StateDir::for_mountpoint(&mountpoint)?;
        let state = state_dir.load().ok().flatten();
        let alive = matches!(
            control::request(&state_dir.socket(), &Request::Ping, Duration::from_secs(2)),
            Ok(Response::Pong { .. })
        );
        rows.push((mountpoint, state, alive));
    }
    if json {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|(m, s, alive)| {
                serde_json::json!({
                    "mountpoint": m,
                    "repo": s.as_ref().map(|s| &s.repo),
                    "node": s.as_ref().map(|s| &s.node),
                    "running": alive,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
    } else {
        for (m, s, alive) in rows {
            let (repo, node) = match &s {
                Some(s) => (s.repo.display().to_string(), s.node[..12].to_owned()),
                None => ("?".into(), "?".into()),
            };
            let note = if alive {
                ""
            } else {
                "  (daemon not running: revfs unmount it)"
            };
            println!("{}  {repo}  {node}{note}", m.display());
        }
    }
    Ok(0)
}
