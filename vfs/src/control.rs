//! The daemon's control socket: a Unix socket in the mount's state directory through which
//! `revfs` commands talk to the daemon. One JSON request per line, one JSON response per
//! line. Only the user who owns the daemon (or root) may connect (checked with SO_PEERCRED).
//!
//! A request may carry `"progress": true` (any request; default false): the daemon then
//! sends `{"reply":"progress","done":N,"total":M,"what":"..."}` lines, at most every
//! [`PROGRESS_INTERVAL`] and at the end of each phase, before the final response. Clients
//! that do not ask never see them.

use crate::journal::Track;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The shortest time between two progress lines of one request (the end of a phase is
/// always sent).
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
/// asked for them (no more often than [`PROGRESS_INTERVAL`]), else nowhere. A client that
/// went away does not stop the work: its progress lines are dropped.
pub struct Progress<'a> {
    out: Option<Mutex<ProgressOut<'a>>>,
}

struct ProgressOut<'a> {
    stream: &'a UnixStream,
    last: Option<Instant>,
    what: String,
    broken: bool,
}

impl<'a> Progress<'a> {
    /// Progress that goes nowhere.
    pub fn none() -> Progress<'static> {
        Progress { out: None }
    }

    fn to(stream: &'a UnixStream) -> Progress<'a> {
        Progress {
            out: Some(Mutex::new(ProgressOut {
                stream,
                last: None,
                what: String::new(),
                broken: false,
            })),
        }
    }

    /// True when the client asked for progress (callers may skip work meant only for it).
    pub fn wanted(&self) -> bool {
        self.out.is_some()
    }

    /// `done` of `total` units of phase `what` are done (`total` 0: unknown). Sent when the
    /// phase is new or complete, or [`PROGRESS_INTERVAL`] after the previous line.
    pub fn report(&self, what: &str, done: u64, total: u64) {
        let Some(out) = &self.out else { return };
        let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
        if out.broken {
            return;
        }
        let now = Instant::now();
        let due = out.what != what
            || (total > 0 && done >= total)
            || out
                .last
                .is_none_or(|t| now.duration_since(t) >= PROGRESS_INTERVAL);
        if !due {
            return;
        }
        if out.what != what {
            out.what = what.to_owned();
        }
        out.last = Some(now);
        let line = Response::Progress {
            done,
            total,
            what: what.to_owned(),
        };
        let Ok(mut msg) = serde_json::to_vec(&line) else {
            return;
        };
        msg.push(b'\n');
        if out.stream.write_all(&msg).is_err() {
            out.broken = true;
        }
    }
}

/// A request handler: the request, and where its progress goes.
pub type Handler = dyn Fn(Request, &Progress<'_>) -> Response + Send + Sync;

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
                    handler(req, &Progress::to(&stream))
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
        serve(
            &sock,
            Arc::new(|req, progress: &Progress| {
                for i in 0..=3 {
                    progress.report("counting", i, 3);
                }
                progress.report("done", 0, 0);
                match req {
                    Request::Ping => Response::Pong { pid: 1 },
                    _ => Response::Done,
                }
            }),
        )
        .unwrap();
        let five = Duration::from_secs(5);
        // Without asking: the final answer only, even on the raw socket.
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
        // The first line of a phase and its end always come; lines in between are
        // rate-limited.
        assert_eq!(seen.first(), Some(&("counting".to_owned(), 0, 3)));
        assert!(seen.contains(&("counting".to_owned(), 3, 3)), "{seen:?}");
        assert_eq!(seen.last(), Some(&("done".to_owned(), 0, 0)));
        // An old client's raw line with the option is understood, and a request without
        // it gets no progress lines.
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
                "{\"reply\":\"progress\",\"done\":0,\"total\":3,\"what\":\"counting\"}\n"
            ),
            "{with}"
        );
        assert!(with.ends_with("{\"reply\":\"pong\",\"pid\":1}\n"), "{with}");
        let prefetch = raw("{\"cmd\":\"prefetch\",\"paths\":[[97]],\"progress\":false}\n");
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
