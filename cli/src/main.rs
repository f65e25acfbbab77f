//! The `revfs` command-line tool: hg-style commands over a Mercurial store.
//!
//! This is the only place that turns errors into text and exit codes: an `abort: ...` line
//! and exit status 255 for failures, as hg does.

mod alloc;
mod commands;
mod debuggen;
mod prefetch;
mod progress;
mod ui;
mod watch;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc in a mount's daemon, the system's allocator in a command ([`alloc`]).
#[global_allocator]
static GLOBAL: alloc::Revfs = alloc::Revfs;

/// revfs: a lazy, self-recording working copy for Mercurial repositories.
#[derive(Parser, Debug)]
#[command(name = "revfs", version, about, max_term_width = 100)]
pub struct Cli {
    /// Repository root directory (default: the repository containing the current directory)
    #[arg(short = 'R', long = "repository", global = true, value_name = "REPO")]
    repository: Option<std::path::PathBuf>,

    /// When to colorize (boolean, always, auto, never, or debug), as hg's --color
    #[arg(long = "color", global = true, value_name = "TYPE")]
    color: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show revision history (newest first)
    Log(commands::log::LogArgs),
    /// Output the content of files as of a revision
    Cat(commands::cat::CatArgs),
    /// List tracked files of a revision
    Files(commands::files::FilesArgs),
    /// Make a repository of a server's history and mount it; file contents come from the
    /// server on first read
    Clone(commands::clone::CloneArgs),
    /// Mount a revision of a repository as a lazy working copy
    Mount(commands::mount::MountArgs),
    /// Unmount a revfs working copy
    #[command(alias = "umount")]
    Unmount(commands::mount::UnmountArgs),
    /// Show the revfs mounts, and the working copies kept for mountpoints not mounted
    List(commands::mount::ListArgs),
    /// Delete the working copy kept for a mountpoint that is not mounted
    Discard(commands::mount::DiscardArgs),
    /// Bind-mount directories of a mount from local disk, for what must run at native speed
    Redirect(commands::redirect::RedirectArgs),
    /// Show changed files in the working copy
    #[command(alias = "st")]
    Status(commands::wc::StatusArgs),
    /// Add the specified files on the next commit
    Add(commands::track::PathArgs),
    /// Forget the specified files on the next commit
    Forget(commands::track::PathArgs),
    /// Remove the specified files on the next commit
    #[command(alias = "rm")]
    Remove(commands::track::RemoveArgs),
    /// Add all new files, delete all missing files
    Addremove(commands::track::AddremoveArgs),
    /// Restore files to their checkout state
    Revert(commands::revert::RevertArgs),
    /// Show the working copy's changes as a unified diff
    Diff(commands::wc::DiffArgs),
    /// Create a new repository, as hg init does
    Init(commands::repo::InitArgs),
    /// Roll back an interrupted transaction
    Recover,
    /// Show the parents of the working copy or of a revision
    Parents(commands::log::ParentsArgs),
    /// Identify the working copy or a revision
    #[command(alias = "identify")]
    Id(commands::log::IdArgs),
    /// Mark files as copied for the next commit
    #[command(alias = "cp")]
    Copy(commands::copy::CopyArgs),
    /// Rename files; equivalent of copy + remove
    #[command(aliases = ["move", "mv"])]
    Rename(commands::copy::CopyArgs),
    /// Print the author and date a commit would record (for tests)
    #[command(hide = true)]
    Debugidentity(commands::debug::DebugIdentityArgs),
    /// Print a mount's change journal, a record a line (for tests)
    #[command(hide = true)]
    Debugjournal(commands::debug::DebugJournalArgs),
    /// Write shell completions and man pages generated from these definitions (packaging)
    #[command(hide = true)]
    Debuggen(debuggen::DebuggenArgs),
    /// Commit the specified files or all outstanding changes
    #[command(alias = "ci")]
    Commit(commands::commit::CommitArgs),
    /// Update the working copy to another revision
    #[command(visible_aliases = ["up", "checkout", "co"])]
    Update(commands::commit::UpdateArgs),
    /// Read files of the working-copy parent (or a revision) into the mount's caches
    Prefetch(prefetch::PrefetchArgs),
    /// Check FUSE, the configuration, mounts and repositories, and print the fixes
    Doctor(commands::doctor::DoctorArgs),
    /// Print what changes in the mount as it changes, from a cursor
    Watch(watch::WatchArgs),
}

fn main() -> ExitCode {
    // The daemon's helper processes (vfs/src/helper.rs), before anything a command does.
    let mut args = std::env::args_os();
    let helper: Option<fn(&std::ffi::OsStr) -> i32> = match args.nth(1) {
        Some(a) if a == revfs_vfs::readahead::lease::HELPER_ARG => {
            Some(revfs_vfs::readahead::lease::helper_main)
        }
        Some(a) if a == revfs_vfs::fuse::events::HELPER_ARG => {
            Some(revfs_vfs::fuse::events::helper_main)
        }
        _ => None,
    };
    if let Some(main) = helper {
        let code = match args.next() {
            Some(mountpoint) => main(&mountpoint),
            None => 2,
        };
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // hg takes a flag given twice; so does every revfs command.
    let parser = <Cli as clap::CommandFactory>::command()
        .args_override_self(true)
        .mut_subcommands(|c| c.args_override_self(true));
    let parsed = parser
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            if !e.use_stderr() {
                // --help, --version.
                let _ = e.print();
                return ExitCode::from(0);
            }
            eprintln!("abort: {}", usage_error(&e));
            return ExitCode::from(255);
        }
    };
    let result = match &cli.command {
        Command::Log(args) => commands::log::run(&cli, args),
        Command::Cat(args) => commands::cat::run(&cli, args),
        Command::Files(args) => commands::files::run(&cli, args),
        Command::Clone(args) => commands::clone::clone(args),
        Command::Mount(args) => commands::mount::mount(args),
        Command::Unmount(args) => commands::mount::unmount(args),
        Command::List(args) => commands::mount::list(args),
        Command::Discard(args) => commands::mount::discard(args),
        Command::Redirect(args) => commands::redirect::run(&cli, args),
        Command::Status(args) => commands::wc::status(&cli, args),
        Command::Add(args) => commands::track::add(&cli, args),
        Command::Forget(args) => commands::track::forget(&cli, args),
        Command::Remove(args) => commands::track::remove(&cli, args),
        Command::Addremove(args) => commands::track::addremove(&cli, args),
        Command::Revert(args) => commands::revert::revert(&cli, args),
        Command::Diff(args) => commands::wc::diff(&cli, args),
        Command::Init(args) => commands::repo::init(args),
        Command::Recover => commands::repo::recover(&cli),
        Command::Parents(args) => commands::log::parents(&cli, args),
        Command::Id(args) => commands::log::id(&cli, args),
        Command::Copy(args) => commands::copy::copy(&cli, args),
        Command::Rename(args) => commands::copy::rename(&cli, args),
        Command::Debugidentity(args) => commands::debug::debug_identity(&cli, args),
        Command::Debugjournal(args) => commands::debug::debug_journal(&cli, args),
        Command::Debuggen(args) => debuggen::run(args),
        Command::Commit(args) => commands::commit::commit(&cli, args),
        Command::Update(args) => commands::commit::update(&cli, args),
        Command::Prefetch(args) => prefetch::run(&cli, args),
        Command::Watch(args) => watch::run(&cli, args),
        Command::Doctor(args) => commands::doctor::doctor(&cli, args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            ui::abort(&err);
            ExitCode::from(255)
        }
    }
}

/// A command line the parser refused, as one hg-style line: what revfs does not know is
/// left to hg (revfs mirrors a part of hg's commands and flags).
fn usage_error(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    match e.kind() {
        ErrorKind::UnknownArgument
            if context(ContextKind::InvalidArg).is_some_and(|a| a.starts_with('-')) =>
        {
            let arg = context(ContextKind::InvalidArg).unwrap_or_default();
            let arg = arg.split_once('=').map_or(arg.as_str(), |(a, _)| a);
            format!("option {arg} is not supported by revfs (use hg instead)")
        }
        ErrorKind::InvalidSubcommand => {
            let cmd = context(ContextKind::InvalidSubcommand).unwrap_or_default();
            format!("command '{cmd}' is not supported by revfs (use hg instead)")
        }
        _ => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            format!("{first}\n(see 'revfs --help')")
        }
    }
}
