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
        Served::spawn(repo, logs, "0")
    }

    fn spawn(repo: &Path, logs: &Path, port: &str) -> Served {
        use std::io::BufRead;
        let access = logs.join("access.log");
        let errors = logs.join("error.log");
        let mut child = crate::hg_env(std::process::Command::new("hg").current_dir(repo))
            .args(["serve", "-a", "127.0.0.1", "-p", port, "-A"])
            .arg(&access)
            .arg("-E")
            .arg(&errors)
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
        Served::spawn(repo, logs, &port.to_string())
    }

    /// The server's address.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
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
