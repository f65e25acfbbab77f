//! Repository commands that need no mount: `revfs init` and `revfs recover`.

use anyhow::{bail, Result};
use clap::Args;
use revfs_store::{commit, transaction, Repo};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Where to create the repository (default: the current directory)
    dest: Option<PathBuf>,
}

/// `hg init`: a new repository with the requirements hg 6.3.2 gives one.
pub fn init(args: &InitArgs) -> Result<u8> {
    let dest = args.dest.clone().unwrap_or_else(|| PathBuf::from("."));
    if dest.join(".hg").exists() {
        bail!("repository {} already exists", dest.display());
    }
    std::fs::create_dir_all(&dest)?;
    commit::init(&dest)?;
    Ok(0)
}

/// `hg recover`: roll back an interrupted transaction.
pub fn recover(cli: &crate::Cli) -> Result<u8> {
    let root = match &cli.repository {
        Some(p) => p.clone(),
        None => {
            let cwd = std::env::current_dir()?;
            match cwd.ancestors().find(|d| d.join(".hg").is_dir()) {
                Some(d) => d.to_path_buf(),
                None => bail!("no repository found in '{}' (.hg not found)", cwd.display()),
            }
        }
    };
    let repo = Repo::open_for_recovery(&root)?;
    if transaction::recover(&repo)? {
        println!("rolling back interrupted transaction");
        Ok(0)
    } else {
        eprintln!("no interrupted transaction available");
        Ok(1)
    }
}
