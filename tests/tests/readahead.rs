//! Read-ahead (docs/CONFIG.md, `mount.readahead_threads`): once a file of the repository is
//! read from its start, the next files of its directory are rebuilt into the caches on
//! background threads, within `mount.readahead_size` bytes not read yet; what programs read
//! is the same with it and without it.

use revfs_tests::mount::Mount;
use revfs_tests::reclaim::paged_out_bytes;
use revfs_tests::{hg_cmd, hg_repo};
use std::time::{Duration, Instant};

/// 120 files of 4,096 distinct bytes in `d/`, and a few more elsewhere.
fn repo(dir: &std::path::Path) -> std::path::PathBuf {
    let mut files: Vec<(String, Vec<u8>)> = (0..120)
        .map(|i| {
            let body: Vec<u8> = (0..4096u32)
                .map(|j| (j.wrapping_mul(31).wrapping_add(i * 7) % 251) as u8)
                .collect();
            (format!("d/f{i:03}"), body)
        })
        .collect();
    files.push(("e/one".into(), b"one\n".to_vec()));
    files.push(("e/two".into(), b"two\n".to_vec()));
    hg_repo(dir, &files)
}

/// `n` files `d/f000`, `d/f001`... whose content is `body(i)`, committed by hg.
fn flat_repo(
    dir: &std::path::Path,
    n: usize,
    body: impl Fn(usize) -> Vec<u8>,
) -> std::path::PathBuf {
    let files: Vec<(String, Vec<u8>)> = (0..n).map(|i| (format!("d/f{i:03}"), body(i))).collect();
    hg_repo(dir, &files)
}

/// `x/one`, then `files` files in each of `dirs` directories, `d0/f0`... (`{:02}` and
/// `{:03}` when `wide`), each of its own text; the first `extra` files too.
fn tree_files(
    extra: &[(&str, &[u8])],
    dirs: usize,
    files: usize,
    wide: bool,
) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = extra
        .iter()
        .map(|(n, b)| (n.to_string(), b.to_vec()))
        .collect();
    out.push(("x/one".into(), b"one\n".to_vec()));
    for d in 0..dirs {
        for f in 0..files {
            let name = if wide {
                format!("d{d:02}/f{f:03}")
            } else {
                format!("d{d}/f{f}")
            };
            let body = format!("{name}\n").into_bytes();
            out.push((name, body));
        }
    }
    out
}

/// A program lists `dir` (`entries` of them) and reads `names`, as tar does.
fn list_then_read(m: &Mount, dir: &str, entries: usize, names: &[&str]) {
    assert_eq!(std::fs::read_dir(m.dir.join(dir)).unwrap().count(), entries);
    for name in names {
        std::fs::read(m.dir.join(name)).unwrap();
    }
}

/// A mount with two read-ahead threads and passthrough off: the daemon sees no open, and
/// pushes under read leases.
fn unseen_opens_mount(repo: &std::path::Path) -> Mount {
    Mount::with_config(
        repo,
        "[mount]\nreadahead_threads = 2\npassthrough = false\n",
    )
}

/// Every file of `d/` in the mount reads as hg has it.
fn every_file_reads_as_hg(m: &Mount, repo: &std::path::Path) {
    let hg = archived(repo);
    for i in 0..120 {
        let name = format!("d/f{i:03}");
        let want = std::fs::read(hg.path().join("r0").join(&name)).unwrap();
        assert_eq!(std::fs::read(m.dir.join(&name)).unwrap(), want, "{name}");
    }
}

/// Revision 0 of `repo` as hg writes it out (`hg archive`: one hg run for every file),
/// in `r0` of the directory returned.
fn archived(repo: &std::path::Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    revfs_tests::hg_archive(repo, "0", &dir.path().join("r0"));
    dir
}

/// The daemon's read-ahead counters once they stop moving (its threads are done).
fn settled(m: &Mount) -> revfs_tests::mount::Stats {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = m.stats();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = m.stats();
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Puts `file` out of the page cache (written back first: the kernel drops clean pages only).
fn evict(file: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(file).unwrap();
    f.sync_all().unwrap();
    // SAFETY: advice on an open descriptor.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

/// How many of `file`'s pages are in the page cache, and how many it has.
fn resident_pages(file: &std::path::Path) -> (usize, usize) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(file).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let pages = len.div_ceil(4096);
    // SAFETY: a private read-only map of the whole file, unmapped below; mincore writes one
    // byte per page into `vec`. Mapping reads nothing from the disk.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let mut vec = vec![0u8; pages];
        assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
        libc::munmap(p, len);
        (vec.iter().filter(|b| **b & 1 == 1).count(), pages)
    }
}

/// Checks that every page of `files` is in the page cache, but for as many as the kernel's
/// proactive reclaim paged out since `paged_out_before` (a `paged_out_bytes()` taken before
/// the pages were pushed): DAMON's `pageout` schemes, which this machine runs from boot,
/// page out clean pages nobody touched without memory pressure, and took a few pushed pages
/// from clean-clone runs (docs/RELIABILITY.md, "Formerly flaky tests"). Where DAMON paged
/// out nothing meanwhile, every page must be there.
fn assert_resident<P: AsRef<std::path::Path>>(files: &[P], paged_out_before: u64) {
    let mut missing = Vec::new();
    let mut missing_pages = 0;
    for f in files {
        let (resident, pages) = resident_pages(f.as_ref());
        if resident != pages {
            missing.push(format!("{}: {resident} of {pages}", f.as_ref().display()));
            missing_pages += pages - resident;
        }
    }
    let paged_out = paged_out_bytes().saturating_sub(paged_out_before);
    assert!(
        missing_pages as u64 * 4096 <= paged_out,
        "{missing_pages} pages not in the page cache, DAMON paged out {paged_out} bytes \
         meanwhile: {missing:?}"
    );
}

#[test]
fn read_ahead_reads_store_files_the_page_cache_lost_from_the_disk() {
    // Reading the disk ahead of a reader overlaps its reads with the reader's work
    // (docs/BENCHMARKS.md): the store files of d/f060 to d/f119 are out of the page cache,
    // and read-ahead reads them all the same. The repository on a disk (/var/tmp): a memory
    // file system's pages (a tmpfs /tmp, as Debian 13 and Fedora mount it) cannot leave
    // the page cache.
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let repo = repo(tmp.path());
    let index = |i: usize| repo.join(format!(".hg/store/data/d/f{i:03}.i"));
    for i in 60..120 {
        evict(&index(i));
        assert_eq!(resident_pages(&index(i)).0, 0, "f{i:03}.i still cached");
    }
    let paged_out = paged_out_bytes();
    let m = Mount::with_config(&repo, "[mount]\nreadahead_threads = 2\n");
    std::fs::read(m.dir.join("d/f000")).unwrap();
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(1), "{s}");
    assert_eq!(s.readahead("files"), Some(119), "{s}");
    assert_eq!(s.readahead("dropped"), Some(0), "{s}");
    let read_ahead: Vec<_> = (60..120).map(index).collect();
    assert_resident(&read_ahead, paged_out);
    every_file_reads_as_hg(&m, &repo);
}

#[test]
fn read_ahead_threads_run_at_the_lowest_normal_priority() {
    // Nice 19 in the normal class: a foreground request beside them gets nearly all of a
    // CPU, and they still run when their disk reads complete (SCHED_IDLE ones wait behind
    // every busy CPU).
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = Mount::with_config(&repo, "[mount]\nreadahead_threads = 2\n");
    let pid = m.daemon_pid();
    let mut threads = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if !comm.starts_with("revfs-readahead") {
            continue;
        }
        // Fields after the command's closing parenthesis: nice is the 19th of the line,
        // the scheduling policy the 41st.
        let stat = std::fs::read_to_string(task.join("stat")).unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        assert_eq!(fields[19 - 3], "19", "nice of {comm}");
        assert_eq!(fields[41 - 3], "0", "policy of {comm} (SCHED_OTHER)");
        threads += 1;
    }
    assert_eq!(threads, 2);
}

#[test]
fn texts_the_reader_reads_leave_nothing_in_the_budget() {
    // A reader right behind its round reads some files before read-ahead gets to them:
    // their turn skips them, so that nothing the reader read stays counted against the
    // budget (a full budget starts no round).
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = Mount::with_config(&repo, "[mount]\nreadahead_threads = 2\n");
    // Pushed texts leave the budget by themselves: this is about those read with READs.
    m.debug_no_push();
    for i in 0..120 {
        std::fs::read(m.dir.join(format!("d/f{i:03}"))).unwrap();
    }
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(1), "{s}");
    assert_eq!(s.readahead("pending_bytes"), Some(0), "{s}");
    assert_eq!(s.readahead("used"), s.readahead("files"), "{s}");
    // Those it read while read-ahead was still rebuilding them are counted among them.
    assert!(
        s.readahead("raced")
            .is_some_and(|r| Some(r) <= s.readahead("used")),
        "{s}"
    );
}

#[test]
fn read_ahead_stops_at_its_budget_and_what_is_read_is_the_repositorys() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    // 40 KiB: ten of the files.
    let m = Mount::with_config(
        &repo,
        "[mount]\nreadahead_threads = 2\nreadahead_size = \"40 KiB\"\n",
    );
    // Pushed texts leave the budget by themselves: this is about those read with READs.
    m.debug_no_push();
    let before = m.stats();
    assert_eq!(before.readahead("rounds"), Some(0), "{before}");
    // Listing and looking up read nothing ahead.
    let names: Vec<_> = std::fs::read_dir(m.dir.join("d")).unwrap().collect();
    assert_eq!(names.len(), 120);
    std::fs::metadata(m.dir.join("d/f050")).unwrap();
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(0), "{s}");

    // A read from the start of d/f000 starts one round for d/.
    let first = std::fs::read(m.dir.join("d/f000")).unwrap();
    assert_eq!(first.len(), 4096);
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(1), "{s}");
    let (files, bytes, pending) = (
        s.readahead("files").unwrap(),
        s.readahead("bytes").unwrap(),
        s.readahead("pending_bytes").unwrap(),
    );
    assert!(files >= 1, "nothing read ahead: {s}");
    assert!(
        bytes <= 40 << 10 && pending <= 40 << 10,
        "past the budget: {s}"
    );
    // The other files of the round were dropped at the budget, not read.
    assert!(s.readahead("dropped").unwrap() >= 100, "{s}");

    // Reading the files read ahead uses them and frees the budget. Which ten they are
    // depends on the threads: one that took d/f001 and was then kept off the CPU finds the
    // budget spent by the other when it comes back (at most d/f001 to d/f012 then).
    for i in 1..=5 {
        std::fs::read(m.dir.join(format!("d/f{i:03}"))).unwrap();
    }
    let s = settled(&m);
    let used = s.readahead("used").unwrap();
    assert!((4..=5).contains(&used), "{s}");
    assert_eq!(
        s.readahead("pending_bytes"),
        Some(pending - used * 4096),
        "{s}"
    );
    for i in 6..=12 {
        std::fs::read(m.dir.join(format!("d/f{i:03}"))).unwrap();
    }
    let s = settled(&m);
    assert_eq!(s.readahead("used"), Some(files), "{s}");
    assert_eq!(s.readahead("pending_bytes"), Some(0), "{s}");
    // Another directory starts its own round; d/ does not start a second one so soon.
    std::fs::read(m.dir.join("e/one")).unwrap();
    std::fs::read(m.dir.join("d/f000")).unwrap();
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(2), "{s}");

    // Every file reads as hg has it.
    every_file_reads_as_hg(&m, &repo);
}

#[test]
fn a_file_too_big_for_the_text_cache_is_read_ahead_into_the_on_disk_cache() {
    // d/a is read: d/big (5 MiB, over the 4 MiB of texts kept in memory) is rebuilt on a
    // read-ahead thread into the mount's on-disk cache of big texts, then pushed from there
    // into the page cache a MiB at a time, as d/mid (2 MiB, pushed from memory in one
    // piece): the reader finds their pages, and reads neither through the daemon.
    let tmp = tempfile::tempdir().unwrap();
    let bytes = |n: u32, k: u32| -> Vec<u8> {
        (0..n)
            .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(k) >> 13) as u8)
            .collect()
    };
    let big = bytes(5 << 20, 0);
    let mid = bytes(2 << 20, 7);
    let repo = hg_repo(
        tmp.path(),
        &[
            ("d/a", b"a\n".to_vec()),
            ("d/big", big.clone()),
            ("d/mid", mid.clone()),
        ],
    );
    let paged_out = paged_out_bytes();
    let m = unseen_opens_mount(&repo);
    std::fs::read(m.dir.join("d/a")).unwrap();
    let s = settled(&m);
    assert_eq!(s.readahead("files"), Some(2), "{s}");
    assert_eq!(s.readahead("bytes"), Some(7 << 20), "{s}");
    // Not in the budget (pushed, or holding no memory), and both pushed.
    assert_eq!(s.readahead("pending_bytes"), Some(0), "{s}");
    assert_eq!(s.readahead("pushed"), Some(2), "{s}");
    // Their pages are there before the reader reads them.
    assert_resident(&[m.dir.join("d/big"), m.dir.join("d/mid")], paged_out);
    // Its entry: a 64-byte header, then the text (docs/FORMATS.md, "The text cache").
    let cached: Vec<u64> = std::fs::read_dir(m.state_dir().join("texts"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    assert_eq!(cached, [64 + (5 << 20)]);
    assert!(std::fs::read(m.dir.join("d/big")).unwrap() == big);
    assert!(std::fs::read(m.dir.join("d/mid")).unwrap() == mid);
    // The reads found the pages: none reached the daemon.
    assert_eq!(m.stats().readahead("used"), Some(0));
}

#[test]
fn read_ahead_is_off_with_no_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = Mount::with_config(&repo, "[mount]\nreadahead_threads = 0\n");
    std::fs::read(m.dir.join("d/f000")).unwrap();
    let s = m.stats();
    assert_eq!(s.readahead("files"), None, "{s}");
    assert_eq!(
        std::fs::read(m.dir.join("d/f119")).unwrap(),
        hg_cmd(&repo, &["cat", "-r", "0", "d/f119"]).stdout
    );
}

/// A mount with a 40 KiB read-ahead budget where e/one was read, then d/ listed. One
/// read-ahead thread: with two, which files of a round fit the budget depends on which
/// thread gets there first (each takes the next queued file, and a file counts against the
/// budget once its filelog is open: a thread held up opening d/f000, at nice 19 on a busy
/// machine, lets the other fill the budget with d/f001 to d/f009, and d/f000 is left to
/// its reader), and these tests say which files are read ahead.
fn read_e_then_list_d(repo: &std::path::Path) -> Mount {
    let m = Mount::with_config(
        repo,
        "[mount]\nreadahead_threads = 1\nreadahead_size = \"40 KiB\"\n",
    );
    // Pushed texts leave the budget by themselves: these are about the budget.
    m.debug_no_push();
    std::fs::read(m.dir.join("e/one")).unwrap();
    assert_eq!(std::fs::read_dir(m.dir.join("d")).unwrap().count(), 120);
    m
}

#[test]
fn a_directory_listed_while_a_program_reads_is_read_ahead_too() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    // A read (e/one: its directory's round, e/two) makes the listing of d/ give its entries
    // with their attributes, which loads them (readers.rs); they are read ahead all the same.
    let m = read_e_then_list_d(&repo);
    std::fs::read(m.dir.join("d/f000")).unwrap();
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(2), "{s}");
    assert!(s.readahead("files").unwrap() >= 2, "{s}");
    assert!(s.readahead("dropped").unwrap() >= 100, "{s}");
    for i in [1, 60, 119] {
        let name = format!("d/f{i:03}");
        let want = hg_cmd(&repo, &["cat", "-r", "0", &name]).stdout;
        assert_eq!(std::fs::read(m.dir.join(&name)).unwrap(), want, "{name}");
    }
}

#[test]
fn a_directory_listed_while_a_program_reads_is_read_ahead_from_its_first_file() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    // A program that reads files (e/one) lists d/, the directory it reads next: d/'s
    // round starts at the listing, from d/f000, before any file of d/ is read.
    let m = read_e_then_list_d(&repo);
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(2), "{s}");
    // e/two (4 bytes), and d/ from its first file until the 40 KiB budget: 9 files of
    // 4 KiB.
    assert_eq!(s.readahead("files"), Some(10), "{s}");
    assert_eq!(s.readahead("bytes"), Some(4 + 9 * 4096), "{s}");
    assert_eq!(s.readahead("used"), Some(0), "{s}");
    let want = hg_cmd(&repo, &["cat", "-r", "0", "d/f000"]).stdout;
    assert_eq!(std::fs::read(m.dir.join("d/f000")).unwrap(), want);
    assert_eq!(m.stats().readahead("used"), Some(1));
}

#[test]
fn a_directory_listed_while_a_program_only_stats_files_is_not_read_ahead() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = Mount::with_config(&repo, "[mount]\nreadahead_threads = 2\n");
    // `find -size` or `ls -l`: files looked up, none read.
    std::fs::metadata(m.dir.join("e/one")).unwrap();
    assert_eq!(std::fs::read_dir(m.dir.join("d")).unwrap().count(), 120);
    for i in 0..120 {
        std::fs::metadata(m.dir.join(format!("d/f{i:03}"))).unwrap();
    }
    let s = settled(&m);
    assert_eq!(s.readahead("rounds"), Some(0), "{s}");
    assert_eq!(s.readahead("files"), Some(0), "{s}");
}

#[test]
fn with_opens_not_seen_files_read_ahead_are_in_the_page_cache_before_their_first_read() {
    // Passthrough off: the daemon sees no open, and pushes a file read ahead under a read
    // lease (no writer can have it open). The reader's reads then find its pages.
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let paged_out = paged_out_bytes();
    let m = unseen_opens_mount(&repo);
    std::fs::read(m.dir.join("d/f000")).unwrap();
    let s = settled(&m);
    assert_eq!(s.readahead("files"), Some(119), "{s}");
    assert_eq!(s.readahead("pushed"), Some(119), "{s}");
    // Pushed texts are not held against the budget.
    assert_eq!(s.readahead("pending_bytes"), Some(0), "{s}");
    let pushed: Vec<_> = (1..120).map(|i| m.dir.join(format!("d/f{i:03}"))).collect();
    for p in &pushed {
        assert_eq!(resident_pages(p).1, 1, "{}", p.display());
    }
    assert_resident(&pushed, paged_out);
    every_file_reads_as_hg(&m, &repo);
    // The reads found the pages: none reached the daemon, and read-ahead was never caught
    // up with.
    assert_eq!(m.stats().readahead("used"), Some(0));
    assert_eq!(m.stats().readahead("leaps"), Some(0));
    m.unmount();
}

#[test]
fn read_ahead_caught_up_by_its_reader_leaves_it_the_next_files() {
    // Each push waits 30 ms before and after it fills the pages: the reader, reading d/ in
    // order at once, comes to files read-ahead rebuilt and has not pushed yet. Read-ahead
    // then leaves the next queued files to it and goes on after them.
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo(tmp.path());
    let m = unseen_opens_mount(&repo);
    assert_eq!(
        m.control("{\"cmd\":\"debug_push_delay\",\"ms\":30}"),
        "{\"reply\":\"done\"}\n"
    );
    std::fs::read(m.dir.join("d/f000")).unwrap();
    // Both threads rebuilt a batch, and push it.
    let s = wait_for(&m, "files", 16);
    assert!(s.readahead("files").unwrap() >= 16, "{s}");
    assert_eq!(s.readahead("leaps"), Some(0), "{s}");
    let read: Vec<Vec<u8>> = (1..120)
        .map(|i| std::fs::read(m.dir.join(format!("d/f{i:03}"))).unwrap())
        .collect();
    let s = settled(&m);
    assert!(s.readahead("leaps").unwrap() >= 1, "{s}");
    assert!(s.readahead("used").unwrap() >= 1, "{s}");
    assert!(s.readahead("files").unwrap() < 119, "{s}");
    let hg = archived(&repo);
    for (i, got) in (1..120).zip(&read) {
        let name = format!("d/f{i:03}");
        assert!(
            *got == std::fs::read(hg.path().join("r0").join(&name)).unwrap(),
            "{name}"
        );
    }
    m.unmount();
}

#[test]
fn read_ahead_never_pushes_a_file_open_for_writing_or_mapped_for_writing() {
    // A push writes over the kernel's pages: a writer's descriptor (d/f010) or a dirty
    // shared mapping (d/f020) would lose what it wrote. The read lease is refused for both.
    // Files of two pages: the mapping is of the second, so that its first read is not from
    // the file's start (which would start d/'s round there).
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let tmp = tempfile::tempdir().unwrap();
    let repo = flat_repo(tmp.path(), 120, |i| {
        format!(
            "{i:07}
"
        )
        .repeat(1024)
        .into_bytes()
    });
    let m = unseen_opens_mount(&repo);
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(m.dir.join("d/f010"))
        .unwrap();
    writer.write_all_at(b"written", 100).unwrap();
    let mapped = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.dir.join("d/f020"))
        .unwrap();
    // SAFETY: a shared map of the file's second page, written and unmapped below; no
    // read-around (the fault reads that page alone).
    let map = unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            mapped.as_raw_fd(),
            4096,
        );
        assert_ne!(map, libc::MAP_FAILED);
        assert_eq!(libc::madvise(map, 4096, libc::MADV_RANDOM), 0);
        map
    };
    drop(mapped);
    // SAFETY: within the mapping.
    unsafe { std::ptr::copy_nonoverlapping(b"mapped".as_ptr(), (map as *mut u8).add(200), 6) };
    assert_eq!(m.stats().readahead("rounds"), Some(0));

    std::fs::read(m.dir.join("d/f000")).unwrap();
    let s = settled(&m);
    // d/f010 is in the overlay since its write (read ahead no more); d/f020 is not pushed.
    assert_eq!(s.readahead("files"), Some(118), "{s}");
    assert_eq!(s.readahead("pushed"), Some(117), "{s}");
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(map, 4096) };
    drop(writer);
    let want = |i: usize, at: usize, what: &[u8]| {
        let mut v = hg_cmd(&repo, &["cat", "-r", "0", &format!("d/f{i:03}")]).stdout;
        v[at..at + what.len()].copy_from_slice(what);
        v
    };
    assert!(std::fs::read(m.dir.join("d/f010")).unwrap() == want(10, 100, b"written"));
    assert!(std::fs::read(m.dir.join("d/f020")).unwrap() == want(20, 4096 + 200, b"mapped"));
    m.unmount();
    m.remount(&repo, None);
    assert!(std::fs::read(m.dir.join("d/f010")).unwrap() == want(10, 100, b"written"));
    assert!(std::fs::read(m.dir.join("d/f020")).unwrap() == want(20, 4096 + 200, b"mapped"));
}

#[test]
fn an_unmount_while_read_ahead_pushes_is_not_refused_as_busy() {
    // Each push holds a descriptor in the mount for a moment (its read lease): `revfs
    // unmount` first asks the daemon to let go of them and take no more. Here each push
    // holds its lease 100 ms (`debug_push_delay`), one after another on two threads.
    let tmp = tempfile::tempdir().unwrap();
    let repo = flat_repo(tmp.path(), 300, |i| {
        format!(
            "file {i}
"
        )
        .repeat(50)
        .into_bytes()
    });
    for round in 0..3 {
        let m = unseen_opens_mount(&repo);
        assert_eq!(
            m.control("{\"cmd\":\"debug_push_delay\",\"ms\":50}"),
            "{\"reply\":\"done\"}\n"
        );
        std::fs::read(m.dir.join("d/f000")).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(m.stats().readahead("files").unwrap() >= 1);
        let out = m.revfs(&["unmount", &m.dir.display().to_string()]);
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_daemon_killed_while_read_ahead_waits_on_its_own_mount_ends_and_frees_it() {
    // Read-ahead opens files through the mount (its read leases): an open waiting for the
    // daemon when the daemon is killed cannot be interrupted. The daemon must end all the
    // same, so that the kernel ends the connection and the mount fails instead of hanging.
    let tmp = tempfile::tempdir().unwrap();
    let repo = flat_repo(tmp.path(), 300, |i| {
        format!(
            "file {i}
"
        )
        .repeat(50)
        .into_bytes()
    });
    let m = unseen_opens_mount(&repo);
    std::fs::metadata(m.dir.join("d/f000")).unwrap();
    // Every lookup now takes 5 s: read-ahead's first open (of d/f001, not looked up yet)
    // waits in one that the daemon has taken when the daemon is killed.
    assert_eq!(
        m.control("{\"cmd\":\"debug_lookup_delay\",\"ms\":5000}"),
        "{\"reply\":\"done\"}\n"
    );
    std::fs::read(m.dir.join("d/f000")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let pid = m.daemon_pid();
    m.kill_daemon();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            Instant::now() < deadline,
            "the killed daemon did not end: {state}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    m.unmount();
}

/// Polls the daemon's stats until `key` of read-ahead reaches `want` (at most 10 s).
fn wait_for(m: &Mount, key: &str, want: u64) -> revfs_tests::mount::Stats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = m.stats();
        if s.readahead(key).unwrap_or(0) >= want || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_directories_a_reader_comes_to_next_are_read_ahead_and_pushed_before_it_does() {
    // A program reading the tree lists d0: the walk goes on in the program's order (d0's
    // subdirectories, then d1 and its own, ...), and every file it comes to is in the page
    // cache before the program reads it.
    let tmp = tempfile::tempdir().unwrap();
    let mut files: Vec<(String, Vec<u8>)> = vec![("x/one".into(), b"one\n".to_vec())];
    for d in 0..4 {
        for f in 0..5 {
            files.push((
                format!("d{d}/f{f}"),
                format!("d{d} f{f}\n").repeat(40).into_bytes(),
            ));
            for s in 0..2 {
                let body = format!("d{d} s{s} f{f}\n").repeat(40).into_bytes();
                files.push((format!("d{d}/s{s}/f{f}"), body));
            }
        }
    }
    let repo = hg_repo(tmp.path(), &files);
    let paged_out = paged_out_bytes();
    let m = unseen_opens_mount(&repo);
    std::fs::read(m.dir.join("x/one")).unwrap();
    assert_eq!(std::fs::read_dir(m.dir.join("d0")).unwrap().count(), 7);
    // The program reads d0's first two files itself (they are not pushed: its reads tell
    // the daemon that it reads the tree).
    for name in ["d0/f0", "d0/f1"] {
        assert_eq!(resident_pages(&m.dir.join(name)), (0, 1), "{name} pushed");
        std::fs::read(m.dir.join(name)).unwrap();
    }
    let s = settled(&m);
    // d0's round (the program's), and the 11 directories after it (x, whose one file was
    // read, is not walked to again).
    assert_eq!(s.readahead("walked"), Some(11), "{s}");
    assert_eq!(s.readahead("rounds"), Some(1 + 11), "{s}");
    // The program went where the walk went: it started it once, and it never paused.
    assert_eq!(s.readahead("walk_starts"), Some(1), "{s}");
    assert_eq!(s.readahead("walk_pauses"), Some(0), "{s}");
    assert_eq!(s.readahead("pushed"), Some(4 * 15 - 2), "{s}");
    let used = s.readahead("used");
    // Every pushed file's page is in the page cache before the program reads it.
    let pushed: Vec<_> = files
        .iter()
        .filter(|(n, _)| !["x/one", "d0/f0", "d0/f1"].contains(&n.as_str()))
        .collect();
    let paths: Vec<_> = pushed.iter().map(|(n, _)| m.dir.join(n)).collect();
    assert_resident(&paths, paged_out);
    for (name, data) in pushed {
        assert!(std::fs::read(m.dir.join(name)).unwrap() == *data, "{name}");
    }
    // The program's reads found the pages: none reached the daemon for a text read ahead.
    assert_eq!(m.stats().readahead("used"), used);
}

#[test]
fn with_opens_not_seen_the_lease_helper_lists_each_directory_once_before_its_leases() {
    // Read-ahead comes to d0's subdirectories and to d1..d3 before the program lists them:
    // the lease helper lists each once (its entries then open without a lookup each),
    // however many batches of leases it takes there; d0, which the program listed, it
    // lists from the kernel's cache (when the kernel kept it), which the daemon does not
    // see.
    let tmp = tempfile::tempdir().unwrap();
    let mut files: Vec<(String, Vec<u8>)> = vec![("x/one".into(), b"one\n".to_vec())];
    for d in 0..4 {
        for f in 0..20 {
            files.push((format!("d{d}/f{f:02}"), format!("d{d} f{f}\n").into_bytes()));
            for s in 0..2 {
                let body = format!("d{d} s{s} f{f}\n").into_bytes();
                files.push((format!("d{d}/s{s}/f{f:02}"), body));
            }
        }
    }
    let repo = hg_repo(tmp.path(), &files);
    let m = unseen_opens_mount(&repo);
    std::fs::read(m.dir.join("x/one")).unwrap();
    assert_eq!(std::fs::read_dir(m.dir.join("d0")).unwrap().count(), 22);
    for name in ["d0/f00", "d0/f01"] {
        std::fs::read(m.dir.join(name)).unwrap();
    }
    let s = settled(&m);
    assert_eq!(s.readahead("walked"), Some(11), "{s}");
    assert_eq!(s.readahead("pushed"), Some(4 * 60 - 2), "{s}");
    // 11, and d0 once more when the kernel did not keep the program's listing of it.
    let listings = s.get("lease_listings");
    assert!((11..=12).contains(&listings), "{s}");
    // The program's own listings still reach the daemon, and find every file.
    for d in 0..4 {
        for sub in ["", "/s0", "/s1"] {
            let dir = m.dir.join(format!("d{d}{sub}"));
            let n = std::fs::read_dir(&dir).unwrap().count();
            assert_eq!(n, if sub.is_empty() { 22 } else { 20 }, "{dir:?}");
        }
    }
    for (name, data) in &files {
        assert!(std::fs::read(m.dir.join(name)).unwrap() == *data, "{name}");
    }
    assert_eq!(m.stats().get("lease_listings"), listings);
}

#[test]
fn a_walk_that_starts_over_reads_nothing_again_that_it_read_ahead_lately() {
    // A program reads d0 (the walk goes to d1, d2, d3), then another reads a/, before d0:
    // the walk starts over from a/ and comes to d1..d3 again, which it leaves alone.
    let tmp = tempfile::tempdir().unwrap();
    let files = tree_files(&[("a/1", b"a1\n"), ("a/2", b"a2\n")], 4, 5, false);
    let repo = hg_repo(tmp.path(), &files);
    let m = unseen_opens_mount(&repo);
    std::fs::read(m.dir.join("x/one")).unwrap();
    list_then_read(&m, "d0", 5, &["d0/f0", "d0/f1"]);
    let first = settled(&m);
    assert_eq!(first.readahead("walked"), Some(3), "{first}");
    // A read reaches the daemon again (a program reads), then a/ is listed and read.
    evict(&m.dir.join("x/one"));
    std::fs::read(m.dir.join("x/one")).unwrap();
    list_then_read(&m, "a", 2, &["a/1", "a/2"]);
    let s = settled(&m);
    assert_eq!(s.readahead("walked"), Some(3), "{s}");
    let files_before = first.readahead("files").unwrap();
    assert!(
        s.readahead("files").unwrap() <= files_before + 2,
        "{first}\n{s}"
    );
    for (name, data) in &files {
        assert!(std::fs::read(m.dir.join(name)).unwrap() == *data, "{name}");
    }
}

#[test]
fn a_walk_its_program_does_not_follow_pauses_and_each_directory_still_gets_its_round() {
    // A program reads d5, d4, d3, d2 in that order (rg's parallel walk, or two programs,
    // do not go where the walk goes, in listing order): each directory it lists is one
    // the walk had not come to, and starts it again. Three in a row pause the walk; each
    // directory the program lists still has its files read ahead.
    let tmp = tempfile::tempdir().unwrap();
    let files = tree_files(&[], 6, 5, false);
    let repo = hg_repo(tmp.path(), &files);
    let m = unseen_opens_mount(&repo);
    std::fs::read(m.dir.join("x/one")).unwrap();
    for d in ["d5", "d4", "d3", "d2"] {
        let (f0, f1) = (format!("{d}/f0"), format!("{d}/f1"));
        list_then_read(&m, d, 5, &[&f0, &f1]);
        settled(&m);
    }
    let s = settled(&m);
    assert_eq!(s.readahead("walk_starts"), Some(3), "{s}");
    assert_eq!(s.readahead("walk_reaches"), Some(0), "{s}");
    assert_eq!(s.readahead("walk_pauses"), Some(1), "{s}");
    // The rounds of the four directories the program listed (the walk from d5 and d4
    // came to no directory the program had not had read ahead: x was read, d5 listed).
    assert_eq!(s.readahead("rounds"), Some(4), "{s}");
    assert_eq!(s.readahead("walked"), Some(0), "{s}");
    for (name, data) in &files {
        assert!(std::fs::read(m.dir.join(name)).unwrap() == *data, "{name}");
    }
}

#[test]
fn a_program_that_lists_directories_while_others_read_files_starts_no_walk() {
    // `make`: it lists a directory and reads its Makefile while its compilers (other
    // threads) read files; the directory's files are read ahead, the rest of the tree is
    // not.
    let tmp = tempfile::tempdir().unwrap();
    let files = tree_files(&[], 4, 5, false);
    let repo = hg_repo(tmp.path(), &files);
    let m = unseen_opens_mount(&repo);
    let in_another_thread = |names: &'static [&'static str]| {
        let dir = m.dir.clone();
        std::thread::spawn(move || {
            for name in names {
                std::fs::read(dir.join(name)).unwrap();
            }
        })
        .join()
        .unwrap();
    };
    in_another_thread(&["x/one"]);
    list_then_read(&m, "d0", 5, &["d0/f0"]);
    in_another_thread(&["d0/f2", "d0/f3"]);
    let s = settled(&m);
    assert_eq!(s.readahead("walked"), Some(0), "{s}");
    assert_eq!(s.readahead("rounds"), Some(1), "{s}");
    // The same program reading a second file of the directory it listed reads the tree.
    std::fs::read(m.dir.join("d0/f1")).unwrap();
    let s = settled(&m);
    assert_eq!(s.readahead("walked"), Some(3), "{s}");
    for (name, data) in &files {
        assert!(std::fs::read(m.dir.join(name)).unwrap() == *data, "{name}");
    }
}

#[test]
fn the_walk_goes_only_so_far_past_the_last_directory_the_program_listed() {
    // 40 directories of 150 files: the walk queues up to 4,096 files past the directory
    // the program was last seen listing, a directory at a time.
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &tree_files(&[], 40, 150, true));
    let m = unseen_opens_mount(&repo);
    std::fs::read(m.dir.join("x/one")).unwrap();
    assert_eq!(std::fs::read_dir(m.dir.join("d00")).unwrap().count(), 150);
    // No walk until the program reads files of the directory it listed.
    let s = settled(&m);
    assert_eq!(s.readahead("walked"), Some(0), "{s}");
    for name in ["d00/f000", "d00/f001"] {
        std::fs::read(m.dir.join(name)).unwrap();
    }
    // d01 to d28: 4,200 files (the walk stops once 4,096 are queued).
    let s = wait_for(&m, "walked", 28);
    assert_eq!(s.readahead("walked"), Some(28), "{s}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(m.stats().readahead("walked"), Some(28));
    // The program lists d05, 600 files into the walk: 4 directories more.
    assert_eq!(std::fs::read_dir(m.dir.join("d05")).unwrap().count(), 150);
    let s = settled(&m);
    assert_eq!(s.readahead("walked"), Some(32), "{s}");
    // d00 (all its files: its round read them ahead before the program read its first
    // two), and the 32 directories walked.
    assert_eq!(s.readahead("files"), Some(33 * 150), "{s}");
}
