//! Who may use a mount: by default only the user who mounted it (no `allow_other`); with
//! `--allow-other`, the kernel checks permission bits (`default_permissions`) for everyone.
//! Run as root, with `nobody` as the other user.

use revfs_tests::hg_cmd;
use revfs_tests::mount::Mount;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

/// Runs `sh -c SCRIPT` as `nobody`; returns (success, stderr).
fn as_nobody(script: &str) -> (bool, String) {
    let out = Command::new("runuser")
        .args(["-u", "nobody", "--", "sh", "-c", script])
        .output()
        .expect("runuser");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn repo(dir: &std::path::Path) -> std::path::PathBuf {
    assert!(hg_cmd(dir, &["init", "repo"]).status.success());
    let repo = dir.join("repo");
    std::fs::write(repo.join("public.txt"), b"public\n").unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qAm", "0", "-d", "0 0"])
        .status
        .success());
    repo
}

/// A directory `nobody` may traverse, for the mountpoint.
fn open_tmp() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    tmp
}

#[test]
fn only_the_mounting_user_may_enter_a_mount_by_default() {
    let tmp = open_tmp();
    let repo = repo(tmp.path());
    let m = Mount::new(&repo, None);
    std::fs::set_permissions(
        m.dir.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_eq!(
        std::fs::read(m.dir.join("public.txt")).unwrap(),
        b"public\n"
    );
    let (ok, err) = as_nobody(&format!("cat {}/public.txt", m.dir.display()));
    assert!(!ok && err.contains("Permission denied"), "{err}");
}

#[test]
fn with_allow_other_the_kernel_checks_the_permission_bits() {
    let tmp = open_tmp();
    let repo = repo(tmp.path());
    let m = Mount::with_args(&repo, &["--allow-other"]);
    std::fs::set_permissions(
        m.dir.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let f = m.dir.join("public.txt");
    let (ok, err) = as_nobody(&format!("cat {}", f.display()));
    assert!(ok, "a 0644 file is readable by others: {err}");
    let (ok, err) = as_nobody(&format!("echo x >> {}", f.display()));
    assert!(
        !ok && err.contains("Permission denied"),
        "but not writable: {err}"
    );
    std::fs::write(m.dir.join("secret.txt"), b"secret\n").unwrap();
    std::fs::set_permissions(
        m.dir.join("secret.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let (ok, err) = as_nobody(&format!("cat {}/secret.txt", m.dir.display()));
    assert!(
        !ok && err.contains("Permission denied"),
        "a 0600 file is not: {err}"
    );
    assert_eq!(std::fs::read(f).unwrap(), b"public\n");
}
