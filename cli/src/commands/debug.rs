//! `revfs debugidentity`: the author and date a commit would record, for tests.
//! `revfs debugjournal`: a mount's change journal, one record a line, for tests.

use revfs_hg::config::{Config, Env, StdConsole};

#[derive(clap::Args, Debug)]
pub struct DebugIdentityArgs {
    /// Record the specified date as commit date
    #[arg(short = 'd', long = "date", value_name = "DATE")]
    date: Option<String>,
    /// Record the specified user as committer
    #[arg(short = 'u', long = "user", value_name = "USER")]
    user: Option<String>,
}

/// Prints `USER\nUNIXTIME TZ\n` as `hg commit [-u USER] [-d DATE]` would record them, with
/// hg's errors (configuration first, then the date, then the user).
pub fn debug_identity(cli: &crate::Cli, args: &DebugIdentityArgs) -> anyhow::Result<u8> {
    let ws = crate::commands::open_workspace(cli)?;
    let cfg = Config::load(Some(ws.repo_root()))?;
    let (time, tz) = revfs_hg::date::commit_date(args.date.as_deref())?;
    let user = cfg.commit_user(args.user.as_deref(), &Env::from_process(), &mut StdConsole)?;
    println!("{user}\n{time} {tz}");
    Ok(0)
}

#[derive(clap::Args, Debug)]
pub struct DebugJournalArgs {
    /// The mountpoint whose journal to print
    mountpoint: std::path::PathBuf,
}

/// Prints the journal of the working copy mounted (or kept) at `mountpoint`: `parent
/// NODE`, then one line per record (its kind and paths; docs/FORMATS.md), read from a copy.
pub fn debug_journal(_cli: &crate::Cli, args: &DebugJournalArgs) -> anyhow::Result<u8> {
    let mp = revfs_vfs::client::kernel::mountpoint_path(&args.mountpoint)?;
    let sd = revfs_vfs::service::state::StateDir::for_mountpoint(&mp)?;
    match crate::commands::doctor::read_journal(&sd).map_err(anyhow::Error::msg)? {
        None => anyhow::bail!("no journal for {}", mp.display()),
        Some(view) => {
            println!("parent {}", view.base.to_hex());
            for r in &view.records {
                println!("{}", r.describe());
            }
        }
    }
    Ok(0)
}
