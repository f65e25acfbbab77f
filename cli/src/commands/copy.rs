//! `revfs copy` (`cp`) and `revfs rename` (`move`, `mv`): their flags, and the library's
//! command (`revfs_vfs::client::copy`, Mercurial 6.3's `cmdutil.copy`) run in the
//! workspace. Not supported: `--at-rev`, `-I`/`-X`.

use anyhow::Result;
use clap::Args;
use revfs_vfs::client::copy::{self, CopyOptions};

#[derive(Args, Debug)]
pub struct CopyArgs {
    /// Unmark a destination file as copied
    #[arg(long)]
    forget: bool,
    /// Record a copy that has already occurred
    #[arg(short = 'A', long)]
    after: bool,
    /// Forcibly copy over an existing managed file
    #[arg(short = 'f', long)]
    force: bool,
    /// Do not perform actions, just print output
    #[arg(short = 'n', long = "dry-run")]
    dry_run: bool,
    /// Enable additional output
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Suppress output
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Sources, then the destination
    #[arg(value_name = "SOURCE... DEST")]
    files: Vec<String>,
}

impl CopyArgs {
    fn options(&self) -> CopyOptions {
        CopyOptions {
            forget: self.forget,
            after: self.after,
            force: self.force,
            dry_run: self.dry_run,
            verbose: self.verbose,
            quiet: self.quiet,
        }
    }
}

/// `hg copy`.
pub fn copy(cli: &crate::Cli, args: &CopyArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    Ok(copy::copy(&ws, &args.files, &args.options(), false)?)
}

/// `hg rename`.
pub fn rename(cli: &crate::Cli, args: &CopyArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    Ok(copy::copy(&ws, &args.files, &args.options(), true)?)
}
