//! Fifos, sockets and device nodes in a mount: they can be made and removed as on a local
//! file system, survive a remount and a commit, and are never tracked (status does not list
//! them, as hg's does not).

use revfs_tests::hg_cmd;
use revfs_tests::mount::Mount;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::process::Command;

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn fifos_sockets_and_devices_live_in_the_working_copy_only() {
    let tmp = revfs_tests::scratch_dir();
    assert!(hg_cmd(tmp.path(), &["init", "repo"]).status.success());
    let repo = tmp.path().join("repo");
    std::fs::write(repo.join("a"), b"a\n").unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qAm", "0", "-d", "0 0"])
        .status
        .success());
    let m = Mount::new(&repo, None);
    let ok = |c: &mut Command| assert!(c.status().unwrap().success());
    ok(Command::new("mkfifo").arg(m.dir.join("fifo")));
    ok(Command::new("mknod")
        .arg(m.dir.join("null"))
        .args(["c", "1", "3"]));
    ok(Command::new("mknod")
        .arg(m.dir.join("blk"))
        .args(["b", "7", "200"]));
    let sock = std::os::unix::net::UnixListener::bind(m.dir.join("sock")).unwrap();
    drop(sock);
    let check = |m: &Mount| {
        let t = |n: &str| std::fs::symlink_metadata(m.dir.join(n)).unwrap();
        assert!(t("fifo").file_type().is_fifo());
        assert!(t("sock").file_type().is_socket());
        assert!(t("null").file_type().is_char_device());
        assert_eq!(t("null").rdev(), libc_makedev(1, 3));
        assert!(t("blk").file_type().is_block_device());
        assert_eq!(t("blk").rdev(), libc_makedev(7, 200));
    };
    check(&m);
    // The mount is `nodev`: a device node made in it gives no access to the device.
    let e = std::fs::read(m.dir.join("null")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    let rv = |args: &[&str]| {
        let mut full = vec!["-R", m.dir.to_str().unwrap()];
        full.extend_from_slice(args);
        m.revfs(&full)
    };
    assert_eq!(s(&rv(&["status"]).stdout), "");
    std::fs::write(m.dir.join("a"), b"changed\n").unwrap();
    assert!(rv(&["commit", "-m", "c"]).status.success());
    check(&m);
    m.unmount();
    m.remount(&repo, None);
    check(&m);
    assert_eq!(s(&rv(&["status"]).stdout), "");
    for n in ["fifo", "sock", "null", "blk"] {
        std::fs::remove_file(m.dir.join(n)).unwrap();
    }
    m.unmount();
    m.remount(&repo, None);
    let names: Vec<_> = std::fs::read_dir(&m.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["a"]);
}

/// `makedev` as glibc encodes it.
fn libc_makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xfffff000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffffff00) << 12)
        | (minor & 0xff)
}
