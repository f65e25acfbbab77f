//! History packs (`historypack.py`): each file's revisions with their parents.
//!
//! ```text
//! .histpack = version:u8 section*
//! section   = namelen:u16 name count:u32 record*       records children before parents
//! record    = node:20 p1:20 p2:20 linknode:20 copylen:u16 copyfrom
//! .histidx  = index (index.rs) of entries sha1(name):20 offset:u64 size:u64
//!             nodeindex_at:u32 nodeindex_len:u32, then nodecount:u64, then per file
//!             namelen:u16 name (node:20 record_offset:u64)* sorted by node
//! ```
//!
//! A copy's record has the source's filenode as p1 and the source's path as copyfrom; the
//! source's records are in the source's section. A blob's ancestry (blob.rs) mixes the
//! records of a file and of its copies' sources: [`HistPackBuilder::add_blob`] puts each
//! in its file's section, following copies as hg's `getancestors` does.

use super::index::{self, Index};
use super::{Be, PackError, VERSION};
use crate::node::Node;
use crate::shallow::blob::{Ancestor, Blob};
use sha1::{Digest, Sha1};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

pub const PACK_SUFFIX: &str = ".histpack";
pub const INDEX_SUFFIX: &str = ".histidx";
const FILE_ENTRY: usize = 44;
const NODE_ENTRY: usize = 28;
const RECORD: usize = 82;

/// A history pack and its index, mapped.
pub struct HistPack {
    files: super::Mapped,
    index: Index,
}

impl std::ops::Deref for HistPack {
    type Target = super::Mapped;
    fn deref(&self) -> &super::Mapped {
        &self.files
    }
}

/// A file's section of a history pack: its path and its records.
pub type Section = (Vec<u8>, Vec<Ancestor>);

impl HistPack {
    /// Opens the pack at `base` (its path without suffix): both files, version checked.
    pub fn open(base: &Path) -> Result<HistPack, PackError> {
        let files = super::Mapped::open(base, (PACK_SUFFIX, INDEX_SUFFIX))?;
        let index = Index::parse(&files.idx, FILE_ENTRY, &files.index_path())?;
        Ok(HistPack { files, index })
    }

    /// The nodes of the records in this pack, file after file (a file whose node index
    /// does not parse gives none).
    pub fn nodes(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.index.count).flat_map(move |i| {
            let nodes = self
                .index
                .entry(&self.idx, i)
                .and_then(|e| Some((e.be_u32(36)? as usize, e.be_u32(40)? as usize)))
                .and_then(|(at, len)| {
                    let name_len = usize::from(self.idx.be_u16(at)?);
                    self.idx.slice(at + 2 + name_len, len)
                })
                .unwrap_or(&[]);
            nodes.chunks_exact(NODE_ENTRY).map(|n| &n[..20])
        })
    }

    /// A file entry's name and node index (entries of node:20 record_offset:u64).
    fn file_nodes(&self, e: &[u8]) -> Result<(&[u8], &[u8]), PackError> {
        let bad = |r: &str| PackError::malformed(&self.index_path(), r);
        let (at, len) = match (e.be_u32(36), e.be_u32(40)) {
            (Some(a), Some(l)) => (a as usize, l as usize),
            _ => return Err(bad("short file entry")),
        };
        let name_len = usize::from(self.idx.be_u16(at).ok_or_else(|| bad("short node index"))?);
        let name = self
            .idx
            .slice(at + 2, name_len)
            .ok_or_else(|| bad("short node index"))?;
        let nodes = self
            .idx
            .slice(at + 2 + name_len, len)
            .ok_or_else(|| bad("short node index"))?;
        Ok((name, nodes))
    }

    /// How many records the pack holds (every file's).
    pub fn len(&self) -> usize {
        self.nodes().count()
    }

    /// Whether the pack holds no record.
    pub fn is_empty(&self) -> bool {
        self.nodes().next().is_none()
    }

    /// Every file's records, file after file (a garbled pack is an error).
    pub fn sections(&self) -> Result<Vec<Section>, PackError> {
        let bad = |r: &str| PackError::malformed(&self.index_path(), r);
        let mut out = Vec::with_capacity(self.index.count);
        for i in 0..self.index.count {
            let e = self
                .index
                .entry(&self.idx, i)
                .ok_or_else(|| bad("an entry past the index's end"))?;
            let (name, nodes) = self.file_nodes(e)?;
            let mut recs = Vec::with_capacity(nodes.len() / NODE_ENTRY);
            for n in nodes.chunks_exact(NODE_ENTRY) {
                let node = Node::from_slice(&n[..20]).unwrap_or_default();
                let offset = n
                    .be_u64(20)
                    .and_then(|o| usize::try_from(o).ok())
                    .ok_or_else(|| bad("short node entry"))?;
                recs.push(self.parse_record(offset, &node)?);
            }
            out.push((name.to_vec(), recs));
        }
        Ok(out)
    }

    /// The record of `name` at `node`, if this pack has it.
    pub fn record(&self, name: &[u8], node: &Node) -> Result<Option<Ancestor>, PackError> {
        self.record_of(name, &Sha1::digest(name).into(), node)
    }

    /// [`HistPack::record`] with `key`, the SHA-1 of `name`, computed by the caller (once for
    /// every pack it asks).
    pub fn record_of(
        &self,
        name: &[u8],
        key: &[u8; 20],
        node: &Node,
    ) -> Result<Option<Ancestor>, PackError> {
        let Some(e) = self.index.find(&self.idx, key) else {
            return Ok(None);
        };
        let bad = |r: &str| PackError::malformed(&self.index_path(), r);
        let (stored, nodes) = self.file_nodes(e)?;
        if stored != name {
            // Another name with the same SHA-1 prefix is not possible; a garbled index is.
            return Err(bad("a file entry names another file"));
        }
        let Some(n) = index::bisect(nodes, NODE_ENTRY, &node.0) else {
            return Ok(None);
        };
        let offset = n
            .be_u64(20)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| bad("short node entry"))?;
        self.parse_record(offset, node).map(Some)
    }

    fn parse_record(&self, at: usize, node: &Node) -> Result<Ancestor, PackError> {
        let bad = |r: &str| PackError::malformed(&self.pack_path(), r);
        let raw = self
            .pack
            .slice(at, RECORD)
            .ok_or_else(|| bad("a record past the end"))?;
        let n = |i: usize| Node::from_slice(&raw[i * 20..(i + 1) * 20]).unwrap_or_default();
        if n(0) != *node {
            return Err(bad("a record is not the one its index entry names"));
        }
        let copy_len = usize::from(raw.be_u16(80).unwrap_or(0));
        let copy_from = match copy_len {
            0 => None,
            len => Some(
                self.pack
                    .slice(at + RECORD, len)
                    .ok_or_else(|| bad("a copy source past the end"))?
                    .to_vec(),
            ),
        };
        Ok(Ancestor {
            node: n(0),
            p1: n(1),
            p2: n(2),
            linknode: n(3),
            copy_from,
        })
    }
}

/// The file each record of `blob`'s ancestry (fetched for `path`) belongs to, own record
/// first: a copy's p1 is in its source, every other parent in the child's file.
pub fn ancestry_files<'a>(path: &'a [u8], blob: &'a Blob) -> Vec<(&'a [u8], &'a Ancestor)> {
    let by_node: HashMap<Node, &Ancestor> = blob.ancestors.iter().map(|a| (a.node, a)).collect();
    let mut out = Vec::with_capacity(blob.ancestors.len());
    let mut seen = HashSet::new();
    let mut queue = std::collections::VecDeque::new();
    if let Some(own) = blob.ancestors.first() {
        queue.push_back((path, own.node));
    }
    while let Some((file, node)) = queue.pop_front() {
        if !seen.insert((file, node)) {
            continue;
        }
        let Some(rec) = by_node.get(&node) else {
            continue;
        };
        out.push((file, *rec));
        if !rec.p1.is_null() {
            queue.push_back((rec.copy_from.as_deref().unwrap_or(file), rec.p1));
        }
        if !rec.p2.is_null() {
            queue.push_back((file, rec.p2));
        }
    }
    out
}

/// A history pack being written: records in memory, then [`HistPackBuilder::finish`].
#[derive(Default)]
pub struct HistPackBuilder {
    files: BTreeMap<Vec<u8>, Vec<Ancestor>>,
    seen: HashSet<(Vec<u8>, Node)>,
}

impl HistPackBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every record of `blob`'s ancestry to its file's section. Names longer than
    /// 65,535 bytes are left out (hg's limit); false if any was.
    pub fn add_blob(&mut self, path: &[u8], blob: &Blob) -> bool {
        let mut all = true;
        for (file, rec) in ancestry_files(path, blob) {
            all &= self.add_record(file, rec);
        }
        all
    }

    /// Adds `rec` to `file`'s section (once). A name or copy source longer than 65,535
    /// bytes is refused (hg's limit).
    pub fn add_record(&mut self, file: &[u8], rec: &Ancestor) -> bool {
        let copy_fits = rec.copy_from.as_ref().is_none_or(|c| c.len() <= 0xffff);
        if file.len() > 0xffff || !copy_fits {
            return false;
        }
        if self.seen.insert((file.to_vec(), rec.node)) {
            self.files
                .entry(file.to_vec())
                .or_default()
                .push(rec.clone());
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The pack's and its index's bytes.
    pub fn finish(self) -> (Vec<u8>, Vec<u8>) {
        let mut pack = vec![VERSION];
        // (sha1(name), name, section offset, section size, [(node, record offset)])
        let mut files = Vec::with_capacity(self.files.len());
        for (name, recs) in self.files {
            let start = pack.len();
            pack.extend_from_slice(&(name.len() as u16).to_be_bytes());
            pack.extend_from_slice(&name);
            let ordered = children_first(&recs);
            pack.extend_from_slice(&(ordered.len() as u32).to_be_bytes());
            let mut nodes = Vec::with_capacity(ordered.len());
            for rec in ordered {
                nodes.push((rec.node, pack.len() as u64));
                for n in [&rec.node, &rec.p1, &rec.p2, &rec.linknode] {
                    pack.extend_from_slice(&n.0);
                }
                let copy = rec.copy_from.as_deref().unwrap_or(b"");
                pack.extend_from_slice(&(copy.len() as u16).to_be_bytes());
                pack.extend_from_slice(copy);
            }
            nodes.sort_by_key(|n| n.0);
            let hash: [u8; 20] = Sha1::digest(&name).into();
            files.push((hash, name, start as u64, (pack.len() - start) as u64, nodes));
        }
        files.sort_by_key(|f| f.0);
        let keys: Vec<[u8; 20]> = files.iter().map(|f| f.0).collect();
        let mut idx = index::start(&keys, FILE_ENTRY);
        let mut node_index_at = idx.len() + files.len() * FILE_ENTRY + 8;
        let mut node_count = 0u64;
        for (hash, name, offset, size, nodes) in &files {
            idx.extend_from_slice(hash);
            idx.extend_from_slice(&offset.to_be_bytes());
            idx.extend_from_slice(&size.to_be_bytes());
            idx.extend_from_slice(&(node_index_at as u32).to_be_bytes());
            idx.extend_from_slice(&((nodes.len() * NODE_ENTRY) as u32).to_be_bytes());
            node_index_at += 2 + name.len() + nodes.len() * NODE_ENTRY;
            node_count += nodes.len() as u64;
        }
        idx.extend_from_slice(&node_count.to_be_bytes());
        for (_, name, _, _, nodes) in &files {
            idx.extend_from_slice(&(name.len() as u16).to_be_bytes());
            idx.extend_from_slice(name);
            for (node, at) in nodes {
                idx.extend_from_slice(&node.0);
                idx.extend_from_slice(&at.to_be_bytes());
            }
        }
        (pack, idx)
    }
}

/// `recs` (one file's) ordered children before parents, as hg's reader scans them: a
/// depth-first post-order on the parents within the file (a copy's p1 is another file's),
/// reversed.
fn children_first(recs: &[Ancestor]) -> Vec<&Ancestor> {
    let by_node: HashMap<Node, &Ancestor> = recs.iter().map(|a| (a.node, a)).collect();
    let parents = |a: &Ancestor| -> [Option<Node>; 2] {
        let p1 = (a.copy_from.is_none() && !a.p1.is_null()).then_some(a.p1);
        [p1, (!a.p2.is_null()).then_some(a.p2)]
    };
    let mut done = HashSet::new();
    let mut order = Vec::with_capacity(recs.len());
    for root in recs {
        if done.contains(&root.node) {
            continue;
        }
        // (record, whether its parents were pushed)
        let mut stack = vec![(root, false)];
        while let Some((rec, expanded)) = stack.pop() {
            if expanded {
                if done.insert(rec.node) {
                    order.push(rec);
                }
                continue;
            }
            if done.contains(&rec.node) {
                continue;
            }
            stack.push((rec, true));
            for p in parents(rec).into_iter().flatten() {
                if let Some(pr) = by_node.get(&p) {
                    if !done.contains(&p) {
                        stack.push((pr, false));
                    }
                }
            }
        }
    }
    order.reverse();
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(node: u8, p1: u8, p2: u8, copy: Option<&[u8]>) -> Ancestor {
        let n = |b: u8| if b == 0 { Node::NULL } else { Node([b; 20]) };
        Ancestor {
            node: n(node),
            p1: n(p1),
            p2: n(p2),
            linknode: Node([0xee; 20]),
            copy_from: copy.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn a_blobs_ancestry_lands_in_its_files_sections_and_reads_back() {
        // b@4 merges b@3 and b@2; b@2 is a copy of a@1.
        let blob = Blob {
            text: b"x".to_vec(),
            flags: 0,
            ancestors: vec![
                rec(4, 3, 2, None),
                rec(3, 2, 0, None),
                rec(2, 1, 0, Some(b"a")),
                rec(1, 0, 0, None),
            ],
        };
        let files: Vec<(&[u8], u8)> = ancestry_files(b"b", &blob)
            .into_iter()
            .map(|(f, r)| (f, r.node.0[0]))
            .collect();
        assert_eq!(files, vec![(&b"b"[..], 4), (b"b", 3), (b"b", 2), (b"a", 1)]);
        let mut b = HistPackBuilder::new();
        assert!(b.add_blob(b"b", &blob));
        let (pack, idx) = b.finish();
        // Sections by name (a, then b); children first within b's: 4, 3, 2.
        let mut at = 1;
        let mut order = Vec::new();
        while at < pack.len() {
            let name_len = usize::from(pack.be_u16(at).unwrap());
            let count = pack.be_u32(at + 2 + name_len).unwrap();
            at += 2 + name_len + 4;
            for _ in 0..count {
                order.push(pack[at]);
                at += RECORD + usize::from(pack.be_u16(at + 80).unwrap());
            }
        }
        assert_eq!(order, vec![1, 4, 3, 2]);
        let dir = tempfile::tempdir().unwrap();
        let base =
            super::super::install(dir.path(), &pack, &idx, (PACK_SUFFIX, INDEX_SUFFIX)).unwrap();
        let p = HistPack::open(&base).unwrap();
        for (file, r) in ancestry_files(b"b", &blob) {
            assert_eq!(p.record(file, &r.node).unwrap().as_ref(), Some(r));
        }
        assert!(p.record(b"a", &Node([4; 20])).unwrap().is_none());
        assert!(p.record(b"c", &Node([4; 20])).unwrap().is_none());
    }
}
