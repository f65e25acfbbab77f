//! Flat manifests: sorted lines of `path \0 40-hex-filenode flags \n`. A [`Manifest`] keeps
//! the text as it came from the revlog and decodes lines only when asked; finding one path
//! is a binary search over the text, not a parse of every line.

use crate::error::{Result, StoreError};
use crate::node::Node;
use crate::text::SharedText;
use std::collections::BTreeMap;
#[cfg(test)]
use std::sync::Arc;

/// The kind of a manifest entry, from its flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileFlag {
    Regular,
    Executable,
    Symlink,
}

impl FileFlag {
    /// The flag as hg writes it in a manifest (`""`, `"x"`, `"l"`).
    pub fn as_str(self) -> &'static str {
        match self {
            FileFlag::Regular => "",
            FileFlag::Executable => "x",
            FileFlag::Symlink => "l",
        }
    }
}

/// One manifest line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestEntry<'a> {
    pub path: &'a [u8],
    pub node: Node,
    pub flag: FileFlag,
}

/// A manifest text, checked on construction to end in a newline: rebuilt on the heap, or
/// mapped from the repository's manifest cache.
#[derive(Clone)]
pub struct Manifest {
    text: SharedText,
    node: Node,
}

impl Manifest {
    /// Wraps the text of manifest `node`.
    pub fn new(text: impl Into<SharedText>, node: Node) -> Result<Manifest> {
        let text = text.into();
        if !text.is_empty() && text.last() != Some(&b'\n') {
            return Err(StoreError::Malformed {
                what: "manifest",
                node: node.to_hex(),
                reason: "manifest did not end in a newline".into(),
            });
        }
        Ok(Manifest { text, node })
    }

    /// An empty manifest (the null revision's).
    pub fn empty() -> Manifest {
        Manifest {
            text: SharedText::Heap(std::sync::Arc::from(&[][..])),
            node: Node::NULL,
        }
    }

    /// The manifest's text.
    pub fn text(&self) -> &SharedText {
        &self.text
    }

    pub fn node(&self) -> Node {
        self.node
    }

    fn malformed(&self, at: usize, reason: &str) -> StoreError {
        StoreError::Malformed {
            what: "manifest",
            node: self.node.to_hex(),
            reason: format!("{reason} at byte {at}"),
        }
    }

    /// Decodes the line starting at byte `start`; returns it and the start of the next line.
    fn line_at(&self, start: usize) -> Result<(ManifestEntry<'_>, usize)> {
        let rest = &self.text[start..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.malformed(start, "unterminated line"))?;
        let line = &rest[..end];
        let nul = line
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.malformed(start, "line without a NUL"))?;
        let (path, tail) = (&line[..nul], &line[nul + 1..]);
        if tail.len() < 40 {
            return Err(self.malformed(start, "implausibly short line"));
        }
        let node = Node::from_hex(&tail[..40]).ok_or_else(|| self.malformed(start, "bad node"))?;
        let flag = match &tail[40..] {
            b"" => FileFlag::Regular,
            b"x" => FileFlag::Executable,
            b"l" => FileFlag::Symlink,
            _ => return Err(self.malformed(start, "unknown flag")),
        };
        Ok((ManifestEntry { path, node, flag }, start + end + 1))
    }

    fn line_start(&self, pos: usize) -> usize {
        memchr::memrchr(b'\n', &self.text[..pos]).map_or(0, |p| p + 1)
    }

    /// The path of the line at `start`, and where the next line starts. (memchr: these scans
    /// are most of a binary search's time.)
    fn path_at(&self, start: usize) -> (&[u8], usize) {
        let rest = &self.text[start..];
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..end];
        let nul = memchr::memchr(0, line).unwrap_or(line.len());
        (&line[..nul], start + end + 1)
    }

    /// Byte offset of the first line whose path is not less than `key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0usize, self.text.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let start = self.line_start(mid).max(lo);
            let (path, next) = self.path_at(start);
            if path < key {
                lo = next.min(self.text.len());
            } else {
                hi = start;
            }
        }
        lo
    }

    /// [`Manifest::lower_bound`] knowing that every line before byte `from` (a line start)
    /// is less than `key`: probes forward from `from` in growing steps, then searches
    /// between the last two probes, so a bound close to `from` costs a few comparisons.
    fn lower_bound_from(&self, from: usize, key: &[u8]) -> usize {
        let len = self.text.len();
        let (mut lo, mut hi) = (from.min(len), len);
        let mut step = 256usize;
        while lo < hi {
            let probe = lo.saturating_add(step);
            if probe >= len {
                break;
            }
            let start = self.line_start(probe).max(lo);
            let (path, next) = self.path_at(start);
            if path < key {
                lo = next.min(len);
                step = step.saturating_mul(2);
            } else {
                hi = start;
                break;
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let start = self.line_start(mid).max(lo);
            let (path, next) = self.path_at(start);
            if path < key {
                lo = next.min(len);
            } else {
                hi = start;
            }
        }
        lo
    }

    /// What the manifest has at `path`: the file's entry, or `Err(true)` when `path` is a
    /// directory of it (some path starts with `path/`), `Err(false)` when neither. One
    /// binary search, and a short probe from where it ends for the directory.
    pub fn at(&self, path: &[u8]) -> Result<std::result::Result<ManifestEntry<'_>, bool>> {
        let pos = self.lower_bound(path);
        if pos < self.text.len() {
            let (entry, _) = self.line_at(pos)?;
            if entry.path == path {
                return Ok(Ok(entry));
            }
        }
        let mut dir = Vec::with_capacity(path.len() + 1);
        dir.extend_from_slice(path);
        dir.push(b'/');
        let at = self.lower_bound_from(pos, &dir);
        Ok(Err(
            at < self.text.len() && self.path_at(at).0.starts_with(&dir)
        ))
    }

    /// The text of this manifest with `changes` applied (`Some` sets an entry, `None`
    /// removes it), in one pass: runs of unchanged lines are copied whole, so the cost is a
    /// copy of the text plus a binary search per change.
    pub fn with_changes(&self, changes: &BTreeMap<Vec<u8>, Option<(Node, FileFlag)>>) -> Vec<u8> {
        let text = &*self.text;
        let mut out = Vec::with_capacity(text.len() + changes.len() * 64);
        let mut cursor = 0usize;
        for (path, new) in changes {
            let pos = self.lower_bound(path).max(cursor);
            out.extend_from_slice(&text[cursor..pos]);
            cursor = pos;
            if pos < text.len() {
                let (p, next) = self.path_at(pos);
                if p == path.as_slice() {
                    cursor = next.min(text.len());
                }
            }
            if let Some((node, flag)) = new {
                out.extend_from_slice(path);
                out.push(0);
                out.extend_from_slice(node.to_hex().as_bytes());
                out.extend_from_slice(flag.as_str().as_bytes());
                out.push(b'\n');
            }
        }
        out.extend_from_slice(&text[cursor..]);
        out
    }

    /// The node and flag of `path`, if present.
    pub fn get(&self, path: &[u8]) -> Result<Option<(Node, FileFlag)>> {
        Ok(self.find(path)?.map(|e| (e.node, e.flag)))
    }

    /// The entry for exactly `path`, if present.
    pub fn find(&self, path: &[u8]) -> Result<Option<ManifestEntry<'_>>> {
        let pos = self.lower_bound(path);
        if pos >= self.text.len() {
            return Ok(None);
        }
        let (entry, _) = self.line_at(pos)?;
        Ok((entry.path == path).then_some(entry))
    }

    /// Iterates over every entry in path order.
    pub fn iter(&self) -> ManifestIter<'_> {
        ManifestIter {
            manifest: self,
            pos: 0,
            end: self.text.len(),
        }
    }

    /// Where `path` is, or would be, in the manifest's text: the byte offset of the first
    /// entry not less than it (the text's length past the last). Offsets order entries as
    /// paths do, and their differences measure stretches of the manifest.
    pub fn position_of(&self, path: &[u8]) -> usize {
        self.lower_bound(path)
    }

    /// Iterates in path order from offset `pos` (a [`Manifest::position_of`] or a
    /// [`ManifestIter::position`]) to the end.
    pub fn iter_at(&self, pos: usize) -> ManifestIter<'_> {
        let len = self.text.len();
        ManifestIter {
            manifest: self,
            pos: if pos >= len {
                len
            } else {
                self.line_start(pos)
            },
            end: len,
        }
    }

    /// Iterates over the entries whose path starts with `prefix` (e.g. `b"dir/"`).
    pub fn iter_prefix(&self, prefix: &[u8]) -> ManifestIter<'_> {
        let pos = self.lower_bound(prefix);
        // The end is the first line not starting with the prefix: the lower bound of the
        // prefix with its last byte incremented, or the end of the text.
        let end = match prefix_successor(prefix) {
            Some(succ) => self.lower_bound_from(pos, &succ),
            None => self.text.len(),
        };
        ManifestIter {
            manifest: self,
            pos,
            end: end.max(pos),
        }
    }
}

/// One entry of a directory listing built from a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child<'a> {
    /// A file directly in the directory; `name` is its last path component.
    File {
        name: &'a [u8],
        entry: ManifestEntry<'a>,
    },
    /// A subdirectory (a path component followed by more components).
    Dir { name: &'a [u8] },
}

impl Manifest {
    /// The immediate children of directory `dir` (`b""` for the root, else `b"a/b"`), in
    /// manifest order. Subtrees are skipped by binary search, so listing a directory costs
    /// its number of children times a lookup, not the size of everything below it.
    pub fn children(&self, dir: &[u8]) -> Result<Vec<Child<'_>>> {
        let mut prefix = dir.to_vec();
        if !prefix.is_empty() {
            prefix.push(b'/');
        }
        let end = match prefix_successor(&prefix) {
            Some(succ) if !prefix.is_empty() => self.lower_bound(&succ),
            _ => self.text.len(),
        };
        let mut out = Vec::new();
        let mut pos = self.lower_bound(&prefix);
        while pos < end {
            let (entry, next) = self.line_at(pos)?;
            // In a sorted manifest every line between the two bounds is under `prefix`;
            // the binary searches of an unsorted one can bound other lines.
            let rest = entry
                .path
                .strip_prefix(prefix.as_slice())
                .ok_or_else(|| self.malformed(pos, "manifest lines not in sorted order"))?;
            match rest.iter().position(|&b| b == b'/') {
                None => {
                    out.push(Child::File { name: rest, entry });
                    pos = next;
                }
                Some(slash) => {
                    let name = &rest[..slash];
                    out.push(Child::Dir { name });
                    // Jump past every path under `prefix + name + "/"`.
                    let sub_end = &entry.path[..prefix.len() + slash + 1];
                    pos = match prefix_successor(sub_end) {
                        Some(succ) => self.lower_bound(&succ).max(next),
                        None => end,
                    };
                }
            }
        }
        Ok(out)
    }
}

/// The smallest byte string greater than every string starting with `prefix`.
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut succ = prefix.to_vec();
    while let Some(last) = succ.pop() {
        if last < 0xff {
            succ.push(last + 1);
            return Some(succ);
        }
    }
    None
}

/// One path whose entry differs between two manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestChange {
    pub path: Vec<u8>,
    /// (node, flag) in the first manifest, if the path is there.
    pub old: Option<(Node, FileFlag)>,
    /// (node, flag) in the second manifest, if the path is there.
    pub new: Option<(Node, FileFlag)>,
}

impl Manifest {
    /// The paths whose node or flag differ from `self` to `other`, in path order: one merge
    /// pass over both sorted texts that skips identical runs of lines with plain memory
    /// comparisons and parses only the lines that differ.
    pub fn diff(&self, other: &Manifest) -> Result<Vec<ManifestChange>> {
        let mut out = Vec::new();
        if self.node == other.node && !self.node.is_null() {
            return Ok(out);
        }
        let (ta, tb) = (&*self.text, &*other.text);
        let (mut i, mut j) = (0usize, 0usize);
        loop {
            // Both positions are at line starts: skip the common run of whole lines.
            let common = common_prefix_len(&ta[i..], &tb[j..]);
            let back = ta[i..i + common]
                .iter()
                .rposition(|&c| c == b'\n')
                .map_or(0, |p| p + 1);
            i += back;
            j += back;
            let x = if i < ta.len() {
                Some(self.line_at(i)?)
            } else {
                None
            };
            let y = if j < tb.len() {
                Some(other.line_at(j)?)
            } else {
                None
            };
            match (x, y) {
                (None, None) => break,
                (Some((e, next)), None) => {
                    out.push(change(e.path, Some(e), None));
                    i = next;
                }
                (None, Some((f, next))) => {
                    out.push(change(f.path, None, Some(f)));
                    j = next;
                }
                (Some((e, ni)), Some((f, nj))) => match e.path.cmp(f.path) {
                    std::cmp::Ordering::Less => {
                        out.push(change(e.path, Some(e), None));
                        i = ni;
                    }
                    std::cmp::Ordering::Greater => {
                        out.push(change(f.path, None, Some(f)));
                        j = nj;
                    }
                    std::cmp::Ordering::Equal => {
                        if e.node != f.node || e.flag != f.flag {
                            out.push(change(e.path, Some(e), Some(f)));
                        }
                        i = ni;
                        j = nj;
                    }
                },
            }
        }
        Ok(out)
    }
}

/// Length of the common prefix of two byte strings, compared a block at a time (the skip of
/// identical runs in manifest diffs and line deltas).
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let n = a.len().min(b.len());
    let mut k = 0;
    while k + BLOCK <= n && a[k..k + BLOCK] == b[k..k + BLOCK] {
        k += BLOCK;
    }
    while k < n && a[k] == b[k] {
        k += 1;
    }
    k
}

fn change(
    path: &[u8],
    old: Option<ManifestEntry<'_>>,
    new: Option<ManifestEntry<'_>>,
) -> ManifestChange {
    ManifestChange {
        path: path.to_vec(),
        old: old.map(|e| (e.node, e.flag)),
        new: new.map(|e| (e.node, e.flag)),
    }
}

/// Iterator over manifest entries.
pub struct ManifestIter<'a> {
    manifest: &'a Manifest,
    pos: usize,
    end: usize,
}

impl ManifestIter<'_> {
    /// The offset of the next entry (the text's length at the end).
    pub fn position(&self) -> usize {
        self.pos.min(self.end)
    }
}

impl<'a> Iterator for ManifestIter<'a> {
    type Item = Result<ManifestEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.end {
            return None;
        }
        match self.manifest.line_at(self.pos) {
            Ok((entry, next)) => {
                self.pos = next;
                Some(Ok(entry))
            }
            Err(e) => {
                self.pos = self.end;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterating_from_a_position_goes_on_in_path_order_from_there() {
        let names = ["a/x", "a/y", "b", "c/d/e", "c/f"];
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (*n, "")).collect();
        let m = manifest(&pairs);
        let from = |q: &[u8]| -> Vec<Vec<u8>> {
            m.iter_at(m.position_of(q))
                .map(|e| e.unwrap().path.to_vec())
                .collect()
        };
        assert_eq!(from(b"a/y"), [&b"a/y"[..], b"b", b"c/d/e", b"c/f"]);
        assert_eq!(from(b"bb"), [&b"c/d/e"[..], b"c/f"]);
        assert!(from(b"z").is_empty());
        // A position from an iterator resumes it; positions order as paths do.
        let mut it = m.iter_at(0);
        it.next();
        it.next();
        assert_eq!(it.position(), m.position_of(b"b"));
        assert!(m.position_of(b"a/x") < m.position_of(b"c/f"));
        assert_eq!(m.iter_at(it.position()).next().unwrap().unwrap().path, b"b");
        // A position inside a line resumes at that line.
        assert_eq!(
            m.iter_at(m.position_of(b"b") + 1)
                .next()
                .unwrap()
                .unwrap()
                .path,
            b"b"
        );
    }

    #[test]
    fn at_and_iter_prefix_agree_with_a_scan_of_every_line() {
        // Names that sort between a directory and its `/` (`a!`, `a.c`, `a-b`), many files
        // in one directory (the forward probe's steps), and directories at the ends.
        let mut names: Vec<String> = vec!["0".into(), "a!".into(), "a-b/x".into(), "a.c".into()];
        names.extend((0..400).map(|i| format!("a/f{i:03}")));
        names.extend(["a/g/h".into(), "a0".into(), "b/c/d".into(), "zz/y".into()]);
        names.sort();
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
        let m = manifest(&pairs);
        let all: Vec<Vec<u8>> = m.iter().map(|e| e.unwrap().path.to_vec()).collect();
        let queries = [
            "", "0", "a", "a!", "a-b", "a-b/x", "a.c", "a/", "a/f200", "a/f2", "a/g", "a/g/h",
            "a0", "b", "b/c", "b/c/d", "b/c/d/e", "c", "zz", "zz/y", "zzz",
        ];
        for q in queries {
            let q = q.as_bytes();
            let dir = [q, b"/"].concat();
            let want = if all.iter().any(|p| p.as_slice() == q) {
                Ok(q.to_vec())
            } else {
                Err(all.iter().any(|p| p.starts_with(&dir)))
            };
            let got = m.at(q).unwrap().map(|e| e.path.to_vec());
            assert_eq!(got, want, "at({:?})", String::from_utf8_lossy(q));
            let below: Vec<Vec<u8>> = m
                .iter_prefix(&dir)
                .map(|e| e.unwrap().path.to_vec())
                .collect();
            let want: Vec<Vec<u8>> = all
                .iter()
                .filter(|p| p.starts_with(&dir))
                .cloned()
                .collect();
            assert_eq!(
                below,
                want,
                "iter_prefix({:?})",
                String::from_utf8_lossy(&dir)
            );
        }
    }

    #[test]
    fn with_changes_sets_and_removes_entries_in_place() {
        let a = manifest(&[("a", ""), ("b/c", "x"), ("d", "")]);
        let mut changes = BTreeMap::new();
        changes.insert(b"0".to_vec(), Some((Node([2; 20]), FileFlag::Regular)));
        changes.insert(b"b/c".to_vec(), None);
        changes.insert(b"c".to_vec(), Some((Node([3; 20]), FileFlag::Symlink)));
        changes.insert(b"d".to_vec(), Some((Node([4; 20]), FileFlag::Executable)));
        changes.insert(b"zz".to_vec(), None);
        let text = a.with_changes(&changes);
        let b = Manifest::new(Arc::from(text), Node([9; 20])).unwrap();
        let got: Vec<(Vec<u8>, Node, FileFlag)> = b
            .iter()
            .map(|e| e.map(|e| (e.path.to_vec(), e.node, e.flag)).unwrap())
            .collect();
        let a_node = a.get(b"a").unwrap().unwrap().0;
        assert_eq!(
            got,
            vec![
                (b"0".to_vec(), Node([2; 20]), FileFlag::Regular),
                (b"a".to_vec(), a_node, FileFlag::Regular),
                (b"c".to_vec(), Node([3; 20]), FileFlag::Symlink),
                (b"d".to_vec(), Node([4; 20]), FileFlag::Executable),
            ]
        );
        assert_eq!(
            a.with_changes(&BTreeMap::new()),
            a.with_changes(&BTreeMap::new())
        );
    }

    #[test]
    fn diff_lists_changed_added_and_removed_paths_in_order() {
        let a = manifest(&[("a", ""), ("b", ""), ("d/x", "x")]);
        let mut text = Vec::new();
        for (p, n, f) in [("b", 9, ""), ("c", 3, "l"), ("d/x", 3, "")] {
            text.extend_from_slice(p.as_bytes());
            text.push(0);
            text.extend_from_slice(format!("{n:040x}").as_bytes());
            text.extend_from_slice(f.as_bytes());
            text.push(b'\n');
        }
        let b = Manifest::new(Arc::from(text), Node([1; 20])).unwrap();
        let d = a.diff(&b).unwrap();
        let paths: Vec<(&[u8], bool, bool)> = d
            .iter()
            .map(|c| (c.path.as_slice(), c.old.is_some(), c.new.is_some()))
            .collect();
        assert_eq!(
            paths,
            vec![
                (&b"a"[..], true, false),
                (&b"b"[..], true, true),
                (&b"c"[..], false, true),
                (&b"d/x"[..], true, true),
            ]
        );
        assert_eq!(d[3].old.unwrap().1, FileFlag::Executable);
        assert_eq!(d[3].new.unwrap().1, FileFlag::Regular);
        assert!(a.diff(&a.clone()).unwrap().is_empty());
    }

    fn manifest(paths: &[(&str, &str)]) -> Manifest {
        let mut text = Vec::new();
        for (i, (p, f)) in paths.iter().enumerate() {
            text.extend_from_slice(p.as_bytes());
            text.push(0);
            text.extend_from_slice(format!("{:040x}", i + 1).as_bytes());
            text.extend_from_slice(f.as_bytes());
            text.push(b'\n');
        }
        Manifest::new(Arc::from(text), Node::NULL).unwrap()
    }

    #[test]
    fn find_locates_every_path_and_only_those() {
        let names = ["a", "a.b", "a/b", "a/c/d", "b", "bb", "c/x", "z"];
        let m = manifest(&names.iter().map(|n| (*n, "")).collect::<Vec<_>>());
        for (i, n) in names.iter().enumerate() {
            let e = m.find(n.as_bytes()).unwrap().unwrap();
            assert_eq!(e.path, n.as_bytes());
            assert_eq!(e.node.to_hex(), format!("{:040x}", i + 1));
        }
        for missing in ["", "0", "a/", "a/c", "ba", "zz", "c"] {
            assert!(m.find(missing.as_bytes()).unwrap().is_none(), "{missing}");
        }
    }

    #[test]
    fn flags_and_prefix_iteration() {
        let m = manifest(&[("a", "x"), ("d/e", "l"), ("d/f", ""), ("d0", "")]);
        assert_eq!(m.find(b"a").unwrap().unwrap().flag, FileFlag::Executable);
        let under: Vec<_> = m
            .iter_prefix(b"d/")
            .map(|e| e.unwrap().path.to_vec())
            .collect();
        assert_eq!(under, vec![b"d/e".to_vec(), b"d/f".to_vec()]);
        assert_eq!(m.iter().count(), 4);
        assert_eq!(m.iter_prefix(b"q/").count(), 0);
    }

    #[test]
    fn children_list_files_and_skip_subtrees() {
        let m = manifest(&[
            ("a-b", ""),
            ("a.c", "x"),
            ("a/x", ""),
            ("a/y/z", "l"),
            ("a/y/zz", ""),
            ("a0", ""),
            ("b/c", ""),
        ]);
        let names = |dir: &[u8]| -> Vec<(bool, Vec<u8>)> {
            m.children(dir)
                .unwrap()
                .into_iter()
                .map(|c| match c {
                    Child::File { name, .. } => (false, name.to_vec()),
                    Child::Dir { name } => (true, name.to_vec()),
                })
                .collect()
        };
        let v = |x: &str| x.as_bytes().to_vec();
        assert_eq!(
            names(b""),
            vec![
                (false, v("a-b")),
                (false, v("a.c")),
                (true, v("a")),
                (false, v("a0")),
                (true, v("b"))
            ]
        );
        assert_eq!(names(b"a"), vec![(false, v("x")), (true, v("y"))]);
        assert_eq!(names(b"a/y"), vec![(false, v("z")), (false, v("zz"))]);
        assert_eq!(names(b"nope"), vec![]);
    }

    #[test]
    fn children_of_an_unsorted_manifest_are_an_error() {
        // "b/x" sits between "c" and "d": the two binary searches that bound directory
        // `b` end on different sides of it, and the line at the start ("c") is not under `b/`.
        let m = manifest(&[("c", ""), ("b/x", ""), ("d", "")]);
        assert!(m.children(b"b").is_err());
    }

    #[test]
    fn fuzz_crash_9d97cab6_children_of_an_unsorted_manifest() {
        // cargo fuzz manifest_paths against the code before the fix, minimized: "i" listed
        // before "//", then directory "/" listed (prefix "//" sliced off the path "i").
        let node = "0000000000000000000000000000000000000006";
        let text = format!("i\0{node}\n//\0{node}\n");
        let m = Manifest::new(Arc::from(text.as_bytes()), Node::NULL).unwrap();
        assert!(m.children(b"/").is_err());
        let _ = m.children(b"");
        let _ = m.diff(&Manifest::empty());
    }

    #[test]
    fn malformed_manifests_are_errors() {
        assert!(Manifest::new(Arc::from(&b"a\0"[..]), Node::NULL).is_err());
        let m = Manifest::new(Arc::from(&b"a\x00123\n"[..]), Node::NULL).unwrap();
        assert!(m.iter().next().unwrap().is_err());
        assert!(m.find(b"a").is_err());
    }
}
