//! Helpers shared by the fuzz targets: splitting one fuzzer input into several byte strings.
//!
//! Inputs that carry more than one file or text are length-prefixed sections: a 4-byte
//! big-endian length, then that many bytes; a length running past the end takes what is
//! left, and the last section is whatever follows the last prefix. `fuzz/make_corpus.py`
//! writes its seeds in the same format.

pub mod manifest;

/// Reads a 4-byte big-endian length and that many bytes (or all that is left).
/// Returns `(section, rest)`; `None` when fewer than 4 bytes remain.
pub fn take_section(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = data.split_first_chunk::<4>()?;
    let len = (u32::from_be_bytes(*len) as usize).min(rest.len());
    Some(rest.split_at(len))
}

/// Splits `data` into at most `max` sections: every one but the last is length-prefixed,
/// the last is the remainder.
pub fn sections(mut data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while out.len() + 1 < max {
        match take_section(data) {
            Some((section, rest)) => {
                out.push(section);
                data = rest;
            }
            None => break,
        }
    }
    out.push(data);
    out
}
