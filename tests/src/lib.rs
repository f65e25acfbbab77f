//! Shared helpers for the end-to-end tests: building fixture repositories with real hg,
//! talking to hg through its command server (one process, many commands), running the
//! `revfs` binary, and comparing results byte for byte.

pub mod chg;
pub mod doc;
pub mod hg;
pub mod lazy;
pub mod mount;
pub mod reclaim;
pub mod served;
pub mod waits;
pub mod watch;
pub mod watchdog;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives inside the workspace")
        .to_path_buf()
}

/// The Rust sources below `dir` (every `.rs` file, recursively), sorted.
pub fn rust_sources(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir)
            .expect("a source directory")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// Which revisions the every-revision tests check of a fixture in a format other than the
/// default one (zlib, legacy delta chains, no fncache, no store): every Nth and the tip,
/// N = `REVFS_FORMAT_REV_STEP` (3 in CI; tests/long.sh runs 1). The default format's
/// fixture is read at every revision.
pub fn format_rev_step() -> usize {
    env_or("REVFS_FORMAT_REV_STEP", 3usize).max(1)
}

/// Which revisions the every-revision mount tests mount of a history fixture (an update,
/// a mount and a walk each): every Nth and the tip, N = `REVFS_MOUNT_REV_STEP` (8 in CI;
/// tests/long.sh runs 1). store_vs_hg reads the same fixtures' revisions through the
/// store, every one or every `format_rev_step()`th.
pub fn mount_rev_step() -> usize {
    env_or("REVFS_MOUNT_REV_STEP", 8usize).max(1)
}

/// The `revfs` binary built in the same profile as the running test.
pub fn revfs_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    // target/<profile>/deps/<test> -> target/<profile>/revfs; a program of this package
    // (the soak) is target/<profile>/<program> itself.
    let dir = exe.parent().expect("test binary inside target/<profile>");
    let dir = if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent()
            .expect("test binary inside target/<profile>/deps")
    } else {
        dir
    };
    let bin = dir.join("revfs");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --workspace` before the tests (see README)",
        bin.display()
    );
    bin
}

/// The environment every hg and revfs process gets: no user configuration, fixed encoding.
pub fn hg_env(cmd: &mut Command) -> &mut Command {
    cmd.env("HGPLAIN", "1")
        .env("HGRCPATH", "")
        .env("HGENCODING", "utf-8")
        .env("LC_ALL", "C.UTF-8")
        .env("HGUSER", "revfs tests <tests@example.org>")
        // No revfs configuration of the person running the tests.
        .env("REVFS_CONFIG", "")
        .env_remove("HGEDITOR")
}

/// Runs `revfs ARGS` in `dir`.
pub fn revfs(dir: &Path, args: &[&str]) -> Output {
    hg_env(Command::new(revfs_bin()).args(args).current_dir(dir))
        .output()
        .expect("spawn revfs")
}

/// Runs `hg ARGS` in `dir` as a separate process (through chg outside every mount: see chg).
pub fn hg_cmd(dir: &Path, args: &[&str]) -> Output {
    chg::hg_command(dir, args)
        .output()
        .expect("spawn hg (is mercurial installed?)")
}

/// Runs plain `hg ARGS` in `dir`, never chg: for what needs hg to be one process (under
/// chg a hook's shell is the chg client's child, not the worker's, which outlives it).
pub fn hg_plain_cmd(dir: &Path, args: &[&str]) -> Output {
    hg_env(Command::new("hg").args(args).current_dir(dir))
        .output()
        .expect("spawn hg (is mercurial installed?)")
}

/// Runs `hg ARGS` in `dir`, asserting success (hg's output in the message); its output.
pub fn hg_ok(dir: &Path, args: &[&str]) -> String {
    let out = hg_cmd(dir, args);
    assert!(
        out.status.success(),
        "hg {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `data` to `root/path`, making its directories.
pub fn write_file(root: &Path, path: &str, data: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().expect("a path in a directory")).expect("mkdir -p");
    std::fs::write(&p, data).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

/// `hg archive -r REV` of `repo` into `dest` (no `.hg_archival.txt`): revision `rev` as hg
/// checks it out, to compare a mount with. Panics with hg's error if it fails.
pub fn hg_archive(repo: &Path, rev: &str, dest: &Path) {
    let dest = dest.display().to_string();
    let args = [
        "archive",
        "-r",
        rev,
        "--config",
        "ui.archivemeta=false",
        &dest,
    ];
    let out = hg_cmd(repo, &args);
    assert!(
        out.status.success(),
        "hg archive: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository `dir/repo` made with hg, with one commit of `files` (path, content).
pub fn hg_repo<P: AsRef<str>, C: AsRef<[u8]>>(dir: &Path, files: &[(P, C)]) -> PathBuf {
    let repo = dir.join("repo");
    assert!(hg_cmd(dir, &["init", "repo"]).status.success(), "hg init");
    for (path, content) in files {
        let p = repo.join(path.as_ref());
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content.as_ref()).expect("write");
    }
    assert!(
        hg_cmd(&repo, &["commit", "-qAm", "base"]).status.success(),
        "hg commit"
    );
    repo
}

/// The directory holding the fixture repositories, built once per test run by
/// `tests/fixtures/make_fixtures.py` (it skips repositories that are already complete).
pub fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dest = workspace().join("target").join("fixtures");
        let script = workspace().join("tests/fixtures/make_fixtures.py");
        let status = Command::new("/usr/bin/python3")
            .arg(&script)
            .arg(&dest)
            .status()
            .expect("run make_fixtures.py");
        assert!(status.success(), "building fixtures failed");
        dest
    })
}

/// A temporary directory in memory (`/dev/shm`) when there is one: tests that write
/// thousands of small files run several times faster there than on disk.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new()
            .prefix("revfs-test")
            .tempdir_in(shm)
        {
            return dir;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

/// A fresh copy of fixture `name` in a temporary directory, for tests that damage it.
pub fn fixture_copy(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let status = Command::new("cp")
        .arg("-a")
        .arg(fixtures().join(name))
        .arg(tmp.path().join("repo"))
        .status()
        .expect("cp");
    assert!(status.success());
    tmp
}

/// Lists every regular file under `dir` (relative paths, sorted), skipping `.hg`.
pub fn tree_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".hg") {
                continue;
            }
            let ft = e.file_type().expect("file type");
            if ft.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).expect("under base").to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The machine's possible CPUs (`/sys/devices/system/cpu/possible`): the kernel's FUSE
/// queues for io_uring, two rings each in a mount.
pub fn possible_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").expect("cpu list");
    text.trim()
        .split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// xorshift64*: small, deterministic, good enough to choose operations in property tests
/// (a failing seed replays exactly).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        if v.is_empty() {
            None
        } else {
            Some(&v[self.below(v.len())])
        }
    }
    /// `n` pieces chosen at random, one after the other.
    pub fn concat(&mut self, pieces: &[&[u8]], n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|_| pieces[self.below(pieces.len())].to_vec())
            .collect()
    }
}

/// A number from environment variable `name` (a test's size or seed), or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The small tree the hg-in-a-mount tests start from (hg_in_mount.rs, hg_versions.rs):
/// nested directories, a C file, a name with a space, an `.hgignore`, and a file to remove.
pub const HG_SIDES_BASE: &[(&str, &str)] = &[
    ("a", "a\n"),
    ("b.c", "int b;\n"),
    ("d/f", "f\n"),
    ("d/g", "g\n"),
    ("d/sub/h", "h\n"),
    ("e/x", "x\n"),
    ("gone", "gone\n"),
    ("x y", "space\n"),
    (".hgignore", "syntax: glob\n*.o\nbuild\n"),
];
