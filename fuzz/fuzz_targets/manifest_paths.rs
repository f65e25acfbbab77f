//! Manifest lookups again, on manifests built from fuzzed path lists: the same checks as
//! the `manifest` target, but the fuzzer edits paths and their order rather than bytes of
//! 40-digit nodes, so unsorted, duplicated and oddly nested paths come quickly.
//!
//! Input: lines of a selector byte then a path (see `texts_from_paths` in
//! fuzz/src/manifest.rs), giving the two manifests at once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use revfs_fuzz::manifest::{check_pair, texts_from_paths};

fuzz_target!(|data: &[u8]| {
    let (a, b) = texts_from_paths(data);
    check_pair(&a, &b);
});
