//! What the kernel's proactive reclaim (DAMON's `pageout` schemes, which some machines run:
//! this one does from boot) took from the page cache: a clean page that nobody touched
//! may be paged out at any time, without memory pressure, when DAMON finds the physical
//! region it lies in cold. Tests that check pages pushed into the page cache are there
//! (`readahead.rs`) allow as many missing pages as DAMON paged out meanwhile, and none when
//! it paged out nothing (docs/RELIABILITY.md, "Formerly flaky tests").

use std::path::Path;

const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";

/// Bytes paged out by every running kdamond's `pageout` schemes so far (their stats
/// refreshed first), 0 when DAMON runs none.
pub fn paged_out_bytes() -> u64 {
    let Ok(kdamonds) = std::fs::read_dir(KDAMONDS) else {
        return 0;
    };
    let mut total = 0;
    for k in kdamonds.flatten() {
        let k = k.path();
        if read(&k.join("state")).as_deref() != Some("on") {
            continue;
        }
        // The stats are refreshed when asked (refresh_ms may be 0). Another process's
        // request at the same moment is refused with EBUSY: ask again, or the stats read
        // below are old and bound too little.
        for _ in 0..100 {
            match std::fs::write(k.join("state"), "update_schemes_stats") {
                Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                _ => break,
            }
        }
        for scheme in dirs(&k.join("contexts"))
            .iter()
            .flat_map(|c| dirs(&c.join("schemes")))
        {
            if read(&scheme.join("action")).as_deref() == Some("pageout") {
                total += read(&scheme.join("stats/sz_applied"))
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The numbered entries of a DAMON sysfs directory.
fn dirs(p: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(p) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .map(|e| e.path())
        .collect()
}
