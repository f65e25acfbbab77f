//! pjdfstest (the POSIX filesystem test suite, Rust rewrite from crates.io) over a mount.
//! Every failure must be one that docs/RELIABILITY.md lists with its reason, and every listed
//! failure must still fail: the list is exactly what differs from ext4.
//!
//! `tests/deps.sh` installs `pjdfstest`; the configuration is `tests/pjdfstest.toml` (stock
//! Debian users `nobody` and `daemon`, so the mount is made with `--allow-other`).

use revfs_tests::hg_cmd;
use revfs_tests::mount::Mount;
use std::collections::{BTreeMap, BTreeSet};
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

/// The failures docs/RELIABILITY.md expects: the backquoted test names in the rows of its
/// "Expected pjdfstest failures" table.
fn expected_failures() -> BTreeMap<String, String> {
    let doc = std::fs::read_to_string(revfs_tests::workspace().join("docs/RELIABILITY.md"))
        .expect("docs/RELIABILITY.md");
    let section = doc
        .split("### Expected pjdfstest failures")
        .nth(1)
        .expect("the section of expected pjdfstest failures")
        .split("\n#")
        .next()
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let reason = cells.get(2).copied().unwrap_or_default().to_string();
        for name in cells[1].split('`').skip(1).step_by(2) {
            out.insert(name.to_string(), reason.clone());
        }
    }
    out
}

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
fn pjdfstest_fails_only_where_docs_say_why() {
    let expected = expected_failures();
    assert!(
        expected.len() > 10,
        "the expected-failure table was not found or is nearly empty"
    );
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
    let unexpected: Vec<&String> = failed
        .iter()
        .filter(|t| !expected.contains_key(*t))
        .collect();
    let fixed: Vec<&String> = expected.keys().filter(|t| ok.contains(*t)).collect();
    let mut why = String::new();
    for t in &unexpected {
        // The lines pjdfstest printed under the failed test.
        let detail: Vec<&str> = report
            .lines()
            .skip_while(|l| !l.starts_with(t.as_str()))
            .skip(1)
            .take(2)
            .collect();
        why.push_str(&format!("  {t}: {}\n", detail.join(" / ")));
    }
    assert!(
        unexpected.is_empty() && fixed.is_empty(),
        "failures docs/RELIABILITY.md does not explain:\n{why}listed as failing but passing now (update the doc): {fixed:?}"
    );
    assert_eq!(
        ok.len() + failed.len() + skipped.len(),
        398,
        "pjdfstest 0.2.2 has 398 tests"
    );
}
