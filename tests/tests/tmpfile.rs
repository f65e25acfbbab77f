//! `O_TMPFILE`: a file made with no name, written, then linked into the tree with `linkat`
//! (through `/proc/self/fd` or `AT_EMPTY_PATH`), as editors and package managers write
//! files atomically. The same steps run on ext4 (a directory beside the test's) and in a
//! mount must tell the same story; in the mount, what was linked is a new file to hg, and
//! survives a kill -9 of the daemon once fsync'd, and what never got a name leaves nothing.

use revfs_tests::hg_repo;
use revfs_tests::mount::Mount;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// `open(dir, O_TMPFILE | extra, mode)`.
fn tmpfile(dir: &Path, extra: i32, mode: u32) -> std::io::Result<i32> {
    // SAFETY: a valid C string; the descriptor returned is owned by the caller.
    let fd = unsafe { libc::open(c(dir).as_ptr(), libc::O_TMPFILE | extra, mode) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

fn write(fd: i32, data: &[u8]) {
    // SAFETY: `data` is valid for its length; `fd` is open.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    assert_eq!(
        n,
        data.len() as isize,
        "{}",
        std::io::Error::last_os_error()
    );
}

fn fstat(fd: i32) -> libc::stat {
    // SAFETY: a zeroed stat is a valid out-buffer; `fd` is open.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    st
}

fn close(fd: i32) {
    // SAFETY: `fd` is open and ours.
    unsafe { libc::close(fd) };
}

/// `linkat` of descriptor `fd` to `to`: through `/proc/self/fd` with AT_SYMLINK_FOLLOW, or
/// with AT_EMPTY_PATH. The error's name, or "ok".
fn link(fd: i32, to: &Path, empty_path: bool) -> String {
    let to = c(to);
    // SAFETY: valid C strings; `fd` is open.
    let r = unsafe {
        if empty_path {
            libc::linkat(
                fd,
                c"".as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        } else {
            let proc_path = CString::new(format!("/proc/self/fd/{fd}")).unwrap();
            libc::linkat(
                libc::AT_FDCWD,
                proc_path.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        }
    };
    if r == 0 {
        "ok".into()
    } else {
        std::io::Error::last_os_error().to_string()
    }
}

/// The story of the usual steps in `dir`, one line each.
fn story(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    // Made, written, linked, written again through the descriptor.
    let fd = tmpfile(dir, libc::O_RDWR, 0o640).unwrap();
    write(fd, b"made with no name\n");
    let st = fstat(fd);
    out.push(format!(
        "nameless: nlink {} size {} mode {:o}",
        st.st_nlink,
        st.st_size,
        st.st_mode & 0o7777
    ));
    out.push(format!("link: {}", link(fd, &dir.join("linked"), false)));
    write(fd, b"and more\n");
    out.push(format!("linked: nlink {}", fstat(fd).st_nlink));
    out.push(format!(
        "link again: {}",
        link(fd, &dir.join("second"), false)
    ));
    out.push(format!(
        "link over a name: {}",
        link(fd, &dir.join("linked"), false)
    ));
    close(fd);
    // O_EXCL: never linkable.
    let fd = tmpfile(dir, libc::O_RDWR | libc::O_EXCL, 0o600).unwrap();
    out.push(format!(
        "O_EXCL link: {}",
        link(fd, &dir.join("excl"), false)
    ));
    close(fd);
    // Never linked: gone at close.
    let fd = tmpfile(dir, libc::O_WRONLY, 0o600).unwrap();
    write(fd, &[7; 100_000]);
    close(fd);
    // AT_EMPTY_PATH (root may).
    let fd = tmpfile(dir, libc::O_RDWR, 0o644).unwrap();
    write(fd, b"linked by descriptor\n");
    out.push(format!(
        "AT_EMPTY_PATH: {}",
        link(fd, &dir.join("empty"), true)
    ));
    // SAFETY: `fd` is open.
    assert_eq!(unsafe { libc::fsync(fd) }, 0);
    close(fd);
    // Read-only O_TMPFILE is refused (EINVAL), and a file is not a directory.
    out.push(format!(
        "read-only: {:?}",
        tmpfile(dir, libc::O_RDONLY, 0o600).map_err(|e| e.to_string())
    ));
    out.push(format!(
        "in a file: {:?}",
        tmpfile(&dir.join("linked"), libc::O_RDWR, 0o600).map_err(|e| e.to_string())
    ));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    out.push(format!("listing: {names:?}"));
    for n in &names {
        let p = dir.join(n);
        let m = std::fs::metadata(&p).unwrap();
        out.push(format!(
            "{n}: nlink {} mode {:o} {:?}",
            m.nlink(),
            m.mode() & 0o7777,
            String::from_utf8_lossy(&std::fs::read(&p).unwrap())
        ));
    }
    out
}

#[test]
fn o_tmpfile_and_linkat_tell_the_same_story_as_on_ext4_and_survive_a_kill() {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let native = tmp.path().join("native");
    std::fs::create_dir(&native).unwrap();
    let want = story(&native);
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let m = Mount::new(&repo, None);
    let dir = m.dir.join("t");
    std::fs::create_dir(&dir).unwrap();
    assert_eq!(story(&dir), want, "ext4's story ({})", want.join("\n"));
    let status = |m: &Mount| {
        let out = m.revfs_in(&m.dir, &["status"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let expected = "? t/empty\n? t/linked\n? t/second\n";
    assert_eq!(status(&m), expected);
    // Every name's content, after the daemon is killed (its journal fsync'd by the
    // fsync above) and the mount made again; the never-linked file left no overlay file.
    let view = |d: &Path| {
        ["empty", "linked", "second"].map(|n| {
            (
                n,
                std::fs::read(d.join(n)).unwrap(),
                std::fs::metadata(d.join(n)).unwrap().mode() & 0o7777,
            )
        })
    };
    let before = view(&dir);
    m.kill_daemon();
    m.unmount();
    m.remount(&repo, None);
    assert_eq!(view(&dir), before, "after a kill -9 and a remount");
    assert_eq!(status(&m), expected, "after a kill -9 and a remount");
    let overlay_files = std::fs::read_dir(m.state_dir().join("overlay"))
        .map(|d| d.count())
        .unwrap_or(0);
    // Two overlay files: `linked` (with `second`, its other name) and `empty`.
    assert_eq!(overlay_files, 2, "overlay files after the remount");
}

#[test]
fn a_nameless_file_in_the_mount_belongs_to_its_creator_and_keeps_its_xattrs_once_linked() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = hg_repo(tmp.path(), &[("a", "a\n")]);
    let m = Mount::new(&repo, None);
    let fd = tmpfile(&m.dir, libc::O_RDWR, 0o600).unwrap();
    let (name, value) = (c"user.origin", b"editor");
    // SAFETY: valid C string and buffer; `fd` is open.
    let r = unsafe { libc::fsetxattr(fd, name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: `fd` is open.
    assert_eq!(unsafe { libc::fchmod(fd, 0o751) }, 0);
    assert_eq!(link(fd, &m.dir.join("saved"), false), "ok");
    close(fd);
    m.unmount();
    m.remount(&repo, None);
    let p = m.dir.join("saved");
    assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o751);
    let mut buf = [0u8; 64];
    let cp = c(&p);
    // SAFETY: valid C strings and buffer.
    let n = unsafe {
        libc::getxattr(
            cp.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    assert_eq!(
        n,
        value.len() as isize,
        "{}",
        std::io::Error::last_os_error()
    );
    assert_eq!(&buf[..value.len()], value);
}
