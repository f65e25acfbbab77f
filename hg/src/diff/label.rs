//! Colour labels of diff text, as hg's `patch.difflabel` gives them.

/// hg's `patch.difflabel` with default options (no word diff): cuts diff text into
/// `(text, label)` tokens as hg labels them for colour. File headers (from a line that is
/// not part of a hunk up to the next `@` line) get `diff.diffline`, `diff.extended`,
/// `diff.file_a` or `diff.file_b` by their first word; `@@` lines `diff.hunk`; `-`/`+`
/// lines `diff.deleted`/`diff.inserted`, with runs of tabs as `diff.tab` and trailing
/// whitespace as `diff.trailingwhitespace`. Feed it the diff in order (the header state
/// carries over from one call to the next); every call must end at a line end.
#[derive(Debug, Default)]
pub struct DiffLabeler {
    head: bool,
}

const HEAD_PREFIXES: &[(&[u8], &str)] = &[
    (b"diff", "diff.diffline"),
    (b"copy", "diff.extended"),
    (b"rename", "diff.extended"),
    (b"old", "diff.extended"),
    (b"new", "diff.extended"),
    (b"deleted", "diff.extended"),
    (b"index", "diff.extended"),
    (b"similarity", "diff.extended"),
    (b"---", "diff.file_a"),
    (b"+++", "diff.file_b"),
];
const TEXT_PREFIXES: &[(&[u8], &str)] = &[(b"@", "diff.hunk")];

/// Python's `bytes.rstrip()`: ASCII whitespace (space, `\t`, `\n`, `\r`, `\v`, `\f`).
fn rstrip(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .map_or(0, |i| i + 1);
    &s[..n]
}

impl DiffLabeler {
    pub fn new() -> DiffLabeler {
        DiffLabeler::default()
    }

    /// Calls `emit(text, label)` for each token of `chunk` (label `""`: unlabelled).
    pub fn label(&mut self, chunk: &[u8], mut emit: impl FnMut(&[u8], &str)) {
        let lines: Vec<&[u8]> = chunk.split(|&b| b == b'\n').collect();
        let count = lines.len();
        let mut pos = 0;
        for (i, &line) in lines.iter().enumerate() {
            let last = i + 1 == count;
            let start = pos;
            pos += line.len() + 1;
            if self.head {
                if line.starts_with(b"@") {
                    self.head = false;
                }
            } else if !line.is_empty() && !matches!(line[0], b' ' | b'+' | b'-' | b'@' | b'\\') {
                self.head = true;
            }
            if !self.head && matches!(line.first(), Some(b'+' | b'-')) {
                // diffsinglehunk, on the line with its newline.
                let full = &chunk[start..start + line.len() + usize::from(!last)];
                let chomp_len = full
                    .iter()
                    .rposition(|b| !matches!(b, b'\r' | b'\n'))
                    .map_or(0, |i| i + 1);
                let chomp = &full[..chomp_len];
                let strip = rstrip(chomp);
                let label = if full[0] == b'-' {
                    "diff.deleted"
                } else {
                    "diff.inserted"
                };
                let mut rest = strip;
                while !rest.is_empty() {
                    let tab = rest[0] == b'\t';
                    let n = rest
                        .iter()
                        .position(|&b| (b == b'\t') != tab)
                        .unwrap_or(rest.len());
                    emit(&rest[..n], if tab { "diff.tab" } else { label });
                    rest = &rest[n..];
                }
                if chomp.len() != strip.len() {
                    emit(&chomp[strip.len()..], "diff.trailingwhitespace");
                }
                if full.len() != chomp.len() {
                    emit(&full[chomp.len()..], "");
                }
                continue;
            }
            let strip = rstrip(line);
            let prefixes = if self.head {
                HEAD_PREFIXES
            } else {
                TEXT_PREFIXES
            };
            match prefixes.iter().find(|(p, _)| strip.starts_with(p)) {
                Some((_, label)) => {
                    emit(strip, label);
                    if line.len() != strip.len() {
                        emit(&line[strip.len()..], "diff.trailingwhitespace");
                    }
                }
                None => emit(line, ""),
            }
            if !last {
                emit(b"\n", "");
            }
        }
    }
}
