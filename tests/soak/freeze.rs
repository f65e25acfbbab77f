//! The soak's frozen daemon: SIGSTOP for longer than hg's deadline and its grace while the
//! readers, tar, grep and the writer go on (their requests wait in the kernel), and `hg
//! status` in the mount meanwhile, which must give up by its deadline with the extension's
//! `abort:`, not hang. SIGCONT comes at the planned time whatever the probe does. A probe
//! still running past its deadline and grace fails the soak, with where it waits: the
//! kernel stacks of its threads and the system call each is in, with the path it names.
//! Everything the load did while frozen is checked after the step like the rest.
//!
//! One kind of wait is the kernel's, not revfs's, and is counted apart rather than failed:
//! hg's first steps in a mount, before any extension loads, go through entries of the
//! mount's root that the kernel holds from the mount on (`share::prime_kernel_cache`):
//! `findrepo`'s stat of `.hg`, whose target is the symlink's page in the page cache, and
//! (6.3, share-safe) the path auditor's lstat of the case-swapped `.HG`, a negative entry.
//! When the kernel has dropped them (memory pressure, proactive reclaim), it asks the
//! frozen daemon again and hg waits in `fuse_lookup` of `ROOT/.hg` or `ROOT/.HG`, or in
//! `fuse_readlink_*` / `fuse_get_link`, until the daemon runs (docs/ARCHITECTURE.md,
//! "Never waiting on itself"; made at will by stopping the daemon and `echo 1` or `echo
//! 2 > /proc/sys/vm/drop_caches`). The probe then must end once the daemon runs again.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// hg's deadline for the probe (`revfs.timeout`).
pub const DEADLINE: Duration = Duration::from_secs(2);
/// How much later than its deadline the probe may end: hg's own start and exit.
pub const GRACE: Duration = Duration::from_secs(3);
/// How long the probe may take before it is killed.
const HUNG: Duration = Duration::from_secs(60);

/// How the probe ended.
pub enum Outcome {
    /// hg gave up by its deadline with the extension's abort, after this long.
    GaveUp(Duration),
    /// hg waited for the kernel to look up `.hg` or `.HG`, or read `.hg`'s target, again
    /// from the frozen daemon (dropped from its caches), and ended once the daemon ran
    /// again: how long, and where it waited.
    KernelBound(Duration, String),
}

fn signal(pid: i32, sig: &str) -> Result<(), String> {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(format!("kill {sig} {pid} failed"))
    }
}

/// Freezes the daemon `pid` for `frozen` (longer than [`DEADLINE`] and [`GRACE`]) with
/// the probe running, then lets it go on: how long the probe took to give up, or an
/// error's text when it did not give up as it must.
pub fn freeze(mount: &Path, pid: i32, frozen: Duration) -> Result<Outcome, String> {
    signal(pid, "-STOP")?;
    let started = Instant::now();
    let mut resumed = false;
    let result = probe(mount, || {
        if !resumed && started.elapsed() >= frozen {
            resumed = true;
            signal(pid, "-CONT")?;
        }
        Ok(())
    });
    if !resumed {
        std::thread::sleep(frozen.saturating_sub(started.elapsed()));
        signal(pid, "-CONT")?;
    }
    result
}

/// `hg status` in the frozen mount: how it ended. `tick` runs while it waits (it lets the
/// daemon go at its time).
fn probe(mount: &Path, mut tick: impl FnMut() -> Result<(), String>) -> Result<Outcome, String> {
    let timeout = format!("revfs.timeout={}", DEADLINE.as_secs());
    let mut cmd = Command::new("hg");
    revfs_tests::hg_env(&mut cmd)
        .args(["--config", &timeout, "status"])
        .current_dir(mount)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("hg status: {e}"))?;
    let mut waiting = None;
    let status = loop {
        tick()?;
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > HUNG => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "hg status in the frozen mount hung: killed after {HUNG:?}; {}",
                    waiting.unwrap_or_default()
                ));
            }
            Ok(None) => {
                if waiting.is_none() && started.elapsed() > DEADLINE + GRACE {
                    waiting = Some(revfs_tests::waits::where_it_waits(child.id()));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("hg status: {e}")),
        }
    };
    let took = started.elapsed();
    if let Some(w) = waiting
        .as_ref()
        .filter(|w| waits_for_roots_cached_entries(w, mount))
    {
        return Ok(Outcome::KernelBound(took, w.clone()));
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("hg status: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let gave_up = status.code() == Some(255)
        && err.starts_with("abort: the revfs daemon of ")
        && err.contains(&format!(
            " is not answering: nothing heard for {} s\n",
            DEADLINE.as_secs()
        ));
    if !gave_up || took > DEADLINE + GRACE {
        return Err(format!(
            "hg status in the frozen mount: exit {:?} after {took:?} (its deadline {DEADLINE:?} and {GRACE:?}): {}{}{}",
            status.code(),
            String::from_utf8_lossy(&out.stdout),
            err,
            waiting.map(|w| format!("; past them it was {w}")).unwrap_or_default()
        ));
    }
    Ok(Outcome::GaveUp(took))
}

/// Whether hg's threads, as `where_it_waits` found them, wait for nothing but the kernel's
/// look-up again of the entries of the mount's root it had cached for hg's first steps:
/// its main thread in `fuse_readlink_*` or `fuse_get_link` (`.hg` is the only symlink hg
/// follows in a mount), or in `fuse_lookup` of `ROOT/.hg` or `ROOT/.HG`.
fn waits_for_roots_cached_entries(waiting: &str, mount: &Path) -> bool {
    let main = waiting.split("; thread ").next().unwrap_or_default();
    let named = |name: &str| main.contains(&format!("(path {:?})", mount.join(name)));
    main.contains("fuse_readlink")
        || main.contains("fuse_get_link")
        || (main.contains("fuse_lookup") && (named(".hg") || named(".HG")))
}
