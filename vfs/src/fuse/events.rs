//! Changes the daemon makes to the tree behind the kernel's back (an update, a revert),
//! told to inotify watchers: editors, build and test watchers, Watchman.
//!
//! The kernel tells watchers of a change only from the system call that makes it
//! (`fsnotify_create`, `fsnotify_unlink`, `fsnotify_change` ... called by `vfs_create`,
//! `vfs_unlink`, `notify_change` in the caller's context). None of FUSE's notifications
//! reaches them: `FUSE_NOTIFY_DELETE` calls a plain `d_delete`, which lost its fsnotify hook
//! in Linux 5.3, and the invalidations call none (docs/ARCHITECTURE.md, "Watchers").
//!
//! So a helper process (`helper.rs`, [`HELPER_ARG`]) makes, through the mount, the calls
//! that hg's update makes in a clone: for a file whose content changed, `unlink` then
//! `mknod` (hg unlinks a file before it writes it) then `utimensat` of its mtime (a write's
//! `IN_MODIFY`); for a file removed, `unlink`; added, `mknod` and `utimensat` (`symlink`
//! for a link); a mode changed, `chmod`; a directory added, `mkdir`, removed, `rmdir` after
//! its files. A file whose content changed in place (a revert) keeps its inode; the name
//! that goes is then a ghost of its own.
//!
//! The daemon knows the helper's requests by its process id and answers them from what it
//! has already done, changing nothing: a name just gone is answered to the helper alone as
//! it was (a *ghost*, with the inode the kernel holds when it holds one, so that a watch on
//! that inode hears of its end) until the helper removes it; a name just made is absent to
//! the helper until the helper creates it, which is answered with the entry that is there.
//! Ghosts and absences are answered with no time to live: nobody else's lookup sees them.
//! Anyone else's lookup of such a name, and a listing's entry for it, is answered as it
//! is, but with no time to live either (or, in a listing, with the name alone): a watcher
//! that looks at a directory while it hears of it (Watchman stats what it is told of)
//! would otherwise leave a cached entry that the kernel answers the helper's call with,
//! without asking, and the watchers would not hear of that name. The names are set before
//! the kernel's caches are invalidated, so that no entry cached in between outlives them.
//!
//! Only what the kernel holds can be watched: a change in a directory the kernel holds
//! (looked up, not forgotten) is told, and so are the entries of the directories the
//! change made there (the helper's `mkdir` makes the kernel hold them), after a pause in
//! which a watcher that hears of a new directory can watch it; a change in a directory
//! the kernel does not hold is not.

use crate::helper::Helper;
use crate::wc::{Attr, EntryType, PathChange, WorkingCopy, ROOT_INO};
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{CString, OsStr};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// The first argument that makes the revfs binary the events helper (`cli/src/main.rs`
/// hands it to [`helper_main`] before anything else).
pub const HELPER_ARG: &str = "--revfs-events-helper";

/// Calls sent to the helper in one message.
const BATCH: usize = 1024;

/// What the helper is answered when it looks up a name of a change being told.
#[derive(Debug, Clone, Copy)]
pub enum Ghost {
    /// The name as it was: these attributes; `held`: the kernel holds the inode (the
    /// answer is one more reference to it).
    Was { attr: Attr, held: bool },
    /// No such name, until the helper creates it.
    Absent,
}

/// A name of a change being told: what it was until the helper removes it, and whether
/// the helper creates it next.
#[derive(Debug, Clone, Copy)]
struct Name {
    was: Option<(Attr, bool)>,
    comes: bool,
}

/// A name in a directory: the directory's inode and the name.
type NameKey = (u64, Box<[u8]>);

/// The events helper of one mount, and the names of the changes it is telling.
#[derive(Default)]
pub struct Events {
    helper: OnceLock<Mutex<Helper>>,
    pid: OnceLock<u32>,
    names: Mutex<HashMap<NameKey, Name>>,
    /// `names` is not empty: read without a lock by every lookup.
    active: AtomicBool,
    /// One telling at a time (their names must not mix).
    telling: Mutex<()>,
    /// The helper stopped answering: nothing is told from then on.
    gone: AtomicBool,
}

/// One call of the helper's.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Unlink,
    Rmdir,
    File,
    Dir,
    Link,
    /// `utimensat` of the mtime alone (`IN_MODIFY`).
    Touch,
    /// `chmod` to this mode (`IN_ATTRIB`).
    Chmod(u16),
}

impl Call {
    fn letter(&self) -> u8 {
        match self {
            Call::Unlink => b'u',
            Call::Rmdir => b'r',
            Call::File => b'f',
            Call::Dir => b'd',
            Call::Link => b'l',
            Call::Touch => b't',
            Call::Chmod(_) => b'a',
        }
    }
}

impl Events {
    /// The mount serves at `mountpoint`: starts the helper. Called once, from a thread that
    /// serves no request.
    pub fn start(&self, mountpoint: &Path) {
        match Helper::spawn(HELPER_ARG, mountpoint) {
            Ok(h) => {
                let _ = self.pid.set(h.pid());
                let _ = self.helper.set(Mutex::new(h));
            }
            Err(why) => tracing::warn!("watchers will not hear of updates: {why}"),
        }
    }

    /// Whether a request comes from the helper. Takes no lock.
    pub fn is_helper(&self, pid: u32) -> bool {
        self.pid.get() == Some(&pid)
    }

    /// The helper looks up `name` in `parent`: what to answer, when it is a name of a
    /// change being told.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Option<Ghost> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let n = names.get(&(parent, Box::from(name)))?;
        match (n.was, n.comes) {
            (Some((attr, held)), _) => Some(Ghost::Was { attr, held }),
            (None, true) => Some(Ghost::Absent),
            (None, false) => None,
        }
    }

    /// Whether `name` in `parent` is a name of a change being told, which anyone's lookup
    /// and listing answer with no time to live. Takes a lock only while a change is being
    /// told.
    pub fn being_told(&self, parent: u64, name: &[u8]) -> bool {
        if !self.active.load(Ordering::Acquire) {
            return false;
        }
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        names.contains_key(&(parent, Box::from(name)))
    }

    /// The helper removes `name` from `parent`: true when it was a ghost (the removal is
    /// answered as done).
    pub fn removed(&self, parent: u64, name: &[u8]) -> bool {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let key = (parent, Box::from(name));
        let Some(n) = names.get_mut(&key) else {
            return false;
        };
        if n.was.take().is_none() {
            return false;
        }
        if !n.comes {
            names.remove(&key);
        }
        true
    }

    /// The helper creates `name` in `parent`: true when the change made it (the creation
    /// is answered with the entry there).
    pub fn created(&self, parent: u64, name: &[u8]) -> bool {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let key = (parent, Box::from(name));
        match names.get(&key) {
            Some(n) if n.was.is_none() && n.comes => {
                names.remove(&key);
                true
            }
            _ => false,
        }
    }

    /// Tells watchers of `changes`, which the working copy has made, around
    /// `invalidate`, which sends the kernel the invalidations of these changes (always
    /// called, once): the names are set before it, the helper's calls made after it.
    /// Returns once the helper made every call, reporting `progress(done, total)`. The
    /// caller holds no lock of the working copy and serves no request (the kernel's
    /// invalidations and the helper's calls wait on requests).
    pub fn tell(
        &self,
        wc: &WorkingCopy,
        changes: &[PathChange],
        invalidate: impl FnOnce(),
        progress: &dyn Fn(u64, u64),
    ) {
        let helper = match self.helper.get() {
            Some(h) if !changes.is_empty() && !self.gone.load(Ordering::Relaxed) => h,
            _ => return invalidate(),
        };
        let _one = self.telling.lock().unwrap_or_else(|p| p.into_inner());
        let Plan { steps, names } = plan(wc, changes);
        if steps.is_empty() {
            return invalidate();
        }
        let keys: Vec<NameKey> = names.iter().map(|(k, _)| k.clone()).collect();
        {
            let mut all = self.names.lock().unwrap_or_else(|p| p.into_inner());
            all.extend(names);
            self.active.store(true, Ordering::Release);
        }
        invalidate();
        let total: u64 = steps.iter().map(|s| s.calls.len() as u64).sum();
        let (mut done, mut failed) = (0u64, 0usize);
        // When the last directories were made (a step that waits starts WATCH_PAUSE after).
        let mut dirs_made: Option<Instant> = None;
        'steps: for step in &steps {
            if step.waits {
                if let Some(left) = dirs_made.and_then(|t| WATCH_PAUSE.checked_sub(t.elapsed())) {
                    std::thread::sleep(left);
                }
            }
            for batch in step.calls.chunks(BATCH) {
                let mut msg = Vec::new();
                for (call, path) in batch {
                    if !msg.is_empty() {
                        msg.push(b'\n');
                    }
                    msg.push(call.letter());
                    if let Call::Chmod(mode) = call {
                        msg.extend_from_slice(format!("{mode:o} ").as_bytes());
                    }
                    msg.extend_from_slice(path);
                }
                let answers =
                    helper
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .ask(b'E', &msg, batch.len());
                match answers {
                    Ok(lines) => {
                        for ((call, path), line) in batch.iter().zip(&lines) {
                            if line != b"0" {
                                failed += 1;
                                tracing::debug!(?call, path = %String::from_utf8_lossy(path),
                                    errno = %String::from_utf8_lossy(line), "a watcher's event not made");
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(
                            "the events helper is gone, watchers will not hear of updates: {e}"
                        );
                        self.gone.store(true, Ordering::Relaxed);
                        break 'steps;
                    }
                }
                done += batch.len() as u64;
                progress(done, total);
            }
            if step.calls.iter().any(|(c, _)| *c == Call::Dir) {
                dirs_made = Some(Instant::now());
            }
        }
        if failed > 0 {
            tracing::info!(
                failed,
                total,
                "events for watchers not made (the kernel answered them itself)"
            );
        }
        // Names whose call the kernel answered without asking (a name it had looked up
        // again meanwhile) are answered as they are from now on.
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        for k in keys {
            names.remove(&k);
        }
        self.active.store(!names.is_empty(), Ordering::Release);
    }
}

/// How long the helper waits after making directories before it makes anything inside
/// them: time for a watcher that hears of a new directory to watch it. VS Code's watcher
/// adds a watch when it hears of a new directory and never lists it, so it hears only of
/// what is made after its watch; in a clone, hg's writes come that much later.
const WATCH_PAUSE: Duration = Duration::from_millis(50);

/// The helper's calls for `changes`, in steps, in the order a clone's update makes them,
/// and the names to answer meanwhile.
///
/// First the removals (files, then directories deepest first) and the directories made in
/// directories the kernel holds; then the files made or rewritten in those (a rewritten
/// file's `unlink` just before its `mknod`, as hg's update unlinks a file just before it
/// writes it: a watcher that batches its events, as VS Code's does, names the pair a
/// change); then, a step a level, the directories made inside directories made, and last
/// the files in them. Each of these later steps waits [`WATCH_PAUSE`] after the last
/// directories made.
fn plan(wc: &WorkingCopy, changes: &[PathChange]) -> Plan {
    // Directories these changes removed, by path: the inode the kernel holds, if it holds
    // one (their entries are removed inside it).
    let mut gone_dirs: HashMap<&[u8], Option<u64>> = HashMap::new();
    for c in changes {
        if let Some((o, EntryType::Dir)) = c.old {
            if c.new.map(|(n, _)| n) != Some(o) {
                gone_dirs.insert(c.path.as_slice(), wc.held_attr(o).map(|_| o));
            }
        }
    }
    // The directory's inode when the kernel holds it, resolved once a directory (an
    // update changes many files of one directory).
    let mut dirs: HashMap<Vec<u8>, Option<u64>> = HashMap::new();
    let mut held_dir = |dir: &[u8]| -> Option<u64> {
        if dir.is_empty() {
            return Some(ROOT_INO);
        }
        *dirs
            .entry(dir.to_vec())
            .or_insert_with(|| match wc.held_at(dir) {
                Some((ino, EntryType::Dir)) => Some(ino),
                _ => None,
            })
    };
    // Directories these changes made whose `mkdir` the helper makes (in a directory the
    // kernel holds, or in one of them): their inode (the `mkdir` is answered with it, so
    // the kernel holds it from then on) and their level (0: made in a held directory).
    let mut made: Vec<&PathChange> = changes
        .iter()
        .filter(|c| match (c.old, c.new) {
            (Some((o, _)), Some((n, EntryType::Dir))) => o != n,
            (None, Some((_, EntryType::Dir))) => true,
            _ => false,
        })
        .collect();
    made.sort_by_key(|c| depth(&c.path));
    let mut new_dirs: HashMap<Vec<u8>, (u64, usize)> = HashMap::new();
    for c in made {
        let (dir, _) = split(&c.path);
        let level = match new_dirs.get(dir) {
            Some(&(_, level)) => level + 1,
            None if held_dir(dir).is_some() => 0,
            None => continue,
        };
        if let Some((n, _)) = c.new {
            new_dirs.insert(c.path.clone(), (n, level));
        }
    }
    // What is in them: an update makes a directory with its contents unlisted (they come
    // from the target's manifest when listed); a clone's update writes each of them.
    let changed: HashSet<&[u8]> = changes.iter().map(|c| c.path.as_slice()).collect();
    let mut inside: Vec<PathChange> = Vec::new();
    let mut queue: VecDeque<(Vec<u8>, u64, usize)> = new_dirs
        .iter()
        .map(|(p, &(ino, level))| (p.clone(), ino, level))
        .collect();
    while let Some((path, ino, level)) = queue.pop_front() {
        let Ok((_, children)) = wc.readdir(ino) else {
            continue;
        };
        for (name, child, kind) in children {
            let mut p = path.clone();
            p.push(b'/');
            p.extend_from_slice(&name);
            if changed.contains(p.as_slice()) {
                continue;
            }
            if kind == EntryType::Dir {
                new_dirs.insert(p.clone(), (child, level + 1));
                queue.push_back((p.clone(), child, level + 1));
            }
            inside.push(PathChange {
                path: p,
                old: None,
                new: Some((child, kind)),
                content: true,
            });
        }
    }

    let mut names: HashMap<NameKey, Name> = HashMap::new();
    let (mut files_gone, mut dirs_gone) = (Vec::new(), Vec::new());
    // Directories made, by level; the files made in held directories, and in new ones.
    let mut dirs_made: Vec<Vec<(Call, Vec<u8>)>> = Vec::new();
    let (mut held_files, mut new_files) = (Vec::new(), Vec::new());
    for c in changes.iter().chain(&inside) {
        let (dir, name) = split(&c.path);
        let in_new = new_dirs.get(dir).map(|&(n, _)| n);
        let files = if in_new.is_some() {
            &mut new_files
        } else {
            &mut held_files
        };
        let same = matches!((c.old, c.new), (Some((o, _)), Some((n, _))) if o == n);
        if let (Some((n, _)), true, false) = (c.new, same, c.content) {
            if in_new.or_else(|| held_dir(dir)).is_some() {
                if let Ok(a) = wc.getattr(n) {
                    files.push((Call::Chmod(a.perm), c.path.clone()));
                }
            }
            continue;
        }
        // A file or link that becomes a file or link: its unlink comes with its making.
        let rewrite = matches!((c.old, c.new),
            (Some((_, o)), Some((_, n))) if o != EntryType::Dir && n != EntryType::Dir);
        let mut unlink = None;
        if let Some((o, kind)) = c.old {
            let parent = match gone_dirs.get(dir) {
                Some(held) => *held,
                None => held_dir(dir),
            };
            if let Some(parent) = parent {
                // Content changed in place (a revert): the name goes and comes back as
                // hg's revert makes it in a clone, but the inode stays (open descriptors
                // and watches on it go on): the name that goes is a ghost of its own.
                let held = if same { None } else { wc.held_attr(o) };
                let (attr, held) = match held {
                    Some(a) => (a, true),
                    None => (spare_attr(wc, kind), false),
                };
                names.insert(
                    (parent, Box::from(name)),
                    Name {
                        was: Some((attr, held)),
                        comes: false,
                    },
                );
                if kind == EntryType::Dir {
                    dirs_gone.push((Call::Rmdir, c.path.clone()));
                } else if rewrite {
                    unlink = Some((Call::Unlink, c.path.clone()));
                } else {
                    files_gone.push((Call::Unlink, c.path.clone()));
                }
            }
        }
        let Some((_, kind)) = c.new else {
            continue;
        };
        let Some(parent) = in_new.or_else(|| held_dir(dir)) else {
            files_gone.extend(unlink);
            continue;
        };
        let call = match kind {
            EntryType::Dir => Call::Dir,
            EntryType::File => Call::File,
            EntryType::Symlink => Call::Link,
            EntryType::Special(_) => {
                files_gone.extend(unlink);
                continue;
            }
        };
        names
            .entry((parent, Box::from(name)))
            .or_insert(Name {
                was: None,
                comes: false,
            })
            .comes = true;
        if call == Call::Dir {
            let level = new_dirs.get(c.path.as_slice()).map_or(0, |&(_, l)| l);
            if dirs_made.len() <= level {
                dirs_made.resize_with(level + 1, Vec::new);
            }
            dirs_made[level].push((call, c.path.clone()));
        } else {
            files.extend(unlink);
            // A file is written once made, as hg writes it (`IN_MODIFY`; an empty one's
            // close after the open for writing is `IN_CLOSE_WRITE`).
            let touch = call == Call::File;
            files.push((call, c.path.clone()));
            if touch {
                files.push((Call::Touch, c.path.clone()));
            }
        }
    }
    dirs_gone.sort_by_key(|(_, p)| std::cmp::Reverse(depth(p)));
    let mut levels = dirs_made.into_iter();
    let mut first = files_gone;
    first.extend(dirs_gone);
    first.extend(levels.next().unwrap_or_default());
    let mut steps = vec![
        Step {
            calls: first,
            waits: false,
        },
        Step {
            calls: held_files,
            waits: false,
        },
    ];
    steps.extend(levels.map(|calls| Step { calls, waits: true }));
    steps.push(Step {
        calls: new_files,
        waits: true,
    });
    steps.retain(|s| !s.calls.is_empty());
    Plan {
        steps,
        names: names.into_iter().collect(),
    }
}

/// The helper's calls for some changes, by path, in steps, and the names answered
/// meanwhile.
struct Plan {
    steps: Vec<Step>,
    names: Vec<(NameKey, Name)>,
}

/// Calls made one after the other; `waits`: not before [`WATCH_PAUSE`] after the last
/// step that made directories.
struct Step {
    calls: Vec<(Call, Vec<u8>)>,
    waits: bool,
}

/// How many directories deep `path` is.
fn depth(path: &[u8]) -> usize {
    path.iter().filter(|&&b| b == b'/').count()
}

/// `path`'s directory and name.
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&[], path),
    }
}

/// A ghost for an inode the kernel never had: a number no entry will have (its forget
/// finds nothing), one link, nothing in it.
fn spare_attr(wc: &WorkingCopy, kind: EntryType) -> Attr {
    let now = SystemTime::now();
    let dir = kind == EntryType::Dir;
    Attr {
        ino: wc.spare_ino(),
        kind,
        size: 0,
        perm: if dir { 0o755 } else { 0o644 },
        mtime: now,
        ctime: now,
        atime: now,
        rdev: 0,
        owner: None,
        nlink: if dir { 2 } else { 1 },
        blocks: 0,
    }
}

/// The helper's side (run as the revfs binary with [`HELPER_ARG`]): checks the mount's
/// root, says `ok`, then makes the calls of each `E` message (one per line: a letter, a
/// mode in octal and a space for `a`, then a path from the root) and answers a line each,
/// `0` or the errno. Returns the exit code.
pub fn helper_main(mountpoint: &OsStr) -> i32 {
    let root = Path::new(mountpoint);
    let refused = match std::fs::metadata(root) {
        Ok(m) if std::os::unix::fs::MetadataExt::ino(&m) == ROOT_INO => None,
        Ok(_) => Some("the mountpoint is not a revfs root".to_owned()),
        Err(e) => Some(format!("the mountpoint: {e}")),
    };
    crate::helper::serve(refused, |op, arg, out| {
        if op != b'E' {
            return Err(1);
        }
        let mut answer = Vec::new();
        for line in arg.split(|&b| b == b'\n') {
            let errno = match call(root, line) {
                Ok(()) => 0,
                Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
            };
            let _ = writeln!(answer, "{errno}");
        }
        out.write_all(&answer).map_err(|_| 0)
    })
}

/// Makes one call of an `E` message's `line`.
fn call(root: &Path, line: &[u8]) -> std::io::Result<()> {
    let invalid = || std::io::Error::from_raw_os_error(libc::EINVAL);
    let (&op, rest) = line.split_first().ok_or_else(invalid)?;
    let (mode, rel) = if op == b'a' {
        let sp = rest.iter().position(|&b| b == b' ').ok_or_else(invalid)?;
        let mode = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|m| u32::from_str_radix(m, 8).ok())
            .ok_or_else(invalid)?;
        (mode, &rest[sp + 1..])
    } else {
        (0, rest)
    };
    if rel.is_empty()
        || rel.starts_with(b"/")
        || rel
            .split(|&b| b == b'/')
            .any(|c| c == b".." || c.is_empty())
    {
        return Err(invalid());
    }
    let path = CString::new(
        root.join(OsStr::from_bytes(rel))
            .into_os_string()
            .into_vec(),
    )
    .map_err(|_| invalid())?;
    let p = path.as_ptr();
    // SAFETY: each call reads the NUL-terminated path (and the times array) only.
    let rc = unsafe {
        match op {
            b'u' => libc::unlink(p),
            b'r' => libc::rmdir(p),
            b'f' => libc::mknod(p, libc::S_IFREG | 0o644, 0),
            b'd' => libc::mkdir(p, 0o755),
            b'l' => libc::symlink(c"revfs".as_ptr(), p),
            b't' => {
                let times = [
                    libc::timespec {
                        tv_sec: 0,
                        tv_nsec: libc::UTIME_OMIT,
                    },
                    libc::timespec {
                        tv_sec: 0,
                        tv_nsec: libc::UTIME_NOW,
                    },
                ];
                libc::utimensat(libc::AT_FDCWD, p, times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
            }
            b'a' => libc::chmod(p, mode as libc::mode_t),
            _ => return Err(invalid()),
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
