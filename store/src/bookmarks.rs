//! Bookmarks as Mercurial 6.3.2 keeps them (`M/bookmarks.py`): the repository's
//! `bookmarks` file (`.hg/bookmarks`, or the store's with `bookmarksinstore`), a working
//! copy's active bookmark (`bookmarks.current` in its `.hg`), and how a commit or an
//! update moves them. A mount's `.hg` shares the repository's bookmarks (hg share -B),
//! so the file is always the repository's and the active bookmark the working copy's.
//!
//! Writers hold the repository's locks, as hg does; every file is replaced whole through
//! a temporary name and a rename.

use crate::error::{Result, StoreError};
use crate::node::Node;
use crate::node::{Rev, NULL_REV};
use crate::repo::Repo;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The repository's bookmarks, by name (hg's `bmstore`: names whose node the changelog
/// does not know are dropped, and dropped again when the file is written).
#[derive(Debug, Clone)]
pub struct Bookmarks {
    path: PathBuf,
    marks: BTreeMap<Vec<u8>, Node>,
}

impl Bookmarks {
    /// Reads the repository's bookmarks (none when the file is missing).
    pub fn load(repo: &Repo) -> Result<Bookmarks> {
        let path = if repo.requirements().contains("bookmarksinstore") {
            repo.store_path().join("bookmarks")
        } else {
            repo.dot_hg().join("bookmarks")
        };
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        let cl = repo.changelog();
        let mut marks = BTreeMap::new();
        for line in text.split(|&b| b == b'\n') {
            let line = line.trim_ascii();
            let Some(space) = line.iter().position(|&b| b == b' ') else {
                continue;
            };
            let Some(node) = Node::from_hex(&line[..space]) else {
                continue;
            };
            if cl.rev_of(&node).is_some() {
                marks.insert(line[space + 1..].to_vec(), node);
            }
        }
        Ok(Bookmarks { path, marks })
    }

    /// Every bookmark with its node, by name.
    pub fn into_map(self) -> BTreeMap<Vec<u8>, Node> {
        self.marks
    }

    /// Sets (or adds) bookmark `name`; [`Bookmarks::write`] writes it.
    pub fn set(&mut self, name: &[u8], node: Node) {
        self.marks.insert(name.to_vec(), node);
    }

    pub fn get(&self, name: &[u8]) -> Option<Node> {
        self.marks.get(name).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Vec<u8>, &Node)> {
        self.marks.iter()
    }

    /// Writes the file as hg does: `<hex node> <name>` per line, sorted by name.
    pub fn write(&self) -> Result<()> {
        let mut text = Vec::new();
        for (name, node) in &self.marks {
            text.extend_from_slice(node.to_hex().as_bytes());
            text.push(b' ');
            text.extend_from_slice(name);
            text.push(b'\n');
        }
        replace(&self.path, &text)
    }

    /// hg's `bookmarks.update(repo, parents, node)` after a commit or an update to `node`:
    /// the active bookmark moves to `node` when it was on one of `parents` and `node`
    /// descends from it, and its divergent copies (`name@x`) on ancestors of `node` go.
    /// True when something changed (the caller writes the file).
    pub fn advance(
        &mut self,
        repo: &Repo,
        active: &[u8],
        parents: &[Node],
        node: Node,
    ) -> Result<bool> {
        let Some(current) = self.get(active) else {
            return Ok(false);
        };
        let mut deletefrom: Vec<Node> = parents.to_vec();
        let mut changes: Vec<(Vec<u8>, Option<Node>)> = Vec::new();
        if parents.contains(&current) {
            let new_rev = rev_of(repo, &node)?;
            deletefrom = Vec::new();
            for (name, n) in &self.marks {
                if base_name(name) == base_name(active)
                    && repo.changelog().is_ancestor(rev_of(repo, n)?, new_rev)?
                {
                    deletefrom.push(*n);
                }
            }
            if valid_destination(repo, &current, &node)? {
                changes.push((active.to_vec(), Some(node)));
            }
        }
        for (name, n) in &self.marks {
            let divergent = name.as_slice() != b"@" && name.contains(&b'@');
            if divergent
                && base_name(name) == base_name(active)
                && name.as_slice() != active
                && deletefrom.contains(n)
            {
                changes.push((name.clone(), None));
            }
        }
        let changed = !changes.is_empty();
        for (name, to) in changes {
            match to {
                Some(n) => self.marks.insert(name, n),
                None => self.marks.remove(&name),
            };
        }
        Ok(changed)
    }

    /// The other bookmarks that diverge from `active` (same name before `@`), hg's
    /// `headsforactive` less the active one: their nodes.
    pub fn divergent_of(&self, active: &[u8]) -> Vec<Node> {
        self.marks
            .iter()
            .filter(|(name, _)| name.as_slice() != active && base_name(name) == base_name(active))
            .map(|(_, n)| *n)
            .collect()
    }
}

fn base_name(name: &[u8]) -> &[u8] {
    name.split(|&b| b == b'@').next().unwrap_or(name)
}

fn rev_of(repo: &Repo, node: &Node) -> Result<Rev> {
    if node.is_null() {
        return Ok(NULL_REV);
    }
    repo.changelog()
        .rev_of(node)
        .ok_or_else(|| StoreError::UnknownRevision(node.to_hex()))
}

/// hg's `validdest` without obsolescence markers: `new` is another revision that
/// descends from `old`.
fn valid_destination(repo: &Repo, old: &Node, new: &Node) -> Result<bool> {
    if old == new {
        return Ok(false);
    }
    repo.changelog()
        .is_ancestor(rev_of(repo, old)?, rev_of(repo, new)?)
}

/// A working copy's active bookmark (hg's `_readactive`): the first line of
/// `bookmarks.current` in its `.hg`, when it names a bookmark.
pub fn active(wc_hg: &Path, marks: &Bookmarks) -> Option<Vec<u8>> {
    let text = std::fs::read(wc_hg.join("bookmarks.current")).ok()?;
    let name = text.split(|&b| b == b'\n').next().unwrap_or_default();
    (!name.is_empty() && marks.get(name).is_some()).then(|| name.to_vec())
}

/// Makes `name` the active bookmark (`hg update NAME`, `hg bookmark NAME`).
pub fn activate(wc_hg: &Path, name: &[u8]) -> Result<()> {
    replace(&wc_hg.join("bookmarks.current"), name)
}

/// Leaves the active bookmark, if any.
pub fn deactivate(wc_hg: &Path) -> Result<()> {
    let path = wc_hg.join("bookmarks.current");
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(&path, e)),
    }
}

fn replace(path: &Path, data: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".revfs-tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        StoreError::io(path, e)
    })
}
