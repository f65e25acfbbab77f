//! The changegroup format (`hg help internals.changegroups`), versions 01, 02 and 03, read
//! as a stream: length-prefixed chunks grouped into delta groups (the changelog's, the
//! manifest's, tree manifests' in 03, then one per file after a chunk naming it). Each delta
//! chunk is parsed into a [`DeltaChunk`]; lengths are bounded and read as the bytes arrive,
//! so a lying length cannot allocate what was never sent.

use super::BundleError;
use crate::node::Node;
use std::io::Read;

/// The changegroup versions this reader understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgVersion {
    /// Deltas against the previous revision of the group (the first against its p1).
    V1,
    /// An explicit delta base per revision (generaldelta).
    V2,
    /// V2 with revision flags, and a tree-manifest section.
    V3,
}

impl CgVersion {
    /// The version a `changegroup` part's `version` parameter names (absent: 01).
    pub fn from_param(v: Option<&[u8]>) -> Result<CgVersion, BundleError> {
        match v.unwrap_or(b"01") {
            b"01" => Ok(CgVersion::V1),
            b"02" => Ok(CgVersion::V2),
            b"03" => Ok(CgVersion::V3),
            other => Err(BundleError::Unsupported(format!(
                "changegroup version {}",
                String::from_utf8_lossy(other)
            ))),
        }
    }

    fn header_len(self) -> usize {
        match self {
            CgVersion::V1 => 80,
            CgVersion::V2 => 100,
            CgVersion::V3 => 102,
        }
    }
}

/// One revision of a delta group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaChunk {
    pub node: Node,
    pub p1: Node,
    pub p2: Node,
    /// The revision the delta applies to; `None` in version 01: the previous chunk of the
    /// group, or p1 for the first.
    pub base: Option<Node>,
    /// The changeset this revision belongs to.
    pub linknode: Node,
    pub flags: u16,
    /// bdiff hunks (`mpatch` applies them).
    pub delta: Vec<u8>,
}

/// A chunk's largest accepted length: what a revlog can hold (a 31-bit length).
const MAX_CHUNK: usize = i32::MAX as usize;

/// Reads the chunks of one changegroup.
pub struct CgReader<'r> {
    r: &'r mut dyn Read,
    version: CgVersion,
}

fn malformed(reason: impl Into<String>) -> BundleError {
    BundleError::Malformed {
        what: "changegroup".into(),
        reason: reason.into(),
    }
}

impl<'r> CgReader<'r> {
    pub fn new(r: &'r mut dyn Read, version: CgVersion) -> Self {
        CgReader { r, version }
    }

    pub fn version(&self) -> CgVersion {
        self.version
    }

    /// The next chunk's bytes; `None` for the empty chunk that ends a group.
    fn chunk(&mut self) -> Result<Option<Vec<u8>>, BundleError> {
        let mut b = [0u8; 4];
        self.r
            .read_exact(&mut b)
            .map_err(super::bundle2::io_to_bundle)?;
        let len = i32::from_be_bytes(b);
        if len <= 4 {
            if len != 0 {
                return Err(malformed(format!("invalid chunk length {len}")));
            }
            return Ok(None);
        }
        let len = len as usize - 4;
        if len > MAX_CHUNK {
            return Err(malformed(format!("a chunk of {len} bytes")));
        }
        let mut data = Vec::with_capacity(len.min(1 << 20));
        (&mut *self.r)
            .take(len as u64)
            .read_to_end(&mut data)
            .map_err(super::bundle2::io_to_bundle)?;
        if data.len() != len {
            return Err(malformed("stream ends inside a chunk"));
        }
        Ok(Some(data))
    }

    /// The next revision of the current delta group; `None` at its end.
    pub fn delta(&mut self) -> Result<Option<DeltaChunk>, BundleError> {
        let Some(mut data) = self.chunk()? else {
            return Ok(None);
        };
        let h = self.version.header_len();
        if data.len() < h {
            return Err(malformed(format!(
                "a delta chunk of {} bytes, shorter than its header",
                data.len()
            )));
        }
        let node_at = |i: usize| {
            let mut n = [0u8; 20];
            n.copy_from_slice(&data[i * 20..i * 20 + 20]);
            Node(n)
        };
        let (base, linknode) = match self.version {
            CgVersion::V1 => (None, node_at(3)),
            CgVersion::V2 | CgVersion::V3 => (Some(node_at(3)), node_at(4)),
        };
        let flags = match self.version {
            CgVersion::V3 => u16::from_be_bytes([data[100], data[101]]),
            _ => 0,
        };
        let chunk = DeltaChunk {
            node: node_at(0),
            p1: node_at(1),
            p2: node_at(2),
            base,
            linknode,
            flags,
            delta: Vec::new(),
        };
        let delta = data.split_off(h);
        Ok(Some(DeltaChunk { delta, ..chunk }))
    }

    /// The name chunk before a file's (or, in 03, a tree manifest directory's) group;
    /// `None` at the end of that section.
    pub fn name(&mut self) -> Result<Option<Vec<u8>>, BundleError> {
        self.chunk()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_parse_by_version_and_bad_lengths_are_refused() {
        let mut s = Vec::new();
        let mut c = vec![1u8; 20];
        c.extend_from_slice(&[2; 20]);
        c.extend_from_slice(&[3; 20]);
        c.extend_from_slice(&[4; 20]);
        c.extend_from_slice(&[5; 20]);
        c.extend_from_slice(b"DELTA");
        s.extend_from_slice(&((c.len() + 4) as i32).to_be_bytes());
        s.extend_from_slice(&c);
        s.extend_from_slice(&0i32.to_be_bytes());
        let mut r = std::io::Cursor::new(s.clone());
        let mut cg = CgReader::new(&mut r, CgVersion::V2);
        let d = cg.delta().unwrap().unwrap();
        assert_eq!(d.node, Node([1; 20]));
        assert_eq!(d.base, Some(Node([4; 20])));
        assert_eq!(d.linknode, Node([5; 20]));
        assert_eq!(d.delta, b"DELTA");
        assert_eq!(cg.delta().unwrap(), None);
        // Version 01 reads the fourth node as the link and the rest as the delta.
        let mut r = std::io::Cursor::new(s);
        let d = CgReader::new(&mut r, CgVersion::V1)
            .delta()
            .unwrap()
            .unwrap();
        assert_eq!((d.base, d.linknode), (None, Node([4; 20])));
        assert_eq!(d.delta.len(), 25);
        // A length of 1 to 4, or past the data, is refused.
        let mut r = std::io::Cursor::new(3i32.to_be_bytes().to_vec());
        assert!(CgReader::new(&mut r, CgVersion::V2).delta().is_err());
        let mut r = std::io::Cursor::new([&1000i32.to_be_bytes()[..], b"short"].concat());
        assert!(CgReader::new(&mut r, CgVersion::V2).delta().is_err());
    }
}
