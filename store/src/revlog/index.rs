//! The revlog v1 index: a 4-byte header folded into entry 0, then one 64-byte entry per
//! revision, with each revision's data chunk right after its entry when the revlog is inline.
//! Entries are decoded on demand from the mapped file into [`IndexEntry`] values.

use crate::node::{Node, Rev, NULL_REV};

pub(crate) const ENTRY_SIZE: usize = 64;
const FLAG_INLINE_DATA: u32 = 1 << 16;
const FLAG_GENERALDELTA: u32 = 1 << 17;
const VERSION_V1: u32 = 1;

/// Revision flags that a reader may meet (bytes 6-7 of an entry).
pub const REVIDX_ISCENSORED: u16 = 0x8000;
pub const REVIDX_ELLIPSIS: u16 = 0x4000;
pub const REVIDX_EXTSTORED: u16 = 0x2000;
pub const REVIDX_HASCOPIESINFO: u16 = 0x1000;
const KNOWN_FLAGS: u16 =
    REVIDX_ISCENSORED | REVIDX_ELLIPSIS | REVIDX_EXTSTORED | REVIDX_HASCOPIESINFO;

/// The header fields of a revlog index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub inline: bool,
    pub generaldelta: bool,
}

impl Header {
    /// Decodes the first four bytes of a non-empty index.
    pub fn parse(first: [u8; 4]) -> Result<Header, String> {
        let v = u32::from_be_bytes(first);
        let version = v & 0xFFFF;
        let flags = v & !0xFFFF;
        if version != VERSION_V1 {
            return Err(format!("unknown version {version}"));
        }
        if flags & !(FLAG_INLINE_DATA | FLAG_GENERALDELTA) != 0 {
            return Err(format!("unknown flags {:#x}", flags >> 16));
        }
        Ok(Header {
            inline: flags & FLAG_INLINE_DATA != 0,
            generaldelta: flags & FLAG_GENERALDELTA != 0,
        })
    }
}

/// One decoded index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the chunk in data-file space (index entries not counted).
    pub offset: u64,
    pub flags: u16,
    /// Length of the stored (possibly compressed) chunk.
    pub compressed_len: u32,
    /// Length of the full raw text; negative when unknown.
    pub raw_len: i32,
    pub base: Rev,
    pub linkrev: Rev,
    pub p1: Rev,
    pub p2: Rev,
    pub node: Node,
}

impl IndexEntry {
    /// Decodes one 64-byte entry. `rev` is needed because entry 0 carries the header.
    pub fn parse(rev: usize, bytes: &[u8; ENTRY_SIZE]) -> IndexEntry {
        let be32 =
            |i: usize| i32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let mut first = [0u8; 8];
        first.copy_from_slice(&bytes[..8]);
        let offset_flags = u64::from_be_bytes(first);
        let mut node = [0u8; 20];
        node.copy_from_slice(&bytes[32..52]);
        IndexEntry {
            offset: if rev == 0 { 0 } else { offset_flags >> 16 },
            flags: (offset_flags & 0xFFFF) as u16,
            compressed_len: be32(8) as u32,
            raw_len: be32(12),
            base: be32(16),
            linkrev: be32(20),
            p1: be32(24),
            p2: be32(28),
            node: Node(node),
        }
    }

    /// Checks the fields that can be checked without the rest of the revlog.
    pub fn validate(&self, rev: usize) -> Result<(), String> {
        let r = rev as i64;
        if self.flags & !KNOWN_FLAGS != 0 {
            return Err(format!("incompatible revision flag {:#x}", self.flags));
        }
        for (what, p) in [("p1", self.p1), ("p2", self.p2)] {
            if (p as i64) < NULL_REV as i64 || p as i64 >= r {
                return Err(format!("{what} {p} out of range"));
            }
        }
        if (self.base as i64) < NULL_REV as i64 || self.base as i64 > r {
            return Err(format!("delta base {} out of range", self.base));
        }
        Ok(())
    }
}

/// Where each entry and its chunk sit inside the index file.
#[derive(Debug)]
pub enum Layout {
    /// Entries only; chunks live in the `.d` file.
    Split,
    /// Each entry followed by its chunk; `positions[r]` is the file offset of entry `r`.
    Inline { positions: Vec<usize> },
}

impl Layout {
    /// Scans an inline index to find every entry, checking that the walk ends exactly at EOF.
    pub fn scan_inline(bytes: &[u8]) -> Result<Layout, String> {
        let mut positions = Vec::new();
        let mut pos = 0usize;
        while pos < bytes.len() {
            let Some(entry) = bytes.get(pos..pos + ENTRY_SIZE) else {
                return Err(format!("truncated entry at byte {pos}"));
            };
            let clen = u32::from_be_bytes([entry[8], entry[9], entry[10], entry[11]]) as usize;
            positions.push(pos);
            pos = pos
                .checked_add(ENTRY_SIZE + clen)
                .ok_or_else(|| "chunk length overflow".to_owned())?;
        }
        if pos != bytes.len() {
            return Err(format!(
                "inline data runs past the end of the file ({pos} > {})",
                bytes.len()
            ));
        }
        Ok(Layout::Inline { positions })
    }

    /// Checks a split index and returns its number of entries.
    pub fn split_len(bytes: &[u8]) -> Result<usize, String> {
        if !bytes.len().is_multiple_of(ENTRY_SIZE) {
            return Err(format!(
                "index size {} is not a multiple of {ENTRY_SIZE}",
                bytes.len()
            ));
        }
        Ok(bytes.len() / ENTRY_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_seen_in_hg_repositories_parse() {
        assert_eq!(
            Header::parse([0, 3, 0, 1]),
            Ok(Header {
                inline: true,
                generaldelta: true
            })
        );
        assert_eq!(
            Header::parse([0, 2, 0, 1]),
            Ok(Header {
                inline: false,
                generaldelta: true
            })
        );
        assert_eq!(
            Header::parse([0, 1, 0, 1]),
            Ok(Header {
                inline: true,
                generaldelta: false
            })
        );
    }

    #[test]
    fn unknown_versions_and_flags_are_refused() {
        assert!(Header::parse([0, 0, 0, 2]).is_err());
        assert!(Header::parse([0, 0, 0xde, 0xad]).is_err());
        assert!(Header::parse([0, 4, 0, 1]).is_err());
    }

    #[test]
    fn entry_zero_hides_the_header_in_its_offset() {
        let mut e = [0u8; ENTRY_SIZE];
        e[..4].copy_from_slice(&[0, 3, 0, 1]);
        e[8..12].copy_from_slice(&7u32.to_be_bytes());
        e[24..28].copy_from_slice(&(-1i32).to_be_bytes());
        e[28..32].copy_from_slice(&(-1i32).to_be_bytes());
        let parsed = IndexEntry::parse(0, &e);
        assert_eq!(parsed.offset, 0);
        assert_eq!(parsed.compressed_len, 7);
        assert_eq!(parsed.validate(0), Ok(()));
        let parsed1 = IndexEntry::parse(1, &e);
        assert_eq!(parsed1.offset, 0x0003_0001_0000);
    }

    #[test]
    fn inline_scan_must_end_at_eof() {
        let mut e = vec![0u8; ENTRY_SIZE];
        e[8..12].copy_from_slice(&3u32.to_be_bytes());
        e.extend_from_slice(b"u12");
        assert!(
            matches!(Layout::scan_inline(&e), Ok(Layout::Inline { positions }) if positions == vec![0])
        );
        assert!(Layout::scan_inline(&e[..e.len() - 1]).is_err());
    }
}
