//! Changelog entry parsing (store/src/changelog.rs): `Changeset::parse` on a changeset text.
//!
//! Input: the full text of a changelog revision.
#![no_main]

use libfuzzer_sys::fuzz_target;
use revfs_store::changelog::Changeset;
use revfs_store::Node;

fuzz_target!(|data: &[u8]| {
    if let Ok(cs) = Changeset::parse(data, &Node::NULL) {
        let _ = cs.branch();
        let _ = cs.closes_branch();
        if !data.is_empty() {
            // The description is everything after the first blank line.
            let split = data.windows(2).position(|w| w == b"\n\n").unwrap();
            assert_eq!(cs.description, &data[split + 2..]);
        }
    }
});
