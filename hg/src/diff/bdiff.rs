//! bdiff's line matcher (Mercurial's `mercurial/bdiff.c`), reproduced choice for choice:
//! see the [`super`] module documentation.

use std::collections::HashMap;

/// Splits after every `\n`; a final line without newline is kept; an empty
/// text has no lines (bdiff's `splitnewlines`).
pub(super) fn split_lines(text: &[u8]) -> Vec<&[u8]> {
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
pub(super) fn bdiff_lines(a: &[&[u8]], b: &[&[u8]]) -> Vec<(usize, usize, usize, usize)> {
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
