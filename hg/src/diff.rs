//! Per-file diff text, byte-identical to Mercurial 6.3.2's `hg diff` and
//! `hg diff --git` (default diff options: 3 lines of context, no `-p`, no
//! whitespace options, dates shown in plain mode, `a/` and `b/` prefixes).
//!
//! The module has three layers:
//!
//! * [`blocks`]: the line matcher.  It reproduces the choices made by
//!   Mercurial's C `bdiff` (`mercurial/bdiff.c`): lines are split after every
//!   `\n`, lines are grouped into equivalence classes, lines that are too
//!   frequent in the new text ("popular" lines) never start a match, the
//!   longest match is searched with the same tie-breaking rules (preferring
//!   matches near the middle of the region), the search on very large
//!   regions is windowed to the last 30000 lines of the old text, the
//!   regions on both sides of the match are processed recursively (left
//!   first), and finally adjacent matches are shifted towards the end of the
//!   file.  A different but equally valid matching would produce a different
//!   diff, so the exact behaviour (including the bookkeeping array that is
//!   shared between searches) is kept.
//! * the unified-diff formatter (Mercurial's `mdiff.unidiff`/`_unidiff`):
//!   hunks with 3 lines of context, hunks whose contexts touch or overlap
//!   are merged, `@@ -s,l +s,l @@` headers always carry both numbers (a
//!   zero-length range reports its start as one less), and the
//!   `\ No newline at end of file` marker.
//! * [`file_diff`]: the per-file headers of `patch.trydiff`/`diffcontent`
//!   (`diff -r <rev> <path>` for plain diffs, `diff --git a/.. b/..`, mode
//!   lines, copy/rename lines, `---`/`+++` lines with dates or `/dev/null`)
//!   and binary-file handling.
//!
//! Unsupported: `hg diff --git` of binary content whose new side is
//! non-empty.  hg prints a `GIT binary patch` made of the zlib-compressed
//! (level 6) new content in base85; reproducing zlib's exact compressed bytes
//! is not implemented, so [`file_diff`] returns
//! [`DiffError::UnsupportedGitBinary`] in that case.  Binary deletions (and
//! binary content replaced by an empty file) are supported, since the
//! compressed form of empty content is a constant.

use std::collections::HashMap;
use std::fmt;

/// One side of a file diff.
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    /// Repository-relative path, `/`-separated, as hg prints it.
    pub path: &'a [u8],
    /// File content; for a symlink, the link target.  `None` means the file
    /// does not exist on this side (added / removed file).
    pub data: Option<&'a [u8]>,
    /// Executable bit (hg flag `x`).  Only used by `--git` diffs.
    pub exec: bool,
    /// Symlink (hg flag `l`).  Only used by `--git` diffs.
    pub symlink: bool,
}

/// Copy information of an added file, used by `--git` diffs only
/// (`copy from`/`copy to` or `rename from`/`rename to` header lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyOp {
    /// The new file is a copy of `old.path`, which still exists.
    Copy,
    /// The new file is a rename of `old.path`, which was removed (only the
    /// first copy of a removed source is a rename; hg then omits the
    /// deletion of the source from the diff).
    Rename,
}

/// Options for [`file_diff`].
#[derive(Clone, Debug, Default)]
pub struct DiffOptions {
    /// `--git`: git extended diff format (no dates, mode lines, copies).
    pub git: bool,
    /// Date printed after `--- a/<path>` in plain diffs: the date of the
    /// working-copy parent changeset, formatted with [`hg_datestr`]
    /// (e.g. `Thu Jan 01 00:00:00 1970 +0000`).  Ignored with `git`.
    pub old_date: String,
    /// Date printed after `+++ b/<path>` in plain diffs.  For the working
    /// copy hg uses the *current* time in the local time zone
    /// (`dateutil.makedate()`, or the `devel.default-date` config), formatted
    /// with [`hg_datestr`].  Ignored with `git`.
    pub new_date: String,
}

/// Reasons why [`file_diff`] cannot produce hg's exact output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiffError {
    /// `--git` diff of binary content with a non-empty new side: hg prints a
    /// zlib-compressed `GIT binary patch`, which is not reproduced.
    UnsupportedGitBinary {
        /// Path of the file (new path if it exists, else old path).
        path: Vec<u8>,
    },
}

impl fmt::Display for DiffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiffError::UnsupportedGitBinary { path } => write!(
                f,
                "{}: git binary patches are not supported",
                String::from_utf8_lossy(path)
            ),
        }
    }
}

impl std::error::Error for DiffError {}

/// Formats an hg date `(unixtime, offset)` like `dateutil.datestr`, e.g.
/// `Thu Jan 01 00:00:00 1970 +0000`.  `offset` is hg's time-zone offset:
/// seconds *west* of UTC (UTC+2 is `-7200`, printed `+0200`).
pub fn hg_datestr(unixtime: i64, offset: i64) -> String {
    let sign = if offset > 0 { '-' } else { '+' };
    let minutes = offset.unsigned_abs() / 60;
    let (q, r) = (minutes / 60, minutes % 60);
    let d = unixtime
        .saturating_sub(offset)
        .clamp(-0x8000_0000, 0x7FFF_FFFF);
    let days = d.div_euclid(86400);
    let secs = d.rem_euclid(86400);
    let (year, month, day) = civil_from_days(days);
    const WDAY: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // 1970-01-01 was a Thursday.
    let wday = WDAY[(days + 4).rem_euclid(7) as usize];
    let mon = MON[(month - 1) as usize];
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} {} {}{:02}{:02}",
        wday,
        mon,
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year,
        sign,
        q,
        r
    )
}

/// Proleptic Gregorian date of a day count relative to 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The diff text hg prints for one file between the working-copy parent and
/// the working copy (or any two revisions, given the right inputs).
///
/// * `old`: the file in the parent (`old.data == None` when the file is
///   added).  For a `--git` copy/rename, `old` is the copy *source* in the
///   parent and `copy` says which operation it is.
/// * `new`: the file in the working copy (`new.data == None` when removed).
/// * `copy`: copy information of an added file; only honoured with `--git`
///   (plain diffs show copies as plain additions: when `copy` is `Some` and
///   `opts.git` is false, `old` is ignored and the file is shown as added).
///   For a rename, the caller must not emit the removal of the source in
///   `--git` mode (hg omits it); in plain mode the removal is shown.
/// * `parent_short`: the parent's node as printed by hg in
///   `diff -r <parent_short> <path>` (12 hex digits; 40 with `--debug`).
/// * `opts`: git mode and the two dates of plain diffs.
///
/// Returns the bytes hg prints for this file (empty when hg prints
/// nothing).  `hg diff` prints the concatenation of these for every
/// modified, added and removed file, in byte order of the (new) path.
pub fn file_diff(
    old: &Side<'_>,
    new: &Side<'_>,
    copy: Option<CopyOp>,
    parent_short: &str,
    opts: &DiffOptions,
) -> Result<Vec<u8>, DiffError> {
    let git = opts.git;
    let old_data = if !git && copy.is_some() {
        None
    } else {
        old.data
    };
    let copy = if git { copy } else { None };
    let has1 = old_data.is_some();
    let has2 = new.data.is_some();
    if !has1 && !has2 {
        return Ok(Vec::new());
    }
    let path1 = if has1 { old.path } else { new.path };
    let path2 = if has2 { new.path } else { old.path };

    let mut header: Vec<Vec<u8>> = Vec::new();
    if git {
        header.push(concat(&[b"diff --git a/", path1, b" b/", path2]));
        if !has1 {
            header.push(concat(&[b"new file mode ", git_mode(new)]));
        } else if !has2 {
            header.push(concat(&[b"deleted file mode ", git_mode(old)]));
        } else {
            let (m1, m2) = (git_mode(old), git_mode(new));
            if m1 != m2 {
                header.push(concat(&[b"old mode ", m1]));
                header.push(concat(&[b"new mode ", m2]));
            }
            if let Some(op) = copy {
                let word: &[u8] = match op {
                    CopyOp::Copy => b"copy",
                    CopyOp::Rename => b"rename",
                };
                header.push(concat(&[word, b" from ", path1]));
                header.push(concat(&[word, b" to ", path2]));
            }
        }
    } else {
        header.push(concat(&[b"diff -r ", parent_short.as_bytes(), b" ", path1]));
    }

    let binary = old_data.is_some_and(is_binary) || new.data.is_some_and(is_binary);
    let text: Vec<u8>;
    if binary && git {
        let to = old_data.unwrap_or(b"");
        let tn = new.data.unwrap_or(b"");
        if to == tn {
            text = Vec::new();
        } else if !tn.is_empty() {
            return Err(DiffError::UnsupportedGitBinary {
                path: path2.to_vec(),
            });
        } else {
            let index1 = match old_data {
                Some(d) => git_blob_id(d),
                None => "0".repeat(40),
            };
            let index2 = match new.data {
                Some(d) => git_blob_id(d),
                None => "0".repeat(40),
            };
            header.push(format!("index {}..{}", index1, index2).into_bytes());
            text = git_binary_literal_empty();
        }
    } else if binary {
        let same = matches!((old_data, new.data), (Some(x), Some(y)) if x == y);
        text = if same {
            Vec::new()
        } else {
            concat(&[b"Binary file ", path1, b" has changed\n"])
        };
    } else {
        let (uheaders, utext) = unidiff(
            old_data,
            &opts.old_date,
            new.data,
            &opts.new_date,
            path1,
            path2,
            git,
        );
        header.extend(uheaders);
        text = utext;
    }

    let mut out = Vec::new();
    if !header.is_empty() && (!text.is_empty() || header.len() > 1) {
        for line in &header {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out.extend_from_slice(&text);
    Ok(out)
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn git_mode(side: &Side<'_>) -> &'static [u8] {
    if side.symlink {
        b"120000"
    } else if side.exec {
        b"100755"
    } else {
        b"100644"
    }
}

/// hg's `stringutil.binary`: non-empty and contains a NUL byte.
fn is_binary(data: &[u8]) -> bool {
    data.contains(&0)
}

const MISSING_NEWLINE_MARKER: &[u8] = b"\\ No newline at end of file\n";
const EPOCH: &str = "Thu Jan 01 00:00:00 1970 +0000";

/// `mdiff.unidiff`: returns the `---`/`+++` header lines (without newline)
/// and the hunk text.  Both are empty when there is no difference.
fn unidiff(
    a: Option<&[u8]>,
    ad: &str,
    b: Option<&[u8]>,
    bd: &str,
    fn1: &[u8],
    fn2: &[u8],
    git: bool,
) -> (Vec<Vec<u8>>, Vec<u8>) {
    let datetag = |date: &str, name: Option<&[u8]>| -> Vec<u8> {
        if !git {
            let mut v = b"\t".to_vec();
            v.extend_from_slice(date.as_bytes());
            v
        } else if name.is_some_and(|n| n.contains(&b' ')) {
            b"\t".to_vec()
        } else {
            Vec::new()
        }
    };
    let a_empty = a.unwrap_or_default().is_empty();
    let b_empty = b.unwrap_or_default().is_empty();
    if a_empty && b_empty {
        return (Vec::new(), Vec::new());
    }
    let minus_named = || [b"--- a/", fn1, &datetag(ad, Some(fn1))[..]].concat();
    let plus_named = || [b"+++ b/", fn2, &datetag(bd, Some(fn2))[..]].concat();

    if a_empty || b_empty {
        // Whole-file addition or deletion (or from/to an empty file).
        let (l1, l2, content, sign) = if a_empty {
            let l1 = match a {
                None => [b"--- /dev/null", &datetag(EPOCH, None)[..]].concat(),
                Some(_) => minus_named(),
            };
            (l1, plus_named(), b.unwrap_or(b""), b'+')
        } else {
            let l2 = match b {
                None => [b"+++ /dev/null", &datetag(EPOCH, None)[..]].concat(),
                Some(_) => plus_named(),
            };
            (minus_named(), l2, a.unwrap_or(b""), b'-')
        };
        let lines = split_lines(content);
        let mut text = if sign == b'+' {
            format!("@@ -0,0 +1,{} @@\n", lines.len()).into_bytes()
        } else {
            format!("@@ -1,{} +0,0 @@\n", lines.len()).into_bytes()
        };
        for line in &lines {
            text.push(sign);
            text.extend_from_slice(line);
        }
        if content.last() != Some(&b'\n') {
            text.push(b'\n');
            text.extend_from_slice(MISSING_NEWLINE_MARKER);
        }
        return (vec![l1, l2], text);
    }

    let (t1, t2) = (a.unwrap_or(b""), b.unwrap_or(b""));
    let text = unified_hunks(t1, t2);
    if text.is_empty() {
        return (Vec::new(), Vec::new());
    }
    (vec![minus_named(), plus_named()], text)
}

/// Python-like slice of a line list (clamped, empty when reversed).
fn lines_slice<'l, 'a>(lines: &'l [&'a [u8]], from: usize, to: usize) -> &'l [&'a [u8]] {
    let to = to.min(lines.len());
    if from >= to {
        &[]
    } else {
        &lines[from..to]
    }
}

/// A hunk being built: old range start/end, new range start/end, and the
/// body lines (each including its `' '`, `-` or `+` prefix).
struct Hunk {
    astart: usize,
    a2: usize,
    bstart: usize,
    b2: usize,
    delta: Vec<Vec<u8>>,
}

const CONTEXT: usize = 3;

/// `mdiff._unidiff` with default options: the hunks of a headerless unified
/// diff of two non-empty texts, concatenated (empty if the texts are equal).
fn unified_hunks(t1: &[u8], t2: &[u8]) -> Vec<u8> {
    let l1 = split_lines(t1);
    let l2 = split_lines(t2);
    let matches = bdiff_lines(&l1, &l2);
    let mut out = Vec::new();
    let mut hunk: Option<Hunk> = None;
    let mut prev = (0usize, 0usize, 0usize, 0usize);
    for &m in &matches {
        // The gap between the previous match and this one.
        let (a1, a2, b1, b2) = (prev.1, m.0, prev.3, m.2);
        prev = m;
        if a1 == a2 && b1 == b2 {
            continue;
        }
        let mut astart = a1.saturating_sub(CONTEXT);
        let mut bstart = b1.saturating_sub(CONTEXT);
        let mut joined = false;
        if let Some(h) = &hunk {
            if astart < h.a2 + CONTEXT + 1 {
                joined = true;
                astart = h.a2;
                bstart = h.b2;
            } else {
                emit_hunk(&mut out, h, &l1, &l2, t1, t2);
            }
        }
        let h = match (&mut hunk, joined) {
            (Some(h), true) => {
                h.a2 = a2;
                h.b2 = b2;
                h
            }
            (slot, _) => slot.insert(Hunk {
                astart,
                a2,
                bstart,
                b2,
                delta: Vec::new(),
            }),
        };
        for line in lines_slice(&l1, astart, a1) {
            h.delta.push([b" ", *line].concat());
        }
        for line in lines_slice(&l1, a1, a2) {
            h.delta.push([b"-", *line].concat());
        }
        for line in lines_slice(&l2, b1, b2) {
            h.delta.push([b"+", *line].concat());
        }
    }
    if let Some(h) = &hunk {
        emit_hunk(&mut out, h, &l1, &l2, t1, t2);
    }
    out
}

/// `yieldhunk` of `mdiff._unidiff`: header, body, trailing context and the
/// missing-newline markers.
fn emit_hunk(out: &mut Vec<u8>, h: &Hunk, l1: &[&[u8]], l2: &[&[u8]], t1: &[u8], t2: &[u8]) {
    let aend = (h.a2 + CONTEXT).min(l1.len());
    let alen = aend.saturating_sub(h.astart);
    let blen = (h.b2 + aend).saturating_sub(h.bstart + h.a2);
    let astart = if alen > 0 { h.astart + 1 } else { h.astart };
    let bstart = if blen > 0 { h.bstart + 1 } else { h.bstart };

    let mut lines: Vec<Vec<u8>> = Vec::with_capacity(h.delta.len() + 1 + CONTEXT);
    lines.push(format!("@@ -{},{} +{},{} @@\n", astart, alen, bstart, blen).into_bytes());
    lines.extend(h.delta.iter().cloned());
    for line in lines_slice(l1, h.a2, aend) {
        lines.push([b" ", *line].concat());
    }

    let mut skip = false;
    if t1.last() != Some(&b'\n') && astart + alen == l1.len() + 1 {
        if let Some(i) = lines
            .iter()
            .rposition(|l| l.first() == Some(&b'-') || l.first() == Some(&b' '))
        {
            if lines[i].first() == Some(&b' ') {
                skip = true;
            }
            lines[i].push(b'\n');
            lines.insert(i + 1, MISSING_NEWLINE_MARKER.to_vec());
        }
    }
    if !skip && t2.last() != Some(&b'\n') && bstart + blen == l2.len() + 1 {
        if let Some(i) = lines.iter().rposition(|l| l.first() == Some(&b'+')) {
            lines[i].push(b'\n');
            lines.insert(i + 1, MISSING_NEWLINE_MARKER.to_vec());
        }
    }
    for line in lines {
        out.extend_from_slice(&line);
    }
}

/// Splits after every `\n`; a final line without newline is kept; an empty
/// text has no lines (bdiff's `splitnewlines`).
fn split_lines(text: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, &c) in text.iter().enumerate() {
        if c == b'\n' {
            lines.push(&text[start..=i]);
            start = i + 1;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// bdiff's matching blocks between two texts, as `(a_start, a_end, b_start,
/// b_end)` line ranges, identical to mercurial's `bdiff.blocks()` (the last
/// entry is always the empty block `(len_a, len_a, len_b, len_b)`).
#[cfg_attr(not(test), allow(dead_code))]
pub fn blocks(a: &[u8], b: &[u8]) -> Vec<(usize, usize, usize, usize)> {
    bdiff_lines(&split_lines(a), &split_lines(b))
}

/// Line tables of the matcher.  `a_e`/`b_e` are equivalence classes (equal
/// lines have equal classes; an old line absent from the new text gets
/// `NO_CLASS`).  `b_next[j]` is the previous line of `b` with the class of
/// `b[j]` (or -1); `a_first[i]` is the last line of `b` equal to `a[i]`, or
/// -1 when there is none or that class is too popular.
struct Matcher {
    a_e: Vec<usize>,
    a_first: Vec<isize>,
    b_e: Vec<usize>,
    b_next: Vec<isize>,
    /// Per line of `b`: the line of `a` and the length of the match found
    /// ending there by the latest search that visited it.  Shared by all
    /// searches, as in bdiff (stale entries influence later searches).
    pos: Vec<(isize, isize)>,
}

const NO_CLASS: usize = usize::MAX;

impl Matcher {
    fn new(a: &[&[u8]], b: &[&[u8]]) -> Matcher {
        let bn = b.len();
        let mut classes: HashMap<&[u8], usize> = HashMap::with_capacity(bn);
        let mut last: Vec<isize> = Vec::new();
        let mut count: Vec<usize> = Vec::new();
        let mut b_e = Vec::with_capacity(bn);
        let mut b_next = Vec::with_capacity(bn);
        for (j, line) in b.iter().enumerate() {
            let c = *classes.entry(*line).or_insert_with(|| {
                last.push(-1);
                count.push(0);
                last.len() - 1
            });
            b_e.push(c);
            b_next.push(last[c]);
            last[c] = j as isize;
            count[c] += 1;
        }
        // Popularity threshold.
        let t = if bn >= 31000 {
            bn / 1000
        } else {
            1_000_000 / (bn + 1)
        };
        let mut a_e = Vec::with_capacity(a.len());
        let mut a_first = Vec::with_capacity(a.len());
        for line in a {
            match classes.get(*line) {
                Some(&c) => {
                    a_e.push(c);
                    a_first.push(if count[c] <= t { last[c] } else { -1 });
                }
                None => {
                    a_e.push(NO_CLASS);
                    a_first.push(-1);
                }
            }
        }
        Matcher {
            a_e,
            a_first,
            b_e,
            b_next,
            pos: vec![(0, 0); bn.max(1)],
        }
    }

    #[inline]
    fn same(&self, i: isize, j: isize) -> bool {
        self.a_e[i as usize] == self.b_e[j as usize]
    }

    /// bdiff's `longest_match` on the region `a[a1..a2]` x `b[b1..b2]`:
    /// returns `(i, j, k)`, the match `a[i..i+k] == b[j..j+k]` (`k == 0`: none).
    fn longest_match(
        &mut self,
        a1: isize,
        a2: isize,
        b1: isize,
        b2: isize,
    ) -> (isize, isize, isize) {
        let (mut mi, mut mj, mut mk) = (a1, b1, 0isize);
        // Window the search on large regions (at the end of the region).
        let a1 = if a2 - a1 > 30000 { a2 - 30000 } else { a1 };
        // Rust's `/` truncates toward zero like C's.
        let half = (a1 + a2 - 1) / 2;
        let bhalf = (b1 + b2 - 1) / 2;

        for i in a1..a2 {
            let mut j = self.a_first[i as usize];
            while j >= b2 {
                j = self.b_next[j as usize];
            }
            while j >= b1 {
                // Length of the run of equal lines ending at (i, j).
                let mut k: isize = 1;
                while j - k >= b1 && i - k >= a1 {
                    let (p, plen) = self.pos[(j - k) as usize];
                    if p == i - k {
                        k += plen;
                        break;
                    }
                    if !self.same(i - k, j - k) {
                        break;
                    }
                    k += 1;
                }
                self.pos[j as usize] = (i, k);

                if k > mk {
                    mi = i;
                    mj = j;
                    mk = k;
                } else if k == mk {
                    if i > mi && i <= half && j > b1 {
                        mi = i;
                        mj = j;
                    } else if i == mi && (mj > bhalf || i == a1) {
                        mj = j;
                    }
                }
                j = self.b_next[j as usize];
            }
        }

        if mk > 0 {
            mi = mi - mk + 1;
            mj = mj - mk + 1;
        }
        // Extend the match over following (possibly popular) equal lines.
        while mi + mk < a2 && mj + mk < b2 && self.same(mi + mk, mj + mk) {
            mk += 1;
        }
        (mi, mj, mk)
    }
}

/// The matching blocks of two line lists (bdiff's `bdiff_diff`).
fn bdiff_lines(a: &[&[u8]], b: &[&[u8]]) -> Vec<(usize, usize, usize, usize)> {
    let an = a.len() as isize;
    let bn = b.len() as isize;
    let mut m = Matcher::new(a, b);

    enum Task {
        Region(isize, isize, isize, isize),
        Emit(isize, isize, isize),
    }
    // bdiff's `recurse` is recursive on the left part of each region and
    // iterative on the right part; this explicit stack visits the regions
    // (and thus runs the searches, which share state) in the same order.
    let mut found: Vec<[isize; 4]> = Vec::new();
    let mut stack = vec![Task::Region(0, an, 0, bn)];
    while let Some(task) = stack.pop() {
        match task {
            Task::Region(a1, a2, b1, b2) => {
                let (i, j, k) = m.longest_match(a1, a2, b1, b2);
                if k == 0 {
                    continue;
                }
                stack.push(Task::Region(i + k, a2, j + k, b2));
                stack.push(Task::Emit(i, j, k));
                stack.push(Task::Region(a1, i, b1, j));
            }
            Task::Emit(i, j, k) => found.push([i, i + k, j, j + k]),
        }
    }
    found.push([an, an, bn, bn]);

    // Shift each match as far towards the end as possible when it touches
    // the next one.
    for idx in 0..found.len().saturating_sub(1) {
        let next = found[idx + 1];
        let mut cur = found[idx];
        let mut nx = next;
        if cur[1] == nx[0] || cur[3] == nx[2] {
            while cur[1] < an
                && cur[3] < bn
                && nx[0] < nx[1]
                && nx[2] < nx[3]
                && m.same(cur[1], cur[3])
            {
                cur[1] += 1;
                nx[0] += 1;
                cur[3] += 1;
                nx[2] += 1;
            }
        }
        found[idx] = cur;
        found[idx + 1] = nx;
    }

    found
        .into_iter()
        .map(|[a1, a2, b1, b2]| (a1 as usize, a2 as usize, b1 as usize, b2 as usize))
        .collect()
}

/// Git blob id (`sha1("blob <len>\0" + data)`) in hex.
fn git_blob_id(data: &[u8]) -> String {
    let mut msg = format!("blob {}\0", data.len()).into_bytes();
    msg.extend_from_slice(data);
    sha1(&msg).iter().map(|b| format!("{:02x}", b)).collect()
}

/// `mdiff.b85diff` for an empty new side: `zlib.compress(b"")` is constant.
fn git_binary_literal_empty() -> Vec<u8> {
    const ZLIB_EMPTY: [u8; 8] = [0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01];
    let mut out = b"GIT binary patch\nliteral 0\n".to_vec();
    for chunk in ZLIB_EMPTY.chunks(52) {
        let len = chunk.len();
        out.push(if len <= 26 {
            b'A' + len as u8 - 1
        } else {
            b'a' + (len - 26) as u8 - 1
        });
        out.extend_from_slice(&b85encode_padded(chunk));
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

/// hg's base85 (git alphabet), input padded with zeros to 4 bytes.
fn b85encode_padded(data: &[u8]) -> Vec<u8> {
    const CHARS: &[u8; 85] =
        b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";
    let mut out = Vec::with_capacity(data.len().div_ceil(4) * 5);
    for chunk in data.chunks(4) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut w = u32::from_be_bytes(word);
        let mut enc = [0u8; 5];
        for slot in enc.iter_mut().rev() {
            *slot = CHARS[(w % 85) as usize];
            w /= 85;
        }
        out.extend_from_slice(&enc);
    }
    out
}

/// SHA-1 digest (only used for git `index` lines of binary diffs).
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (t, word) in block.chunks_exact(4).enumerate() {
            w[t] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for t in 16..80 {
            w[t] = (w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (t, &wt) in w.iter().enumerate() {
            let (f, k) = match t {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let tmp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wt);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = tmp;
        }
        for (hv, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *hv = hv.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (i, v) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap, HashSet};
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Debian's python3, which can import the system mercurial package.
    const PYTHON: &str = "/usr/bin/python3";

    /// True when `hg` and a python3 with mercurial are available; otherwise
    /// prints SKIPPED (or fails when `CI` is set).
    fn oracle_available() -> bool {
        let py = Command::new(PYTHON)
            .args(["-c", "import mercurial.mdiff"])
            .output();
        let hg = Command::new("hg")
            .arg("--version")
            .env("HGRCPATH", "")
            .env("HGPLAIN", "1")
            .output();
        let ok = matches!(&py, Ok(o) if o.status.success())
            && matches!(&hg, Ok(o) if o.status.success());
        if !ok {
            if std::env::var_os("CI").is_some() {
                panic!("hg or {PYTHON} with mercurial is missing (CI is set)");
            }
            println!("SKIPPED: hg or {PYTHON} with mercurial is not available");
        }
        ok
    }

    fn run_python(script: &str, input: Vec<u8>) -> Vec<u8> {
        let mut child = Command::new(PYTHON)
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(out.status.success(), "python oracle failed");
        out.stdout
    }

    fn hex(data: &[u8]) -> String {
        data.iter().map(|b| format!("{:02x}", b)).collect()
    }

    fn unhex(s: &[u8]) -> Vec<u8> {
        s.chunks(2)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect()
    }

    /// splitmix64
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            if n == 0 {
                0
            } else {
                (self.next() % n as u64) as usize
            }
        }
        fn pct(&mut self, p: usize) -> bool {
            self.below(100) < p
        }
    }

    const POOLS: &[&[&[u8]]] = &[
        &[b"a\n", b"b\n", b"c\n"],
        &[b"\n", b"x\n", b" \n", b"x\r\n", b"}\n", b"{\n"],
        &[
            b"alpha\n", b"beta\n", b"gamma\n", b"delta\n", b"eps\n", b"zeta\n", b"eta\n",
            b"theta\n", b"iota\n", b"kappa\n", b"\n", b"}\n",
        ],
        &[
            b"a\n",
            b"a\r\n",
            b"a",
            b"\xff\xfe\n",
            b"\x00\n",
            b"\r\n",
            b"\n",
        ],
        &[b"same\n"],
    ];

    fn gen_lines(rng: &mut Rng, pool: &[&[u8]], n: usize, uniq: &mut usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|_| {
                if rng.pct(8) {
                    *uniq += 1;
                    format!("unique {}\n", uniq).into_bytes()
                } else {
                    pool[rng.below(pool.len())].to_vec()
                }
            })
            .collect()
    }

    fn mutate(
        rng: &mut Rng,
        lines: &[Vec<u8>],
        pool: &[&[u8]],
        ops: usize,
        maxrun: usize,
        uniq: &mut usize,
    ) -> Vec<Vec<u8>> {
        let mut v = lines.to_vec();
        for _ in 0..ops {
            let len = v.len();
            match rng.below(6) {
                0 if len > 0 => {
                    let s = rng.below(len);
                    let e = (s + 1 + rng.below(maxrun)).min(len);
                    v.drain(s..e);
                }
                1 => {
                    let at = rng.below(len + 1);
                    let n = 1 + rng.below(maxrun);
                    let ins = gen_lines(rng, pool, n, uniq);
                    v.splice(at..at, ins);
                }
                2 if len > 1 => {
                    let s = rng.below(len);
                    let e = (s + 1 + rng.below(maxrun)).min(len);
                    let block: Vec<_> = v.drain(s..e).collect();
                    let at = rng.below(v.len() + 1);
                    v.splice(at..at, block);
                }
                3 if len > 0 => {
                    let s = rng.below(len);
                    let e = (s + 1 + rng.below(maxrun)).min(len);
                    let block: Vec<_> = v[s..e].to_vec();
                    let at = rng.below(len + 1);
                    v.splice(at..at, block);
                }
                4 if len > 0 => {
                    let i = rng.below(len);
                    v[i] = pool[rng.below(pool.len())].to_vec();
                }
                _ => {
                    let at = rng.below(len + 1);
                    *uniq += 1;
                    v.insert(at, format!("fresh {}\n", uniq).into_bytes());
                }
            }
        }
        v
    }

    fn finish(rng: &mut Rng, lines: &[Vec<u8>]) -> Vec<u8> {
        let mut t = lines.concat();
        if rng.pct(15) && t.last() == Some(&b'\n') {
            t.pop();
        } else if rng.pct(8) {
            t.extend_from_slice(b"tail");
        }
        t
    }

    /// Random pairs of texts with many equal lines and ties.
    fn random_pairs(seed: u64, count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut rng = Rng(seed);
        let mut uniq = 0;
        let mut pairs = Vec::new();
        for _ in 0..count {
            let pool = POOLS[rng.below(POOLS.len())];
            let n = match rng.below(4) {
                0 => rng.below(4),
                1 | 2 => rng.below(25),
                _ => rng.below(120),
            };
            let a = gen_lines(&mut rng, pool, n, &mut uniq);
            let kind = rng.below(10);
            let b = if kind < 7 {
                let ops = rng.below(6);
                mutate(&mut rng, &a, pool, ops, 6, &mut uniq)
            } else if kind < 9 {
                let m = rng.below(n + 5);
                gen_lines(&mut rng, pool, m, &mut uniq)
            } else {
                match rng.below(3) {
                    0 => Vec::new(),
                    1 => a.clone(),
                    _ => {
                        // Long identical runs around a small change.
                        let mut v = a.clone();
                        v.extend(vec![b"run\n".to_vec(); 40]);
                        v.push(b"changed\n".to_vec());
                        v
                    }
                }
            };
            let (ta, tb) = (finish(&mut rng, &a), finish(&mut rng, &b));
            let ta = if rng.pct(3) { Vec::new() } else { ta };
            if rng.pct(50) {
                pairs.push((ta, tb));
            } else {
                pairs.push((tb, ta));
            }
        }
        pairs
    }

    /// Larger texts: popular lines (popularity threshold), and > 31000
    /// lines (other threshold, 30000-line search window).
    fn large_pairs(seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut rng = Rng(seed);
        let mut uniq = 0;
        let mut pairs = Vec::new();
        for case in 0..12 {
            let pool = POOLS[case % 4];
            let n = 1500 + rng.below(2500);
            let a = gen_lines(&mut rng, pool, n, &mut uniq);
            let ops = 5 + rng.below(20);
            let b = mutate(&mut rng, &a, pool, ops, 30, &mut uniq);
            pairs.push((finish(&mut rng, &a), finish(&mut rng, &b)));
        }
        for case in 0..3 {
            let n = 33000 + rng.below(4000);
            let a: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    if i % 3 == 0 {
                        POOLS[2][rng.below(POOLS[2].len())].to_vec()
                    } else {
                        format!("line {}\n", i / (1 + case)).into_bytes()
                    }
                })
                .collect();
            let b = mutate(&mut rng, &a, POOLS[2], 10, 50, &mut uniq);
            pairs.push((finish(&mut rng, &a), finish(&mut rng, &b)));
        }
        // The longest match lies before the last 30000 lines of the old
        // text: the search window decides which match is taken.
        let x: Vec<u8> = (0..5000)
            .flat_map(|i| format!("x{i}\n").into_bytes())
            .collect();
        let y: Vec<String> = (0..30000).map(|i| format!("y{i}\n")).collect();
        let y_edited: Vec<u8> = y
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i % 10 == 5 {
                    format!("e{i}\n")
                } else {
                    l.clone()
                }
            })
            .collect::<String>()
            .into_bytes();
        let y: Vec<u8> = y.concat().into_bytes();
        pairs.push(([&x[..], &y[..]].concat(), [&y_edited[..], &x[..]].concat()));
        // Only popular lines.
        let blank = b"\n".repeat(100_000);
        let mut blank2 = blank.clone();
        blank2.splice(50_000..50_000, b"x\n".iter().copied());
        pairs.push((blank, blank2));
        pairs
    }

    const BLOCKS_SCRIPT: &str = r#"
import sys, binascii
from mercurial import policy
bdiff = policy.importmod('bdiff')
assert bdiff.__name__ == 'mercurial.cext.bdiff', bdiff.__name__
out = []
for line in sys.stdin.buffer:
    x, y = line.strip().split(b',')
    r = bdiff.blocks(binascii.unhexlify(x), binascii.unhexlify(y))
    out.append(';'.join('%d %d %d %d' % t for t in r))
sys.stdout.write('\n'.join(out) + '\n')
"#;

    #[test]
    fn blocks_match_mercurial_bdiff() {
        if !oracle_available() {
            return;
        }
        let mut pairs = random_pairs(0x5EED_0001, 3000);
        pairs.extend(large_pairs(0x5EED_0002));
        let mut input = Vec::new();
        for (a, b) in &pairs {
            input.extend_from_slice(format!("{},{}\n", hex(a), hex(b)).as_bytes());
        }
        let out = run_python(BLOCKS_SCRIPT, input);
        let lines: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
        assert!(lines.len() > pairs.len());
        for (idx, (a, b)) in pairs.iter().enumerate() {
            let ours = blocks(a, b)
                .iter()
                .map(|t| format!("{} {} {} {}", t.0, t.1, t.2, t.3))
                .collect::<Vec<_>>()
                .join(";");
            assert_eq!(
                ours,
                String::from_utf8_lossy(lines[idx]),
                "pair {idx}: a={:?} b={:?}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
    }

    const UNIDIFF_SCRIPT: &str = r#"
import sys, binascii
from mercurial import mdiff
plain = mdiff.diffopts()
git = mdiff.diffopts(git=True)
out = []
for line in sys.stdin.buffer:
    x, y = line.strip().split(b',')
    a, b = binascii.unhexlify(x), binascii.unhexlify(y)
    for opts in (plain, git):
        hdr, hunks = mdiff.unidiff(a, b'Thu Jan 01 00:00:00 1970 +0000', b,
                                   b'Mon Feb 03 04:05:06 2020 -0130',
                                   b'old name', b'new', False, opts)
        text = b''.join(h + b'\n' for h in hdr)
        text += b''.join(b''.join(hl) for hr, hl in hunks)
        out.append(binascii.hexlify(text))
sys.stdout.buffer.write(b'\n'.join(out) + b'\n')
"#;

    #[test]
    fn unidiff_matches_mercurial_mdiff() {
        if !oracle_available() {
            return;
        }
        let pairs = random_pairs(0x5EED_0003, 3000);
        let mut input = Vec::new();
        for (a, b) in &pairs {
            input.extend_from_slice(format!("{},{}\n", hex(a), hex(b)).as_bytes());
        }
        let out = run_python(UNIDIFF_SCRIPT, input);
        let lines: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
        for (idx, (a, b)) in pairs.iter().enumerate() {
            for (k, git) in [false, true].into_iter().enumerate() {
                let (hdr, text) = unidiff(
                    Some(a),
                    "Thu Jan 01 00:00:00 1970 +0000",
                    Some(b),
                    "Mon Feb 03 04:05:06 2020 -0130",
                    b"old name",
                    b"new",
                    git,
                );
                let mut ours = Vec::new();
                for h in hdr {
                    ours.extend_from_slice(&h);
                    ours.push(b'\n');
                }
                ours.extend_from_slice(&text);
                let theirs = unhex(lines[idx * 2 + k]);
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&theirs),
                    "pair {idx} git={git}: a={:?} b={:?}",
                    String::from_utf8_lossy(a),
                    String::from_utf8_lossy(b)
                );
                assert_eq!(ours, theirs);
            }
        }
    }

    #[test]
    fn datestr_matches_examples() {
        assert_eq!(hg_datestr(0, 0), "Thu Jan 01 00:00:00 1970 +0000");
        assert_eq!(hg_datestr(42, 0), "Thu Jan 01 00:00:42 1970 +0000");
        assert_eq!(hg_datestr(-42, 0), "Wed Dec 31 23:59:18 1969 +0000");
        assert_eq!(hg_datestr(0x7fff_ffff, 0), "Tue Jan 19 03:14:07 2038 +0000");
        assert_eq!(
            hg_datestr(-0x8000_0000, 0),
            "Fri Dec 13 20:45:52 1901 +0000"
        );
        assert_eq!(
            hg_datestr(1_500_000_000, -7200),
            "Fri Jul 14 04:40:00 2017 +0200"
        );
        assert_eq!(
            hg_datestr(1_600_000_000, 19800),
            "Sun Sep 13 06:56:40 2020 -0530"
        );
    }

    #[test]
    fn sha1_known_values() {
        assert_eq!(git_blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        let digest: String = sha1(b"abc").iter().map(|b| format!("{:02x}", b)).collect();
        assert_eq!(digest, "a9993e364706816aba3e25717850c26c9cd0d89d");
    }

    #[test]
    fn large_inputs_are_fast() {
        let mut rng = Rng(7);
        let a: Vec<Vec<u8>> = (0..100_000)
            .map(|i| format!("line {}\n", i % 60_000).into_bytes())
            .collect();
        let mut uniq = 0;
        let b = mutate(&mut rng, &a, POOLS[2], 300, 20, &mut uniq);
        let blank: Vec<u8> = b"\n".repeat(100_000);
        let mut blank2 = blank.clone();
        blank2.splice(50_000..50_000, b"x\n".iter().copied());
        let cases = [(a.concat(), b.concat()), (blank, blank2)];
        let limit = if cfg!(debug_assertions) { 10 } else { 1 };
        for (x, y) in &cases {
            let start = Instant::now();
            let bl = blocks(x, y);
            let old = DiffOptions::default();
            let side = |d: &'_ [u8]| -> Vec<u8> {
                let s1 = Side {
                    path: b"f",
                    data: Some(x),
                    exec: false,
                    symlink: false,
                };
                let s2 = Side {
                    path: b"f",
                    data: Some(d),
                    exec: false,
                    symlink: false,
                };
                file_diff(&s1, &s2, None, "000000000000", &old).unwrap()
            };
            let text = side(y);
            let elapsed = start.elapsed();
            println!(
                "100k lines: {} blocks, {} bytes, {:?}",
                bl.len(),
                text.len(),
                elapsed
            );
            assert!(
                elapsed < Duration::from_secs(limit),
                "too slow: {elapsed:?}"
            );
        }
    }

    // ----- whole-output oracle against a real hg repository -----

    #[derive(Clone)]
    enum Content {
        File(Vec<u8>, bool),
        Link(&'static str),
    }

    fn file(data: &[u8]) -> Option<Content> {
        Some(Content::File(data.to_vec(), false))
    }

    fn exec_file(data: &[u8]) -> Option<Content> {
        Some(Content::File(data.to_vec(), true))
    }

    fn numbered(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    fn edited(n: usize, edits: &[(usize, &str)]) -> Vec<u8> {
        let mut v = numbered(n);
        for &(i, s) in edits {
            v[i] = s.to_string();
        }
        v.concat().into_bytes()
    }

    fn write_content(root: &Path, name: &str, c: &Content) {
        let p = root.join(name);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        if std::fs::symlink_metadata(&p).is_ok() {
            std::fs::remove_file(&p).unwrap();
        }
        match c {
            Content::File(data, exec) => {
                std::fs::write(&p, data).unwrap();
                let mode = if *exec { 0o755 } else { 0o644 };
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            Content::Link(target) => std::os::unix::fs::symlink(target, &p).unwrap(),
        }
    }

    fn hg(repo: &Path, args: &[&str]) -> Vec<u8> {
        let out = Command::new("hg")
            .args(args)
            .current_dir(repo)
            .env("HGPLAIN", "1")
            .env("HGRCPATH", "")
            .env("HGUSER", "t")
            .env_remove("HGENCODING")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    struct TempDir(PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Old and new content of every file of the test repository.
    fn repo_spec() -> Vec<(&'static str, Option<Content>, Option<Content>)> {
        let n20 = numbered(20).concat().into_bytes();
        let n40 = numbered(40).concat().into_bytes();
        let dup_old = b"{\n}\n\n{\n}\n\nx\n{\n}\n\n".repeat(6);
        let mut dup_new = dup_old.clone();
        dup_new.splice(30..30, b"{\n}\n\ny\n".iter().copied());
        let moved_old = numbered(30).concat().into_bytes();
        let mut mv = numbered(30);
        let block: Vec<String> = mv.drain(3..9).collect();
        mv.splice(20..20, block);
        let big_old: Vec<u8> = (0..3000)
            .map(|i| match i % 7 {
                0 => "\n".to_string(),
                1 => "}\n".to_string(),
                2 => "    return x;\n".to_string(),
                _ => format!("stmt {i};\n"),
            })
            .collect::<String>()
            .into_bytes();
        let mut big_new_lines: Vec<Vec<u8>> = big_old
            .split_inclusive(|&c| c == b'\n')
            .map(|l| l.to_vec())
            .collect();
        for (k, at) in [5usize, 400, 401, 1200, 2990].iter().enumerate() {
            big_new_lines.insert(*at, format!("inserted {k}\n").into_bytes());
        }
        big_new_lines.drain(2000..2030);
        big_new_lines.insert(2500, b"}\n".to_vec());
        let big_new = big_new_lines.concat();
        let crlf_old = b"one\r\ntwo\r\nthree\r\nfour\r\n".to_vec();
        let crlf_new = b"one\r\ntwo\ntwo and a half\r\nthree\r\nfour\r\n".to_vec();
        vec![
            (
                "edit_start.txt",
                file(&n20),
                file(&edited(20, &[(0, "first\n")])),
            ),
            (
                "edit_mid.txt",
                file(&n40),
                file(&edited(40, &[(19, "middle\n")])),
            ),
            (
                "edit_end.txt",
                file(&n20),
                file(&edited(20, &[(19, "last\n")])),
            ),
            (
                "two_hunks.txt",
                file(&n40),
                file(&edited(40, &[(4, "x\n"), (30, "y\n")])),
            ),
            (
                "gap6.txt",
                file(&n40),
                file(&edited(40, &[(9, "x\n"), (16, "y\n")])),
            ),
            (
                "gap7.txt",
                file(&n40),
                file(&edited(40, &[(9, "x\n"), (17, "y\n")])),
            ),
            ("noeol_old.txt", file(b"a\nb\nc"), file(b"a\nb\nc\n")),
            ("noeol_new.txt", file(b"a\nb\nc\n"), file(b"a\nb\nc")),
            (
                "noeol_both_far.txt",
                file(&[&n20[..], b"end"].concat()),
                file(&[&edited(20, &[(2, "x\n")])[..], b"end"].concat()),
            ),
            (
                "noeol_both_near.txt",
                file(&[&n20[..], b"end"].concat()),
                file(&[&edited(20, &[(18, "x\n")])[..], b"end"].concat()),
            ),
            (
                "noeol_both_last.txt",
                file(b"a\nb\nold"),
                file(b"a\nb\nnew"),
            ),
            ("noeol_single.txt", file(b"x"), file(b"y")),
            ("empty_to_content.txt", file(b""), file(b"hello\n")),
            ("content_to_empty.txt", file(b"bye\nbye\n"), file(b"")),
            ("removed.txt", file(&n20), None),
            ("removed_empty.txt", file(b""), None),
            ("removed_noeol.txt", file(b"a\nb"), None),
            ("added.txt", None, file(b"new\nfile\n")),
            ("added_empty.txt", None, file(b"")),
            ("added_noeol.txt", None, file(b"no newline")),
            (
                "exec_on.sh",
                file(b"#!/bin/sh\n"),
                exec_file(b"#!/bin/sh\n"),
            ),
            (
                "exec_off.sh",
                exec_file(b"#!/bin/sh\n"),
                file(b"#!/bin/sh\n"),
            ),
            (
                "exec_edit.sh",
                file(b"#!/bin/sh\necho a\n"),
                exec_file(b"#!/bin/sh\necho b\n"),
            ),
            ("exec_added.sh", None, exec_file(b"#!/bin/sh\n")),
            ("exec_removed.sh", exec_file(b"#!/bin/sh\n"), None),
            (
                "link_changed",
                Some(Content::Link("target1")),
                Some(Content::Link("target2")),
            ),
            (
                "link_to_file",
                Some(Content::Link("edit_end.txt")),
                file(b"now a file\n"),
            ),
            (
                "file_to_link",
                file(b"was a file\n"),
                Some(Content::Link("added.txt")),
            ),
            ("link_added", None, Some(Content::Link("some/where"))),
            ("link_removed", Some(Content::Link("gone")), None),
            ("bin_mod.bin", file(b"\x00\x01\x02"), file(b"\x00\x01\x03")),
            ("bin_added.bin", None, file(b"\x00bin")),
            ("bin_removed.bin", file(b"\x00\x01bin\n"), None),
            ("bin_to_text.bin", file(b"\x00\x01"), file(b"text\n")),
            ("text_to_bin.bin", file(b"text\n"), file(b"te\x00xt\n")),
            ("bin_to_empty.bin", file(b"\x00\x01"), file(b"")),
            (
                "bin_exec_only.bin",
                file(b"\x00\x01"),
                exec_file(b"\x00\x01"),
            ),
            ("crlf.txt", file(&crlf_old), file(&crlf_new)),
            ("with space.txt", file(b"a\nb\n"), file(b"a\nc\n")),
            ("dup_lines.txt", file(&dup_old), file(&dup_new)),
            (
                "moved_block.txt",
                file(&moved_old),
                file(&mv.concat().into_bytes()),
            ),
            (
                "sub/dir/nested.txt",
                file(b"nested\n"),
                file(b"nested\nmore\n"),
            ),
            ("big.txt", file(&big_old), file(&big_new)),
            ("all_replaced.txt", file(b"a\nb\nc\n"), file(b"x\ny\n")),
            ("unchanged.txt", file(b"same\n"), file(b"same\n")),
            ("copy_src.txt", file(&n20), file(&n20)),
            ("rename_src.txt", file(&n40), None),
            ("rename_plain_src.txt", file(b"moved as is\n"), None),
            (
                "copy_exec_src.sh",
                exec_file(b"#!/bin/sh\n"),
                exec_file(b"#!/bin/sh\n"),
            ),
        ]
    }

    /// (source, destination, is_rename, new content of the destination)
    fn copy_spec() -> Vec<(&'static str, &'static str, bool, Option<Content>)> {
        vec![
            (
                "copy_src.txt",
                "copy_dst.txt",
                false,
                file(&edited(20, &[(5, "copied\n")])),
            ),
            (
                "rename_src.txt",
                "rename_dst.txt",
                true,
                file(&edited(40, &[(39, "renamed\n")])),
            ),
            ("rename_plain_src.txt", "z_renamed.txt", true, None),
            (
                "copy_exec_src.sh",
                "a_copy_noexec.sh",
                false,
                file(b"#!/bin/sh\n"),
            ),
        ]
    }

    /// (old path, new path, copy operation)
    type FilePair = (Option<Vec<u8>>, Option<Vec<u8>>, Option<CopyOp>);

    /// `patch._filepairs`: (old path, new path, copy op) in output order.
    fn filepairs(
        modified: &[Vec<u8>],
        added: &[Vec<u8>],
        removed: &[Vec<u8>],
        copies: &[(Vec<u8>, Vec<u8>)],
        git: bool,
    ) -> Vec<FilePair> {
        let copy: HashMap<&Vec<u8>, &Vec<u8>> = copies.iter().map(|(d, s)| (d, s)).collect();
        let copyto: HashMap<&Vec<u8>, &Vec<u8>> = copies.iter().map(|(d, s)| (s, d)).collect();
        let addedset: HashSet<&Vec<u8>> = added.iter().collect();
        let removedset: HashSet<&Vec<u8>> = removed.iter().collect();
        let mut gone = HashSet::new();
        let all: BTreeSet<&Vec<u8>> = modified.iter().chain(added).chain(removed).collect();
        let mut out = Vec::new();
        for f in all {
            let (mut f1, mut f2, mut op) = (Some(f.clone()), Some(f.clone()), None);
            if addedset.contains(f) {
                f1 = None;
                if let (true, Some(src)) = (git, copy.get(f)) {
                    f1 = Some((*src).clone());
                    if removedset.contains(*src) && !gone.contains(*src) {
                        op = Some(CopyOp::Rename);
                        gone.insert((*src).clone());
                    } else {
                        op = Some(CopyOp::Copy);
                    }
                }
            } else if removedset.contains(f) {
                f2 = None;
                if git {
                    if let Some(dst) = copyto.get(f) {
                        if addedset.contains(*dst) && copy.get(*dst) == Some(&f) {
                            continue;
                        }
                    }
                }
            }
            out.push((f1, f2, op));
        }
        out
    }

    struct OldFile {
        data: Vec<u8>,
        exec: bool,
        symlink: bool,
    }

    struct NewFile {
        data: Vec<u8>,
        exec: bool,
        symlink: bool,
    }

    fn read_new(root: &Path, name: &[u8]) -> NewFile {
        let p = root.join(std::ffi::OsStr::from_bytes(name));
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&p).unwrap();
            NewFile {
                data: target.as_os_str().as_bytes().to_vec(),
                exec: false,
                symlink: true,
            }
        } else {
            NewFile {
                data: std::fs::read(&p).unwrap(),
                exec: meta.permissions().mode() & 0o100 != 0,
                symlink: false,
            }
        }
    }

    #[test]
    fn file_diff_matches_hg_diff() {
        if !oracle_available() {
            return;
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let tmp = TempDir(std::env::temp_dir().join(format!(
            "revfs-diff-oracle-{}-{}",
            std::process::id(),
            nanos
        )));
        let root = tmp.0.clone();
        std::fs::create_dir_all(&root).unwrap();
        hg(&root, &["init"]);
        let spec = repo_spec();
        for (name, old, _) in &spec {
            if let Some(c) = old {
                write_content(&root, name, c);
            }
        }
        hg(&root, &["add", "-q"]);
        hg(
            &root,
            &["commit", "-q", "-m", "init", "-d", "1500000000 -7200"],
        );
        for (src, dst, rename, content) in copy_spec() {
            hg(&root, &[if rename { "mv" } else { "cp" }, "-q", src, dst]);
            if let Some(c) = content {
                write_content(&root, dst, &c);
            }
        }
        for (name, old, new) in &spec {
            match (old, new) {
                (Some(_), None) => {
                    if std::fs::symlink_metadata(root.join(name)).is_ok() {
                        hg(&root, &["rm", "-q", name]);
                    }
                }
                (None, Some(c)) => {
                    write_content(&root, name, c);
                    hg(&root, &["add", "-q", name]);
                }
                (Some(_), Some(c)) => write_content(&root, name, c),
                (None, None) => {}
            }
        }

        // What hg knows: status with copies, parent, old flags.
        let status = hg(&root, &["status", "-C"]);
        let (mut modified, mut added, mut removed, mut copies) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut last_added: Option<Vec<u8>> = None;
        for line in status.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            let path = line[2..].to_vec();
            match line[0] {
                b'M' => modified.push(path),
                b'A' => {
                    added.push(path.clone());
                    last_added = Some(path);
                }
                b'R' => removed.push(path),
                b' ' => copies.push((last_added.clone().unwrap(), path)),
                other => panic!("unexpected status {}", other as char),
            }
        }
        assert!(copies.len() == 4, "copies: {copies:?}");
        let parent =
            String::from_utf8(hg(&root, &["log", "-r", ".", "-T", "{node|short}"])).unwrap();
        let hgdate =
            String::from_utf8(hg(&root, &["log", "-r", ".", "-T", "{date|hgdate}"])).unwrap();
        let mut it = hgdate.split(' ').map(|x| x.parse::<i64>().unwrap());
        let (t, tz) = (it.next().unwrap(), it.next().unwrap());
        let mut old_flags: HashMap<Vec<u8>, (bool, bool)> = HashMap::new();
        for line in hg(&root, &["manifest", "-v", "-r", "."]).split(|&c| c == b'\n') {
            if line.len() > 6 {
                old_flags.insert(line[6..].to_vec(), (line[4] == b'*', line[4] == b'@'));
            }
        }
        let old_file = |p: &[u8]| -> OldFile {
            let pat = format!("path:{}", String::from_utf8_lossy(p));
            let (exec, symlink) = old_flags[p];
            OldFile {
                data: hg(&root, &["cat", "-r", ".", &pat]),
                exec,
                symlink,
            }
        };

        let default_date = "1600000000 19800";
        let date_cfg = format!("devel.default-date={default_date}");
        let unsupported: Vec<&str> = vec![
            "bin_mod.bin",
            "bin_added.bin",
            "bin_to_text.bin",
            "text_to_bin.bin",
        ];
        for git in [false, true] {
            let opts = DiffOptions {
                git,
                old_date: hg_datestr(t, tz),
                new_date: hg_datestr(1_600_000_000, 19800),
            };
            let mut args: Vec<&str> = vec!["diff", "--config", date_cfg.as_str()];
            let excludes: Vec<String> = unsupported.iter().map(|u| format!("path:{u}")).collect();
            if git {
                args.push("--git");
                for e in &excludes {
                    args.push("-X");
                    args.push(e);
                }
            }
            let theirs = hg(&root, &args);
            let mut ours = Vec::new();
            let mut errors = 0;
            for (f1, f2, op) in filepairs(&modified, &added, &removed, &copies, git) {
                // Plain mode: pass the copy source anyway, file_diff must
                // show the file as added.
                let (old_path, copy) = match (&f1, &f2) {
                    (Some(p), _) => (p.clone(), op),
                    (None, Some(p)) => match copies.iter().find(|(d, _)| d == p) {
                        Some((_, src)) if !git => (src.clone(), Some(CopyOp::Copy)),
                        _ => (p.clone(), None),
                    },
                    (None, None) => unreachable!(),
                };
                let has_old = f1.is_some() || copy.is_some();
                let old = if has_old {
                    Some(old_file(&old_path))
                } else {
                    None
                };
                let new_path = f2.clone().unwrap_or_else(|| old_path.clone());
                let new = f2.as_ref().map(|p| read_new(&root, p));
                let old_side = Side {
                    path: &old_path,
                    data: old.as_ref().map(|o| &o.data[..]),
                    exec: old.as_ref().is_some_and(|o| o.exec),
                    symlink: old.as_ref().is_some_and(|o| o.symlink),
                };
                let new_side = Side {
                    path: &new_path,
                    data: new.as_ref().map(|n| &n.data[..]),
                    exec: new.as_ref().is_some_and(|n| n.exec),
                    symlink: new.as_ref().is_some_and(|n| n.symlink),
                };
                let res = file_diff(&old_side, &new_side, copy, &parent, &opts);
                let name = String::from_utf8_lossy(&new_path).to_string();
                if git && unsupported.contains(&name.as_str()) {
                    assert!(res.is_err(), "{name} should be unsupported");
                    errors += 1;
                    continue;
                }
                ours.extend_from_slice(&res.unwrap());
            }
            if git {
                assert_eq!(errors, unsupported.len());
            }
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "git={git}"
            );
            assert_eq!(ours, theirs, "git={git}");
        }
    }
}
