//! One module per command. Shared here: opening the repository and resolving revisions.

pub mod cat;
pub mod commit;
pub mod copy;
pub mod doctor;
pub mod files;
pub mod log;
pub mod mount;
pub mod repo;
pub mod wc;

use anyhow::{anyhow, Context, Result};
use revfs_vfs::fs::CONTROL_DIR;
use revfs_vfs::state::StateDir;
use revfs_vfs::store::revset::{self, Scope};
use revfs_vfs::store::{Node, Repo, Rev, StoreError};
use std::path::{Path, PathBuf};

/// Where a command works: a repository, seen either from its own working directory or
/// from a revfs mount of it.
pub struct Workspace {
    pub repo: Repo,
    /// The directory that paths are relative to: the repository root or the mountpoint.
    pub root: PathBuf,
    /// What `.` means here.
    pub scope: Scope,
    /// The control socket of the mount, when the workspace is one.
    pub socket: Option<PathBuf>,
}

/// The mount whose root is `dir`, if `dir` is one: its repository and working parent.
fn mount_at(dir: &Path) -> Result<Option<Workspace>> {
    let control = dir.join(CONTROL_DIR);
    let Ok(repo_root) = std::fs::read_link(control.join("repo")) else {
        return Ok(None);
    };
    let state_dir = StateDir::at(std::fs::read_link(control.join("state"))?);
    let state = state_dir
        .load()?
        .ok_or_else(|| anyhow!("{}: mount state is missing", state_dir.path().display()))?;
    // The journal names the working-copy parent; mount.json follows it.
    let node = match state_dir.journal_parent()? {
        Some(node) => node,
        None => Node::from_hex(state.node.as_bytes())
            .ok_or_else(|| anyhow!("{}: bad node", state_dir.state_file().display()))?,
    };
    Ok(Some(Workspace {
        repo: Repo::open(&repo_root)
            .with_context(|| format!("repository of mount {}", dir.display()))?,
        root: dir.to_path_buf(),
        scope: Scope {
            working_parent: Some(node),
        },
        socket: Some(std::fs::read_link(control.join("socket"))?),
    }))
}

fn repo_at(dir: &Path) -> Result<Workspace> {
    Ok(Workspace {
        repo: Repo::open(dir)?,
        root: dir.to_path_buf(),
        scope: Scope::default(),
        socket: None,
    })
}

/// Opens the workspace named by `-R` (a repository or a mountpoint), or the nearest one
/// containing the current directory.
pub fn open_workspace(cli: &crate::Cli) -> Result<Workspace> {
    if let Some(path) = &cli.repository {
        if let Some(ws) = mount_at(path)? {
            return Ok(ws);
        }
        if !path.join(".hg").is_dir() {
            return Err(anyhow!("repository {} not found", path.display()));
        }
        return repo_at(path);
    }
    let cwd = std::env::current_dir()?;
    for dir in cwd.ancestors() {
        if let Some(ws) = mount_at(dir)? {
            return Ok(ws);
        }
        if dir.join(".hg").is_dir() {
            return repo_at(dir);
        }
    }
    Err(StoreError::NotARepository(cwd).into())
}

impl Workspace {
    /// Sends a request to the mount's daemon; aborts outside a mount.
    pub fn request(
        &self,
        req: &revfs_vfs::control::Request,
    ) -> Result<revfs_vfs::control::Response> {
        let socket = self.socket.as_ref().ok_or_else(|| {
            anyhow!("{} is not a revfs mount (working-copy commands run inside a mount, or with -R MOUNTPOINT)", self.root.display())
        })?;
        match revfs_vfs::control::request(socket, req, std::time::Duration::from_secs(600))? {
            revfs_vfs::control::Response::Error { message } => Err(anyhow!("{message}")),
            other => Ok(other),
        }
    }

    /// Resolves `-r` arguments to revisions, in order, without repeats.
    pub fn resolve_revs(&self, specs: &[String]) -> Result<Vec<Rev>> {
        let mut out: Vec<Rev> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for spec in specs {
            for rev in revset::resolve_in(&self.repo, spec, self.scope)? {
                if seen.insert(rev) {
                    out.push(rev);
                }
            }
        }
        Ok(out)
    }

    /// Resolves one `-r` argument to a single revision (the last of a range), default `.`.
    pub fn resolve_single(&self, spec: Option<&str>) -> Result<Rev> {
        let revs = revset::resolve_in(&self.repo, spec.unwrap_or("."), self.scope)?;
        revs.last()
            .copied()
            .ok_or_else(|| anyhow!("empty revision set"))
    }
}
