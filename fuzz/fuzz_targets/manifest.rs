//! Manifest parsing and lookups (store/src/manifest.rs): `Manifest::new`, `iter`, `find`,
//! `iter_prefix`, `children` and `diff` between two fuzzed manifests.
//!
//! Input: a 4-byte big-endian length, the first manifest text, then the second one.
//! Any bytes must give results or errors, never a panic or a hang. When both texts are
//! well-formed (every line parses, paths strictly increasing) the binary searches and the
//! merge diff are also checked against naive versions computed from the full entry lists.
#![no_main]

use libfuzzer_sys::fuzz_target;
use revfs_fuzz::manifest::check_pair;
use revfs_fuzz::take_section;

fuzz_target!(|data: &[u8]| {
    if let Some((a, b)) = take_section(data) {
        check_pair(a, b);
    }
});
