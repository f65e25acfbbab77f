//! Python's `os.path` on bytes, as hg uses it for the paths in its configuration files.

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
