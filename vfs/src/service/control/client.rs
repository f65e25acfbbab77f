//! The `revfs` commands' side of the control socket: a connection with a deadline on every
//! line of the answer, kept for a few requests in a row.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Sends one request on a connection of its own and waits for the response. `deadline`
/// bounds the connection and the silence before each line of the answer: a daemon that
/// says nothing for that long is not answering ([`ControlError::NotAnswering`]). Requests
/// other than `Ping` and `Info` ask for progress lines (and ignore them), so that a long
/// request whose daemon works is not mistaken for a frozen one.
pub fn request(path: &Path, req: &Request, deadline: Duration) -> Result<Response, ControlError> {
    Client::connect(path, deadline)?.request(req, None)
}

/// Sends one request asking for progress, calls `on_progress(what, done, total)` for each
/// progress line, and returns the final response. `deadline` bounds the connection and the
/// wait for each line.
pub fn request_with_progress(
    path: &Path,
    req: &Request,
    deadline: Duration,
    on_progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Response, ControlError> {
    Client::connect(path, deadline)?.request(req, Some(on_progress))
}

/// What a client does with a progress line: `(what, done, total)`.
pub type OnProgress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// A connection to a daemon, for one request or several in a row (a command pings, then
/// asks: one connection saves the daemon a thread and the client a round trip).
pub struct Client {
    path: PathBuf,
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    deadline: Duration,
    last_used: std::time::Instant,
}

/// The daemon closes a connection idle for 30 s; a client reconnects well before.
const REUSE_IDLE: Duration = Duration::from_secs(20);

impl Client {
    /// Connects within `deadline`; each request's lines must then come within it too.
    pub fn connect(path: &Path, deadline: Duration) -> Result<Client, ControlError> {
        let stream = connect(path, deadline)?;
        let io = |source| ControlError::Io {
            path: path.to_owned(),
            source,
        };
        stream.set_read_timeout(Some(deadline)).map_err(io)?;
        stream.set_write_timeout(Some(deadline)).map_err(io)?;
        let reader = BufReader::new(stream.try_clone().map_err(io)?);
        Ok(Client {
            path: path.to_owned(),
            stream,
            reader,
            deadline,
            last_used: std::time::Instant::now(),
        })
    }

    /// Whether the connection may still be used (the daemon has not dropped it for idling).
    pub fn fresh(&self) -> bool {
        self.last_used.elapsed() < REUSE_IDLE
    }

    /// Sends `req` and returns the final response. Progress lines go to `on_progress` when
    /// given; requests other than `Ping` and `Info` ask for them anyway (for the deadline's
    /// sake) and drop them.
    pub fn request(
        &mut self,
        req: &Request,
        on_progress: Option<OnProgress>,
    ) -> Result<Response, ControlError> {
        self.send(req, on_progress.is_some())?;
        self.receive(on_progress)
    }

    /// Sends `req` without waiting for its answer ([`Client::receive`] reads it; answers
    /// come in the order of the requests). `progress` asks for progress lines.
    pub fn send(&mut self, req: &Request, progress: bool) -> Result<(), ControlError> {
        let quick = matches!(req, Request::Ping | Request::Info);
        let mut value = serde_json::to_value(req).map_err(|e| self.protocol(e.to_string()))?;
        if progress || !quick {
            if let serde_json::Value::Object(map) = &mut value {
                map.insert("progress".into(), serde_json::Value::Bool(true));
            }
        }
        let mut msg = serde_json::to_vec(&value).map_err(|e| self.protocol(e.to_string()))?;
        msg.push(b'\n');
        (&self.stream).write_all(&msg).map_err(|e| self.io(e))
    }

    /// Reads the answer to the oldest request sent and not answered yet.
    pub fn receive(&mut self, on_progress: Option<OnProgress>) -> Result<Response, ControlError> {
        let mut on_progress = on_progress;
        let mut line = String::new();
        let answer = loop {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) => {
                    return Err(
                        self.protocol("the daemon closed the connection without an answer".into())
                    )
                }
                Ok(_) => {}
                Err(e) => return Err(self.io(e)),
            }
            match Response::decode(&line).map_err(|e| self.protocol(e.to_string()))? {
                Response::Progress { done, total, what } => {
                    if let Some(f) = on_progress.as_mut() {
                        f(&what, done, total);
                    }
                }
                other => break other,
            }
        };
        self.last_used = std::time::Instant::now();
        Ok(answer)
    }

    fn protocol(&self, reason: String) -> ControlError {
        ControlError::Protocol {
            path: self.path.clone(),
            reason,
        }
    }

    /// A read or write that timed out means the daemon is not answering.
    fn io(&self, source: std::io::Error) -> ControlError {
        if matches!(
            source.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            ControlError::NotAnswering {
                path: self.path.clone(),
                waited: self.deadline,
            }
        } else {
            ControlError::Io {
                path: self.path.clone(),
                source,
            }
        }
    }
}

/// Connects to the socket at `path`, giving up after `deadline`: a daemon whose listen
/// backlog is full (it stopped accepting) makes a blocking `connect` wait forever.
pub fn connect(path: &Path, deadline: Duration) -> Result<UnixStream, ControlError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::FromRawFd;
    let connect_err = |source| ControlError::Connect {
        path: path.to_owned(),
        source,
    };
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(connect_err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "socket path too long",
        )));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket has no memory preconditions.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(connect_err(std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh socket that nothing else owns.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    let start = std::time::Instant::now();
    loop {
        // SAFETY: addr is a valid sockaddr_un of the size given.
        let rc = unsafe {
            libc::connect(
                fd,
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            // The backlog is full: the daemon does not accept.
            Some(libc::EAGAIN) if start.elapsed() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Some(libc::EAGAIN) => {
                return Err(ControlError::NotAnswering {
                    path: path.to_owned(),
                    waited: deadline,
                })
            }
            _ => return Err(connect_err(e)),
        }
    }
    stream.set_nonblocking(false).map_err(connect_err)?;
    Ok(stream)
}
