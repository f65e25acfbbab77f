//! hg's walk of the working copy for a command's file arguments (Mercurial 6.3.2's
//! `dirstate.walk` under `dirstate.status`, with a matcher), over the status the mount's
//! daemon keeps: which files a command sees, and hg's warnings for the files named on the
//! command line that the walk cannot use (`match.bad`: "No such file or directory",
//! "unsupported file type").
//!
//! The rules: a tracked file is seen when it matches; an unknown or ignored file when it
//! matches and is named exactly or lies below a directory the walk lists (an explicit file
//! that is a directory on disk, or the root when a pattern has no fixed prefix).

use super::error::Result;
use super::status::Status;
use super::Workspace;
use revfs_hg::matcher::{below_roots, Matcher, PathContext};
use revfs_hg::paths::is_under;
use revfs_store::manifest::Manifest;
use revfs_store::Node;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::FileType;
use std::os::unix::ffi::OsStrExt;

/// What the walk found.
pub struct Walk {
    /// Every status line the daemon gave (for the dirstate questions commands ask beside
    /// the walk: is a file tracked, is a directory).
    pub all: Vec<(char, Vec<u8>)>,
    /// The indexes into `all` of the lines the walk sees, in hg's order.
    seen: Vec<usize>,
    /// Copy sources, by destination.
    pub copies: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Named files the walk cannot use, with hg's reason (with duplicates when named
    /// twice); warned about unless silent.
    pub bad: Vec<(Vec<u8>, String)>,
    /// One `lstat` of each named file (the root excepted).
    pub named: BTreeMap<Vec<u8>, std::io::Result<FileType>>,
}

impl Walk {
    /// The status lines the walk sees: (letter, repository path).
    pub fn entries(&self) -> impl Iterator<Item = &(char, Vec<u8>)> {
        self.seen.iter().map(|&i| &self.all[i])
    }

    /// A named file that exists as a regular file or a symbolic link (what hg's walk
    /// takes from the command line even when it is ignored).
    pub fn named_file(&self, f: &[u8]) -> bool {
        self.named
            .get(f)
            .is_some_and(|t| t.as_ref().is_ok_and(|t| t.is_file() || t.is_symlink()))
    }
}

/// Walks with `matcher` over the status `fetched` from the daemon (with the clean,
/// ignored and unknown files the command needs). hg's warnings for named files go to
/// standard error.
///
/// The status comes first: a command checks that the daemon answers before it looks at
/// the mount's files (the matcher's path checks, the named files' `lstat`).
pub fn walk(ws: &Workspace, ctx: &PathContext, matcher: &Matcher, fetched: Status) -> Walk {
    walk_with(ws, ctx, matcher, fetched, true)
}

/// [`walk`] without the warnings (hg's `badmatch(m, lambda x, y: False)`): `bad` lists the
/// files it would have warned about.
pub fn walk_silent(ws: &Workspace, ctx: &PathContext, matcher: &Matcher, fetched: Status) -> Walk {
    walk_with(ws, ctx, matcher, fetched, false)
}

fn walk_with(
    ws: &Workspace,
    ctx: &PathContext,
    matcher: &Matcher,
    fetched: Status,
    warn: bool,
) -> Walk {
    let Status { entries, copies } = fetched;
    let named = lstat_named(ws, matcher);
    // A tracked file that is gone is deleted or removed; a directory that is gone has such
    // files.
    let gone_tracked = |f: &[u8]| {
        entries
            .iter()
            .any(|(l, p)| matches!(l, '!' | 'R') && (p == f || is_under(p, f)))
    };
    let bad = bad_files(ctx, matcher, &named, gone_tracked, warn);
    let roots = matcher.walk_roots(|d| {
        named
            .get(d)
            .is_some_and(|t| t.as_ref().is_ok_and(|t| t.is_dir()))
    });
    let seen = entries
        .iter()
        .enumerate()
        .filter(|(_, (l, p))| {
            matcher.matches(p)
                && (!matches!(l, '?' | 'I') || matcher.exact(p) || below_roots(&roots, p))
        })
        .map(|(i, _)| i)
        .collect();
    Walk {
        all: entries,
        seen,
        copies,
        bad,
        named,
    }
}

/// The files named on the command line that hg's walk cannot find, and its warnings
/// (`dirstate._walkexplicit`): not on disk (`named`, from [`lstat_named`]) and not
/// `gone_tracked` (a file of the dirstate, or a directory of such files), or of a type hg
/// does not track.
pub fn bad_files(
    ctx: &PathContext,
    matcher: &Matcher,
    named: &BTreeMap<Vec<u8>, std::io::Result<FileType>>,
    mut gone_tracked: impl FnMut(&[u8]) -> bool,
    warn: bool,
) -> Vec<(Vec<u8>, String)> {
    let mut bad = Vec::new();
    // Sorted, not deduplicated: hg warns once per pattern naming a missing file.
    let mut files: Vec<&Vec<u8>> = matcher.files().iter().collect();
    files.sort();
    if files.is_empty() || files.iter().any(|f| f.is_empty()) {
        return bad;
    }
    for f in files {
        let Some(found) = named.get(f) else { continue };
        let msg = match found {
            Ok(t) => match unsupported_type(t) {
                Some(kind) => format!("unsupported file type (type is {kind})"),
                None => continue,
            },
            Err(_) if gone_tracked(f) => continue,
            Err(e) => revfs_hg::config::strerror(e),
        };
        if warn {
            eprintln!("{}: {msg}", String::from_utf8_lossy(&ctx.display(f)));
        }
        bad.push((f.clone(), msg));
    }
    bad
}

/// The kind hg names for a file type it does not track (`dirstate.badtype`), or `None`
/// for a file, a symbolic link or a directory.
pub fn unsupported_type(t: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    Some(if t.is_dir() || t.is_file() || t.is_symlink() {
        return None;
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else {
        "unknown"
    })
}

/// One `lstat` of each file named on the command line (the root excepted), by repository
/// path: what hg's walk learns of them first (`dirstate._walkexplicit`).
pub fn lstat_named(
    ws: &Workspace,
    matcher: &Matcher,
) -> BTreeMap<Vec<u8>, std::io::Result<FileType>> {
    matcher
        .files()
        .iter()
        .filter(|f| !f.is_empty())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|f| {
            let path = ws.root.join(std::ffi::OsStr::from_bytes(f));
            let t = std::fs::symlink_metadata(path).map(|m| m.file_type());
            (f.clone(), t)
        })
        .collect()
}

/// Files of a manifest, with their file nodes.
pub type ManifestFiles = Vec<(Vec<u8>, Node)>;

/// hg's walk of a revision's manifest (`manifest.walk`): the files `matcher` matches, in
/// path order, with their file nodes; and the named files that are neither a file nor a
/// directory of the revision (hg's "no such file in rev", sorted).
pub fn manifest_walk(
    manifest: &Manifest,
    matcher: &Matcher,
) -> Result<(ManifestFiles, Vec<Vec<u8>>)> {
    let mut found = Vec::new();
    if matcher.only_paths() && !matcher.is_always() {
        // Named files and directories: a lookup and a prefix scan each.
        let mut seen = BTreeSet::new();
        for f in matcher.files() {
            if let Some(e) = manifest.find(f)? {
                seen.insert((e.path.to_vec(), e.node));
            }
            let iter = if f.is_empty() {
                manifest.iter()
            } else {
                manifest.iter_prefix(&[f.as_slice(), b"/"].concat())
            };
            for e in iter {
                let e = e?;
                seen.insert((e.path.to_vec(), e.node));
            }
        }
        found.extend(seen);
    } else {
        for e in manifest.iter() {
            let e = e?;
            if matcher.matches(e.path) {
                found.push((e.path.to_vec(), e.node));
            }
        }
    }
    let named: BTreeSet<&Vec<u8>> = matcher.files().iter().filter(|f| !f.is_empty()).collect();
    let mut bad = Vec::new();
    for f in named {
        let dir = [f.as_slice(), b"/"].concat();
        if manifest.find(f)?.is_none() && manifest.iter_prefix(&dir).next().is_none() {
            bad.push(f.clone());
        }
    }
    Ok((found, bad))
}
