//! Repositories whose manifests hold hostile paths (`../escape`, `/abs`, `.hg/hgrc`,
//! `a/../../b`, empty components, a file and a directory with one name): revfs refuses or
//! leaves out each one with a message, and never creates or reads anything outside the
//! mount, the output directory or the store.

use revfs_store::revlog_writer::{Compression, RevlogWriter};
use revfs_store::{Node, NULL_REV};
use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, revfs};
use std::path::Path;

const HOSTILE: &[&str] = &[
    "../escape",
    "/abs",
    ".hg/hgrc",
    "a/../../b",
    "a//b",
    "sub/../../up",
    ".HG/x",
];

/// A one-changeset repository written with revfs's own revlog writer: safe files with
/// content, plus manifest entries for every hostile path.
fn hostile_repo(root: &Path) {
    hostile_repo_with(root, |_| {});
}

/// The same, with the manifest text passed through `edit` before it is stored.
fn hostile_repo_with(root: &Path, edit: impl Fn(&mut Vec<u8>)) {
    assert!(hg_cmd(
        root.parent().unwrap(),
        &["init", root.file_name().unwrap().to_str().unwrap()]
    )
    .status
    .success());
    let store = root.join(".hg/store");
    let mut manifest: Vec<(Vec<u8>, Node)> = Vec::new();
    let mut flags: Vec<(Vec<u8>, &str)> = Vec::new();
    for (path, content, flag) in [
        ("a.txt", &b"safe\n"[..], ""),
        ("sub/b.txt", b"also safe\n", ""),
        ("x", b"file x\n", ""),
        // Names equal but for case: both served, as hg does on a case-sensitive system.
        ("README", b"upper\n", ""),
        ("readme", b"lower\n", ""),
        // A symlink that a later entry also makes a directory.
        ("l", b"a.txt", "l"),
    ] {
        // hg's store encoding of upper-case letters.
        let encoded: String = path
            .chars()
            .map(|c| {
                if c.is_ascii_uppercase() {
                    format!("_{}", c.to_ascii_lowercase())
                } else {
                    c.to_string()
                }
            })
            .collect();
        let stem = format!("data/{encoded}");
        let idx = store.join(format!("{stem}.i"));
        std::fs::create_dir_all(idx.parent().unwrap()).unwrap();
        let mut w = RevlogWriter::open(
            &idx,
            &store.join(format!("{stem}.d")),
            true,
            Compression::Zstd,
        )
        .unwrap();
        let (_, node) = w.add(content, NULL_REV, NULL_REV, 0, false).unwrap();
        w.finish().unwrap();
        manifest.push((path.as_bytes().to_vec(), node));
        flags.push((path.as_bytes().to_vec(), flag));
    }
    // Hostile entries, "x/y" which makes "x" both a file and a directory, "l/z" which
    // makes the symlink "l" a directory too.
    for p in HOSTILE.iter().chain(&["x/y", "l/z"]) {
        manifest.push((p.as_bytes().to_vec(), Node([0x11; 20])));
    }
    manifest.sort();
    let mut text = Vec::new();
    for (p, n) in &manifest {
        text.extend_from_slice(p);
        text.push(0);
        text.extend_from_slice(n.to_hex().as_bytes());
        if let Some((_, f)) = flags.iter().find(|(fp, _)| fp == p) {
            text.extend_from_slice(f.as_bytes());
        }
        text.push(b'\n');
    }
    edit(&mut text);
    let mut mw = RevlogWriter::open(
        &store.join("00manifest.i"),
        &store.join("00manifest.d"),
        true,
        Compression::Zstd,
    )
    .unwrap();
    let (_, mnode) = mw.add(&text, NULL_REV, NULL_REV, 0, true).unwrap();
    mw.finish().unwrap();
    let cl_text = format!("{}\nmallory\n0 0\na.txt\n\nhostile", mnode.to_hex());
    let mut cw = RevlogWriter::open(
        &store.join("00changelog.i"),
        &store.join("00changelog.d"),
        false,
        Compression::Zstd,
    )
    .unwrap()
    .store_deltas(false);
    cw.add(cl_text.as_bytes(), NULL_REV, NULL_REV, 0, false)
        .unwrap();
    cw.finish().unwrap();
}

#[test]
fn hostile_manifest_paths_never_escape() {
    let tmp = revfs_tests::scratch_dir();
    let repo = tmp.path().join("repo");
    hostile_repo(&repo);
    std::fs::write(repo.join(".hg/escape.i"), b"not a revlog").unwrap();

    // cat -o refuses to write outside the target, and writes nothing out there.
    let out_dir = tmp.path().join("out");
    let out = revfs(
        &repo,
        &[
            "cat",
            "-r",
            "0",
            "-o",
            &format!("{}/%p", out_dir.display()),
            ".",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(255),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("abort: "));
    assert!(!tmp.path().join("escape").exists() && !Path::new("/abs").exists());
    // Reading a hostile path's content is refused before the store is touched.
    let out = revfs(&repo, &["cat", "-r", "0", "a/../../b"]);
    assert_ne!(out.status.code(), Some(0));

    // The mount serves the safe entries only, says why, and creates nothing outside.
    let mount = Mount::new(&repo, Some("0"));
    let mut names: Vec<String> = std::fs::read_dir(&mount.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec!["README", "a", "a.txt", "l", "readme", "sub", "x"],
        "served root entries"
    );
    assert_eq!(std::fs::read(mount.dir.join("README")).unwrap(), b"upper\n");
    assert_eq!(std::fs::read(mount.dir.join("readme")).unwrap(), b"lower\n");
    assert_eq!(
        std::fs::read_link(mount.dir.join("l")).unwrap(),
        Path::new("a.txt"),
        "the symlink is served, the directory under the same name is not"
    );
    assert!(std::fs::symlink_metadata(mount.dir.join("x"))
        .unwrap()
        .is_file());
    assert_eq!(std::fs::read(mount.dir.join("a.txt")).unwrap(), b"safe\n");
    assert_eq!(
        std::fs::read(mount.dir.join("sub/b.txt")).unwrap(),
        b"also safe\n"
    );
    // The manifest's `.hg` paths are not served: `.hg` is the mount's hg share.
    assert_eq!(
        std::fs::canonicalize(mount.dir.join(".hg")).unwrap(),
        std::fs::canonicalize(mount.state_dir().join("hg")).unwrap()
    );
    assert!(!mount.dir.join(".HG").exists());
    assert!(
        std::fs::read_dir(mount.dir.join("a"))
            .unwrap()
            .next()
            .is_none(),
        "a/../.. and a//b are not served"
    );
    assert!(!mount.dir.join("up").exists() && !tmp.path().join("up").exists());
    let log = mount.log();
    assert!(
        log.contains("not served"),
        "the log says what was left out: {log}"
    );
    assert!(log.contains("both a file and a directory"), "{log}");
}

/// A manifest line whose name holds a newline or a NUL cannot be parsed as hg writes
/// manifests: listing the directory fails with EIO and the log names the manifest, and the
/// commands abort naming it; nothing else is served from it.
#[test]
fn manifests_with_newlines_or_nuls_in_names_are_refused_by_name() {
    for (what, bad) in [("newline", &b"new\nline"[..]), ("NUL", b"nul\0byte")] {
        let tmp = revfs_tests::scratch_dir();
        let repo = tmp.path().join("repo");
        hostile_repo_with(&repo, |text| {
            let mut line = bad.to_vec();
            line.push(0);
            line.extend_from_slice(Node([0x22; 20]).to_hex().as_bytes());
            line.push(b'\n');
            text.splice(0..0, line);
        });
        let mount = Mount::new(&repo, Some("0"));
        let err = std::fs::read_dir(&mount.dir)
            .and_then(|d| d.collect::<Result<Vec<_>, _>>())
            .expect_err(what);
        assert_eq!(
            err.raw_os_error(),
            Some(5),
            "{what}: EIO expected, got {err}"
        );
        assert!(
            mount.log().contains("is malformed"),
            "{what}: the log names the manifest: {}",
            mount.log()
        );
        let out = revfs(&repo, &["files", "-r", "0"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(255), "{what}: {err}");
        assert!(
            err.starts_with("abort: ") && err.contains("manifest"),
            "{what}: {err}"
        );
        drop(mount);
        assert!(!tmp.path().join("new").exists() && !tmp.path().join("line").exists());
    }
}
