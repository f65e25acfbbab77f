//! Chunk decompression (store/src/revlog/chunk.rs): the `\0` / `u` / zlib `x` / zstd `(`
//! dispatch, whole, into a shared buffer, and prefix-only.
//!
//! Input: a 4-byte big-endian `raw_len` as an index entry carries it (the capacity hint the
//! reader passes; negative means unknown), then the stored chunk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use revfs_store::revlog::fuzzing::{decompress, decompress_prefix, decompress_shared};

fuzz_target!(|data: &[u8]| {
    let Some((raw_len, chunk)) = data.split_first_chunk::<4>() else {
        return;
    };
    let hint = i32::from_be_bytes(*raw_len).max(0) as usize;
    let full = decompress(chunk, hint);
    // Decoded straight into a shared buffer (a whole text's read): the same bytes, or an
    // error whenever the vector's decode fails.
    let shared = decompress_shared(chunk, hint);
    match (&full, &shared) {
        (Ok(full), Ok(shared)) => assert_eq!(&full[..], &shared[..]),
        (Err(_), Err(_)) => {}
        (full, shared) => panic!("decompress {:?} but decompress_shared {:?}", full.is_ok(), shared.is_ok()),
    }
    // The prefix peek (Filelog::size looks at 2 bytes, text_prefix at 12 + n) must agree
    // with the full decode whenever both succeed.
    for n in [0, 2, 14, 64, hint.min(1 << 16)] {
        let prefix = decompress_prefix(chunk, n);
        if let (Ok(full), Ok(prefix)) = (&full, &prefix) {
            assert!(prefix.len() <= n);
            assert_eq!(
                &prefix[..],
                &full[..n.min(full.len())],
                "prefix of {n} bytes"
            );
        }
    }
});
