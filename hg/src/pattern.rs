//! hg's pattern kinds as Python regular expressions, one translation for ignore files
//! ([`crate::ignore`]) and command-line patterns ([`crate::matcher`]): Mercurial 6.3.2's
//! `match._regex`, `_globre`, `stringutil.reescape`, `FLAG_RE`, and the grouping of
//! `_buildregexmatch` (joined regexps split in groups of about [`MAX_RE_SIZE`] bytes).

/// The kinds `match._regex` translates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReKind {
    Re,
    Glob,
    RootGlob,
    RelGlob,
    Path,
    RelPath,
    RelRe,
    RootFilesIn,
}

/// hg's `MAX_RE_SIZE`: joined regexps are split in groups of about this many bytes.
pub(crate) const MAX_RE_SIZE: usize = 20000;

/// hg's `_regex(kind, pat, globsuffix)`: the Python regular expression of one pattern
/// (`globsuffix` is `(?:/|$)` in ignore files and includes, `$` on the command line).
pub(crate) fn regex(kind: ReKind, pat: &[u8], globsuffix: &[u8]) -> Vec<u8> {
    match kind {
        ReKind::Glob | ReKind::RelPath if pat.is_empty() => Vec::new(),
        ReKind::Re => pat.to_vec(),
        ReKind::Path | ReKind::RelPath => {
            if pat == b"." {
                Vec::new()
            } else {
                [reescape(pat).as_slice(), b"(?:/|$)"].concat()
            }
        }
        ReKind::RootFilesIn => {
            let dir = if pat == b"." {
                Vec::new()
            } else {
                [reescape(pat).as_slice(), b"/"].concat()
            };
            [dir.as_slice(), b"[^/]+$"].concat()
        }
        ReKind::RelGlob => {
            let g = glob_to_python_re(pat);
            // *XYZ: the regex of **XYZ rather than **/*XYZ, as hg writes it.
            match g.strip_prefix(b"[^/]*") {
                Some(rest) => [b".*", rest, globsuffix].concat(),
                None => [b"(?:|.*/)", g.as_slice(), globsuffix].concat(),
            }
        }
        ReKind::RelRe => {
            let (flags, body) = split_relre_flags(pat);
            let mut re = Vec::new();
            if let Some(flags) = flags {
                re.extend_from_slice(b"(?");
                re.extend_from_slice(flags);
                re.push(b':');
            }
            if !body.starts_with(b"^") {
                re.extend_from_slice(b".*");
            }
            re.extend_from_slice(body);
            if flags.is_some() {
                re.push(b')');
            }
            re
        }
        ReKind::Glob | ReKind::RootGlob => [glob_to_python_re(pat).as_slice(), globsuffix].concat(),
    }
}

/// `_buildregexmatch`'s groups of `pieces` (start, end), each joined with `|` under about
/// [`MAX_RE_SIZE`] bytes; `Err((index, size))` for a piece too long on its own.
pub(crate) fn groups(pieces: &[Vec<u8>]) -> Result<Vec<(usize, usize)>, (usize, usize)> {
    let mut groups = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (idx, piece) in pieces.iter().enumerate() {
        if piece.len() > MAX_RE_SIZE {
            return Err((idx, piece.len()));
        } else if size + piece.len() > MAX_RE_SIZE {
            groups.push((start, idx));
            start = idx;
            size = 0;
        }
        size += piece.len() + 1;
    }
    groups.push((start, pieces.len()));
    Ok(groups)
}

/// hg's `stringutil.reescape`.
pub(crate) fn reescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 2);
    for &c in s {
        push_reescaped(&mut out, c);
    }
    out
}

/// Python's `_respecial` as escaped by hg's `reescape`/`_globre`.
pub(crate) fn push_reescaped(out: &mut Vec<u8>, c: u8) {
    if b"()[]{}?*+-|^$\\.&~# \t\n\r\x0b\x0c".contains(&c) {
        out.push(b'\\');
    }
    out.push(c);
}

/// hg's `_globre`: an extended glob to a Python regular expression.
pub(crate) fn glob_to_python_re(pat: &[u8]) -> Vec<u8> {
    let n = pat.len();
    let mut i = 0;
    let mut res = Vec::with_capacity(n * 2);
    let mut group = 0usize;
    while i < n {
        let c = pat[i];
        i += 1;
        match c {
            b'*' => {
                if pat.get(i) == Some(&b'*') {
                    i += 1;
                    if pat.get(i) == Some(&b'/') {
                        i += 1;
                        res.extend_from_slice(b"(?:.*/)?");
                    } else {
                        res.extend_from_slice(b".*");
                    }
                } else {
                    res.extend_from_slice(b"[^/]*");
                }
            }
            b'?' => res.push(b'.'),
            b'[' => {
                let mut j = i;
                if j < n && (pat[j] == b'!' || pat[j] == b']') {
                    j += 1;
                }
                while j < n && pat[j] != b']' {
                    j += 1;
                }
                if j >= n {
                    res.extend_from_slice(b"\\[");
                } else {
                    let mut stuff = Vec::new();
                    for &b in &pat[i..j] {
                        if b == b'\\' {
                            stuff.extend_from_slice(b"\\\\");
                        } else {
                            stuff.push(b);
                        }
                    }
                    i = j + 1;
                    if stuff.first() == Some(&b'!') {
                        stuff[0] = b'^';
                    } else if stuff.first() == Some(&b'^') {
                        stuff.insert(0, b'\\');
                    }
                    res.push(b'[');
                    res.extend_from_slice(&stuff);
                    res.push(b']');
                }
            }
            b'{' => {
                group += 1;
                res.extend_from_slice(b"(?:");
            }
            b'}' if group > 0 => {
                res.push(b')');
                group -= 1;
            }
            b',' if group > 0 => res.push(b'|'),
            b'\\' => match pat.get(i) {
                Some(&p) => {
                    i += 1;
                    push_reescaped(&mut res, p);
                }
                None => push_reescaped(&mut res, c),
            },
            _ => push_reescaped(&mut res, c),
        }
    }
    res
}

/// hg's `FLAG_RE`: a relre starting with `(?flags)` gets them as a scoped group instead.
pub(crate) fn split_relre_flags(pat: &[u8]) -> (Option<&[u8]>, &[u8]) {
    if let Some(rest) = pat.strip_prefix(b"(?") {
        let k = rest.iter().take_while(|c| b"aiLmsux".contains(c)).count();
        if k > 0 && rest.get(k) == Some(&b')') {
            let tail = &rest[k + 1..];
            // `(.*)` stops at a newline.
            let end = tail.iter().position(|&b| b == b'\n').unwrap_or(tail.len());
            return (Some(&rest[..k]), &tail[..end]);
        }
    }
    (None, pat)
}
