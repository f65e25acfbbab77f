//! pjdfstest (the POSIX filesystem test suite, Rust rewrite from crates.io) over a mount:
//! nothing fails, and nothing is skipped that ext4 does not skip, but the one test glibc
//! makes skip itself on any FUSE file system (docs/RELIABILITY.md).
//!
//! `tests/deps.sh` installs `pjdfstest`; the configuration is `tests/pjdfstest.toml` (stock
//! Debian users `nobody` and `daemon`, so the mount is made with `--allow-other`).

use revfs_tests::hg_cmd;
use revfs_tests::mount::Mount;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

fn pjdfstest_bin() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(home.map(|h| h.join("bin")));
    for dir in candidates {
        let bin = dir.join("pjdfstest");
        if bin.is_file() {
            return bin;
        }
    }
    panic!("pjdfstest is not installed: tests/deps.sh installs it (cargo install pjdfstest)");
}

/// What pjdfstest 0.2.2 skips on ext4 on this machine: the read-only remount tests.
const EXT4_SKIPS: &[&str] = &[
    "chmod::erofs_named",
    "chown::erofs_named",
    "chown::lchown::erofs_named",
    "link::erofs_named",
    "mkdir::erofs_new_file",
    "mkfifo::erofs_new_file",
    "open::erofs_named",
    "open::erofs_new_file",
    "rename::erofs_named",
    "rmdir::erofs_named",
    "symlink::erofs_new_file",
    "truncate::erofs_named",
    "unlink::erofs_named",
];

/// Skipped over any FUSE file system: glibc's `pathconf(_PC_LINK_MAX)` does not know the
/// type FUSE gives `statfs` and answers 127, which the test takes for "unknown".
const FUSE_SKIPS: &[&str] = &["link::link_count_max"];

/// (ok, failed, skipped) test names from pjdfstest's report.
fn parse(report: &str) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let (mut ok, mut failed, mut skipped) = Default::default();
    for line in report.lines() {
        let mut words = line.split_whitespace();
        let (Some(name), Some(result), None) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if !name.contains("::") {
            continue;
        }
        let set: &mut BTreeSet<String> = match result {
            "ok" => &mut ok,
            "FAILED" => &mut failed,
            "skipped" => &mut skipped,
            _ => continue,
        };
        set.insert(name.to_string());
    }
    (ok, failed, skipped)
}

#[test]
fn pjdfstest_passes_all_that_it_passes_on_ext4() {
    let tmp = revfs_tests::scratch_dir();
    assert!(hg_cmd(tmp.path(), &["init", "repo"]).status.success());
    let repo = tmp.path().join("repo");
    std::fs::write(repo.join("tracked.txt"), b"tracked\n").unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qAm", "base", "-d", "0 0"])
        .status
        .success());
    let m = Mount::with_args(&repo, &["--allow-other"]);
    // pjdfstest switches to other users, who must reach the mount point.
    let parent = m.dir.parent().unwrap();
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let base = m.dir.join("pjd");
    std::fs::create_dir(&base).unwrap();
    // A directory on another file system for the EXDEV tests, of this run only: the
    // template's `secondary_fs` is replaced in a copy of the configuration.
    let secondary = revfs_tests::scratch_dir();
    let template =
        std::fs::read_to_string(revfs_tests::workspace().join("tests/pjdfstest.toml")).unwrap();
    let config = tmp.path().join("pjdfstest.toml");
    let config_text: String = template
        .lines()
        .map(|l| {
            if l.starts_with("secondary_fs") {
                format!("secondary_fs = {:?}\n", secondary.path())
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(
        config_text.contains("secondary_fs = \"/"),
        "no secondary_fs line"
    );
    std::fs::write(&config, config_text).unwrap();

    let out = std::process::Command::new(pjdfstest_bin())
        .arg("-c")
        .arg(&config)
        .arg("-p")
        .arg(&base)
        .output()
        .expect("running pjdfstest");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let (ok, failed, skipped) = parse(&report);
    eprintln!(
        "pjdfstest over revfs: {} passed, {} failed, {} skipped",
        ok.len(),
        failed.len(),
        skipped.len()
    );
    assert!(
        ok.len() > 300,
        "pjdfstest ran too few tests:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut why = String::new();
    for t in &failed {
        // The lines pjdfstest printed under the failed test.
        let detail: Vec<&str> = report
            .lines()
            .skip_while(|l| !l.starts_with(t.as_str()))
            .skip(1)
            .take(2)
            .collect();
        why.push_str(&format!("  {t}: {}\n", detail.join(" / ")));
    }
    assert!(failed.is_empty(), "pjdfstest failures:\n{why}");
    let extra: Vec<&String> = skipped
        .iter()
        .filter(|t| !EXT4_SKIPS.contains(&t.as_str()) && !FUSE_SKIPS.contains(&t.as_str()))
        .collect();
    assert!(extra.is_empty(), "skipped, unlike on ext4: {extra:?}");
    assert_eq!(
        ok.len() + failed.len() + skipped.len(),
        398,
        "pjdfstest 0.2.2 has 398 tests"
    );
}
