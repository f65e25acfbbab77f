//! The `.hgignore` matcher: decides whether an untracked working-copy path is ignored (`I`)
//! or unknown (`?`), exactly as Mercurial 6.3.2 (pure-Python matcher) does for the root
//! `.hgignore` of a repository.
//!
//! This module owns, end to end:
//! - reading pattern files (`readpatternfile`): `#` comments and `\#` escapes, trailing
//!   whitespace, `syntax:` lines, per-line `re:`/`regexp:`/`relre:`/`glob:`/`relglob:`/
//!   `rootglob:`/`include:`/`subinclude:` prefixes (any other prefix, like `path:`, is *not*
//!   recognised in ignore files and becomes part of the pattern, as in hg);
//! - turning each pattern into the Python regular expression hg would build (`_globre`,
//!   `_regex`, glob suffix `(?:/|$)`), joining them with `|` in groups of at most 20000 bytes
//!   as hg does, and matching them with `re.match` semantics (anchored at the start only);
//! - translating Python `re` syntax (bytes patterns) into the `regex` crate's syntax, with the
//!   same validity rules; Python features the `regex` crate lacks (look-around,
//!   back-references, conditionals, atomic groups, possessive quantifiers) are reported as
//!   [`IgnoreError::UnsupportedPattern`] rather than silently mis-matched;
//! - `include:` (paths relative to the matcher root) and `subinclude:` (a separate matcher
//!   applied to paths below the included file's directory, with the pattern file's own
//!   root), and the status rule that a path is ignored when it or any parent directory
//!   (including the empty root path) matches (`dirstate._dirignore`).
//!
//! Python's possessive `.*+` (what hg makes of a regexp line starting with `+`) and its `\B`
//! (which never matches an empty string) are emulated. Known differences from hg, all in
//! corners where hg misbehaves or reads outside the working copy:
//! - hg compiles a subincluded file lazily, when a path below it is first tested; here all
//!   are compiled by [`Ignore::load`], so an invalid one fails the load;
//! - `include:` of an absolute path or of one leaving the repository is skipped (hg reads it);
//! - `subinclude:` inside a file pulled in by `include:` crashes hg (AssertionError) as soon
//!   as a path below it exists; here it is resolved against that file's directory;
//! - include/subinclude loops crash hg (RecursionError); here they are
//!   [`IgnoreError::Recursion`], as are more than 1000 pattern files;
//! - Python's `$` also matches before a final newline: names with newlines may differ;
//! - the `L` (locale) regexp flag is taken as plain ASCII.
//!
//! The translation of Python regular expressions is its own module (`pyre.rs`); the tests
//! are in `tests.rs`.

mod load;
mod pyre;

use load::Loader;

/// What the command-line matcher ([`crate::matcher`]) shares with ignore files: hg's pattern
/// files, globs and regular expressions.
pub(crate) mod pattern {
    pub(crate) use super::load::read_pattern_file;
    pub(crate) use super::pyre::ReError as CompileError;

    /// A Python regular expression compiled for the `regex` crate, and whether it matches
    /// the empty string.
    pub(crate) fn compile_python(py: &[u8]) -> Result<(regex::bytes::Regex, bool), CompileError> {
        super::pyre::compile_python_regex(py)
    }
}

use crate::paths::{join, normpath};
use crate::pattern::ReKind;
use pyre::*;
use regex::bytes::Regex;

/// Reads a file of the working copy by repository path (b".hgignore", b"sub/.hgignore" for
/// subinclude, etc.); None when absent.
pub trait FileSource {
    fn read(&self, path: &[u8]) -> Option<Vec<u8>>;
}

/// The suffix hg appends to glob regexps of include matchers (ignore files are includes).
const GLOB_SUFFIX: &[u8] = b"(?:/|$)";
/// How deep include/subinclude files may nest (hg itself recurses until Python gives up).
const MAX_FILE_NESTING: usize = 32;
/// How many pattern files one `.hgignore` may pull in, all in all (includes can fan out).
const MAX_FILES: usize = 1000;
/// How deep groups may nest in one regular expression.
const MAX_GROUP_NESTING: usize = 100;
/// Python's `MAXREPEAT` (repeat counts must stay below it).
const PY_MAXREPEAT: u64 = 4_294_967_295;

/// Why an ignore file cannot be compiled. `file` is the repository path of the pattern file
/// and `line` its 1-based line; messages are shaped like hg's aborts.
#[derive(Debug, thiserror::Error)]
pub enum IgnoreError {
    /// Python's `re` rejects the pattern: hg aborts with this very message.
    #[error("{file}: invalid pattern ({kind}): {pattern}")]
    InvalidPattern {
        file: String,
        line: usize,
        kind: &'static str,
        pattern: String,
        /// Python's complaint, as far as we can reproduce it.
        reason: String,
    },
    /// A valid Python pattern using a feature the `regex` crate cannot express.
    #[error("{file}:{line}: unsupported pattern ({kind}): {pattern}: {reason}")]
    UnsupportedPattern {
        file: String,
        line: usize,
        kind: &'static str,
        pattern: String,
        reason: String,
    },
    /// Every pattern is valid alone but their `|`-joined form is not (hg: "invalid pattern").
    #[error("{file}: invalid pattern")]
    InvalidPatternSet { file: String, line: usize },
    #[error("{file}:{line}: matcher pattern is too long ({size} bytes)")]
    PatternTooLong {
        file: String,
        line: usize,
        size: usize,
    },
    /// A pattern or subinclude that points outside its root (hg: "... not under root ...").
    #[error("{file}:{line}: {path} not under root '{root}'")]
    NotUnderRoot {
        file: String,
        line: usize,
        path: String,
        root: String,
    },
    #[error("{file}:{line}: path contains illegal component: {path}")]
    IllegalComponent {
        file: String,
        line: usize,
        path: String,
    },
    /// Include or subinclude files that include themselves (hg recurses until it crashes),
    /// or too many of them.
    #[error("{file}:{line}: {kind} loop, or too many pattern files, at {path}")]
    Recursion {
        file: String,
        line: usize,
        kind: &'static str,
        path: String,
    },
}

impl IgnoreError {
    /// The error with its pattern file named as hg names it: joined to the working copy's
    /// `root` (an absolute name, from `ui.ignore`, stays).
    pub fn rooted(mut self, root: &str) -> IgnoreError {
        let file = match &mut self {
            IgnoreError::InvalidPattern { file, .. }
            | IgnoreError::UnsupportedPattern { file, .. }
            | IgnoreError::InvalidPatternSet { file, .. }
            | IgnoreError::PatternTooLong { file, .. }
            | IgnoreError::NotUnderRoot { file, .. }
            | IgnoreError::IllegalComponent { file, .. }
            | IgnoreError::Recursion { file, .. } => file,
        };
        if !file.starts_with('/') {
            *file = format!("{}/{file}", root.trim_end_matches('/'));
        }
        self
    }
}

/// A compiled `.hgignore`, with everything it includes, and the other ignore files
/// (`ui.ignore`).
#[derive(Debug, Clone)]
pub struct Ignore {
    root: Option<Matcher>,
    /// The matchers of the files `ui.ignore` names.
    extra: Vec<Matcher>,
    /// Whether the empty path (the repository root) matches: then everything is ignored.
    all: bool,
    warnings: Vec<String>,
    inputs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    extra_inputs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Ignore {
    /// Compiles the root `.hgignore` (and what it includes). An absent file ignores nothing.
    pub fn load(src: &dyn FileSource) -> Result<Ignore, IgnoreError> {
        Ignore::load_with(src, &[])
    }

    /// [`Ignore::load`] and the ignore files `ui.ignore` names: (the path as hg shows it,
    /// the content, None when it cannot be read). Their patterns are relative to the
    /// repository root; an unreadable one is skipped with hg's warning.
    pub fn load_with(
        src: &dyn FileSource,
        extra: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Result<Ignore, IgnoreError> {
        let mut loader = Loader {
            src,
            warnings: Vec::new(),
            inputs: Vec::new(),
        };
        let root = match loader.read(b".hgignore") {
            Some(content) => {
                let mut sub_stack = vec![b".hgignore".to_vec()];
                Some(loader.build_matcher(b"", b".hgignore", Some(content), &mut sub_stack)?)
            }
            None => None,
        };
        let mut extras = Vec::new();
        for (name, content) in extra {
            match content {
                Some(content) => {
                    let mut sub_stack = vec![name.clone()];
                    extras.push(loader.build_matcher(
                        b"",
                        name,
                        Some(content.clone()),
                        &mut sub_stack,
                    )?);
                }
                None => loader.warnings.push(format!(
                    "skipping unreadable pattern file '{}': No such file or directory",
                    show(name)
                )),
            }
        }
        let all = root.iter().chain(&extras).any(|m| m.matches(b""));
        Ok(Ignore {
            root,
            extra: extras,
            all,
            warnings: loader.warnings,
            inputs: loader.inputs,
            extra_inputs: extra.to_vec(),
        })
    }

    /// An Ignore that ignores nothing.
    pub fn empty() -> Ignore {
        Ignore {
            root: None,
            extra: Vec::new(),
            all: false,
            warnings: Vec::new(),
            inputs: Vec::new(),
            extra_inputs: Vec::new(),
        }
    }

    /// True when `path` (repository-relative, '/'-separated bytes) is ignored: the path
    /// itself or any of its parent directories matches (as hg's status does: a file inside
    /// an ignored directory is ignored).
    pub fn is_ignored(&self, path: &[u8]) -> bool {
        if self.all {
            return true;
        }
        let matches = |p: &[u8]| self.root.iter().chain(&self.extra).any(|m| m.matches(p));
        if self.root.is_none() && self.extra.is_empty() {
            return false;
        }
        if matches(path) {
            return true;
        }
        let mut end = path.len();
        while let Some(pos) = path[..end].iter().rposition(|&b| b == b'/') {
            if matches(&path[..pos]) {
                return true;
            }
            end = pos;
        }
        false
    }

    /// What hg would have printed as warnings while reading the files (unknown `syntax:`
    /// names, unreadable include files).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// [`Ignore::warnings`] with the pattern files named as hg names them: joined to the
    /// working copy's `root`.
    pub fn warnings_rooted(&self, root: &str) -> Vec<String> {
        self.warnings
            .iter()
            .map(|w| {
                if w.starts_with("skipping unreadable") || w.starts_with('/') {
                    w.clone()
                } else {
                    format!("{}/{w}", root.trim_end_matches('/'))
                }
            })
            .collect()
    }

    /// The `ui.ignore` files it was compiled with (see [`Ignore::load_with`]).
    pub fn extra_inputs(&self) -> &[(Vec<u8>, Option<Vec<u8>>)] {
        &self.extra_inputs
    }

    /// Every pattern file consulted, by repository path, with the content it had (None when
    /// absent): the matcher is stale as soon as any of them differs.
    pub fn inputs(&self) -> &[(Vec<u8>, Option<Vec<u8>>)] {
        &self.inputs
    }
}

/// One include matcher: hg's `includematcher` over the patterns of one file (and its
/// `include:`s), plus the matchers of its `subinclude:`s keyed by path prefix.
#[derive(Debug, Clone)]
struct Matcher {
    regexes: Vec<Regex>,
    subs: Vec<(Vec<u8>, Matcher)>,
    /// The answer for the empty path, worked out at build time (see `translate_python_regex`).
    matches_empty: bool,
}

impl Matcher {
    fn matches(&self, f: &[u8]) -> bool {
        if f.is_empty() {
            return self.matches_empty;
        }
        for (prefix, sub) in &self.subs {
            if f.starts_with(prefix) && sub.matches(&f[prefix.len()..]) {
                return true;
            }
        }
        self.regexes.iter().any(|r| r.is_match(f))
    }
}

/// Pattern kinds that can come out of an ignore file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    RelRe,
    RelGlob,
    RootGlob,
    /// A cwd-relative glob: only reachable through hg's `include`/`subinclude` prefix quirk
    /// (a line `includes` in regexp mode becomes `glob:includes`).
    Glob,
    Include,
    SubInclude,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::RelRe => "relre",
            Kind::RelGlob => "relglob",
            Kind::RootGlob => "rootglob",
            Kind::Glob => "glob",
            Kind::Include => "include",
            Kind::SubInclude => "subinclude",
        }
    }
}

/// A normalised pattern with where it came from.
struct KindPat {
    kind: Kind,
    pat: Vec<u8>,
    /// Repository path of the file holding the line.
    file: Vec<u8>,
    line: usize,
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// hg's `_regex` for the kinds of ignore files, with the include glob suffix.
fn python_regex_of(kp: &KindPat) -> Vec<u8> {
    let kind = match kp.kind {
        Kind::RelRe => ReKind::RelRe,
        Kind::RelGlob => ReKind::RelGlob,
        Kind::RootGlob => ReKind::RootGlob,
        Kind::Glob => ReKind::Glob,
        // Never compiled: expanded before.
        Kind::Include | Kind::SubInclude => return Vec::new(),
    };
    crate::pattern::regex(kind, &kp.pat, GLOB_SUFFIX)
}

/// hg's `_buildregexmatch`: join, group by size, compile; on failure find the culprit.
/// Returns the regexes and whether the empty path matches one of them.
fn compile_kindpats(kindpats: &[&KindPat]) -> Result<(Vec<Regex>, bool), IgnoreError> {
    if kindpats.is_empty() {
        return Ok((Vec::new(), false));
    }
    let pieces: Vec<Vec<u8>> = kindpats.iter().map(|kp| python_regex_of(kp)).collect();
    let groups = crate::pattern::groups(&pieces).map_err(|(idx, size)| {
        let kp = kindpats[idx];
        IgnoreError::PatternTooLong {
            file: show(&kp.file),
            line: kp.line,
            size,
        }
    })?;

    let mut regexes = Vec::with_capacity(groups.len());
    let mut matches_empty = false;
    let mut failure = None;
    for (s, e) in groups {
        match compile_python_regex(&pieces[s..e].join(&b'|')) {
            Ok((r, empty)) => {
                regexes.push(r);
                matches_empty |= empty;
            }
            Err(err) => {
                failure = Some((s, err));
                break;
            }
        }
    }
    let Some((group_start, group_err)) = failure else {
        return Ok((regexes, matches_empty));
    };
    let at = |i: usize, reason: String, invalid: bool| {
        let kp = kindpats[i];
        let (file, line, kind, pattern) = (show(&kp.file), kp.line, kp.kind.name(), show(&kp.pat));
        if invalid {
            IgnoreError::InvalidPattern {
                file,
                line,
                kind,
                pattern,
                reason,
            }
        } else {
            IgnoreError::UnsupportedPattern {
                file,
                line,
                kind,
                pattern,
                reason,
            }
        }
    };
    match group_err {
        // Python rejects the joined pattern: like hg, blame the first pattern Python rejects
        // on its own.
        ReError::Invalid(_) => {
            for (i, piece) in pieces.iter().enumerate() {
                if let Err(ReError::Invalid(reason)) = compile_python_regex(piece) {
                    return Err(at(i, reason, true));
                }
            }
            let first = kindpats[0];
            Err(IgnoreError::InvalidPatternSet {
                file: show(&first.file),
                line: first.line,
            })
        }
        // Python accepts it but the regex crate cannot run it.
        ReError::Unsupported(reason) => {
            for (i, piece) in pieces.iter().enumerate() {
                if let Err(ReError::Unsupported(reason)) = compile_python_regex(piece) {
                    return Err(at(i, reason, false));
                }
            }
            Err(at(group_start, reason, false))
        }
    }
}

#[cfg(test)]
mod tests;
