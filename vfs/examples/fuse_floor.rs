//! Benchmark (not a test): the floor of a FUSE round trip on this machine. Mounts a file
//! system that does no work (one 4 KiB file, attributes and entries valid for no time,
//! direct I/O) with fuser and revfs's session settings, then times `fstat` (a GETATTR),
//! `pread` (a READ) and `stat` by path (a LOOKUP and a GETATTR) in a loop, each a round
//! trip to the daemon. What a first read of a revfs mount costs above this is the
//! daemon's work (docs/BENCHMARKS.md, "The floor of a round trip").
//!
//! `cargo run --release -p revfs-vfs --example fuse_floor -- [THREADS] [N] [RING_THREADS]`
//! (8, 50000, 0). With RING_THREADS > 0, requests come through io_uring (that many threads
//! per CPU queue) when the kernel offers it (`/sys/module/fuse/parameters/enable_uring`).

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyEntry, ReplyOpen, Request,
    Session,
};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant, UNIX_EPOCH};

const FILE_INO: u64 = 2;
const SIZE: usize = 4096;
static DATA: [u8; SIZE] = [b'x'; SIZE];

fn attr(ino: u64) -> FileAttr {
    let dir = ino != FILE_INO;
    FileAttr {
        ino: INodeNo(ino),
        size: if dir { 0 } else { SIZE as u64 },
        blocks: 8,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: if dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: 0o755,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

struct Floor;

impl Filesystem for Floor {
    fn lookup(&self, _: &Request, _: INodeNo, name: &std::ffi::OsStr, reply: ReplyEntry) {
        if name == "f" {
            reply.entry(&Duration::ZERO, &attr(FILE_INO), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }
    fn getattr(&self, _: &Request, ino: INodeNo, _: Option<FileHandle>, reply: ReplyAttr) {
        reply.attr(&Duration::ZERO, &attr(ino.0));
    }
    fn open(&self, _: &Request, _: INodeNo, _: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _: &Request,
        _: INodeNo,
        _: FileHandle,
        offset: u64,
        size: u32,
        _: OpenFlags,
        _: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let start = usize::try_from(offset).map_or(SIZE, |o| o.min(SIZE));
        reply.data(&DATA[start..(start + size as usize).min(SIZE)]);
    }
}

fn time(n: u32, mut op: impl FnMut()) -> f64 {
    op();
    let t = Instant::now();
    for _ in 0..n {
        op();
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let ring_threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let dir = tempfile::Builder::new()
        .prefix("fuse-floor-")
        .tempdir_in("/var/tmp")?;
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("fuse-floor".into())];
    config.n_threads = Some(threads);
    config.clone_fd = true;
    config.io_uring = ring_threads > 0;
    config.io_uring_threads = ring_threads;
    let session = Session::new(Floor, dir.path(), &config)?.spawn()?;
    let path = dir.path().join("f");
    let file = std::fs::File::open(&path)?;
    let mut buf = [0u8; SIZE];
    println!(
        "{threads} FUSE threads, {ring_threads} io_uring threads a CPU, {n} calls each, microseconds per call:"
    );
    let fstat = time(n, || drop(file.metadata()));
    println!("fstat (GETATTR)             {fstat:6.1}");
    let pread = time(n, || drop(file.read_at(&mut buf, 0)));
    println!("pread (READ)                {pread:6.1}");
    let stat = time(n, || drop(std::fs::metadata(&path)));
    println!("stat by path (LOOKUP+GETATTR) {stat:4.1}");
    drop(file);
    session.umount_and_join()
}
