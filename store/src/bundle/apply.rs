//! Adds the revisions of one changegroup to a repository, inside the caller's transaction:
//! the changelog's group, the manifest's, then each file's, as hg's `changegroup.apply`
//! does. Every revision's text is rebuilt from its delta and hashed with its parents: a
//! node that does not match its content is refused (hg's "integrity check failed"), as is a
//! parent or delta base the repository does not have. Revisions already present are kept
//! as they are.

use super::changegroup::{CgReader, CgVersion};
use super::BundleError;
use crate::commit::{clear_cache, compression_of, journal_revlog, open_writer, update_fncache};
use crate::node::{Node, Rev, NULL_REV};
use crate::repo::Repo;
use crate::revlog_writer::RevlogWriter;
use crate::transaction::Transaction;
use std::collections::HashMap;

/// What one changegroup added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    pub changesets: usize,
    pub manifests: usize,
    /// Files with at least one revision in the group.
    pub files: usize,
    pub file_revisions: usize,
}

/// Where an application stands, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    Changesets(usize),
    Manifests(usize),
    Files { done: usize, path: &'a [u8] },
}

fn short(n: &Node) -> String {
    n.to_hex()[..12].to_owned()
}

/// Applies one delta group to `w`; `linkrev` maps a revision's link node (and the rev it
/// will get) to its linkrev. Returns the bytes of the texts added.
fn apply_group(
    cg: &mut CgReader<'_>,
    w: &mut RevlogWriter,
    name: &str,
    line_deltas: bool,
    mut linkrev: impl FnMut(&Node, Rev) -> Result<Rev, BundleError>,
    mut each: impl FnMut(usize),
) -> Result<u64, BundleError> {
    let mut prev: Option<Node> = None;
    let mut count = 0usize;
    let mut bytes = 0u64;
    while let Some(c) = cg.delta()? {
        if c.flags != 0 {
            return Err(BundleError::Unsupported(format!(
                "revision flags {:#x} on {name}@{}",
                c.flags,
                short(&c.node)
            )));
        }
        let parent = |p: &Node| -> Result<Rev, BundleError> {
            if p.is_null() {
                return Ok(NULL_REV);
            }
            w.rev_of(p).ok_or_else(|| BundleError::Unknown {
                revlog: name.to_owned(),
                node: short(p),
                what: "parent",
            })
        };
        let (p1, p2) = (parent(&c.p1)?, parent(&c.p2)?);
        let base = c.base.or(prev).unwrap_or(c.p1);
        let base_text = if base.is_null() {
            None
        } else {
            let rev = w.rev_of(&base).ok_or_else(|| BundleError::Unknown {
                revlog: name.to_owned(),
                node: short(&base),
                what: "delta base",
            })?;
            Some(w.text(rev)?)
        };
        let base_slice: &[u8] = base_text.as_deref().unwrap_or(&[]);
        let text =
            crate::mpatch::apply(base_slice, &c.delta, 0).map_err(|e| BundleError::Malformed {
                what: format!("{name}@{}", short(&c.node)),
                reason: format!("its delta does not apply: {e}"),
            })?;
        drop(base_text);
        let link = linkrev(&c.linknode, w.len() as Rev)?;
        bytes += text.len() as u64;
        let (_, node) = w.add(&text, p1, p2, link, line_deltas)?;
        if node != c.node {
            return Err(BundleError::IntegrityCheckFailed {
                revlog: name.to_owned(),
                node: short(&c.node),
            });
        }
        prev = Some(c.node);
        count += 1;
        each(count);
    }
    Ok(bytes)
}

/// Adds the revisions of changegroup `cg` to `repo` within `tr`. The repository's caches
/// of branch heads and tags are cleared when something was added.
pub fn apply(
    repo: &Repo,
    tr: &mut Transaction,
    cg: &mut CgReader<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Applied, BundleError> {
    let compression = compression_of(repo);
    let generaldelta = repo.requirements().contains("generaldelta");
    let mut applied = Applied::default();

    // The changelog: each revision links to itself.
    let mut cl = open_writer(tr, b"00changelog", false, compression)?.store_deltas(false);
    let cl_before = cl.len();
    let bytes = apply_group(
        cg,
        &mut cl,
        "00changelog",
        false,
        |_, rev| Ok(rev),
        |n| progress(Progress::Changesets(n)),
    )?;
    applied.changesets = cl.len() - cl_before;
    let mut link_of: HashMap<Node, Rev> = HashMap::new();
    for rev in cl_before..cl.len() {
        link_of.insert(cl.node(rev as Rev)?, rev as Rev);
    }
    let linkrev = |name: &str, n: &Node| -> Result<Rev, BundleError> {
        link_of
            .get(n)
            .copied()
            .or_else(|| repo.changelog().rev_of(n))
            .ok_or_else(|| BundleError::Unknown {
                revlog: name.to_owned(),
                node: short(n),
                what: "changeset",
            })
    };
    journal_revlog(
        tr,
        b"00changelog",
        &cl,
        bytes + 64 * applied.changesets as u64,
    )?;

    // The manifest.
    let mut ml = open_writer(tr, b"00manifest", generaldelta, compression)?;
    let ml_before = ml.len();
    let bytes = apply_group(
        cg,
        &mut ml,
        "00manifest",
        true,
        |n, _| linkrev("00manifest", n),
        |n| progress(Progress::Manifests(n)),
    )?;
    applied.manifests = ml.len() - ml_before;
    journal_revlog(
        tr,
        b"00manifest",
        &ml,
        bytes + 64 * applied.manifests as u64,
    )?;
    ml.finish()?;
    if cg.version() == CgVersion::V3 {
        if let Some(dir) = cg.name()? {
            return Err(BundleError::Unsupported(format!(
                "tree manifests (directory {})",
                String::from_utf8_lossy(&dir)
            )));
        }
    }

    // The files.
    let mut fncache: Vec<Vec<u8>> = Vec::new();
    while let Some(path) = cg.name()? {
        if let Err(why) = crate::pathaudit::audit(&path) {
            return Err(BundleError::Malformed {
                what: "changegroup".into(),
                reason: format!("file {:?}: {why}", String::from_utf8_lossy(&path)),
            });
        }
        let mut stem = b"data/".to_vec();
        stem.extend_from_slice(&path);
        let name = String::from_utf8_lossy(&stem).into_owned();
        let mut fl = open_writer(tr, &stem, generaldelta, compression)?;
        let was_new = fl.original_sizes().0 == 0;
        let before = fl.len();
        let bytes = apply_group(cg, &mut fl, &name, false, |n, _| linkrev(&name, n), |_| {})?;
        let added = fl.len() - before;
        if added == 0 {
            continue;
        }
        applied.files += 1;
        applied.file_revisions += added;
        progress(Progress::Files {
            done: applied.files,
            path: &path,
        });
        journal_revlog(tr, &stem, &fl, bytes + 64 * added as u64)?;
        let split = fl.finish()?;
        if was_new {
            fncache.push([stem.as_slice(), b".i"].concat());
        }
        if split {
            fncache.push([stem.as_slice(), b".d"].concat());
        }
    }
    if repo.requirements().contains("fncache") && !fncache.is_empty() {
        update_fncache(repo, tr, &fncache)?;
    }
    // The changelog last, as hg finalizes it: a reader never sees a changeset whose
    // manifest or files are not there yet.
    cl.finish()?;
    if applied.changesets > 0 {
        clear_cache(repo.dot_hg())?;
    }
    Ok(applied)
}
