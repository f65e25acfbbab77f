//! The manifest checks shared by the `manifest` and `manifest_paths` targets.

use revfs_store::manifest::{Child, FileFlag, Manifest};
use revfs_store::Node;
use std::collections::BTreeMap;
use std::sync::Arc;

/// At most this many paths and directories are looked up per manifest.
const MAX_LOOKUPS: usize = 64;

type Entries = Vec<(Vec<u8>, Node, FileFlag)>;
/// An entry's node and flag on one side of a diff (`None`: not there).
type Side = Option<(Node, FileFlag)>;

/// Every entry, or `None` when a line is malformed or the paths are not strictly sorted.
fn entries(m: &Manifest) -> Option<Entries> {
    let mut out: Entries = Vec::new();
    for e in m.iter() {
        let e = e.ok()?;
        if out.last().is_some_and(|(p, _, _)| p.as_slice() >= e.path) {
            return None;
        }
        out.push((e.path.to_vec(), e.node, e.flag));
    }
    Some(out)
}

/// The directories to list: the root, and every parent directory of the first paths.
fn dirs(m: &Manifest) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for e in m.iter().take(MAX_LOOKUPS).flatten() {
        let mut p = e.path;
        while let Some(slash) = p.iter().rposition(|&b| b == b'/') {
            p = &p[..slash];
            out.push(p.to_vec());
        }
    }
    out.sort();
    out.dedup();
    out.truncate(MAX_LOOKUPS);
    out
}

#[derive(Debug, PartialEq, Eq)]
enum NaiveChild {
    File(Vec<u8>, Node, FileFlag),
    Dir(Vec<u8>),
}

fn naive_children(all: &Entries, dir: &[u8]) -> Vec<NaiveChild> {
    let mut prefix = dir.to_vec();
    if !prefix.is_empty() {
        prefix.push(b'/');
    }
    let mut out: Vec<NaiveChild> = Vec::new();
    for (path, node, flag) in all {
        let Some(rest) = path.strip_prefix(prefix.as_slice()) else {
            continue;
        };
        match rest.iter().position(|&b| b == b'/') {
            None => out.push(NaiveChild::File(rest.to_vec(), *node, *flag)),
            Some(slash) => {
                let name = &rest[..slash];
                if !matches!(out.last(), Some(NaiveChild::Dir(d)) if d.as_slice() == name) {
                    out.push(NaiveChild::Dir(name.to_vec()));
                }
            }
        }
    }
    out
}

pub fn exercise(m: &Manifest) {
    let well_formed = entries(m);
    let paths: Vec<Vec<u8>> = m
        .iter()
        .take(MAX_LOOKUPS)
        .flatten()
        .map(|e| e.path.to_vec())
        .collect();
    for path in &paths {
        let found = m.find(path);
        if well_formed.is_some() {
            let found = found.expect("find in a well-formed manifest");
            assert_eq!(found.map(|e| e.path), Some(path.as_slice()));
        }
        let mut missing = path.clone();
        missing.push(0);
        let _ = m.find(&missing);
    }
    for dir in dirs(m) {
        let children = m.children(&dir);
        let mut prefix = dir.clone();
        if !prefix.is_empty() {
            prefix.push(b'/');
        }
        let under: Vec<_> = m.iter_prefix(&prefix).take(4 * MAX_LOOKUPS).collect();
        if let Some(all) = &well_formed {
            let got: Vec<NaiveChild> = children
                .expect("children of a well-formed manifest")
                .into_iter()
                .map(|c| match c {
                    Child::File { name, entry } => {
                        NaiveChild::File(name.to_vec(), entry.node, entry.flag)
                    }
                    Child::Dir { name } => NaiveChild::Dir(name.to_vec()),
                })
                .collect();
            assert_eq!(got, naive_children(all, &dir), "children of {dir:?}");
            let want: Vec<&[u8]> = all
                .iter()
                .map(|(p, _, _)| p.as_slice())
                .filter(|p| p.starts_with(&prefix))
                .take(4 * MAX_LOOKUPS)
                .collect();
            let got: Vec<&[u8]> = under.iter().map(|e| e.as_ref().unwrap().path).collect();
            assert_eq!(got, want, "iter_prefix({prefix:?})");
        }
    }
}

fn naive_diff(a: &Entries, b: &Entries) -> Vec<(Vec<u8>, Side, Side)> {
    let mut all: BTreeMap<Vec<u8>, (Side, Side)> = BTreeMap::new();
    for (p, n, f) in a {
        all.entry(p.clone()).or_default().0 = Some((*n, *f));
    }
    for (p, n, f) in b {
        all.entry(p.clone()).or_default().1 = Some((*n, *f));
    }
    all.into_iter()
        .filter(|(_, (x, y))| x != y)
        .map(|(p, (x, y))| (p, x, y))
        .collect()
}

/// Wraps two texts as manifests and checks every lookup on each, and the diffs between them.
pub fn check_pair(a: &[u8], b: &[u8]) {
    let (Ok(ma), Ok(mb)) = (
        Manifest::new(Arc::from(a), Node([1; 20])),
        Manifest::new(Arc::from(b), Node([2; 20])),
    ) else {
        return;
    };
    exercise(&ma);
    exercise(&mb);
    let ab = ma.diff(&mb);
    let _ = mb.diff(&ma);
    if let Ok(same) = Manifest::new(Arc::from(a), Node([3; 20])) {
        let d = ma.diff(&same);
        if entries(&ma).is_some() {
            assert_eq!(
                d.expect("diff of a well-formed manifest with itself"),
                vec![]
            );
        }
    }
    // `with_changes` (how a commit writes its manifest from p1's text): set every entry of
    // the second manifest (the first 64, if it is not well formed) in the first.
    let mut changes: BTreeMap<Vec<u8>, Side> = BTreeMap::new();
    for e in mb.iter().take(MAX_LOOKUPS).flatten() {
        changes.insert(e.path.to_vec(), Some((e.node, e.flag)));
    }
    let _ = ma.get(b"");
    let _ = ma.with_changes(&changes);
    if let (Some(ea), Some(eb)) = (entries(&ma), entries(&mb)) {
        let diff = naive_diff(&ea, &eb);
        let got: Vec<_> = ab
            .expect("diff of well-formed manifests")
            .into_iter()
            .map(|c| (c.path, c.old, c.new))
            .collect();
        assert_eq!(got, diff);
        // Applying the diff to the first manifest gives the second.
        let changes: BTreeMap<_, _> = diff.into_iter().map(|(p, _, new)| (p, new)).collect();
        let text = ma.with_changes(&changes);
        let rebuilt = Manifest::new(Arc::from(text), Node([4; 20])).expect("rebuilt text");
        assert_eq!(entries(&rebuilt), Some(eb.clone()), "with_changes");
        for (path, node, flag) in eb.iter().take(MAX_LOOKUPS) {
            assert_eq!(mb.get(path).expect("get"), Some((*node, *flag)));
        }
    }
}

/// Builds two manifest texts from a list of paths, for `manifest_paths`: each line of
/// `data` is a selector byte then a path (NUL bytes dropped). Selector bit 0 puts the path
/// in the first manifest, bit 1 in the second; bits 2-3 pick the flag (none, `x`, `l`, or
/// the invalid `q`); bits 4-7 pick the node. Lines keep their order, so the texts may be
/// unsorted or hold a path twice.
pub fn texts_from_paths(data: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for line in data.split(|&c| c == b'\n') {
        let Some((&sel, path)) = line.split_first() else {
            continue;
        };
        let flag: &[u8] = match (sel >> 2) & 3 {
            0 => b"",
            1 => b"x",
            2 => b"l",
            _ => b"q",
        };
        let node = format!("{:040x}", sel >> 4);
        for (bit, text) in [(1, &mut a), (2, &mut b)] {
            if sel & bit != 0 {
                text.extend(path.iter().filter(|&&c| c != 0));
                text.push(0);
                text.extend_from_slice(node.as_bytes());
                text.extend_from_slice(flag);
                text.push(b'\n');
            }
        }
    }
    (a, b)
}
