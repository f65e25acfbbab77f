//! Big files read as fast as they decode: a store file's text is rebuilt once (into the
//! on-disk text cache of the state directory), not once per read request, and the daemon's
//! memory does not grow with the file. Every read is compared byte for byte with `hg cat`:
//! sequential, at random offsets, by several readers at once, for files around the cache's
//! limits and bigger than its whole budget, with zlib and zstd, along a long delta chain,
//! through a copy (a metadata header). An open reader keeps its revision across an update;
//! the cache survives kill -9 and is never used for another revision.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_ok, Rng};
use std::os::unix::fs::FileExt;
use std::path::Path;

const MB: usize = 1 << 20;
/// Where the daemon switches to the on-disk text cache (vfs/src/content.rs).
const BIG_TEXT: usize = 4 << 20;

/// `len` bytes of text: lines of hex (so that hg's line deltas stay small).
fn text(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    while out.len() < len {
        out.extend_from_slice(
            format!("{:016x} {:016x}\n", rng.next_u64(), rng.next_u64()).as_bytes(),
        );
    }
    out.truncate(len);
    out
}

/// Changes a few lines of `t` in place.
fn edit(rng: &mut Rng, t: &mut [u8]) {
    for _ in 0..8 {
        let at = rng.below(t.len().saturating_sub(40)) / 34 * 34;
        let new = format!("{:016x}", rng.next_u64());
        t[at..at + 16].copy_from_slice(new.as_bytes());
    }
}

fn hg_cat(repo: &Path, rev: &str, path: &str) -> Vec<u8> {
    let out = hg_cmd(repo, &["cat", "-r", rev, path]);
    assert!(out.status.success(), "hg cat {path}");
    out.stdout
}

/// A repository compressed with `compression`: files just below and just above the big
/// text limit, a 12 MiB file with a chain of 20 revisions, and a copy of the big one.
fn make_repo(dir: &Path, compression: &str) -> std::path::PathBuf {
    let repo = dir.join(format!("repo-{compression}"));
    hg_ok(
        dir,
        &[
            "init",
            "--config",
            &format!("format.revlog-compression={compression}"),
            repo.to_str().unwrap(),
        ],
    );
    let mut rng = Rng::new(0x51 + compression.len() as u64);
    std::fs::create_dir_all(repo.join("around")).unwrap();
    std::fs::create_dir_all(repo.join("big")).unwrap();
    std::fs::write(repo.join("around/below.txt"), text(&mut rng, BIG_TEXT - 1)).unwrap();
    std::fs::write(repo.join("around/above.txt"), text(&mut rng, BIG_TEXT + 1)).unwrap();
    let mut chain = text(&mut rng, 12 * MB);
    std::fs::write(repo.join("big/chain.txt"), &chain).unwrap();
    hg_ok(&repo, &["commit", "-qAm", "r0", "-d", "0 0"]);
    for r in 1..20 {
        edit(&mut rng, &mut chain);
        std::fs::write(repo.join("big/chain.txt"), &chain).unwrap();
        hg_ok(&repo, &["commit", "-qm", &format!("r{r}"), "-d", "0 0"]);
    }
    hg_ok(&repo, &["copy", "around/above.txt", "big/copied.txt"]);
    hg_ok(&repo, &["commit", "-qm", "copy", "-d", "0 0"]);
    repo
}

/// Lines of the daemon's log that say a text was rebuilt into the cache for `file`.
fn rebuilds(m: &Mount, file: &str) -> usize {
    m.log()
        .lines()
        .filter(|l| l.contains("text cache: rebuilt") && l.contains(&format!("file={file} ")))
        .count()
}

#[test]
fn big_files_read_byte_exact_sequentially_at_random_and_by_several_readers() {
    let tmp = tempfile::tempdir().unwrap();
    for compression in ["zlib", "zstd"] {
        let repo = make_repo(tmp.path(), compression);
        // A small memory cache, and an on-disk budget smaller than the 12 MiB file.
        let m = Mount::with_config(
            &repo,
            "[store]\ntext_cache_size = \"2 MiB\"\nbig_text_cache_size = \"8 MiB\"\n",
        );
        let files = [
            "around/below.txt",
            "around/above.txt",
            "big/chain.txt",
            "big/copied.txt",
        ];
        let mut rng = Rng::new(7);
        for f in files {
            let want = hg_cat(&repo, "tip", f);
            let got = std::fs::read(m.dir.join(f)).unwrap();
            assert!(got == want, "{compression} {f}: sequential read differs");
            let fh = std::fs::File::open(m.dir.join(f)).unwrap();
            for _ in 0..100 {
                let off = rng.below(want.len() + 10);
                let len = 1 + rng.below(300_000);
                let mut buf = vec![0u8; len];
                let n = fh.read_at(&mut buf, off as u64).unwrap();
                let end = (off + len).min(want.len());
                let expect = want.get(off..end).unwrap_or(&[]);
                assert!(
                    &buf[..n] == expect,
                    "{compression} {f}: {len} bytes at {off}"
                );
            }
        }
        // Four readers of the chain file at once, in different orders.
        let want = hg_cat(&repo, "tip", "big/chain.txt");
        std::thread::scope(|s| {
            for k in 0..4u64 {
                let (dir, want) = (&m.dir, &want);
                s.spawn(move || {
                    let fh = std::fs::File::open(dir.join("big/chain.txt")).unwrap();
                    let mut rng = Rng::new(k + 100);
                    let block = 128 << 10;
                    let blocks = want.len().div_ceil(block);
                    for i in 0..blocks {
                        let b = match k {
                            0 => i,
                            1 => blocks - 1 - i,
                            _ => rng.below(blocks),
                        };
                        let mut buf = vec![0u8; block];
                        let n = fh.read_at(&mut buf, (b * block) as u64).unwrap();
                        let end = ((b + 1) * block).min(want.len());
                        assert!(buf[..n] == want[b * block..end], "reader {k} block {b}");
                    }
                });
            }
        });
        // Each big text was rebuilt once, whatever the number of reads; the small ones never.
        for f in ["around/above.txt", "big/chain.txt", "big/copied.txt"] {
            assert_eq!(rebuilds(&m, f), 1, "{compression} {f}:\n{}", m.log());
        }
        assert_eq!(rebuilds(&m, "around/below.txt"), 0);
        // An older revision along the chain, through an update.
        let out = m.revfs(&["update", "-R", m.dir.to_str().unwrap(), "-r", "5"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = std::fs::read(m.dir.join("big/chain.txt")).unwrap();
        assert!(
            got == hg_cat(&repo, "5", "big/chain.txt"),
            "{compression}: rev 5"
        );
        m.unmount();
    }
}

#[test]
fn an_open_reader_keeps_its_revision_across_an_update() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    hg_ok(tmp.path(), &["init", "repo"]);
    let mut rng = Rng::new(3);
    for (r, (big, small)) in [(6 * MB, 100_000), (6 * MB + 1000, 90_000)]
        .into_iter()
        .enumerate()
    {
        std::fs::write(repo.join("big.txt"), text(&mut rng, big)).unwrap();
        std::fs::write(repo.join("small.txt"), text(&mut rng, small)).unwrap();
        hg_ok(&repo, &["commit", "-qAm", &format!("r{r}"), "-d", "0 0"]);
    }
    let m = Mount::new(&repo, Some("1"));
    let mnt = m.dir.to_str().unwrap().to_owned();
    for f in ["big.txt", "small.txt"] {
        let (r1, r0) = (hg_cat(&repo, "1", f), hg_cat(&repo, "0", f));
        let fh = std::fs::File::open(m.dir.join(f)).unwrap();
        let half = r1.len() / 2;
        let mut first = vec![0u8; half];
        fh.read_exact_at(&mut first, 0).unwrap();
        let out = m.revfs(&["update", "-R", &mnt, "-r", "0"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The rest through the same descriptor: still revision 1, never a mix.
        let mut rest = Vec::new();
        let mut off = half as u64;
        loop {
            let mut buf = vec![0u8; 1 << 20];
            let n = fh.read_at(&mut buf, off).unwrap();
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&buf[..n]);
            off += n as u64;
        }
        first.extend_from_slice(&rest);
        assert!(first == r1, "{f}: the open reader saw a mix");
        // A new open reads revision 0.
        assert!(std::fs::read(m.dir.join(f)).unwrap() == r0, "{f}: new open");
        let out = m.revfs(&["update", "-R", &mnt, "-r", "1"]);
        assert!(out.status.success());
    }
    m.unmount();
}

#[test]
fn the_text_cache_survives_kill_9_and_never_serves_another_revision() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    hg_ok(tmp.path(), &["init", "repo"]);
    let mut rng = Rng::new(11);
    std::fs::write(repo.join("a.txt"), text(&mut rng, 5 * MB)).unwrap();
    std::fs::write(repo.join("b.txt"), text(&mut rng, 5 * MB + 7)).unwrap();
    hg_ok(&repo, &["commit", "-qAm", "r0", "-d", "0 0"]);
    let (a, b) = (hg_cat(&repo, "0", "a.txt"), hg_cat(&repo, "0", "b.txt"));
    let m = Mount::new(&repo, None);
    assert!(std::fs::read(m.dir.join("a.txt")).unwrap() == a);
    assert!(std::fs::read(m.dir.join("b.txt")).unwrap() == b);
    assert_eq!((rebuilds(&m, "a.txt"), rebuilds(&m, "b.txt")), (1, 1));
    let kill = std::process::Command::new("kill")
        .args(["-9", &m.daemon_pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let _ = std::process::Command::new("fusermount3")
        .arg("-uz")
        .arg(&m.dir)
        .status();
    m.remount(&repo, None);
    assert!(std::fs::read(m.dir.join("a.txt")).unwrap() == a);
    assert_eq!(
        rebuilds(&m, "a.txt"),
        1,
        "rebuilt after a remount:\n{}",
        m.log()
    );
    m.unmount();
    // An entry that holds another revision than its name says is dropped, never served.
    let texts = m.state_dir().join("texts");
    let names: Vec<_> = std::fs::read_dir(&texts)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    std::fs::copy(&names[0], &names[1]).unwrap();
    m.remount(&repo, None);
    assert!(std::fs::read(m.dir.join("a.txt")).unwrap() == a);
    assert!(std::fs::read(m.dir.join("b.txt")).unwrap() == b);
    assert_eq!(rebuilds(&m, "a.txt") + rebuilds(&m, "b.txt"), 3);
    m.unmount();
}

/// The daemon's anonymous resident memory now (its heap and stacks: not the revlogs and
/// cache files it maps, which are page cache and which the kernel maps in folios of
/// varying size), in bytes; 0 once it is gone.
fn anon_rss(pid: i32) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    kb * 1024
}

/// Samples the daemon's anonymous memory every 2 ms until dropped: its peak
/// ([`AnonPeak::peak`]).
struct AnonPeak {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    peak: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl AnonPeak {
    fn start(pid: i32) -> AnonPeak {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(anon_rss(pid)));
        let (s, p) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(anon_rss(pid), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        AnonPeak { stop, peak }
    }

    fn peak(&self) -> u64 {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for AnonPeak {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn memory_does_not_grow_with_the_file_reading_copying_up_and_comparing() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    hg_ok(tmp.path(), &["init", "repo"]);
    let mut rng = Rng::new(5);
    let size = revfs_tests::env_or("REVFS_BIG_FILE_MB", 48) * MB;
    std::fs::write(repo.join("huge.txt"), text(&mut rng, size)).unwrap();
    hg_ok(&repo, &["commit", "-qAm", "r0", "-d", "0 0"]);
    let want = hg_cat(&repo, "0", "huge.txt");
    let m = Mount::new(&repo, None);
    let pid = m.daemon_pid();
    // What the mount allocates (a debug build takes its time) is not the file's: the
    // baseline is taken once the daemon's memory has not moved for 300 ms.
    let mut before = anon_rss(pid);
    let (mut still, deadline) = (
        0,
        std::time::Instant::now() + std::time::Duration::from_secs(10),
    );
    while still < 6 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = anon_rss(pid);
        still = if now == before { still + 1 } else { 0 };
        before = now;
    }
    let sampler = AnonPeak::start(pid);
    assert!(std::fs::read(m.dir.join("huge.txt")).unwrap() == want);
    // A write in the middle copies the file up, from the cache, in blocks.
    let fh = std::fs::OpenOptions::new()
        .write(true)
        .open(m.dir.join("huge.txt"))
        .unwrap();
    fh.write_all_at(b"X", (size / 2) as u64).unwrap();
    let mnt = m.dir.to_str().unwrap().to_owned();
    let st = m.revfs(&["status", "-R", &mnt]);
    assert_eq!(String::from_utf8_lossy(&st.stdout), "M huge.txt\n");
    // Written back: status compares the whole content with the store's, and finds it clean.
    fh.write_all_at(&want[size / 2..size / 2 + 1], (size / 2) as u64)
        .unwrap();
    let st = m.revfs(&["status", "-R", &mnt]);
    assert_eq!(String::from_utf8_lossy(&st.stdout), "");
    let grown = sampler.peak().max(anon_rss(pid)).saturating_sub(before);
    eprintln!(
        "daemon peak memory: {} MiB before, +{} MiB after reading, copying up and comparing a {} MiB file",
        before >> 20,
        grown >> 20,
        size >> 20
    );
    assert!(
        grown < (size / 2) as u64,
        "the daemon's peak memory grew by {} MiB for a {} MiB file",
        grown >> 20,
        size >> 20
    );
    assert_eq!(rebuilds(&m, "huge.txt"), 1);
    drop(fh);
    m.unmount();
}
