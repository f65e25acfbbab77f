//! `revfs add`, `forget`, `remove` and `addremove`: their flags, and the library's
//! commands (`revfs_vfs::client::track`, Mercurial 6.3.2's `cmdutil.add`, `forget`, `remove`
//! and `scmutil.addremove`) run in the workspace.
//!
//! Not supported (refused by the argument parser): `-I`/`-X`, `-S`, `-i`; `addremove -s`
//! with a similarity other than 100 or 0 aborts (hg's inexact rename detection).

use anyhow::Result;
use clap::Args;
use revfs_vfs::client::track::{self, RemoveOptions};

#[derive(Args, Debug)]
pub struct PathArgs {
    /// Do not perform actions, just print output
    #[arg(short = 'n', long = "dry-run")]
    pub dry_run: bool,
    /// Files or directories
    #[arg(value_name = "FILE")]
    pub files: Vec<String>,
}

#[derive(Args, Debug)]
pub struct AddremoveArgs {
    /// Guess renamed files by similarity (only 100, exact renames, and 0)
    #[arg(short = 's', long = "similarity", value_name = "SIMILARITY")]
    similarity: Option<String>,
    #[command(flatten)]
    paths: PathArgs,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// Record delete for missing files
    #[arg(short = 'A', long)]
    after: bool,
    /// Forget added files, delete modified files
    #[arg(short = 'f', long)]
    force: bool,
    /// Do not perform actions, just print output
    #[arg(short = 'n', long = "dry-run")]
    dry_run: bool,
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

/// `hg add`.
pub fn add(cli: &crate::Cli, args: &PathArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    Ok(track::add(&ws, &args.files, args.dry_run)?)
}

/// `hg forget`.
pub fn forget(cli: &crate::Cli, args: &PathArgs) -> Result<u8> {
    track::need_files(&args.files)?;
    let ws = super::open_workspace(cli)?;
    Ok(track::forget(&ws, &args.files, args.dry_run)?)
}

/// `hg remove`.
pub fn remove(cli: &crate::Cli, args: &RemoveArgs) -> Result<u8> {
    let opts = RemoveOptions {
        after: args.after,
        force: args.force,
        dry_run: args.dry_run,
    };
    track::check_remove(&args.files, opts)?;
    let ws = super::open_workspace(cli)?;
    Ok(track::remove(&ws, &args.files, opts)?)
}

/// `hg addremove`.
pub fn addremove(cli: &crate::Cli, args: &AddremoveArgs) -> Result<u8> {
    let exact = track::exact_renames(args.similarity.as_deref())?;
    let ws = super::open_workspace(cli)?;
    Ok(track::addremove(
        &ws,
        &args.paths.files,
        exact,
        args.paths.dry_run,
    )?)
}
