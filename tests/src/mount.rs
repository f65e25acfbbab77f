//! Mounting revfs in tests: a [`Mount`] runs `revfs mount` with its own state directory and
//! unmounts (lazily, so a failing test cannot leave a busy mount behind) when dropped.
//! Every mount has a [`Watchdog`]: a mount that stops answering fails its test within a
//! deadline, with the daemon's log and stacks, instead of hanging the run.

use crate::watchdog::{self, Watchdog};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;
use std::time::Duration;

/// A live revfs mount.
pub struct Mount {
    pub dir: PathBuf,
    pub state_root: PathBuf,
    /// The revfs configuration file every command of this mount gets (`REVFS_CONFIG`),
    /// none when empty.
    config: PathBuf,
    /// The descriptor limit (soft and hard) every `revfs` command of this mount, the daemon
    /// included, runs under; none: the test's own.
    fd_limit: Option<u64>,
    /// The `revfs` program this mount's commands run: the workspace's build unless
    /// [`Mount::with_binary`] gave another.
    bin: PathBuf,
    watchdog: Mutex<Option<Watchdog>>,
    _tmp: tempfile::TempDir,
}

impl Mount {
    /// Mounts `repo` (at `rev` when given) on a fresh directory.
    pub fn new(repo: &Path, rev: Option<&str>) -> Mount {
        Mount::mount_with(repo, rev, None, &[], watchdog::default_deadline())
    }

    /// Mounts `repo` with this revfs configuration (TOML, docs/CONFIG.md).
    pub fn with_config(repo: &Path, config: &str) -> Mount {
        Mount::mount_full(
            repo,
            None,
            None,
            &[],
            watchdog::default_deadline(),
            config,
            None,
        )
    }

    /// Mounts `repo` with this revfs configuration and extra `revfs mount` arguments.
    pub fn with_config_args(repo: &Path, config: &str, extra: &[&str]) -> Mount {
        Mount::mount_full(
            repo,
            None,
            None,
            extra,
            watchdog::default_deadline(),
            config,
            None,
        )
    }

    /// Mounts revision `rev` of `repo` with this revfs configuration.
    pub fn at_with_config(repo: &Path, rev: &str, config: &str) -> Mount {
        Mount::mount_full(
            repo,
            Some(rev),
            None,
            &[],
            watchdog::default_deadline(),
            config,
            None,
        )
    }

    /// Mounts `repo` with this configuration, the daemon and every command of the mount
    /// running under a descriptor limit of `limit` (soft and hard: the daemon cannot raise
    /// it), as under a service manager's limit.
    pub fn with_fd_limit(repo: &Path, config: &str, limit: u64) -> Mount {
        Mount::mount_full(
            repo,
            None,
            None,
            &[],
            watchdog::default_deadline(),
            config,
            Some(limit),
        )
    }

    /// A mount's directory, state and configuration with nothing mounted yet: the test
    /// mounts there itself (`revfs clone URL DIR`); dropping it unmounts what it finds.
    pub fn empty(config: &str) -> Mount {
        Mount::unmounted(None, watchdog::default_deadline(), config, None)
    }

    /// Mounts `repo` with a watchdog deadline of its own.
    pub fn with_deadline(repo: &Path, deadline: Duration) -> Mount {
        Mount::mount_with(repo, None, None, &[], deadline)
    }

    /// Mounts `repo` with extra `revfs mount` arguments.
    pub fn with_args(repo: &Path, extra: &[&str]) -> Mount {
        Mount::mount_with(repo, None, None, extra, watchdog::default_deadline())
    }

    /// Mounts `repo` with its state directories under `state_root` (for a state directory
    /// on a particular file system).
    pub fn with_state_root(repo: &Path, rev: Option<&str>, state_root: &Path) -> Mount {
        Mount::mount_with(
            repo,
            rev,
            Some(state_root),
            &[],
            watchdog::default_deadline(),
        )
    }

    /// Mounts `repo` with the `revfs` program `bin`, which every command of the mount runs.
    pub fn with_binary(repo: &Path, bin: &Path) -> Mount {
        let mut m = Mount::unmounted(None, watchdog::default_deadline(), "", None);
        m.bin = bin.to_path_buf();
        m.start(repo, None, &[]);
        m
    }

    fn mount_with(
        repo: &Path,
        rev: Option<&str>,
        state_root: Option<&Path>,
        extra: &[&str],
        deadline: Duration,
    ) -> Mount {
        Mount::mount_full(repo, rev, state_root, extra, deadline, "", None)
    }

    fn mount_full(
        repo: &Path,
        rev: Option<&str>,
        state_root: Option<&Path>,
        extra: &[&str],
        deadline: Duration,
        config: &str,
        fd_limit: Option<u64>,
    ) -> Mount {
        let m = Mount::unmounted(state_root, deadline, config, fd_limit);
        m.start(repo, rev, extra);
        m
    }

    /// A mount's directories and settings, before `revfs mount` runs.
    fn unmounted(
        state_root: Option<&Path>,
        deadline: Duration,
        config: &str,
        fd_limit: Option<u64>,
    ) -> Mount {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("mnt");
        let state_root = state_root
            .map(Path::to_path_buf)
            .unwrap_or_else(|| tmp.path().join("state"));
        std::fs::create_dir(&dir).expect("mkdir");
        let config_file = if config.is_empty() {
            PathBuf::new()
        } else {
            let f = tmp.path().join("config.toml");
            std::fs::write(&f, config).expect("config");
            f
        };
        Mount {
            config: config_file,
            fd_limit,
            bin: crate::revfs_bin(),
            watchdog: Mutex::new(Some(Watchdog::start(&dir, &state_root, deadline))),
            dir,
            state_root,
            _tmp: tmp,
        }
    }

    /// Replaces the revfs configuration of a mount made with one: the next daemon it starts
    /// reads the new text.
    pub fn set_config(&self, config: &str) {
        assert!(
            !self.config.as_os_str().is_empty(),
            "a mount made without a configuration"
        );
        std::fs::write(&self.config, config).expect("config");
    }

    /// `revfs mount [EXTRA] [-r REV] REPO DIR`, which must succeed.
    fn start(&self, repo: &Path, rev: Option<&str>, extra: &[&str]) {
        let mut args = vec!["mount".to_owned()];
        args.extend(extra.iter().map(|a| a.to_string()));
        if let Some(r) = rev {
            args.push("-r".into());
            args.push(r.into());
        }
        args.push(repo.display().to_string());
        args.push(self.dir.display().to_string());
        let out = self.revfs(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "revfs mount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `revfs ARGS` with this mount's state directory.
    pub fn revfs(&self, args: &[&str]) -> Output {
        self.revfs_in(self.dir.parent().unwrap_or(Path::new("/")), args)
    }

    /// Runs `revfs ARGS` with this mount's state directory and hg configuration file `hgrc`
    /// (`HGRCPATH`): the daemon it starts reads it too.
    pub fn revfs_with_hgrc(&self, hgrc: &Path, args: &[&str]) -> Output {
        self.command(self.dir.parent().unwrap_or(Path::new("/")), args)
            .env("HGRCPATH", hgrc)
            .output()
            .expect("spawn revfs")
    }

    /// Runs `revfs ARGS` with this mount's state directory and `dir` first in `PATH` (the
    /// hg a user has there).
    pub fn revfs_with_path_first(&self, dir: &Path, args: &[&str]) -> Output {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![dir.to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        self.command(self.dir.parent().unwrap_or(Path::new("/")), args)
            .env("PATH", std::env::join_paths(dirs).expect("PATH"))
            .output()
            .expect("spawn revfs")
    }

    /// Runs `revfs ARGS` from `cwd` (file arguments are relative to it, as in hg).
    pub fn revfs_in(&self, cwd: &Path, args: &[&str]) -> Output {
        self.command(cwd, args).output().expect("spawn revfs")
    }

    /// The command `revfs ARGS` from `cwd`, with this mount's state directory,
    /// configuration and descriptor limit.
    fn command(&self, cwd: &Path, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.bin);
        if let Some(limit) = self.fd_limit {
            use std::os::unix::process::CommandExt;
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            // SAFETY: setrlimit is async-signal-safe; `lim` is a plain value.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        crate::hg_env(cmd.args(args))
            .env("REVFS_STATE_DIR", &self.state_root)
            .env("REVFS_CONFIG", &self.config)
            .current_dir(cwd);
        cmd
    }

    /// The mount's state directory.
    pub fn state_dir(&self) -> PathBuf {
        self.try_state_dir().expect("one mount state")
    }

    /// The mount's state directory, if it has one (`revfs unmount --discard` removes it).
    fn try_state_dir(&self) -> Option<PathBuf> {
        std::fs::read_dir(self.state_root.join("mounts"))
            .ok()?
            .flatten()
            .next()
            .map(|e| e.path())
    }

    /// The daemon's process id.
    pub fn daemon_pid(&self) -> i32 {
        std::fs::read_to_string(self.state_dir().join("daemon.pid"))
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }

    /// Kills the daemon with SIGKILL (as a crash would), leaving the mount dead until
    /// [`Mount::unmount`].
    pub fn kill_daemon(&self) {
        let pid = self.daemon_pid();
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -9 {pid}");
    }

    /// The daemon's control socket.
    pub fn socket(&self) -> PathBuf {
        self.state_dir().join("control.sock")
    }

    /// Sends one raw request line (JSON) to the daemon and returns its answer, all lines.
    pub fn control(&self, request: &str) -> String {
        use std::io::{Read, Write};
        let mut c = std::os::unix::net::UnixStream::connect(self.socket()).expect("connect");
        c.write_all(request.as_bytes()).expect("send");
        c.write_all(b"\n").expect("send");
        c.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let mut answer = String::new();
        c.read_to_string(&mut answer).expect("answer");
        answer
    }

    /// The daemon's answer to `stats` (docs/FORMATS.md, "Control protocol").
    pub fn stats(&self) -> Stats {
        let answer = self.control("{\"cmd\":\"stats\"}");
        let value = serde_json::from_str(answer.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("stats: {answer}: {e}"));
        Stats { answer, value }
    }

    /// Debug builds: makes the daemon hold its working copy's lock forever (`debug_hang`),
    /// as a deadlock would.
    pub fn debug_hang(&self) {
        assert_eq!(
            self.control("{\"cmd\":\"debug_hang\"}"),
            "{\"reply\":\"done\"}\n"
        );
    }

    /// Debug builds: read-ahead pushes nothing into the page cache from now on
    /// (`debug_no_push`), for tests of what read-ahead holds itself.
    pub fn debug_no_push(&self) {
        assert_eq!(
            self.control("{\"cmd\":\"debug_no_push\"}"),
            "{\"reply\":\"done\"}\n"
        );
    }

    /// How long the oldest filesystem request being served has waited, as `ping` says.
    pub fn busy(&self) -> Duration {
        let pong = self.control("{\"cmd\":\"ping\"}");
        let v: serde_json::Value = serde_json::from_str(&pong).expect("pong");
        Duration::from_millis(v["busy_ms"].as_u64().expect("busy_ms"))
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        let mounts = self.state_root.join("mounts");
        std::fs::read_dir(&mounts)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| std::fs::read_to_string(e.path().join("daemon.log")).unwrap_or_default())
            .collect()
    }

    /// Mounts `repo` again on the same directory with the same state (after an unmount or a
    /// killed daemon), asserting success.
    pub fn remount(&self, repo: &Path, rev: Option<&str>) {
        let (repo, dir) = (repo.display().to_string(), self.dir.display().to_string());
        let mut args = vec!["mount"];
        if let Some(r) = rev {
            args.extend(["-r", r]);
        }
        args.extend([repo.as_str(), dir.as_str()]);
        let out = self.revfs(&args);
        assert!(
            out.status.success(),
            "revfs mount again: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Unmounts, asserting success.
    pub fn unmount(&self) {
        let mut out = self.revfs(&["unmount", &self.dir.display().to_string()]);
        // A process that just closed its last file in the mount may still be on its way out
        // (the kernel drops its references asynchronously): give it a moment.
        for _ in 0..25 {
            if out.status.success() || !String::from_utf8_lossy(&out.stderr).contains("is busy") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            out = self.revfs(&["unmount", &self.dir.display().to_string()]);
        }
        assert!(
            out.status.success(),
            "revfs unmount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Mount {
    /// Stops the watchdog: the evidence it saved if it fired (the mount is then gone).
    pub fn stop_watchdog(&self) -> Option<String> {
        let w = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        w.and_then(|mut w| w.stop())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let report = self.stop_watchdog();
        let pid = self
            .try_state_dir()
            .and_then(|d| std::fs::read_to_string(d.join("daemon.pid")).ok())
            .and_then(|s| s.trim().parse::<i32>().ok());
        let detached = std::process::Command::new("fusermount3")
            .arg("-uz")
            .arg(&self.dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !detached && crate::watchdog::is_mounted(&self.dir) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.dir)
                .stderr(std::process::Stdio::null())
                .status();
        }
        // As `revfs unmount` does: the daemon's last writes (its journal, the repository's
        // size cache) are done before the test's directories go.
        if let Some(pid) = pid {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let alive = || {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                    // The state after the command's name: a zombie has ended.
                    st.rsplit_once(") ")
                        .is_some_and(|(_, rest)| !rest.starts_with('Z'))
                })
            };
            while alive() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some(report) = report {
            if !std::thread::panicking() {
                panic!("the mount stopped answering:\n{report}");
            }
            eprintln!("{report}");
        }
    }
}

/// One entry of a tree snapshot: kind, exec bit, content or link target; a file's link
/// count (its names, hard links).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snap {
    Dir,
    File {
        exec: bool,
        data: Vec<u8>,
        links: u64,
    },
    Link(Vec<u8>),
}

/// Every path under `root` (except `.hg`) with what it is, sorted by path.
/// What lstat says of a path: inode, mtime (s, ns), ctime (s, ns), mode, size, links.
pub type Stat = (u64, i64, i64, i64, i64, u32, u64, u64);

/// Every path below `root` with what lstat says of it.
pub fn lstat_tree(root: &Path) -> BTreeMap<PathBuf, Stat> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            use std::os::unix::fs::MetadataExt;
            if m.is_dir() {
                stack.push(p.clone());
            }
            let key = (
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                m.mode(),
                m.size(),
                m.nlink(),
            );
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), key);
        }
    }
    out
}

/// Makes the kernel drop every unused dentry and inode (`echo 2 > drop_caches`): each
/// mount gets a FORGET for every inode nothing holds any more. Needs root.
pub fn drop_kernel_caches() {
    std::fs::write("/proc/sys/vm/drop_caches", "2\n")
        .unwrap_or_else(|e| panic!("dropping the kernel's dentries and inodes: {e}"));
}

pub fn snapshot(root: &Path) -> Vec<(PathBuf, Snap)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(PathBuf, Snap)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
            .map(|e| e.expect("dir entry"))
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            if e.file_name() == ".hg" {
                continue;
            }
            let rel = p.strip_prefix(base).expect("under base").to_path_buf();
            let meta = std::fs::symlink_metadata(&p).expect("lstat");
            if meta.file_type().is_symlink() {
                let t = std::fs::read_link(&p).expect("readlink");
                out.push((rel, Snap::Link(t.as_os_str().as_bytes().to_vec())));
            } else if meta.is_dir() {
                out.push((rel, Snap::Dir));
                walk(base, &p, out);
            } else {
                let data =
                    std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
                assert_eq!(
                    meta.len(),
                    data.len() as u64,
                    "{}: stat size differs from bytes read",
                    p.display()
                );
                out.push((
                    rel,
                    Snap::File {
                        exec: meta.permissions().mode() & 0o111 != 0,
                        data,
                        links: std::os::unix::fs::MetadataExt::nlink(&meta),
                    },
                ));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// One answer of the daemon to `stats`.
#[derive(Debug, PartialEq)]
pub struct Stats {
    answer: String,
    value: serde_json::Value,
}

impl Stats {
    /// The number `key` of the answer (`entries`, `frozen`, `listed`, ...); panics, with the
    /// answer, when it is missing.
    pub fn get(&self, key: &str) -> u64 {
        self.value[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {}", self.answer))
    }
}

impl Stats {
    /// The number `key` of the answer's `readahead` (`files`, `bytes`, `pending_bytes`,
    /// ...); `None` when read-ahead is off.
    pub fn readahead(&self, key: &str) -> Option<u64> {
        let r = &self.value["readahead"];
        if r.is_null() {
            return None;
        }
        Some(
            r[key]
                .as_u64()
                .unwrap_or_else(|| panic!("readahead.{key} in {}", self.answer)),
        )
    }
}

impl Stats {
    /// The filesystem requests the daemon has been sent, by opcode (`lookup`, `create`...),
    /// the kinds sent at least once.
    pub fn requests(&self) -> std::collections::BTreeMap<String, u64> {
        let r = self.value["requests"]
            .as_object()
            .unwrap_or_else(|| panic!("requests in {}", self.answer));
        r.iter()
            .map(|(k, v)| {
                let n = v
                    .as_u64()
                    .unwrap_or_else(|| panic!("requests.{k} in {}", self.answer));
                (k.clone(), n)
            })
            .collect()
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.answer.trim_end())
    }
}
