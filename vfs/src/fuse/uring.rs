//! How the kernel hands the mount its requests: through io_uring rings (FUSE over io_uring,
//! Linux 6.14+) or by reads and writes of `/dev/fuse`; `mount.io_uring` chooses, and this
//! module decides what the kernel allows and says why in `revfs doctor`.
//!
//! With rings, each CPU has its own queue and the daemon a thread per ring pinned to that
//! CPU (vendor/fuser/src/uring.rs): a program's request is answered on the CPU it runs on,
//! without a wake-up crossing CPUs, so a round trip costs a third of what `/dev/fuse` costs
//! (docs/BENCHMARKS.md, "FUSE over io_uring"). The kernel offers it only while the fuse
//! module's `enable_uring` parameter is on; it is off by default, and only root may turn it
//! on. It concerns only FUSE servers that ask for io_uring at INIT, so the daemon, when root,
//! turns it on for its mount.

use std::path::Path;

/// The fuse module's switch for io_uring.
pub const ENABLE_FILE: &str = "/sys/module/fuse/parameters/enable_uring";

/// Ring threads per CPU queue: a request that waits (on the disk, on a lock) holds its ring,
/// and a second keeps the CPU's other requests moving.
pub const THREADS_PER_CPU: usize = 2;

/// The rings a mount with io_uring has: [`THREADS_PER_CPU`] a possible CPU, each one thread
/// with an io_uring descriptor (for `revfs doctor`'s count of the descriptors a daemon may
/// hold).
pub fn rings() -> usize {
    fuser::io_uring_queues() * THREADS_PER_CPU
}

/// Whether the mount should ask for io_uring at INIT: `Ok` when the kernel will offer it
/// (turning `enable_uring` on when root and it is off), or why not, as `revfs doctor` words
/// it.
pub fn prepare(wanted: bool) -> Result<(), String> {
    prepare_at(wanted, Path::new(ENABLE_FILE))
}

fn prepare_at(wanted: bool, enable: &Path) -> Result<(), String> {
    if !wanted {
        return Err("mount.io_uring is off".into());
    }
    match std::fs::read_to_string(enable) {
        Err(_) => Err("this kernel has no FUSE over io_uring (Linux 6.14+)".into()),
        Ok(v) if v.trim() == "Y" => Ok(()),
        Ok(_) => std::fs::write(enable, "Y\n").map_err(|e| {
            format!(
                "the fuse module's enable_uring is off and could not be turned on ({e}); as \
                 root: echo Y > {}",
                enable.display()
            )
        }),
    }
}

/// The mode `revfs doctor` shows: `io_uring (N rings)`, or `/dev/fuse (why)`.
pub fn mode(rings: usize, prepared: &Result<(), String>) -> String {
    match (rings, prepared) {
        (0, Err(why)) => format!("/dev/fuse ({why})"),
        (0, Ok(())) => "/dev/fuse (the kernel did not offer io_uring, or io_uring is not \
                        available to the daemon)"
            .into(),
        (n, _) => format!("io_uring ({n} rings)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_in_the_configuration_is_never_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("enable_uring");
        std::fs::write(&file, "N\n").unwrap();
        assert_eq!(
            prepare_at(false, &file),
            Err("mount.io_uring is off".to_string())
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "N\n");
    }

    #[test]
    fn a_kernel_without_the_parameter_keeps_dev_fuse() {
        let dir = tempfile::tempdir().unwrap();
        let why = prepare_at(true, &dir.path().join("absent")).unwrap_err();
        assert!(why.contains("Linux 6.14+"), "{why}");
        assert_eq!(mode(0, &Err(why.clone())), format!("/dev/fuse ({why})"));
    }

    #[test]
    fn the_parameter_is_turned_on_when_off() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("enable_uring");
        std::fs::write(&file, "N\n").unwrap();
        assert_eq!(prepare_at(true, &file), Ok(()));
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "Y");
        assert_eq!(mode(4, &Ok(())), "io_uring (4 rings)");
    }
}
