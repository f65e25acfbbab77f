//! The daemon's control socket: a Unix socket in the mount's state directory through which
//! `revfs` commands talk to the daemon. One JSON request per line, one JSON response per
//! line. Only the user who owns the daemon (or root) may connect (checked with SO_PEERCRED).
//!
//! A request may carry `"progress": true` (any request; default false): the daemon then
//! sends `{"reply":"progress","done":N,"total":M,"what":"..."}` lines (the latest state, at
//! most every [`PROGRESS_INTERVAL`]) before the final response. Clients that do not ask
//! never see them. While the handler works without reporting (its thread uses CPU), the
//! last state is sent again every [`HEARTBEAT_INTERVAL`]: a heartbeat. A handler that waits
//! on a lock or on the kernel sends nothing, so the client's deadline catches a daemon that
//! stopped working.
//!
//! Every client has a deadline ([`request`]): connecting, and each line of the answer,
//! must come within it, or the call fails with [`ControlError::NotAnswering`]. A long
//! request is fine for as long as its progress lines keep coming.

use crate::wc::journal::Track;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// The shortest time between two progress lines of one request.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// How often a handler that works without reporting progress is announced as alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// What a client may ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Is the daemon there? Answered without any lock of the working copy.
    Ping,
    Info,
    /// Version 7: what the daemon holds in memory (for tests and benchmarks; it walks the
    /// inode table, so it is not for every command).
    Stats,
    /// Status of the working copy (M, A, R and ! always; the others on request).
    Status {
        clean: bool,
        ignored: bool,
        unknown: bool,
        /// Version 6: also the directories that may be empty once unknown and ignored
        /// files are gone ([`Response::Status`]'s `dirs`; what hg's purge asks of its walk).
        #[serde(default)]
        dirs: bool,
        /// Version 9: the ignore files `ui.ignore` and `ui.ignore.*` name in the asking
        /// program's configuration, expanded, relative to the working copy's root or
        /// absolute (absent: the daemon's own configuration's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ignore_files: Option<Vec<Vec<u8>>>,
    },
    /// Changes how paths are tracked (add, forget, remove).
    Track {
        paths: Vec<Vec<u8>>,
        track: Track,
        /// Version 7: sent inside an hg transaction; journaled once it is over
        /// ([`Request::ConfirmTracking`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        txn: bool,
    },
    /// Restores paths to the base revision's content (revert), dropping overlay copies.
    Restore {
        paths: Vec<Vec<u8>>,
    },
    /// Version 7: the copy sources only (what hg's `dirstate.copies()` asks), without a
    /// status.
    Copies,
    /// Records (or clears, with `None`) copy sources: (destination, source).
    Copy {
        copies: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        /// Version 7: as `Track`'s.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        txn: bool,
    },
    /// Version 7: the hg transaction inside which tracking changed is over (closed, or
    /// rolled back and its dirstate restored): those changes are journaled as they stand.
    ConfirmTracking,
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
    /// `keep` (protocol version 4): paths hg's merge handles itself (an update over local
    /// changes), neither checked nor touched; `dry_run`: only the checks. Neither goes with
    /// `clean`.
    Update {
        node: String,
        clean: bool,
        #[serde(default)]
        keep: Vec<Vec<u8>>,
        #[serde(default)]
        dry_run: bool,
        /// Version 5: `node` may be a changeset of the hg transaction under way, in its
        /// pending changelog (`00changelog.i.a`).
        #[serde(default)]
        pending: bool,
    },
    /// Reads the files `paths` of revision `node` (hex; `None`: the working-copy parent)
    /// through the daemon's repository handle, so that its caches hold them.
    Prefetch {
        #[serde(default)]
        node: Option<String>,
        paths: Vec<Vec<u8>>,
    },
    /// What hg's dirstate knows of `paths` (the Mercurial extension's `get_entry` and
    /// `hasdir`): whether each is tracked in the parent and in the working copy, and
    /// whether it is a directory of tracked or removed files.
    Lookup {
        paths: Vec<Vec<u8>>,
    },
    /// For each of `paths`, the other paths hg's dirstate holds (tracked or removed) that
    /// equal it but for case (hg's case-collision warning on `add`). Protocol version 3.
    CaseVariants {
        paths: Vec<Vec<u8>>,
    },
    /// Makes `node` (hex) the working-copy parent without touching a file (hg's commit,
    /// amend, `strip --keep` in a mount); `files`: the paths whose state hg changed with
    /// it, each tracked in the working copy or not. Protocol version 3.
    SetParent {
        node: String,
        files: Vec<(Vec<u8>, bool)>,
        /// Version 4: the second parent (hex; absent or null: none, which ends a merge), and
        /// which of `files` hg marked as merged or taken from it (`p2_info`).
        #[serde(default)]
        p2: Option<String>,
        #[serde(default)]
        from_p2: Vec<Vec<u8>>,
        /// Version 4: which of `files` hg says the new parent tracks (`p1_tracked`; absent:
        /// as its manifest says).
        #[serde(default)]
        in_p1: Option<Vec<Vec<u8>>>,
        /// Version 5: `node` may be a changeset of the hg transaction under way.
        #[serde(default)]
        pending: bool,
    },
    /// What changed in the working copy since cursor `since` (`revfs watch`; none: the
    /// cursor of now alone). Version 10.
    Changes {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<String>,
    },
    /// Syncs the journal and ends the daemon, whatever is still open in the mount (its
    /// connection to the kernel closes with it): `revfs unmount --force` after a lazy
    /// unmount left files open.
    Shutdown,
    /// The daemon opens nothing in its own mount for a while (`QUIESCE_PAUSE`) and answers
    /// once it has nothing open there (it waits up to `QUIESCE_WAIT`): `revfs unmount`
    /// sends it first, so that read-ahead's read leases (`lease.rs`) never make the
    /// unmount fail as busy (version 8).
    Quiesce,
    /// A change to the mount's redirections (`revfs redirect`, `revfs unmount`); version
    /// 12.
    Redirect {
        op: RedirectOp,
    },
    /// Debug builds only: read-ahead pushes nothing into the page cache from now on, for
    /// tests of what read-ahead holds itself (version 8).
    DebugNoPush,
    /// Debug builds only: the daemon stops answering its filesystem (it holds the working
    /// copy's lock forever), as a deadlock would. For tests of the watchdogs.
    DebugHang,
    /// Debug builds only: every push into the page cache at open (passthrough on) waits
    /// `ms` milliseconds before it fills the pages and as long after, so that tests can
    /// change and read the file meanwhile.
    DebugPushDelay {
        ms: u64,
    },
    /// Debug builds only: from now on every push of read-ahead's stops before it fills
    /// the pages until `debug_push_release` names its inode (`on`), or no more (every
    /// stopped one goes on), so that tests can change the file while its push certainly runs.
    DebugPushHold {
        on: bool,
    },
    /// Debug builds only: the inodes whose pushes `debug_push_hold` stopped, once there is
    /// one or after `ms` milliseconds ([`Response::PushHeld`]).
    DebugPushHeld {
        ms: u64,
    },
    /// Debug builds only: the stopped push of `ino` goes on.
    DebugPushRelease {
        ino: u64,
    },
    /// Debug builds only: every read-only open (passthrough on) waits `ms` milliseconds
    /// between its look at the file and its decision, so that tests can open the file for
    /// writing meanwhile.
    DebugOpenDelay {
        ms: u64,
    },
    /// Debug builds only: every lookup waits `ms` milliseconds before it is served, so that
    /// tests can kill the daemon while one waits (version 8).
    DebugLookupDelay {
        ms: u64,
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
    /// The version of this protocol the daemon speaks (absent from older daemons: 1).
    #[serde(default = "protocol_one")]
    pub protocol: u32,
    /// The second parent of a merge hg is making in the mount (version 4; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p2: Option<String>,
    /// Whether the mount uses kernel passthrough for overlay files: `on`, or `off (why)`
    /// (absent from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<String>,
    /// How the kernel hands the mount its requests: `io_uring (N rings)`, or
    /// `/dev/fuse (why)` (absent from older daemons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<String>,
}

/// What [`Request::Redirect`] asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RedirectOp {
    /// `path` becomes a redirection (answered `done`, or an error saying why not).
    Add { path: Vec<u8> },
    /// Redirection `path` goes, with its files (refused when it holds any, unless `force`).
    Remove { path: Vec<u8>, force: bool },
    /// Every bound redirection is unmounted, before the mount is (refused when one is busy).
    Unbind,
    /// Every redirection not bound is bound again (an unmount that could not finish).
    Bind,
}

/// The version of the control protocol this code speaks: 2 added `lookup` and
/// `Info.protocol`, for the Mercurial extension.
pub const PROTOCOL_VERSION: u32 = 12;

/// How long [`Request::Quiesce`] keeps the daemon out of its mount, and how long it waits
/// for what the daemon has open there.
pub const QUIESCE_PAUSE: std::time::Duration = std::time::Duration::from_secs(10);
pub const QUIESCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

fn protocol_one() -> u32 {
    1
}

/// One path's dirstate facts ([`Request::Lookup`]), as the working copy knows them.
pub use crate::wc::PathState;

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Response {
    Pong {
        pid: u32,
        /// How long the oldest filesystem request being served has been at it, in ms (0:
        /// none). A large value means the filesystem does not answer although the control
        /// socket does.
        #[serde(default)]
        busy_ms: u64,
        /// Filesystem requests being served.
        #[serde(default)]
        busy: u32,
    },
    Info(MountInfo),
    /// `debug_push_held`'s answer: the inodes whose pushes are stopped (debug builds).
    PushHeld {
        inos: Vec<u64>,
    },
    /// Entries of the inode table, the distinct manifests it holds (the base and those
    /// directories not listed yet take their entries from) and their bytes, on the heap and
    /// mapped.
    Stats {
        entries: u64,
        frozen: u64,
        manifests: u64,
        manifest_bytes: u64,
        #[serde(default)]
        mapped_manifest_bytes: u64,
        #[serde(default)]
        listed: u64,
        /// Read-ahead (`readahead.rs`), when on: rounds started, files and bytes read
        /// ahead, files dropped, files a reader then read, bytes read ahead not read yet.
        #[serde(default)]
        readahead: Option<crate::readahead::ReadaheadStats>,
        /// Filelogs the repository handle holds open (version 7; missing from older
        /// daemons: 0).
        #[serde(default)]
        open_filelogs: u64,
        /// Opens answered through a backing file and in the page cache (passthrough on;
        /// both 0 when off).
        #[serde(default)]
        passthrough_opens: u64,
        #[serde(default)]
        cached_opens: u64,
        /// Of the opens in the page cache, those that filled it first (missing from older
        /// daemons: 0).
        #[serde(default)]
        pushed_opens: u64,
        /// Directories the lease helper listed from the daemon before it took leases in
        /// them (`lease.rs`; missing from older daemons: 0).
        #[serde(default)]
        lease_listings: u64,
        /// The filesystem requests the kernel has sent the daemon since it started, by
        /// opcode (`lookup`, `create`, `write`...; the kinds sent at least once): what an
        /// operation costs in round trips (version 11; missing from older daemons: none).
        #[serde(default)]
        requests: std::collections::BTreeMap<String, u64>,
    },
    /// Status lines in hg's order: (letter, path), and copy sources (destination, source).
    Status {
        entries: Vec<(char, Vec<u8>)>,
        copies: Vec<(Vec<u8>, Vec<u8>)>,
        /// hg's warnings while it read the ignore files (an unknown `syntax:`), when unknown
        /// or ignored files were asked for (absent from older daemons' answers: none).
        #[serde(default)]
        warnings: Vec<String>,
        /// When `dirs` was asked (version 6): every directory at or below a changed path,
        /// and their ancestors, outside `.hg` and nested repositories, sorted.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        dirs: Vec<Vec<u8>>,
    },
    /// The copy sources (destination, source), by destination (version 7).
    Copies {
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
        /// The new parent's branch, so that hg need not read its changeset again (absent
        /// from older daemons' answers: empty, meaning ask the store).
        #[serde(default)]
        branch: Vec<u8>,
    },
    /// The update would overwrite changes to these paths; `untracked`: they are untracked
    /// files that differ from the target's (absent in older daemons' answers: false).
    Conflicts {
        paths: Vec<Vec<u8>>,
        #[serde(default)]
        untracked: bool,
    },
    /// The update is hg's to make: the working copy's parent or its target has
    /// subrepositories (`.hgsubstate`), which hg's update visits and the daemon's does not.
    Subrepos,
    /// Answer to [`Request::Lookup`], one per path in order.
    Lookup {
        entries: Vec<PathState>,
    },
    /// One list of paths per path asked (`case_variants`).
    CaseVariants {
        entries: Vec<Vec<Vec<u8>>>,
    },
    /// Answer to [`Request::Changes`]: the cursor to ask with next; `fresh`: the cursor
    /// asked with was of another feed or too old (look at the whole tree; no changes
    /// then); the changes after it, oldest first: (sequence, `created`, `modified` or
    /// `removed`, path); a change's cursor is the feed's instance and its sequence.
    Changes {
        cursor: String,
        fresh: bool,
        changes: Vec<(u64, String, Vec<u8>)>,
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

/// The fields of a `status` answer, read on their own (see [`Response::decode`]).
#[derive(Deserialize)]
struct StatusBody {
    entries: Vec<(char, Vec<u8>)>,
    copies: Vec<(Vec<u8>, Vec<u8>)>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    dirs: Vec<Vec<u8>>,
}

impl Response {
    /// An answer line as the daemon wrote it. A `status` answer (its tag first, as the
    /// daemon writes every tag) is read as its fields alone: serde reads an internally
    /// tagged enum by first copying the whole object into a tree of its own, which cost a
    /// command more than half of its time for 1,000 changed files.
    pub fn decode(line: &str) -> serde_json::Result<Response> {
        if line.starts_with(r#"{"reply":"status","#) {
            let StatusBody {
                entries,
                copies,
                warnings,
                dirs,
            } = serde_json::from_str(line)?;
            return Ok(Response::Status {
                entries,
                copies,
                warnings,
                dirs,
            });
        }
        serde_json::from_str(line)
    }
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
    /// The daemon did not accept the connection, or said nothing, within the deadline.
    #[error("the revfs daemon at {} did not answer within {}", path.display(), seconds(*waited))]
    NotAnswering { path: PathBuf, waited: Duration },
    /// The daemon answers, but a filesystem request of its mount has waited this long.
    #[error("the revfs daemon at {} answers, but a filesystem request has waited {}", path.display(), seconds(*waited))]
    FilesystemStuck { path: PathBuf, waited: Duration },
}

/// `5 s`, `0.5 s`: a duration as people read it.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", s as u64)
    } else {
        format!("{s:.1} s")
    }
}

mod client;
mod progress;
mod server;

pub use client::{connect, request, request_with_progress, Client, OnProgress};
pub use progress::Progress;
pub use server::{serve, Handler, MAX_CONNECTIONS};

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::sync::Arc;

    #[test]
    fn a_status_answer_decodes_as_what_was_sent_and_so_do_the_others() {
        let status = Response::Status {
            entries: vec![('M', b"a/b".to_vec()), ('?', b"\xff x".to_vec())],
            copies: vec![(b"c".to_vec(), b"a/b".to_vec())],
            warnings: vec!["w".into()],
            dirs: vec![b"a".to_vec()],
        };
        let line = serde_json::to_string(&status).unwrap();
        assert!(line.starts_with(r#"{"reply":"status","#), "{line}");
        assert_eq!(Response::decode(&line).unwrap(), status);
        // An older daemon's answer: no warnings, no dirs.
        let old = r#"{"reply":"status","entries":[["A",[120]]],"copies":[]}"#;
        assert_eq!(
            Response::decode(old).unwrap(),
            Response::Status {
                entries: vec![('A', b"x".to_vec())],
                copies: vec![],
                warnings: vec![],
                dirs: vec![],
            }
        );
        let pong = Response::Pong {
            pid: 1,
            busy_ms: 2,
            busy: 3,
        };
        let line = serde_json::to_string(&pong).unwrap();
        assert_eq!(Response::decode(&line).unwrap(), pong);
    }

    #[test]
    fn requests_get_answers_over_the_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        serve(
            &sock,
            Arc::new(|req, _: &Progress| match req {
                Request::Ping => Response::Pong {
                    pid: 7,
                    busy_ms: 0,
                    busy: 0,
                },
                _ => Response::Error {
                    message: "no".into(),
                },
            }),
        )
        .unwrap();
        let r = request(&sock, &Request::Ping, Duration::from_secs(5)).unwrap();
        assert!(matches!(r, Response::Pong { pid: 7, .. }));
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
                    Request::Ping => Response::Pong {
                        pid: 1,
                        busy_ms: 0,
                        busy: 0,
                    },
                    _ => Response::Done,
                }
            }),
        )
        .unwrap();
        let five = Duration::from_secs(5);
        // Without asking: the final answer only.
        assert!(matches!(
            request(&sock, &Request::Ping, five).unwrap(),
            Response::Pong { pid: 1, .. }
        ));
        let mut seen = Vec::new();
        let r = request_with_progress(&sock, &Request::Ping, five, &mut |w, d, t| {
            seen.push((w.to_owned(), d, t))
        })
        .unwrap();
        assert!(matches!(r, Response::Pong { pid: 1, .. }));
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
            "{\"reply\":\"pong\",\"pid\":1,\"busy_ms\":0,\"busy\":0}\n"
        );
        let with = raw("{\"cmd\":\"ping\",\"progress\":true}\n");
        assert!(
            with.starts_with(
                "{\"reply\":\"progress\",\"done\":1,\"total\":3,\"what\":\"counting\"}\n"
            ),
            "{with}"
        );
        assert!(
            with.ends_with("\n{\"reply\":\"pong\",\"pid\":1,\"busy_ms\":0,\"busy\":0}\n"),
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

    #[test]
    fn a_daemon_that_does_not_accept_is_not_answering_within_the_deadline() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        // Bound but never accepting: connect succeeds (the backlog), the answer never comes.
        let _listener = UnixListener::bind(&sock).unwrap();
        let t0 = std::time::Instant::now();
        let err = request(&sock, &Request::Ping, Duration::from_millis(500)).unwrap_err();
        assert!(matches!(err, ControlError::NotAnswering { .. }), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert!(
            err.to_string().contains("did not answer within 0.5 s"),
            "{err}"
        );
    }

    #[test]
    fn a_handler_that_works_sends_heartbeats_and_one_that_waits_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("control.sock");
        serve(
            &sock,
            Arc::new(|req, _: &Progress| {
                let until = std::time::Instant::now() + Duration::from_millis(2500);
                match req {
                    // Works (uses CPU) for 2.5 s without reporting anything.
                    Request::Info => {
                        let mut x = 0u64;
                        while std::time::Instant::now() < until {
                            x = std::hint::black_box(x.wrapping_add(1));
                        }
                        Response::Done
                    }
                    // Waits 2.5 s, as on a lock that never comes free.
                    _ => {
                        std::thread::sleep(until - std::time::Instant::now());
                        Response::Done
                    }
                }
            }),
        )
        .unwrap();
        let deadline = Duration::from_millis(1800);
        let mut beats = 0;
        let r = request_with_progress(&sock, &Request::Info, deadline, &mut |_, _, _| beats += 1);
        assert_eq!(r.unwrap(), Response::Done);
        assert!(beats >= 1, "no heartbeat");
        let err = request(
            &sock,
            &Request::Status {
                clean: false,
                ignored: false,
                unknown: false,
                dirs: false,
                ignore_files: None,
            },
            deadline,
        )
        .unwrap_err();
        assert!(matches!(err, ControlError::NotAnswering { .. }), "{err}");
    }
}
