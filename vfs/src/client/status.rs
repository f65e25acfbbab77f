//! The working copy's status as a command asks the mount's daemon for it: (letter, path)
//! lines in hg's order, and the copy sources of copied files.

use super::error::{abort, Result};
use super::Workspace;
use crate::service::control::{Request, Response};
use revfs_hg::config::{Config, Env};
use std::collections::BTreeMap;

/// Status as the daemon reports it: (letter, repository path) in hg's order, and the copy
/// sources of copied files.
pub struct Status {
    pub entries: Vec<(char, Vec<u8>)>,
    pub copies: BTreeMap<Vec<u8>, Vec<u8>>,
}

pub fn fetch(ws: &Workspace, clean: bool, ignored: bool, unknown: bool) -> Result<Status> {
    // Only unknown and ignored files depend on the configuration (its ignore files).
    let cfg = if ignored || unknown {
        Some(Config::load_env(
            &Env::from_process(),
            Some(ws.repo_root()),
        )?)
    } else {
        None
    };
    fetch_configured(ws, cfg.as_ref(), clean, ignored, unknown)
}

/// [`fetch`] with this command's configuration, loaded already: the ignore files it
/// names (`ui.ignore`) are the daemon's for this status.
pub fn fetch_configured(
    ws: &Workspace,
    cfg: Option<&Config>,
    clean: bool,
    ignored: bool,
    unknown: bool,
) -> Result<Status> {
    // Expanded in this process's environment, as hg expands them in its own.
    let ignore_files = cfg.filter(|_| ignored || unknown).map(|cfg| {
        cfg.ignore_paths(&Env::from_process())
            .into_iter()
            .map(|p| relative_to(&ws.root, p))
            .collect()
    });
    match ws.request(&Request::Status {
        clean,
        ignored,
        unknown,
        dirs: false,
        ignore_files,
    })? {
        Response::Status {
            entries,
            copies,
            warnings,
            ..
        } => {
            // hg prints them as it reads the ignore files.
            for w in warnings {
                eprintln!("{w}");
            }
            Ok(Status {
                entries,
                copies: copies.into_iter().collect(),
            })
        }
        other => Err(abort(format!(
            "unexpected answer from the daemon: {other:?}"
        ))),
    }
}

/// An absolute path below `root` relative to it (the daemon's root may be named
/// otherwise); any other as it is.
fn relative_to(root: &std::path::Path, p: Vec<u8>) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let root = root.as_os_str().as_bytes();
    match p.strip_prefix(root) {
        Some(rest) if !root.is_empty() && rest.first() == Some(&b'/') => rest[1..].to_vec(),
        _ => p,
    }
}

/// Only the status lines.
pub fn fetch_status(
    ws: &Workspace,
    clean: bool,
    ignored: bool,
    unknown: bool,
) -> Result<Vec<(char, Vec<u8>)>> {
    Ok(fetch(ws, clean, ignored, unknown)?.entries)
}
