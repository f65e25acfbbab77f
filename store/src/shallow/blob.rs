//! A remotefilelog blob (`shallowutil.createfileblob`, the same from hg 6.3 to 7.2):
//!
//! ```text
//! header "\0" text ancestry
//! header   = decimal len(text)                       (revision flags 0)
//!          | "v1\n" "s" SIZE "\n" "f" FLAGS          (lines in any order; `s` required)
//! ancestry = (node p1 p2 linknode copyfrom "\0")*    (20 bytes each; the first record is
//!                                                     the blob's own node)
//! ```
//!
//! The text is the file's content without hg's copy-metadata block; a copy's record names
//! its source (`copyfrom`) and the source's filenode as p1. hg's client checks only that
//! the first record's node is the name it stored the blob under; [`Blob::verify`] checks the
//! SHA-1 of the parents and the text, as the filelog would have hashed it.

use crate::node::Node;

/// Why a blob is refused, with the path and node it was fetched for.
#[derive(Debug, thiserror::Error)]
pub enum ShallowError {
    #[error("{path}@{node}: malformed remotefilelog blob: {reason}")]
    Malformed {
        path: String,
        node: String,
        reason: &'static str,
    },
    #[error("{path}@{node}: the blob's content does not hash to its node (got {got})")]
    HashMismatch {
        path: String,
        node: String,
        got: String,
    },
    #[error(
        "{path}@{node}: revision flags {flags:#x} (an LFS or censored revision) are not supported"
    )]
    Flags {
        path: String,
        node: String,
        flags: u16,
    },
}

/// One record of a blob's ancestry: a revision of the file and its parents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ancestor {
    pub node: Node,
    pub p1: Node,
    pub p2: Node,
    /// The changeset that introduced this revision.
    pub linknode: Node,
    /// The copy source's path when this revision is a copy (its filenode is `p1`).
    pub copy_from: Option<Vec<u8>>,
}

/// A parsed blob: the file's text, its revision flags, and its ancestry (the first record
/// is the blob's own revision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub text: Vec<u8>,
    pub flags: u16,
    pub ancestors: Vec<Ancestor>,
}

const RECORD: usize = 80;

impl Blob {
    /// Parses the (decompressed) bytes of a blob fetched for `path` at `node`. Every
    /// length is checked against the bytes present.
    pub fn parse(path: &[u8], node: &Node, bytes: &[u8]) -> Result<Blob, ShallowError> {
        let bad = |reason| ShallowError::Malformed {
            path: String::from_utf8_lossy(path).into_owned(),
            node: node.to_hex(),
            reason,
        };
        let nul = memchr::memchr(0, bytes).ok_or_else(|| bad("no header"))?;
        let header = &bytes[..nul];
        let (size, flags) = if header.starts_with(b"v1\n") {
            let (mut size, mut flags) = (None, 0u16);
            for line in header[3..].split(|&b| b == b'\n') {
                match line.split_first() {
                    Some((b's', v)) => size = Some(decimal(v).ok_or_else(|| bad("bad size"))?),
                    Some((b'f', v)) => {
                        flags = decimal(v)
                            .and_then(|f| u16::try_from(f).ok())
                            .ok_or_else(|| bad("bad flags"))?
                    }
                    _ => return Err(bad("unknown header line")),
                }
            }
            (size.ok_or_else(|| bad("no size"))?, flags)
        } else {
            (decimal(header).ok_or_else(|| bad("bad size"))?, 0)
        };
        let start = nul + 1;
        let end = start
            .checked_add(size)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad("text runs past the end"))?;
        let mut rest = &bytes[end..];
        let mut ancestors = Vec::new();
        while !rest.is_empty() {
            if rest.len() < RECORD + 1 {
                return Err(bad("truncated ancestry record"));
            }
            let n = |i: usize| Node::from_slice(&rest[i * 20..(i + 1) * 20]).unwrap_or_default();
            let copy_len = memchr::memchr(0, &rest[RECORD..])
                .ok_or_else(|| bad("unterminated copy source"))?;
            let copy = &rest[RECORD..RECORD + copy_len];
            ancestors.push(Ancestor {
                node: n(0),
                p1: n(1),
                p2: n(2),
                linknode: n(3),
                copy_from: (!copy.is_empty()).then(|| copy.to_vec()),
            });
            rest = &rest[RECORD + copy_len + 1..];
        }
        match ancestors.first() {
            Some(a) if a.node == *node => {}
            Some(_) => return Err(bad("the first ancestry record is another node's")),
            None => return Err(bad("no ancestry")),
        }
        Ok(Blob {
            text: bytes[start..end].to_vec(),
            flags,
            ancestors,
        })
    }

    /// Checks that the text and the parents hash to `node`, as the filelog hashed them:
    /// a copy's text behind its `copy:`/`copyrev:` block with parents (null, p2), a text
    /// that starts with `\1\n` behind an empty block. Revisions with flags (LFS) cannot be
    /// checked without their content elsewhere: refused.
    pub fn verify(&self, path: &[u8], node: &Node) -> Result<(), ShallowError> {
        let lossy = || String::from_utf8_lossy(path).into_owned();
        if self.flags != 0 {
            return Err(ShallowError::Flags {
                path: lossy(),
                node: node.to_hex(),
                flags: self.flags,
            });
        }
        let (p1, p2) = self.revlog_parents();
        let got = Node::hash_revision(&p1, &p2, &self.raw_text());
        if got != *node {
            return Err(ShallowError::HashMismatch {
                path: lossy(),
                node: node.to_hex(),
                got: got.to_hex(),
            });
        }
        Ok(())
    }

    /// The filelog's text of this revision (what its node hashes): a copy's metadata block
    /// (`\1\ncopy: SOURCE\ncopyrev: HEX(p1)\n\1\n`), or the escape of a text that starts
    /// like one (`\1\n\1\n`), then the text.
    pub fn raw_text(&self) -> std::borrow::Cow<'_, [u8]> {
        let own = &self.ancestors[0];
        match &own.copy_from {
            Some(source) => {
                let mut raw = Vec::with_capacity(self.raw_len());
                raw.extend_from_slice(b"\x01\ncopy: ");
                raw.extend_from_slice(source);
                raw.extend_from_slice(b"\ncopyrev: ");
                raw.extend_from_slice(own.p1.to_hex().as_bytes());
                raw.extend_from_slice(b"\n\x01\n");
                raw.extend_from_slice(&self.text);
                raw.into()
            }
            None if self.text.starts_with(b"\x01\n") => {
                [&b"\x01\n\x01\n"[..], &self.text].concat().into()
            }
            None => self.text.as_slice().into(),
        }
    }

    /// The length of [`Blob::raw_text`], without making it.
    pub fn raw_len(&self) -> usize {
        let meta = match &self.ancestors[0].copy_from {
            // "\1\ncopy: " SOURCE "\ncopyrev: " 40 hex digits "\n\1\n"
            Some(src) => 8 + src.len() + 10 + 40 + 3,
            None if self.text.starts_with(b"\x01\n") => 4,
            None => 0,
        };
        self.text.len() + meta
    }

    /// The filelog's parents of this revision: a copy's first is null (its source is in
    /// the metadata block), as hg records copies.
    pub fn revlog_parents(&self) -> (Node, Node) {
        let own = &self.ancestors[0];
        match own.copy_from {
            Some(_) => (Node::NULL, own.p2),
            None => (own.p1, own.p2),
        }
    }

    /// The blob's bytes as a loose file holds them (what [`Blob::parse`] reads).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = if self.flags == 0 {
            format!("{}\0", self.text.len()).into_bytes()
        } else {
            format!("v1\ns{}\nf{}\0", self.text.len(), self.flags).into_bytes()
        };
        out.extend_from_slice(&self.text);
        for a in &self.ancestors {
            for n in [&a.node, &a.p1, &a.p2, &a.linknode] {
                out.extend_from_slice(&n.0);
            }
            out.extend_from_slice(a.copy_from.as_deref().unwrap_or(b""));
            out.push(0);
        }
        out
    }

    /// [`Blob::parse`] then [`Blob::verify`]: the only way a fetched blob's text is used.
    pub fn parse_verified(path: &[u8], node: &Node, bytes: &[u8]) -> Result<Blob, ShallowError> {
        let blob = Blob::parse(path, node, bytes)?;
        blob.verify(path, node)?;
        Ok(blob)
    }
}

/// A decimal number of at most 19 digits (no sign, no spaces).
fn decimal(v: &[u8]) -> Option<usize> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blobs_raw_length_is_its_raw_texts() {
        let own = |copy: Option<&[u8]>| Ancestor {
            node: Node::NULL,
            p1: Node([7; 20]),
            p2: Node::NULL,
            linknode: Node::NULL,
            copy_from: copy.map(<[u8]>::to_vec),
        };
        for (text, copy) in [
            (&b"plain\n"[..], None),
            (b"\x01\nlooks like metadata\n", None),
            (b"copied\n", Some(&b"dir/source"[..])),
            (b"", None),
        ] {
            let blob = Blob {
                text: text.to_vec(),
                flags: 0,
                ancestors: vec![own(copy)],
            };
            assert_eq!(blob.raw_len(), blob.raw_text().len(), "{text:?}");
        }
    }

    fn blob(text: &[u8], records: &[(Node, Node, Node, &[u8])]) -> Vec<u8> {
        let mut out = format!("{}\0", text.len()).into_bytes();
        out.extend_from_slice(text);
        for (n, p1, p2, copy) in records {
            out.extend_from_slice(&n.0);
            out.extend_from_slice(&p1.0);
            out.extend_from_slice(&p2.0);
            out.extend_from_slice(&[7; 20]);
            out.extend_from_slice(copy);
            out.push(0);
        }
        out
    }

    #[test]
    fn a_blob_hashes_to_its_node_and_one_flipped_byte_does_not() {
        let node = Node::hash_revision(&Node::NULL, &Node::NULL, b"hello\n");
        let bytes = blob(b"hello\n", &[(node, Node::NULL, Node::NULL, b"")]);
        let b = Blob::parse_verified(b"f", &node, &bytes).unwrap();
        assert_eq!(b.text, b"hello\n");
        let mut bad = bytes.clone();
        bad[3] ^= 1;
        assert!(matches!(
            Blob::parse_verified(b"f", &node, &bad),
            Err(ShallowError::HashMismatch { .. })
        ));
    }

    #[test]
    fn truncated_or_garbage_blobs_are_errors_not_panics() {
        let node = Node([1; 20]);
        let bytes = blob(b"abc", &[(node, Node::NULL, Node::NULL, b"src")]);
        for cut in 0..bytes.len() {
            assert!(
                Blob::parse(b"f", &node, &bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        for garbage in [
            &b"99999999999999999999\0"[..],
            b"v1\nf1\0",
            b"v1\nx\0",
            b"-1\0",
            b"\0",
        ] {
            assert!(Blob::parse(b"f", &node, garbage).is_err());
        }
        // Another node's blob.
        assert!(Blob::parse(b"f", &Node([2; 20]), &bytes).is_err());
    }
}
