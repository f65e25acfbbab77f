//! The blocks of inode numbers that directories' listings from a manifest get: child `i`
//! of a listing is numbered `first + i`. A listing dropped and made again (`unload.rs`)
//! gets the same numbers, so that a program that compares inode numbers across a long scan
//! (tar, git, rsync) sees the same file as the same file. A block serves only the listing
//! it was made for: a directory whose listing is not the same any more (an update moved it
//! to another revision before it was listed again) gets a new block, and the old block's
//! numbers are never handed out again. Reusing it would number the new listing's names
//! from the old ones' (an added name pushes the last one past the block's end, into the
//! next directory's block): two live names on one number, which the kernel takes for one
//! inode, serving one file's cached pages under the other's name.

use super::*;
use std::hash::{Hash, Hasher};

/// A directory's block of numbers: where it starts, how many names it numbers, and a digest
/// of those names and their kinds (file or directory), in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::wc) struct Block {
    pub(in crate::wc) first: u64,
    len: u64,
    shape: u64,
}

/// The digest of a listing's names and kinds, in order.
fn shape(listing: &[Child<'_>]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for child in listing {
        match child {
            Child::File { name, .. } => (0u8, name).hash(&mut h),
            Child::Dir { name } => (1u8, name).hash(&mut h),
        }
    }
    h.finish()
}

impl Inner {
    /// The first number of `dir`'s block for `listing`: its block when it was made for the
    /// same names, else a new one (the old one's numbers are retired, with the blocks of
    /// the directories they numbered).
    pub(in crate::wc) fn block_for(&mut self, dir: u64, listing: &[Child<'_>]) -> u64 {
        let len = listing.len() as u64;
        let shape = shape(listing);
        let old = match self.blocks.get(&dir) {
            Some(b) if b.len == len && b.shape == shape => return b.first,
            other => other.copied(),
        };
        let first = self.next_ino;
        self.next_ino += len;
        self.blocks.insert(dir, Block { first, len, shape });
        if let Some(old) = old {
            self.retire(old);
        }
        first
    }

    /// Forgets the blocks of the directories `block` numbered that have no entry any more:
    /// their numbers are never given again, so neither are their blocks'. A directory
    /// that still has an entry keeps its block (it is freed with it).
    fn retire(&mut self, block: Block) {
        let mut stack = vec![block];
        while let Some(b) = stack.pop() {
            for ino in b.first..b.first + b.len {
                if self.entries.contains_key(&ino) {
                    continue;
                }
                if let Some(sub) = self.blocks.remove(&ino) {
                    stack.push(sub);
                }
            }
        }
    }

    /// The first number of `dir`'s block, if it has one.
    pub(in crate::wc) fn block_first(&self, dir: u64) -> Option<u64> {
        self.blocks.get(&dir).map(|b| b.first)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_repo::{hg, node, open_at, put};
    use super::*;

    /// A repository whose revision 0 has `d/` = `a c s/ z` and `e/g`, and revision 1 adds
    /// `d/b` and changes `d/s/f`: every file a different size, so a size names a file.
    struct Fixture {
        _tmp: tempfile::TempDir,
        repo: PathBuf,
        state: PathBuf,
        revs: [Node; 2],
    }

    const SIZES: [(&str, usize); 5] = [
        ("d/a", 1),
        ("d/c", 3),
        ("d/s/f", 7),
        ("d/z", 11),
        ("e/g", 19),
    ];
    const B_SIZE: usize = 13;
    const F_AT_1: usize = 17;

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        hg(&repo, &["init"]);
        for (path, len) in SIZES {
            put(&repo, path, &vec![b'x'; len]);
        }
        hg(&repo, &["commit", "-qAm", "0"]);
        put(&repo, "d/b", &[b'x'; B_SIZE]);
        put(&repo, "d/s/f", &[b'x'; F_AT_1]);
        hg(&repo, &["commit", "-qAm", "1"]);
        let revs = [node(&repo, "0"), node(&repo, "1")];
        let state = tmp.path().join("state");
        Fixture {
            _tmp: tmp,
            repo,
            state,
            revs,
        }
    }

    fn open(f: &Fixture) -> WorkingCopy {
        open_at(&f.repo, f.revs[0], &f.state)
    }

    fn update(wc: &WorkingCopy, f: &Fixture) {
        let repo = Arc::new(Repo::open(&f.repo).expect("repo"));
        wc.update(repo, f.revs[1], false, None).expect("update");
    }

    fn ino(wc: &WorkingCopy, dir: u64, name: &str) -> u64 {
        wc.lookup(dir, name.as_bytes())
            .expect("lookup")
            .unwrap_or_else(|| panic!("{name} is there"))
            .ino
    }

    fn listing_dropped(wc: &WorkingCopy, dir: u64) -> bool {
        matches!(
            wc.read().entry(dir).map(|e| &e.kind),
            Ok(Kind::Dir { children: None, .. })
        )
    }

    fn size(wc: &WorkingCopy, ino: u64) -> u64 {
        wc.getattr(ino).expect("getattr").size
    }

    #[test]
    fn a_listing_dropped_and_made_again_keeps_its_numbers() {
        let f = fixture();
        let wc = open(&f);
        let d = ino(&wc, ROOT_INO, "d");
        wc.readdir(d).expect("readdir");
        let z = ino(&wc, d, "z");
        wc.forget(z, 1);
        wc.forget(d, 1);
        assert!(listing_dropped(&wc, d), "d's listing was dropped");
        let d = ino(&wc, ROOT_INO, "d");
        wc.readdir(d).expect("readdir");
        assert_eq!(ino(&wc, d, "z"), z);
    }

    /// The soak's wrong bytes (pt-off-uring, seed 15): a directory listed, dropped, moved
    /// to a revision with one more name and listed again numbered its last name with the
    /// first number of the block listed after its own, a file the kernel held: one inode
    /// for two files.
    #[test]
    fn a_directory_updated_while_unlisted_numbers_its_new_listing_apart_from_the_others() {
        let f = fixture();
        let wc = open(&f);
        let d = ino(&wc, ROOT_INO, "d");
        wc.readdir(d).expect("readdir");
        // e's block comes right after d's, and e/g is held.
        let e = ino(&wc, ROOT_INO, "e");
        wc.readdir(e).expect("readdir");
        let g = ino(&wc, e, "g");
        let s = ino(&wc, d, "s");
        wc.readdir(s).expect("readdir");
        wc.forget(s, 1);
        wc.forget(d, 1);
        assert!(listing_dropped(&wc, d), "d's listing was dropped");
        let blocks_before = wc.read().blocks.len();
        update(&wc, &f);
        let d = ino(&wc, ROOT_INO, "d");
        wc.readdir(d).expect("readdir");
        let s_now = ino(&wc, d, "s");
        wc.readdir(s_now).expect("readdir");
        let named = [
            ("d/a", ino(&wc, d, "a"), 1),
            ("d/b", ino(&wc, d, "b"), B_SIZE),
            ("d/c", ino(&wc, d, "c"), 3),
            ("d/s/f", ino(&wc, s_now, "f"), F_AT_1),
            ("d/z", ino(&wc, d, "z"), 11),
            ("e/g", g, 19),
        ];
        for (i, (path, ino, _)) in named.iter().enumerate() {
            for (other, other_ino, _) in &named[..i] {
                assert_ne!(ino, other_ino, "{path} and {other} share an inode number");
            }
        }
        for (path, ino, len) in named {
            assert_eq!(size(&wc, ino), len as u64, "{path}'s size");
        }
        // d's old block and s's (numbered by it) are retired; d and s have new ones.
        assert_eq!(wc.read().blocks.len(), blocks_before);
        assert!(!wc.read().blocks.contains_key(&s));
    }

    /// A directory whose listing a sweep dropped while a subdirectory with a change stayed
    /// listed: an update that reaches it goes on below it, and the change stays.
    #[test]
    fn an_update_keeps_the_changes_of_a_subdirectory_kept_when_its_parents_listing_was_dropped() {
        let f = fixture();
        let wc = open(&f);
        let d = ino(&wc, ROOT_INO, "d");
        wc.readdir(d).expect("readdir");
        let s = ino(&wc, d, "s");
        let new = wc.create(s, b"new", 0o644).expect("create").ino;
        wc.write_file(new, 0, b"mine").expect("write");
        wc.forget(new, 1);
        wc.forget(s, 1);
        wc.set_listed_files(0);
        wc.sweep_listings(100);
        wc.forget(d, 1);
        assert!(listing_dropped(&wc, d), "d's listing was dropped");
        assert!(wc.read().keeps_entries_below(d), "s's entry was kept");
        wc.set_listed_files(DEFAULT_LISTED_FILES);
        update(&wc, &f);
        let d = ino(&wc, ROOT_INO, "d");
        let s = ino(&wc, d, "s");
        assert_eq!(size(&wc, ino(&wc, s, "new")), 4);
        assert_eq!(size(&wc, ino(&wc, s, "f")), F_AT_1 as u64);
        assert_eq!(size(&wc, ino(&wc, d, "b")), B_SIZE as u64);
    }
}
