//! `revfs redirect add`, `remove` and `list`: a user's paths made repository paths and
//! sent to the mount's daemon, which decides and binds (`service::redirect`); the list read
//! from the mount's state directory.

use super::error::{abort, Result};
use super::Workspace;
use crate::service::control::{RedirectOp, Request};
use crate::service::redirect::{self, Redirections};
use revfs_hg::matcher::PathContext;

/// The repository paths of `paths` (relative to the current directory).
fn repo_paths(ws: &Workspace, paths: &[String]) -> Result<Vec<Vec<u8>>> {
    if paths.is_empty() {
        return Err(abort("no paths specified"));
    }
    let ctx = PathContext::new(&ws.root)?;
    paths
        .iter()
        .map(|p| Ok(ctx.canonpath(p.as_bytes())?))
        .collect()
}

/// `revfs redirect add PATH...`.
pub fn add(ws: &Workspace, paths: &[String]) -> Result<u8> {
    ws.mount()?;
    for path in repo_paths(ws, paths)? {
        ws.request(&Request::Redirect {
            op: RedirectOp::Add { path },
        })?;
    }
    Ok(0)
}

/// `revfs redirect remove [--force] PATH...`.
pub fn remove(ws: &Workspace, paths: &[String], force: bool) -> Result<u8> {
    ws.mount()?;
    for path in repo_paths(ws, paths)? {
        ws.request(&Request::Redirect {
            op: RedirectOp::Remove { path, force },
        })?;
    }
    Ok(0)
}

/// One redirection as `revfs redirect list` shows it.
#[derive(Debug, serde::Serialize)]
pub struct Listed {
    pub path: String,
    /// Where its files are, on local disk.
    pub source: std::path::PathBuf,
    /// Whether the kernel has it mounted now.
    pub bound: bool,
}

/// The redirections of the mount `ws` works in.
pub fn list(ws: &Workspace) -> Result<Vec<Listed>> {
    let mount = ws.mount()?;
    let reds = Redirections::of(mount.state_dir().path());
    let bound = redirect::bound_below(&mount.mountpoint);
    let paths = reds.load().map_err(|e| abort(e.to_string()))?;
    Ok(paths
        .into_iter()
        .map(|path| Listed {
            source: reds.backing(&path),
            bound: redirect::is_bound(&bound, &mount.mountpoint, &path),
            path,
        })
        .collect())
}
