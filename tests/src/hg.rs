//! A client for hg's command server (`hg serve --cmdserver pipe`): one hg process answers
//! many commands, so comparing hundreds of revisions does not pay hg's start-up each time.
//! The protocol: the server sends a hello on channel `o`; each `runcommand` request is the
//! line `runcommand\n`, a big-endian u32 length and the NUL-separated arguments; the server
//! answers with channel frames (`o` output, `e` error, `r` the exit code).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What one command printed and returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HgOutput {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// A running command server rooted at one repository.
pub struct HgServer {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

impl HgServer {
    /// Starts a server with `repo` as its repository and working directory.
    pub fn start(repo: &Path) -> HgServer {
        let mut child = crate::hg_env(
            Command::new("hg")
                .args([
                    "serve",
                    "--cmdserver",
                    "pipe",
                    "--config",
                    "ui.interactive=false",
                ])
                .current_dir(repo)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        )
        .spawn()
        .expect("start hg command server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let mut server = HgServer {
            child,
            stdin,
            stdout,
        };
        let (channel, hello) = server.read_frame();
        assert_eq!(
            channel,
            b'o',
            "unexpected hello: {:?}",
            String::from_utf8_lossy(&hello)
        );
        assert!(
            hello.starts_with(b"capabilities:"),
            "no capabilities in hello"
        );
        server
    }

    fn read_frame(&mut self) -> (u8, Vec<u8>) {
        let mut header = [0u8; 5];
        self.stdout
            .read_exact(&mut header)
            .expect("command server frame");
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut data = vec![0u8; len];
        self.stdout
            .read_exact(&mut data)
            .expect("command server data");
        (header[0], data)
    }

    /// Runs one hg command (arguments as on the command line, without `hg`).
    pub fn run(&mut self, args: &[&str]) -> HgOutput {
        let payload = args.join("\0");
        self.stdin.write_all(b"runcommand\n").expect("write");
        self.stdin
            .write_all(&(payload.len() as u32).to_be_bytes())
            .expect("write");
        self.stdin.write_all(payload.as_bytes()).expect("write");
        self.stdin.flush().expect("flush");
        let mut out = HgOutput {
            code: -1,
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        loop {
            let (channel, data) = self.read_frame();
            match channel {
                b'o' => out.stdout.extend_from_slice(&data),
                b'e' => out.stderr.extend_from_slice(&data),
                b'r' => {
                    out.code = i32::from_be_bytes([data[0], data[1], data[2], data[3]]);
                    return out;
                }
                b'd' => {}
                c if c.is_ascii_uppercase() => {
                    panic!("hg asked for input on channel {}", c as char)
                }
                _ => {}
            }
        }
    }
}

impl Drop for HgServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
