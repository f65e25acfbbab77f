//! A whole revlog read (store/src/revlog/mod.rs and filelog.rs): the fuzzed bytes are
//! written as `fuzz.i` (and `fuzz.d`) in a private directory and opened with
//! `Revlog::open`; every revision is then read through each public read path.
//!
//! Input: a 4-byte big-endian length, the index file, then the data file (not written
//! at all when empty, to cover a missing `.d`). Seeds for inline revlogs have an empty
//! data part.
#![no_main]

use libfuzzer_sys::fuzz_target;
use revfs_fuzz::take_section;
use revfs_store::filelog::Filelog;
use revfs_store::revlog::{Revlog, TextCache};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Revisions beyond this many are not read (the inputs are small anyway).
const MAX_REVS: usize = 512;
/// Revisions whose hex prefix is looked up (each lookup scans the whole index).
const MAX_PREFIX_LOOKUPS: usize = 16;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("revfs-fuzz-revlog-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create the fuzz directory");
        d
    })
}

fn open(index: &Path, data: &Path, cache: &TextCache, id: u32) -> Option<Revlog> {
    Revlog::open(index, data, "fuzz.i".to_owned(), cache.clone(), id).ok()
}

fuzz_target!(|input: &[u8]| {
    let Some((index_bytes, data_bytes)) = take_section(input) else {
        return;
    };
    let (index, data) = (dir().join("fuzz.i"), dir().join("fuzz.d"));
    std::fs::write(&index, index_bytes).expect("write fuzz.i");
    if data_bytes.is_empty() {
        let _ = std::fs::remove_file(&data);
    } else {
        std::fs::write(&data, data_bytes).expect("write fuzz.d");
    }
    let cache = TextCache::new(1 << 20);
    let Some(revlog) = open(&index, &data, &cache, 0) else {
        return;
    };
    let n = revlog.len().min(MAX_REVS);
    let _ = revlog.tip();
    let _ = revlog.is_generaldelta();
    let mut texts = Vec::with_capacity(n);
    for rev in 0..n as i32 {
        let _ = revlog.entry(rev);
        let _ = revlog.parents(rev);
        let _ = revlog.linkrev(rev);
        let _ = revlog.raw_len(rev);
        let _ = revlog.chunk(rev);
        let node = revlog.node(rev);
        let text = revlog.revision(rev);
        if let Ok(text) = &text {
            // A text that passed its hash check is the same whichever path rebuilt it.
            let uncached = revlog
                .revision_uncached(rev)
                .expect("second read of a good text");
            assert_eq!(text, &uncached);
            let node = node.expect("a good text has a node");
            assert_eq!(
                revlog.rev_of(&node).map(|r| revlog.node(r).unwrap()),
                Some(node)
            );
        }
        for k in [2, 13] {
            if let (Ok(prefix), Ok(text)) = (revlog.text_prefix(rev, k), &text) {
                assert_eq!(
                    &prefix[..],
                    &text[..k.min(text.len())],
                    "text_prefix({rev}, {k})"
                );
            }
        }
        if let Ok(node) = revlog.node(rev) {
            if (rev as usize) < MAX_PREFIX_LOOKUPS {
                let _ = revlog.rev_of_hex_prefix(&node.to_hex()[..6]);
            }
        }
        texts.push(text.ok());
    }
    let _ = revlog.entry(n as i32);
    let _ = revlog.revision(-1);
    let _ = revlog.rev_of_hex_prefix("0");

    // The same files read as a filelog, with a cold cache of its own.
    let cache = TextCache::new(1 << 20);
    let Some(revlog) = open(&index, &data, &cache, 1) else {
        panic!("the second open of the same files failed");
    };
    let filelog = Filelog::new(b"fuzz".to_vec(), revlog);
    for (rev, text) in texts.iter().enumerate() {
        let rev = rev as i32;
        let size = filelog.size(rev);
        let read = filelog.read(rev);
        let _ = filelog.copy_source(rev);
        if let Ok(read) = &read {
            let _ = read.metadata();
            let _ = read.meta_value(b"copy");
            assert!(
                text.is_some(),
                "a filelog read succeeded where the revlog read failed"
            );
            if let Ok(size) = size {
                assert_eq!(size, read.len() as u64, "size of {rev}");
            }
        }
    }
});
