//! The soak's frozen daemon: SIGSTOP for longer than hg's deadline while the readers, tar,
//! grep and the writer go on (their requests wait in the kernel), and `hg status` in the
//! mount meanwhile, which must give up by its deadline with the extension's `abort:`, not
//! hang. Then SIGCONT: everything the load did while frozen is checked after the step
//! like the rest.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// hg's deadline for the probe (`revfs.timeout`).
pub const DEADLINE: Duration = Duration::from_secs(2);
/// How much later than its deadline the probe may end: hg's own start and exit.
const GRACE: Duration = Duration::from_secs(3);
/// How long the probe may take before it counts as hung (it is then killed).
const HUNG: Duration = Duration::from_secs(60);

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

/// Freezes the daemon `pid` for `frozen` (longer than [`DEADLINE`]), runs the probe, and
/// lets it go on. An error's text when the probe did not end as it must.
pub fn freeze(mount: &Path, pid: i32, frozen: Duration) -> Result<Duration, String> {
    signal(pid, "-STOP")?;
    let started = Instant::now();
    let probe = probe(mount);
    let rest = frozen.saturating_sub(started.elapsed());
    std::thread::sleep(rest);
    signal(pid, "-CONT")?;
    probe
}

/// `hg status` in the frozen mount: how long it took to give up.
fn probe(mount: &Path) -> Result<Duration, String> {
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
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > HUNG => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "hg status in the frozen mount hung: killed after {HUNG:?}"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("hg status: {e}")),
        }
    };
    let took = started.elapsed();
    let out = child
        .wait_with_output()
        .map_err(|e| format!("hg status: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let gave_up = status.code() == Some(255)
        && err.starts_with("abort: the revfs daemon of ")
        && err.contains(" is not answering: nothing heard for 2 s\n");
    if !gave_up {
        return Err(format!(
            "hg status in the frozen mount: exit {:?} after {took:?}: {}{}",
            status.code(),
            String::from_utf8_lossy(&out.stdout),
            err
        ));
    }
    if took > DEADLINE + GRACE {
        return Err(format!(
            "hg status in the frozen mount gave up after {took:?}, past its deadline ({DEADLINE:?}) and {GRACE:?}"
        ));
    }
    Ok(took)
}
