//! Reading ignore files as hg 6.3.2 does: a file's lines and their syntax, `include:` and
//! `subinclude:` followed (relative to the including file, bounded in depth and count),
//! each pattern split into its kind.

use super::*;

pub(super) struct Loader<'a> {
    pub(super) src: &'a dyn FileSource,
    pub(super) warnings: Vec<String>,
    pub(super) inputs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Loader<'_> {
    pub(super) fn read(&mut self, path: &[u8]) -> Option<Vec<u8>> {
        let content = self.src.read(path);
        self.inputs.push((path.to_vec(), content.clone()));
        content
    }

    /// hg's `match(root, '', [], ['include:<file>'])`: `root` is the repository path of the
    /// matcher's root directory, `file` the pattern file (already read when `content` is
    /// given).
    pub(super) fn build_matcher(
        &mut self,
        root: &[u8],
        file: &[u8],
        content: Option<Vec<u8>>,
        sub_stack: &mut Vec<Vec<u8>>,
    ) -> Result<Matcher, IgnoreError> {
        let mut kindpats = Vec::new();
        let mut include_stack = Vec::new();
        self.expand_file(root, file, content, &mut kindpats, &mut include_stack)?;

        // hg's _expandsubinclude: compute every prefix first (errors are eager there).
        let mut subincludes: Vec<SubInclude> = Vec::new();
        let mut plain: Vec<&KindPat> = Vec::new();
        for kp in &kindpats {
            if kp.kind == Kind::SubInclude {
                subincludes.push(resolve_subinclude(root, kp)?);
            } else {
                plain.push(kp);
            }
        }

        let (regexes, mut matches_empty) = compile_kindpats(&plain)?;

        let mut subs: Vec<(Vec<u8>, Matcher)> = Vec::new();
        for SubInclude {
            prefix,
            root: newroot,
            file: subfile,
            kp,
        } in subincludes
        {
            // hg caches sub-matchers by prefix: a second subinclude with the same prefix
            // finds the first one's matcher and is never read.
            if subs.iter().any(|(p, _)| *p == prefix) {
                continue;
            }
            let matcher = match subfile {
                None => {
                    self.warnings.push(format!(
                        "skipping unreadable pattern file '{}': No such file or directory",
                        show(&kp.pat)
                    ));
                    Matcher {
                        regexes: Vec::new(),
                        subs: Vec::new(),
                        matches_empty: false,
                    }
                }
                Some(subfile) => {
                    if sub_stack.contains(&subfile)
                        || sub_stack.len() >= MAX_FILE_NESTING
                        || self.inputs.len() >= MAX_FILES
                    {
                        return Err(IgnoreError::Recursion {
                            file: show(&kp.file),
                            line: kp.line,
                            kind: "subinclude",
                            path: show(&subfile),
                        });
                    }
                    sub_stack.push(subfile.clone());
                    let m = self.build_matcher(&newroot, &subfile, None, sub_stack)?;
                    sub_stack.pop();
                    m
                }
            };
            subs.push((prefix, matcher));
        }
        matches_empty |= subs.iter().any(|(p, m)| p.is_empty() && m.matches_empty);
        Ok(Matcher {
            regexes,
            subs,
            matches_empty,
        })
    }

    /// Reads one pattern file and appends its normalised patterns, expanding `include:`s
    /// in place (hg's `_donormalize`). A missing file only warns.
    fn expand_file(
        &mut self,
        root: &[u8],
        file: &[u8],
        content: Option<Vec<u8>>,
        out: &mut Vec<KindPat>,
        stack: &mut Vec<Vec<u8>>,
    ) -> Result<(), IgnoreError> {
        let content = match content {
            Some(c) => c,
            None => match self.read(file) {
                Some(c) => c,
                None => {
                    self.warnings.push(format!(
                        "skipping unreadable pattern file '{}': No such file or directory",
                        show(file)
                    ));
                    return Ok(());
                }
            },
        };
        stack.push(file.to_vec());
        for (pattern, line) in read_pattern_file(&content, file, &mut self.warnings) {
            let (kind, pat) = patsplit(&pattern);
            let err_ctx = |pat: &[u8]| (show(file), line, show(pat));
            let pat = match kind {
                Kind::Include => {
                    match resolve_include(root, &pat) {
                        Some(target) => {
                            if stack.contains(&target)
                                || stack.len() >= MAX_FILE_NESTING
                                || self.inputs.len() >= MAX_FILES
                            {
                                let (file, line, _) = err_ctx(&pat);
                                return Err(IgnoreError::Recursion {
                                    file,
                                    line,
                                    kind: "include",
                                    path: show(&target),
                                });
                            }
                            self.expand_file(root, &target, None, out, stack)?;
                        }
                        None => self.warnings.push(format!(
                            "skipping unreadable pattern file '{}': No such file or directory",
                            show(&pat)
                        )),
                    }
                    continue;
                }
                Kind::RelGlob | Kind::RootGlob => normpath(&pat),
                Kind::Glob => {
                    // pathutil.canonpath(root, root, pat): normalised, must stay inside.
                    let Some(p) = normalize_rel(&pat) else {
                        let (file, line, path) = err_ctx(&pat);
                        return Err(IgnoreError::NotUnderRoot {
                            file,
                            line,
                            path,
                            root: show(root),
                        });
                    };
                    if p.split(|&b| b == b'/').any(|c| {
                        let c = c.to_ascii_lowercase();
                        c == b".hg" || c == b".hg."
                    }) {
                        let (file, line, path) = err_ctx(&p);
                        return Err(IgnoreError::IllegalComponent { file, line, path });
                    }
                    p
                }
                Kind::RelRe | Kind::SubInclude => pat,
            };
            out.push(KindPat {
                kind,
                pat,
                file: file.to_vec(),
                line,
            });
        }
        stack.pop();
        Ok(())
    }
}

/// Where an `include:` in a matcher rooted at `root` reads from: hg joins the pattern to the
/// matcher's root (not to the including file's directory). None when it cannot be a file of
/// the working copy (absolute, outside the repository, or a directory).
fn resolve_include(root: &[u8], pat: &[u8]) -> Option<Vec<u8>> {
    if pat.starts_with(b"/") || pat.is_empty() || pat.ends_with(b"/") {
        return None;
    }
    let p = normalize_rel(&join(root, pat))?;
    (!p.is_empty()).then_some(p)
}

/// A `subinclude:` resolved against the matcher holding it.
struct SubInclude<'a> {
    /// What paths of this matcher must start with to be handed (without it) to the
    /// sub-matcher: empty, or a directory ending in '/'.
    prefix: Vec<u8>,
    /// Repository path of the sub-matcher's root.
    root: Vec<u8>,
    /// Repository path of the file to read (None when it cannot exist).
    file: Option<Vec<u8>>,
    kp: &'a KindPat,
}

/// hg's `_expandsubinclude` for one pattern of a matcher rooted at `root`: the sub-matcher's
/// root is the directory of the named file and must lie inside `root`.
fn resolve_subinclude<'a>(root: &[u8], kp: &'a KindPat) -> Result<SubInclude<'a>, IgnoreError> {
    let not_under = || IgnoreError::NotUnderRoot {
        file: show(&kp.file),
        line: kp.line,
        path: show(&kp.pat),
        root: show(root),
    };
    if kp.pat.starts_with(b"/") {
        return Err(not_under());
    }
    // The including file's directory (hg: dirname of the pattern's source).
    let source_dir = posix_dirname(&kp.file);
    let joined = join(&source_dir, &kp.pat);
    let newroot = normalize_rel(&posix_dirname(&joined)).ok_or_else(not_under)?;
    let rel = if root.is_empty() {
        Some(newroot.as_slice())
    } else if newroot == root {
        Some(&b""[..])
    } else {
        newroot
            .strip_prefix(root)
            .and_then(|r| r.strip_prefix(b"/"))
    };
    let Some(rel) = rel else {
        return Err(not_under());
    };
    let prefix = if rel.is_empty() {
        Vec::new()
    } else {
        [rel, b"/"].concat()
    };
    let file = if kp.pat.is_empty() || kp.pat.ends_with(b"/") {
        None
    } else {
        normalize_rel(&joined).filter(|f| !f.is_empty())
    };
    Ok(SubInclude {
        prefix,
        root: newroot,
        file,
        kp,
    })
}

/// `posixpath.dirname`.
fn posix_dirname(p: &[u8]) -> Vec<u8> {
    let i = p.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let head = &p[..i];
    if !head.is_empty() && head.iter().any(|&b| b != b'/') {
        let end = head.iter().rposition(|&b| b != b'/').map_or(0, |e| e + 1);
        head[..end].to_vec()
    } else {
        head.to_vec()
    }
}

/// Normalises a path relative to some root; None when it is absolute or climbs out of it.
/// The root itself is the empty path.
fn normalize_rel(p: &[u8]) -> Option<Vec<u8>> {
    if p.starts_with(b"/") {
        return None;
    }
    let mut comps: Vec<&[u8]> = Vec::new();
    for comp in p.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => {
                comps.pop()?;
            }
            c => comps.push(c),
        }
    }
    Some(comps.join(&b'/'))
}

pub(super) fn is_py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn py_rstrip(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., last] = s {
        if !is_py_space(*last) {
            break;
        }
        s = rest;
    }
    s
}

fn py_strip(mut s: &[u8]) -> &[u8] {
    s = py_rstrip(s);
    while let [first, rest @ ..] = s {
        if !is_py_space(*first) {
            break;
        }
        s = rest;
    }
    s
}

/// The `syntax:` names of ignore files and the prefix each gives to its lines, in hg's
/// (dict) order, which matters for prefix detection.
const SYNTAXES: &[(&[u8], &[u8])] = &[
    (b"re", b"relre:"),
    (b"regexp", b"relre:"),
    (b"glob", b"relglob:"),
    (b"rootglob", b"rootglob:"),
    (b"include", b"include"),
    (b"subinclude", b"subinclude"),
];

/// hg's `readpatternfile`: the file's patterns, each with its kind prefix, and line numbers.
pub(crate) fn read_pattern_file(
    content: &[u8],
    file: &[u8],
    warnings: &mut Vec<String>,
) -> Vec<(Vec<u8>, usize)> {
    let mut syntax: &[u8] = b"relre:";
    let mut patterns = Vec::new();
    for (idx, raw) in content.split(|&b| b == b'\n').enumerate() {
        let lineno = idx + 1;
        let mut line = raw.to_vec();
        if line.contains(&b'#') {
            // Cut at the first '#' preceded by an even number of backslashes, then unescape
            // the `\#` that survived.
            let mut cut = None;
            let mut backslashes = 0usize;
            for (i, &b) in line.iter().enumerate() {
                if b == b'#' && backslashes & 1 == 0 {
                    cut = Some(i);
                    break;
                }
                backslashes = if b == b'\\' { backslashes + 1 } else { 0 };
            }
            if let Some(i) = cut {
                line.truncate(i);
            }
            let mut unescaped = Vec::with_capacity(line.len());
            let mut i = 0;
            while i < line.len() {
                if line[i] == b'\\' && line.get(i + 1) == Some(&b'#') {
                    unescaped.push(b'#');
                    i += 2;
                } else {
                    unescaped.push(line[i]);
                    i += 1;
                }
            }
            line = unescaped;
        }
        let line = py_rstrip(&line);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix(b"syntax:") {
            let s = py_strip(rest);
            match SYNTAXES.iter().find(|(name, _)| *name == s) {
                Some((_, prefix)) => syntax = prefix,
                None => warnings.push(format!(
                    "{}: ignoring invalid syntax '{}'",
                    show(file),
                    show(s)
                )),
            }
            continue;
        }
        let mut linesyntax = syntax;
        let mut body = line;
        for (name, prefix) in SYNTAXES {
            if let Some(rest) = line.strip_prefix(*prefix) {
                linesyntax = prefix;
                body = rest;
                break;
            }
            let with_colon = [*name, b":"].concat();
            if let Some(rest) = line.strip_prefix(with_colon.as_slice()) {
                linesyntax = prefix;
                body = rest;
                break;
            }
        }
        patterns.push(([linesyntax, body].concat(), lineno));
    }
    patterns
}

/// hg's `_patsplit` with default kind `glob`, restricted to the kinds an ignore file can
/// produce (every pattern starts with one of the `SYNTAXES` prefixes).
fn patsplit(pattern: &[u8]) -> (Kind, Vec<u8>) {
    if let Some(colon) = pattern.iter().position(|&b| b == b':') {
        let kind = match &pattern[..colon] {
            b"relre" => Some(Kind::RelRe),
            b"relglob" => Some(Kind::RelGlob),
            b"rootglob" => Some(Kind::RootGlob),
            b"include" => Some(Kind::Include),
            b"subinclude" => Some(Kind::SubInclude),
            b"glob" => Some(Kind::Glob),
            _ => None,
        };
        if let Some(kind) = kind {
            return (kind, pattern[colon + 1..].to_vec());
        }
    }
    (Kind::Glob, pattern.to_vec())
}
