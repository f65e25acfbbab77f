//! The working copy reads through a store handle opened before a strip: hg strip (rebase,
//! histedit) of another revision renumbers the revisions of files the working copy still
//! has, so the handle's numbers point where the files hold something else or nothing.

use super::test_repo::{hg, node, noise, open_at, put};
use super::*;

/// A big file whose filelog is a mapped data file: strip of a side branch moves the
/// working copy's revision of it down to where the stripped one was, and the data file
/// ends before where the handle looks for it (that read was SIGBUS, then an error).
#[test]
fn a_file_reads_right_after_a_strip_renumbered_its_revision_under_the_daemons_handle() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    hg(&repo, &["init"]);
    put(&repo, "f", &noise(0, 100_000));
    hg(&repo, &["commit", "-qAm", "0"]);
    put(&repo, "f", &noise(1, 100_000));
    hg(&repo, &["commit", "-qm", "side"]);
    hg(&repo, &["update", "-q", "0"]);
    let ours = noise(2, 100_000);
    put(&repo, "f", &ours);
    hg(&repo, &["commit", "-qm", "ours"]);
    let wc = open_at(&repo, node(&repo, "2"), &tmp.path().join("state"));
    // The filelog is opened (the size comes from its index), no text read yet.
    let f = wc.lookup(ROOT_INO, b"f").expect("lookup").expect("f").ino;
    assert_eq!(wc.getattr(f).expect("getattr").size, 100_000);

    hg(
        &repo,
        &[
            "--config",
            "extensions.strip=",
            "strip",
            "-q",
            "--no-backup",
            "-r",
            "1",
        ],
    );
    assert!(wc.repo().stripped_since_open());
    let read = wc.read_file(f, 0, 200_000).expect("read after the strip");
    assert!(*read == ours[..], "f reads {} other bytes", read.len());
    // The working copy reads through a handle opened after the strip from now on.
    assert!(!wc.repo().stripped_since_open());
}
