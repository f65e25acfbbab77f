//! A revlog handle that outlives a strip: `hg strip` (and rebase, histedit, which strip)
//! truncates a revlog and appends other revisions where the stripped ones were, so a rev
//! number this handle knows may hold another node now. A mapped revlog sees the new bytes.

use crate::commit::tests::{hg, hg_available, pseudo_random};
use crate::repo::Repo;

#[test]
fn a_node_stripped_and_replaced_under_an_open_revlog_is_unknown_not_another_revisions_text() {
    if !hg_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    hg(dir, &["init"]);
    // Two revisions of about 45 KiB each once compressed: an inline revlog between the map
    // threshold (64 KiB) and hg's inline limit (128 KiB), mapped whole.
    std::fs::write(dir.join("f"), pseudo_random(1, 60_000)).unwrap();
    hg(dir, &["commit", "-qAm", "0"]);
    let theirs = pseudo_random(2, 60_000);
    std::fs::write(dir.join("f"), &theirs).unwrap();
    hg(dir, &["commit", "-qm", "1"]);
    let index = dir.join(".hg/store/data/f.i");
    let len = std::fs::metadata(&index).unwrap().len();
    assert!(
        (64 << 10..128 << 10).contains(&len),
        "f.i is {len} bytes: not a mapped inline revlog"
    );

    let repo = Repo::open(dir).unwrap();
    let fl = repo.filelog(b"f").unwrap();
    let stripped = fl.node(1).unwrap();
    assert_eq!(fl.rev_of(&stripped).unwrap(), 1);

    // Rev 1 stripped, and another text committed in its place, a little shorter: its
    // chunk lies inside the map (the file ends a little before the map, on the same page).
    hg(
        dir,
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
    std::fs::write(dir.join("f"), pseudo_random(3, 59_500)).unwrap();
    hg(dir, &["commit", "-qm", "1 again"]);
    let now = std::fs::metadata(&index).unwrap().len();
    assert!(
        now <= len && now / 4096 == len / 4096,
        "f.i went from {len} to {now} bytes"
    );

    match fl.rev_of(&stripped) {
        Err(crate::StoreError::UnknownNode { .. }) => {}
        Ok(rev) => assert!(
            *fl.read(rev).unwrap() == theirs[..],
            "the stripped node's rev {rev} gives another revision's text"
        ),
        Err(e) => panic!("{e}"),
    }
    // A handle opened now knows the new revision, and the stripped node is gone.
    let fresh = Repo::open(dir).unwrap();
    let fl = fresh.filelog(b"f").unwrap();
    assert!(fl.rev_of(&stripped).is_err());
    assert!(*fl.read(1).unwrap() == pseudo_random(3, 59_500)[..]);
}

/// A strip that shortens a mapped data file by whole pages: a handle opened before reads
/// a stripped revision from pages that are gone. That was SIGBUS, which killed the process
/// (the daemon, for a program that still had the stripped revision's file open); now it is
/// an error, and the revisions that stayed still read.
#[test]
fn a_revision_stripped_under_an_open_revlog_is_an_error_not_a_sigbus() {
    if !hg_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    hg(dir, &["init"]);
    for i in 0..3 {
        std::fs::write(dir.join("f"), pseudo_random(10 + i, 100_000)).unwrap();
        hg(dir, &["commit", "-qAm", &i.to_string()]);
    }
    let data = dir.join(".hg/store/data/f.d");
    let before = std::fs::metadata(&data).unwrap().len();
    assert!(before >= 64 << 10, "f.d is {before} bytes: not mapped");
    let repo = Repo::open(dir).unwrap();
    let fl = repo.filelog(b"f").unwrap();
    let nodes: Vec<_> = (0..3).map(|r| fl.node(r).unwrap()).collect();
    let zeroed = super::guarded_map::zeroed_pages();

    // Revisions 1 and 2 go; f.d keeps revision 0's pages only.
    hg(
        dir,
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
    let after = std::fs::metadata(&data).unwrap().len();
    assert!(
        after + 8192 < before,
        "f.d went from {before} to {after} bytes"
    );

    for r in [2, 1] {
        let read = fl
            .rev_of(&nodes[r])
            .and_then(|rev| fl.read(rev).map(|t| t.len()));
        assert!(read.is_err(), "stripped rev {r} read as {read:?}");
    }
    assert!(
        super::guarded_map::zeroed_pages() > zeroed,
        "no page was replaced"
    );
    assert!(*fl.read(fl.rev_of(&nodes[0]).unwrap()).unwrap() == pseudo_random(10, 100_000)[..]);
}
