//! `revfs init` and `revfs recover` against hg.

use revfs_store::transaction::Transaction;
use revfs_store::Repo;
use revfs_tests::{hg_cmd, revfs};

#[test]
fn init_creates_what_hg_init_creates() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(revfs(tmp.path(), &["init", "ours"]).status.success());
    assert!(hg_cmd(tmp.path(), &["init", "theirs"]).status.success());
    for f in [".hg/requires", ".hg/store/requires", ".hg/00changelog.i"] {
        assert_eq!(
            std::fs::read(tmp.path().join("ours").join(f)).unwrap(),
            std::fs::read(tmp.path().join("theirs").join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(hg_cmd(&tmp.path().join("ours"), &["verify", "-q"])
        .status
        .success());
    let again = revfs(tmp.path(), &["init", "ours"]);
    assert_eq!(again.status.code(), Some(255));
    assert_eq!(
        String::from_utf8_lossy(&again.stderr),
        "abort: repository ours already exists\n"
    );
}

#[test]
fn recover_rolls_back_an_interrupted_transaction_like_hg() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("r");
    assert!(hg_cmd(tmp.path(), &["init", "r"]).status.success());
    std::fs::write(repo_dir.join("a"), b"a\n").unwrap();
    assert!(hg_cmd(
        &repo_dir,
        &["commit", "-q", "-A", "-m", "a", "-u", "t", "-d", "0 0"]
    )
    .status
    .success());
    let cl = repo_dir.join(".hg/store/00changelog.i");
    let before = std::fs::read(&cl).unwrap();
    {
        let repo = Repo::open(&repo_dir).unwrap();
        let mut tr = Transaction::begin(&repo).unwrap();
        tr.journal_file(b"00changelog.i", before.len() as u64)
            .unwrap();
        // A half-written append, then the writer dies without closing.
        let mut f = std::fs::OpenOptions::new().append(true).open(&cl).unwrap();
        std::io::Write::write_all(&mut f, b"garbage that hg verify would reject").unwrap();
        std::mem::forget(tr);
    }
    let blocked = hg_cmd(&repo_dir, &["commit", "-q", "-m", "x", "-u", "t"]);
    assert!(
        !blocked.status.success(),
        "hg refuses to write over an abandoned transaction"
    );
    let out = revfs(&repo_dir, &["recover"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "rolling back interrupted transaction\n"
    );
    assert_eq!(std::fs::read(&cl).unwrap(), before);
    assert!(hg_cmd(&repo_dir, &["verify", "-q"]).status.success());
    let none = revfs(&repo_dir, &["recover"]);
    assert_eq!(none.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&none.stderr),
        "no interrupted transaction available\n"
    );
}

#[test]
fn committing_to_a_hardlinked_clone_leaves_its_source_alone() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    assert!(hg_cmd(tmp.path(), &["init", "src"]).status.success());
    let src = tmp.path().join("src");
    for i in 0..5 {
        std::fs::write(src.join(format!("f{i}")), format!("{i}\n")).unwrap();
    }
    assert!(hg_cmd(&src, &["commit", "-qAm", "0", "-d", "0 0"])
        .status
        .success());
    assert!(hg_cmd(tmp.path(), &["clone", "-q", "-U", "src", "dst"])
        .status
        .success());
    let dst = tmp.path().join("dst");
    let shared = dst.join(".hg/store/00changelog.i");
    assert!(
        std::fs::metadata(&shared).unwrap().nlink() > 1,
        "hg clone hardlinks the store"
    );
    let before = std::fs::read(src.join(".hg/store/00changelog.i")).unwrap();
    let repo = Repo::open(&dst).unwrap();
    let mut files = std::collections::BTreeMap::new();
    files.insert(
        b"f1".to_vec(),
        revfs_store::commit::Change::Set {
            data: b"changed\n".to_vec(),
            flag: revfs_store::manifest::FileFlag::Regular,
            copy_from: None,
        },
    );
    let p1 = repo.changelog().node(0).unwrap();
    revfs_store::commit::commit(
        &repo,
        &revfs_store::commit::CommitRequest {
            p1,
            p2: revfs_store::Node::NULL,
            files,
            user: b"t".to_vec(),
            time: 0,
            tz: 0,
            description: b"in the clone".to_vec(),
            branch: None,
        },
    )
    .unwrap();
    assert_eq!(
        std::fs::read(src.join(".hg/store/00changelog.i")).unwrap(),
        before
    );
    let log = |dir: &std::path::Path| {
        String::from_utf8_lossy(&hg_cmd(dir, &["log", "-T", "{desc}\n"]).stdout).into_owned()
    };
    assert_eq!(log(&src), "0\n");
    assert_eq!(log(&dst), "in the clone\n0\n");
    for dir in [&src, &dst] {
        assert!(hg_cmd(dir, &["verify", "-q"]).status.success());
    }
}
