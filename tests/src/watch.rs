//! An inotify watcher as editors and build watchers run one: a watch on every directory
//! under a root (but `.hg` and `.revfs`), added after listing each, recording what each
//! change the kernel reports names. Events are queued by the system call that makes them,
//! so once a command has returned, every event of its changes is there to read: nothing
//! here waits for time to pass.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The changes a watcher asks for (not opens, reads or closes without a write).
pub const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF;

/// One event: the watched directory (relative to the root, `""` for the root), the name
/// in it (`""` for the directory itself) and the kernel's mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub dir: String,
    pub name: String,
    pub mask: u32,
}

/// A recursive watcher of one tree.
pub struct Watcher {
    fd: OwnedFd,
    dirs: BTreeMap<i32, String>,
    /// Events read but not taken yet.
    queued: Vec<Event>,
}

impl Watcher {
    /// Lists every directory under `root` and watches it.
    pub fn start(root: &Path) -> Watcher {
        // SAFETY: inotify_init1 returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: a descriptor just made, owned from here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut w = Watcher {
            fd,
            dirs: BTreeMap::new(),
            queued: Vec::new(),
        };
        let mut todo = vec![PathBuf::new()];
        while let Some(rel) = todo.pop() {
            let dir = root.join(&rel);
            w.watch(root, &rel);
            for e in std::fs::read_dir(&dir).unwrap() {
                let e = e.unwrap();
                let name = e.file_name();
                if rel.as_os_str().is_empty() && (name == ".hg" || name == ".revfs") {
                    continue;
                }
                if e.file_type().unwrap().is_dir() {
                    todo.push(rel.join(name));
                }
            }
        }
        w
    }

    /// Watches directory `rel` of `root`.
    fn watch(&mut self, root: &Path, rel: &Path) {
        let dir = root.join(rel);
        let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        let wd = unsafe {
            libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), MASK | libc::IN_ONLYDIR)
        };
        assert!(
            wd >= 0,
            "watch {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
        self.dirs.insert(wd, rel.to_string_lossy().into_owned());
    }

    /// Every event queued so far (watches removed, `IN_IGNORED`, left out).
    pub fn take(&mut self) -> Vec<Event> {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            // SAFETY: reads into `buf`, at most its length.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "reading inotify: {e}");
                break;
            }
            let mut at = 0;
            let n = n as usize;
            let head = std::mem::size_of::<libc::inotify_event>();
            while at + head <= n {
                // SAFETY: the kernel wrote whole events; read_unaligned copes with packing.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name = &buf[at + head..at + head + ev.len as usize];
                let name = name.split(|&b| b == 0).next().unwrap_or(b"");
                assert_eq!(
                    ev.mask & libc::IN_Q_OVERFLOW,
                    0,
                    "the inotify queue overflowed"
                );
                if ev.mask & libc::IN_IGNORED == 0 {
                    self.queued.push(Event {
                        dir: self
                            .dirs
                            .get(&ev.wd)
                            .cloned()
                            .unwrap_or_else(|| format!("?{}", ev.wd)),
                        name: String::from_utf8_lossy(name).into_owned(),
                        mask: ev.mask,
                    });
                }
                at += head + ev.len as usize;
            }
        }
        std::mem::take(&mut self.queued)
    }
}

/// A watcher as VS Code's runs one (`@parcel/watcher`'s inotify back end): it lists the
/// tree once, as [`Watcher::start`] does, then reads events as they come, on a thread of
/// its own, and watches each directory it hears was made without listing it. So it hears
/// of the entries of a new directory only when they are made after its watch, which is
/// why the thread runs with a real-time priority: it keeps up with the calls it hears of
/// even when the machine is busy, as a watcher on an idle desktop does.
pub struct Follower {
    /// Written once to stop the thread.
    stop: OwnedFd,
    thread: Option<std::thread::JoinHandle<Vec<Event>>>,
}

impl Follower {
    /// Lists and watches the tree under `root`, then follows it.
    pub fn start(root: &Path) -> Follower {
        let mut w = Watcher::start(root);
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors or fails.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: descriptors just made, owned from here.
        let (read, stop) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let root = root.to_path_buf();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let param = libc::sched_param { sched_priority: 10 };
            // SAFETY: sets this thread's own policy from a valid parameter.
            let rc = unsafe {
                libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param)
            };
            let _ = ready_tx.send(rc);
            let mut all = Vec::new();
            loop {
                let mut polled = [
                    libc::pollfd {
                        fd: w.fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: read.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: two valid pollfds.
                let n = unsafe { libc::poll(polled.as_mut_ptr(), 2, -1) };
                if n < 0 {
                    assert_eq!(
                        std::io::Error::last_os_error().raw_os_error(),
                        Some(libc::EINTR)
                    );
                    continue;
                }
                let stopping = polled[1].revents != 0;
                for e in w.take() {
                    if e.mask & libc::IN_CREATE != 0 && e.mask & libc::IN_ISDIR != 0 {
                        let rel = Path::new(&e.dir).join(&e.name);
                        w.watch(&root, &rel);
                    }
                    all.push(e);
                }
                if stopping {
                    return all;
                }
            }
        });
        let rc = ready_rx.recv().expect("the follower's thread started");
        assert_eq!(
            rc, 0,
            "a real-time priority for the follower (tests run as root)"
        );
        Follower {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops following: every event heard, in the order heard.
    pub fn stop(mut self) -> Vec<Event> {
        self.stop_thread()
    }

    fn stop_thread(&mut self) -> Vec<Event> {
        // SAFETY: writes one byte from a valid buffer.
        let _ = unsafe { libc::write(self.stop.as_raw_fd(), b"x".as_ptr().cast(), 1) };
        match self.thread.take() {
            Some(t) => t.join().expect("the follower's thread"),
            None => Vec::new(),
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// What a watcher learns of each name (directory, name): whether it was created (`c`),
/// deleted (`d`) and modified (`m`: written, closed after a write, or its attributes), as
/// three letters with `-` for no (`"cdm"`: a file that hg's update unlinked and wrote
/// again).
pub fn families(events: &[Event]) -> BTreeMap<(String, String), String> {
    let mut out: BTreeMap<(String, String), u32> = BTreeMap::new();
    for e in events {
        *out.entry((e.dir.clone(), e.name.clone())).or_default() |= e.mask;
    }
    out.into_iter()
        .map(|(k, m)| {
            let has = |bits: u32, c: char| if m & bits != 0 { c } else { '-' };
            let family = [
                has(libc::IN_CREATE | libc::IN_MOVED_TO, 'c'),
                has(
                    libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_DELETE_SELF,
                    'd',
                ),
                has(
                    libc::IN_MODIFY | libc::IN_ATTRIB | libc::IN_CLOSE_WRITE,
                    'm',
                ),
            ];
            (k, family.iter().collect())
        })
        .collect()
}
