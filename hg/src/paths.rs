//! Python's `os.path` on bytes, as hg uses it (configuration files, `copy`'s targets), and
//! hg's checks and quoting of file names (`util.checkwinfilename`, `procutil.shellquote`).

/// Python's `os.path.join(a, b)` on bytes: `b` alone when absolute.
pub fn join(a: &[u8], b: &[u8]) -> Vec<u8> {
    if b.starts_with(b"/") {
        return b.to_vec();
    }
    let mut out = a.to_vec();
    if !out.is_empty() && !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(b);
    out
}

/// Whether repository path `path` lies below directory `dir` (everything lies below the
/// root, `""`).
pub fn is_under(path: &[u8], dir: &[u8]) -> bool {
    dir.is_empty() || (path.starts_with(dir) && path.get(dir.len()) == Some(&b'/'))
}

/// Python's `os.path.normpath` on bytes (as hg uses it): `.` and empty components go, `..`
/// eats the component before it, a leading `//` (not `///`) is kept.
pub fn normpath(path: &[u8]) -> Vec<u8> {
    let initial = if path.starts_with(b"//") && !path.starts_with(b"///") {
        2
    } else if path.starts_with(b"/") {
        1
    } else {
        0
    };
    let mut parts: Vec<&[u8]> = Vec::new();
    for comp in path.split(|&b| b == b'/') {
        if comp.is_empty() || comp == b"." {
            continue;
        }
        if comp != b".." || (initial == 0 && parts.is_empty()) || parts.last() == Some(&&b".."[..])
        {
            parts.push(comp);
        } else if !parts.is_empty() {
            parts.pop();
        }
    }
    let mut out = vec![b'/'; initial];
    out.extend_from_slice(&parts.join(&b'/'));
    if out.is_empty() {
        b".".to_vec()
    } else {
        out
    }
}

/// Python's `os.path.split(p)[0]` and `[1]`.
pub fn split(p: &[u8]) -> (&[u8], &[u8]) {
    let i = p.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    let (head, tail) = (&p[..i], &p[i..]);
    if !head.is_empty() && head.iter().any(|&b| b != b'/') {
        let end = head.iter().rposition(|&b| b != b'/').map_or(0, |e| e + 1);
        (&head[..end], tail)
    } else {
        (head, tail)
    }
}

pub fn basename(p: &[u8]) -> &[u8] {
    split(p).1
}

/// `util.checkwinfilename`: why hg warns that `path` would not work on Windows, if it would
/// not.
pub fn checkwinfilename(path: &[u8]) -> Option<String> {
    if path.ends_with(b"\\") {
        return Some("filename ends with '\\', which is invalid on Windows".into());
    }
    if path.windows(2).any(|w| w == b"\\/") {
        return Some("directory name ends with '\\', which is invalid on Windows".into());
    }
    const RESERVED: [&str; 22] = [
        "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
        "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
    ];
    let replaced: Vec<u8> = path
        .iter()
        .map(|&b| if b == b'\\' { b'/' } else { b })
        .collect();
    for n in replaced.split(|&b| b == b'/') {
        if n.is_empty() {
            continue;
        }
        for &c in n {
            if b":*?\"<>|".contains(&c) {
                return Some(format!(
                    "filename contains '{}', which is reserved on Windows",
                    c as char
                ));
            }
            if c <= 31 {
                return Some(format!(
                    "filename contains '{}', which is invalid on Windows",
                    escapestr(c)
                ));
            }
        }
        let base = n.split(|&b| b == b'.').next().unwrap_or_default();
        if !base.is_empty()
            && RESERVED
                .iter()
                .any(|r| base.eq_ignore_ascii_case(r.as_bytes()))
        {
            return Some(format!(
                "filename contains '{}', which is reserved on Windows",
                String::from_utf8_lossy(base)
            ));
        }
        if let Some(&t) = n.last() {
            if (t == b'.' || t == b' ') && n != b"." && n != b".." {
                return Some(format!(
                    "filename ends with '{}', which is not allowed on Windows",
                    t as char
                ));
            }
        }
    }
    None
}

/// Python's `codecs.escape_encode` of one control byte.
fn escapestr(c: u8) -> String {
    match c {
        b'\t' => "\\t".into(),
        b'\n' => "\\n".into(),
        b'\r' => "\\r".into(),
        _ => format!("\\x{c:02x}"),
    }
}

/// hg's `procutil.shellquote` (posix), as its hints print file names.
pub fn shellquote(s: &[u8]) -> String {
    let plain = !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"._/+-".contains(&b));
    if plain {
        String::from_utf8_lossy(s).into_owned()
    } else {
        format!("'{}'", String::from_utf8_lossy(s).replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_names_like_hg() {
        assert_eq!(checkwinfilename(b"just/a/normal/path"), None);
        assert_eq!(
            checkwinfilename(b"foo/bar/con.xml").as_deref(),
            Some("filename contains 'con', which is reserved on Windows")
        );
        assert_eq!(checkwinfilename(b"foo/bar/xml.con"), None);
        assert_eq!(
            checkwinfilename(b"foo/bar/AUX/bla.txt").as_deref(),
            Some("filename contains 'AUX', which is reserved on Windows")
        );
        assert_eq!(
            checkwinfilename(b"foo/bar/bla:.txt").as_deref(),
            Some("filename contains ':', which is reserved on Windows")
        );
        assert_eq!(
            checkwinfilename(b"foo/bar/b\x07la.txt").as_deref(),
            Some("filename contains '\\x07', which is invalid on Windows")
        );
        assert_eq!(
            checkwinfilename(b"foo/bar/bla ").as_deref(),
            Some("filename ends with ' ', which is not allowed on Windows")
        );
        assert_eq!(checkwinfilename(b"../bar"), None);
        assert_eq!(shellquote(b"x:y"), "'x:y'");
        assert_eq!(shellquote(b"a/b.c"), "a/b.c");
        assert_eq!(shellquote(b"it's"), "'it'\\''s'");
    }

    #[test]
    fn python_paths() {
        assert_eq!(join(b"d", b"x"), b"d/x");
        assert_eq!(join(b"d/", b"x"), b"d/x");
        assert_eq!(join(b"d", b""), b"d/");
        assert_eq!(split(b"a/b/c"), (&b"a/b"[..], &b"c"[..]));
        assert_eq!(split(b"c"), (&b""[..], &b"c"[..]));
        assert_eq!(normpath(b"/r/./a/../b/"), b"/r/b");
    }
}
