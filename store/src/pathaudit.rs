//! Checks that a path read from a manifest is safe to use as a relative path inside a
//! working copy: no escape from the root, no `.hg`, no empty or dot components, no control
//! characters that hg itself refuses in file names.

use std::fmt;

/// Why a repository path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsafePath {
    Empty,
    Absolute,
    EmptyComponent,
    DotComponent,
    InsideDotHg,
    ControlCharacter,
}

impl fmt::Display for UnsafePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UnsafePath::Empty => "empty path",
            UnsafePath::Absolute => "absolute path",
            UnsafePath::EmptyComponent => "empty path component",
            UnsafePath::DotComponent => "'.' or '..' path component",
            UnsafePath::InsideDotHg => "path inside .hg",
            UnsafePath::ControlCharacter => "newline, carriage return or NUL in path",
        })
    }
}

/// Accepts `path` only if it is a plain relative path below the working-copy root.
pub fn audit(path: &[u8]) -> Result<(), UnsafePath> {
    if path.is_empty() {
        return Err(UnsafePath::Empty);
    }
    if path[0] == b'/' {
        return Err(UnsafePath::Absolute);
    }
    if path.iter().any(|&b| matches!(b, b'\n' | b'\r' | 0)) {
        return Err(UnsafePath::ControlCharacter);
    }
    for component in path.split(|&b| b == b'/') {
        match component {
            b"" => return Err(UnsafePath::EmptyComponent),
            b"." | b".." => return Err(UnsafePath::DotComponent),
            c if c.eq_ignore_ascii_case(b".hg") => return Err(UnsafePath::InsideDotHg),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_paths_are_refused() {
        for (p, why) in [
            (&b""[..], UnsafePath::Empty),
            (b"/etc/passwd", UnsafePath::Absolute),
            (b"../escape", UnsafePath::DotComponent),
            (b"a/../../b", UnsafePath::DotComponent),
            (b"a/./b", UnsafePath::DotComponent),
            (b".hg/hgrc", UnsafePath::InsideDotHg),
            (b"sub/.HG/x", UnsafePath::InsideDotHg),
            (b"a//b", UnsafePath::EmptyComponent),
            (b"a/", UnsafePath::EmptyComponent),
            (b"new\nline", UnsafePath::ControlCharacter),
        ] {
            assert_eq!(audit(p), Err(why), "{:?}", String::from_utf8_lossy(p));
        }
    }

    #[test]
    fn ordinary_paths_pass() {
        for p in [
            &b"a"[..],
            b".hgtags",
            b".hgignore",
            b"dir/.hidden",
            b"x.hg/y",
            b"..a/b..",
            b"\xc3\xa9",
        ] {
            assert_eq!(audit(p), Ok(()), "{:?}", String::from_utf8_lossy(p));
        }
    }
}
