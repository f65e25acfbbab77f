//! What tools expect of a file system, as ext4 does it: times that survive a remount (a
//! directory's mtime changed by what is created, removed or renamed in it, every changed
//! entry's ctime), and `statfs` numbers that add up.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_repo};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// (path, mtime s, mtime ns, ctime s, ctime ns) of each entry, without following links.
fn times(root: &Path, paths: &[&str]) -> Vec<(String, i64, i64, i64, i64)> {
    paths
        .iter()
        .map(|p| {
            let m =
                std::fs::symlink_metadata(root.join(p)).unwrap_or_else(|e| panic!("stat {p}: {e}"));
            (
                p.to_string(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            )
        })
        .collect()
}

/// A pause long enough for the next change to get another time.
fn tick() {
    std::thread::sleep(Duration::from_millis(20));
}

#[test]
fn directory_mtimes_and_ctimes_survive_a_remount_a_kill_and_a_commit_exactly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = hg_repo(
        tmp.path(),
        &[
            ("d/a", "a\n"),
            ("d/b", "b\n"),
            ("e/c", "c\n"),
            ("u/v", "v\n"),
            ("top", "t\n"),
        ],
    );
    let m = Mount::new(&repo, None);
    let mnt = &m.dir;
    let checkout = times(mnt, &["u", "u/v"]);
    tick();
    std::fs::create_dir(mnt.join("new")).unwrap();
    tick();
    std::fs::write(mnt.join("new/f"), "f\n").unwrap();
    tick();
    std::fs::write(mnt.join("d/x"), "x\n").unwrap();
    tick();
    std::fs::remove_file(mnt.join("e/c")).unwrap();
    tick();
    std::fs::rename(mnt.join("d/a"), mnt.join("new/a2")).unwrap();
    tick();
    std::fs::set_permissions(
        mnt.join("d/b"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    tick();
    std::os::unix::fs::symlink("d/b", mnt.join("link")).unwrap();
    tick();
    std::fs::write(mnt.join("top"), "changed\n").unwrap();
    let paths = [
        "", "d", "e", "new", "new/f", "new/a2", "d/x", "d/b", "link", "top", "u", "u/v",
    ];
    let before = times(mnt, &paths);
    // The changes did change times (a test of the test): "d" had the checkout's, as "u".
    assert_ne!((before[1].1, before[1].2), (checkout[0].1, checkout[0].2));
    assert_ne!((before[1].3, before[1].4), (before[2].3, before[2].4));

    m.unmount();
    m.remount(&repo, None);
    assert_eq!(times(mnt, &paths), before, "after an unmount and a remount");
    assert_eq!(times(mnt, &["u", "u/v"]), checkout, "untouched entries");

    m.kill_daemon();
    m.unmount();
    m.remount(&repo, None);
    assert_eq!(times(mnt, &paths), before, "after kill -9 and a remount");

    // A commit rewrites the journal against the new parent: times stay.
    let mnt_arg = mnt.display().to_string();
    let out = m.revfs(&["commit", "-R", &mnt_arg, "-A", "-m", "c", "-u", "t"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = times(mnt, &paths);
    m.unmount();
    m.remount(&repo, Some("tip"));
    assert_eq!(
        times(mnt, &paths),
        committed,
        "after a commit and a remount"
    );
    let log = hg_cmd(&repo, &["log", "-r", "tip", "-T", "{desc}"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "c");
    m.unmount();
}

/// `stat -f` of `path`: total inodes, free inodes, total blocks, fundamental block size.
fn statfs(path: &Path) -> (u64, u64, u64, u64) {
    let out = std::process::Command::new("stat")
        .args(["-f", "-c", "%c %d %b %S"])
        .arg(path)
        .output()
        .expect("stat -f");
    assert!(out.status.success(), "stat -f {}", path.display());
    let v: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|n| n.parse().expect("number"))
        .collect();
    (v[0], v[1], v[2], v[3])
}

/// `df -i` of `path`: inodes, used, free.
fn df_inodes(path: &Path) -> (i64, i64, i64) {
    let out = std::process::Command::new("df")
        .args(["--output=itotal,iused,iavail"])
        .arg(path)
        .output()
        .expect("df -i");
    assert!(out.status.success(), "df -i {}", path.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<i64> = text
        .lines()
        .nth(1)
        .expect("df line")
        .split_whitespace()
        .map(|n| n.parse().expect("number"))
        .collect();
    (v[0], v[1], v[2])
}

#[test]
fn statfs_inodes_add_up_and_blocks_are_the_state_directory_file_system() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = hg_repo(tmp.path(), &[("a", "a\n"), ("d/b", "b\n")]);
    let m = Mount::new(&repo, None);
    // Inodes in use are those the daemon has built: list the root first, so that creating
    // files in it builds only theirs.
    assert_eq!(std::fs::read_dir(&m.dir).unwrap().count(), 2);
    let (files, ffree, blocks, bsize) = statfs(&m.dir);
    let (_, _, state_blocks, state_bsize) = statfs(&m.state_dir());
    assert_eq!((blocks, bsize), (state_blocks, state_bsize));
    assert!(files >= ffree, "{files} inodes, {ffree} free");
    let (itotal, iused, ifree) = df_inodes(&m.dir);
    assert!(
        iused >= 0 && itotal == iused + ifree,
        "df -i: {itotal} {iused} {ifree}"
    );

    for i in 0..100 {
        std::fs::write(m.dir.join(format!("n{i}")), "n\n").unwrap();
    }
    let (files2, ffree2, _, _) = statfs(&m.dir);
    assert_eq!(
        files2 - ffree2,
        files - ffree + 100,
        "100 new files are 100 more inodes in use"
    );
    let (itotal, iused2, ifree) = df_inodes(&m.dir);
    assert!(itotal == iused2 + ifree, "df -i: {itotal} {iused2} {ifree}");
    assert_eq!(iused2, iused + 100);
    m.unmount();
}

/// Runs a Python script with `root` as its argument; its standard output.
fn python(script: &str, root: &Path) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(root)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python3 in {}: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Extended attributes: every call and its result (or errno), the same in a mount as on
/// ext4. Expects files `f` (new) and `store` (tracked, unchanged), directory `d`, symlink
/// `l`.
const XATTR_OPS: &str = r#"
import errno, os, sys
root = sys.argv[1]
def t(label, f):
    try:
        r = f()
        if isinstance(r, list):
            r = sorted(r)
        print(label, 'ok', repr(r))
    except OSError as e:
        print(label, errno.errorcode[e.errno])
p = lambda n: os.path.join(root, n)
t('set f', lambda: os.setxattr(p('f'), 'user.a', b'1'))
t('get f', lambda: os.getxattr(p('f'), 'user.a'))
t('create again', lambda: os.setxattr(p('f'), 'user.a', b'2', os.XATTR_CREATE))
t('replace missing', lambda: os.setxattr(p('f'), 'user.b', b'2', os.XATTR_REPLACE))
t('replace', lambda: os.setxattr(p('f'), 'user.a', b'3', os.XATTR_REPLACE))
t('set binary', lambda: os.setxattr(p('f'), 'user.bin', bytes(range(256)) * 4))
t('set empty', lambda: os.setxattr(p('f'), 'user.empty', b''))
t('get empty', lambda: os.getxattr(p('f'), 'user.empty'))
t('list f', lambda: os.listxattr(p('f')))
t('get missing', lambda: os.getxattr(p('f'), 'user.zz'))
t('long name', lambda: os.setxattr(p('f'), 'user.' + 'n' * 251, b'x'))
t('remove', lambda: os.removexattr(p('f'), 'user.empty'))
t('remove again', lambda: os.removexattr(p('f'), 'user.empty'))
t('set dir', lambda: os.setxattr(p('d'), 'user.dir', b'dv'))
t('get dir', lambda: os.getxattr(p('d'), 'user.dir'))
t('set link', lambda: os.setxattr(p('l'), 'user.x', b'1', follow_symlinks=False))
t('list link', lambda: os.listxattr(p('l'), follow_symlinks=False))
t('set store', lambda: os.setxattr(p('store'), 'user.s', b'kept'))
with open(p('store'), 'a') as f:
    f.write('appended\n')
t('get store after a write', lambda: os.getxattr(p('store'), 'user.s'))
t('list store', lambda: os.listxattr(p('store')))
"#;

/// What the attributes are, read back.
const XATTR_READ: &str = r#"
import os, sys
root = sys.argv[1]
for n in ['f', 'd', 'store']:
    path = os.path.join(root, n)
    print(n, [(a, os.getxattr(path, a)) for a in sorted(os.listxattr(path))])
"#;

#[test]
fn user_xattrs_behave_as_on_ext4_and_survive_a_copy_up_a_remount_a_kill_and_a_commit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = hg_repo(tmp.path(), &[("store", "s\n"), ("d/x", "x\n")]);
    let m = Mount::new(&repo, None);
    let ext4 = tmp.path().join("ext4");
    std::fs::create_dir(&ext4).unwrap();
    std::fs::write(ext4.join("store"), "s\n").unwrap();
    std::fs::create_dir(ext4.join("d")).unwrap();
    for root in [&m.dir, &ext4] {
        std::fs::write(root.join("f"), "f\n").unwrap();
        std::os::unix::fs::symlink("f", root.join("l")).unwrap();
    }
    let want = python(XATTR_OPS, &ext4);
    assert!(
        want.contains("set f ok None") && want.contains("set link EPERM"),
        "{want}"
    );
    assert_eq!(python(XATTR_OPS, &m.dir), want);
    let read = python(XATTR_READ, &m.dir);
    assert_eq!(read, python(XATTR_READ, &ext4));
    // Only the user namespace is kept.
    let other = python(
        "import errno, os, sys\n\
         try:\n    os.setxattr(os.path.join(sys.argv[1], 'f'), 'trusted.t', b'1')\n\
         except OSError as e:\n    print(errno.errorcode[e.errno])\n",
        &m.dir,
    );
    assert_eq!(other, "ENOTSUP\n", "EOPNOTSUPP");
    // Attributes change no status.
    let mnt = m.dir.display().to_string();
    let st = m.revfs(&["status", "-R", &mnt]);
    assert_eq!(String::from_utf8_lossy(&st.stdout), "M store\n? f\n? l\n");

    m.unmount();
    m.remount(&repo, None);
    assert_eq!(python(XATTR_READ, &m.dir), read, "after a remount");
    m.kill_daemon();
    m.unmount();
    m.remount(&repo, None);
    assert_eq!(
        python(XATTR_READ, &m.dir),
        read,
        "after kill -9 and a remount"
    );
    let out = m.revfs(&["commit", "-R", &mnt, "-A", "-m", "c", "-u", "t"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    m.unmount();
    m.remount(&repo, Some("tip"));
    assert_eq!(
        python(XATTR_READ, &m.dir),
        read,
        "after a commit and a remount"
    );
    m.unmount();
}

/// Holes and fallocate modes: sizes, blocks, SEEK_DATA/SEEK_HOLE answers and contents after
/// each step, the same in a mount as on ext4. Expects a tracked file `store` (unchanged).
const HOLE_OPS: &str = r#"
import ctypes, errno, hashlib, os, sys
root = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE = 1, 2, 16
def seeks(fd, size):
    out = []
    for off in sorted({0, 4096, 65536, 1 << 20, size - 1, size} - {-1}):
        for whence, name in ((os.SEEK_DATA, 'D'), (os.SEEK_HOLE, 'H')):
            try:
                out.append('%s%d=%d' % (name, off, os.lseek(fd, off, whence)))
            except OSError as e:
                out.append('%s%d=%s' % (name, off, errno.errorcode[e.errno]))
    return ' '.join(out)
def show(label, path):
    fd = os.open(path, os.O_RDONLY)
    st = os.fstat(fd)
    data = os.pread(fd, st.st_size, 0)
    print(label, st.st_size, st.st_blocks, hashlib.sha1(data).hexdigest()[:12], seeks(fd, st.st_size))
    os.close(fd)
def fallocate(path, mode, off, length, label):
    fd = os.open(path, os.O_RDWR)
    rc = libc.fallocate(fd, mode, off, length)
    os.close(fd)
    print(label, 'ok' if rc == 0 else errno.errorcode[ctypes.get_errno()])
    show(label, path)
f = os.path.join(root, 'sparse')
fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b'x' * 4096, 0)
os.pwrite(fd, b'y' * 4096, 1 << 20)
os.fsync(fd)
os.close(fd)
show('written', f)
fallocate(f, KEEP_SIZE, 1 << 20, 1 << 21, 'keep size')
fallocate(f, PUNCH_HOLE | KEEP_SIZE, 0, 4096, 'punch')
fallocate(f, ZERO_RANGE, 65536, 8192, 'zero range')
fallocate(f, 0, 2 << 20, 4096, 'extend')
fallocate(f, PUNCH_HOLE, 0, 4096, 'punch without keep size')
show('store', os.path.join(root, 'store'))
fallocate(os.path.join(root, 'store'), PUNCH_HOLE | KEEP_SIZE, 0, 4096, 'punch store')
"#;

#[test]
fn holes_seek_data_and_fallocate_modes_behave_as_on_ext4() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let big: String = (0..2000).map(|i| format!("line {i:08}\n")).collect();
    let repo = hg_repo(tmp.path(), &[("store", big.as_str())]);
    let m = Mount::new(&repo, None);
    let ext4 = tmp.path().join("ext4");
    std::fs::create_dir(&ext4).unwrap();
    std::fs::write(ext4.join("store"), &big).unwrap();
    let want = python(HOLE_OPS, &ext4);
    assert!(want.contains("H0=4096"), "ext4 reports the hole:\n{want}");
    let got = python(HOLE_OPS, &m.dir);
    assert_eq!(got, want);
    // The punched store file is a change like any write.
    let mnt = m.dir.display().to_string();
    let st = m.revfs(&["status", "-R", &mnt]);
    assert_eq!(String::from_utf8_lossy(&st.stdout), "M store\n? sparse\n");
    m.unmount();
}
