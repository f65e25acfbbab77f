//! FUSE passthrough (`mount.passthrough`): files in the overlay are read and written by the
//! kernel directly, and the working copy still learns of every change: status, diff,
//! commit and revert see the writes as they see the daemon's own, and the journal after
//! the same writes is the same with passthrough and without it, across kill -9 and a
//! remount.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_repo};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

const ON: &str = "[mount]\npassthrough = true\n";
/// On, with no read-ahead (whose pushes would fill pages before the opens counted here).
const ON_NO_READAHEAD: &str = "[mount]\npassthrough = true\nreadahead_threads = 0\n";
const OFF: &str = "[mount]\npassthrough = false\n";

fn files() -> Vec<(String, Vec<u8>)> {
    ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "sub/f.txt"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                format!("{n} line one\n{n} line two\n").into_bytes(),
            )
        })
        .collect()
}

fn out(o: std::process::Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// `revfs ARGS` in the mount.
fn rv(m: &Mount, args: &[&str]) -> String {
    out(m.revfs_in(&m.dir, args))
}

/// Writes of every kind a program makes, in `root` (a mount or a clone).
fn write_everything(root: &Path) {
    // Overwritten whole.
    std::fs::write(root.join("a.txt"), b"a replaced\n").unwrap();
    // Appended to.
    let mut f = OpenOptions::new()
        .append(true)
        .open(root.join("b.txt"))
        .unwrap();
    f.write_all(b"b appended\n").unwrap();
    drop(f);
    // Written in the middle.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join("c.txt"))
        .unwrap();
    f.write_at(b"XY", 2).unwrap();
    drop(f);
    // Cut short.
    let f = OpenOptions::new()
        .write(true)
        .open(root.join("d.txt"))
        .unwrap();
    f.set_len(3).unwrap();
    drop(f);
    // New files, one of them written through a shared map.
    std::fs::create_dir(root.join("new")).unwrap();
    std::fs::write(root.join("new/file.txt"), b"a new file\n").unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(root.join("new/mapped.bin"))
        .unwrap();
    f.set_len(8192).unwrap();
    // SAFETY: a fresh shared map of a file of 8192 bytes, written within it and unmapped.
    unsafe {
        use std::os::fd::AsRawFd;
        let p = libc::mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let bytes = std::slice::from_raw_parts_mut(p as *mut u8, 8192);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        assert_eq!(libc::msync(p, 8192, libc::MS_SYNC), 0);
        libc::munmap(p, 8192);
    }
    drop(f);
    // Written, then written again through a second handle while the first is open.
    let f1 = OpenOptions::new()
        .write(true)
        .open(root.join("sub/f.txt"))
        .unwrap();
    f1.write_at(b"1", 0).unwrap();
    let f2 = OpenOptions::new()
        .write(true)
        .open(root.join("sub/f.txt"))
        .unwrap();
    f2.write_at(b"2", 1).unwrap();
    drop((f1, f2));
}

/// Every file below `root` (`.hg` and `.revfs` aside) with its bytes.
fn contents(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name();
            if name == ".hg" || name == ".revfs" {
                continue;
            }
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn journal(m: &Mount) -> String {
    out(m.revfs(&["debugjournal", &m.dir.display().to_string()]))
}

#[test]
fn passthrough_writes_keep_status_diff_and_the_journal_exact_across_kill_and_remount() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_on = hg_repo(tmp.path(), &files());
    // The same changeset in a repository of its own (and a working copy of it for hg).
    let repo_off = tmp.path().join("off");
    let clone = tmp.path().join("clone");
    for (dest, args) in [(&repo_off, &["-U"][..]), (&clone, &[][..])] {
        let mut a = vec!["clone", "-q"];
        a.extend_from_slice(args);
        let (from, to) = (repo_on.display().to_string(), dest.display().to_string());
        a.extend([from.as_str(), to.as_str()]);
        out(hg_cmd(tmp.path(), &a));
    }
    let on = Mount::with_config(&repo_on, ON);
    let off = Mount::with_config(&repo_off, OFF);
    let doctor = out(on.revfs(&["doctor", &on.dir.display().to_string()]));
    assert!(doctor.contains("passthrough on"), "{doctor}");
    let doctor = out(off.revfs(&["doctor", &off.dir.display().to_string()]));
    assert!(
        doctor.contains("passthrough off (mount.passthrough = false)"),
        "{doctor}"
    );

    for root in [&on.dir, &off.dir, &clone] {
        write_everything(root);
    }
    // The writes went through backing files.
    let s = on.stats();
    assert!(s.get("passthrough_opens") >= 7, "{s}");
    assert_eq!(off.stats().get("passthrough_opens"), 0);

    let hg_status = out(hg_cmd(&clone, &["status"]));
    let hg_diff = out(hg_cmd(&clone, &["diff", "--git"]));
    let check = |what: &str| {
        for m in [&on, &off] {
            assert_eq!(rv(m, &["status"]), hg_status, "{what}: status");
            assert_eq!(rv(m, &["diff", "--git"]), hg_diff, "{what}: diff");
            assert_eq!(contents(&m.dir), contents(&clone), "{what}: bytes");
        }
        assert_eq!(journal(&on), journal(&off), "{what}: journal");
    };
    check("after the writes");
    for (m, repo) in [(&on, &repo_on), (&off, &repo_off)] {
        m.kill_daemon();
        m.unmount();
        m.remount(repo, None);
    }
    check("after kill -9 and a remount");
}

#[test]
fn a_file_open_for_writing_through_passthrough_is_never_taken_as_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &files());
    let m = Mount::with_config(&repo, ON);
    let a = m.dir.join("a.txt");
    let original = std::fs::read(&a).unwrap();
    // Written back with its own bytes: compared once, and remembered equal.
    std::fs::write(&a, &original).unwrap();
    assert_eq!(rv(&m, &["status"]), "");
    assert_eq!(rv(&m, &["status"]), "");
    // A write of the same size through a handle still open.
    let f = OpenOptions::new().read(true).write(true).open(&a).unwrap();
    f.write_at(b"Z", 0).unwrap();
    assert_eq!(rv(&m, &["status"]), "M a.txt\n");
    assert!(rv(&m, &["diff"]).contains("+Z.txt line one"));
    drop(f);
    assert_eq!(rv(&m, &["status"]), "M a.txt\n");
    std::fs::write(&a, &original).unwrap();
    assert_eq!(rv(&m, &["status"]), "");
    assert!(m.stats().get("passthrough_opens") >= 3);
}

#[test]
fn commit_and_revert_leave_a_file_open_through_passthrough_to_its_writers() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &files());
    let m = Mount::with_config(&repo, ON);
    // Committed while a writer holds it: the commit has what was written, and what the
    // writer writes after it is a change again.
    let b = m.dir.join("b.txt");
    let w = OpenOptions::new().write(true).open(&b).unwrap();
    w.write_at(b"committed\n", 0).unwrap();
    rv(&m, &["commit", "-q", "-m", "b", "-u", "t"]);
    let tip = out(hg_cmd(&repo, &["cat", "-r", "tip", "b.txt"]));
    assert!(tip.starts_with("committed\n"), "{tip}");
    assert_eq!(rv(&m, &["status"]), "");
    w.write_at(b"after\n", 0).unwrap();
    assert_eq!(rv(&m, &["status"]), "M b.txt\n");
    assert!(std::fs::read_to_string(&b).unwrap().starts_with("after\n"));
    drop(w);

    // Reverted while a writer holds it: the name is the revision's file again, and the
    // writer's later writes go to the file it holds, not to the reverted one.
    let c = m.dir.join("c.txt");
    let original = out(hg_cmd(&repo, &["cat", "-r", "tip", "c.txt"]));
    let w = OpenOptions::new().write(true).open(&c).unwrap();
    w.write_at(b"junk", 0).unwrap();
    assert_eq!(rv(&m, &["status", "c.txt"]), "M c.txt\n");
    rv(&m, &["revert", "--no-backup", "c.txt"]);
    assert_eq!(std::fs::read_to_string(&c).unwrap(), original);
    w.write_at(b"more junk", 0).unwrap();
    drop(w);
    assert_eq!(std::fs::read_to_string(&c).unwrap(), original);
    assert_eq!(rv(&m, &["status"]), "M b.txt\n");
}

/// Files of every size a push meets: empty, a page, several, past the 1 MiB pushed at most.
fn sized_files() -> Vec<(String, Vec<u8>)> {
    [
        0usize,
        1,
        4095,
        4096,
        4097,
        70_000,
        1 << 20,
        (1 << 20) + 1,
        3 << 20,
    ]
    .iter()
    .enumerate()
    .map(|(i, &n)| {
        let data: Vec<u8> = (0..n).map(|k| b'a' + ((k * 7 + i) % 26) as u8).collect();
        (format!("d/f{i}"), data)
    })
    .collect()
}

#[test]
fn a_first_open_fills_the_page_cache_with_what_hg_has_once() {
    let tmp = tempfile::tempdir().unwrap();
    let files = sized_files();
    let repo = hg_repo(tmp.path(), &files);
    let m = Mount::with_config(&repo, ON_NO_READAHEAD);
    for (name, data) in &files {
        let p = m.dir.join(name);
        let read = std::fs::read(&p).unwrap();
        assert!(
            read == *data,
            "{name}: {} bytes read, {} in hg",
            read.len(),
            data.len()
        );
        assert_eq!(std::fs::metadata(&p).unwrap().len(), data.len() as u64);
    }
    // Every file with bytes, up to 1 MiB, was pushed at its first open; none again.
    let pushable = files
        .iter()
        .filter(|(_, d)| !d.is_empty() && d.len() <= 1 << 20)
        .count() as u64;
    assert_eq!(m.stats().get("pushed_opens"), pushable);
    for (name, data) in &files {
        assert!(std::fs::read(m.dir.join(name)).unwrap() == *data, "{name}");
    }
    assert_eq!(m.stats().get("pushed_opens"), pushable);
    assert_eq!(rv(&m, &["status"]), "");
}

/// f0 to f8, 3,000 lines each ("N old").
fn nine_old_files() -> Vec<(String, Vec<u8>)> {
    (0..9)
        .map(|i| {
            (
                format!("f{i}"),
                format!("{i} old\n").repeat(3000).into_bytes(),
            )
        })
        .collect()
}

#[test]
fn a_change_during_a_first_open_is_never_undone_by_its_push() {
    let tmp = tempfile::tempdir().unwrap();
    let files = nine_old_files();
    let repo = hg_repo(tmp.path(), &files);
    let m = Mount::with_config(&repo, ON_NO_READAHEAD);
    // Each push waits 100 ms before it fills the pages and 100 ms after: the change below
    // comes during the first wait, and must wait for the push, else the push lands over it
    // in the page cache, where a handle in the page cache (not through a backing file)
    // reads it during the second wait (the open that pushed then drops the pages).
    assert_eq!(
        m.control("{\"cmd\":\"debug_push_delay\",\"ms\":100}"),
        "{\"reply\":\"done\"}\n"
    );
    for (i, (name, old)) in files.iter().enumerate() {
        let p = m.dir.join(name);
        let new = format!("{i} new\n").repeat(100).into_bytes();
        let start = std::time::Instant::now();
        let (during, reader) = std::thread::scope(|s| {
            let reader = s.spawn(|| std::fs::File::open(&p).unwrap());
            std::thread::sleep(std::time::Duration::from_millis(30));
            match i % 3 {
                // In place, the size unchanged: nothing makes the kernel look again.
                0 => OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .write_all_at(&new, 4096)
                    .unwrap(),
                1 => std::fs::write(&p, &new).unwrap(),
                _ => {
                    // A truncate by path (no open), then a write.
                    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
                    // SAFETY: a valid NUL-terminated path.
                    assert_eq!(unsafe { libc::truncate(c.as_ptr(), 0) }, 0);
                    OpenOptions::new()
                        .write(true)
                        .open(&p)
                        .unwrap()
                        .write_all(&new)
                        .unwrap();
                }
            }
            // In the push's second wait, if the change did not wait for the push.
            let t = std::time::Duration::from_millis(150);
            std::thread::sleep(t.saturating_sub(start.elapsed()));
            let during = std::fs::read(&p).unwrap();
            (during, reader.join().unwrap())
        });
        let want = if i % 3 == 0 {
            let mut w = old.clone();
            w[4096..4096 + new.len()].copy_from_slice(&new);
            w
        } else {
            new
        };
        assert!(
            during == want,
            "{name} (case {}): read after the change",
            i % 3
        );
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut &reader, &mut got).unwrap();
        assert!(got == want, "{name} (case {}): the reader's handle", i % 3);
        assert!(
            std::fs::read(&p).unwrap() == want,
            "{name} (case {})",
            i % 3
        );
    }
    assert_eq!(m.stats().get("pushed_opens"), files.len() as u64);
}

#[test]
fn a_read_and_a_first_write_opening_one_file_at_once_both_open() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &files());
    let m = Mount::with_config(&repo, ON);
    // A read-only open waits 100 ms between its look at the file (in the store) and its
    // decision: the writer's open meanwhile copies the file into the overlay and holds a
    // handle on its backing file, which the reader then must open too (not fail).
    assert_eq!(
        m.control("{\"cmd\":\"debug_open_delay\",\"ms\":100}"),
        "{\"reply\":\"done\"}\n"
    );
    let p = m.dir.join("a.txt");
    let (read, writer) = std::thread::scope(|s| {
        let reader = s.spawn(|| std::fs::read(&p));
        std::thread::sleep(std::time::Duration::from_millis(30));
        let w = OpenOptions::new().write(true).open(&p).unwrap();
        w.write_all_at(b"N", 0).unwrap();
        (reader.join().unwrap(), w)
    });
    let read = read.unwrap_or_else(|e| panic!("the reader's open: {e}"));
    assert_eq!(read, b"N.txt line one\na.txt line two\n");
    drop(writer);
    assert!(m.stats().get("passthrough_opens") >= 2);
}

/// Read-ahead's counters once they stop moving (its threads are done).
fn settled(m: &Mount) -> revfs_tests::mount::Stats {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut last = m.stats();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = m.stats();
        if now == last || std::time::Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

#[test]
fn files_read_ahead_are_in_the_page_cache_before_their_first_open() {
    let tmp = tempfile::tempdir().unwrap();
    let files = sized_files();
    let repo = hg_repo(tmp.path(), &files);
    let m = Mount::with_config(
        &repo,
        "[mount]\npassthrough = true\nreadahead_threads = 1\nreadahead_size = \"64 MiB\"\n",
    );
    // The kernel has every file's inode (a push needs one); d/f1's first read (its open
    // pushes it) starts d/'s round: the files after it with bytes, up to 1 MiB, are pushed
    // once read ahead, and their opens find the pages.
    for (name, data) in &files {
        assert_eq!(
            std::fs::metadata(m.dir.join(name)).unwrap().len(),
            data.len() as u64
        );
    }
    let (first, data) = &files[1];
    assert!(std::fs::read(m.dir.join(first)).unwrap() == *data);
    let s = settled(&m);
    let ahead = files[2..]
        .iter()
        .filter(|(_, d)| d.len() <= 1 << 20)
        .count() as u64;
    assert_eq!(s.readahead("pushed"), Some(ahead), "{s}");
    assert_eq!(s.get("pushed_opens"), 1, "{s}");
    for (name, data) in &files {
        let read = std::fs::read(m.dir.join(name)).unwrap();
        assert!(
            read == *data,
            "{name}: {} bytes, {} in hg",
            read.len(),
            data.len()
        );
    }
    // No open pushed what read-ahead had (f0, empty, has nothing to push).
    assert_eq!(m.stats().get("pushed_opens"), 1);
    assert_eq!(rv(&m, &["status"]), "");
}

#[test]
fn a_write_during_a_push_after_read_ahead_is_never_undone_by_it() {
    write_during_push_after_read_ahead("[mount]\npassthrough = true\nreadahead_threads = 1\n");
}

#[test]
fn with_passthrough_off_a_write_during_a_push_after_read_ahead_is_never_undone_by_it() {
    // Opens are not seen: the push holds a read lease, which the writer's open waits for.
    write_during_push_after_read_ahead("[mount]\npassthrough = false\nreadahead_threads = 1\n");
}

fn write_during_push_after_read_ahead(config: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let files = nine_old_files();
    let repo = hg_repo(tmp.path(), &files);
    let m = Mount::with_config(&repo, config);
    // Read-ahead pushes f1 to f8 one after another, each stopped before it fills the pages
    // (`debug_push_hold`) until the test has opened the file for reading and started an
    // open for writing: the writer's open must wait for the push (passthrough on: the
    // daemon's table; off: the push's read lease), else the push, let go, lands over the
    // write. The write is in place, the size unchanged (nothing makes the kernel look
    // again), and read back through the first handle: both handles are in the page cache
    // (the first open's made the second's), where the write lands.
    let done = "{\"reply\":\"done\"}\n";
    assert_eq!(m.control("{\"cmd\":\"debug_push_hold\",\"on\":true}"), done);
    // A failed assertion lets every stopped push go before the mount is unmounted.
    struct Unhold<'a>(&'a Mount);
    impl Drop for Unhold<'_> {
        fn drop(&mut self) {
            self.0.control("{\"cmd\":\"debug_push_hold\",\"on\":false}");
        }
    }
    let unhold = Unhold(&m);
    for (name, _) in &files {
        std::fs::metadata(m.dir.join(name)).unwrap();
    }
    assert!(std::fs::read(m.dir.join("f0")).unwrap() == files[0].1);
    for (i, (name, old)) in files.iter().enumerate().skip(1) {
        let p = m.dir.join(name);
        let ino = std::fs::metadata(&p).unwrap().ino();
        // The push of this file, stopped.
        let held = m.control("{\"cmd\":\"debug_push_held\",\"ms\":20000}");
        assert_eq!(
            held,
            format!("{{\"reply\":\"push_held\",\"inos\":[{ino}]}}\n"),
            "{name}"
        );
        let new = format!("{i} new\n").repeat(100).into_bytes();
        let reader = std::fs::File::open(&p).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let (p, new) = (p.clone(), new.clone());
            std::thread::spawn(move || {
                let w = OpenOptions::new().write(true).open(&p).unwrap();
                tx.send(()).unwrap();
                w.write_all_at(&new, 4096).unwrap();
            })
        };
        // The writer's open waits while the push is stopped.
        let waited = rx.recv_timeout(std::time::Duration::from_millis(300));
        assert!(
            waited.is_err(),
            "{name}: the open for writing did not wait for the push"
        );
        let release = format!("{{\"cmd\":\"debug_push_release\",\"ino\":{ino}}}");
        assert_eq!(m.control(&release), done);
        writer.join().unwrap();
        let mut want = old.clone();
        want[4096..4096 + new.len()].copy_from_slice(&new);
        let mut got = vec![0; want.len()];
        reader.read_exact_at(&mut got, 0).unwrap();
        assert!(got == want, "{name}: read after the write");
    }
    drop(unhold);
    let s = settled(&m);
    assert!(s.readahead("pushed").unwrap() >= 8, "{s}");
    for (i, (name, old)) in files.iter().enumerate().skip(1) {
        let mut want = old.clone();
        let new = format!("{i} new\n").repeat(100).into_bytes();
        want[4096..4096 + new.len()].copy_from_slice(&new);
        assert!(std::fs::read(m.dir.join(name)).unwrap() == want, "{name}");
    }
}
