//! The base manifest mapped from the repository's manifest cache
//! ([`revfs_store::manifest_cache`]). A mount and an update map theirs from the start
//! (rebuilt into the cache when it is not there, [`revfs_store::Repo::kept_manifest`]); a
//! commit, or a new parent from hg, makes its new base on the heap, and a background thread
//! writes it to the cache and swaps in the mapped copy (the same node), so that the daemon
//! holds no full manifest text of its own between operations. A mount that mapped a file an
//! earlier one wrote checks its hash in the background, as the manifest log checks every
//! text it rebuilds.

use super::WorkingCopy;
use revfs_store::manifest::Manifest;
use std::collections::BTreeSet;
use std::sync::Arc;

impl WorkingCopy {
    /// Makes `manifest` (the same node) the base if the base is still `held`; directories
    /// not listed yet that read the old one follow. False when the base moved on meanwhile.
    fn replace_base(&self, held: &Arc<Manifest>, manifest: Manifest) -> bool {
        let mut inner = self.write();
        if !Arc::ptr_eq(&inner.base, held) || manifest.node() != held.node() {
            return false;
        }
        let old = std::mem::replace(&mut inner.base, Arc::new(manifest));
        inner.share_base(&old, &BTreeSet::new());
        true
    }

    /// Maps the base from the manifest cache, writing it there first if needed, in a thread
    /// of its own; a base mapped already is only marked as used.
    pub fn map_base_in_background(self: &Arc<Self>) {
        let base = self.base_manifest();
        let repo = self.repo();
        if base.text().is_mapped() {
            repo.keep_manifest(&base);
            return;
        }
        if base.node().is_null() {
            return;
        }
        let wc = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("map-base".into())
            .spawn(move || {
                let t0 = std::time::Instant::now();
                if let Some(mapped) = repo.keep_manifest(&base) {
                    if let Some(wc) = wc.upgrade() {
                        let swapped = wc.replace_base(&base, mapped);
                        tracing::debug!(node = %base.node().to_hex(), swapped, elapsed = ?t0.elapsed(), "base manifest mapped");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("mapping the base manifest: {e}");
        }
    }

    /// Checks in a thread of its own that a base mapped from the manifest cache hashes to its
    /// node. One that does not is removed from the cache and replaced by the manifest log's
    /// text, which the same thread then keeps in the cache again and maps (one end state,
    /// whichever thread comes first: the mount's own keeping of its base, started beside
    /// this one, finds the bad copy still mapped and only marks it used); what was listed
    /// from the bad copy before is not replaced, and the log says to mount again.
    pub fn verify_base_in_background(self: &Arc<Self>) {
        let base = self.base_manifest();
        if !base.text().is_mapped() {
            return;
        }
        let repo = self.repo();
        let wc = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("verify-base".into())
            .spawn(move || {
                let node = base.node();
                let t0 = std::time::Instant::now();
                match repo.verify_cached_manifest(&node) {
                    Ok(true) => {
                        tracing::debug!(node = %node.to_hex(), elapsed = ?t0.elapsed(), "mapped base manifest verified")
                    }
                    Ok(false) => {
                        // Replaced before the log says so (what a reader of the log then
                        // sees holds).
                        let replaced = match (repo.manifest(&node), wc.upgrade()) {
                            (Ok(good), Some(wc)) => {
                                if wc.replace_base(&base, good) {
                                    wc.map_base_in_background();
                                }
                                Ok(())
                            }
                            (Err(e), _) => Err(e.to_string()),
                            (Ok(_), None) => Ok(()),
                        };
                        tracing::error!(
                            node = %node.to_hex(),
                            "the manifest cache's copy of the base manifest does not hash to its node: removed; \
                             the manifest log's text replaces it, but directories listed until now came from the \
                             bad copy: unmount and mount again"
                        );
                        if let Err(e) = replaced {
                            tracing::error!("reading the base manifest: {e}");
                        }
                    }
                    Err(e) => tracing::warn!("checking the mapped base manifest: {e}"),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("checking the mapped base manifest: {e}");
        }
    }
}
