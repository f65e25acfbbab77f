//! `revfs revert`: its flags, and the library's command (`revfs_vfs::client::revert`,
//! Mercurial 6.3.2's `cmdutil.revert` to the working copy's parent) run in the workspace.
//!
//! Not supported (refused by the argument parser): `-r`, `-d`, `-i`, `-I`/`-X`.

use anyhow::Result;
use clap::Args;
use revfs_vfs::client::revert::{self, RevertOptions};

#[derive(Args, Debug)]
pub struct RevertArgs {
    /// Revert all changes when no arguments given
    #[arg(short = 'a', long)]
    all: bool,
    /// Do not save backup copies of files
    #[arg(short = 'C', long = "no-backup")]
    no_backup: bool,
    /// Do not perform actions, just print output
    #[arg(short = 'n', long = "dry-run")]
    dry_run: bool,
    /// Print the names of the files named exactly too
    #[arg(short = 'v', long)]
    verbose: bool,
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

/// `hg revert`.
pub fn revert(cli: &crate::Cli, args: &RevertArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let opts = RevertOptions {
        all: args.all,
        no_backup: args.no_backup,
        dry_run: args.dry_run,
        verbose: args.verbose,
    };
    Ok(revert::revert(&ws, &args.files, opts)?)
}
