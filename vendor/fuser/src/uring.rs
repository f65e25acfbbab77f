//! FUSE over io_uring (revfs patch; Linux 6.14+, written against 6.18's fs/fuse/dev_uring.c).
//!
//! With `FUSE_OVER_IO_URING` agreed at INIT, the kernel hands requests to per-CPU queues of
//! ring entries instead of `/dev/fuse` reads: each entry is a pair of buffers (a 288-byte
//! header and a payload as large as the biggest request or reply) registered with an
//! `IORING_OP_URING_CMD` (`FUSE_IO_URING_CMD_REGISTER`), completed when a request lands in
//! them, and answered with `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`, which also makes the entry
//! ready for the next request. The kernel puts a request on the queue of the CPU its caller
//! runs on, and uses the rings only once every possible CPU has a queue with a ready entry.
//! Forgets, interrupts and notifications still go through `/dev/fuse`, so the session keeps
//! its `/dev/fuse` threads beside these.
//!
//! Here each thread owns one ring with one entry, so an entry is ready exactly when its
//! thread waits. A request is copied out of the entry into the thread's own buffer in
//! `/dev/fuse` layout (header, the operation's fixed argument, the rest) and dispatched like
//! any other; its reply is copied into the entry and committed by whichever thread sends it.

use std::io;
use std::io::IoSlice;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue;
use io_uring::types;
use log::debug;
use log::error;
use parking_lot::Mutex;

use crate::Filesystem;
use crate::channel::Channel;
use crate::channel::ChannelSender;
use crate::ll::fuse_abi as abi;
use crate::ll::fuse_abi::fuse_opcode as op;
use crate::reply::ReplySender;
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

/// `FUSE_IO_URING_CMD_REGISTER`: register an entry's buffers and wait for a request.
const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: answer the entry's request and wait for the next.
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// Size of `fuse_in_header`.
const IN_HEADER: usize = 40;
/// Size of `fuse_out_header`.
const OUT_HEADER: usize = 16;

/// `struct fuse_uring_ent_in_out`.
#[repr(C)]
#[derive(Default)]
struct EntInOut {
    flags: u64,
    commit_id: u64,
    payload_sz: u32,
    padding: u32,
    reserved: u64,
}

/// `struct fuse_uring_req_header`: the in/out header, the operation's fixed argument, and
/// the entry's bookkeeping.
#[repr(C)]
struct ReqHeader {
    in_out: [u8; 128],
    op_in: [u8; 128],
    ent: EntInOut,
}

/// The kernel's number of FUSE queues for io_uring: `num_possible_cpus()`, from
/// `/sys/devices/system/cpu/possible` (a CPU list such as `0-3,8`).
pub fn io_uring_queues() -> usize {
    let parsed = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|text| {
            let mut n = 0usize;
            for part in text.trim().split(',') {
                let (a, b) = match part.split_once('-') {
                    Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
                    None => {
                        let a = part.parse::<usize>().ok()?;
                        (a, a)
                    }
                };
                n += b.checked_sub(a)? + 1;
            }
            Some(n)
        });
    parsed
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Size of an operation's fixed argument as the kernel puts it in `op_in` (its
/// `in_args[0]`, zero for operations whose first argument is a name), or `None` for an
/// operation fuser does not know (answered ENOSYS by the dispatcher).
fn op_in_size(opcode: u32) -> Option<usize> {
    use std::mem::size_of;
    let size = match opcode {
        x if x == op::FUSE_LOOKUP as u32
            || x == op::FUSE_SYMLINK as u32
            || x == op::FUSE_UNLINK as u32
            || x == op::FUSE_RMDIR as u32
            || x == op::FUSE_REMOVEXATTR as u32
            || x == op::FUSE_READLINK as u32
            || x == op::FUSE_STATFS as u32
            || x == op::FUSE_DESTROY as u32 =>
        {
            0
        }
        x if x == op::FUSE_GETATTR as u32 => size_of::<abi::fuse_getattr_in>(),
        x if x == op::FUSE_SETATTR as u32 => size_of::<abi::fuse_setattr_in>(),
        x if x == op::FUSE_MKNOD as u32 => size_of::<abi::fuse_mknod_in>(),
        x if x == op::FUSE_MKDIR as u32 => size_of::<abi::fuse_mkdir_in>(),
        x if x == op::FUSE_RENAME as u32 => size_of::<abi::fuse_rename_in>(),
        x if x == op::FUSE_RENAME2 as u32 => size_of::<abi::fuse_rename2_in>(),
        x if x == op::FUSE_LINK as u32 => size_of::<abi::fuse_link_in>(),
        x if x == op::FUSE_OPEN as u32 || x == op::FUSE_OPENDIR as u32 => {
            size_of::<abi::fuse_open_in>()
        }
        x if x == op::FUSE_CREATE as u32 || x == op::FUSE_TMPFILE as u32 => {
            size_of::<abi::fuse_create_in>()
        }
        x if x == op::FUSE_READ as u32
            || x == op::FUSE_READDIR as u32
            || x == op::FUSE_READDIRPLUS as u32 =>
        {
            size_of::<abi::fuse_read_in>()
        }
        x if x == op::FUSE_WRITE as u32 => size_of::<abi::fuse_write_in>(),
        x if x == op::FUSE_RELEASE as u32 || x == op::FUSE_RELEASEDIR as u32 => {
            size_of::<abi::fuse_release_in>()
        }
        x if x == op::FUSE_FSYNC as u32 || x == op::FUSE_FSYNCDIR as u32 => {
            size_of::<abi::fuse_fsync_in>()
        }
        x if x == op::FUSE_SETXATTR as u32 => size_of::<abi::fuse_setxattr_in>(),
        x if x == op::FUSE_GETXATTR as u32 || x == op::FUSE_LISTXATTR as u32 => {
            size_of::<abi::fuse_getxattr_in>()
        }
        x if x == op::FUSE_FLUSH as u32 => size_of::<abi::fuse_flush_in>(),
        x if x == op::FUSE_GETLK as u32
            || x == op::FUSE_SETLK as u32
            || x == op::FUSE_SETLKW as u32 =>
        {
            size_of::<abi::fuse_lk_in>()
        }
        x if x == op::FUSE_ACCESS as u32 => size_of::<abi::fuse_access_in>(),
        x if x == op::FUSE_BMAP as u32 => size_of::<abi::fuse_bmap_in>(),
        x if x == op::FUSE_IOCTL as u32 => size_of::<abi::fuse_ioctl_in>(),
        x if x == op::FUSE_POLL as u32 => size_of::<abi::fuse_poll_in>(),
        x if x == op::FUSE_FALLOCATE as u32 => size_of::<abi::fuse_fallocate_in>(),
        x if x == op::FUSE_LSEEK as u32 => size_of::<abi::fuse_lseek_in>(),
        x if x == op::FUSE_COPY_FILE_RANGE as u32 => size_of::<abi::fuse_copy_file_range_in>(),
        _ => return None,
    };
    Some(size.min(128))
}

/// One ring with one entry, shared by its thread (which waits for requests) and whichever
/// thread sends a reply (which commits it).
pub(crate) struct Ring {
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    /// Serialises pushes to the submission queue.
    submit: Mutex<()>,
    /// The entry's buffers. Never freed: the kernel keeps their addresses for as long as
    /// the connection lives, which may be longer than the ring (a few hundred KiB to a
    /// MiB a thread, once a session).
    header: *mut ReqHeader,
    payload: *mut u8,
    payload_len: usize,
    /// The registration's iovecs (read by the kernel at submission).
    iov: [libc::iovec; 2],
    qid: u16,
    fuse_fd: i32,
    /// Set once the ring is being torn down: replies are dropped.
    closed: AtomicBool,
    /// Set when a command could not be submitted: no completion will come, so the ring's
    /// thread ends instead of waiting for one.
    failed: AtomicBool,
    /// The `unique` of the request in the entry, for an error reply when its own reply
    /// cannot be sent.
    current: std::sync::atomic::AtomicU64,
    /// The `/dev/fuse` channel, for passthrough's backing-file ioctls.
    pub(crate) channel: ChannelSender,
}

// SAFETY: the raw buffers belong to the ring (never freed) and are written either by the
// kernel while the entry is in its hands or by one replying thread at a time: a request
// has exactly one reply, and the entry is not refilled before that reply's commit.
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").field("qid", &self.qid).finish()
    }
}

impl Ring {
    /// The CPU queue this ring serves.
    pub(crate) fn qid(&self) -> u16 {
        self.qid
    }

    fn new(qid: u16, fuse_fd: i32, payload_len: usize, channel: ChannelSender) -> io::Result<Ring> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(4)?;
        let header = Box::into_raw(Box::new(ReqHeader {
            in_out: [0; 128],
            op_in: [0; 128],
            ent: EntInOut::default(),
        }));
        let mut payload = std::mem::ManuallyDrop::new(vec![0u8; payload_len]);
        let payload_ptr = payload.as_mut_ptr();
        let iov = [
            libc::iovec {
                iov_base: header.cast(),
                iov_len: std::mem::size_of::<ReqHeader>(),
            },
            libc::iovec {
                iov_base: payload_ptr.cast(),
                iov_len: payload_len,
            },
        ];
        Ok(Ring {
            ring,
            submit: Mutex::new(()),
            header,
            payload: payload_ptr,
            payload_len,
            iov,
            qid,
            fuse_fd,
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            current: std::sync::atomic::AtomicU64::new(0),
            channel,
        })
    }

    /// Pushes one command for this ring's entry and submits it.
    fn command(&self, cmd_op: u32, commit_id: u64) -> io::Result<()> {
        let mut cmd = [0u8; 80];
        // struct fuse_uring_cmd_req { u64 flags; u64 commit_id; u16 qid; u8 padding[6]; }
        cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
        cmd[16..18].copy_from_slice(&self.qid.to_ne_bytes());
        let mut builder = opcode::UringCmd80::new(types::Fd(self.fuse_fd), cmd_op).cmd(cmd);
        if cmd_op == CMD_REGISTER {
            builder = builder.addr(Some(self.iov.as_ptr() as u64));
        }
        let mut entry = builder.build().user_data(u64::from(cmd_op));
        if cmd_op == CMD_REGISTER {
            // The crate has no setter for `len`, the number of iovecs (offset 24 of the
            // SQE, a u32): the registration's header and payload.
            // SAFETY: Entry128 is repr(C), 128 bytes, starting with the kernel's
            // io_uring_sqe, whose `len` field is at offset 24.
            unsafe {
                let base = (&mut entry as *mut squeue::Entry128).cast::<u8>();
                base.add(24).cast::<u32>().write_unaligned(2);
            }
        }
        let _guard = self.submit.lock();
        // SAFETY: pushes are serialised by `submit`; the iovecs and buffers outlive the
        // command (they live as long as the ring).
        unsafe {
            let mut sq = self.ring.submission_shared();
            if sq.push(&entry).is_err() {
                self.failed.store(true, Ordering::Release);
                return Err(io::Error::other("io_uring submission queue full"));
            }
            sq.sync();
        }
        loop {
            match self.ring.submitter().submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    error!("io_uring queue {}: submission failed: {e}", self.qid);
                    self.failed.store(true, Ordering::Release);
                    return Err(e);
                }
            }
        }
    }

    /// Answers the entry's request with the reply `data` (a `fuse_out_header` and its
    /// arguments, as written to `/dev/fuse`).
    pub(crate) fn reply(&self, data: &[IoSlice<'_>]) -> io::Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let total: usize = data.iter().map(|d| d.len()).sum();
        if total < OUT_HEADER {
            // Cannot come from fuser; answer EIO rather than leave the caller waiting.
            error!("io_uring reply shorter than its header");
            return self.reply_error(libc::EIO);
        }
        let rest = total - OUT_HEADER;
        let too_big = rest > self.payload_len;
        let mut header = [0u8; OUT_HEADER];
        let mut pos = 0usize;
        for slice in data {
            let mut s: &[u8] = slice;
            if pos < OUT_HEADER {
                let n = (OUT_HEADER - pos).min(s.len());
                header[pos..pos + n].copy_from_slice(&s[..n]);
                pos += n;
                s = &s[n..];
            }
            if !s.is_empty() && !too_big {
                let dst = pos - OUT_HEADER;
                // SAFETY: dst + s.len() <= rest <= payload_len; the entry is ours until
                // the commit below.
                unsafe {
                    std::ptr::copy_nonoverlapping(s.as_ptr(), self.payload.add(dst), s.len());
                }
            }
            pos += s.len();
        }
        let payload_sz = if too_big {
            // Cannot happen within the kernel's own size limits; answer EIO rather than
            // leave the caller waiting.
            error!("io_uring reply of {rest} bytes exceeds the payload buffer");
            header[4..8].copy_from_slice(&(-libc::EIO).to_ne_bytes());
            0
        } else {
            rest
        };
        let unique = u64::from_ne_bytes(header[8..16].try_into().unwrap_or([0; 8]));
        // SAFETY: the entry's header is ours until the commit below.
        unsafe {
            let h = &mut *self.header;
            h.in_out[..OUT_HEADER].copy_from_slice(&header);
            h.ent.payload_sz = payload_sz as u32;
        }
        self.command(CMD_COMMIT_AND_FETCH, unique)
    }

    /// Answers the entry's request with error `errno` alone.
    fn reply_error(&self, errno: i32) -> io::Result<()> {
        let unique = self.current.load(Ordering::Acquire);
        let mut header = [0u8; OUT_HEADER];
        header[0..4].copy_from_slice(&(OUT_HEADER as u32).to_ne_bytes());
        header[4..8].copy_from_slice(&(-errno).to_ne_bytes());
        header[8..16].copy_from_slice(&unique.to_ne_bytes());
        self.reply(&[IoSlice::new(&header)])
    }

    /// Waits for the next completion of this ring's entry: its result, 0 when a request is
    /// in the entry, the kernel's negated errno otherwise; `Err` when waiting itself failed.
    fn wait(&self) -> io::Result<i32> {
        loop {
            // SAFETY: only this ring's own thread reads its completion queue.
            if let Some(cqe) = unsafe { self.ring.completion_shared() }.next() {
                return Ok(cqe.result());
            }
            match self.ring.submitter().submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Copies the entry's request into `buf` in `/dev/fuse` layout.
    fn take_request(&self, buf: &mut Vec<u8>) {
        // SAFETY: the kernel completed the command: the entry holds a request and is ours.
        let h = unsafe { &*self.header };
        let payload_sz = (h.ent.payload_sz as usize).min(self.payload_len);
        let opcode = u32::from_ne_bytes(h.in_out[4..8].try_into().unwrap_or([0; 4]));
        let op_in = op_in_size(opcode).unwrap_or(0);
        let len = IN_HEADER + op_in + payload_sz;
        let unique = u64::from_ne_bytes(h.in_out[8..16].try_into().unwrap_or([0; 8]));
        self.current.store(unique, Ordering::Release);
        buf.clear();
        buf.extend_from_slice(&h.in_out[..IN_HEADER]);
        buf[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        buf.extend_from_slice(&h.op_in[..op_in]);
        // SAFETY: payload_sz <= payload_len.
        buf.extend_from_slice(unsafe { std::slice::from_raw_parts(self.payload, payload_sz) });
    }
}

/// The rings of a connection: `threads_per_queue` for each of the kernel's queues (one per
/// possible CPU), each ring with one entry of `payload` bytes. Made before INIT is answered,
/// so that a system without io_uring (or out of memory for it) keeps `/dev/fuse`: once
/// `FUSE_OVER_IO_URING` is agreed, the kernel holds every request until all queues have
/// registered an entry.
pub(crate) fn create_rings(
    ch: &Channel,
    payload: usize,
    threads_per_queue: usize,
) -> io::Result<Vec<Ring>> {
    let mut rings = Vec::new();
    for qid in 0..io_uring_queues() {
        let qid = u16::try_from(qid).map_err(io::Error::other)?;
        for _ in 0..threads_per_queue.max(1) {
            rings.push(Ring::new(qid, ch.as_fd().as_raw_fd(), payload, ch.sender())?);
        }
    }
    Ok(rings)
}

/// Runs one ring's thread: pins it to its queue's CPU (the kernel queues a request on the
/// CPU its caller runs on, so the caller and the thread answering it share a CPU and no
/// wake-up crosses CPUs: a round trip took 6-7 us pinned, 30-50 us not, on 2 vCPUs),
/// registers the entry, then answers requests until the connection ends. Returns `Ok` on an
/// orderly end (unmount, abort, DESTROY).
pub(crate) fn ring_loop<FS: Filesystem>(se: SessionEventLoop<FS>, ring: Ring) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within its size.
    // Failing (a CPU outside the process's affinity) leaves the thread unpinned.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(usize::from(ring.qid), &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let ring = Arc::new(ring);
    // The kernel refuses registration (EAGAIN) until INIT's reply is processed, which is
    // before the session's threads start; retry a little all the same.
    let mut tries = 0;
    loop {
        ring.command(CMD_REGISTER, 0)?;
        let res = ring.wait()?;
        if res == -libc::EAGAIN && tries < 100 {
            tries += 1;
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        if res < 0 {
            return finish(&ring, res);
        }
        break;
    }
    let mut buf = Vec::with_capacity(4096);
    loop {
        ring.take_request(&mut buf);
        match RequestWithSender::new(ReplySender::Ring(ring.clone()), &buf) {
            Some(req) => {
                if let Ok(crate::ll::Operation::Destroy(_)) = req.request.operation() {
                    req.reply::<crate::ReplyEmpty>().ok();
                    ring.closed.store(true, Ordering::Release);
                    return Ok(());
                }
                req.dispatch(&se);
            }
            None => {
                // Answer it (EIO) rather than leave its caller waiting.
                error!("io_uring: invalid request");
                ring.reply_error(libc::EIO)?;
            }
        }
        if ring.failed.load(Ordering::Acquire) {
            // The reply's commit was not submitted: no completion will come.
            ring.closed.store(true, Ordering::Release);
            return Err(io::Error::other("io_uring commit not submitted"));
        }
        let res = ring.wait()?;
        if res < 0 {
            return finish(&ring, res);
        }
    }
}

fn finish(ring: &Ring, res: i32) -> io::Result<()> {
    ring.closed.store(true, Ordering::Release);
    match -res {
        libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED | libc::ENODEV => {
            debug!("io_uring queue {} ends ({res})", ring.qid);
            Ok(())
        }
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

// The kernel's layouts (include/uapi/linux/fuse.h), checked at compile time (the vendored
// crate's own tests do not run with the workspace's).
const _: () = assert!(std::mem::size_of::<EntInOut>() == 32);
const _: () = assert!(std::mem::size_of::<ReqHeader>() == 288);
const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
