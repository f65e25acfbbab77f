//! One module per command. Shared here: opening the repository and resolving revisions.

pub mod cat;
pub mod clone;
pub mod cloned;
pub mod commit;
pub mod copy;
pub mod debug;
pub mod doctor;
pub mod files;
pub mod log;
pub mod mount;
pub mod redirect;
pub mod repo;
pub mod revert;
pub mod track;
pub mod wc;

use anyhow::Result;
use revfs_vfs::client;

pub use revfs_vfs::client::{NotAnswering, Workspace};

/// `-r/--rev REV`: one revision, as hg users type it (a number, a hex node or a prefix of
/// one, a tag, bookmark or branch name, `.`, `tip`, `null`). Each command flattens it and
/// says what REV is for there with `mut_arg("rev", ...)`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RevArg {
    #[arg(
        short = 'r',
        long = "rev",
        value_name = "REV",
        allow_hyphen_values = true
    )]
    pub rev: Option<String>,
}

/// Opens the workspace named by `-R` (a repository or a mountpoint), or the nearest one
/// containing the current directory ([`client::open`]).
pub fn open_workspace(cli: &crate::Cli) -> Result<Workspace> {
    Ok(client::open(cli.repository.as_deref())?)
}

/// [`open_workspace`] for a command whose first step is a read-only request to the daemon
/// ([`client::open_deferred`]).
pub fn open_workspace_deferred(cli: &crate::Cli) -> Result<Workspace> {
    Ok(client::open_deferred(cli.repository.as_deref())?)
}
