//! The load of one step of the soak, run at once until told to stop: first readers (4
//! threads reading whole directories in their listing order, as an indexer does), `tar`
//! and `grep -r` of the tree, updates back and forth between the two revisions (`revfs
//! update` and `hg update` in the mount) and, one time in three instead of an update, a
//! round of tracked writes, `hg commit` and `hg rebase` ([`crate::tracked`]), the writer
//! (the model's operations), and in some steps a frozen daemon ([`crate::freeze`]), never
//! in the middle of an update or a round.
//! Readers see whatever the tree holds at that moment; what they read is not checked (an
//! update may be midway), but what they make the daemon do (read-ahead, pushes into the
//! kernel's cache) must not leave a wrong byte for the check after the step.

use crate::model::Model;
use revfs_tests::Rng;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What a step did, for its line in the log; `failures` fail the soak.
#[derive(Default)]
pub struct Report {
    pub files_read: u64,
    pub updates: u64,
    pub writes: u64,
    /// Rounds of commit and rebase.
    pub commits: u64,
    /// How `hg status` in the frozen mount ended, when the step froze it.
    pub frozen: Option<crate::freeze::Outcome>,
    /// What the updater was doing when the step killed the daemon, when it did.
    pub killed: Option<InFlight>,
    pub failures: Vec<String>,
}

/// Reads every file of random directories of `dirs`, whole, in listing order, until `stop`.
fn reader(mount: &Path, dirs: &[std::path::PathBuf], seed: u64, stop: &AtomicBool) -> u64 {
    let mut rng = Rng::new(seed);
    let mut read = 0;
    while !stop.load(Ordering::Relaxed) {
        let Some(dir) = rng.pick(dirs) else {
            return read;
        };
        let Ok(entries) = std::fs::read_dir(mount.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if e.file_type().is_ok_and(|t| t.is_file()) && std::fs::read(e.path()).is_ok() {
                read += 1;
            }
        }
    }
    read
}

/// `tar` of the tree into a pipe that `cat` reads to its end (GNU tar reads nothing for
/// /dev/null), and `grep -r`: killed at the stop.
fn tools(mount: &Path) -> Vec<Child> {
    let quiet = |c: &mut Command| {
        c.current_dir(mount).stderr(Stdio::null());
    };
    let mut children = Vec::new();
    let mut tar = Command::new("tar");
    tar.args(["cf", "-", "."]).stdout(Stdio::piped());
    quiet(&mut tar);
    if let Ok(mut tar) = tar.spawn() {
        if let Some(out) = tar.stdout.take() {
            let mut cat = Command::new("cat");
            cat.stdin(Stdio::from(out)).stdout(Stdio::null());
            quiet(&mut cat);
            children.extend(cat.spawn());
        }
        children.push(tar);
    }
    let mut grep = Command::new("grep");
    grep.args(["-r", "-c", "-e", "revfs soak", "."])
        .stdout(Stdio::null());
    quiet(&mut grep);
    children.extend(grep.spawn());
    children
}

/// What the updater was doing when a kill came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InFlight {
    Nothing,
    RevfsUpdate,
    HgUpdate,
    Round,
}

/// One update of the mount to `node`, by `revfs update` or `hg update`: an error's text
/// when it failed.
pub fn update(mount: &Path, node: &str, by_revfs: bool) -> Result<(), String> {
    let (what, out) = if by_revfs {
        ("revfs update", revfs_tests::revfs(mount, &["update", node]))
    } else {
        (
            "hg update",
            revfs_tests::hg_plain_cmd(mount, &["update", "-q", node]),
        )
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} {node}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What a step works on besides the writer's model.
pub struct Tree<'a> {
    pub mount: &'a Path,
    /// The daemon's pid, for the freeze.
    pub pid: i32,
    /// The directories the readers read.
    pub dirs: &'a [std::path::PathBuf],
    /// The two revisions.
    pub nodes: &'a [String; 2],
    /// Tracked files the same in both revisions, for the commit rounds.
    pub same: &'a [std::path::PathBuf],
    /// One step in this many that is not frozen kills the daemon in its middle.
    pub kill_odds: usize,
    /// One step in this many freezes the daemon.
    pub freeze_odds: usize,
}

/// Runs the step's load for `seconds`: `parent` is the index in `nodes` of the mount's
/// parent, moved by the updates.
pub fn run(
    tree: &Tree,
    parent: &mut usize,
    rounds: &mut u64,
    model: &mut Model,
    rng: &mut Rng,
    seconds: u64,
) -> Report {
    let (mount, dirs, nodes) = (tree.mount, tree.dirs, tree.nodes);
    let stop = AtomicBool::new(false);
    let report = Mutex::new(Report::default());
    // Held by the updater through each update or round, and by the freeze.
    let control = Mutex::new(());
    let mut update_rng = Rng::new(rng.next_u64());
    let mut write_rng = Rng::new(rng.next_u64());
    let reader_seeds: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
    // One step in `freeze_odds` (4 by default) freezes the daemon, at a random moment of its first half, for
    // longer than hg's deadline and grace (so that an hg stuck in the kernel until the
    // daemon goes on is past them too).
    let freeze = (rng.below(tree.freeze_odds.max(1)) == 0).then(|| {
        let at = std::time::Duration::from_millis(rng.below(seconds as usize * 500) as u64);
        let frozen = crate::freeze::DEADLINE
            + crate::freeze::GRACE
            + std::time::Duration::from_millis(500 + rng.below(2500) as u64);
        (at, frozen)
    });
    // One step in `kill_odds` of the others kills the daemon (SIGKILL) at a random moment:
    // the writer then fsyncs after each operation, and the load stops at the kill.
    let kill = (freeze.is_none() && rng.below(tree.kill_odds.max(1)) == 0)
        .then(|| std::time::Duration::from_millis(rng.below(seconds as usize * 1000) as u64));
    let killed = AtomicBool::new(false);
    let flight = Mutex::new(InFlight::Nothing);
    let mut children = tools(mount);
    std::thread::scope(|s| {
        for seed in reader_seeds {
            let (stop, report) = (&stop, &report);
            s.spawn(move || {
                let n = reader(mount, dirs, seed, stop);
                report.lock().unwrap_or_else(|p| p.into_inner()).files_read += n;
            });
        }
        let updater = {
            let (stop, report, control) = (&stop, &report, &control);
            let (killed, flight) = (&killed, &flight);
            let parent = &mut *parent;
            let rounds = &mut *rounds;
            let same = tree.same;
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) && !killed.load(Ordering::SeqCst) {
                    let to = 1 - *parent;
                    let held = control.lock().unwrap_or_else(|p| p.into_inner());
                    let commit = !same.is_empty() && update_rng.below(3) == 0;
                    let by_revfs = update_rng.below(2) == 0;
                    {
                        // Under the lock the kill takes: what is under way when it comes.
                        let mut f = flight.lock().unwrap_or_else(|p| p.into_inner());
                        if killed.load(Ordering::SeqCst) {
                            return;
                        }
                        *f = match (commit, by_revfs) {
                            (true, _) => InFlight::Round,
                            (false, true) => InFlight::RevfsUpdate,
                            (false, false) => InFlight::HgUpdate,
                        };
                    }
                    let result = if commit {
                        *rounds += 1;
                        crate::tracked::round(mount, nodes, parent, same, &mut update_rng, *rounds)
                    } else {
                        update(mount, &nodes[to], by_revfs).map(|()| *parent = to)
                    };
                    *flight.lock().unwrap_or_else(|p| p.into_inner()) = InFlight::Nothing;
                    drop(held);
                    let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
                    match result {
                        Ok(()) if commit => r.commits += 1,
                        Ok(()) => r.updates += 1,
                        // What the kill cut short is settled after the mount again.
                        Err(_) if killed.load(Ordering::SeqCst) => return,
                        Err(e) => {
                            r.failures.push(e);
                            return;
                        }
                    }
                    drop(r);
                    std::thread::sleep(std::time::Duration::from_millis(
                        update_rng.below(500) as u64
                    ));
                }
            })
        };
        let freezer = freeze.map(|(at, frozen)| {
            let (report, control, pid) = (&report, &control, tree.pid);
            s.spawn(move || {
                std::thread::sleep(at);
                let held = control.lock().unwrap_or_else(|p| p.into_inner());
                let result = crate::freeze::freeze(mount, pid, frozen);
                drop(held);
                let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
                match result {
                    Ok(outcome) => r.frozen = Some(outcome),
                    Err(e) => r.failures.push(e),
                }
            })
        });
        let killer = kill.map(|at| {
            let (report, killed, flight, pid) = (&report, &killed, &flight, tree.pid);
            s.spawn(move || {
                std::thread::sleep(at);
                // The flag first: every error from here on is the kill's. The updater
                // starts nothing new while the lock is held.
                let f = flight.lock().unwrap_or_else(|p| p.into_inner());
                killed.store(true, Ordering::SeqCst);
                let ok = Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
                let doing = *f;
                drop(f);
                let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
                if ok {
                    r.killed = Some(doing);
                } else {
                    r.failures.push(format!("kill -9 {pid} failed"));
                }
            })
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
        while std::time::Instant::now() < deadline && !killed.load(Ordering::SeqCst) {
            match model.step(&mut write_rng, kill.is_some()) {
                Ok(_) => report.lock().unwrap_or_else(|p| p.into_inner()).writes += 1,
                Err(_) if killed.load(Ordering::SeqCst) => break,
                Err(e) => {
                    report
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .failures
                        .push(e);
                    break;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(write_rng.below(20) as u64));
        }
        if let Some(f) = freezer {
            let _ = f.join();
        }
        if let Some(k) = killer {
            let _ = k.join();
        }
        stop.store(true, Ordering::Relaxed);
        let _ = updater.join();
    });
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    report.into_inner().unwrap_or_else(|p| p.into_inner())
}
