//! Maps of revlog files that outlive a strip. `hg strip` (and rebase and histedit, which
//! strip) truncates a revlog in place; a page of a map that lies wholly past the file's new
//! end then raises SIGBUS when read, and SIGBUS kills the process: a daemon serving a
//! program that still reads a stripped revision would die. Every revlog map is registered
//! here, and a SIGBUS inside a registered map gets a page of zeros mapped over the missing
//! page, as the kernel gives for the rest of a file's last page: the read goes on and sees
//! zeros, which no index entry (its node is checked, `Revlog::rev_of`) and no stored chunk
//! (the text's hash is checked) passes, so the reader returns an error. A SIGBUS anywhere
//! else goes to the handler that was there before (Rust's, then the default: the process
//! dies as it would have).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// How many maps can be registered at once: a repository keeps up to 1,024 filelogs open
/// (each an index and a data file at most), and a daemon a few repositories. A map made
/// when every slot is taken is not guarded (with a warning).
const SLOTS: usize = 16_384;

/// A slot's start while it is being filled or emptied.
const BUSY: usize = usize::MAX;

struct Slot {
    /// The map's first address; 0 when the slot is free.
    start: AtomicUsize,
    /// One past its last address.
    end: AtomicUsize,
}

static REGISTERED: [Slot; SLOTS] = [const {
    Slot {
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
    }
}; SLOTS];

/// Pages of zeros mapped over pages that had gone (see [`zeroed_pages`]).
static ZEROED: AtomicU64 = AtomicU64::new(0);

static INSTALL: Once = Once::new();

/// The SIGBUS action before ours (set once, before ours is installed).
static mut PREVIOUS: Option<libc::sigaction> = None;

/// The system's page size (set once, before the handler is installed).
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// A read-only map of a revlog file, registered while it lives.
pub struct GuardedMap {
    map: memmap2::Mmap,
    slot: Option<usize>,
}

impl GuardedMap {
    /// Maps `file` whole.
    ///
    /// # Safety
    /// As `memmap2::Mmap::map`: the file may change under the map. A revlog is appended to,
    /// and truncated only by a strip, whose missing pages this module turns into zeros.
    pub unsafe fn map(file: &std::fs::File) -> std::io::Result<GuardedMap> {
        install();
        // SAFETY: as the caller promised.
        let map = unsafe { memmap2::Mmap::map(file) }?;
        let (start, end) = (map.as_ptr() as usize, map.as_ptr() as usize + map.len());
        let slot = register(start, end);
        if slot.is_none() {
            tracing::warn!(
                "{SLOTS} revlog maps are registered already: this one is not guarded against a strip"
            );
        }
        Ok(GuardedMap { map, slot })
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        // Out of the registry before the map goes: the addresses may be mapped again for
        // something else, whose SIGBUS is not ours.
        if let Some(i) = self.slot {
            REGISTERED[i].start.store(0, Ordering::SeqCst);
        }
    }
}

impl std::ops::Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

/// How many pages of zeros were mapped over pages of revlog maps that had gone since the
/// process started (a revlog truncated under a reader).
pub fn zeroed_pages() -> u64 {
    ZEROED.load(Ordering::Relaxed)
}

fn register(start: usize, end: usize) -> Option<usize> {
    if start == end {
        return None;
    }
    for (i, slot) in REGISTERED.iter().enumerate() {
        if slot
            .start
            .compare_exchange(0, BUSY, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            slot.end.store(end, Ordering::SeqCst);
            slot.start.store(start, Ordering::SeqCst);
            return Some(i);
        }
    }
    None
}

/// Whether `addr` lies in a registered map.
fn registered(addr: usize) -> bool {
    REGISTERED.iter().any(|s| {
        let start = s.start.load(Ordering::SeqCst);
        start != 0 && start != BUSY && addr >= start && addr < s.end.load(Ordering::SeqCst)
    })
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sysconf and sigaction have no preconditions; PREVIOUS is written once,
        // here, before the handler that reads it can run.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::SeqCst);
            }
            let mut previous: libc::sigaction = std::mem::zeroed();
            let mut action: libc::sigaction = std::mem::zeroed();
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                on_sigbus;
            action.sa_sigaction = handler as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                return;
            }
            *std::ptr::addr_of_mut!(PREVIOUS) = Some(previous);
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) != 0 {
                tracing::warn!("cannot install the SIGBUS handler: a strip may kill this process");
            }
        }
    });
}

/// The SIGBUS handler: async-signal-safe (atomics, mmap, sigaction; no allocation, no
/// lock).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel gives a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR && registered(addr) {
        let page = PAGE.load(Ordering::Relaxed);
        let at = addr & !(page - 1);
        // SAFETY: the page lies in a registered map of ours (read-only, never written
        // through); replacing it with zeros changes what reads of it see, nothing else.
        let done = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if done != libc::MAP_FAILED {
            ZEROED.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    // Not ours: the handler before ours, or the default action (the fault happens again
    // on return and kills the process, as without this handler).
    // SAFETY: PREVIOUS was set before this handler was installed and is never written
    // again; calling the previous handler with the same arguments is what the kernel would
    // have done.
    unsafe {
        match *std::ptr::addr_of!(PREVIOUS) {
            Some(prev)
                if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN =>
            {
                if prev.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(prev.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(prev.sa_sigaction);
                    f(sig);
                }
            }
            _ => {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}
