//! The daemon's side of the control socket: who may connect (SO_PEERCRED), one thread a
//! connection up to [`MAX_CONNECTIONS`], one JSON line in, progress lines and one JSON line
//! out.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
                let stream = match stream {
                    Ok(s) => s,
                    Err(e) => {
                        // Out of descriptors (EMFILE) or memory: wait a little rather than
                        // spin on a connection the kernel keeps offering.
                        tracing::warn!("control connection not accepted: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
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
                if OPEN_CONNECTIONS.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel);
                    refuse(&stream);
                    continue;
                }
                let handler = handler.clone();
                let spawned = std::thread::Builder::new()
                    .name("revfs-control-conn".into())
                    .spawn(move || {
                        handle(stream, &*handler);
                        OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .map_err(io)
}

/// Control connections served at once; one more is answered with an error and closed (each
/// holds a descriptor and a thread).
pub const MAX_CONNECTIONS: usize = 64;

static OPEN_CONNECTIONS: AtomicUsize = AtomicUsize::new(0);

/// Answers a connection over the bound with an error, without reading it.
fn refuse(stream: &UnixStream) {
    tracing::warn!(
        MAX_CONNECTIONS,
        "control connection refused: too many at once"
    );
    let response = Response::Error {
        message: format!(
            "the daemon is serving {MAX_CONNECTIONS} control connections already; try again"
        ),
    };
    if let Ok(mut out) = serde_json::to_vec(&response) {
        out.push(b'\n');
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = (&*stream).write_all(&out);
    }
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
