//! `hg serve` of a repository on 127.0.0.1, started by a test and stopped when dropped:
//! the real server the remote tests talk to (a free port, its logs in files).

use std::path::Path;

/// `hg serve` of `repo` on 127.0.0.1 (a port of its choosing), killed when dropped.
pub struct Served {
    child: std::process::Child,
    pub port: u16,
    /// Its standard output, kept open (it writes no more: its logs go to files).
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Served {
    pub fn start(repo: &Path, logs: &Path) -> Served {
        Served::spawn(repo, logs, "0", &[])
    }

    /// `hg serve --certificate PEM` of `repo`: HTTPS with the key and certificate of `pem`
    /// (its address: [`Served::https_url`]).
    pub fn start_tls(repo: &Path, logs: &Path, pem: &Path) -> Served {
        Served::spawn(repo, logs, "0", &["--certificate", pem.to_str().unwrap()])
    }

    fn spawn(repo: &Path, logs: &Path, port: &str, extra: &[&str]) -> Served {
        use std::io::BufRead;
        let access = logs.join("access.log");
        let errors = logs.join("error.log");
        let mut child = crate::hg_env(std::process::Command::new("hg").current_dir(repo))
            .args(["serve", "-a", "127.0.0.1", "-p", port, "-A"])
            .arg(&access)
            .arg("-E")
            .arg(&errors)
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        if port != "0" {
            // hg serve says where it listens only for a port of its choosing: wait until the
            // port answers.
            let port: u16 = port.parse().unwrap();
            let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    std::time::Instant::now() < until,
                    "hg serve on port {port} did not start"
                );
                assert!(
                    child.try_wait().unwrap().is_none(),
                    "hg serve on port {port} exited"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            return Served {
                child,
                port,
                _stdout: stdout,
            };
        }
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // "listening at http://localhost:PORT/ (bound to 127.0.0.1:PORT)"
        let port = line
            .rsplit(':')
            .next()
            .and_then(|p| p.trim().trim_end_matches(')').parse().ok())
            .unwrap_or_else(|| panic!("hg serve said {line:?}"));
        Served {
            child,
            port,
            _stdout: stdout,
        }
    }

    /// A GET of `?cmd=CMD` with these headers (a minimal HTTP/1.0 exchange, the test's own):
    /// the status line and the body.
    pub fn get(&self, cmd: &str, headers: &[(String, String)]) -> (String, Vec<u8>) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut req = format!("GET /?cmd={cmd} HTTP/1.0\r\nHost: 127.0.0.1\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).unwrap();
        let end = resp
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("{cmd}: {:?}", String::from_utf8_lossy(&resp)));
        let status = String::from_utf8_lossy(&resp[..end])
            .lines()
            .next()
            .unwrap()
            .to_owned();
        (status, resp[end + 4..].to_vec())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// `hg serve` of `repo` on `port` (one a stopped server had: a restart).
    pub fn start_on(repo: &Path, logs: &Path, port: u16) -> Served {
        Served::spawn(repo, logs, &port.to_string(), &[])
    }

    /// The server's address.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// The address of a server [`Served::start_tls`] started, by the name its test
    /// certificate is for.
    pub fn https_url(&self) -> String {
        format!("https://localhost:{}/", self.port)
    }

    /// The server process's id (to stop it with SIGSTOP).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server now.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a [`Proxy`] does to the answers it relays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Tamper {
    /// Relays them as they are.
    Pass = 0,
    /// In each `x_rfl_getfile` answer of a `batch`, changes one byte of the file's text
    /// and compresses it again: well-formed answers whose content is wrong.
    FileText = 1,
    /// Flips one byte in the middle of every answer's body (of each answer of a `batch`).
    FlipByte = 2,
    /// Sends the first half of every `getbundle` answer's body, then closes.
    CutBundle = 3,
}

/// A loopback HTTP proxy of the test's own in front of a server, which may change what the
/// server answers ([`Tamper`]): a broken proxy or a lying host.
pub struct Proxy {
    pub port: u16,
    /// The `Authorization` header a request must carry, if any (else: 401).
    auth: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    mode: std::sync::Arc<std::sync::atomic::AtomicU8>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn tamper_batch(body: &[u8]) -> Vec<u8> {
    use revfs_remote::wire::{escape_batch_arg as escape, unescape_batch_arg};
    use std::io::{Read, Write};
    let unescape = |v: &[u8]| unescape_batch_arg(v).unwrap_or_else(|| v.to_vec());
    let parts: Vec<Vec<u8>> = body
        .split(|&b| b == b';')
        .map(|answer| {
            let answer = unescape(answer);
            let Some(nul) = answer.iter().position(|&b| b == 0) else {
                return escape(&answer);
            };
            let mut blob = Vec::new();
            if flate2::read::ZlibDecoder::new(&answer[nul + 1..])
                .read_to_end(&mut blob)
                .is_err()
            {
                return escape(&answer);
            }
            // The text starts after the size header's NUL.
            if let Some(h) = blob.iter().position(|&b| b == 0) {
                if blob.len() > h + 1 {
                    blob[h + 1] ^= 0x20;
                }
            }
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(&blob).unwrap();
            let mut out = answer[..=nul].to_vec();
            out.extend(z.finish().unwrap());
            escape(&out)
        })
        .collect();
    parts.join(&b";"[..])
}

fn relay(
    mut client: std::net::TcpStream,
    server: u16,
    mode: Tamper,
    auth: Option<String>,
) -> std::io::Result<()> {
    use std::io::{Read, Write};
    client.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    // The request: a GET, headers only.
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = client.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        req.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&req).into_owned();
    let first = text.lines().next().unwrap_or("").to_owned();
    if let Some(want) = auth {
        let given = text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("authorization")
                .then(|| v.trim().to_owned())
        });
        if given.as_deref() != Some(want.as_str()) {
            return client.write_all(
                b"HTTP/1.0 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"hg\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    }
    // One request a connection: HTTP/1.0 to the server, which then closes.
    let mut out = first.replacen("HTTP/1.1", "HTTP/1.0", 1);
    out.push_str("\r\n");
    for line in text.lines().skip(1) {
        let lower = line.to_ascii_lowercase();
        if line.is_empty() || lower.starts_with("connection:") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut upstream = std::net::TcpStream::connect(("127.0.0.1", server))?;
    upstream.write_all(out.as_bytes())?;
    let mut resp = Vec::new();
    upstream.read_to_end(&mut resp)?;
    let Some(end) = resp.windows(4).position(|w| w == b"\r\n\r\n") else {
        return client.write_all(&resp);
    };
    let head = String::from_utf8_lossy(&resp[..end]).into_owned();
    let mut body = resp[end + 4..].to_vec();
    let mut cut = false;
    match mode {
        Tamper::Pass => {}
        Tamper::FileText if first.contains("cmd=batch") => body = tamper_batch(&body),
        Tamper::FlipByte if first.contains("cmd=batch") => {
            let flipped: Vec<Vec<u8>> = body
                .split(|&b| b == b';')
                .map(|a| {
                    let mut a = a.to_vec();
                    // Past the status code, in the compressed blob (escapes are ASCII: a
                    // flip of the low bit keeps them apart from ':').
                    let i = a.len() / 2 + 1;
                    if i < a.len() && a[i] != b':' && a[i - 1] != b':' {
                        a[i] ^= 0x01;
                    }
                    a
                })
                .collect();
            body = flipped.join(&b";"[..]);
        }
        Tamper::FlipByte if !body.is_empty() => {
            let i = body.len() / 2;
            body[i] ^= 0x01;
        }
        Tamper::CutBundle if first.contains("cmd=getbundle") => cut = true,
        _ => {}
    }
    let mut head_out = String::new();
    for (i, line) in head.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        if i > 0 && (lower.starts_with("content-length:") || lower.starts_with("connection:")) {
            continue;
        }
        head_out.push_str(line);
        head_out.push_str("\r\n");
    }
    head_out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    client.write_all(head_out.as_bytes())?;
    if cut {
        client.write_all(&body[..body.len() / 2])?;
        return client.shutdown(std::net::Shutdown::Both);
    }
    client.write_all(&body)
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 in front of the server on `server`.
    pub fn start(server: u16) -> Proxy {
        use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = std::sync::Arc::new(AtomicU8::new(Tamper::Pass as u8));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let auth = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
        let (m, s, a) = (mode.clone(), stop.clone(), auth.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let tamper = match m.load(Ordering::Relaxed) {
                            1 => Tamper::FileText,
                            2 => Tamper::FlipByte,
                            3 => Tamper::CutBundle,
                            _ => Tamper::Pass,
                        };
                        let want = a.lock().unwrap().clone();
                        std::thread::spawn(move || {
                            let _ = relay(conn, server, tamper, want);
                        });
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        Proxy {
            port,
            auth,
            mode,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Requires HTTP basic authentication as `user`:`password` from now on.
    pub fn require_auth(&self, user: &str, password: &str) {
        *self.auth.lock().unwrap() = Some(revfs_remote::http::basic_auth(user, password));
    }

    /// What the proxy does to the answers of the connections it accepts from now on.
    pub fn set(&self, tamper: Tamper) {
        self.mode
            .store(tamper as u8, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
