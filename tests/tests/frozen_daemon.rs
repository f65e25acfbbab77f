//! A daemon that stops answering never hangs its user: a frozen daemon (SIGSTOP, standing in
//! for a deadlock or a hung disk) and a deadlocked filesystem (the debug-only `debug_hang`
//! request) each make `revfs status` give up within the deadline with hg's abort and the
//! way out, from inside the mount too; `revfs unmount --force` then frees the mount within
//! a few seconds, releases the processes blocked in it, leaves no daemon, and the next
//! mount resumes every change made before the freeze. `revfs doctor` names the mount and
//! gives that one command.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_env, hg_repo, revfs_bin};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The deadline the tests configure (`control.timeout`).
const DEADLINE: Duration = Duration::from_secs(2);

struct Setup {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    mount: Mount,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = hg_repo(
            tmp.path(),
            &[
                ("a.txt", "a\n"),
                ("dir/b.txt", "b\n"),
                ("dir/sub/c.txt", "c\n"),
            ],
        );
        std::fs::write(
            tmp.path().join("config.toml"),
            format!("[control]\ntimeout = {}\n", DEADLINE.as_secs()),
        )
        .unwrap();
        let mount = Mount::new(&repo, None);
        Setup { tmp, repo, mount }
    }

    /// `revfs ARGS` in `dir` with the short deadline; the output and how long it took.
    fn revfs_in(&self, dir: &Path, args: &[&str]) -> (Output, Duration) {
        let t0 = Instant::now();
        let out = hg_env(Command::new(revfs_bin()).args(args))
            .current_dir(dir)
            .env("REVFS_STATE_DIR", &self.mount.state_root)
            .env("REVFS_CONFIG", self.tmp.path().join("config.toml"))
            .output()
            .expect("spawn revfs");
        (out, t0.elapsed())
    }

    fn ok(&self, args: &[&str]) -> String {
        let (out, _) = self.revfs_in(self.tmp.path(), args);
        assert!(
            out.status.success(),
            "revfs {args:?}: {}{}",
            s(&out.stdout),
            s(&out.stderr)
        );
        s(&out.stdout)
    }

    fn mnt(&self) -> String {
        self.mount.dir.display().to_string()
    }

    /// Local changes of every kind the journal records, before the freeze.
    fn make_changes(&self) {
        let m = &self.mount.dir;
        std::fs::write(m.join("a.txt"), "changed\n").unwrap();
        std::fs::write(m.join("dir/new.txt"), "new\n").unwrap();
        std::fs::remove_file(m.join("dir/sub/c.txt")).unwrap();
        self.ok(&[
            "add",
            "-R",
            &self.mnt(),
            &format!("{}/dir/new.txt", self.mnt()),
        ]);
        assert_eq!(self.status(), STATUS);
    }

    fn status(&self) -> String {
        self.ok(&["status", "-R", &self.mnt()])
    }

    /// `revfs ARGS` started now in `dir` but held back until [`Held::run`]: a user whose
    /// shell was in the mount before it froze (a process cannot even enter a directory of
    /// a frozen mount).
    fn held(&self, dir: &Path, args: &[&str]) -> Held {
        let child = hg_env(
            Command::new("sh")
                .arg("-c")
                .arg("read _ && exec \"$0\" \"$@\""),
        )
        .arg(revfs_bin())
        .args(args)
        .current_dir(dir)
        .env("REVFS_STATE_DIR", &self.mount.state_root)
        .env("REVFS_CONFIG", self.tmp.path().join("config.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
        Held(child)
    }

    /// The abort `revfs status` and `revfs diff` must print, run with the current directory
    /// inside the mount (`held` before the freeze) and from outside it with `-R`.
    fn expect_abort(&self, pid: i32, why: &str, held: Vec<Held>) {
        let mnt = self.mnt();
        let outside = self.held(self.tmp.path(), &["status", "-R", &mnt]);
        for (i, h) in held.into_iter().chain([outside]).enumerate() {
            let (out, took) = h.run();
            let args = i;
            let err = s(&out.stderr);
            assert_eq!(out.status.code(), Some(255), "{args:?}: {err}");
            assert!(
                took < DEADLINE + Duration::from_secs(3),
                "{args:?} took {took:?}"
            );
            assert!(
                err.starts_with(&format!(
                    "abort: the revfs daemon of {mnt} (pid {pid}) is not answering: {why}"
                )) && err.ends_with(&format!(
                    "\n(free the mount with: revfs unmount --force {mnt}; revfs mount then resumes the working copy)\n"
                )),
                "{args:?}: {err}"
            );
            assert_eq!(s(&out.stdout), "");
        }
    }

    /// `revfs unmount --force` frees the mount within a few seconds: every blocked reader
    /// gets an error and ends, no daemon is left, the mount table no longer has it.
    fn force_unmount(&self, pid: i32, mut readers: Vec<Child>) {
        let (out, took) = self.revfs_in(self.tmp.path(), &["unmount", "--force", &self.mnt()]);
        assert!(out.status.success(), "{}", s(&out.stderr));
        assert!(
            took < Duration::from_secs(6),
            "unmount --force took {took:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        for r in &mut readers {
            let status = loop {
                if let Some(st) = r.try_wait().unwrap() {
                    break st;
                }
                assert!(Instant::now() < deadline, "a reader is still blocked");
                std::thread::sleep(Duration::from_millis(20));
            };
            assert!(!status.success(), "a blocked reader succeeded");
        }
        assert!(
            !Path::new(&format!("/proc/{pid}/cmdline")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|st| st.contains(") Z")),
            "the daemon is still running"
        );
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !table.contains(&format!(" {} ", self.mnt())),
            "still mounted"
        );
    }

    /// The next mount resumes every change made before the freeze.
    fn remount_and_check(&self) {
        self.mount.remount(&self.repo, None);
        assert_eq!(self.status(), STATUS);
        assert_eq!(
            std::fs::read_to_string(self.mount.dir.join("a.txt")).unwrap(),
            "changed\n"
        );
        assert_eq!(
            std::fs::read_to_string(self.mount.dir.join("dir/new.txt")).unwrap(),
            "new\n"
        );
        self.mount.unmount();
    }
}

const STATUS: &str = "M a.txt\nA dir/new.txt\n! dir/sub/c.txt\n";

/// A revfs command waiting for its go.
struct Held(Child);

impl Held {
    /// Lets the command go; its output and how long it took from there.
    fn run(mut self) -> (Output, Duration) {
        use std::io::Write;
        let t0 = Instant::now();
        let mut stdin = self.0.stdin.take().expect("stdin");
        stdin.write_all(b"go\n").expect("write");
        drop(stdin);
        let out = self.0.wait_with_output().expect("wait");
        (out, t0.elapsed())
    }
}

/// A process that reads in the mount and will block there.
fn reader(program: &str, path: &Path) -> Child {
    Command::new(program)
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cat")
}

#[test]
fn a_stopped_daemon_gives_an_abort_within_the_deadline_and_force_unmount_frees_the_mount() {
    let t = Setup::new();
    t.make_changes();
    let pid = t.mount.daemon_pid();
    let inside = t.mount.dir.join("dir/sub");
    let held = vec![t.held(&inside, &["status"]), t.held(&inside, &["diff"])];
    assert!(Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    // Readers of a file and a directory nobody looked at yet: their requests wait.
    let readers = vec![
        reader("cat", &t.mount.dir.join("dir/b.txt")),
        reader("ls", &t.mount.dir.join("dir/sub")),
    ];
    t.expect_abort(
        pid,
        &format!("nothing heard for {} s", DEADLINE.as_secs()),
        held,
    );
    // doctor names it and gives one command.
    let (out, took) = t.revfs_in(t.tmp.path(), &["doctor", &t.mnt()]);
    let report = s(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}{}", s(&out.stderr));
    assert!(took < Duration::from_secs(8), "doctor took {took:?}");
    assert!(
        report.contains(&format!(
            " daemon {pid} does not answer on its control socket ("
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            " (run `revfs unmount --force {0}`, then `revfs mount {1} {0}` resumes the working copy)\n",
            t.mnt(),
            t.repo.display()
        )),
        "{report}"
    );
    t.force_unmount(pid, readers);
    t.remount_and_check();
}

#[test]
fn a_deadlocked_filesystem_is_seen_although_the_control_socket_answers() {
    let t = Setup::new();
    t.make_changes();
    let pid = t.mount.daemon_pid();
    let inside = t.mount.dir.join("dir/sub");
    let held = vec![t.held(&inside, &["status"]), t.held(&inside, &["diff"])];
    t.mount.debug_hang();
    let readers = vec![reader("cat", &t.mount.dir.join("dir/b.txt"))];
    // Until the reader's request has waited longer than the deadline.
    let t0 = Instant::now();
    while t.mount.busy() <= DEADLINE + Duration::from_millis(100) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the reader never got stuck"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.expect_abort(pid, "a filesystem request has waited ", held);
    // Until it has waited doctor's 10 s.
    std::thread::sleep(Duration::from_secs(8));
    let (out, _) = t.revfs_in(t.tmp.path(), &["doctor", &t.mnt()]);
    let report = s(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!(
            " daemon {pid} answers, but its filesystem does not: a request has waited "
        )),
        "{report}"
    );
    t.force_unmount(pid, readers);
    t.remount_and_check();
}

/// A request the daemon was serving when it was stopped has waited, once it runs again,
/// only since then: right after a freeze longer than the deadline ends, `revfs status`
/// and `revfs update` work (the daemon's clock does not count the stop; the soak saw
/// `revfs update` give up here for a request caught in the freeze).
#[test]
fn a_request_caught_in_a_freeze_is_not_stuck_once_the_daemon_runs_again() {
    let t = Setup::new();
    t.make_changes();
    let pid = t.mount.daemon_pid();
    // A lookup held 6 s in its handler (only the next one: the delay is read as it starts).
    assert_eq!(
        t.mount
            .control("{\"cmd\":\"debug_lookup_delay\",\"ms\":6000}"),
        "{\"reply\":\"done\"}\n"
    );
    let mut caught = reader("cat", &t.mount.dir.join("dir/b.txt"));
    let t0 = Instant::now();
    while t.mount.busy() < Duration::from_millis(50) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the lookup never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        t.mount.control("{\"cmd\":\"debug_lookup_delay\",\"ms\":0}"),
        "{\"reply\":\"done\"}\n"
    );
    let signal = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");
    std::thread::sleep(DEADLINE + Duration::from_secs(1));
    signal("-CONT");
    // The lookup is still in its handler (3 s of its 6 to go) and has waited 3 s through
    // the freeze: it is not stuck.
    assert_eq!(t.status(), STATUS);
    assert!(t.mount.busy() < DEADLINE, "{:?}", t.mount.busy());
    assert!(
        caught.try_wait().unwrap().is_none(),
        "the caught lookup ended before the check: the test proves nothing"
    );
    t.ok(&["update", "-R", &t.mnt(), "0"]);
    assert_eq!(t.status(), STATUS);
    assert!(caught.wait().unwrap().success());
    // A wait while the daemon runs still counts: held 3 s, it is seen past the deadline.
    assert_eq!(
        t.mount
            .control("{\"cmd\":\"debug_lookup_delay\",\"ms\":3000}"),
        "{\"reply\":\"done\"}\n"
    );
    let mut slow = reader("cat", &t.mount.dir.join("dir/sub/d.txt"));
    std::thread::sleep(DEADLINE + Duration::from_millis(500));
    let busy = t.mount.busy();
    t.mount.control("{\"cmd\":\"debug_lookup_delay\",\"ms\":0}");
    assert!(busy > DEADLINE, "{busy:?}");
    let _ = slow.wait();
    t.mount.unmount();
}

#[test]
fn force_unmount_of_a_live_daemon_with_files_open_ends_it_and_keeps_every_change() {
    let t = Setup::new();
    t.make_changes();
    let pid = t.mount.daemon_pid();
    // A process holding a file of the mount open: a lazy unmount alone leaves the daemon
    // serving it.
    let holder = Command::new("sh")
        .arg("-c")
        .arg("exec 3<a.txt; sleep 60")
        .current_dir(&t.mount.dir)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (out, took) = t.revfs_in(t.tmp.path(), &["unmount", &t.mnt()]);
    assert_eq!(out.status.code(), Some(255));
    assert!(s(&out.stderr).contains("is busy"), "{}", s(&out.stderr));
    assert!(took < Duration::from_secs(6));
    let (out, took) = t.revfs_in(t.tmp.path(), &["unmount", "--force", &t.mnt()]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(s(&out.stderr), "");
    assert!(
        took < Duration::from_secs(6),
        "unmount --force took {took:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| !st.contains(") Z")) {
        assert!(Instant::now() < deadline, "the daemon is still running");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut holder = holder;
    let _ = holder.kill();
    let _ = holder.wait();
    t.remount_and_check();
}

#[test]
fn a_mountpoint_holding_the_repository_is_refused() {
    let t = Setup::new();
    let repo = t.repo.display().to_string();
    let parent = t.tmp.path().display().to_string();
    for mp in [&repo, &parent] {
        let (out, _) = t.revfs_in(t.tmp.path(), &["mount", &repo, mp]);
        assert_eq!(out.status.code(), Some(255));
        assert_eq!(
            s(&out.stderr),
            format!(
                "abort: cannot mount on {mp}: the repository {repo} is inside it (the daemon would read it through its own mount)\n"
            )
        );
    }
    t.mount.unmount();
}
