//! Helper processes: the revfs binary run with a helper's argument and a mountpoint, on
//! pipes, making system calls through the mount for its daemon (read leases,
//! `readahead/lease.rs`; events for inotify watchers, `fuse/events.rs`). The daemon knows
//! a helper's requests by its process id.
//!
//! A process and not a thread: a process waiting in a request to a daemon's mount cannot
//! be killed while the daemon has the request (the kernel waits for the answer
//! uninterruptibly); were it a thread of the daemon, a `kill -9` of the daemon would leave
//! the daemon's process half ended, and its connection to the kernel open, until the answer
//! came, which nobody is left to give: the mount would hang instead of failing. A helper's
//! wait ends with the daemon: once the daemon's process is gone the kernel ends the
//! connection, the call fails, and the helper, its pipe closed, exits.
//!
//! The protocol: each request a byte and a NUL-terminated argument; each answer lines, in
//! order. The helper says `ok` once it is ready, or `!` and why not.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// A running helper and its pipes.
pub struct Helper {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Helper {
    /// Starts `/proc/self/exe ARG MOUNTPOINT` and waits for it to say it is ready; why not,
    /// as words for the log.
    pub fn spawn(arg: &str, mountpoint: &Path) -> Result<Helper, String> {
        let mut child = Command::new("/proc/self/exe")
            .arg(arg)
            .arg(mountpoint)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("the helper did not start: {e}"))?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the helper has no pipes".into());
        };
        let mut from = BufReader::new(from);
        let mut line = Vec::new();
        let ready = from.read_until(b'\n', &mut line);
        if !matches!(ready, Ok(n) if n > 0) || line != b"ok\n" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the helper said {:?}",
                String::from_utf8_lossy(&line).trim_end()
            ));
        }
        Ok(Helper { child, to, from })
    }

    /// Its process id: the `pid` of its requests to the mount.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `op` with `arg`, unanswered.
    pub fn tell(&mut self, op: u8, arg: &[u8]) -> std::io::Result<()> {
        let mut msg = Vec::with_capacity(arg.len() + 2);
        msg.push(op);
        msg.extend_from_slice(arg);
        msg.push(0);
        self.to.write_all(&msg)?;
        self.to.flush()
    }

    /// [`Helper::ask`] of one line, waiting at most `wait` for the answer to start
    /// (`None`: it did not).
    pub fn ask_within(
        &mut self,
        op: u8,
        arg: &[u8],
        wait: Duration,
    ) -> std::io::Result<Option<Vec<u8>>> {
        self.tell(op, arg)?;
        if self.from.buffer().is_empty() {
            let mut pfd = libc::pollfd {
                fd: self.from.get_ref().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: poll reads and writes one pollfd.
            if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
                return Ok(None);
            }
        }
        self.answer().map(Some)
    }

    /// Sends `op` with `arg` and reads the `lines` lines of its answer (without their
    /// newlines). The helper answers in order, after what it was told before.
    pub fn ask(&mut self, op: u8, arg: &[u8], lines: usize) -> std::io::Result<Vec<Vec<u8>>> {
        self.tell(op, arg)?;
        (0..lines).map(|_| self.answer()).collect()
    }

    /// The next answer's line, without its newline.
    fn answer(&mut self) -> std::io::Result<Vec<u8>> {
        let mut line = Vec::new();
        if self.from.read_until(b'\n', &mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        line.pop();
        Ok(line)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Its pipe closes with `to`: it exits.
        let _ = self.child.try_wait();
    }
}

/// The helper's side: says `ok` (or `!` and `refused`, then returns 1), then hands each
/// request to `handle` with standard output to answer on, until the daemon closes the pipe
/// (0) or `handle` says to stop (its code).
pub fn serve(
    refused: Option<String>,
    mut handle: impl FnMut(u8, &[u8], &mut dyn Write) -> Result<(), i32>,
) -> i32 {
    let mut out = std::io::stdout().lock();
    if let Some(why) = refused {
        let _ = writeln!(out, "!{why}");
        return 1;
    }
    if writeln!(out, "ok").and_then(|_| out.flush()).is_err() {
        return 1;
    }
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut msg = Vec::new();
    loop {
        msg.clear();
        match input.by_ref().read_until(0, &mut msg) {
            Ok(0) | Err(_) => return 0,
            Ok(_) => {}
        }
        if msg.pop() != Some(0) || msg.is_empty() {
            return 1;
        }
        if let Err(code) = handle(msg[0], &msg[1..], &mut out) {
            return code;
        }
        if out.flush().is_err() {
            return 0;
        }
    }
}
