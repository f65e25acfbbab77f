//! Patch application (store/src/mpatch.rs): a chain of deltas applied to a base text, as
//! `Revlog::revision` applies a delta chain.
//!
//! Input: a 4-byte big-endian `raw_len` (the size hint passed to every `apply`), then
//! length-prefixed sections (see fuzz/src/lib.rs): the base text, then the deltas, oldest
//! first; the last delta is whatever follows the last section.
#![no_main]

use libfuzzer_sys::fuzz_target;
use revfs_fuzz::sections;
use revfs_store::mpatch::{self, Hunks};

fuzz_target!(|data: &[u8]| {
    let Some((raw_len, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let hint = i32::from_be_bytes(*raw_len).max(0) as usize;
    let parts = sections(rest, 64);
    let (base, deltas) = parts.split_first().expect("sections returns at least one");
    let mut text = base.to_vec();
    for delta in deltas {
        let hunks: Vec<_> = Hunks::new(delta).collect();
        let inserted = mpatch::inserted_text(delta);
        let decoded: Result<Vec<_>, _> = hunks.iter().cloned().collect();
        match (&decoded, &inserted) {
            (Ok(h), Ok(ins)) => {
                assert_eq!(ins.len(), h.iter().map(|h| h.data.len()).sum::<usize>());
            }
            (Err(_), Err(_)) => {}
            _ => panic!("inserted_text and Hunks disagree on whether the delta decodes"),
        }
        match mpatch::apply(&text, delta, hint) {
            Ok(new) => {
                // The result is the old text minus the replaced ranges plus the inserted data.
                let hunks = decoded.expect("an applied delta decodes");
                let removed: usize = hunks.iter().map(|h| h.end - h.start).sum();
                let added: usize = hunks.iter().map(|h| h.data.len()).sum();
                assert_eq!(new.len() + removed, text.len() + added);
                text = new;
            }
            Err(_) => return,
        }
    }
});
