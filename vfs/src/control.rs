//! The daemon's control socket: a Unix socket in the mount's state directory through which
//! `revfs` commands talk to the daemon. One JSON request per line, one JSON response per
//! line. Only the user who owns the daemon (or root) may connect (checked with SO_PEERCRED).
//!
//! A request may carry `"progress": true` (any request; default false): the daemon then
//! sends `{"reply":"progress","done":N,"total":M,"what":"..."}` lines (the latest state, at
//! most every [`PROGRESS_INTERVAL`]) before the final response. Clients that do not ask
//! never see them.

use crate::journal::Track;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The shortest time between two progress lines of one request.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// What a client may ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    Ping,
    Info,
    /// Status of the working copy (M, A, R and ! always; the others on request).
    Status {
        clean: bool,
        ignored: bool,
        unknown: bool,
    },
    /// Changes how paths are tracked (add, forget, remove).
    Track {
        paths: Vec<Vec<u8>>,
        track: Track,
    },
    /// Restores paths to the base revision's content (revert), dropping overlay copies.
    Restore {
        paths: Vec<Vec<u8>>,
    },
    /// Records (or clears, with `None`) copy sources: (destination, source).
    Copy {
        copies: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    },
    /// Commits the changes (all, or those of `paths`) and makes the new changeset the
    /// working-copy parent.
    Commit {
        paths: Option<Vec<Vec<u8>>>,
        user: Vec<u8>,
        time: i64,
        tz: i32,
        message: Vec<u8>,
    },
    /// Switches the working copy to revision `node` (hex); `clean` discards changes.
    Update {
        node: String,
        clean: bool,
    },
    /// Reads the files `paths` of revision `node` (hex; `None`: the working-copy parent)
    /// through the daemon's repository handle, so that its caches hold them.
    Prefetch {
        #[serde(default)]
        node: Option<String>,
        paths: Vec<Vec<u8>>,
    },
}

/// Options that any request may carry next to its `cmd`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// Send progress lines before the final response.
    #[serde(default)]
    pub progress: bool,
}

/// What the daemon says about its mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountInfo {
    pub pid: u32,
    pub repo: PathBuf,
    pub mountpoint: PathBuf,
    pub node: String,
    pub rev: i64,
    pub inodes: u64,
}

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Response {
    Pong {
        pid: u32,
    },
    Info(MountInfo),
    /// Status lines in hg's order: (letter, path), and copy sources (destination, source).
    Status {
        entries: Vec<(char, Vec<u8>)>,
        copies: Vec<(Vec<u8>, Vec<u8>)>,
    },
    Done,
    Committed {
        node: String,
    },
    NothingChanged,
    Updated {
        updated: usize,
        removed: usize,
    },
    /// The update would overwrite changes to these paths.
    Conflicts {
        paths: Vec<Vec<u8>>,
    },
    /// What a prefetch read: files and bytes of content.
    Prefetched {
        files: u64,
        bytes: u64,
    },
    /// Not a final answer: how far the request has come (only when it asked for progress).
    /// `total` 0 means the amount of work is unknown.
    Progress {
        done: u64,
        total: u64,
        what: String,
    },
    Error {
        message: String,
    },
}

/// Errors talking over the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("cannot reach the revfs daemon at {}: {source}", path.display())]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {}: bad message: {reason}", path.display())]
    Protocol { path: PathBuf, reason: String },
}

/// The uid of the peer of a Unix socket.
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a properly sized ucred.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Where a request's progress goes: to its connection as `progress` lines when the client
/// asked for them, else nowhere. [`Progress::report`] only records the latest state (a
/// mutex, no I/O: callers may hold the working copy's lock); a writer thread sends it at
/// most every [`PROGRESS_INTERVAL`], so a client that reads slowly, or not at all, never
/// holds up the work. A client that went away does not stop the work either.
pub struct Progress {
    shared: Option<Arc<ProgressShared>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

struct ProgressShared {
    state: Mutex<ProgressState>,
    wake: Condvar,
}

#[derive(Default)]
struct ProgressState {
    what: String,
    done: u64,
    total: u64,
    /// A state not sent yet.
    fresh: bool,
    /// The request is over: the writer stops.
    finished: bool,
}

impl ProgressShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sends the latest progress state, at most every [`PROGRESS_INTERVAL`], until finished.
fn progress_writer(shared: &ProgressShared, mut stream: UnixStream) {
    let mut state = shared.lock();
    loop {
        if state.finished {
            return;
        }
        if state.fresh {
            state.fresh = false;
            let line = Response::Progress {
                done: state.done,
                total: state.total,
                what: state.what.clone(),
            };
            drop(state);
            let Ok(mut msg) = serde_json::to_vec(&line) else {
                return;
            };
            msg.push(b'\n');
            if stream.write_all(&msg).is_err() {
                return;
            }
            state = shared.lock();
        }
        state = match shared.wake.wait_timeout(state, PROGRESS_INTERVAL) {
            Ok((s, _)) => s,
            Err(p) => p.into_inner().0,
        };
    }
}

impl Progress {
    /// Progress that goes nowhere.
    pub fn none() -> Progress {
        Progress {
            shared: None,
            writer: None,
        }
    }

    /// Progress sent on `stream` (nowhere if the writer cannot be set up).
    fn to(stream: &UnixStream) -> Progress {
        let Ok(clone) = stream.try_clone() else {
            return Progress::none();
        };
        // A client that stops reading gives up its progress lines after a while instead of
        // keeping the writer (and then the answer) waiting forever.
        let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
        let shared = Arc::new(ProgressShared {
            state: Mutex::new(ProgressState::default()),
            wake: Condvar::new(),
        });
        let theirs = shared.clone();
        match std::thread::Builder::new()
            .name("revfs-progress".into())
            .spawn(move || progress_writer(&theirs, clone))
        {
            Ok(writer) => Progress {
                shared: Some(shared),
                writer: Some(writer),
            },
            Err(_) => Progress::none(),
        }
    }

    /// True when the client asked for progress (callers may skip work meant only for it).
    pub fn wanted(&self) -> bool {
        self.shared.is_some()
    }

    /// `done` of `total` units of phase `what` are done (`total` 0: unknown). Cheap: the
    /// state is recorded, the writer thread sends the latest one.
    pub fn report(&self, what: &str, done: u64, total: u64) {
        let Some(shared) = &self.shared else { return };
        let mut state = shared.lock();
        if state.what != what {
            state.what.clear();
            state.what.push_str(what);
        }
        state.done = done;
        state.total = total;
        state.fresh = true;
    }

    /// Stops the writer (after the line it may be sending): the answer comes next.
    fn finish(&mut self) {
        if let Some(shared) = &self.shared {
            shared.lock().finished = true;
            shared.wake.notify_all();
        }
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A request handler: the request, and where its progress goes.
pub type Handler = dyn Fn(Request, &Progress) -> Response + Send + Sync;

/// Serves requests on `path` in a background thread until the process exits.
pub fn serve(
    path: &Path,
    handler: Arc<Handler>,
) -> Result<std::thread::JoinHandle<()>, ControlError> {
    let io = |source| ControlError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let listener = UnixListener::bind(path).map_err(io)?;
    // SAFETY: getuid has no preconditions.
    let owner = unsafe { libc::getuid() };
    std::thread::Builder::new()
        .name("revfs-control".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                match peer_uid(&stream) {
                    Ok(uid) if uid == owner || uid == 0 => {}
                    Ok(uid) => {
                        tracing::warn!(uid, "control connection from another user refused");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("control connection without credentials: {e}");
                        continue;
                    }
                }
                let handler = handler.clone();
                let _ = std::thread::Builder::new()
                    .name("revfs-control-conn".into())
                    .spawn(move || handle(stream, &*handler));
            }
        })
        .map_err(io)
}

fn handle(stream: UnixStream, handler: &Handler) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
        let response = match serde_json::from_str::<Request>(&line) {
            Ok(req) => {
                let opts = serde_json::from_str::<RequestOptions>(&line).unwrap_or_default();
                if opts.progress {
                    let mut progress = Progress::to(&stream);
                    let response = handler(req, &progress);
                    // No progress line after (or inside) the answer.
                    progress.finish();
                    response
                } else {
                    handler(req, &Progress::none())
                }
            }
            Err(e) => Response::Error {
                message: format!("bad request: {e}"),
            },
        };
        let Ok(mut out) = serde_json::to_vec(&response) else {
            return;
        };
        out.push(b'\n');
        if (&stream).write_all(&out).is_err() {
            return;
        }
        line.clear();
    }
}

/// Sends one request and waits for the response.
pub fn request(path: &Path, req: &Request, timeout: Duration) -> Result<Response, ControlError> {
    exchange(path, req, timeout, None)
}

/// Sends one request asking for progress, calls `on_progress(what, done, total)` for each
/// progress line, and returns the final response. `timeout` bounds the wait for each line.
pub fn request_with_progress(
    path: &Path,
    req: &Request,
    timeout: Duration,
    on_progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Response, ControlError> {
    exchange(path, req, timeout, Some(on_progress))
}

/// What a client does with a progress line: `(what, done, total)`.
type OnProgress<'a> = &'a mut dyn FnMut(&str, u64, u64);

fn exchange(
    path: &Path,
    req: &Request,
    timeout: Duration,
    mut on_progress: Option<OnProgress>,
) -> Result<Response, ControlError> {
    let stream = UnixStream::connect(path).map_err(|source| ControlError::Connect {
        path: path.to_owned(),
        source,
    })?;
    let io = |source| ControlError::Io {
        path: path.to_owned(),
        source,
    };
    let protocol = |reason: String| ControlError::Protocol {
        path: path.to_owned(),
        reason,
    };
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut value = serde_json::to_value(req).map_err(|e| protocol(e.to_string()))?;
    if on_progress.is_some() {
        if let serde_json::Value::Object(map) = &mut value {
            map.insert("progress".into(), serde_json::Value::Bool(true));
        }
    }
    let mut msg = serde_json::to_vec(&value).map_err(|e| protocol(e.to_string()))?;
    msg.push(b'\n');
    (&stream).write_all(&msg).map_err(io)?;
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(io)? == 0 {
            return Err(protocol(
                "the daemon closed the connection without an answer".into(),
            ));
        }
        match serde_json::from_str(&line).map_err(|e| protocol(e.to_string()))? {
            Response::Progress { done, total, what } => {
                if let Some(f) = on_progress.as_mut() {
                    f(&what, done, total);
                }
            }
            other => return Ok(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_get_answers_over_the_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        serve(
            &sock,
            Arc::new(|req, _: &Progress| match req {
                Request::Ping => Response::Pong { pid: 7 },
                _ => Response::Error {
                    message: "no".into(),
                },
            }),
        )
        .unwrap();
        let r = request(&sock, &Request::Ping, Duration::from_secs(5)).unwrap();
        assert_eq!(r, Response::Pong { pid: 7 });
        let r = request(&sock, &Request::Info, Duration::from_secs(5)).unwrap();
        assert_eq!(
            r,
            Response::Error {
                message: "no".into()
            }
        );
    }

    #[test]
    fn progress_lines_come_only_when_asked_for() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        let pause = || std::thread::sleep(PROGRESS_INTERVAL * 5);
        serve(
            &sock,
            Arc::new(move |req, progress: &Progress| {
                progress.report("counting", 1, 3);
                pause();
                progress.report("counting", 2, 3);
                progress.report("counting", 3, 3);
                pause();
                progress.report("writing", 0, 0);
                pause();
                match req {
                    Request::Ping => Response::Pong { pid: 1 },
                    _ => Response::Done,
                }
            }),
        )
        .unwrap();
        let five = Duration::from_secs(5);
        // Without asking: the final answer only.
        assert_eq!(
            request(&sock, &Request::Ping, five).unwrap(),
            Response::Pong { pid: 1 }
        );
        let mut seen = Vec::new();
        let r = request_with_progress(&sock, &Request::Ping, five, &mut |w, d, t| {
            seen.push((w.to_owned(), d, t))
        })
        .unwrap();
        assert_eq!(r, Response::Pong { pid: 1 });
        // The latest state is sent: states replaced within an interval are not.
        assert_eq!(
            seen,
            [
                ("counting".to_owned(), 1, 3),
                ("counting".to_owned(), 3, 3),
                ("writing".to_owned(), 0, 0)
            ]
        );
        // Raw lines, as an old client or a test would send them.
        let raw = |text: &str| {
            let s = UnixStream::connect(&sock).unwrap();
            (&s).write_all(text.as_bytes()).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut out = String::new();
            std::io::Read::read_to_string(&mut &s, &mut out).unwrap();
            out
        };
        assert_eq!(
            raw("{\"cmd\":\"ping\"}\n"),
            "{\"reply\":\"pong\",\"pid\":1}\n"
        );
        let with = raw("{\"cmd\":\"ping\",\"progress\":true}\n");
        assert!(
            with.starts_with(
                "{\"reply\":\"progress\",\"done\":1,\"total\":3,\"what\":\"counting\"}\n"
            ),
            "{with}"
        );
        assert!(
            with.ends_with("\n{\"reply\":\"pong\",\"pid\":1}\n"),
            "{with}"
        );
        let prefetch =
            raw("{\"cmd\":\"prefetch\",\"paths\":[[97]],\"node\":null,\"progress\":false}\n");
        assert_eq!(prefetch, "{\"reply\":\"done\"}\n");
    }

    #[test]
    fn a_missing_daemon_is_a_connect_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = request(
            &tmp.path().join("none.sock"),
            &Request::Ping,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, ControlError::Connect { .. }));
    }
}
