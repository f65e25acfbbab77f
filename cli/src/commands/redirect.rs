//! `revfs redirect`: directories of a mount bind-mounted from local disk, for what must
//! run at native speed (`revfs_vfs::client::redirect`; the daemon decides and binds).

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use revfs_vfs::client::redirect;

#[derive(Args, Debug)]
pub struct RedirectArgs {
    #[command(subcommand)]
    op: RedirectCommand,
}

#[derive(Subcommand, Debug)]
enum RedirectCommand {
    /// Make directories of the mount bind mounts of directories on local disk
    ///
    /// What is written there runs at native speed, is ignored by status and kept across
    /// remounts. Refused on tracked paths and on directories that are not empty.
    Add {
        /// Directories of the mount
        #[arg(value_name = "PATH")]
        paths: Vec<String>,
    },
    /// Remove redirections and the files in them
    #[command(alias = "rm")]
    Remove {
        /// Remove a redirection that holds files, with them
        #[arg(short = 'f', long)]
        force: bool,
        #[arg(value_name = "PATH")]
        paths: Vec<String>,
    },
    /// Show the mount's redirections: path, whether bound, where their files are
    List {
        /// Output format (only `json`)
        #[arg(short = 'T', long = "template", value_name = "TEMPLATE")]
        template: Option<String>,
    },
}

pub fn run(cli: &crate::Cli, args: &RedirectArgs) -> Result<u8> {
    match &args.op {
        RedirectCommand::Add { paths } => {
            let ws = super::open_workspace(cli)?;
            Ok(redirect::add(&ws, paths)?)
        }
        RedirectCommand::Remove { force, paths } => {
            let ws = super::open_workspace(cli)?;
            Ok(redirect::remove(&ws, paths, *force)?)
        }
        RedirectCommand::List { template } => {
            let json = match template.as_deref() {
                None => false,
                Some("json") => true,
                Some(other) => bail!("unsupported template '{other}' (only 'json' is supported)"),
            };
            let ws = super::open_workspace(cli)?;
            let listed = redirect::list(&ws)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&listed)?);
            } else {
                for r in listed {
                    let state = if r.bound { "bound" } else { "not bound" };
                    println!("{}  {state}  {}", r.path, r.source.display());
                }
            }
            Ok(0)
        }
    }
}
