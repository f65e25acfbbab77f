//! POSIX behaviour of writes through the mount, beyond what the random status test covers.

use revfs_tests::fixtures;
use revfs_tests::mount::Mount;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

fn status(mount: &Mount) -> String {
    let out = revfs_tests::revfs(&mount.dir, &["status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_file_unlinked_while_open_stays_readable_and_writable() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let path = mount.dir.join("a.txt");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(!path.exists());
    let mut buf = String::new();
    f.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "hello\nworld\n");
    f.write_all(b"more\n").unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    buf.clear();
    f.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "hello\nworld\nmore\n");
    assert_eq!(status(&mount), "! a.txt\n");
    drop(f);
}

#[test]
fn truncate_fallocate_and_exec_bits() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let path = mount.dir.join("a.txt");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(3)
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"hel");
    // O_TRUNC then write back the original bytes: clean again.
    std::fs::write(&path, b"hello\nworld\n").unwrap();
    assert_eq!(status(&mount), "");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(status(&mount), "M a.txt\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(status(&mount), "");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(mount.dir.join("b/c.txt"))
        .unwrap();
    let fd = std::os::unix::io::AsRawFd::as_raw_fd(&f);
    // SAFETY: fallocate on a valid fd.
    assert_eq!(unsafe { libc_fallocate(fd, 0, 0, 100) }, 0);
    assert_eq!(
        std::fs::metadata(mount.dir.join("b/c.txt")).unwrap().len(),
        100
    );
    assert_eq!(status(&mount), "M b/c.txt\n");
}

/// A status that found a written file equal to its revision remembers it until the file is
/// written again: every change after that, of the same size or through any call, shows.
#[test]
fn a_file_status_found_clean_is_compared_again_after_any_change() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let path = mount.dir.join("a.txt");
    let original = b"hello\nworld\n";
    std::fs::write(&path, original).unwrap();
    assert_eq!(status(&mount), "");
    assert_eq!(status(&mount), "", "remembered clean");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let pwrite = |data: &[u8], at: u64| {
        std::os::unix::fs::FileExt::write_all_at(&f, data, at).unwrap();
        f.sync_data().unwrap();
    };
    // Each change keeps the size: only the content tells.
    pwrite(b"J", 0);
    assert_eq!(status(&mount), "M a.txt\n", "a write of one byte");
    pwrite(b"h", 0);
    assert_eq!(status(&mount), "");
    let fd = std::os::unix::io::AsRawFd::as_raw_fd(&f);
    // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: zeros, same size.
    // SAFETY: fallocate on a valid fd.
    assert_eq!(unsafe { libc_fallocate(fd, 0x02 | 0x01, 0, 4) }, 0);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        original.len() as u64
    );
    assert_eq!(status(&mount), "M a.txt\n", "a hole punched");
    pwrite(b"hell", 0);
    assert_eq!(status(&mount), "");
    f.set_len(3).unwrap();
    f.set_len(original.len() as u64).unwrap();
    assert_eq!(status(&mount), "M a.txt\n", "truncated and extended");
    pwrite(original, 0);
    assert_eq!(status(&mount), "");
    drop(f);
    // Replaced by a file of the same size through a rename over it.
    let tmp = mount.dir.join("a.tmp");
    std::fs::write(&tmp, b"HELLO\nworld\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert_eq!(status(&mount), "M a.txt\n", "replaced");
    std::fs::write(&path, original).unwrap();
    assert_eq!(status(&mount), "");
    // Known only to the daemon that compared: after a remount, compared again.
    mount.unmount();
    mount.remount(&fixtures().join("tiny"), None);
    assert_eq!(status(&mount), "");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map(|f| std::os::unix::fs::FileExt::write_all_at(&f, b"W", 6).unwrap())
        .unwrap();
    assert_eq!(status(&mount), "M a.txt\n");
}

extern "C" {
    #[link_name = "fallocate"]
    fn libc_fallocate(fd: i32, mode: i32, offset: i64, len: i64) -> i32;
    fn renameat2(
        olddirfd: i32,
        oldpath: *const i8,
        newdirfd: i32,
        newpath: *const i8,
        flags: u32,
    ) -> i32;
}

fn rename2(from: &std::path::Path, to: &std::path::Path, flags: u32) -> std::io::Result<()> {
    let a = std::ffi::CString::new(from.as_os_str().as_bytes()).unwrap();
    let b = std::ffi::CString::new(to.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C strings; AT_FDCWD (-100) with absolute paths.
    if unsafe { renameat2(-100, a.as_ptr(), -100, b.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn renames_with_noreplace_and_exchange() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let (a, c) = (mount.dir.join("a.txt"), mount.dir.join("b/c.txt"));
    let err = rename2(&a, &c, 1).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(17),
        "RENAME_NOREPLACE onto an existing file: EEXIST"
    );
    rename2(&a, &c, 2).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), b"c\n");
    assert_eq!(std::fs::read(&c).unwrap(), b"hello\nworld\n");
    assert_eq!(status(&mount), "M a.txt\nM b/c.txt\n");
    rename2(&a, &c, 2).unwrap();
    assert_eq!(status(&mount), "");
    // A directory cannot be renamed over a non-empty one, nor into itself.
    std::fs::create_dir(mount.dir.join("d")).unwrap();
    std::fs::write(mount.dir.join("d/x"), b"x").unwrap();
    assert_eq!(
        std::fs::rename(mount.dir.join("b"), mount.dir.join("d"))
            .unwrap_err()
            .raw_os_error(),
        Some(39)
    );
    assert_eq!(
        std::fs::rename(mount.dir.join("b"), mount.dir.join("b/inner"))
            .unwrap_err()
            .raw_os_error(),
        Some(22)
    );
    assert_eq!(
        std::fs::remove_dir(mount.dir.join("d"))
            .unwrap_err()
            .raw_os_error(),
        Some(39)
    );
    // A hard link is another name of the same file (tests/tests/hard_links.rs has more).
    std::fs::hard_link(&a, mount.dir.join("hard")).unwrap();
    use std::os::unix::fs::MetadataExt;
    let (m, h) = (
        std::fs::metadata(&a).unwrap(),
        std::fs::metadata(mount.dir.join("hard")).unwrap(),
    );
    assert_eq!((m.ino(), m.nlink()), (h.ino(), 2));
}

#[test]
fn unmount_and_mount_keep_the_working_copy() {
    let repo = fixtures().join("tiny");
    let mount = Mount::new(&repo, None);
    std::fs::write(mount.dir.join("new.txt"), b"new\n").unwrap();
    std::fs::rename(mount.dir.join("b"), mount.dir.join("bb")).unwrap();
    std::os::unix::fs::symlink("a.txt", mount.dir.join("link")).unwrap();
    assert!(revfs_tests::revfs(&mount.dir, &["add", "new.txt"])
        .status
        .success());
    let before = status(&mount);
    let snap = revfs_tests::mount::snapshot(&mount.dir);
    mount.unmount();
    mount.remount(&repo, None);
    assert_eq!(status(&mount), before);
    assert_eq!(revfs_tests::mount::snapshot(&mount.dir), snap);
    assert_eq!(before, "A new.txt\n! b/c.txt\n? bb/c.txt\n? link\n");
}

#[test]
fn revert_restores_content_and_the_kernel_sees_it() {
    let mount = Mount::new(&fixtures().join("tiny"), None);
    let a = mount.dir.join("a.txt");
    std::fs::write(&a, b"changed\n").unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), b"changed\n");
    std::fs::remove_file(mount.dir.join("b/c.txt")).unwrap();
    let out = revfs_tests::revfs(&mount.dir, &["revert", "--all"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "reverting a.txt\nreverting b/c.txt\n"
    );
    // The page cache and the negative entry must both be gone.
    assert_eq!(std::fs::read(&a).unwrap(), b"hello\nworld\n");
    assert_eq!(std::fs::read(mount.dir.join("b/c.txt")).unwrap(), b"c\n");
    assert_eq!(
        std::fs::read(mount.dir.join("a.txt.orig")).unwrap(),
        b"changed\n"
    );
    assert_eq!(status(&mount), "? a.txt.orig\n");
}

/// Owners, access times and link counts: chown and utimensat stick through a remount and a
/// commit (which rewrites the journal); directories count their subdirectories; a file
/// unlinked while open has no links.
#[test]
fn owners_access_times_and_link_counts_are_kept() {
    use std::os::unix::fs::MetadataExt;
    let tmp = revfs_tests::fixture_copy("tiny");
    let repo = tmp.path().join("repo");
    let mount = Mount::new(&repo, None);
    let a = mount.dir.join("a.txt");
    std::os::unix::fs::chown(&a, Some(65534), Some(65534)).unwrap();
    std::fs::create_dir(mount.dir.join("newdir")).unwrap();
    std::os::unix::fs::chown(mount.dir.join("newdir"), None, Some(4321)).unwrap();
    let atime = std::time::UNIX_EPOCH + std::time::Duration::new(2_500_000_000, 123_456_789);
    std::fs::File::open(mount.dir.join("b/c.txt"))
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_accessed(atime))
        .unwrap();
    let check = |when: &str| {
        let m = std::fs::metadata(&a).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65534), "{when}");
        let d = std::fs::metadata(mount.dir.join("newdir")).unwrap();
        assert_eq!((d.uid(), d.gid()), (0, 4321), "{when}");
        let c = std::fs::metadata(mount.dir.join("b/c.txt")).unwrap();
        assert_eq!(
            (c.atime(), c.atime_nsec()),
            (2_500_000_000, 123_456_789),
            "{when}"
        );
        // The root holds b/ and newdir/ (and the hidden .revfs is not counted).
        assert_eq!(std::fs::metadata(&mount.dir).unwrap().nlink(), 4, "{when}");
    };
    check("at once");
    assert_eq!(status(&mount), "", "owners and times change no status");
    mount.unmount();
    mount.remount(&repo, None);
    check("after a remount");
    std::fs::write(mount.dir.join("b/d.txt"), b"new\n").unwrap();
    let out = mount.revfs(&["-R", mount.dir.to_str().unwrap(), "commit", "-qAm", "d"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check("after a commit");
    mount.unmount();
    mount.remount(&repo, None);
    check("after a commit and a remount");

    let f = mount.dir.join("gone.txt");
    let file = std::fs::File::create(&f).unwrap();
    std::fs::remove_file(&f).unwrap();
    assert_eq!(file.metadata().unwrap().nlink(), 0);
}
