//! Working copies kept in state directories while no daemon serves them: what `revfs list`,
//! `revfs discard` and `revfs mount -r` need to know of one (its repository, its parent, its
//! uncommitted changes) and how it is discarded.
//!
//! A kept working copy is opened exactly as the next mount would open it (its lock taken,
//! so that no daemon starts meanwhile; its journal replayed over its parent), and its status
//! computed as `revfs status` would in the mount.

use crate::service::state::{MountState, StateDir, StateError};
use crate::wc::status::{StatusEntry, StatusRequest};
use crate::wc::{WcError, WorkingCopy};
use revfs_store::{Node, Repo, StoreError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// What a kept working copy holds.
#[derive(Debug)]
pub struct Kept {
    pub state: MountState,
    /// The working-copy parent (the journal's, which is the authority).
    pub parent: Node,
    /// Its uncommitted changes as `status` lists them: modified, added, removed, missing
    /// and unknown files, in hg's order.
    pub changes: Vec<StatusEntry>,
    /// How many ignored files it holds (kept by an update, lost by a discard).
    pub ignored: usize,
}

impl Kept {
    /// The changes, one `X path` line each, as `hg status` prints them.
    pub fn status_lines(&self) -> String {
        self.changes
            .iter()
            .map(|e| format!("{} {}\n", e.letter, String::from_utf8_lossy(&e.path)))
            .collect()
    }
}

/// Why a kept working copy cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{}: {source}", repo.display())]
    Repo {
        repo: PathBuf,
        #[source]
        source: StoreError,
    },
    #[error("its parent {parent} is not in {} (stripped or rolled back?)", repo.display())]
    UnknownParent { repo: PathBuf, parent: String },
    #[error(transparent)]
    Wc(#[from] WcError),
}

/// Opens the working copy kept in `sd` as a mount would, and reports it. `Ok(None)` when
/// nothing is kept there (no `mount.json`). Fails with [`StateError::InUse`] while a daemon
/// serves it.
pub fn inspect(sd: &StateDir) -> Result<Option<Kept>, KeptError> {
    let Some(state) = sd.load()? else {
        return Ok(None);
    };
    let _lock = sd.lock()?;
    let repo_err = |source| KeptError::Repo {
        repo: state.repo.clone(),
        source,
    };
    let repo = Repo::open(&state.repo).map_err(repo_err)?;
    let parent = match sd.journal_parent()? {
        Some(n) => n,
        None => Node::from_hex(state.node.as_bytes()).ok_or_else(|| StateError::Corrupt {
            path: sd.state_file(),
            reason: format!("bad node {:?}", state.node),
        })?,
    };
    let manifest = repo
        .manifest_at(&parent)
        .map_err(repo_err)?
        .ok_or_else(|| KeptError::UnknownParent {
            repo: state.repo.clone(),
            parent: parent.to_hex(),
        })?;
    let checkout = UNIX_EPOCH + Duration::from_secs(state.checkout_time.max(0) as u64);
    let wc = WorkingCopy::open(Arc::new(repo), parent, manifest, sd.path(), checkout, 16)?;
    let all = wc.status(StatusRequest {
        clean: false,
        ignored: true,
        unknown: true,
        ignore_files: None,
    })?;
    let ignored = all.iter().filter(|e| e.letter == 'I').count();
    let changes = all.into_iter().filter(|e| e.letter != 'I').collect();
    Ok(Some(Kept {
        state,
        parent,
        changes,
        ignored,
    }))
}

/// Deletes the working copy kept in `sd`, whatever it holds; the caller has checked. Takes
/// its lock first: a daemon serving it is [`StateError::InUse`].
pub fn discard(sd: &StateDir) -> Result<(), StateError> {
    let lock = sd.lock()?;
    // The lock file goes with the rest; the flock held on it keeps a daemon from starting
    // until the directory is gone.
    let removed = std::fs::remove_dir_all(sd.path()).map_err(|source| StateError::Io {
        path: sd.path().to_owned(),
        source,
    });
    drop(lock);
    removed
}
