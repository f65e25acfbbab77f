//! Paths as users type them and as hg prints them: arguments are relative to the current
//! directory, repository paths are `/`-separated bytes relative to the root, and output is
//! shown relative to the current directory again.

use anyhow::{bail, Result};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Where the command runs, relative to the repository root.
pub struct PathContext {
    root: PathBuf,
    /// Components of the current directory under the root (empty at the root or outside it).
    cwd_in_repo: Vec<Vec<u8>>,
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

impl PathContext {
    pub fn new(root: &Path) -> Result<PathContext> {
        let root = canonical(root);
        let cwd = canonical(&std::env::current_dir()?);
        let cwd_in_repo = match cwd.strip_prefix(&root) {
            Ok(rel) => rel
                .components()
                .map(|c| c.as_os_str().as_bytes().to_vec())
                .collect(),
            Err(_) => Vec::new(),
        };
        Ok(PathContext { root, cwd_in_repo })
    }

    /// Turns a user argument into a repository path (`""` is the root itself).
    pub fn to_repo_path(&self, arg: &str) -> Result<Vec<u8>> {
        let arg = arg.strip_prefix("path:").unwrap_or(arg);
        let given = Path::new(arg);
        let (mut parts, rel) = if given.is_absolute() {
            let Ok(rel) = given.strip_prefix(&self.root) else {
                bail!("{arg} not under root '{}'", self.root.display());
            };
            (Vec::new(), rel)
        } else {
            (self.cwd_in_repo.clone(), given)
        };
        for c in rel.components() {
            match c {
                Component::Normal(s) => parts.push(s.as_bytes().to_vec()),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        bail!("{arg} not under root '{}'", self.root.display());
                    }
                }
                Component::RootDir | Component::Prefix(_) => {}
            }
        }
        Ok(parts.join(&b'/'))
    }

    /// Shows a repository path relative to the current directory, as hg does.
    pub fn display(&self, repo_path: &[u8]) -> Vec<u8> {
        let target: Vec<&[u8]> = repo_path.split(|&b| b == b'/').collect();
        let common = self
            .cwd_in_repo
            .iter()
            .zip(&target)
            .take_while(|(a, b)| a.as_slice() == **b)
            .count();
        let mut out: Vec<&[u8]> = vec![b".."; self.cwd_in_repo.len() - common];
        out.extend(&target[common..]);
        out.join(&b'/')
    }
}

/// A set of repository paths given on the command line: each names a file, or a
/// directory whose files it matches. An empty set matches everything.
pub struct Matcher {
    paths: Vec<Vec<u8>>,
}

impl Matcher {
    pub fn new(ctx: &PathContext, args: &[String]) -> Result<Matcher> {
        Ok(Matcher {
            paths: args
                .iter()
                .map(|a| ctx.to_repo_path(a))
                .collect::<Result<_>>()?,
        })
    }

    /// Index of the first argument that matches `path`, if any.
    pub fn matching_arg(&self, path: &[u8]) -> Option<usize> {
        self.paths.iter().position(|p| {
            p.is_empty()
                || path == p.as_slice()
                || (path.starts_with(p) && path.get(p.len()) == Some(&b'/'))
        })
    }

    pub fn matches(&self, path: &[u8]) -> bool {
        self.paths.is_empty() || self.matching_arg(path).is_some()
    }

    /// The repository paths of the arguments.
    pub fn args(&self) -> &[Vec<u8>] {
        &self.paths
    }
}
