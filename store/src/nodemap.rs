//! Mercurial's persistent nodemap (requirement `persistent-nodemap`, the default of every
//! hg built with its Rust extensions): a docket `<radix>.n` (and `<radix>.n.a` while a
//! transaction is pending) and a trie `<radix>-<uid>.nd` beside the changelog and the
//! manifest log, which let hg's Rust index find a node without building a map.
//!
//! revfs neither reads nor writes them: it builds its own map. A writer that appends to
//! either revlog deletes them first ([`forget`]). Every hg reads a missing docket as "no
//! persistent nodemap" (6.3-7.2 `nodemap.persisted_data`, hg-core `nodemap_docket.rs`) and
//! writes a full new one at its next write to that revlog, as after its own
//! `delete_nodemap`. A docket left *behind* the revlog would not do: rhg before 7.0.2
//! trusts it without checking its tip, and does not find the newer nodes
//! (docs/research/hg-versions-formats.md, section 3.1).

use crate::error::{Result, StoreError};
use std::path::Path;

/// The revlogs hg keeps a persistent nodemap for (never filelogs).
const RADIXES: [&[u8]; 2] = [b"00changelog", b"00manifest"];

/// Whether `name`, a file name in the store's top directory, is one of a nodemap's files.
fn is_nodemap_file(name: &[u8]) -> bool {
    RADIXES.iter().any(|radix| {
        let Some(rest) = name.strip_prefix(*radix) else {
            return false;
        };
        rest == b".n"
            || rest == b".n.a"
            || (rest.starts_with(b"-") && rest.ends_with(b".nd") && rest.len() > 4)
    })
}

/// Deletes the persistent nodemaps of the changelog and the manifest log in `store`
/// (dockets first, then their tries), and makes the deletion durable before returning, so
/// that no crash after it can bring back a docket behind the revlog. Returns how many files
/// it removed. The caller holds the store lock, before its first append.
pub fn forget(store: &Path) -> Result<usize> {
    use std::os::unix::ffi::OsStrExt;
    let entries = std::fs::read_dir(store).map_err(|e| StoreError::io(store, e))?;
    let mut dockets = Vec::new();
    let mut tries = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(store, e))?;
        let name = entry.file_name();
        let name = name.as_bytes();
        if is_nodemap_file(name) {
            if name.ends_with(b".nd") {
                tries.push(entry.path());
            } else {
                dockets.push(entry.path());
            }
        }
    }
    let mut removed = 0;
    for path in dockets.iter().chain(&tries) {
        match std::fs::remove_file(path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(path, e)),
        }
    }
    if removed > 0 {
        std::fs::File::open(store)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::io(store, e))?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_changelog_and_manifest_nodemap_files_are_named() {
        for name in [
            "00changelog.n",
            "00changelog.n.a",
            "00changelog-6b8a2f10.nd",
            "00manifest.n",
            "00manifest-00000000.nd",
        ] {
            assert!(is_nodemap_file(name.as_bytes()), "{name}");
        }
        for name in [
            "00changelog.i",
            "00changelog.d",
            "00changelog.nd",
            "00changelog-.nd",
            "00manifest.i",
            "00changelogx.n",
            "fncache",
            "data",
            "00changelog.n.tmp",
        ] {
            assert!(!is_nodemap_file(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn forget_removes_dockets_and_tries_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let keep = ["00changelog.i", "00changelog.d", "00manifest.i", "fncache"];
        let gone = [
            "00changelog.n",
            "00changelog.n.a",
            "00changelog-0123abcd.nd",
            "00changelog-89abcdef.nd",
            "00manifest.n",
            "00manifest-0123abcd.nd",
        ];
        for name in keep.iter().chain(&gone) {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        assert_eq!(forget(dir.path()).unwrap(), gone.len());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(left, want);
        assert_eq!(forget(dir.path()).unwrap(), 0);
    }

    /// hg with Python only (Debian's) needs this to touch a persistent-nodemap repository.
    const SLOW_PATH: &str = "storage.revlog.persistent-nodemap.slow-path=allow";

    fn hg_pn(dir: &Path, args: &[&str]) -> String {
        let mut all = vec!["--config", SLOW_PATH];
        all.extend_from_slice(args);
        crate::commit::tests::hg(dir, &all)
    }

    fn nodemap_files(store: &Path) -> Vec<String> {
        use std::os::unix::ffi::OsStrExt;
        let mut v: Vec<String> = std::fs::read_dir(store)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| is_nodemap_file(n.as_bytes()))
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_commit_to_a_persistent_nodemap_repository_leaves_hg_a_valid_one() {
        use crate::commit::tests::{hg_available, request, set};
        use crate::manifest::FileFlag;
        use crate::repo::Repo;
        if !hg_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("r");
        let dir = dir.as_path();
        crate::commit::tests::hg(
            tmp.path(),
            &[
                "--config",
                SLOW_PATH,
                "--config",
                "format.use-persistent-nodemap=yes",
                "init",
                "r",
            ],
        );
        // hg keeps a nodemap for non-inline revlogs only: a changelog over 128 KiB (a long
        // message that does not compress) and a manifest over 128 KiB once compressed (4,000
        // files with names that do not compress either).
        let noise = |seed: u64, len: usize| -> String {
            crate::commit::tests::pseudo_random(seed, len)
                .iter()
                .map(|b| char::from(b"0123456789abcdefghijklmnopqrstuv"[usize::from(b % 32)]))
                .collect()
        };
        std::fs::write(tmp.path().join("message"), noise(1, 200_000)).unwrap();
        for i in 0..4000u64 {
            std::fs::write(
                dir.join(format!("f{i}-{}", noise(i + 2, 20))),
                format!("{i}\n"),
            )
            .unwrap();
        }
        hg_pn(
            dir,
            &["commit", "-Aq", "-u", "t", "-d", "0 0", "-l", "../message"],
        );
        std::fs::write(dir.join("new"), "x\n").unwrap();
        hg_pn(dir, &["commit", "-Aq", "-u", "t", "-d", "1 0", "-m", "two"]);
        let store = dir.join(".hg/store");
        assert_eq!(
            nodemap_files(&store).len(),
            4,
            "{:?}",
            nodemap_files(&store)
        );
        assert!(
            crate::requirements::Requirements::load(&dir.join(".hg"), &store)
                .unwrap()
                .contains("persistent-nodemap")
        );

        let repo = Repo::open(dir).unwrap();
        let p1 = repo.changelog().node(1).unwrap();
        let node = crate::commit::commit(
            &repo,
            &request(
                p1,
                vec![("new", set(b"new\n", FileFlag::Regular))],
                "three",
                2,
            ),
        )
        .unwrap();
        assert_eq!(nodemap_files(&store), Vec::<String>::new());
        let log = hg_pn(dir, &["log", "-r", "tip", "-T", "{rev} {node}\n"]);
        assert_eq!(log, format!("2 {}\n", node.to_hex()));
        hg_pn(dir, &["verify", "-q"]);
        hg_pn(dir, &["debugnodemap", "--check"]);
        // hg's next write rebuilds both, and they hold every revision.
        std::fs::write(dir.join("new"), "newer\n").unwrap();
        hg_pn(dir, &["commit", "-q", "-u", "t", "-d", "3 0", "-m", "four"]);
        assert_eq!(
            nodemap_files(&store).len(),
            4,
            "{:?}",
            nodemap_files(&store)
        );
        let check = hg_pn(dir, &["debugnodemap", "--check"]);
        assert!(check.contains("revision in nodemap: 4"), "{check}");
        // (6.3's debugnodemap reads the changelog's only: the manifest's docket names its tip,
        // `>BQ` after the version byte.)
        let docket = std::fs::read(store.join("00manifest.n")).unwrap();
        assert_eq!(docket[2..10], 3u64.to_be_bytes());
        assert_eq!(Repo::open(dir).unwrap().changelog().len(), 4);
    }
}
