//! Paths and file patterns as users type them on hg's command line, and paths as hg prints
//! them: arguments are relative to the current directory, repository paths are
//! `/`-separated bytes relative to the root, and output is shown relative to the current
//! directory again (`pathutil.canonpath`, `match.match` for command-line patterns).

use crate::ignore::command_line_pattern;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// Why a command-line path or pattern cannot be used, with hg's message (after `abort: `).
#[derive(Debug, Error)]
pub enum MatchError {
    /// A path outside the repository.
    #[error("{arg} not under root '{root}'")]
    NotUnderRoot { arg: String, root: String },
    /// A pattern hg cannot compile (`invalid pattern (re): ...`).
    #[error("{0}")]
    Pattern(String),
    /// The current directory cannot be read.
    #[error("cannot read the current directory: {0}")]
    CurrentDir(#[source] std::io::Error),
}

type Result<T> = std::result::Result<T, MatchError>;

fn not_under_root(arg: &str, root: &Path) -> MatchError {
    MatchError::NotUnderRoot {
        arg: arg.to_owned(),
        root: root.display().to_string(),
    }
}

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
        // The current directory is canonical already; so is a mount's root. Canonicalizing
        // only what is not spares a round of lstat calls through the mount.
        let cwd = std::env::current_dir().map_err(MatchError::CurrentDir)?;
        let root = if cwd.starts_with(root) && root.is_absolute() {
            root.to_path_buf()
        } else {
            canonical(root)
        };
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
                return Err(not_under_root(arg, &self.root));
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
                        return Err(not_under_root(arg, &self.root));
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

/// One command-line file pattern: a path (a file, or a directory and what is below it) or
/// a `glob:`/`re:` pattern.
enum Pattern {
    Path(Vec<u8>),
    Regex(regex::bytes::Regex),
}

/// A set of file patterns given on the command line, as hg reads them: plain paths and
/// `path:` are files or directories (relative to the current directory, `path:` to the
/// root), `glob:` is relative to the current directory, `re:` to the root. A glob without
/// wildcards is a plain path. An empty set matches everything.
pub struct Matcher {
    patterns: Vec<Pattern>,
    /// The repository paths of the plain-path patterns (for "no such file" messages).
    paths: Vec<Vec<u8>>,
}

fn has_glob_chars(p: &str) -> bool {
    p.chars().any(|c| matches!(c, '*' | '?' | '[' | '{' | '\\'))
}

impl Matcher {
    pub fn new(ctx: &PathContext, args: &[String]) -> Result<Matcher> {
        let mut patterns = Vec::new();
        let mut paths = Vec::new();
        for arg in args {
            if let Some(re) = arg.strip_prefix("re:") {
                let re = command_line_pattern("re", re.as_bytes()).map_err(MatchError::Pattern)?;
                patterns.push(Pattern::Regex(re));
                continue;
            }
            if let Some(rooted) = arg.strip_prefix("path:") {
                let p = PathContext {
                    root: ctx.root.clone(),
                    cwd_in_repo: Vec::new(),
                }
                .to_repo_path(rooted)?;
                paths.push(p.clone());
                patterns.push(Pattern::Path(p));
                continue;
            }
            if let Some(glob) = arg.strip_prefix("glob:").filter(|g| has_glob_chars(g)) {
                // Relative to the current directory, normalized like a path (hg's canonpath).
                let mut parts: Vec<&[u8]> = ctx.cwd_in_repo.iter().map(Vec::as_slice).collect();
                for c in glob.as_bytes().split(|&b| b == b'/') {
                    match c {
                        b"" | b"." => {}
                        b".." => {
                            if parts.pop().is_none() {
                                return Err(not_under_root(arg, &ctx.root));
                            }
                        }
                        c => parts.push(c),
                    }
                }
                let full = parts.join(&b'/');
                let re = command_line_pattern("glob", &full).map_err(MatchError::Pattern)?;
                patterns.push(Pattern::Regex(re));
                continue;
            }
            let plain = arg.strip_prefix("glob:").unwrap_or(arg);
            let p = ctx.to_repo_path(plain)?;
            paths.push(p.clone());
            patterns.push(Pattern::Path(p));
        }
        Ok(Matcher { patterns, paths })
    }

    /// Index (among the plain paths) of the first plain path that matches `path`.
    pub fn matching_arg(&self, path: &[u8]) -> Option<usize> {
        self.paths.iter().position(|p| under_or_equal(path, p))
    }

    pub fn matches(&self, path: &[u8]) -> bool {
        self.patterns.is_empty()
            || self.patterns.iter().any(|pat| match pat {
                Pattern::Path(p) => under_or_equal(path, p),
                Pattern::Regex(re) => re.is_match(path),
            })
    }

    /// The repository paths of the plain-path arguments.
    pub fn args(&self) -> &[Vec<u8>] {
        &self.paths
    }

    /// True when every pattern is a plain path (file lookups can then skip a full scan).
    pub fn only_paths(&self) -> bool {
        self.patterns.iter().all(|p| matches!(p, Pattern::Path(_)))
    }
}

fn under_or_equal(path: &[u8], p: &[u8]) -> bool {
    path == p || crate::paths::is_under(path, p)
}

/// Whether `pat` starts with one of the pattern kinds hg knows (`match.patkind`).
pub fn is_pattern(pat: &str) -> bool {
    const KINDS: [&str; 13] = [
        "re",
        "glob",
        "path",
        "relglob",
        "relpath",
        "relre",
        "rootglob",
        "listfile",
        "listfile0",
        "set",
        "include",
        "subinclude",
        "rootfilesin",
    ];
    pat.split_once(':').is_some_and(|(k, _)| KINDS.contains(&k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_kinds_like_hg() {
        assert!(is_pattern("glob:*.c"));
        assert!(!is_pattern("foo:bar"));
        assert!(!is_pattern("plain"));
    }
}
