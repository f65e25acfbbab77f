//! Command-line file patterns as Mercurial 6.3.2 reads them (`scmutil.match`, which calls
//! `match.match` with the default kind `relpath`), and paths as hg takes them from and shows
//! them to the user: relative to the current directory (`pathutil.canonpath`,
//! `util.pathto`), the current directory possibly outside the repository (`-R`).
//!
//! Kinds (`match._donormalize`, `match._regex` with the glob suffix `$` of a
//! `patternmatcher`): `path:` (root-relative, recursive), `relpath:` and plain arguments
//! (cwd-relative, recursive), `glob:` (cwd-relative; `*` stays within a directory and a glob
//! does not match what is below a directory it names), `rootglob:`, `relglob:` (unrooted),
//! `re:` (anchored at the start of a root-relative path), `relre:` (unanchored),
//! `rootfilesin:` (the files of one directory, not below), `listfile:`/`listfile0:` (patterns
//! read from a file, one per line or NUL-separated) and `include:` (a pattern file, relative
//! to the root). An argument with a colon and no known kind is a plain path.
//!
//! Besides whether a path matches, the matcher answers what hg's walk needs: the explicit
//! files (`files()`: the roots of the patterns), `exact`, `always`, `anypats`, and which
//! directories are visited (`visitdir`), which is what makes `rootfilesin:` list no unknown
//! files in hg.
//!
//! Not supported, with an abort that says so: filesets (`set:`) and `subinclude:` on the
//! command line.

use crate::ignore::pattern::{compile_python, read_pattern_file, CompileError};
use crate::paths::{is_under, normpath};
use crate::pattern::ReKind;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a command-line path or pattern cannot be used, with hg's words.
#[derive(Debug, Error)]
pub enum MatchError {
    /// A path outside the repository (`canonpath`); the hint is hg's `--cwd` suggestion.
    #[error("{name} not under root '{root}'")]
    NotUnderRoot {
        name: String,
        root: String,
        hint: Option<String>,
    },
    /// `pathauditor`: a `.hg` component.
    #[error("path contains illegal component: {0}")]
    IllegalComponent(String),
    /// `pathauditor`: a path that ends with `/`.
    #[error("path ends in directory separator: {0}")]
    EndsWithSeparator(String),
    /// `pathauditor`: a path inside a nested repository (`nested` quoted as Python's `%r`).
    #[error("path '{path}' is inside nested repo {nested}")]
    NestedRepo { path: String, nested: String },
    /// `pathauditor`: a path below a symbolic link (both quoted as Python's `%r`).
    #[error("path {path} traverses symbolic link {link}")]
    TraversesSymlink { path: String, link: String },
    /// `listfile:` of a file that cannot be read.
    #[error("unable to read file list ({0})")]
    UnreadableList(String),
    /// A pattern Python's `re` rejects, as hg says it.
    #[error("{0}")]
    Invalid(String),
    /// A valid pattern revfs cannot run, or a kind it does not implement.
    #[error("{0} (use hg instead)")]
    Unsupported(String),
    /// The current directory cannot be read.
    #[error("cannot read the current directory: {0}")]
    CurrentDir(#[source] std::io::Error),
}

impl MatchError {
    /// Everything hg prints on stderr for this error (exit status 255).
    pub fn hg_message(&self) -> String {
        match self {
            MatchError::NotUnderRoot {
                hint: Some(hint), ..
            } => format!("abort: {self}\n({hint})\n"),
            _ => format!("abort: {self}\n"),
        }
    }
}

type Result<T> = std::result::Result<T, MatchError>;

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Python's `%r` of a byte string made `str` (hg's `pycompat.bytestr`): quoted, no `b`.
fn py_repr(b: &[u8]) -> String {
    crate::date::py_bytes_repr(b)
}

/// Where a command runs: the repository root (its real path, as hg's `repo.root`) and the
/// current directory, relative to the root when inside it (`dirstate.getcwd`), absolute
/// otherwise.
#[derive(Debug, Clone)]
pub struct PathContext {
    root: Vec<u8>,
    /// `repo.getcwd()`: root-relative (`""` at the root), or absolute outside the root.
    cwd: Vec<u8>,
}

impl PathContext {
    /// The context of the process's current directory for the repository at `root`.
    pub fn new(root: &Path) -> Result<PathContext> {
        let cwd = std::env::current_dir().map_err(MatchError::CurrentDir)?;
        Ok(PathContext::with_cwd(root, &cwd))
    }

    /// The context for a given (absolute, physical) current directory.
    pub fn with_cwd(root: &Path, cwd: &Path) -> PathContext {
        // The current directory is canonical already; so is a mount's root. Canonicalizing
        // only what is not spares a round of lstat calls through the mount.
        let root: PathBuf = if cwd.starts_with(root) && root.is_absolute() {
            root.to_path_buf()
        } else {
            std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf())
        };
        let root = root.as_os_str().as_bytes().to_vec();
        let cwd = cwd.as_os_str().as_bytes();
        let rel = if cwd == root.as_slice() {
            Vec::new()
        } else if cwd.starts_with(&root) && cwd.get(root.len()) == Some(&b'/') {
            cwd[root.len() + 1..].to_vec()
        } else {
            cwd.to_vec()
        };
        PathContext { root, cwd: rel }
    }

    /// The repository root, as a path.
    pub fn root(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.root))
    }

    /// Whether the current directory is outside the repository.
    pub fn outside(&self) -> bool {
        self.cwd.starts_with(b"/")
    }

    /// `pathutil.canonpath(root, cwd, name)`: a user's path as a repository path (`""` for
    /// the root), checked as hg's path auditor does.
    pub fn canonpath(&self, name: &[u8]) -> Result<Vec<u8>> {
        self.canonpath_from(&self.cwd, name)
    }

    fn canonpath_from(&self, cwd: &[u8], myname: &[u8]) -> Result<Vec<u8>> {
        let root = &self.root;
        let name = if myname.starts_with(b"/") {
            normpath(myname)
        } else {
            normpath(&crate::paths::join(&crate::paths::join(root, cwd), myname))
        };
        let mut rootsep = root.clone();
        if !rootsep.ends_with(b"/") {
            rootsep.push(b'/');
        }
        if name != rootsep && name.starts_with(&rootsep) {
            let rel = name[rootsep.len()..].to_vec();
            self.audit(&rel)?;
            return Ok(rel);
        }
        if &name == root {
            return Ok(Vec::new());
        }
        // A path through a symbolic link to (or into) the root.
        let root_id = std::fs::metadata(OsStr::from_bytes(root))
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let mut rel: Vec<&[u8]> = Vec::new();
        let mut cur: &[u8] = &name;
        loop {
            let same = std::fs::metadata(OsStr::from_bytes(cur))
                .ok()
                .map(|m| (m.dev(), m.ino()));
            if same.is_some() && same == root_id {
                if rel.is_empty() {
                    return Ok(Vec::new());
                }
                rel.reverse();
                let out = rel.join(&b'/');
                self.audit(&out)?;
                return Ok(out);
            }
            let (dir, base) = crate::paths::split(cur);
            if dir == cur {
                break;
            }
            rel.push(base);
            cur = dir;
        }
        let mut hint = None;
        if cwd != root.as_slice() && !cwd.is_empty() && self.canonpath_from(b"", myname).is_ok() {
            let mut rel = pathto(root, cwd, b"");
            if rel.ends_with(b"/") {
                rel.pop();
            }
            hint = Some(format!("consider using '--cwd {}'", show(&rel)));
        }
        Err(MatchError::NotUnderRoot {
            name: show(myname),
            root: show(root),
            hint,
        })
    }

    /// hg's `pathauditor` for a repository path: no `.hg` component, no `..`, nothing inside
    /// a nested repository or below a symbolic link.
    fn audit(&self, path: &[u8]) -> Result<()> {
        if path.ends_with(b"/") {
            return Err(MatchError::EndsWithSeparator(show(path)));
        }
        let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
        let lparts: Vec<Vec<u8>> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
        let shortname = |p: &[u8]| match p.iter().position(|&b| b == b'~') {
            Some(i) => {
                let (first, last) = (&p[..i], &p[i + 1..]);
                !last.is_empty()
                    && last.iter().all(u8::is_ascii_digit)
                    && matches!(first.to_ascii_uppercase().as_slice(), b"HG" | b"HG8B6C")
            }
            None => false,
        };
        if matches!(lparts[0].as_slice(), b".hg" | b".hg." | b"")
            || parts.contains(&&b".."[..])
            || parts.iter().any(|p| shortname(p))
        {
            return Err(MatchError::IllegalComponent(show(path)));
        }
        for dot in [&b".hg"[..], b".hg."] {
            if lparts[1..].iter().any(|p| p == dot) {
                let pos = lparts.iter().position(|p| p == dot).unwrap_or(0);
                return Err(MatchError::NestedRepo {
                    path: show(path),
                    nested: py_repr(&parts[..pos].join(&b'/')),
                });
            }
        }
        for i in 1..parts.len() {
            let prefix = parts[..i].join(&b'/');
            let full = crate::paths::join(&self.root, &prefix);
            if let Ok(m) = std::fs::symlink_metadata(OsStr::from_bytes(&full)) {
                if m.file_type().is_symlink() {
                    return Err(MatchError::TraversesSymlink {
                        path: py_repr(path),
                        link: py_repr(&prefix),
                    });
                }
                if m.is_dir() && self.is_repo_dir(&prefix) {
                    return Err(MatchError::NestedRepo {
                        path: show(path),
                        nested: py_repr(&prefix),
                    });
                }
            }
        }
        Ok(())
    }

    fn is_repo_dir(&self, rel: &[u8]) -> bool {
        let p = crate::paths::join(&crate::paths::join(&self.root, rel), b".hg");
        std::fs::metadata(OsStr::from_bytes(&p)).is_ok_and(|m| m.is_dir())
    }

    /// `repo.pathto(f)`: a repository path shown relative to the current directory.
    pub fn display(&self, repo_path: &[u8]) -> Vec<u8> {
        pathto(&self.root, &self.cwd, repo_path)
    }
}

/// hg's `util.pathto(root, n1, n2)`: the path of root-relative `n2` seen from `n1` (relative
/// to the root, or absolute).
fn pathto(root: &[u8], n1: &[u8], n2: &[u8]) -> Vec<u8> {
    if n1.is_empty() {
        return n2.to_vec();
    }
    let n2full;
    let n2 = if n1.starts_with(b"/") {
        n2full = [root, b"/", n2].concat();
        n2full.as_slice()
    } else {
        n2
    };
    // `splitpath(n1)` is `n1.split('/')`; `n2.split('/')`.
    let mut a: Vec<&[u8]> = n1.split(|&b| b == b'/').collect();
    let mut b: Vec<&[u8]> = n2.split(|&b| b == b'/').collect();
    a.reverse();
    b.reverse();
    while let (Some(x), Some(y)) = (a.last(), b.last()) {
        if x != y {
            break;
        }
        a.pop();
        b.pop();
    }
    b.reverse();
    let mut parts: Vec<&[u8]> = vec![b".."; a.len()];
    parts.extend(b);
    let out = parts.join(&b'/');
    if out.is_empty() {
        b".".to_vec()
    } else {
        out
    }
}

/// Pattern kinds after normalization (`listfile` and `include` are expanded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Re,
    Glob,
    Path,
    RelGlob,
    RelPath,
    RelRe,
    RootGlob,
    RootFilesIn,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Re => "re",
            Kind::Glob => "glob",
            Kind::Path => "path",
            Kind::RelGlob => "relglob",
            Kind::RelPath => "relpath",
            Kind::RelRe => "relre",
            Kind::RootGlob => "rootglob",
            Kind::RootFilesIn => "rootfilesin",
        }
    }
}

/// `match.allpatternkinds`.
const ALL_KINDS: [&str; 13] = [
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

/// Whether `pat` starts with one of the pattern kinds hg knows (`match.patkind`).
pub fn is_pattern(pat: &str) -> bool {
    pat.split_once(':')
        .is_some_and(|(k, _)| ALL_KINDS.contains(&k))
}

/// `_patsplit`: the kind prefix and the pattern.
fn patsplit<'a>(pattern: &'a [u8], default: &'a [u8]) -> (&'a [u8], &'a [u8]) {
    if let Some(i) = pattern.iter().position(|&b| b == b':') {
        let kind = &pattern[..i];
        if ALL_KINDS.iter().any(|k| k.as_bytes() == kind) {
            return (kind, &pattern[i + 1..]);
        }
    }
    (default, pattern)
}

#[derive(Debug, Clone)]
struct KindPat {
    kind: Kind,
    pat: Vec<u8>,
    /// The pattern file it came from (`listfile`, `include`), for error messages.
    source: Vec<u8>,
}

/// What decides whether a path matches.
#[derive(Debug)]
enum Test {
    Always,
    /// `rootfilesin:` only: the directories whose files match.
    FilesIn(HashSet<Vec<u8>>),
    /// Regular expressions (hg's groups of at most 20000 bytes), anchored at the start.
    Regex(Vec<regex::bytes::Regex>, bool),
}

/// A set of command-line file patterns, as hg's `match.match(root, cwd, pats)` builds it.
/// No patterns (or patterns that name the whole tree) match everything.
#[derive(Debug)]
pub struct Matcher {
    test: Test,
    files: Vec<Vec<u8>>,
    fileset: HashSet<Vec<u8>>,
    /// `pathutil.dirs(fileset)`: every proper ancestor of an explicit file, `""` included.
    dirs: HashSet<Vec<u8>>,
    prefix: bool,
    /// The explicit files of the path kinds (`path:`, `relpath:`, plain arguments).
    paths: Vec<Vec<u8>>,
    /// Whether every pattern is of a path kind.
    only_paths: bool,
}

impl Matcher {
    /// The matcher of `args`, plain arguments being `relpath:` (hg's commands' default).
    pub fn new(ctx: &PathContext, args: &[String]) -> Result<Matcher> {
        let pats: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        Matcher::with_default(ctx, &pats, b"relpath")
    }

    /// The matcher of `pats` with another default kind (`glob` for `-I`/`-X`).
    pub fn with_default(ctx: &PathContext, pats: &[&[u8]], default: &[u8]) -> Result<Matcher> {
        if pats.is_empty() {
            return Ok(Matcher::always());
        }
        let mut kindpats = Vec::new();
        normalize(ctx, pats, default, b"", &mut kindpats, 0)?;
        let is_path = |kp: &KindPat| matches!(kp.kind, Kind::Path | Kind::RelPath);
        let paths: Vec<Vec<u8>> = explicit_files(
            &kindpats
                .iter()
                .filter(|kp| is_path(kp))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let only_paths = kindpats.iter().all(is_path);
        // `_kindpatsalwaysmatch` (true for no patterns at all, as from an empty list file).
        if kindpats
            .iter()
            .all(|kp| kp.pat.is_empty() && matches!(kp.kind, Kind::RelPath | Kind::Glob))
        {
            return Ok(Matcher {
                paths,
                only_paths,
                ..Matcher::always()
            });
        }
        let files = explicit_files(&kindpats);
        let fileset: HashSet<Vec<u8>> = files.iter().cloned().collect();
        let mut dirs = HashSet::new();
        for f in &fileset {
            for d in finddirs(f) {
                dirs.insert(d.to_vec());
            }
        }
        let prefix = kindpats
            .iter()
            .all(|kp| matches!(kp.kind, Kind::Path | Kind::RelPath));
        let test = if kindpats.iter().all(|kp| kp.kind == Kind::RootFilesIn) {
            Test::FilesIn(kindpats.iter().map(|kp| kp.pat.clone()).collect())
        } else {
            build_regex(&kindpats)?
        };
        Ok(Matcher {
            test,
            files,
            fileset,
            dirs,
            prefix,
            paths,
            only_paths,
        })
    }

    /// The matcher of everything.
    pub fn always() -> Matcher {
        Matcher {
            test: Test::Always,
            files: Vec::new(),
            fileset: HashSet::new(),
            dirs: HashSet::new(),
            prefix: false,
            paths: Vec::new(),
            only_paths: true,
        }
    }

    /// The explicit files of the path kinds, as the commands that take them one by one
    /// (`cat`, `files`, `commit`...) name them in messages.
    pub fn args(&self) -> &[Vec<u8>] {
        &self.paths
    }

    /// Index (among [`Matcher::args`]) of the first path that is `path` or a directory
    /// above it.
    pub fn matching_arg(&self, path: &[u8]) -> Option<usize> {
        self.paths
            .iter()
            .position(|p| path == p.as_slice() || is_under(path, p))
    }

    /// True when every pattern is of a path kind (file lookups can then skip a full scan).
    pub fn only_paths(&self) -> bool {
        self.only_paths
    }

    /// Whether `path` (a repository path) matches.
    pub fn matches(&self, path: &[u8]) -> bool {
        match &self.test {
            Test::Always => true,
            Test::FilesIn(dirs) => {
                let dir = match path.iter().rposition(|&b| b == b'/') {
                    Some(i) => &path[..i],
                    None => b".",
                };
                dirs.contains(dir)
            }
            Test::Regex(res, empty) => {
                if path.is_empty() {
                    *empty
                } else {
                    res.iter().any(|r| r.is_match(path))
                }
            }
        }
    }

    /// `files()`: the explicit files and roots of the patterns, in order (duplicates kept).
    pub fn files(&self) -> &[Vec<u8>] {
        &self.files
    }

    /// `exact(f)`: whether `f` is one of [`Matcher::files`].
    pub fn exact(&self, f: &[u8]) -> bool {
        self.fileset.contains(f)
    }

    /// Whether every path matches (no patterns, or patterns naming the root).
    pub fn is_always(&self) -> bool {
        matches!(self.test, Test::Always)
    }

    /// `anypats()`: not always, and some pattern is not a path.
    pub fn anypats(&self) -> bool {
        !self.is_always() && !self.prefix
    }

    /// `visitdir(dir)`: whether hg's walk looks into directory `dir`.
    pub fn visitdir(&self, dir: &[u8]) -> bool {
        if self.is_always() {
            return true;
        }
        self.dirs.contains(dir)
            || self.fileset.contains(dir)
            || finddirs(dir).any(|d| self.fileset.contains(d))
    }

    /// The directories hg's walk lists (`dirstate.walk`, step 2), where it finds unknown and
    /// ignored files: each explicit file that is a directory on disk (`is_dir`) and that
    /// [`Matcher::visitdir`] lets in; the root for a matcher of everything, and also for
    /// one without explicit files (`rootfilesin:` only), which `visitdir` then stops.
    pub fn walk_roots(&self, is_dir: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        if self.is_always() {
            return vec![Vec::new()];
        }
        let mut files: Vec<&[u8]> = self.files.iter().map(Vec::as_slice).collect();
        if files.is_empty() || files.iter().any(|f| f.is_empty()) {
            files = vec![b""];
        }
        let mut roots: Vec<Vec<u8>> = files
            .into_iter()
            .filter(|s| self.visitdir(s) && (s.is_empty() || is_dir(s)))
            .map(<[u8]>::to_vec)
            .collect();
        roots.sort();
        roots.dedup();
        roots
    }
}

/// Whether `f` is below one of `roots` (see [`Matcher::walk_roots`]).
pub fn below_roots(roots: &[Vec<u8>], f: &[u8]) -> bool {
    roots.iter().any(|s| is_under(f, s))
}

/// `pathutil.finddirs`: the ancestors of a path, nearest first, ending with `""`.
fn finddirs(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut end = Some(path.len());
    std::iter::from_fn(move || {
        let e = end?;
        match path[..e].iter().rposition(|&b| b == b'/') {
            Some(i) => {
                end = Some(i);
                Some(&path[..i])
            }
            None => {
                end = None;
                Some(&path[..0])
            }
        }
    })
}

/// `_donormalize`.
fn normalize(
    ctx: &PathContext,
    pats: &[&[u8]],
    default: &[u8],
    source: &[u8],
    out: &mut Vec<KindPat>,
    depth: usize,
) -> Result<()> {
    if depth > 32 {
        return Err(MatchError::Unsupported(
            "pattern files nested too deep".into(),
        ));
    }
    for p in pats {
        let (kind, pat) = patsplit(p, default);
        let push = |out: &mut Vec<KindPat>, kind: Kind, pat: Vec<u8>| {
            out.push(KindPat {
                kind,
                pat,
                source: source.to_vec(),
            })
        };
        match kind {
            b"relpath" => push(out, Kind::RelPath, ctx.canonpath(pat)?),
            b"glob" => push(out, Kind::Glob, ctx.canonpath(pat)?),
            b"relglob" => push(out, Kind::RelGlob, normpath(pat)),
            b"path" => push(out, Kind::Path, normpath(pat)),
            b"rootfilesin" => push(out, Kind::RootFilesIn, normpath(pat)),
            b"rootglob" => push(out, Kind::RootGlob, normpath(pat)),
            b"re" => push(out, Kind::Re, pat.to_vec()),
            b"relre" => push(out, Kind::RelRe, pat.to_vec()),
            b"listfile" | b"listfile0" => {
                let Ok(data) = std::fs::read(OsStr::from_bytes(pat)) else {
                    return Err(MatchError::UnreadableList(show(pat)));
                };
                let lines: Vec<&[u8]> = if kind == b"listfile0" {
                    data.split(|&b| b == 0).collect()
                } else {
                    splitlines(&data)
                };
                let lines: Vec<&[u8]> = lines.into_iter().filter(|l| !l.is_empty()).collect();
                normalize(ctx, &lines, default, pat, out, depth + 1)?;
            }
            b"include" => {
                let full = crate::paths::join(&ctx.root, pat);
                match std::fs::read(OsStr::from_bytes(&full)) {
                    Ok(data) => {
                        let mut warnings = Vec::new();
                        let found = read_pattern_file(&data, pat, &mut warnings);
                        for w in warnings {
                            eprintln!("{w}");
                        }
                        let lines: Vec<&[u8]> = found.iter().map(|(p, _)| p.as_slice()).collect();
                        let src = if source.is_empty() { pat } else { source };
                        normalize(ctx, &lines, default, src, out, depth + 1)?;
                    }
                    Err(e) => eprintln!(
                        "skipping unreadable pattern file '{}': {}",
                        show(pat),
                        crate::config::strerror(&e)
                    ),
                }
            }
            b"set" => {
                return Err(MatchError::Unsupported(format!(
                    "fileset expressions are not supported by revfs: set:{}",
                    show(pat)
                )))
            }
            _ => {
                return Err(MatchError::Unsupported(format!(
                    "pattern kind '{}' is not supported by revfs on the command line",
                    show(kind)
                )))
            }
        }
    }
    Ok(())
}

/// Python's `bytes.splitlines()`: lines end at `\n`, `\r\n` or `\r` (and a few other
/// separators Python knows), endings dropped.
fn splitlines(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < data.len() {
        let c = data[i];
        if matches!(c, b'\n' | b'\r' | 0x0b | 0x0c | 0x1c | 0x1d | 0x1e) {
            out.push(&data[start..i]);
            if c == b'\r' && data.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            start = i + 1;
        }
        i += 1;
    }
    if start < data.len() {
        out.push(&data[start..]);
    }
    out
}

/// `_patternrootsanddirs` / `_explicitfiles`: the roots of every pattern but `rootfilesin`.
fn explicit_files(kindpats: &[KindPat]) -> Vec<Vec<u8>> {
    let mut roots = Vec::new();
    for kp in kindpats {
        match kp.kind {
            Kind::Glob | Kind::RootGlob => {
                let mut root = Vec::new();
                for p in kp.pat.split(|&b| b == b'/') {
                    if p.iter().any(|c| b"[{*?".contains(c)) {
                        break;
                    }
                    root.push(p);
                }
                roots.push(root.join(&b'/'));
            }
            Kind::Path | Kind::RelPath => {
                roots.push(if kp.pat == b"." {
                    Vec::new()
                } else {
                    kp.pat.clone()
                });
            }
            Kind::RootFilesIn => {}
            Kind::RelGlob | Kind::Re | Kind::RelRe => roots.push(Vec::new()),
        }
    }
    roots
}

/// `_regex(kind, pat, b'$')`.
fn python_regex(kp: &KindPat) -> Vec<u8> {
    let kind = match kp.kind {
        Kind::Re => ReKind::Re,
        Kind::Glob => ReKind::Glob,
        Kind::RootGlob => ReKind::RootGlob,
        Kind::RelGlob => ReKind::RelGlob,
        Kind::Path => ReKind::Path,
        Kind::RelPath => ReKind::RelPath,
        Kind::RelRe => ReKind::RelRe,
        Kind::RootFilesIn => ReKind::RootFilesIn,
    };
    crate::pattern::regex(kind, &kp.pat, b"$")
}

/// `_buildregexmatch` with `$` as the glob suffix.
fn build_regex(kindpats: &[KindPat]) -> Result<Test> {
    let pieces: Vec<Vec<u8>> = kindpats.iter().map(python_regex).collect();
    let groups = crate::pattern::groups(&pieces).map_err(|(_, size)| {
        MatchError::Invalid(format!("matcher pattern is too long ({size} bytes)"))
    })?;
    let mut regexes = Vec::new();
    let mut empty = false;
    for (s, e) in groups {
        match compile_python(&pieces[s..e].join(&b'|')) {
            Ok((re, matches_empty)) => {
                regexes.push(re);
                empty |= matches_empty;
            }
            Err(_) => {
                // Like hg: blame the first pattern that fails on its own.
                for (kp, piece) in kindpats.iter().zip(&pieces) {
                    match compile_python(piece) {
                        Err(CompileError::Invalid(_)) => {
                            let what =
                                format!("invalid pattern ({}): {}", kp.kind.name(), show(&kp.pat));
                            return Err(MatchError::Invalid(if kp.source.is_empty() {
                                what
                            } else {
                                format!("{}: {what}", show(&kp.source))
                            }));
                        }
                        Err(CompileError::Unsupported(reason)) => {
                            return Err(MatchError::Unsupported(format!(
                                "unsupported pattern ({}): {}: {reason}",
                                kp.kind.name(),
                                show(&kp.pat)
                            )))
                        }
                        Ok(_) => {}
                    }
                }
                return Err(MatchError::Invalid("invalid pattern".into()));
            }
        }
    }
    Ok(Test::Regex(regexes, empty))
}

#[cfg(test)]
mod tests;
