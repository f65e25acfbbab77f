//! The daemon's control socket: a Unix socket in the mount's state directory through which
//! `revfs` commands talk to the daemon. One JSON request per line, one JSON response per
//! line. Only the user who owns the daemon (or root) may connect (checked with SO_PEERCRED).

use crate::journal::Track;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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

/// Serves requests on `path` in a background thread until the process exits.
pub fn serve(
    path: &Path,
    handler: Arc<dyn Fn(Request) -> Response + Send + Sync>,
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

fn handle(stream: UnixStream, handler: &(dyn Fn(Request) -> Response + Send + Sync)) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
        let response = match serde_json::from_str::<Request>(&line) {
            Ok(req) => handler(req),
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
    let stream = UnixStream::connect(path).map_err(|source| ControlError::Connect {
        path: path.to_owned(),
        source,
    })?;
    let io = |source| ControlError::Io {
        path: path.to_owned(),
        source,
    };
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut msg = serde_json::to_vec(req).map_err(|e| ControlError::Protocol {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    msg.push(b'\n');
    (&stream).write_all(&msg).map_err(io)?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).map_err(io)?;
    serde_json::from_str(&line).map_err(|e| ControlError::Protocol {
        path: path.to_owned(),
        reason: e.to_string(),
    })
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
            Arc::new(|req| match req {
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
