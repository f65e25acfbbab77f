//! Damaged repositories give an `abort: ...` naming the revlog and the revision, exit code
//! 255, and never a panic.

use revfs_tests::{fixture_copy, revfs};
use std::path::{Path, PathBuf};

/// The offset of revision `rev`'s chunk inside an inline index file, and its length.
fn inline_chunk(index: &[u8], rev: usize) -> (usize, usize) {
    let mut pos = 0;
    for r in 0.. {
        let clen = u32::from_be_bytes(index[pos + 8..pos + 12].try_into().unwrap()) as usize;
        if r == rev {
            return (pos + 64, clen);
        }
        pos += 64 + clen;
    }
    unreachable!()
}

fn assert_clean_abort(out: &std::process::Output, must_name: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "exit code; stderr: {stderr}");
    assert!(stderr.starts_with("abort: "), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    for name in must_name {
        assert!(stderr.contains(name), "stderr should name {name}: {stderr}");
    }
}

#[test]
fn a_flipped_byte_in_a_chunk_names_the_revlog_and_revision() {
    let tmp = fixture_copy("tiny");
    let repo = tmp.path().join("repo");
    let index = repo.join(".hg/store/data/a.txt.i");
    let mut bytes = std::fs::read(&index).unwrap();
    let (start, len) = inline_chunk(&bytes, 1);
    assert!(len > 2);
    bytes[start + len / 2] ^= 0x55;
    std::fs::write(&index, &bytes).unwrap();
    let out = revfs(&repo, &["cat", "-r", "1", "a.txt"]);
    assert_clean_abort(&out, &["data/a.txt", "1"]);
    // Revision 0 of the same file is intact and still readable.
    let ok = revfs(&repo, &["cat", "-r", "0", "a.txt"]);
    assert_eq!(ok.status.code(), Some(0));
}

#[test]
fn a_flipped_byte_in_the_changelog_aborts_log() {
    let tmp = fixture_copy("tiny");
    let repo = tmp.path().join("repo");
    let index = repo.join(".hg/store/00changelog.i");
    let mut bytes = std::fs::read(&index).unwrap();
    let (start, len) = inline_chunk(&bytes, 2);
    bytes[start + len / 2] ^= 0x01;
    std::fs::write(&index, &bytes).unwrap();
    let out = revfs(&repo, &["log"]);
    assert_clean_abort(&out, &["integrity check failed on 00changelog:2"]);
}

fn largest_data_file(store: &Path) -> PathBuf {
    let mut best: Option<(u64, PathBuf)> = None;
    for f in revfs_tests::tree_files(store) {
        let p = store.join(&f);
        if p.extension().is_some_and(|e| e == "d") {
            let len = std::fs::metadata(&p).unwrap().len();
            if best.as_ref().is_none_or(|(l, _)| len > *l) {
                best = Some((len, p));
            }
        }
    }
    best.expect("history has a split revlog").1
}

#[test]
fn a_truncated_data_file_names_the_revlog_and_revision() {
    let tmp = fixture_copy("history");
    let repo = tmp.path().join("repo");
    let data = largest_data_file(&repo.join(".hg/store/data"));
    let len = std::fs::metadata(&data).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    // Every revision of every file: those stored past the cut must abort cleanly.
    let out = revfs(
        &repo,
        &[
            "cat",
            "-r",
            "tip",
            "-o",
            &format!("{}/out/%p", tmp.path().display()),
            ".",
        ],
    );
    assert_clean_abort(&out, &["partial read of revlog data/", ".d; expected "]);
}

#[test]
fn a_truncated_index_is_reported_as_corrupt() {
    let tmp = fixture_copy("tiny");
    let repo = tmp.path().join("repo");
    let index = repo.join(".hg/store/data/a.txt.i");
    let len = std::fs::metadata(&index).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&index)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let out = revfs(&repo, &["cat", "-r", "tip", "a.txt"]);
    assert_clean_abort(&out, &["index data/a.txt is corrupted"]);
}

#[test]
fn unknown_requirements_are_refused_by_name() {
    let tmp = fixture_copy("tiny");
    let repo = tmp.path().join("repo");
    let requires = repo.join(".hg/store/requires");
    let mut text = std::fs::read_to_string(&requires).unwrap();
    text.push_str("treemanifest\nexp-frobnicate\n");
    std::fs::write(&requires, &text).unwrap();
    // hg knows treemanifest, not exp-frobnicate: hg's words for what it does not know.
    let out = revfs(&repo, &["log"]);
    assert_clean_abort(&out, &["exp-frobnicate"]);
    let hg = revfs_tests::hg_cmd(&repo, &["log"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&hg.stderr)
    );
    // What hg reads and revfs does not: named, and left to hg.
    std::fs::write(&requires, text.replace("exp-frobnicate\n", "")).unwrap();
    let out = revfs(&repo, &["log"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "abort: repository requires features revfs does not support: treemanifest (use hg instead)\n"
    );
}

#[test]
fn a_missing_repository_is_an_abort() {
    let tmp = tempfile::tempdir().unwrap();
    let out = revfs(tmp.path(), &["log"]);
    assert_clean_abort(&out, &["no repository found"]);
    let out = revfs(tmp.path(), &["-R", "/nonexistent/repo", "log"]);
    assert_clean_abort(&out, &["repository /nonexistent/repo not found"]);
}
