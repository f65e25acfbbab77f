//! The working copy's status as a command asks the mount's daemon for it: (letter, path)
//! lines in hg's order, and the copy sources of copied files.

use super::error::{abort, Result};
use super::Workspace;
use crate::service::control::{Request, Response};
use std::collections::BTreeMap;

/// Status as the daemon reports it: (letter, repository path) in hg's order, and the copy
/// sources of copied files.
pub struct Status {
    pub entries: Vec<(char, Vec<u8>)>,
    pub copies: BTreeMap<Vec<u8>, Vec<u8>>,
}

pub fn fetch(ws: &Workspace, clean: bool, ignored: bool, unknown: bool) -> Result<Status> {
    match ws.request(&Request::Status {
        clean,
        ignored,
        unknown,
        dirs: false,
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

/// Only the status lines.
pub fn fetch_status(
    ws: &Workspace,
    clean: bool,
    ignored: bool,
    unknown: bool,
) -> Result<Vec<(char, Vec<u8>)>> {
    Ok(fetch(ws, clean, ignored, unknown)?.entries)
}
