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
