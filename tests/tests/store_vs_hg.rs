//! The store reader against real hg: for every revision of the fixture repositories,
//! `revfs cat` and `revfs files` give exactly what `hg cat` and `hg files` give, and
//! `revfs log` prints what `hg log` prints.

use revfs_tests::hg::HgServer;
use revfs_tests::{fixtures, revfs, tree_files};
use std::path::Path;

fn rev_count(hg: &mut HgServer) -> usize {
    let out = hg.run(&["log", "-r", "tip", "-T", "{rev}"]);
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse::<usize>()
        .unwrap()
        + 1
}

fn assert_same_trees(a: &Path, b: &Path, what: &str) {
    let (fa, fb) = (tree_files(a), tree_files(b));
    assert_eq!(fa, fb, "{what}: different file sets");
    for f in &fa {
        let (ca, cb) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        assert!(
            ca == cb,
            "{what}: {} differs ({} vs {} bytes)",
            f.display(),
            ca.len(),
            cb.len()
        );
    }
}

/// Compares cat (every file) and files for every `step`th revision of one repository, and
/// its tip.
fn every_revision_matches_hg(name: &str, step: usize) {
    let repo = fixtures().join(name);
    let mut hg = HgServer::start(&repo);
    let revs = rev_count(&mut hg);
    assert!(revs >= 3, "{name} has only {revs} revisions");
    let tmp = revfs_tests::scratch_dir();
    let last = revs - 1;
    for rev in (0..revs).filter(|r| r % step == 0 || *r == last) {
        let r = rev.to_string();
        let (hg_dir, our_dir) = (
            tmp.path().join(format!("hg{rev}")),
            tmp.path().join(format!("us{rev}")),
        );
        let hg_pat = format!("{}/%p", hg_dir.display());
        let our_pat = format!("{}/%p", our_dir.display());
        let expected = hg.run(&["cat", "-r", &r, "-o", &hg_pat, "."]);
        let ours = revfs(&repo, &["cat", "-r", &r, "-o", &our_pat, "."]);
        assert_eq!(
            ours.status.code(),
            Some(expected.code),
            "{name}@{rev}: cat exit code; stderr {}",
            String::from_utf8_lossy(&ours.stderr)
        );
        assert_same_trees(&hg_dir, &our_dir, &format!("{name}@{rev} cat"));
        let expected = hg.run(&["files", "-r", &r]);
        let ours = revfs(&repo, &["files", "-r", &r]);
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&expected.stdout),
            "{name}@{rev}: files"
        );
        assert_eq!(
            ours.status.code(),
            Some(expected.code),
            "{name}@{rev}: files exit code"
        );
        std::fs::remove_dir_all(&hg_dir).ok();
        std::fs::remove_dir_all(&our_dir).ok();
    }
}

#[test]
fn cat_and_files_match_hg_on_every_revision_zstd() {
    every_revision_matches_hg("history", 1);
}

#[test]
fn cat_and_files_match_hg_on_every_revision_zlib() {
    every_revision_matches_hg("history-zlib", revfs_tests::format_rev_step());
}

#[test]
fn cat_and_files_match_hg_on_every_revision_legacy_delta_chains() {
    every_revision_matches_hg("history-legacy", revfs_tests::format_rev_step());
}

#[test]
fn cat_and_files_match_hg_on_every_revision_without_fncache() {
    every_revision_matches_hg("history-nofncache", revfs_tests::format_rev_step());
}

#[test]
fn cat_and_files_match_hg_on_every_revision_without_store() {
    every_revision_matches_hg("history-nostore", revfs_tests::format_rev_step());
}

#[test]
fn cat_and_files_match_hg_on_every_revision_with_a_split_manifest() {
    every_revision_matches_hg("wide", 1);
}

/// Runs the same command through hg and revfs and asserts identical output and exit code.
fn same_as_hg(hg: &mut HgServer, repo: &Path, args: &[&str]) {
    let expected = hg.run(args);
    let ours = revfs(repo, args);
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&expected.stdout),
        "stdout of {args:?}"
    );
    assert_eq!(
        String::from_utf8_lossy(&ours.stderr),
        String::from_utf8_lossy(&expected.stderr),
        "stderr of {args:?}"
    );
    assert_eq!(
        ours.status.code(),
        Some(expected.code),
        "exit code of {args:?}"
    );
}

fn log_matches_hg(name: &str) {
    let repo = fixtures().join(name);
    let mut hg = HgServer::start(&repo);
    let tip_node = String::from_utf8(hg.run(&["log", "-r", "tip", "-T", "{node}"]).stdout).unwrap();
    let rev5_node = String::from_utf8(hg.run(&["log", "-r", "5", "-T", "{node}"]).stdout).unwrap();
    for args in [
        vec!["log"],
        vec!["log", "-v"],
        vec!["log", "-q"],
        vec!["log", "-T", "json"],
        vec!["log", "-T", "json", "-v"],
        vec!["log", "-l", "7"],
        vec!["log", "-r", "."],
        vec!["log", "-r", "tip"],
        vec!["log", "-r", "null"],
        vec!["log", "-r", "-1"],
        vec!["log", "-r", "-3"],
        vec!["log", "-r", "0"],
        vec!["log", "-r", "2:6"],
        vec!["log", "-r", "6:2", "-q"],
        vec!["log", "-r", "1", "-r", "0", "-r", "1", "-q"],
        vec!["log", "-r", &tip_node],
        vec!["log", "-r", &rev5_node[..8]],
        vec!["log", "-r", "default"],
        vec!["log", "-r", "99999"],
        vec!["log", "-r", "no-such-name"],
        vec!["log", "-r", "nosuchname"],
        vec!["log", "-r", "5-3", "-q"],
        vec!["log", "-r", "2:6-4", "-q"],
        vec!["log", "-l", "0"],
    ] {
        same_as_hg(&mut hg, &repo, &args);
    }
    for args in [
        vec!["parents"],
        vec!["parents", "-r", "87"],
        vec!["parents", "-r", "0"],
        vec!["parents", "-T", "{rev}\n"],
        vec!["id", "-r", "tip"],
        vec!["id", "-r", "95"],
        vec!["id", "-r", "42"],
        vec!["id", "-r", "0"],
        vec!["files", "-r", "tip", "glob:*.txt"],
        vec!["files", "-r", "tip", "glob:**/*.h"],
        vec!["files", "-r", "tip", "re:.*\\.c$"],
        vec!["files", "-r", "tip", "path:Dir", "glob:nomatch"],
        vec!["files", "-r", "tip", "glob:{bin,Dir}/*"],
        vec!["cat", "-r", "tip", "glob:Dir/*.TXT"],
    ] {
        same_as_hg(&mut hg, &repo, &args);
    }
    for template in [
        "{rev}:{node|short}\n",
        "{rev}|{node}|{date}|{date|hgdate}|{date|isodate}|{date|shortdate}|{tags}|{bookmarks}|{branch}|{phase}|{p1rev}|{p2rev}|{p1node|short}|{p2node}\n",
        "{desc|firstline}\n{author|user}|{author|email}|{author|person}\n",
        "{files}\n",
        "{desc}\\\\{nope}\\x41\t|{desc|strip|upper}|{author|lower}\n",
    ] {
        same_as_hg(&mut hg, &repo, &["log", "-T", template]);
    }
}

#[test]
fn log_matches_hg_on_history() {
    log_matches_hg("history");
    let repo = fixtures().join("history");
    let mut hg = HgServer::start(&repo);
    // Names defined by the fixture: tags, a bookmark, and a named branch.
    let tags = String::from_utf8(hg.run(&["tags", "-q"]).stdout).unwrap();
    let books = String::from_utf8(hg.run(&["bookmarks", "-T", "{bookmark}\n"]).stdout).unwrap();
    let branches =
        String::from_utf8(hg.run(&["branches", "-c", "-T", "{branch}\n"]).stdout).unwrap();
    let mut names: Vec<&str> = tags
        .lines()
        .chain(books.lines())
        .chain(branches.lines())
        .collect();
    assert!(names.len() >= 4, "fixture lacks names: {names:?}");
    names.sort();
    names.dedup();
    for n in names {
        same_as_hg(&mut hg, &repo, &["log", "-r", n]);
        same_as_hg(&mut hg, &repo, &["log", "-r", n, "-T", "json"]);
    }
}

#[test]
fn log_matches_hg_on_other_formats() {
    for name in ["history-zlib", "history-legacy", "history-nostore"] {
        log_matches_hg(name);
    }
}

#[test]
fn log_matches_hg_on_small_repositories() {
    log_matches_hg_small("tiny");
}

fn log_matches_hg_small(name: &str) {
    let repo = fixtures().join(name);
    let mut hg = HgServer::start(&repo);
    for args in [
        vec!["log"],
        vec!["log", "-v", "-T", "json"],
        vec!["log", "-r", "1"],
        vec!["files"],
        vec!["files", "-r", "0", "-0"],
        vec!["files", "-r", "2", "b"],
        vec!["files", "-r", "2", "nope"],
        vec!["cat", "-r", "1", "a.txt"],
        vec!["cat", "-r", "2", "b", "a.txt"],
        vec!["cat", "-r", "0", "nope"],
    ] {
        same_as_hg(&mut hg, &repo, &args);
    }
}

#[test]
fn paths_are_relative_to_the_current_directory() {
    let repo = fixtures().join("tiny");
    let sub = repo.join("b");
    for args in [["files", "-r", "2"], ["files", "-r", "tip"]] {
        let ours = revfs(&sub, &args);
        let expected = revfs_tests::hg_cmd(&sub, &args);
        assert_eq!(ours.stdout, expected.stdout, "{args:?} from b/");
    }
    for args in [
        ["files", "-r", "2", "glob:*"],
        ["files", "-r", "2", "glob:../*.txt"],
    ] {
        let ours = revfs(&sub, &args);
        let expected = revfs_tests::hg_cmd(&sub, &args);
        assert_eq!(ours.stdout, expected.stdout, "{args:?} from b/");
        assert_eq!(
            ours.status.code(),
            expected.status.code(),
            "{args:?} from b/"
        );
    }
    let ours = revfs(&sub, &["cat", "-r", "2", "../a.txt", "c.txt"]);
    let expected = revfs_tests::hg_cmd(&sub, &["cat", "-r", "2", "../a.txt", "c.txt"]);
    assert_eq!(ours.stdout, expected.stdout);
    assert!(!ours.stdout.is_empty());
}

#[test]
fn a_repository_without_working_copy_reads_like_any_other() {
    let repo = fixtures().join("clone-u");
    let mut hg = HgServer::start(&repo);
    // `hg clone -U` leaves a dirstate whose parents are null, so `.` is the null revision.
    for args in [
        vec!["log"],
        vec!["log", "-r", "."],
        vec!["files", "-r", "tip"],
        vec!["cat", "-r", "tip", "a.txt"],
    ] {
        same_as_hg(&mut hg, &repo, &args);
    }
}

#[test]
fn without_a_dirstate_dot_is_tip() {
    let tmp = revfs_tests::fixture_copy("clone-u");
    let repo = tmp.path().join("repo");
    std::fs::remove_file(repo.join(".hg/dirstate")).unwrap();
    let ours = revfs(&repo, &["log", "-r", ".", "-q"]);
    let tip = revfs(&repo, &["log", "-r", "tip", "-q"]);
    assert_eq!(ours.status.code(), Some(0));
    assert_eq!(ours.stdout, tip.stdout);
}
