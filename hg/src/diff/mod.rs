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

use std::fmt;

mod bdiff;
mod git;
mod label;
#[cfg(test)]
mod tests;

pub use bdiff::blocks;
use bdiff::{bdiff_lines, split_lines};
use git::{git_binary_literal_empty, git_blob_id};
pub use label::DiffLabeler;

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
