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

/// Writes, truncates and chowns of set-user-ID and set-group-ID files in `dir`, by root
/// and by `nobody`; each file's mode after them (`name mode`, octal).
fn privilege_story(dir: &std::path::Path) -> Vec<String> {
    let d = dir.display();
    let make = |name: &str, mode: u32| {
        let f = dir.join(name);
        std::fs::write(&f, b"#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    for (name, mode) in [
        ("w_root", 0o6777),
        ("w_nobody", 0o6777),
        ("t_nobody", 0o6777),
        ("sgid_no_gx", 0o2767),
        ("chown_root", 0o6755),
        ("chown_no_gx", 0o2745),
    ] {
        make(name, mode);
    }
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("w_root"))
            .unwrap();
        f.write_all(b"# root\n").unwrap();
    }
    for script in [
        format!("echo '# nobody' >> {d}/w_nobody"),
        format!(": > {d}/t_nobody"),
        format!("echo '# nobody' >> {d}/sgid_no_gx"),
    ] {
        let (ok, err) = as_nobody(&script);
        assert!(ok, "{script}: {err}");
    }
    for name in ["chown_root", "chown_no_gx"] {
        let out = Command::new("chown")
            .args(["nobody", &format!("{d}/{name}")])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let mut modes = Vec::new();
    for name in [
        "w_root",
        "w_nobody",
        "t_nobody",
        "sgid_no_gx",
        "chown_root",
        "chown_no_gx",
    ] {
        let mode = std::fs::metadata(dir.join(name))
            .unwrap()
            .permissions()
            .mode();
        modes.push(format!("{name} {:o}", mode & 0o7777));
    }
    modes
}

#[test]
fn writes_truncates_and_chowns_kill_set_user_id_as_on_a_local_file_system() {
    // The kernel leaves this to the daemon (FUSE_HANDLE_KILLPRIV_V2): a write or truncate
    // by a user without CAP_FSETID, and any chown, drop set-user-ID, and set-group-ID when
    // the group may execute or the caller is neither in the file's group nor root; root's
    // write keeps them.
    let local = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(local.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let expected = privilege_story(local.path());
    assert_eq!(
        expected,
        [
            "w_root 6777",
            "w_nobody 777",
            "t_nobody 777",
            "sgid_no_gx 767",
            "chown_root 755",
            "chown_no_gx 2745"
        ]
    );
    let tmp = open_tmp();
    let repo = repo(tmp.path());
    let m = Mount::with_args(&repo, &["--allow-other"]);
    std::fs::set_permissions(
        m.dir.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir(m.dir.join("p")).unwrap();
    std::fs::set_permissions(m.dir.join("p"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(privilege_story(&m.dir.join("p")), expected);
    // As the journal has them: the same after a remount.
    m.unmount();
    m.remount(&repo, None);
    let mut again = Vec::new();
    for line in &expected {
        let name = line.split(' ').next().unwrap();
        let mode = std::fs::metadata(m.dir.join("p").join(name))
            .unwrap()
            .permissions()
            .mode();
        again.push(format!("{name} {:o}", mode & 0o7777));
    }
    assert_eq!(again, expected);
}

#[test]
fn with_passthrough_writes_truncates_and_chowns_kill_set_user_id_as_on_a_local_file_system() {
    let local = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(local.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let expected = privilege_story(local.path());
    let tmp = open_tmp();
    let repo = repo(tmp.path());
    let m = Mount::with_config_args(&repo, "[mount]\npassthrough = true\n", &["--allow-other"]);
    std::fs::set_permissions(
        m.dir.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir(m.dir.join("p")).unwrap();
    std::fs::set_permissions(m.dir.join("p"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(privilege_story(&m.dir.join("p")), expected);
}
