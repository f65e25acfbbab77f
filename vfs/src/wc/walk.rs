//! `Walk`: where the last path resolved by [`Inner::resolve_walk`] went, so that the next
//! one starts from the directories the two share instead of from the root.

use super::ROOT_INO;

/// The directories of the last path resolved: its directory part and the inode of each
/// of its prefixes (`inos[0]` is the root, `inos[k]` the directory of the first `k`
/// components).
#[derive(Debug)]
pub(crate) struct Walk {
    dir: Vec<u8>,
    inos: Vec<u64>,
    /// Where each component of `dir` ends (`ends[k]` for the first `k + 1` components).
    ends: Vec<usize>,
}

impl Default for Walk {
    fn default() -> Self {
        Walk {
            dir: Vec::new(),
            inos: vec![ROOT_INO],
            ends: Vec::new(),
        }
    }
}

impl Walk {
    /// The length of the longest prefix of `dir` made of whole components that the walk's
    /// directory shares.
    pub(crate) fn common_len(&self, dir: &[u8]) -> usize {
        let mut common = 0;
        for &end in &self.ends {
            let whole = dir.len() == end || dir.get(end) == Some(&b'/');
            if dir.len() < end || !whole || dir[..end] != self.dir[..end] {
                break;
            }
            common = end;
        }
        common
    }

    /// Keeps the directories of the first `len` bytes of the walk's directory (a length
    /// [`Walk::common_len`] gave).
    pub(crate) fn truncate(&mut self, len: usize) {
        let keep = self.ends.iter().take_while(|&&e| e <= len).count();
        self.ends.truncate(keep);
        self.inos.truncate(keep + 1);
        self.dir.truncate(len);
    }

    /// The directory reached.
    pub(crate) fn last(&self) -> u64 {
        self.inos.last().copied().unwrap_or(ROOT_INO)
    }

    /// One more component, `name`, found at `ino`.
    pub(crate) fn push(&mut self, name: &[u8], ino: u64) {
        if !self.dir.is_empty() {
            self.dir.push(b'/');
        }
        self.dir.extend_from_slice(name);
        self.ends.push(self.dir.len());
        self.inos.push(ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_len_counts_whole_components_only() {
        let mut w = Walk::default();
        w.push(b"a", 2);
        w.push(b"bc", 3);
        assert_eq!(w.common_len(b"a/bc"), 4);
        assert_eq!(w.common_len(b"a/bc/d"), 4);
        assert_eq!(w.common_len(b"a/b"), 1);
        assert_eq!(w.common_len(b"a/bcd"), 1);
        assert_eq!(w.common_len(b"ab"), 0);
        assert_eq!(w.common_len(b""), 0);
        w.truncate(1);
        assert_eq!(w.last(), 2);
        w.truncate(0);
        assert_eq!(w.last(), ROOT_INO);
    }
}
