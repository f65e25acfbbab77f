//! One module per command. Shared here: opening the repository and resolving revisions.

pub mod cat;
pub mod files;
pub mod log;
pub mod mount;

use anyhow::{anyhow, Result};
use revfs_vfs::store::{revset, Repo, Rev};

/// Opens the repository named by `-R`, or the one containing the current directory.
pub fn open_repo(cli: &crate::Cli) -> Result<Repo> {
    match &cli.repository {
        Some(path) => {
            if !path.join(".hg").is_dir() {
                return Err(anyhow!("repository {} not found", path.display()));
            }
            Ok(Repo::open(path)?)
        }
        None => Ok(Repo::discover(&std::env::current_dir()?)?),
    }
}

/// Resolves `-r` arguments to revisions, in order, without repeats.
pub fn resolve_revs(repo: &Repo, specs: &[String]) -> Result<Vec<Rev>> {
    let mut out: Vec<Rev> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for spec in specs {
        for rev in revset::resolve(repo, spec)? {
            if seen.insert(rev) {
                out.push(rev);
            }
        }
    }
    Ok(out)
}

/// Resolves one `-r` argument to a single revision (the last of a range), default `.`.
pub fn resolve_single(repo: &Repo, spec: Option<&str>) -> Result<Rev> {
    let revs = revset::resolve(repo, spec.unwrap_or("."))?;
    revs.last()
        .copied()
        .ok_or_else(|| anyhow!("empty revision set"))
}
