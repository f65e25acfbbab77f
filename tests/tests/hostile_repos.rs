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
    assert!(hg_cmd(
        root.parent().unwrap(),
        &["init", root.file_name().unwrap().to_str().unwrap()]
    )
    .status
    .success());
    let store = root.join(".hg/store");
    let mut manifest: Vec<(Vec<u8>, Node)> = Vec::new();
    for (path, content) in [
        ("a.txt", &b"safe\n"[..]),
        ("sub/b.txt", b"also safe\n"),
        ("x", b"file x\n"),
    ] {
        let stem = format!("data/{path}");
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
    }
    // Hostile entries, and "x/y" which makes "x" both a file and a directory.
    for p in HOSTILE.iter().chain(&["x/y"]) {
        manifest.push((p.as_bytes().to_vec(), Node([0x11; 20])));
    }
    manifest.sort();
    let mut text = Vec::new();
    for (p, n) in &manifest {
        text.extend_from_slice(p);
        text.push(0);
        text.extend_from_slice(n.to_hex().as_bytes());
        text.push(b'\n');
    }
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
    assert_eq!(names, vec!["a", "a.txt", "sub", "x"], "served root entries");
    assert_eq!(std::fs::read(mount.dir.join("a.txt")).unwrap(), b"safe\n");
    assert_eq!(
        std::fs::read(mount.dir.join("sub/b.txt")).unwrap(),
        b"also safe\n"
    );
    assert!(!mount.dir.join(".hg").exists() && !mount.dir.join(".HG").exists());
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
