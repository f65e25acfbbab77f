//! A working copy's life cycle, one command each: `revfs mount -r REV` at a mountpoint whose
//! kept working copy is clean takes it to REV (as `update` would, ignored files kept), and
//! refuses one with uncommitted changes, listing them; `revfs list` shows kept working
//! copies that are not mounted; `revfs discard` deletes one, refusing changes unless forced.

use revfs_tests::hg_ok;
use revfs_tests::mount::Mount;
use std::path::{Path, PathBuf};

/// r0: a = "0"; r1: a = "1", b. Files under build/ are ignored.
fn two_revisions(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    hg_ok(dir, &["init", "repo"]);
    std::fs::write(repo.join(".hgignore"), "^build/\n").unwrap();
    std::fs::write(repo.join("a"), "0\n").unwrap();
    hg_ok(&repo, &["commit", "-Aqm", "zero"]);
    std::fs::write(repo.join("a"), "1\n").unwrap();
    std::fs::write(repo.join("b"), "b\n").unwrap();
    hg_ok(&repo, &["commit", "-Aqm", "one"]);
    repo
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn mount_r_takes_a_clean_kept_working_copy_to_the_revision_and_keeps_ignored_files() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = two_revisions(tmp.path());
    let m = Mount::new(&repo, None);
    std::fs::create_dir(m.dir.join("build")).unwrap();
    std::fs::write(m.dir.join("build/out"), "built\n").unwrap();
    m.unmount();
    let (repo_arg, mnt) = (repo.display().to_string(), m.dir.display().to_string());
    let out = m.revfs(&["mount", "-r", "0", &repo_arg, &mnt]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(std::fs::read_to_string(m.dir.join("a")).unwrap(), "0\n");
    assert!(!m.dir.join("b").exists());
    assert_eq!(
        std::fs::read_to_string(m.dir.join("build/out")).unwrap(),
        "built\n"
    );
    let id = m.revfs(&["id", "-R", &mnt]);
    assert!(id.status.success(), "{}", s(&id.stderr));
    assert_eq!(s(&id.stdout), hg_ok(&repo, &["id", "-r", "0"]));
    let st = m.revfs(&["status", "-R", &mnt]);
    assert_eq!(s(&st.stdout), "");
    // And back to tip, remounting at it afterwards resumes there.
    m.unmount();
    let out = m.revfs(&["mount", "-r", "tip", &repo_arg, &mnt]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(std::fs::read_to_string(m.dir.join("a")).unwrap(), "1\n");
    m.unmount();
    m.remount(&repo, None);
    assert_eq!(std::fs::read_to_string(m.dir.join("b")).unwrap(), "b\n");
    m.unmount();
}

#[test]
fn mount_r_list_and_discard_refuse_to_lose_changes_and_say_what_they_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = two_revisions(tmp.path());
    let m = Mount::new(&repo, None);
    let (repo_arg, mnt) = (repo.display().to_string(), m.dir.display().to_string());
    std::fs::write(m.dir.join("a"), "changed\n").unwrap();
    std::fs::write(m.dir.join("new"), "n\n").unwrap();
    std::fs::create_dir(m.dir.join("build")).unwrap();
    std::fs::write(m.dir.join("build/out"), "built\n").unwrap();

    // Mounted: discard refuses.
    let out = m.revfs(&["discard", &mnt]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        s(&out.stderr),
        format!("abort: {mnt} is mounted\n(unmount it first: revfs unmount {mnt})\n")
    );
    m.unmount();

    let tip = hg_ok(&repo, &["log", "-r", "tip", "-T", "{node|short}"]);
    // Switching a changed working copy refuses, lists the changes, names the choices.
    let out = m.revfs(&["mount", "-r", "0", &repo_arg, &mnt]);
    assert_eq!(out.status.code(), Some(255), "{}", s(&out.stderr));
    assert_eq!(
        s(&out.stderr),
        format!(
            "abort: the working copy kept for {mnt} has uncommitted changes (parent {tip}):\n\
             M a\n? new\n\
             (mount without -r to resume it: revfs mount {repo_arg} {mnt}; or discard it: \
             revfs discard --force {mnt})\n"
        )
    );
    // (Other tests' mounts show too: the lines of this one.)
    let ours = |out: &[u8]| -> String {
        s(out)
            .lines()
            .filter(|l| l.starts_with(&format!("{mnt} ")))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let list = m.revfs(&["list"]);
    assert_eq!(
        ours(&list.stdout),
        format!("{mnt}  {repo_arg}  {tip}  (not mounted; 2 uncommitted changes)\n")
    );
    let json = m.revfs(&["list", "-T", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let this = v
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["mountpoint"] == mnt.as_str())
        .expect("this mountpoint listed");
    assert_eq!(this["mounted"], false);
    assert_eq!(this["changes"], 2);

    let out = m.revfs(&["discard", &mnt]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        s(&out.stderr),
        format!(
            "abort: the working copy kept for {mnt} has uncommitted changes (parent {tip}):\n\
             M a\n? new\n\
             (resume it: revfs mount {repo_arg} {mnt}; or discard them too: revfs discard \
             --force {mnt})\n"
        )
    );
    // Nothing was lost by the refusals.
    m.remount(&repo, None);
    let st = m.revfs(&["status", "-R", &mnt]);
    assert_eq!(s(&st.stdout), "M a\n? new\n");
    m.unmount();

    let out = m.revfs(&["discard", "--force", &mnt]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(
        s(&out.stdout),
        format!(
            "discarded the working copy of {repo_arg} at {mnt} (parent {tip}): 2 uncommitted \
             changes, 1 ignored file dropped\n"
        )
    );
    assert_eq!(ours(&m.revfs(&["list"]).stdout), "");
    let out = m.revfs(&["discard", &mnt]);
    assert_eq!(
        s(&out.stderr),
        format!("abort: no working copy is kept for {mnt}\n")
    );
    // A fresh mount: the checkout of tip, nothing of the old changes.
    let out = m.revfs(&["mount", "-r", "0", &repo_arg, &mnt]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(std::fs::read_to_string(m.dir.join("a")).unwrap(), "0\n");
    assert!(!m.dir.join("new").exists() && !m.dir.join("build").exists());
    m.unmount();

    // A clean kept working copy discards without --force.
    let out = m.revfs(&["discard", &mnt]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert!(s(&out.stdout).contains(": 0 uncommitted changes, 0 ignored files dropped\n"));
}
