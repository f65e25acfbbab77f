//! How many requests of each kind the process has been sent (revfs: the daemon's request
//! counts by opcode, for benchmarks and tests of how many round trips an operation costs).
//! One relaxed atomic add per request; process-wide, as a daemon serves one session.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ll::fuse_abi::fuse_opcode;

/// Opcodes below this are counted one by one; the others together, as `other`.
const COUNTED: usize = 64;

static COUNTS: [AtomicU64; COUNTED + 1] = [const { AtomicU64::new(0) }; COUNTED + 1];

/// Counts one request with `opcode` (the header's, known or not).
pub(crate) fn count(opcode: u32) {
    let i = (opcode as usize).min(COUNTED);
    COUNTS[i].fetch_add(1, Ordering::Relaxed);
}

/// The requests sent so far, by kind: the opcode's name as the kernel's `fuse.h` has it,
/// lowercase and without `FUSE_` (`lookup`, `create`, `write`...), and how many, for every
/// kind sent at least once. Opcodes fuser does not know are named by number; those from
/// 64 up are counted together as `other`.
pub fn request_counts() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (i, c) in COUNTS.iter().enumerate() {
        let n = c.load(Ordering::Relaxed);
        if n == 0 {
            continue;
        }
        let name = if i == COUNTED {
            "other".to_string()
        } else {
            match fuse_opcode::try_from(i as u32) {
                Ok(op) => format!("{op:?}")
                    .trim_start_matches("FUSE_")
                    .to_ascii_lowercase(),
                Err(_) => format!("opcode_{i}"),
            }
        };
        out.push((name, n));
    }
    out
}
