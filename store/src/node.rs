//! Node ids (20-byte SHA-1 hashes) and revision numbers.

use sha1::{Digest, Sha1};
use std::fmt;

/// A revision number inside one revlog. `NULL_REV` (-1) is the empty root.
pub type Rev = i32;

/// The revision number of the null revision.
pub const NULL_REV: Rev = -1;

/// A 20-byte node id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Node(pub [u8; 20]);

impl Node {
    /// The null node: twenty zero bytes.
    pub const NULL: Node = Node([0; 20]);

    pub fn is_null(&self) -> bool {
        self.0 == [0; 20]
    }

    /// Builds a node from exactly 20 bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<Node> {
        bytes.try_into().ok().map(Node)
    }

    /// Parses 40 hex digits.
    pub fn from_hex(hex_str: &[u8]) -> Option<Node> {
        if hex_str.len() != 40 {
            return None;
        }
        let mut out = [0u8; 20];
        hex::decode_to_slice(hex_str, &mut out).ok()?;
        Some(Node(out))
    }

    /// The 40-digit lowercase hex form.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The 12-digit short form hg prints.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..6])
    }

    /// Mercurial's revision hash: sha1(min(p1,p2) + max(p1,p2) + text).
    pub fn hash_revision(p1: &Node, p2: &Node, text: &[u8]) -> Node {
        let mut h = Self::revision_hasher(p1, p2);
        h.update(text);
        Node(h.finalize().into())
    }

    /// [`Node::hash_revision`] for a text that comes in pieces: the hasher with the parents
    /// in, to be fed the text and finished with `Node(h.finalize().into())`.
    pub fn revision_hasher(p1: &Node, p2: &Node) -> Sha1 {
        let (a, b) = if p1 <= p2 { (p1, p2) } else { (p2, p1) };
        let mut h = Sha1::new();
        h.update(a.0);
        h.update(b.0);
        h
    }

    /// True when this node's hex form starts with the given (lowercase) hex prefix.
    pub fn has_hex_prefix(&self, prefix: &[u8]) -> bool {
        let mut buf = [0u8; 40];
        // Encoding 20 bytes into a 40-byte buffer cannot fail.
        if hex::encode_to_slice(self.0, &mut buf).is_err() {
            return false;
        }
        buf.starts_with(prefix)
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Node({})", self.to_hex())
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_without_parents_hashes_like_hg() {
        let n = Node::hash_revision(&Node::NULL, &Node::NULL, b"");
        assert_eq!(n.to_hex(), "b80de5d138758541c5f05265ad144ab9fa86d1db");
    }

    #[test]
    fn parent_order_does_not_change_the_hash() {
        let a = Node([1; 20]);
        let b = Node([2; 20]);
        assert_eq!(
            Node::hash_revision(&a, &b, b"x"),
            Node::hash_revision(&b, &a, b"x")
        );
    }

    #[test]
    fn hex_round_trips_and_prefixes_match() {
        let n = Node::hash_revision(&Node::NULL, &Node::NULL, b"");
        assert_eq!(Node::from_hex(n.to_hex().as_bytes()), Some(n));
        assert!(n.has_hex_prefix(b"b80de5"));
        assert!(!n.has_hex_prefix(b"b80de6"));
        assert_eq!(n.short(), "b80de5d13875");
    }
}
