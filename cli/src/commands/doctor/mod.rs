//! `revfs doctor [MOUNTPOINT]`: looks for what stops revfs from working and says how to fix
//! it, in the manner of `hg debuginstall`: a `checking ...` line per check, each problem on
//! a line of its own (indented by one space) followed by its fix in parentheses, and a last
//! line `no problems detected` or `N problems detected`. Exit status 0 when nothing needs
//! fixing, 1 otherwise. Notes (indented by one space, never followed by a fix) are for
//! information and change nothing.
//!
//! It only reads: the journal is replayed from a copy, in a temporary directory.
//!
//! The checks (docs/USER_GUIDE.md lists the messages):
//! * FUSE: `/dev/fuse` is a character device this user can open, `fusermount3` is on the
//!   `PATH` (setuid root unless we are root), `user_allow_other` in `/etc/fuse.conf` when the
//!   configuration asks for `allow_other`;
//! * idle CPUs that halt at once on a KVM guest (a note: round trips cost 2 to 3 times more);
//! * the `hg` on the `PATH` is a Mercurial release the extension serves in a mount
//!   ([`revfs_vfs::service::share::HG_RELEASES`]);
//! * the configuration file parses and its keys and values are valid;
//! * each mount, from the kernel's mount table and the state directories: a mount whose
//!   daemon is gone or does not answer, state directories of working copies not mounted
//!   (which `revfs mount` resumes), `mount.json` (parses, supported version), the journal
//!   (readable, supported version, its parent in the repository, it replays; every overlay
//!   file it needs is there);
//! * each repository of those mounts (and the one given by `-R` or holding the current
//!   directory): requirements this revfs supports, no abandoned store transaction
//!   (`.hg/store/journal`), no stale lock (`.hg/wlock`, `.hg/store/lock`).

use anyhow::Result;
use clap::Args;
use revfs_store::lock::lock_prefix;
use revfs_store::manifest::Manifest;
use revfs_store::{Node, Repo, StoreError};
use revfs_vfs::client::kernel::{self as mounts, mountpoint_path, process_running, revfs_mounts};
use revfs_vfs::config::{Config, ConfigLocation};
use revfs_vfs::service::control::{self, Request, Response};
use revfs_vfs::service::state::{state_root, MountState, StateDir, StateError};
use revfs_vfs::wc::journal::{Journal, PutEntry, Record};
use revfs_vfs::wc::WorkingCopy;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod idle_cpus;
mod repo;
mod state_dirs;

use idle_cpus::check_idle_cpus;
use repo::check_repo;
use state_dirs::check_mounts;
pub(crate) use state_dirs::read_journal;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Check only this mount (and its repository); default: every mount and state directory
    mountpoint: Option<PathBuf>,
}

/// What was found, printed as it is found.
#[derive(Default)]
struct Report {
    problems: usize,
}

impl Report {
    fn say(&self, line: &str) {
        let _ = writeln!(std::io::stdout(), "{line}");
    }
    fn check(&self, what: &str) {
        self.say(&format!("checking {what}"));
    }
    fn note(&self, what: &str) {
        self.say(&format!(" {what}"));
    }
    fn problem(&mut self, what: &str, fix: &str) {
        self.problems += 1;
        self.say(&format!(" {what}"));
        self.say(&format!(" ({fix})"));
    }
}

pub fn doctor(cli: &crate::Cli, args: &DoctorArgs) -> Result<u8> {
    let mut r = Report::default();
    let config = check_config(&mut r);
    check_fuse(&mut r, config.as_ref());
    check_idle_cpus(&mut r);
    check_mercurial(&mut r);
    let need = descriptor_need(&config.clone().unwrap_or_default());
    let repos = check_mounts(&mut r, args.mountpoint.as_deref(), need);
    let mut repos = repos;
    if args.mountpoint.is_none() {
        // The repository named by -R, or holding the current directory, too.
        let start = match &cli.repository {
            Some(p) => Some(p.clone()),
            None => std::env::current_dir().ok(),
        };
        if let Some(start) = start {
            // Nothing inside a mount is looked at: its daemon may not answer.
            let table = revfs_mounts().unwrap_or_default();
            if let Some(root) = start
                .ancestors()
                .filter(|d| mounts::containing(d, &table).is_none())
                .find(|d| d.join(".hg").is_dir())
            {
                let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
                repos.entry(root).or_default();
            }
        }
    }
    for (repo, mounts) in &repos {
        check_repo(&mut r, repo, mounts);
    }
    match r.problems {
        0 => r.say("no problems detected"),
        1 => r.say("1 problem detected"),
        n => r.say(&format!("{n} problems detected")),
    }
    Ok(if r.problems == 0 { 0 } else { 1 })
}

fn check_config(r: &mut Report) -> Option<Config> {
    let location = ConfigLocation::from_env();
    let shown = match &location {
        ConfigLocation::None => "none".to_owned(),
        ConfigLocation::Env(p) => format!("{} from REVFS_CONFIG", p.display()),
        ConfigLocation::User(p) => p.display().to_string(),
    };
    r.check(&format!("configuration ({shown})"));
    match Config::load_from(&location) {
        Ok(c) => {
            if c.file.is_none() {
                r.note("no configuration file: the defaults apply");
            }
            Some(c)
        }
        Err(e) => {
            r.problem(
                &e.to_string(),
                "fix or remove the file; every key is described in CONFIG.md, in docs/ of the \
                 sources or /usr/share/doc/revfs/",
            );
            None
        }
    }
}

/// The first executable called `name` on the PATH.
fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The `hg` on the PATH, and whether it can work in a mount (the releases the extension
/// serves; revfs's own commands need no hg).
fn check_mercurial(r: &mut Report) {
    use revfs_vfs::service::share::{hg_range, hg_serves, HG_RELEASES};
    let range = hg_range();
    let Some(hg) = which("hg") else {
        r.check("Mercurial (hg not found)");
        r.note(&format!(
            "revfs's commands need no hg; hg in a mount needs Mercurial {range}"
        ));
        return;
    };
    r.check(&format!("Mercurial ({})", hg.display()));
    let version = std::process::Command::new(&hg)
        .args(["--version", "-q"])
        .env("HGPLAIN", "1")
        .env("HGRCPATH", "")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let (_, rest) = text.split_once("(version ")?;
            Some(rest.split(')').next()?.to_owned())
        });
    match version {
        Some(v) if hg_serves(&v) => r.note(&format!(
            "Mercurial {v}: hg works in a mount (Mercurial {range})"
        )),
        Some(v) => r.problem(
            &format!("Mercurial {v}: hg cannot work in a mount, which needs Mercurial {range}"),
            &format!(
                "install Mercurial {range}: pip install 'mercurial>={}.{},<{}.{}'; or use \
                 revfs's commands in the mount",
                HG_RELEASES[0].0,
                HG_RELEASES[0].1,
                HG_RELEASES[1].0,
                HG_RELEASES[1].1 + 1
            ),
        ),
        None => r.problem(
            &format!("{} --version fails", hg.display()),
            "reinstall Mercurial",
        ),
    }
}

fn check_fuse(r: &mut Report, config: Option<&Config>) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let root = unsafe_geteuid() == 0;
    r.check("FUSE device (/dev/fuse)");
    match std::fs::metadata("/dev/fuse") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => r.problem(
            "/dev/fuse does not exist",
            "load the fuse module as root: modprobe fuse; in a container, pass the device in \
             (docker run --device /dev/fuse --cap-add SYS_ADMIN)",
        ),
        Err(e) => r.problem(
            &format!("/dev/fuse: {e}"),
            "check the device: ls -l /dev/fuse",
        ),
        Ok(m) if !m.file_type().is_char_device() => r.problem(
            "/dev/fuse is not a character device",
            "remove it and load the fuse module as root: rm /dev/fuse; modprobe fuse",
        ),
        Ok(_) => {
            if let Err(e) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/fuse")
            {
                r.problem(
                    &format!("cannot open /dev/fuse: {e}"),
                    "it should be readable and writable by everyone: chmod 666 /dev/fuse as \
                     root",
                );
            }
        }
    }
    match which("fusermount3") {
        None if root => r.check("fusermount3 (not found; root mounts and unmounts without it)"),
        None => {
            r.check("fusermount3 (not found)");
            r.problem(
                "fusermount3 is not on the PATH (revfs needs it to mount and unmount unless \
                 run as root)",
                "install it: sudo apt-get install fuse3",
            );
        }
        Some(p) => {
            r.check(&format!("fusermount3 ({})", p.display()));
            let setuid =
                std::fs::metadata(&p).is_ok_and(|m| m.mode() & 0o4000 != 0 && m.uid() == 0);
            if !root && !setuid {
                r.problem(
                    &format!("{} is not setuid root: only root can mount", p.display()),
                    &format!("as root: chmod u+s {} (or reinstall fuse3)", p.display()),
                );
            }
        }
    }
    if let Some(c) = config.filter(|c| c.mount.allow_other && !root) {
        let conf = std::fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
        let allowed = conf.lines().any(|l| l.trim() == "user_allow_other");
        if !allowed {
            r.problem(
                &format!(
                    "mount.allow_other is set in {} but /etc/fuse.conf does not allow it",
                    c.file.as_deref().unwrap_or(Path::new("?")).display()
                ),
                "add a line `user_allow_other` to /etc/fuse.conf as root, or set allow_other = \
                 false",
            );
        }
    }
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The repositories the mounts use, each with the mountpoints that use it.
type RepoMounts = BTreeMap<PathBuf, Vec<PathBuf>>;

/// The descriptors a daemon with these settings may hold at once: its open overlay files,
/// two per FUSE thread (its `/dev/fuse` clone, a file being read) and per io_uring ring
/// (the ring, a file being read), its text cache's open entries, its control connections,
/// and a margin for the rest (journal, log, lock, socket, scratch files, standard streams).
fn descriptor_need(config: &Config) -> u64 {
    let rings = if config.mount.io_uring {
        revfs_vfs::fuse::uring::rings()
    } else {
        0
    };
    (config.mount.open_files
        + 2 * config.mount.threads
        + 2 * rings
        + revfs_store::bigtext::MAX_OPEN
        + control::MAX_CONNECTIONS
        + 64) as u64
}

/// Warns when daemon `pid` may run out of descriptors: its soft limit below what its
/// settings need, or most of it in use.
fn check_descriptors(r: &mut Report, pid: u32, need: u64, mp: &str, repo: &str) {
    let Ok(limits) = std::fs::read_to_string(format!("/proc/{pid}/limits")) else {
        return;
    };
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<u64>().ok());
    let Some(soft) = soft else { return };
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    let fix = format!(
        "raise the limit before mounting (`ulimit -n {}`, or LimitNOFILE= in the systemd \
         unit), or lower mount.open_files in the configuration; then `revfs unmount {mp}; \
         revfs mount {repo} {mp}`",
        need.next_power_of_two().max(4096)
    );
    if soft < need {
        r.problem(
            &format!(
                "daemon {pid} may run out of file descriptors: its limit is {soft}, its \
                 settings need up to {need} ({open} open now)"
            ),
            &fix,
        );
    } else if open * 5 >= soft * 4 {
        r.problem(
            &format!("daemon {pid} has {open} of its {soft} file descriptors open"),
            &fix,
        );
    }
}
