//! The index both kinds of pack share (`basepack.py`):
//!
//! ```text
//! index    = version:u8 config:u8 fanout count:u64 entry* rest
//! config   = 0x80 when the fanout is large (2^16 slots, more than 8,192 entries), else 0
//! fanout   = (slot:u32)* 2^8 or 2^16 slots: the byte offset, from the first entry, of the
//!            first entry whose key starts with the slot's prefix (an empty slot repeats
//!            the one before it)
//! entry    = key:20 bytes, then the kind's fields; entries sorted by key
//! ```
//!
//! The reader bisects all the entries (no trust placed in the fanout, which only hg uses);
//! the writer fills the fanout as hg's `writeindex` does.

use super::{Be, PackError, VERSION};
use std::path::Path;

/// Past this many entries hg switches to the large fanout.
const SMALL_FANOUT_CUTOFF: usize = (1 << 16) / 8;

/// The bytes of an index before its first entry, for `entries` entries.
fn header_len(entries: usize) -> usize {
    2 + fanout_slots(entries) * 4 + 8
}

fn fanout_slots(entries: usize) -> usize {
    if entries > SMALL_FANOUT_CUTOFF {
        1 << 16
    } else {
        1 << 8
    }
}

/// Starts an index of `keys` (sorted, each entry `entry_len` bytes): header, fanout and
/// count. The caller appends the entries, in the same order, then whatever follows them.
pub fn start(keys: &[[u8; 20]], entry_len: usize) -> Vec<u8> {
    let slots = fanout_slots(keys.len());
    let mut out = Vec::with_capacity(header_len(keys.len()) + keys.len() * entry_len);
    out.push(VERSION);
    out.push(if slots == 1 << 16 { 0x80 } else { 0 });
    let mut fanout = vec![None::<u32>; slots];
    for (i, key) in keys.iter().enumerate() {
        let slot = if slots == 1 << 16 {
            usize::from(u16::from_be_bytes([key[0], key[1]]))
        } else {
            usize::from(key[0])
        };
        fanout[slot].get_or_insert((i * entry_len) as u32);
    }
    let mut last = 0u32;
    for slot in fanout {
        last = slot.unwrap_or(last);
        out.extend_from_slice(&last.to_be_bytes());
    }
    out.extend_from_slice(&(keys.len() as u64).to_be_bytes());
    out
}

/// A parsed index: where its entries are and how many.
#[derive(Debug, Clone, Copy)]
pub struct Index {
    /// The offset of the first entry.
    pub first: usize,
    pub count: usize,
    pub entry_len: usize,
}

impl Index {
    /// Checks `bytes`' header (version 2) and that its entries fit.
    pub fn parse(bytes: &[u8], entry_len: usize, path: &Path) -> Result<Index, PackError> {
        let bad = |r: &str| PackError::malformed(path, r);
        let (version, config) = match bytes.get(..2) {
            Some(&[v, c]) => (v, c),
            _ => return Err(bad("the index has no header")),
        };
        if version != VERSION {
            return Err(bad(&format!(
                "index version {version} (revfs reads {VERSION})"
            )));
        }
        let slots: usize = if config & 0x80 != 0 { 1 << 16 } else { 1 << 8 };
        let first = 2 + slots * 4 + 8;
        let count = bytes
            .be_u64(first - 8)
            .ok_or_else(|| bad("the index ends in its fanout"))?;
        let fits = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(entry_len))
            .and_then(|n| n.checked_add(first))
            .is_some_and(|end| end <= bytes.len());
        if !fits {
            return Err(bad("the index is shorter than its entries"));
        }
        Ok(Index {
            first,
            count: count as usize,
            entry_len,
        })
    }

    /// Entry `i`'s bytes (its key first).
    pub fn entry<'a>(&self, bytes: &'a [u8], i: usize) -> Option<&'a [u8]> {
        bytes.slice(self.first + i * self.entry_len, self.entry_len)
    }

    /// The entry whose key is `key`: a bisection of the entries the fanout says may hold
    /// it (all of them when the fanout's bounds are out of order or out of range; a fanout
    /// that lies otherwise only makes a lookup miss, and the caller fetches the revision).
    pub fn find<'a>(&self, bytes: &'a [u8], key: &[u8; 20]) -> Option<&'a [u8]> {
        let entries = bytes.slice(self.first, self.count * self.entry_len)?;
        let (lo, hi) = self.fanout_range(bytes, key).unwrap_or((0, self.count));
        bisect(
            entries.get(lo * self.entry_len..hi * self.entry_len)?,
            self.entry_len,
            key,
        )
    }

    /// The entries, as indices `lo..hi`, whose keys share `key`'s fanout prefix, as hg's
    /// `_findnode` reads the fanout: the slot's offset, up to the next slot's that differs
    /// (an empty slot repeats the one before it). `None` when the fanout is inconsistent.
    fn fanout_range(&self, bytes: &[u8], key: &[u8; 20]) -> Option<(usize, usize)> {
        let slots = (self.first - 10) / 4;
        let slot = if slots == 1 << 16 {
            usize::from(u16::from_be_bytes([key[0], key[1]]))
        } else {
            usize::from(key[0])
        };
        let at = |i: usize| bytes.be_u32(2 + i * 4).map(|v| v as usize);
        let start = at(slot)?;
        let mut end = self.count * self.entry_len;
        for i in slot + 1..slots {
            let v = at(i)?;
            if v != start {
                end = v;
                break;
            }
        }
        let (lo, hi) = (start / self.entry_len, end / self.entry_len);
        let aligned = start.is_multiple_of(self.entry_len) && end.is_multiple_of(self.entry_len);
        (aligned && lo <= hi && hi <= self.count).then_some((lo, hi))
    }

    /// The keys of the entries, in order.
    pub fn keys<'a>(&self, bytes: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (first, len) = (self.first, self.entry_len);
        (0..self.count).filter_map(move |i| bytes.slice(first + i * len, 20))
    }
}

/// `a` against `b`, the first 20 bytes of each: the leading eight as a number first (most
/// keys differ there), without a call to `memcmp`.
fn cmp_key(a: &[u8], b: &[u8; 20]) -> std::cmp::Ordering {
    let head = |x: &[u8]| x.first_chunk::<8>().map(|h| u64::from_be_bytes(*h));
    match (head(a), head(b)) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        _ => a[..20.min(a.len())].cmp(&b[..]),
    }
}

/// The entry of `entries` (each `entry_len` bytes, sorted by their first 20) that starts
/// with `key`.
pub fn bisect<'a>(entries: &'a [u8], entry_len: usize, key: &[u8; 20]) -> Option<&'a [u8]> {
    let (mut lo, mut hi) = (0usize, entries.len() / entry_len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let entry = entries.slice(mid * entry_len, entry_len)?;
        match cmp_key(entry, key) {
            std::cmp::Ordering::Equal => return Some(entry),
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_finds_each_of_its_keys_and_nothing_else_at_either_fanout_size() {
        for n in [0usize, 1, 7, 300, SMALL_FANOUT_CUTOFF + 5] {
            let mut keys: Vec<[u8; 20]> = (0..n)
                .map(|i| {
                    let mut k = [0u8; 20];
                    k[..8].copy_from_slice(
                        &((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes(),
                    );
                    k
                })
                .collect();
            keys.sort();
            let mut bytes = start(&keys, 24);
            for (i, k) in keys.iter().enumerate() {
                bytes.extend_from_slice(k);
                bytes.extend_from_slice(&(i as u32).to_be_bytes());
            }
            let index = Index::parse(&bytes, 24, Path::new("x")).unwrap();
            assert_eq!(index.count, n);
            assert_eq!(index.first, header_len(n));
            for (i, k) in keys.iter().enumerate() {
                let e = index.find(&bytes, k).unwrap();
                assert_eq!(e.be_u32(20), Some(i as u32));
            }
            assert!(index.find(&bytes, &[0xff; 20]).is_none());
            // A fanout whose bounds are out of range: every entry is searched.
            if n > 0 {
                let mut liar = bytes.clone();
                let first = keys[0];
                let slot = if n > SMALL_FANOUT_CUTOFF {
                    usize::from(u16::from_be_bytes([first[0], first[1]]))
                } else {
                    usize::from(first[0])
                };
                let past = ((n + 1) * 24) as u32;
                liar[2 + slot * 4..6 + slot * 4].copy_from_slice(&past.to_be_bytes());
                let i = Index::parse(&liar, 24, Path::new("x")).unwrap();
                assert_eq!(i.find(&liar, &first).and_then(|e| e.be_u32(20)), Some(0));
            }
            // Cut anywhere: an error, not a panic.
            for cut in [0, 1, 2, bytes.len() - 1] {
                assert!(Index::parse(&bytes[..cut], 24, Path::new("x")).is_err());
            }
        }
    }
}
