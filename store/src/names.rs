//! Names that point at changesets: tags (`.hgtags` on every head, `.hg/localtags`, `tip`),
//! bookmarks and branches, resolved the way hg resolves them.

use crate::error::{Result, StoreError};
use crate::node::{Node, Rev, NULL_REV};
use crate::repo::Repo;
use std::collections::BTreeMap;
use std::path::Path;

/// A tag's current node and the nodes it pointed at before (oldest first).
type TagHistory = (Node, Vec<Node>);

/// Parses lines of `hexnode name`, giving each name its last node and its earlier ones.
fn read_tag_lines(text: &[u8]) -> BTreeMap<Vec<u8>, TagHistory> {
    let mut hist: BTreeMap<Vec<u8>, Vec<Node>> = BTreeMap::new();
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(space) = line.iter().position(|&b| b == b' ') else {
            continue;
        };
        let Some(node) = Node::from_hex(&line[..space]) else {
            continue;
        };
        let name = line[space + 1..].trim_ascii().to_vec();
        hist.entry(name).or_default().push(node);
    }
    hist.into_iter()
        .filter_map(|(name, mut nodes)| {
            let last = nodes.pop()?;
            Some((name, (last, nodes)))
        })
        .collect()
}

/// Merges one file's tags into `all`, keeping a tag's newer value unless the existing one
/// superseded it (hg's `_updatetags` rule).
fn merge_tags(file: BTreeMap<Vec<u8>, TagHistory>, all: &mut BTreeMap<Vec<u8>, TagHistory>) {
    for (name, (mut anode, mut ahist)) in file {
        if let Some((bnode, bhist)) = all.get(&name) {
            if *bnode != anode
                && bhist.contains(&anode)
                && (!ahist.contains(bnode) || bhist.len() > ahist.len())
            {
                anode = *bnode;
            }
            for n in bhist {
                if !ahist.contains(n) {
                    ahist.push(*n);
                }
            }
        }
        all.insert(name, (anode, ahist));
    }
}

/// Revisions with no children, oldest first.
pub fn heads(repo: &Repo) -> Result<Vec<Rev>> {
    let cl = repo.changelog();
    let mut has_child = vec![false; cl.len()];
    for rev in 0..cl.len() as Rev {
        for p in cl.parents(rev)? {
            if p >= 0 {
                has_child[p as usize] = true;
            }
        }
    }
    Ok((0..cl.len() as Rev)
        .filter(|&r| !has_child[r as usize])
        .collect())
}

fn read_optional(path: &Path) -> Result<Vec<u8>> {
    match std::fs::read(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// Every tag, `tip` included, mapped to its changelog revision.
pub fn tags(repo: &Repo) -> Result<BTreeMap<Vec<u8>, Rev>> {
    let mut all = BTreeMap::new();
    let hgtags = repo.filelog(b".hgtags")?;
    let mut seen = Vec::new();
    for head in heads(repo)? {
        let manifest = repo.manifest_of(head)?;
        let Some(entry) = manifest.find(b".hgtags")? else {
            continue;
        };
        if seen.contains(&entry.node) {
            continue;
        }
        seen.push(entry.node);
        let text = hgtags.read(hgtags.rev_of(&entry.node)?)?;
        merge_tags(read_tag_lines(&text), &mut all);
    }
    let cl = repo.changelog();
    let local: BTreeMap<_, _> = read_tag_lines(&read_optional(&repo.dot_hg().join("localtags"))?)
        .into_iter()
        .filter(|(_, (node, _))| cl.rev_of(node).is_some())
        .collect();
    merge_tags(local, &mut all);
    let mut out: BTreeMap<Vec<u8>, Rev> = all
        .into_iter()
        .filter_map(|(name, (node, _))| {
            let rev = cl.rev_of(&node)?;
            (!node.is_null()).then_some((name, rev))
        })
        .collect();
    out.insert(b"tip".to_vec(), cl.tip());
    Ok(out)
}

/// Bookmarks (`.hg/bookmarks`, or the store's with `bookmarksinstore`) mapped to revisions.
pub fn bookmarks(repo: &Repo) -> Result<BTreeMap<Vec<u8>, Rev>> {
    let cl = repo.changelog();
    Ok(crate::bookmarks::Bookmarks::load(repo)?
        .into_map()
        .into_iter()
        .filter_map(|(name, node)| Some((name, cl.rev_of(&node)?)))
        .filter(|(_, rev)| *rev != NULL_REV)
        .collect())
}

/// The revision a branch name resolves to: its tipmost open head, or its tipmost
/// head when every head is closed.
pub fn branch_tip(repo: &Repo, branch: &[u8]) -> Result<Option<Rev>> {
    let cl = repo.changelog();
    let mut best_closed = None;
    let mut has_child_on_branch = vec![false; cl.len()];
    for rev in (0..cl.len() as Rev).rev() {
        let cs = repo.changeset(rev)?;
        if cs.branch() != branch {
            continue;
        }
        if !has_child_on_branch[rev as usize] {
            if !cs.closes_branch() {
                return Ok(Some(rev));
            }
            best_closed.get_or_insert(rev);
        }
        for p in cl.parents(rev)? {
            if p >= 0 {
                has_child_on_branch[p as usize] = true;
            }
        }
    }
    Ok(best_closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(b: u8) -> Node {
        Node([b; 20])
    }

    #[test]
    fn later_lines_move_a_tag_and_keep_its_history() {
        let text = format!("{} v1\n{} v1\n{} v2\nbad line\n", n(1), n(2), n(3));
        let tags = read_tag_lines(text.as_bytes());
        assert_eq!(tags[&b"v1".to_vec()], (n(2), vec![n(1)]));
        assert_eq!(tags[&b"v2".to_vec()], (n(3), vec![]));
    }

    #[test]
    fn a_head_that_superseded_a_tag_wins_over_an_older_value() {
        let mut all = BTreeMap::new();
        merge_tags(
            read_tag_lines(format!("{} t\n{} t\n", n(1), n(2)).as_bytes()),
            &mut all,
        );
        merge_tags(read_tag_lines(format!("{} t\n", n(1)).as_bytes()), &mut all);
        assert_eq!(all[&b"t".to_vec()].0, n(2));
    }
}
