//! Repositories in the formats hg users switch on (and newer hg makes by default): a mount
//! of each reads, commits and updates, and real hg then reads the result, `hg verify`
//! passes, and hg's own files about the format hold (a persistent nodemap checks out).

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_ok};
use std::path::{Path, PathBuf};

/// Debian's hg (Python only) needs this to touch a persistent-nodemap repository; an hg
/// built with its Rust extensions does not.
const NODEMAP_SLOW_PATH: &str = "storage.revlog.persistent-nodemap.slow-path=allow";

/// hg with the persistent nodemap's slow path allowed.
fn hg_pn(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["--config", NODEMAP_SLOW_PATH];
    all.extend_from_slice(args);
    hg_ok(dir, &all)
}

/// The persistent nodemap's files in `store`, sorted.
fn nodemap_files(store: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            (n.starts_with("00changelog") || n.starts_with("00manifest"))
                && (n.ends_with(".n") || n.ends_with(".n.a") || n.ends_with(".nd"))
        })
        .collect();
    v.sort();
    v
}

/// A repository made by hg with `format.use-persistent-nodemap=yes`, whose changelog and
/// manifest log are big enough (not inline) for hg to keep a nodemap of each.
fn persistent_nodemap_repo(dir: &Path) -> PathBuf {
    hg_pn(
        dir,
        &[
            "--config",
            "format.use-persistent-nodemap=yes",
            "init",
            "repo",
        ],
    );
    let repo = dir.join("repo");
    let mut rng = revfs_tests::Rng::new(51);
    let mut noise = |len: usize| -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdefghijklmnopqrstuv"[rng.below(32)]))
            .collect()
    };
    std::fs::write(dir.join("message"), noise(200_000)).unwrap();
    for i in 0..4000 {
        let d = repo.join(format!("d{}", i % 10));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("f{i}-{}", noise(20))), format!("{i}\n")).unwrap();
    }
    hg_pn(&repo, &["commit", "-Aq", "-d", "0 0", "-l", "../message"]);
    std::fs::write(repo.join("top"), "top\n").unwrap();
    hg_pn(&repo, &["commit", "-Aq", "-d", "1 0", "-m", "top"]);
    assert_eq!(
        nodemap_files(&repo.join(".hg/store")).len(),
        4,
        "hg made a nodemap for the changelog and the manifest"
    );
    repo
}

#[test]
fn a_persistent_nodemap_repository_mounts_commits_and_updates_and_hg_checks_its_nodemap() {
    let tmp = revfs_tests::scratch_dir();
    let repo = persistent_nodemap_repo(tmp.path());
    let store = repo.join(".hg/store");
    let m = Mount::new(&repo, None);
    assert_eq!(std::fs::read(m.dir.join("top")).unwrap(), b"top\n");

    std::fs::write(m.dir.join("top"), "changed in the mount\n").unwrap();
    let out = m.revfs_in(&m.dir, &["commit", "-m", "from revfs", "-d", "2 0"]);
    assert!(out.status.success(), "{out:?}");
    // The commit deleted the nodemaps (which hg reads as none) rather than leave them
    // behind the revlogs.
    assert_eq!(nodemap_files(&store), Vec::<String>::new());
    assert_eq!(
        hg_pn(&repo, &["log", "-r", "tip", "-T", "{rev} {desc}\n"]),
        "2 from revfs\n"
    );
    hg_pn(&repo, &["verify", "-q"]);
    hg_pn(&repo, &["debugnodemap", "--check"]);

    let out = m.revfs_in(&m.dir, &["update", "-r", "1"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(m.dir.join("top")).unwrap(), b"top\n");
    let out = m.revfs_in(&m.dir, &["update", "-r", "2"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read(m.dir.join("top")).unwrap(),
        b"changed in the mount\n"
    );

    // hg in the mount commits there as in a clone, and writes the nodemaps anew; then revfs
    // commits again on top of hg's.
    std::fs::write(m.dir.join("top"), "changed by hg in the mount\n").unwrap();
    hg_pn(&m.dir, &["commit", "-q", "-d", "3 0", "-m", "from hg"]);
    assert_eq!(
        nodemap_files(&store).len(),
        4,
        "{:?}",
        nodemap_files(&store)
    );
    let check = hg_pn(&repo, &["debugnodemap", "--check"]);
    assert!(check.contains("revision in nodemap: 4"), "{check}");
    std::fs::write(m.dir.join("new"), "new\n").unwrap();
    let out = m.revfs_in(&m.dir, &["commit", "-A", "-m", "again", "-d", "4 0"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(nodemap_files(&store), Vec::<String>::new());
    hg_pn(&repo, &["verify", "-q"]);
    hg_pn(&repo, &["debugnodemap", "--check"]);
    assert_eq!(
        hg_pn(&m.dir, &["log", "-r", "1:", "-T", "{rev}:{desc}\n"]),
        "1:top\n2:from revfs\n3:from hg\n4:again\n"
    );
    m.unmount();
}

/// hg with the dirstate-v2 slow path allowed.
fn hg_v2(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["--config", "storage.dirstate-v2.slow-path=allow"];
    all.extend_from_slice(args);
    hg_ok(dir, &all)
}

#[test]
fn a_dirstate_v2_repository_mounts_at_its_working_parent_and_hg_works_in_the_mount() {
    let tmp = revfs_tests::scratch_dir();
    hg_v2(
        tmp.path(),
        &["--config", "format.use-dirstate-v2=yes", "init", "repo"],
    );
    let repo = tmp.path().join("repo");
    for (i, text) in ["one\n", "two\n", "three\n"].iter().enumerate() {
        std::fs::write(repo.join("f"), text).unwrap();
        hg_v2(
            &repo,
            &["commit", "-Aq", "-d", &format!("{i} 0"), "-m", text.trim()],
        );
    }
    hg_v2(&repo, &["update", "-q", "1"]);
    assert!(std::fs::read(repo.join(".hg/dirstate"))
        .unwrap()
        .starts_with(b"dirstate-v2\n"));
    // revfs reads `.` from the v2 dirstate, as hg does.
    let out = revfs_tests::revfs(&repo, &["log", "-r", ".", "-T", "{rev}:{desc}\n"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1:two\n", "{out:?}");

    // `revfs mount -r .`: the repository's working parent.
    let m = Mount::new(&repo, Some("."));
    assert_eq!(std::fs::read(m.dir.join("f")).unwrap(), b"two\n");
    // The mount's dirstate is revfs's: hg there needs no slow path.
    assert_eq!(hg_ok(&m.dir, &["log", "-r", ".", "-T", "{rev}\n"]), "1\n");
    std::fs::write(m.dir.join("f"), "edited\n").unwrap();
    assert_eq!(hg_ok(&m.dir, &["status"]), "M f\n");
    hg_ok(&m.dir, &["commit", "-q", "-d", "3 0", "-m", "in the mount"]);
    hg_ok(&m.dir, &["update", "-q", "2"]);
    assert_eq!(std::fs::read(m.dir.join("f")).unwrap(), b"three\n");
    m.unmount();
    hg_v2(&repo, &["verify", "-q"]);
    // The source's working copy is untouched.
    assert_eq!(hg_v2(&repo, &["log", "-r", ".", "-T", "{rev}\n"]), "1\n");
    assert_eq!(hg_v2(&repo, &["status"]), "");
}

/// The chunk kinds of the manifest log's new chunks, as `hg debugrevlog -m` counts them
/// (`0x75 (u)`, `0x78 (x)`, `0x28`).
fn chunk_kinds(repo: &Path) -> Vec<String> {
    hg_ok(repo, &["debugrevlog", "-m"])
        .lines()
        .skip_while(|l| !l.starts_with("chunks "))
        .skip(1)
        .take_while(|l| l.starts_with("    0x"))
        .map(|l| l.split(':').next().unwrap_or("").trim().to_owned())
        .collect()
}

#[test]
fn the_compression_engines_old_names_and_none_are_read_and_written_as_hg_writes_them() {
    // (how the repository is made, the requirement it then names, the chunks revfs adds)
    type Case<'a> = (&'a [&'a str], Option<(&'a str, &'a str)>, &'a str);
    let cases: &[Case] = &[
        (&["format.revlog-compression=none"], None, "0x75 (u)"),
        (
            &[],
            Some(("revlog-compression-zstd", "exp-compression-zstd")),
            "0x28",
        ),
        (
            &["format.revlog-compression=zlib"],
            Some(("\nrevlogv1", "\nexp-compression-zlib\nrevlogv1")),
            "0x78 (x)",
        ),
    ];
    for (config, rename, kind) in cases {
        let tmp = revfs_tests::scratch_dir();
        let mut init: Vec<&str> = config.iter().flat_map(|c| ["--config", c]).collect();
        init.extend(["init", "repo"]);
        hg_ok(tmp.path(), &init);
        let repo = tmp.path().join("repo");
        let requires = repo.join(".hg/store/requires");
        if let Some((from, to)) = rename {
            let text = std::fs::read_to_string(&requires).unwrap();
            assert!(text.contains(from), "{text}");
            std::fs::write(&requires, text.replacen(from, to, 1)).unwrap();
        }
        let text = std::fs::read_to_string(&requires).unwrap();
        assert!(text.contains("exp-compression-"), "{config:?}: {text}");
        std::fs::write(repo.join("f"), "first\n").unwrap();
        hg_ok(&repo, &["commit", "-qA", "-m", "first", "-d", "0 0"]);

        let m = Mount::new(&repo, None);
        let many: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        for i in 0..40 {
            std::fs::write(m.dir.join(format!("file with a long name {i}")), &many).unwrap();
        }
        let out = m.revfs_in(&m.dir, &["commit", "-A", "-m", "from revfs", "-d", "1 0"]);
        assert!(out.status.success(), "{config:?}: {out:?}");
        let out = m.revfs_in(&m.dir, &["update", "-r", "0"]);
        assert!(out.status.success(), "{config:?}: {out:?}");
        m.unmount();
        hg_ok(&repo, &["verify", "-q"]);
        assert_eq!(
            hg_ok(&repo, &["cat", "-r", "1", "file with a long name 7"]),
            many
        );
        // The manifest revfs wrote (the only one big enough to compress) in the engine's
        // kind; the others raw (`u`, or a delta's leading NUL).
        let kinds = chunk_kinds(&repo);
        assert!(kinds.iter().any(|k| k == kind), "{config:?}: {kinds:?}");
        assert!(
            kinds
                .iter()
                .all(|k| [*kind, "0x75 (u)", "0x00"].contains(&k.as_str())),
            "{config:?}: {kinds:?}"
        );
    }
}

/// `hg share SOURCE DEST` in `dir`.
fn share(dir: &Path, source: &str, dest: &str) {
    hg_ok(
        dir,
        &["--config", "extensions.share=", "share", "-q", source, dest],
    );
}

#[test]
fn a_share_that_disagrees_with_its_source_on_share_safe_is_refused_with_hgs_abort() {
    let tmp = revfs_tests::scratch_dir();
    hg_ok(tmp.path(), &["init", "repo"]);
    let repo = tmp.path().join("repo");
    std::fs::write(repo.join("f"), "f\n").unwrap();
    hg_ok(&repo, &["commit", "-qA", "-m", "f", "-d", "0 0"]);
    // A share made the old way (before share-safe) of a share-safe source, and a share-safe
    // share of a source that is not.
    share(tmp.path(), "repo", "old");
    let old = tmp.path().join("old");
    let reqs = std::fs::read_to_string(old.join(".hg/requires")).unwrap();
    std::fs::write(old.join(".hg/requires"), reqs.replace("share-safe\n", "")).unwrap();
    hg_ok(
        tmp.path(),
        &["--config", "format.use-share-safe=no", "init", "plain"],
    );
    let plain = tmp.path().join("plain");
    std::fs::write(plain.join("f"), "f\n").unwrap();
    hg_ok(&plain, &["commit", "-qA", "-m", "f", "-d", "0 0"]);
    share(tmp.path(), "plain", "safe");
    let safe = tmp.path().join("safe");
    let reqs = std::fs::read_to_string(safe.join(".hg/requires")).unwrap();
    assert!(!reqs.contains("share-safe"), "{reqs}");
    std::fs::write(safe.join(".hg/requires"), format!("{reqs}share-safe\n")).unwrap();
    std::fs::write(plain.join(".hg/store/requires"), "").unwrap();
    for share in [&old, &safe] {
        let ours = revfs_tests::revfs(share, &["files"]);
        let theirs = hg_cmd(share, &["files"]);
        assert_eq!(
            (ours.status.code(), String::from_utf8_lossy(&ours.stderr)),
            (
                theirs.status.code(),
                String::from_utf8_lossy(&theirs.stderr)
            ),
            "{}",
            share.display()
        );
        assert!(String::from_utf8_lossy(&ours.stderr).contains("share-safe"));
    }
}
