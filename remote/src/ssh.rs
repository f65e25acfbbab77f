//! An hg server over a pipe: `ssh HOST 'hg -R PATH serve --stdio'` for an `ssh://` address,
//! or `hg -R PATH serve --stdio` started here for a repository on this machine. Both speak
//! version 1 of hg's ssh protocol (`sshpeer.py`, `wireprotoserver._runsshserver`):
//! - the handshake sends `hello` and `between` and reads lines until the answer to
//!   `between` (`1\n\n`), skipping what a login banner printed; the `capabilities:` line is
//!   the answer to `hello`;
//! - a command is its name on a line, then each declared argument as `NAME LEN\nVALUE`
//!   (a command that takes `*` gets `* N` and N such pairs); its answer is `LEN\nDATA`, or
//!   an empty line when the server wrote an error to its stderr instead;
//! - `getbundle`'s answer is the bundle2 stream itself, unframed, which ends itself;
//! - `x_rfl_getfiles` (remotefilelog, ssh only) streams: `<hex node><path>\n` lines ended by
//!   an empty line, each answered `LEN\n<zlib blob>`. It takes any path, where HTTP's
//!   headers cannot carry a name that is not ASCII.
//!
//! Every read has a deadline when the options give one; a connection that missed one, or
//! broke, is killed with its process group (a wrapper such as a test's fake ssh included)
//! and never reused. What the server writes on stderr is forwarded as hg does (`remote:
//! LINE`) for a clone, logged for a daemon, and its last lines end an error's text.

use crate::url::{RemoteUrl, Scheme};
use crate::RemoteError;
use revfs_store::Node;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to reach a server over a pipe (hg's `ui.ssh`, `ui.remotecmd`, `[sshenv]`).
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// The ssh command, run by `sh -c` as hg runs it.
    pub ssh: String,
    /// The command that runs hg on the server.
    pub remotecmd: String,
    /// Variables added to the ssh command's environment.
    pub env: Vec<(String, String)>,
    /// Bound on the handshake.
    pub connect_timeout: Duration,
    /// Bound on each request's answer, or none (a clone's bundle may take minutes).
    pub request_timeout: Option<Duration>,
    /// Print the server's stderr as `remote: LINE` (a command's); else log it.
    pub forward_stderr: bool,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            ssh: "ssh".into(),
            remotecmd: "hg".into(),
            env: Vec::new(),
            connect_timeout: Duration::from_secs(30),
            request_timeout: None,
            forward_stderr: false,
        }
    }
}

/// The arguments each command declares (`wireprotov1server`'s table): what the server reads.
fn declared(cmd: &str) -> &'static [&'static str] {
    match cmd {
        "batch" => &["cmds", "*"],
        "between" => &["pairs"],
        "getbundle" => &["*"],
        "listkeys" => &["namespace"],
        "lookup" => &["key"],
        "x_rfl_getfile" => &["file", "node"],
        _ => &[],
    }
}

/// `procutil.shellquote` (posix): as is when safe, else in single quotes.
fn shellquote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%_+=:,./-".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The server's stdout, each read bounded by the deadline of the request under way.
struct PipeIn {
    out: ChildStdout,
    deadline: Option<Instant>,
    /// The bound the deadline came from, for the message.
    bound: Duration,
}

impl Read for PipeIn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd {
                fd: self.out.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one pollfd, valid for the call.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {} s", self.bound.as_secs_f64()),
                ));
            }
        }
        self.out.read(buf)
    }
}

/// One running server and its pipes.
struct Conn {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<PipeIn>,
    /// The server's last stderr lines.
    stderr: Arc<Mutex<VecDeque<String>>>,
    url: String,
    timeout: Option<Duration>,
}

/// How many of the server's stderr lines an error quotes.
const STDERR_TAIL: usize = 20;

impl Drop for Conn {
    fn drop(&mut self) {
        // The whole process group: a wrapper's children hold the pipes too.
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signals the group this connection started (its own, process_group(0)).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Conn {
    fn spawn(url: &RemoteUrl, opts: &SshOptions) -> Result<Conn, RemoteError> {
        let shown = url.to_string();
        let mut cmd = match url.scheme {
            Scheme::Ssh => {
                if url.password().is_some() {
                    return Err(RemoteError::Config {
                        what: "password in URL not supported".into(),
                    });
                }
                let target = match &url.user {
                    Some(u) => format!("{u}@{}", url.host),
                    None => url.host.clone(),
                };
                if target.starts_with('-') {
                    return Err(RemoteError::Config {
                        what: format!("illegal ssh hostname or username starting with -: {target}"),
                    });
                }
                let mut args = shellquote(&target);
                if let Some(p) = url.port {
                    args = format!("-p {p} {args}");
                }
                let path = url.path.strip_prefix('/').unwrap_or(&url.path);
                let path = if path.is_empty() { "." } else { path };
                let remote = format!(
                    "{} -R {} serve --stdio",
                    server_quote(&opts.remotecmd),
                    server_quote(path)
                );
                let mut c = Command::new("/bin/sh");
                c.arg("-c")
                    .arg(format!("{} {args} {}", opts.ssh, shellquote(&remote)));
                c.envs(opts.env.iter().map(|(k, v)| (k, v)));
                c
            }
            _ => {
                let mut c = Command::new("hg");
                c.args(["-R", &url.path, "serve", "--stdio"]);
                c
            }
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| RemoteError::Transport {
            url: shown.clone(),
            reason: format!("could not start the server's command: {e}"),
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RemoteError::Transport {
                url: shown,
                reason: "the server's command has no pipes".into(),
            });
        };
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let sink = tail.clone();
        let forward = opts.forward_stderr;
        let from = shown.clone();
        std::thread::Builder::new()
            .name("revfs-ssh-stderr".into())
            .spawn(move || {
                for line in BufReader::new(stderr).split(b'\n').map_while(Result::ok) {
                    let line = String::from_utf8_lossy(&line).into_owned();
                    if forward {
                        eprintln!("remote: {line}");
                    } else {
                        tracing::info!(server = %from, "remote: {line}");
                    }
                    let mut t = sink.lock().unwrap_or_else(|p| p.into_inner());
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            })
            .map_err(|e| RemoteError::Transport {
                url: shown.clone(),
                reason: format!("could not read the server's messages: {e}"),
            })?;
        Ok(Conn {
            child,
            stdin,
            stdout: BufReader::new(PipeIn {
                out: stdout,
                deadline: None,
                bound: Duration::ZERO,
            }),
            stderr: tail,
            url: shown,
            timeout: opts.request_timeout,
        })
    }

    /// What the server last wrote on stderr, as hg shows it (`remote: LINE`), after a
    /// moment for the reader thread to catch up with a server that just died.
    fn remote_lines(&self) -> String {
        std::thread::sleep(Duration::from_millis(50));
        let t = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().map(|l| format!("\nremote: {l}")).collect()
    }

    fn transport(&self, e: std::io::Error) -> RemoteError {
        let (url, reason) = (self.url.clone(), format!("{e}{}", self.remote_lines()));
        if e.kind() == std::io::ErrorKind::TimedOut {
            RemoteError::Silent { url, reason }
        } else {
            RemoteError::Transport { url, reason }
        }
    }

    /// Starts a request: its answer must come within the request timeout.
    fn arm(&mut self, timeout: Option<Duration>) {
        let pipe = self.stdout.get_mut();
        pipe.deadline = timeout.map(|t| Instant::now() + t);
        pipe.bound = timeout.unwrap_or_default();
    }

    /// The handshake: the server's capabilities.
    fn handshake(&mut self, timeout: Duration) -> Result<crate::Caps, RemoteError> {
        let pairs = format!("{0}-{0}", "0".repeat(40));
        let hello = format!("hello\nbetween\npairs {}\n{pairs}", pairs.len());
        self.arm(Some(timeout));
        let no_response = |c: &Conn| RemoteError::Transport {
            url: c.url.clone(),
            reason: format!("no suitable response from remote hg{}", c.remote_lines()),
        };
        if self
            .stdin
            .write_all(hello.as_bytes())
            .and_then(|()| self.stdin.flush())
            .is_err()
        {
            return Err(no_response(self));
        }
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for _ in 0..500 {
            let mut l = Vec::new();
            match self.stdout.read_until(b'\n', &mut l) {
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(self.transport(e)),
                Ok(0) | Err(_) => return Err(no_response(self)),
                Ok(_) => {}
            }
            if l == b"\n" && lines.last().is_some_and(|p| p == b"1\n") {
                let caps = lines
                    .iter()
                    .rev()
                    .find_map(|l| l.strip_prefix(b"capabilities:"))
                    .map(crate::Caps::parse);
                return caps.ok_or_else(|| no_response(self));
            }
            lines.push(l);
        }
        Err(no_response(self))
    }

    /// Sends command `cmd` with `args`, each where the command declares it.
    fn send(&mut self, cmd: &str, args: &[(&str, &[u8])]) -> std::io::Result<()> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(cmd.as_bytes());
        out.push(b'\n');
        let names = declared(cmd);
        let star: Vec<&(&str, &[u8])> = args.iter().filter(|(n, _)| !names.contains(n)).collect();
        for name in names {
            if *name == "*" {
                out.extend_from_slice(format!("* {}\n", star.len()).as_bytes());
                for (k, v) in &star {
                    out.extend_from_slice(format!("{k} {}\n", v.len()).as_bytes());
                    out.extend_from_slice(v);
                }
            } else {
                let v = args
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(&b""[..], |(_, v)| v);
                out.extend_from_slice(format!("{name} {}\n", v.len()).as_bytes());
                out.extend_from_slice(v);
            }
        }
        self.stdin.write_all(&out)?;
        self.stdin.flush()
    }

    /// A framed answer (`LEN\nDATA`) of at most `limit` bytes.
    fn read_framed(&mut self, limit: u64) -> Result<Vec<u8>, RemoteError> {
        let mut line = Vec::new();
        match self.stdout.read_until(b'\n', &mut line) {
            Ok(0) => {
                return Err(self.transport(std::io::ErrorKind::UnexpectedEof.into()));
            }
            Ok(_) => {}
            Err(e) => return Err(self.transport(e)),
        }
        if line == b"\n" {
            // An error the server wrote to its stderr (hg: "check previous remote output").
            return Err(RemoteError::Server {
                message: self.remote_lines().trim_start().to_owned(),
            });
        }
        let len = length_of(&line).ok_or_else(|| RemoteError::Protocol {
            url: self.url.clone(),
            reason: format!("unexpected response: {:?}", String::from_utf8_lossy(&line)),
        })?;
        if len > limit {
            return Err(RemoteError::Protocol {
                url: self.url.clone(),
                reason: format!("an answer of {len} bytes, over {limit}"),
            });
        }
        let mut data = Vec::new();
        (&mut self.stdout)
            .take(len)
            .read_to_end(&mut data)
            .map_err(|e| self.transport(e))?;
        if (data.len() as u64) < len {
            return Err(self.transport(std::io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(data)
    }

    fn call_framed(
        &mut self,
        cmd: &str,
        args: &[(&str, &[u8])],
        limit: u64,
    ) -> Result<Vec<u8>, RemoteError> {
        self.arm(self.timeout);
        self.send(cmd, args).map_err(|e| self.transport(e))?;
        self.read_framed(limit)
    }

    /// `x_rfl_getfiles` of `keys`: the decompressed blobs, in order, as far as the server
    /// answered (a server that aborts on a key ends the stream there); then the error that
    /// ended it, if any. The requests are written by a second thread while this one reads,
    /// so that neither pipe's buffer can stop the other side.
    fn getfiles(
        &mut self,
        keys: &[(&[u8], Node)],
        max_blob: u64,
    ) -> (Vec<Result<Vec<u8>, String>>, Option<std::io::Error>) {
        self.arm(self.timeout);
        let mut requests = b"x_rfl_getfiles\n".to_vec();
        for (path, node) in keys {
            requests.extend_from_slice(node.to_hex().as_bytes());
            requests.extend_from_slice(path);
            requests.push(b'\n');
        }
        requests.push(b'\n');
        let stdin = &mut self.stdin;
        let mut answers = Vec::with_capacity(keys.len());
        let mut failure = None;
        std::thread::scope(|s| {
            let writer = s.spawn(move || stdin.write_all(&requests).and_then(|()| stdin.flush()));
            for (path, _) in keys {
                match read_blob(&mut self.stdout, path, max_blob) {
                    Ok(a) => answers.push(a),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            if failure.is_some() {
                // Nothing reads the server any more: end it, so that a writer blocked on
                // a full pipe returns.
                // SAFETY: signals the group this connection started.
                unsafe {
                    libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL);
                }
            }
            let _ = writer.join();
        });
        (answers, failure)
    }
}

/// `sshpeer._serverquote`: [`shellquote`], but the empty string stays empty.
fn server_quote(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        shellquote(s)
    }
}

/// The length of a `LEN\n` line (its newline included).
fn length_of(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line.strip_suffix(b"\n")?)
        .ok()?
        .parse()
        .ok()
}

/// One answer of an `x_rfl_getfiles` stream: `LEN\n<zlib blob>` (`0\n` for the null node).
/// An I/O error ends the stream; a blob that does not inflate is that key's error only.
fn read_blob(
    r: &mut BufReader<PipeIn>,
    path: &[u8],
    max_blob: u64,
) -> std::io::Result<Result<Vec<u8>, String>> {
    let mut line = Vec::new();
    if r.read_until(b'\n', &mut line)? == 0 || line.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the server ended the stream",
        ));
    }
    let len = length_of(&line).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unexpected response: {:?}", String::from_utf8_lossy(&line)),
        )
    })?;
    // A zlib stream is at most a little larger than what it holds.
    if len > max_blob.saturating_add(max_blob / 100 + 1024) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("an answer of {len} bytes"),
        ));
    }
    let mut data = Vec::new();
    r.take(len).read_to_end(&mut data)?;
    if (data.len() as u64) < len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    if data.is_empty() {
        return Ok(Ok(Vec::new()));
    }
    Ok(
        crate::wire::inflate(&String::from_utf8_lossy(path), &data, max_blob)
            .map_err(|e| e.to_string()),
    )
}

/// A server over a pipe, and what it said it can do. Commands take turns on its one
/// connection; a streamed answer takes the connection with it (the next command starts
/// another).
pub struct SshPeer {
    url: RemoteUrl,
    opts: SshOptions,
    conn: Mutex<Option<Conn>>,
    caps: crate::Caps,
}

impl SshPeer {
    /// Starts the server at `url` and reads its capabilities.
    pub fn open(url: &RemoteUrl, opts: &SshOptions) -> Result<SshPeer, RemoteError> {
        let (conn, caps) = connect(url, opts)?;
        Ok(SshPeer {
            url: url.clone(),
            opts: opts.clone(),
            conn: Mutex::new(Some(conn)),
            caps,
        })
    }

    pub fn caps(&self) -> &crate::Caps {
        &self.caps
    }

    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    fn take(&self) -> Result<Conn, RemoteError> {
        let held = self.conn.lock().unwrap_or_else(|p| p.into_inner()).take();
        match held {
            Some(c) => Ok(c),
            None => Ok(connect(&self.url, &self.opts)?.0),
        }
    }

    /// A whole answer to `cmd`, of at most `limit` bytes.
    pub fn call_bytes(
        &self,
        cmd: &str,
        args: &[(&str, &[u8])],
        limit: u64,
    ) -> Result<Vec<u8>, RemoteError> {
        let mut conn = self.take()?;
        let answer = conn.call_framed(cmd, args, limit)?;
        *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(conn);
        Ok(answer)
    }

    /// The answer to a streaming command (`getbundle`), read from the pipe itself.
    pub fn call(
        &self,
        cmd: &str,
        args: &[(&str, &[u8])],
    ) -> Result<Box<dyn Read + Send>, RemoteError> {
        let mut conn = self.take()?;
        conn.arm(conn.timeout);
        conn.send(cmd, args).map_err(|e| conn.transport(e))?;
        Ok(Box::new(Streamed(conn)))
    }
}

/// A streamed answer: reads the connection it owns.
struct Streamed(Conn);

impl Read for Streamed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(t) = self.0.timeout {
            self.0.arm(Some(t));
        }
        self.0.stdout.read(buf)
    }
}

fn connect(url: &RemoteUrl, opts: &SshOptions) -> Result<(Conn, crate::Caps), RemoteError> {
    let mut conn = Conn::spawn(url, opts)?;
    let caps = conn.handshake(opts.connect_timeout)?;
    Ok((conn, caps))
}

/// File revisions from a server over pipes: `x_rfl_getfiles`, one stream a call, over
/// connections kept between calls (at most [`IDLE`] idle), so that concurrent fetches each
/// have their own.
pub struct SshFetcher {
    url: RemoteUrl,
    opts: SshOptions,
    idle: Mutex<Vec<Conn>>,
    health: crate::health::Health,
}

/// The most idle connections kept.
const IDLE: usize = 4;
/// The largest blob accepted (decompressed): a revlog's limit.
const MAX_BLOB: u64 = i32::MAX as u64;
/// The most keys asked in one stream (hg's client: `remotefilelog.getfilesstep`, 10000).
const STEP: usize = 10_000;

impl SshFetcher {
    /// Fetches from `url` with `opts` (whose `request_timeout` bounds each answer).
    pub fn new(url: RemoteUrl, opts: SshOptions) -> SshFetcher {
        SshFetcher {
            url,
            opts,
            idle: Mutex::new(Vec::new()),
            health: crate::health::Health::default(),
        }
    }

    fn conn(&self) -> Result<Conn, RemoteError> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match idle {
            Some(c) => Ok(c),
            None => {
                let (conn, caps) = connect(&self.url, &self.opts)?;
                if !caps.has("exp-remotefilelog-ssh-getfiles-1") {
                    return Err(RemoteError::Unsupported {
                        message: format!("{} does not serve file revisions on demand", self.url),
                        hint: "enable remotefilelog on the server: [extensions] remotefilelog= \
                               and [remotefilelog] server=True in its hgrc"
                            .into(),
                    });
                }
                Ok(conn)
            }
        }
    }

    /// A request ran out its deadline: fetches fail at once until a new connection's
    /// handshake is answered.
    fn silent(&self, reason: &str) {
        let (url, opts) = (self.url.clone(), self.opts.clone());
        self.health
            .silent(reason, move || match connect(&url, &opts) {
                Ok(_) => true,
                Err(e) => !e.is_silence(),
            });
    }

    fn put_back(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE {
            idle.push(conn);
        }
    }
}

impl revfs_store::shallow::Fetcher for SshFetcher {
    fn fetch(&self, keys: &[(&[u8], Node)]) -> Vec<Result<Vec<u8>, String>> {
        if let Err(why) = self.health.check() {
            return keys.iter().map(|_| Err(why.clone())).collect();
        }
        let mut out: Vec<Result<Vec<u8>, String>> = Vec::with_capacity(keys.len());
        // A server that dies on a key (hg's server aborts on one it does not have) ends
        // the stream there: that key fails, and the rest are asked again of a new
        // connection, a few times at most.
        let mut restarts = 0;
        while out.len() < keys.len() {
            let ask = &keys[out.len()..keys.len().min(out.len() + STEP)];
            let mut conn = match self.conn() {
                Ok(c) => c,
                Err(e) => {
                    let reason = e.to_string();
                    if e.is_silence() {
                        self.silent(&reason);
                        out.extend(keys[out.len()..].iter().map(|_| Err(reason.clone())));
                        break;
                    }
                    out.extend(ask.iter().map(|_| Err(reason.clone())));
                    continue;
                }
            };
            let (answers, failure) = conn.getfiles(ask, MAX_BLOB);
            out.extend(answers);
            match failure {
                None => self.put_back(conn),
                Some(e) => {
                    let timed_out = e.kind() == std::io::ErrorKind::TimedOut;
                    let reason = conn.transport(e).to_string();
                    drop(conn);
                    if timed_out {
                        self.silent(&reason);
                    }
                    restarts += 1;
                    let rest = if restarts >= 3 || timed_out {
                        keys.len() - out.len()
                    } else {
                        1
                    };
                    out.extend((0..rest).map(|_| Err(reason.clone())));
                }
            }
        }
        out
    }

    fn describe(&self) -> String {
        self.url.to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shell_quoting_is_hgs() {
        assert_eq!(super::shellquote("user@host"), "user@host");
        assert_eq!(super::shellquote("a b"), "'a b'");
        assert_eq!(super::shellquote("it's"), "'it'\\''s'");
        assert_eq!(super::server_quote(""), "");
        assert_eq!(super::server_quote("/srv/repo"), "/srv/repo");
        assert_eq!(super::shellquote(""), "''");
        assert_eq!(super::length_of(b"12\n"), Some(12));
        assert_eq!(super::length_of(b"x\n"), None);
    }

    #[test]
    fn commands_send_their_declared_arguments() {
        assert_eq!(super::declared("getbundle"), ["*"]);
        assert_eq!(super::declared("batch"), ["cmds", "*"]);
        assert!(super::declared("heads").is_empty());
    }
}
