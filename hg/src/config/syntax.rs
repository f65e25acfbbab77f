//! The line syntax of hg's configuration files: what Mercurial 6.3's `config.parse`
//! matches with seven regular expressions, matched here by hand on bytes.
//!
//! Each function answers what `re.match(pattern, line)` would, with Python's bytes
//! semantics: `\s` is ASCII whitespace (`[ \t\n\r\x0b\x0c]`), `.` anything but `\n`. They
//! replace compiled regexes because compiling them was a tenth of a `revfs status`
//! (docs/BENCHMARKS.md, "Start-up"); the tests hold each one to its regex on random lines.

/// Python's `\s` in a bytes pattern.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `;|#`: a comment.
pub(super) fn comment(l: &[u8]) -> bool {
    matches!(l.first(), Some(b';' | b'#'))
}

/// `;|#|\s*$`: a comment or a blank line.
pub(super) fn empty(l: &[u8]) -> bool {
    comment(l) || l.iter().all(|&b| is_space(b))
}

/// `(\S|\S.*\S)\s*$` from `start` on: the text between the first and the last
/// non-whitespace bytes, if the rest is whitespace and the text holds no newline.
fn trimmed_to_end(l: &[u8], start: usize) -> Option<&[u8]> {
    let rest = l.get(start..)?;
    let first = rest.iter().position(|&b| !is_space(b))?;
    let last = rest.iter().rposition(|&b| !is_space(b))?;
    let text = &rest[first..=last];
    (!text.contains(&b'\n')).then_some(text)
}

/// `\s+(\S|\S.*\S)\s*$`: a continuation line, and its text.
pub(super) fn cont(l: &[u8]) -> Option<&[u8]> {
    if !is_space(*l.first()?) {
        return None;
    }
    trimmed_to_end(l, 0)
}

/// `%include\s+(\S|\S.*\S)\s*$`: an include, and the file it names.
pub(super) fn include(l: &[u8]) -> Option<&[u8]> {
    let rest = l.strip_prefix(b"%include")?;
    if !is_space(*rest.first()?) {
        return None;
    }
    trimmed_to_end(rest, 0)
}

/// `%unset\s+(\S+)`: an unset, and the name it removes.
pub(super) fn unset(l: &[u8]) -> Option<&[u8]> {
    let rest = l.strip_prefix(b"%unset")?;
    let start = rest.iter().position(|&b| !is_space(b))?;
    if start == 0 {
        return None;
    }
    let rest = &rest[start..];
    let end = rest.iter().position(|&b| is_space(b)).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `\[([^\[]+)\]`: a section header, and its name: everything from the `[` to the last `]`
/// before the next `[`.
pub(super) fn section(l: &[u8]) -> Option<&[u8]> {
    let rest = l.strip_prefix(b"[")?;
    let run = rest.iter().position(|&b| b == b'[').unwrap_or(rest.len());
    let close = rest[..run].iter().rposition(|&b| b == b']')?;
    (close > 0).then(|| &rest[..close])
}

/// `([^=\s][^=]*?)\s*=\s*(.*\S|)`: an item, its key (up to the first `=`, trailing
/// whitespace left out) and its value (from the first non-whitespace byte after the `=` to
/// the last one before a newline; empty when there is none).
pub(super) fn item(l: &[u8]) -> Option<(&[u8], &[u8])> {
    let first = *l.first()?;
    if first == b'=' || is_space(first) {
        return None;
    }
    let eq = l.iter().position(|&b| b == b'=')?;
    let key_end = l[..eq].iter().rposition(|&b| !is_space(b))? + 1;
    let after = &l[eq + 1..];
    let Some(start) = after.iter().position(|&b| !is_space(b)) else {
        return Some((&l[..key_end], &[]));
    };
    let line = &after[start..];
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let end = line
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(0, |i| i + 1);
    Some((&l[..key_end], &line[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::bytes::Regex;

    fn re(p: &str) -> Regex {
        Regex::new(&format!("(?-u)^(?:{p})")).unwrap()
    }

    fn group<'a>(r: &Regex, l: &'a [u8], i: usize) -> Option<&'a [u8]> {
        r.captures(l)
            .map(|c| c.get(i).map_or(&b""[..], |g| g.as_bytes()))
    }

    /// Lines of bytes that the syntax cares about, from a small deterministic generator.
    fn lines() -> Vec<Vec<u8>> {
        let atoms: &[&[u8]] = &[
            b" ",
            b"\t",
            b"\n",
            b"\r",
            b"\x0b",
            b"\x0c",
            b"=",
            b"[",
            b"]",
            b";",
            b"#",
            b"%",
            b"%include",
            b"%unset",
            b"a",
            b"bc",
            b"\xff",
            b".",
            b"x y",
        ];
        let mut out = Vec::new();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            let mut l = Vec::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 9) as usize;
            let mut s = seed;
            for _ in 0..n {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                l.extend_from_slice(atoms[((s >> 33) as usize) % atoms.len()]);
            }
            out.push(l);
        }
        for l in [
            &b"[ui]\n"[..],
            b"[a]b]c\n",
            b"[]\n",
            b"[[x]\n",
            b"key = value  \r\n",
            b"key=\n",
            b"k\t= v = w\n",
            b" continued text \n",
            b"%include  ~/x.rc \n",
            b"%unset  name rest\n",
            b"%unsetname\n",
        ] {
            out.push(l.to_vec());
        }
        out
    }

    #[test]
    fn each_matcher_agrees_with_hgs_regex_on_every_line() {
        let (comment_re, empty_re) = (re(r";|#"), re(r";|#|\s*$"));
        let cont_re = re(r"\s+(\S|\S.*\S)\s*$");
        let include_re = re(r"%include\s+(\S|\S.*\S)\s*$");
        let unset_re = re(r"%unset\s+(\S+)");
        let section_re = re(r"\[([^\[]+)\]");
        let item_re = re(r"([^=\s][^=]*?)\s*=\s*(.*\S|)");
        for l in lines() {
            let l = &l[..];
            assert_eq!(comment(l), comment_re.is_match(l), "comment {l:?}");
            assert_eq!(empty(l), empty_re.is_match(l), "empty {l:?}");
            assert_eq!(cont(l), group(&cont_re, l, 1), "cont {l:?}");
            assert_eq!(include(l), group(&include_re, l, 1), "include {l:?}");
            assert_eq!(unset(l), group(&unset_re, l, 1), "unset {l:?}");
            assert_eq!(section(l), group(&section_re, l, 1), "section {l:?}");
            let want = item_re.captures(l).map(|c| {
                (
                    c.get(1).map_or(&b""[..], |g| g.as_bytes()),
                    c.get(2).map_or(&b""[..], |g| g.as_bytes()),
                )
            });
            assert_eq!(item(l), want, "item {l:?}");
        }
    }
}
