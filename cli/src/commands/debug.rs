//! `revfs debugidentity`: the author and date a commit would record, for tests.

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
    let cfg = Config::load(Some(ws.repo.root()))?;
    let (time, tz) = revfs_hg::date::commit_date(args.date.as_deref())?;
    let user = cfg.commit_user(args.user.as_deref(), &Env::from_process(), &mut StdConsole)?;
    println!("{user}\n{time} {tz}");
    Ok(0)
}
