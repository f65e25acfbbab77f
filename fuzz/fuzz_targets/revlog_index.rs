//! The revlog index parser (store/src/revlog/index.rs): the header, the inline layout scan,
//! the split-index length check, and every 64-byte entry with its range checks.
//!
//! Input: the bytes of an `.i` file. Both layouts are tried whatever the header says.
#![no_main]

use libfuzzer_sys::fuzz_target;
use revfs_store::revlog::fuzzing::{Header, Layout, ENTRY_SIZE};
use revfs_store::revlog::IndexEntry;

fn entries(data: &[u8], positions: impl Iterator<Item = usize>) {
    for (r, pos) in positions.enumerate() {
        let bytes: &[u8; ENTRY_SIZE] = data[pos..pos + ENTRY_SIZE]
            .try_into()
            .expect("a listed entry lies inside the file");
        let entry = IndexEntry::parse(r, bytes);
        if entry.validate(r).is_ok() {
            let r = r as i64;
            assert!((-1..r).contains(&(entry.p1 as i64)));
            assert!((-1..r).contains(&(entry.p2 as i64)));
            assert!((-1..=r).contains(&(entry.base as i64)));
        }
        if r == 0 {
            assert_eq!(entry.offset, 0, "entry 0's offset field holds the header");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(first) = data.first_chunk::<4>() {
        let _ = Header::parse(*first);
    }
    if let Ok(Layout::Inline { positions }) = Layout::scan_inline(data) {
        // Each entry is followed by its chunk, and the last chunk ends at EOF.
        let mut expected = 0usize;
        for &pos in &positions {
            assert_eq!(pos, expected);
            let clen = u32::from_be_bytes(data[pos + 8..pos + 12].try_into().unwrap()) as usize;
            expected = pos + ENTRY_SIZE + clen;
            assert!(expected <= data.len());
        }
        assert_eq!(expected, data.len());
        entries(data, positions.into_iter());
    }
    if let Ok(n) = Layout::split_len(data) {
        assert_eq!(n * ENTRY_SIZE, data.len());
        entries(data, (0..n).map(|r| r * ENTRY_SIZE));
    }
});
