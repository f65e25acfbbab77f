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
