//! The load of one step of the soak, run at once until told to stop: first readers (4
//! threads reading whole directories in their listing order, as an indexer does), `tar`
//! and `grep -r` of the tree, updates back and forth between the two revisions (`revfs
//! update` and `hg update` in the mount), and the writer (the model's operations).
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

/// One update of the mount to `node`, by `revfs update` or `hg update` (chosen by `rng`):
/// an error's text when it failed.
pub fn update(mount: &Path, node: &str, rng: &mut Rng) -> Result<(), String> {
    let (what, out) = if rng.below(2) == 0 {
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

/// Runs the step's load for `seconds`: `parent` is the index in `nodes` of the mount's
/// parent, moved by the updates.
pub fn run(
    mount: &Path,
    dirs: &[std::path::PathBuf],
    nodes: &[String; 2],
    parent: &mut usize,
    model: &mut Model,
    rng: &mut Rng,
    seconds: u64,
) -> Report {
    let stop = AtomicBool::new(false);
    let report = Mutex::new(Report::default());
    let mut update_rng = Rng::new(rng.next_u64());
    let mut write_rng = Rng::new(rng.next_u64());
    let reader_seeds: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
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
            let (stop, report) = (&stop, &report);
            let parent = &mut *parent;
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let to = 1 - *parent;
                    let result = update(mount, &nodes[to], &mut update_rng);
                    let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
                    match result {
                        Ok(()) => {
                            *parent = to;
                            r.updates += 1;
                        }
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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
        while std::time::Instant::now() < deadline {
            match model.step(&mut write_rng) {
                Ok(_) => report.lock().unwrap_or_else(|p| p.into_inner()).writes += 1,
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
        stop.store(true, Ordering::Relaxed);
        let _ = updater.join();
    });
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    report.into_inner().unwrap_or_else(|p| p.into_inner())
}
