//! What `revfs list` and `revfs discard` say and do about a repository `revfs clone` made:
//! the server it fetches from, and whether it is revfs's own (under the state directory's
//! `repos/`, made without `--repo`), which `revfs discard --remove-repo` removes with the
//! last working copy that uses it, when nothing in it is only here.

use anyhow::{bail, Result};
use revfs_vfs::service::state::StateDir;
use std::path::{Path, PathBuf};

/// The server of a repository cloned from one, for messages.
pub fn server(repo: &Path) -> Option<String> {
    revfs_vfs::shallow::server_of(repo).map(|u| u.to_string())
}

/// Whether `repo` is one `revfs clone` made in revfs's state directory.
pub fn is_revfs_clone(repo: &Path) -> bool {
    let Ok(root) = revfs_vfs::service::state::state_root() else {
        return false;
    };
    repo.parent() == Some(&root.join("repos")) && revfs_vfs::shallow::is_shallow_repo(repo)
}

/// Checks that `repo` may go with the working copy of `this` (a state directory): it is
/// revfs's clone, no other mount or kept working copy uses it, and (unless `force`) it
/// holds no changeset that may be only here (draft or secret).
pub fn check_removable(repo: &Path, this: &StateDir, force: bool) -> Result<()> {
    let shown = repo.display();
    if !is_revfs_clone(repo) {
        bail!(
            "{shown} is not a repository revfs clone made in its state directory: revfs \
             removes only those\n(remove it yourself if you mean to)"
        );
    }
    let others: Vec<PathBuf> = StateDir::all()?
        .iter()
        .filter(|sd| sd.path() != this.path())
        .filter_map(|sd| sd.load().ok().flatten())
        .filter(|s| s.repo == repo)
        .map(|s| s.mountpoint)
        .collect();
    if let Some(m) = others.first() {
        bail!(
            "{shown} is also the repository of the working copy at {}\n(discard that one \
             first, or keep the repository)",
            m.display()
        );
    }
    if !force {
        let r = revfs_store::Repo::open(repo)?;
        let phases = revfs_store::phases::compute(r.store_path(), r.changelog())?;
        let local = phases
            .iter()
            .filter(|p| **p >= revfs_store::phases::Phase::Draft)
            .count();
        if local > 0 {
            bail!(
                "{shown} has {local} changeset{} that may not be on the server (draft or \
                 secret)\n(push them first, or remove them too: revfs discard --force \
                 --remove-repo)",
                if local == 1 { "" } else { "s" }
            );
        }
    }
    Ok(())
}
