//! The process's memory allocator, chosen once before `main`: mimalloc in a mount's daemon,
//! the system's (glibc) in every other command; in the static musl build of the commands
//! (packaging/build.sh), the system's (musl's) only where start-up is the whole cost
//! (`status`, `--version`, `--help`) and mimalloc elsewhere (see [`wants_mimalloc`]).
//!
//! The daemon's first read of a tree spent 5.3% of its CPU in glibc's malloc and free
//! (docs/BENCHMARKS.md), so it runs mimalloc, with `MIMALLOC_ARENA_EAGER_COMMIT=0`
//! (`commands::mount::ALLOCATOR_ENV`), which keeps its memory bounds. A command lives a few
//! milliseconds, and mimalloc cost it more than it saved: its first allocation maps an arena
//! with `MADV_HUGEPAGE`, and each first touch of it faulted in a 2 MiB page that the kernel
//! cleared (`revfs --version` took 5 ms, 4 ms of it CPU; docs/BENCHMARKS.md, "Start-up").
//!
//! The choice is made from the command line by a function in `.init_array`, which the
//! dynamic loader runs before `main` and before any Rust code allocates (Rust allocates
//! only from `main` on; no crate here allocates from a constructor), and it never changes
//! afterwards: every block is freed by the allocator that gave it. glibc hands that
//! function the arguments; musl (a static build, `--target x86_64-unknown-linux-musl`,
//! tried for start-up: docs/BENCHMARKS.md, "Start-up") does not, so there it reads
//! `/proc/self/cmdline`.

use std::alloc::{GlobalAlloc, Layout, System};
#[cfg(target_env = "gnu")]
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process runs mimalloc (see [`wants_mimalloc`]). Written once, by the
/// function in `.init_array`, before `main`.
static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// The allocator of the `revfs` binary: see the module comment.
pub struct Revfs;

fn mimalloc() -> bool {
    MIMALLOC.load(Ordering::Relaxed)
}

// SAFETY: each call goes to one allocator, the same for the life of the process (MIMALLOC is
// set before the first allocation and never again), so a block is always resized and
// freed by the allocator that made it; both allocators uphold GlobalAlloc's contract.
unsafe impl GlobalAlloc for Revfs {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mimalloc() {
            mimalloc::MiMalloc.alloc(layout)
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mimalloc() {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mimalloc() {
            mimalloc::MiMalloc.dealloc(ptr, layout)
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if mimalloc() {
            mimalloc::MiMalloc.realloc(ptr, layout, new_size)
        } else {
            System.realloc(ptr, layout, new_size)
        }
    }
}

/// Whether a command line (without the program's name) starts a daemon.
fn is_daemon<'a>(mut args: impl Iterator<Item = &'a [u8]>) -> bool {
    args.any(|a| a == b"--foreground")
}

/// The command a command line names: its first word that is neither an option nor the
/// value of a global option taking one (`-R REPO`, `--color TYPE`); None for none
/// (`--version`, `--help`).
fn command_of<'a>(mut args: impl Iterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    while let Some(a) = args.next() {
        match a {
            b"-R" | b"--repository" | b"--color" => {
                args.next();
            }
            _ if a.starts_with(b"-") => {}
            _ => return Some(a),
        }
    }
    None
}

/// Whether a command line runs mimalloc. A daemon does. In glibc's build no command does:
/// glibc's malloc is as fast for a command's few milliseconds. musl's malloc maps and
/// unmaps small regions as it goes and takes no cache per thread: `revfs files` of linux
/// (78,635 paths) took 59 ms with it, 53 ms with mimalloc, and `revfs log` 38 against 24.5
/// ms; but mimalloc's start (its arena mapped, its first pages faulted in) costs a command
/// that does little else about 0.2 ms. So with musl only `status`, `--version` and `--help`,
/// whose start-up is their cost, run musl's malloc.
fn wants_mimalloc<'a>(args: impl Iterator<Item = &'a [u8]> + Clone) -> bool {
    if is_daemon(args.clone()) {
        return true;
    }
    cfg!(not(target_env = "gnu"))
        && !matches!(command_of(args), None | Some(b"status" | b"st" | b"help"))
}

/// Run by the dynamic loader before `main`, with the process's arguments (glibc passes
/// `argc`, `argv` and `envp` to `.init_array` functions).
#[cfg(target_env = "gnu")]
extern "C" fn choose(argc: c_int, argv: *const *const c_char, _envp: *const *const c_char) {
    if argv.is_null() || argc < 1 {
        return;
    }
    let args = (1..argc as usize).filter_map(|i| {
        // SAFETY: glibc's argv holds argc valid NUL-terminated strings.
        let p = unsafe { *argv.add(i) };
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
    });
    if wants_mimalloc(args) {
        MIMALLOC.store(true, Ordering::Relaxed);
    }
}

#[cfg(target_env = "gnu")]
#[used]
#[link_section = ".init_array"]
static CHOOSE: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = choose;

/// musl calls `.init_array` functions without arguments: the command line is read from
/// `/proc/self/cmdline`, with the system's allocator (nothing has allocated yet).
#[cfg(not(target_env = "gnu"))]
extern "C" fn choose_from_proc() {
    let mut buf = [0u8; 4096];
    // SAFETY: a plain open/read/close into a stack buffer.
    let n = unsafe {
        let fd = libc::open(
            c"/proc/self/cmdline".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    let Ok(n) = usize::try_from(n) else { return };
    // Each argument ends with a NUL: no empty argument after the last.
    let line = &buf[..n.min(buf.len())];
    let line = line.strip_suffix(&[0]).unwrap_or(line);
    let args = line.split(|&b| b == 0).skip(1);
    if wants_mimalloc(args) {
        MIMALLOC.store(true, Ordering::Relaxed);
    }
}

#[cfg(not(target_env = "gnu"))]
#[used]
#[link_section = ".init_array"]
static CHOOSE: extern "C" fn() = choose_from_proc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_foreground_mount_is_a_daemon() {
        let run = |args: &[&str]| is_daemon(args.iter().map(|a| a.as_bytes()));
        assert!(run(&["mount", "--foreground", "-r", "abc", "repo", "mnt"]));
        assert!(!run(&["mount", "repo", "mnt"]));
        assert!(!run(&["status"]));
        assert!(!run(&[]));
    }

    #[test]
    fn a_command_is_its_first_word_past_the_global_options() {
        fn run<'a>(args: &[&'a str]) -> Option<&'a [u8]> {
            command_of(args.iter().map(|a| a.as_bytes()))
        }
        assert_eq!(run(&["status"]), Some(&b"status"[..]));
        assert_eq!(
            run(&["-R", "repo", "--color=never", "st", "x"]),
            Some(&b"st"[..])
        );
        assert_eq!(run(&["--color", "never", "files"]), Some(&b"files"[..]));
        assert_eq!(run(&["--version"]), None);
        assert_eq!(run(&[]), None);
    }

    #[test]
    fn musl_commands_other_than_status_and_version_run_mimalloc() {
        let run = |args: &[&str]| wants_mimalloc(args.iter().map(|a| a.as_bytes()));
        let musl = cfg!(not(target_env = "gnu"));
        assert!(run(&["mount", "--foreground", "repo", "mnt"]));
        assert!(!run(&["status"]));
        assert!(!run(&["-R", "r", "st"]));
        assert!(!run(&["--version"]));
        assert_eq!(run(&["files", "-r", "tip"]), musl);
        assert_eq!(run(&["commit", "-m", "status"]), musl);
    }

    #[test]
    fn a_test_process_runs_the_system_allocator() {
        // The test harness's command line has no --foreground.
        assert!(!mimalloc());
    }
}
