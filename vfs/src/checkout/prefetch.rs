//! Prefetch: a revision's files read ahead through the mount's repository handle.

use super::*;
use crate::wc::{Result, WorkingCopy};
use revfs_store::{Node, Repo, StoreError};
use std::sync::Arc;

impl WorkingCopy {
    /// Reads the files `paths` of revision `node` (the working-copy parent when `None`)
    /// through the mount's repository handle, in parallel, so that what the mount reads
    /// from is warm before anyone opens the files: the handle's open filelogs, its cache of
    /// rebuilt texts (bounded in bytes: the last files read stay), and the kernel's page
    /// cache of the revlogs. Paths the revision does not have are skipped. `progress`
    /// hears of `prefetching`, per file read.
    pub fn prefetch(
        &self,
        node: Option<Node>,
        paths: &[Vec<u8>],
        progress: Option<ProgressFn>,
    ) -> Result<PrefetchOutcome> {
        use rayon::prelude::*;
        use std::sync::atomic::{AtomicU64, Ordering};
        let (repo, base_node, base) = {
            let inner = self.read();
            (
                inner.repo().clone(),
                inner.base_node(),
                inner.base().clone(),
            )
        };
        let (repo, manifest) = match node {
            None => (repo, base),
            Some(n) if n == base_node => (repo, base),
            Some(n) => {
                // A revision hg added since the handle was opened: a fresh handle still
                // warms the page cache.
                let repo = if repo.changelog().rev_of(&n).is_some() {
                    repo
                } else {
                    Arc::new(Repo::open(repo.root())?)
                };
                let rev = repo
                    .changelog()
                    .rev_of(&n)
                    .ok_or_else(|| StoreError::UnknownRevision(n.to_hex()))?;
                let m = Arc::new(repo.manifest_of(rev)?);
                (repo, m)
            }
        };
        let mut wanted: Vec<(&[u8], Node)> = Vec::with_capacity(paths.len());
        for p in paths {
            if let Some(e) = manifest.find(p)? {
                wanted.push((p, e.node));
            }
        }
        let total = wanted.len() as u64;
        fetch_from_server(&repo, &wanted, progress)?;
        let done = AtomicU64::new(0);
        let bytes = AtomicU64::new(0);
        tick(progress, "prefetching", 0, wanted.len());
        wanted
            .par_iter()
            .try_for_each(|(path, fnode)| -> Result<()> {
                // A big text goes to the on-disk cache, where reads will find it.
                let text = self.store_text(&repo, path, fnode)?;
                bytes.fetch_add(text.len(), Ordering::Relaxed);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d & 31 == 0 || d == total {
                    if let Some(f) = progress {
                        f("prefetching", d, total);
                    }
                }
                Ok(())
            })?;
        Ok(PrefetchOutcome {
            files: total,
            bytes: bytes.into_inner(),
        })
    }
}

/// File revisions one request of a prefetch asks a server for, and how many requests go at
/// once (each on a connection of its own).
const FETCH_BATCH: usize = 500;
const FETCH_CONNECTIONS: usize = 4;

/// In a repository cloned from a server, the revisions of `wanted` this machine lacks,
/// fetched first in batches of [`FETCH_BATCH`] over at most [`FETCH_CONNECTIONS`]
/// connections (reading them one by one would cost a request each). `progress` hears of
/// `fetching`, per batch.
fn fetch_from_server(
    repo: &Arc<Repo>,
    wanted: &[(&[u8], Node)],
    progress: Option<ProgressFn>,
) -> Result<()> {
    if !repo.is_shallow() {
        return Ok(());
    }
    let missing: Vec<(&[u8], Node)> = wanted
        .iter()
        .filter(|(p, n)| !repo.has_file_locally(p, n))
        .copied()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let batches: Vec<&[(&[u8], Node)]> = missing.chunks(FETCH_BATCH).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<StoreError>> = std::sync::Mutex::new(None);
    tick(progress, "fetching", 0, missing.len());
    std::thread::scope(|scope| {
        for _ in 0..FETCH_CONNECTIONS.min(batches.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(batch) = batches.get(i) else {
                    return;
                };
                if let Err(e) = repo.fetch_files(batch) {
                    failed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                }
                let d =
                    done.fetch_add(batch.len(), std::sync::atomic::Ordering::Relaxed) + batch.len();
                tick(progress, "fetching", d, missing.len());
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
