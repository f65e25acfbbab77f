//! The daemon never waits on itself: `revfs update` back and forth and `revfs commit`,
//! whose kernel invalidations land in the very directories that several readers walk,
//! list, stat and read at the same time. Every call, the readers' and the commands', must
//! finish within a few seconds; the slowest of each kind is printed.

use revfs_tests::mount::Mount;
use revfs_tests::{env_or, hg_cmd, Rng};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// No call may take longer (the default `control.timeout`).
const LIMIT: Duration = Duration::from_secs(5);

const DIRS: usize = 12;
const FILES: usize = 40;

fn path(d: usize, f: usize) -> String {
    format!("d{d:02}/sub/f{f:03}.txt")
}

fn make_repo(root: &Path) {
    assert!(hg_cmd(
        root.parent().unwrap(),
        &["init", root.file_name().unwrap().to_str().unwrap()]
    )
    .status
    .success());
    for d in 0..DIRS {
        std::fs::create_dir_all(root.join(format!("d{d:02}/sub"))).unwrap();
        for f in 0..FILES {
            std::fs::write(root.join(path(d, f)), format!("r0 {d} {f}\n").repeat(20)).unwrap();
        }
    }
    assert!(hg_cmd(root, &["commit", "-qAm", "r0"]).status.success());
    // r1: a third of the files changed, some removed, some added, in every directory.
    for d in 0..DIRS {
        for f in 0..FILES {
            match f % 6 {
                0 | 1 => std::fs::write(root.join(path(d, f)), format!("r1 {d} {f}\n")).unwrap(),
                2 => std::fs::remove_file(root.join(path(d, f))).unwrap(),
                _ => {}
            }
        }
        for f in FILES..FILES + 5 {
            std::fs::write(root.join(path(d, f)), format!("new {d} {f}\n")).unwrap();
        }
    }
    assert!(hg_cmd(root, &["commit", "-qAm", "r1"]).status.success());
}

/// The slowest call of each kind, and the errors other than a name that went away.
#[derive(Default)]
struct Seen {
    slowest: Vec<(Duration, String)>,
    errors: Vec<String>,
}

impl Seen {
    fn time<T>(&mut self, what: &str, f: impl FnOnce() -> std::io::Result<T>) -> Option<T> {
        let t0 = Instant::now();
        let r = f();
        let took = t0.elapsed();
        if took
            > self
                .slowest
                .iter()
                .find(|(_, w)| w == what)
                .map_or(Duration::ZERO, |s| s.0)
        {
            self.slowest.retain(|(_, w)| w != what);
            self.slowest.push((took, what.to_owned()));
        }
        match r {
            Ok(v) => Some(v),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                self.errors.push(format!("{what}: {e}"));
                None
            }
        }
    }
}

fn reader(root: &Path, stop: &AtomicBool, seed: u64) -> Seen {
    let mut seen = Seen::default();
    let mut rng = Rng::new(seed);
    while !stop.load(Ordering::Relaxed) {
        let d = root.join(format!("d{:02}/sub", rng.below(DIRS)));
        let Some(entries) = seen.time("readdir", || {
            std::fs::read_dir(&d)?
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<Vec<_>>>()
        }) else {
            continue;
        };
        for p in entries {
            if seen
                .time("stat", || std::fs::symlink_metadata(&p))
                .is_some()
            {
                seen.time("read", || std::fs::read(&p));
            }
        }
        // Names that come and go with the updates: lookups, negative ones included.
        let f = rng.below(FILES + 5);
        seen.time("lookup", || {
            std::fs::symlink_metadata(d.join(format!("f{f:03}.txt")))
        });
    }
    seen
}

#[test]
fn updates_and_commits_beside_readers_never_stall_a_call() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    make_repo(&repo);
    let m = Mount::new(&repo, None);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let (root, stop) = (m.dir.clone(), stop.clone());
            std::thread::spawn(move || reader(&root, &stop, 7 + i))
        })
        .collect();
    let commands = Mutex::new(Seen::default());
    let run = |args: &[&str]| {
        let mut c = commands.lock().unwrap();
        let out = c.time(args[0], || Ok(m.revfs(args))).expect("revfs ran");
        assert!(
            out.status.success(),
            "revfs {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let mnt = m.dir.display().to_string();
    let cycles = env_or("REVFS_NO_STALL_CYCLES", 12);
    for i in 0..cycles {
        run(&["update", "-R", &mnt, "-r", "0"]);
        run(&["update", "-R", &mnt, "-r", "tip"]);
        if i % 3 == 2 {
            let d = i % DIRS;
            std::fs::write(
                m.dir.join(format!("d{d:02}/sub/c{i}.txt")),
                format!("{i}\n"),
            )
            .unwrap();
            std::fs::write(m.dir.join(path(d, 4)), format!("edit {i}\n")).unwrap();
            run(&["commit", "-R", &mnt, "-A", "-m", &format!("c{i}")]);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut all = commands.into_inner().unwrap();
    for r in readers {
        let s = r.join().expect("reader");
        all.errors.extend(s.errors);
        for (t, w) in s.slowest {
            all.slowest.push((t, w));
        }
    }
    all.slowest.sort();
    eprintln!(
        "slowest calls: {:?}",
        all.slowest.iter().rev().take(8).collect::<Vec<_>>()
    );
    assert!(all.errors.is_empty(), "errors: {:?}", all.errors);
    let (worst, what) = all.slowest.last().cloned().unwrap_or_default();
    assert!(worst < LIMIT, "a call ({what}) stalled for {worst:?}");
    let st = m.revfs(&["status", "-R", &mnt]);
    assert_eq!(String::from_utf8_lossy(&st.stdout), "");
    m.unmount();
}
