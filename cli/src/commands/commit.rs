//! `revfs commit` and `revfs update`: their flags, and the library's commands
//! (`revfs_vfs::client::commit` and `::update`, Mercurial 6.3.2's) run in the workspace,
//! with a progress bar on a terminal for a long one (see [`crate::progress`]).

use crate::progress::{self, Progress};
use anyhow::Result;
use clap::Args;
use revfs_vfs::client::commit::{self, CommitOptions};
use revfs_vfs::client::update::{self, UpdateOptions};

#[derive(Args, Debug)]
pub struct CommitArgs {
    /// Use text as commit message
    #[arg(
        short = 'm',
        long = "message",
        value_name = "TEXT",
        allow_hyphen_values = true
    )]
    message: Option<String>,
    /// Read commit message from file
    #[arg(
        short = 'l',
        long = "logfile",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    logfile: Option<std::path::PathBuf>,
    /// Record the specified user as committer
    #[arg(
        short = 'u',
        long = "user",
        value_name = "USER",
        allow_hyphen_values = true
    )]
    user: Option<String>,
    /// Record the specified date as commit date
    #[arg(
        short = 'd',
        long = "date",
        value_name = "DATE",
        allow_hyphen_values = true
    )]
    date: Option<String>,
    /// Mark new/missing files as added/removed before committing
    #[arg(short = 'A', long = "addremove")]
    addremove: bool,
    /// Say what is committed
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Say nothing
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Files or directories to commit (default: every change)
    #[arg(value_name = "FILE")]
    files: Vec<String>,
}

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Revision")))]
pub struct UpdateArgs {
    /// Discard uncommitted changes (no backup)
    #[arg(short = 'C', long = "clean")]
    clean: bool,
    #[command(flatten)]
    rev: super::RevArg,
    /// Say nothing
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Revision (as with -r)
    #[arg(
        value_name = "REV",
        conflicts_with = "rev",
        allow_negative_numbers = true
    )]
    target: Option<String>,
}

/// `hg commit`.
pub fn commit(cli: &crate::Cli, args: &CommitArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let opts = CommitOptions {
        message: args.message.clone(),
        logfile: args.logfile.clone(),
        user: args.user.clone(),
        date: args.date.clone(),
        addremove: args.addremove,
        verbose: args.verbose,
        quiet: args.quiet,
    };
    let mut bar = Progress::new(progress::wanted(args.quiet, Some(ws.repo_root())));
    Ok(commit::commit(&ws, &args.files, &opts, &mut bar)?)
}

/// `hg update`.
pub fn update(cli: &crate::Cli, args: &UpdateArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    let opts = UpdateOptions {
        clean: args.clean,
        rev: args.rev.rev.clone().or_else(|| args.target.clone()),
        quiet: args.quiet,
    };
    let mut bar = Progress::new(progress::wanted(args.quiet, Some(ws.repo_root())));
    Ok(update::update(&ws, &opts, &mut bar)?)
}
