//! What the daemon holds in memory as a working copy moves between revisions: one base
//! manifest, however many commits, updates and new parents came, while the directories
//! not listed yet still list the files of the revision they belong to.

use revfs_tests::mount::{snapshot, Mount, Snap};
use revfs_tests::{hg_cmd, hg_repo, revfs};
use std::path::{Path, PathBuf};

/// (entries, manifests, manifest bytes) from the daemon's `stats`.
fn stats(m: &Mount) -> (u64, u64, u64) {
    let answer = m.control("{\"cmd\":\"stats\"}");
    let v: serde_json::Value = serde_json::from_str(answer.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{answer}: {e}"));
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {answer}"));
    (n("entries"), n("manifests"), n("manifest_bytes"))
}

fn ok(out: std::process::Output) {
    assert!(out.status.success(), "{out:?}");
}

/// The files of revision `rev` of `repo`, with their contents, as `snapshot` gives them
/// (directories and link counts aside).
fn files_of(repo: &Path, rev: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let out = hg_cmd(repo, &["files", "-r", rev]);
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|f| {
            let data = hg_cmd(repo, &["cat", "-r", rev, f]).stdout;
            (PathBuf::from(f), data)
        })
        .collect()
}

fn files_on_disk(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    snapshot(root)
        .into_iter()
        .filter_map(|(p, s)| match s {
            Snap::File { data, .. } => Some((p, data)),
            _ => None,
        })
        .collect()
}

#[test]
fn one_base_manifest_is_held_across_commits_updates_and_new_parents() {
    let tmp = revfs_tests::scratch_dir();
    let repo = hg_repo(
        tmp.path(),
        &[
            ("d1/a", "a\n"),
            ("d1/sub/b", "b\n"),
            ("d2/c", "c\n"),
            ("d3/e/f", "f\n"),
            ("top", "top\n"),
        ],
    );
    std::fs::write(repo.join("d2/c"), "c1\n").unwrap();
    std::fs::create_dir_all(repo.join("d4")).unwrap();
    std::fs::write(repo.join("d4/g"), "g\n").unwrap();
    ok(hg_cmd(&repo, &["commit", "-qAm", "r1", "-d", "1 0"]));
    let m = Mount::new(&repo, None);
    let mnt = &m.dir;
    // The root and d1 listed; d2, d3, d4 and d1/sub not.
    std::fs::read_dir(mnt).unwrap().for_each(drop);
    std::fs::read_dir(mnt.join("d1")).unwrap().for_each(drop);
    assert_eq!(stats(&m).1, 1, "after the mount");
    let commit = |msg: &str| {
        ok(revfs(
            mnt,
            &["commit", "-m", msg, "-u", "test", "-d", "2 0"],
        ));
        assert_eq!(stats(&m).1, 1, "after the commit {msg}");
    };
    ok(revfs(mnt, &["update", "-q", "0"]));
    assert_eq!(stats(&m).1, 1, "after an update");
    ok(revfs(mnt, &["update", "-q", "1"]));
    assert_eq!(stats(&m).1, 1, "after an update back");
    std::fs::write(mnt.join("top"), "top2\n").unwrap();
    commit("top2");
    // hg's commit in the mount: a new parent for the files as they are.
    std::fs::write(mnt.join("d1/a"), "a2\n").unwrap();
    ok(hg_cmd(
        mnt,
        &["commit", "-m", "a2", "-u", "test", "-d", "3 0"],
    ));
    assert_eq!(stats(&m).1, 1, "after hg's commit");
    // Every directory not listed lists its revision's files.
    assert_eq!(files_on_disk(mnt), files_of(&repo, "tip"));
    ok(revfs(mnt, &["update", "-q", "0"]));
    assert_eq!(files_on_disk(mnt), files_of(&repo, "0"));
    assert_eq!(stats(&m).1, 1, "after listing everything and an update");
    let (entries, _, bytes) = stats(&m);
    assert!(
        entries > 10 && bytes > 100,
        "{entries} entries, {bytes} bytes"
    );
    // A directory moved before it was listed keeps the entries it had, through a commit of
    // something else.
    ok(revfs(mnt, &["update", "-q", "tip"]));
    std::fs::rename(mnt.join("d3"), mnt.join("d3moved")).unwrap();
    std::fs::write(mnt.join("top"), "top3\n").unwrap();
    ok(revfs(
        mnt,
        &["commit", "-m", "top3", "-u", "test", "-d", "4 0", "top"],
    ));
    assert_eq!(std::fs::read(mnt.join("d3moved/e/f")).unwrap(), b"f\n");
    assert!(stats(&m).1 <= 2);
}
