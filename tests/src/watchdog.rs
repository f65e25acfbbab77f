//! A watchdog per mount, so that no test can hang: if the test's work on a mount does not
//! finish within a deadline, or requests wait on the mount while its daemon uses no CPU at
//! all for [`STUCK`], the watchdog saves the evidence (the daemon's log, its threads'
//! stacks with gdb or eu-stack where installed, the state of each thread, the requests
//! waiting in the kernel), ends the mount's FUSE connection (every call waiting on it fails
//! with ENOTCONN, so the test goes on and fails), kills the daemon and detaches the mount.
//! The owner ([`crate::mount::Mount`]) then fails the test with that evidence.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The default deadline of a mount's whole life in a test (`REVFS_TEST_MOUNT_DEADLINE`
/// seconds overrides it).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// Requests waiting this long on a daemon that uses no CPU: stuck, whatever the deadline.
pub const STUCK: Duration = Duration::from_secs(60);

/// The deadline mounts get unless a test sets its own.
pub fn default_deadline() -> Duration {
    Duration::from_secs(crate::env_or(
        "REVFS_TEST_MOUNT_DEADLINE",
        DEFAULT_DEADLINE.as_secs(),
    ))
}

#[derive(Default)]
struct State {
    stop: bool,
    report: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Which mounts a watchdog watches.
#[derive(Clone)]
enum Target {
    /// The mount at this mountpoint.
    Exact(PathBuf),
    /// Every revfs mount below this directory (for tests that mount through a script).
    Under(PathBuf),
}

impl Target {
    /// The watched mounts now: (mountpoint, FUSE connection).
    fn mounts(&self) -> Vec<(PathBuf, u32)> {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        table
            .lines()
            .filter_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let mut r = right.split(' ');
                let (fstype, source) = (r.next()?, r.next()?);
                if !fstype.starts_with("fuse") || !source.starts_with("revfs") {
                    return None;
                }
                let f: Vec<&str> = left.split(' ').collect();
                let mp = PathBuf::from(f.get(4)?.replace("\\040", " "));
                let conn = f.get(2)?.split_once(':')?.1.parse().ok()?;
                let wanted = match self {
                    Target::Exact(p) => mp == *p,
                    Target::Under(d) => mp.starts_with(d),
                };
                wanted.then_some((mp, conn))
            })
            .collect()
    }
}

/// Watches a mount until dropped or [`Watchdog::stop`]ped.
pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts watching the mount at `mountpoint`, whose state directories are under
    /// `state_root`.
    pub fn start(mountpoint: &Path, state_root: &Path, deadline: Duration) -> Watchdog {
        Self::spawn(Target::Exact(mountpoint.to_owned()), state_root, deadline)
    }

    /// Starts watching every revfs mount that appears below `dir` (mounts made by a script
    /// the test runs), whose state directories are under `state_root`.
    pub fn start_under(dir: &Path, state_root: &Path, deadline: Duration) -> Watchdog {
        Self::spawn(Target::Under(dir.to_owned()), state_root, deadline)
    }

    fn spawn(target: Target, state_root: &Path, deadline: Duration) -> Watchdog {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let theirs = shared.clone();
        let state_root = state_root.to_owned();
        let thread = std::thread::Builder::new()
            .name("mount-watchdog".into())
            .spawn(move || watch(&theirs, &target, &state_root, deadline))
            .expect("spawn the watchdog");
        Watchdog {
            shared,
            thread: Some(thread),
        }
    }

    /// Stops watching; the evidence, if the watchdog fired.
    pub fn stop(&mut self) -> Option<String> {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.lock().report.take()
    }

    /// Whether the watchdog has fired (and ended the mount).
    pub fn fired(&self) -> bool {
        self.shared.lock().report.is_some()
    }
}

impl Drop for Watchdog {
    /// A watchdog that fired fails its test (unless it is failing already).
    fn drop(&mut self) {
        if let Some(report) = self.stop() {
            if !std::thread::panicking() {
                panic!("a mount stopped answering:\n{report}");
            }
            eprintln!("{report}");
        }
    }
}

fn watch(shared: &Shared, target: &Target, state_root: &Path, deadline: Duration) {
    let start = Instant::now();
    // (CPU ticks of the daemons, since when) while requests wait.
    let mut idle: Option<(u64, Instant)> = None;
    let mut state = shared.lock();
    loop {
        if state.stop {
            return;
        }
        let mounts = target.mounts();
        let why = if mounts.is_empty() {
            idle = None;
            None
        } else if start.elapsed() >= deadline {
            Some(format!(
                "the test's work on it took longer than {deadline:?}"
            ))
        } else {
            let waiting: u64 = mounts
                .iter()
                .filter_map(|(_, c)| waiting_requests(*c))
                .sum();
            let ticks: u64 = daemon_pids(state_root)
                .into_iter()
                .filter_map(cpu_ticks)
                .sum();
            if waiting == 0 {
                idle = None;
                None
            } else {
                match idle {
                    Some((t0, since)) if t0 == ticks => (since.elapsed() >= STUCK).then(|| {
                        format!("{waiting} requests waited {STUCK:?} while its daemon used no CPU")
                    }),
                    _ => {
                        idle = Some((ticks, Instant::now()));
                        None
                    }
                }
            }
        };
        if let Some(why) = why {
            drop(state);
            let report = fire(&mounts, state_root, &why);
            eprintln!("{report}");
            shared.lock().report = Some(report);
            return;
        }
        state = match shared.wake.wait_timeout(state, Duration::from_secs(1)) {
            Ok((s, _)) => s,
            Err(p) => p.into_inner().0,
        };
    }
}

/// Collects the evidence, then ends the connections, the daemons and the mounts.
fn fire(mounts: &[(PathBuf, u32)], state_root: &Path, why: &str) -> String {
    let names: Vec<String> = mounts
        .iter()
        .map(|(m, _)| m.display().to_string())
        .collect();
    let mut report = format!(
        "==== mount watchdog: {} stopped answering: {why}\n",
        names.join(", ")
    );
    let pids = daemon_pids(state_root);
    for (mp, conn) in mounts {
        report.push_str(&format!(
            "{}: FUSE connection {conn}, requests waiting: {:?}\n",
            mp.display(),
            waiting_requests(*conn)
        ));
    }
    for &pid in &pids {
        report.push_str(&format!("---- daemon {pid}: threads (state, wchan):\n"));
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                let p = t.path();
                let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
                let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
                let st = stat
                    .rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().next())
                    .unwrap_or("?")
                    .to_owned();
                let wchan = std::fs::read_to_string(p.join("wchan")).unwrap_or_default();
                report.push_str(&format!(
                    "  {} {} {st} {wchan}\n",
                    t.file_name().to_string_lossy(),
                    comm.trim()
                ));
            }
        }
        report.push_str(&format!("---- daemon {pid}: stacks:\n"));
        report.push_str(&stacks(pid));
    }
    report.push_str("---- daemon log (last 200 lines):\n");
    report.push_str(&log_tail(state_root, 200));
    // The way out: end the connections, the daemons, the mounts.
    let mut aborted = Vec::new();
    for (_, conn) in mounts {
        aborted
            .push(std::fs::write(format!("/sys/fs/fuse/connections/{conn}/abort"), b"1").is_ok());
    }
    for &pid in &pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    for (mp, _) in mounts {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(mp)
            .stderr(std::process::Stdio::null())
            .status();
    }
    report.push_str(&format!(
        "==== connections aborted: {aborted:?}; daemons killed; mounts detached\n"
    ));
    report
}

/// The threads' stacks, from gdb or eu-stack when installed (each given 60 s).
fn stacks(pid: i32) -> String {
    let pid = pid.to_string();
    let tries: [(&str, Vec<&str>); 2] = [
        (
            "gdb",
            vec!["-p", &pid, "-batch", "-nx", "-ex", "thread apply all bt"],
        ),
        ("eu-stack", vec!["-p", &pid]),
    ];
    for (tool, args) in tries {
        let out = std::process::Command::new("timeout")
            .args(["-k", "5", "60", tool])
            .args(&args)
            .output();
        if let Ok(out) = out {
            if out.status.code() != Some(127) && !out.stdout.is_empty() {
                return String::from_utf8_lossy(&out.stdout).into_owned();
            }
        }
    }
    "(neither gdb nor eu-stack is installed)\n".into()
}

fn log_tail(state_root: &Path, n: usize) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(state_root.join("mounts"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(e.path().join("daemon.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(n)..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The pids of the daemons whose state directories are under `state_root`.
pub fn daemon_pids(state_root: &Path) -> Vec<i32> {
    std::fs::read_dir(state_root.join("mounts"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("daemon.pid")).ok())
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// The FUSE connection of the mount at `mountpoint`, from the mount table.
pub fn connection(mountpoint: &Path) -> Option<u32> {
    let want = mountpoint.to_str()?.replace(' ', "\\040");
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(4) == Some(&want.as_str()) && l.contains(" - fuse"))
            .then(|| f.get(2)?.split_once(':')?.1.parse().ok())
            .flatten()
    })
}

fn waiting_requests(conn: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/sys/fs/fuse/connections/{conn}/waiting"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// For a test's own checks: the mount table still lists `mountpoint`.
pub fn is_mounted(mountpoint: &Path) -> bool {
    connection(mountpoint).is_some()
}
