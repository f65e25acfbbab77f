//! Progress bars and `revfs prefetch`.
//!
//! * A commit of 10,000 modified files run on a pseudo-terminal (`script -qc`) draws a
//!   progress bar on it; the same command with stderr in a file writes no control
//!   character at all (and neither does an update across those 10,000 changes).
//! * `revfs prefetch` reads the matched files of a revision through the daemon; the files
//!   read through the mount afterwards are hg's; unmatched arguments give `hg cat`'s
//!   messages and exit code.

use revfs_tests::mount::{snapshot, Mount};
use revfs_tests::{fixtures, hg_cmd, hg_env, revfs_bin, scratch_dir};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Control characters other than newline and tab (the bar's `\r` and escapes among them).
fn control_chars(b: &[u8]) -> Vec<u8> {
    b.iter()
        .copied()
        .filter(|&c| matches!(c, 0x00..=0x08 | 0x0b..=0x1f | 0x7f))
        .collect()
}

const FILES: usize = 10_000;

fn make_repo(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    assert!(hg_cmd(dir, &["init", "repo"]).status.success());
    for i in 0..FILES {
        let p = repo.join(format!("d{}/s{}/f{i}.txt", i % 40, i % 7));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("file {i}\nline\nline\n")).unwrap();
    }
    let out = hg_cmd(&repo, &["commit", "-qAm", "base", "-d", "0 0"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    repo
}

/// Appends a line to every file, through the mount.
fn touch_all(root: &Path, round: usize) {
    use std::io::Write;
    for i in 0..FILES {
        let p = root.join(format!("d{}/s{}/f{i}.txt", i % 40, i % 7));
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        writeln!(f, "round {round}").unwrap();
    }
}

/// The environment of an interactive user: no HGPLAIN (it turns progress off, as in hg),
/// and hg's `progress.delay` at 0 so that the bar shows however fast the machine is.
fn interactive<'a>(cmd: &'a mut Command, m: &Mount) -> &'a mut Command {
    let rc = m.state_root.with_file_name("hgrc-progress");
    std::fs::write(&rc, "[progress]\ndelay = 0\n").unwrap();
    hg_env(cmd)
        .env_remove("HGPLAIN")
        .env("HGRCPATH", rc)
        .env("TERM", "xterm")
        .env("REVFS_STATE_DIR", &m.state_root)
}

/// `revfs ARGS` on a pseudo-terminal: what the terminal showed (stdout and stderr).
fn on_terminal(m: &Mount, args: &str) -> Output {
    let line = format!("{} -R '{}' {args}", revfs_bin().display(), m.dir.display());
    interactive(Command::new("script").args(["-qec", &line, "/dev/null"]), m)
        .stdin(Stdio::null())
        .output()
        .expect("spawn script (util-linux)")
}

/// `revfs ARGS` with stderr in a file: (output, what stderr got).
fn to_file(m: &Mount, args: &[&str], err: &Path) -> (Output, Vec<u8>) {
    let file = std::fs::File::create(err).unwrap();
    let mut full = vec!["-R", m.dir.to_str().unwrap()];
    full.extend_from_slice(args);
    let out = interactive(Command::new(revfs_bin()).args(&full), m)
        .stderr(file)
        .output()
        .expect("spawn revfs");
    (out, std::fs::read(err).unwrap())
}

fn tip_files(repo: &Path) -> usize {
    let out = hg_cmd(repo, &["log", "-r", "tip", "-T", "{files|count}"]);
    s(&out.stdout).trim().parse().unwrap()
}

#[test]
fn a_big_commit_shows_progress_on_a_terminal_and_nothing_in_a_file() {
    let t0 = Instant::now();
    let tmp = scratch_dir();
    let repo = make_repo(tmp.path());
    let m = Mount::new(&repo, None);
    let t_setup = t0.elapsed();

    touch_all(&m.dir, 1);
    let t = Instant::now();
    let term = on_terminal(&m, "commit -m 'round 1' -d '1 0'");
    let t_pty = t.elapsed();
    assert!(term.status.success(), "{}", s(&term.stdout));
    assert_eq!(tip_files(&repo), FILES, "the commit has every file");
    let shown = s(&term.stdout);
    // indicatif redraws with a carriage return and an erase-line escape, and names the
    // phases the daemon reports.
    assert!(
        shown.contains("\r\x1b[2K") && shown.contains("/10000"),
        "no progress bar on the terminal:\n{shown:?}"
    );
    assert!(
        ["checking", "reading", "writing", "finishing"]
            .iter()
            .any(|p| shown.contains(p)),
        "{shown:?}"
    );
    // The bar is cleared at the end: the last thing on the terminal erases its line.
    assert!(shown.ends_with("\x1b[2K"), "{shown:?}");

    touch_all(&m.dir, 2);
    let t = Instant::now();
    let (out, err) = to_file(
        &m,
        &["commit", "-m", "round 2", "-d", "2 0"],
        &tmp.path().join("err"),
    );
    let t_file = t.elapsed();
    assert!(out.status.success(), "{}", s(&err));
    assert_eq!(tip_files(&repo), FILES);
    assert_eq!(control_chars(&err), b"", "stderr: {:?}", s(&err));
    assert_eq!(
        control_chars(&out.stdout),
        b"",
        "stdout: {:?}",
        s(&out.stdout)
    );
    assert!(err.is_empty(), "{:?}", s(&err));

    // An update across the 10,000 changes, stderr in a file: nothing but hg's line.
    let (out, err) = to_file(&m, &["update", "-r", "0"], &tmp.path().join("err2"));
    assert!(out.status.success(), "{}", s(&err));
    assert_eq!(
        s(&out.stdout),
        "10000 files updated, 0 files merged, 0 files removed, 0 files unresolved\n"
    );
    assert_eq!(control_chars(&err), b"", "stderr: {:?}", s(&err));
    assert!(err.is_empty(), "{:?}", s(&err));
    // On a terminal, an update prints hg's line (and a bar only if it were slow).
    let term = on_terminal(&m, "update -r tip");
    assert!(term.status.success(), "{}", s(&term.stdout));
    assert!(
        s(&term.stdout).ends_with(
            "10000 files updated, 0 files merged, 0 files removed, 0 files unresolved\r\n"
        ),
        "{:?}",
        s(&term.stdout)
    );
    eprintln!(
        "setup {t_setup:?}, commit on a terminal {t_pty:?}, commit to a file {t_file:?}, total {:?}",
        t0.elapsed()
    );
}

fn revfs_in(m: &Mount, dir: &Path, args: &[&str]) -> Output {
    hg_env(Command::new(revfs_bin()).args(args))
        .env("REVFS_STATE_DIR", &m.state_root)
        .current_dir(dir)
        .output()
        .expect("spawn revfs")
}

fn manifest_len(repo: &Path, rev: &str) -> usize {
    let out = hg_cmd(repo, &["files", "-r", rev]);
    s(&out.stdout).lines().count()
}

#[test]
fn prefetch_reads_what_hg_has_and_reports_like_hg_cat() {
    let repo = fixtures().join("history");
    let m = Mount::new(&repo, Some("tip"));
    let tmp = scratch_dir();

    // Everything of the parent.
    let out = revfs_in(&m, &m.dir, &["prefetch", "glob:**"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(s(&out.stderr), "");
    let line = s(&out.stdout);
    let n = manifest_len(&repo, "tip");
    assert!(
        line.starts_with(&format!("prefetched {n} files (")) && line.ends_with(" s\n"),
        "{line:?}"
    );
    assert_eq!(line.lines().count(), 1);
    assert_eq!(control_chars(line.as_bytes()), b"");

    // The files read through the mount afterwards are hg's.
    let archive = tmp.path().join("archive");
    revfs_tests::hg_archive(&repo, "tip", &archive);
    assert!(
        snapshot(&m.dir) == snapshot(&archive),
        "the mount differs from hg archive"
    );

    // Another revision, a directory from a subdirectory, quiet.
    let out = revfs_in(&m, &m.dir, &["prefetch", "-r", "0", "."]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    let n0 = manifest_len(&repo, "0");
    assert!(
        s(&out.stdout).starts_with(&format!("prefetched {n0} files (")),
        "{}",
        s(&out.stdout)
    );
    let sub = m.dir.join("Dir");
    let out = revfs_in(&m, &sub, &["prefetch", "-q", "."]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(s(&out.stdout), "");
    assert_eq!(s(&out.stderr), "");

    // Nothing matched: hg cat's message for a file argument, exit code 1; a pattern that
    // matches nothing says nothing, also 1.
    for args in [
        &["nonexistent"][..],
        &["glob:*.nomatch"],
        &["nonexistent", "no/such/dir"],
        &["Dir", "nonexistent"],
    ] {
        let mut ours_args = vec!["prefetch", "-r", "tip"];
        ours_args.extend_from_slice(args);
        let ours = revfs_in(&m, &m.dir, &ours_args);
        let mut hg_args = vec!["cat", "-r", "tip", "-o", "/dev/null"];
        hg_args.extend_from_slice(args);
        let theirs = hg_cmd(&repo, &hg_args);
        assert_eq!(
            ours.status.code(),
            theirs.status.code(),
            "{args:?}: {} / {}",
            s(&ours.stderr),
            s(&theirs.stderr)
        );
        assert_eq!(s(&ours.stderr), s(&theirs.stderr), "{args:?}");
        if !theirs.status.success() {
            assert_eq!(s(&ours.stdout), "", "{args:?}");
        }
    }

    // Outside a mount: hg's abort.
    let out = revfs_in(
        &m,
        tmp.path(),
        &["-R", repo.to_str().unwrap(), "prefetch", "x"],
    );
    assert_eq!(out.status.code(), Some(255));
    assert!(s(&out.stderr).starts_with("abort: "), "{}", s(&out.stderr));
}
