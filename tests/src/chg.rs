//! The oracle's hg through chg. hg spends ~200 ms of its ~215 ms start importing Python;
//! the suite runs thousands of hg commands on clones and fixture repositories, so those
//! (and only those) go to chg, hg's own client for a command server that imports once and
//! forks a worker per command: the same hg code on the same repository, ~30 ms a command.
//! hg in a mount stays plain `hg`: that is the product under test, as most users run it
//! (chg in a mount has its own test, hg_in_mount's `chg_in_a_mount_...`).
//!
//! One server per test process (and per configuration: chg starts another for a command
//! whose extensions differ), its socket in `/tmp/revfs-tests-chg.PID/`. When the test
//! process exits, that directory is removed (an `atexit` handler) and each server, which
//! checks every second that it still owns its socket, exits. A test process killed before
//! its exit leaves a server that exits after 5 idle minutes (`chgserver.idletimeout`, the
//! only setting of the hgrc the chg commands get instead of an empty HGRCPATH).
//! `REVFS_TEST_CHG=0` runs plain hg everywhere.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directory of this process's chg sockets, or None for plain hg.
static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();

extern "C" fn remove_socket_dir() {
    if let Some(Some(dir)) = DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

fn socket_dir() -> Option<&'static Path> {
    DIR.get_or_init(|| {
        if std::env::var("REVFS_TEST_CHG").is_ok_and(|v| v == "0") || !on_path("chg") {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("revfs-tests-chg.{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join("hgrc"), "[chgserver]\nidletimeout = 300\n").ok()?;
        // SAFETY: registers a plain function with no arguments, run once at exit.
        unsafe { libc::atexit(remove_socket_dir) };
        Some(dir)
    })
    .as_deref()
}

/// Whether `path` is on a FUSE filesystem (a mount under test).
fn on_fuse(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path; st is a buffer of the right type.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    r == 0 && st.f_type as i64 == FUSE_SUPER_MAGIC
}

/// Whether `hg ARGS` run in `dir` touches a FUSE filesystem: `dir` itself, or the
/// repository or directory an `-R`/`--repository`/`--cwd` argument names.
fn touches_fuse(dir: &Path, args: &[&str]) -> bool {
    if on_fuse(dir) {
        return true;
    }
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let named = match *a {
            "-R" | "--repository" | "--cwd" => it.next().copied(),
            _ => ["-R", "--repository=", "--cwd="]
                .iter()
                .find_map(|p| a.strip_prefix(p))
                .filter(|v| !v.is_empty()),
        };
        if let Some(v) = named {
            if on_fuse(&dir.join(v)) {
                return true;
            }
        }
    }
    false
}

/// `hg ARGS` in `dir` with the tests' environment: through chg when it runs outside every
/// mount, else plain hg.
pub fn hg_command(dir: &Path, args: &[&str]) -> Command {
    let chg = match socket_dir() {
        Some(sockets) if !touches_fuse(dir, args) => Some(sockets),
        _ => None,
    };
    let mut cmd = Command::new(if chg.is_some() { "chg" } else { "hg" });
    crate::hg_env(cmd.args(args).current_dir(dir));
    if let Some(sockets) = chg {
        cmd.env("CHGSOCKNAME", sockets.join("s"))
            .env("HGRCPATH", sockets.join("hgrc"));
    }
    cmd
}
