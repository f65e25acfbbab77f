//! A listing carries its entries' attributes (READDIRPLUS) only while a program reads the
//! tree's files: a reader's `lstat` of each entry then needs no lookup, while `find` and
//! `ls` of a tree nobody reads keep its files frozen. The attributes a listing gives are
//! the ones a lookup gives: what the kernel shows equals hg's checkout.

use revfs_tests::mount::Mount;
use revfs_tests::{hg_cmd, hg_repo};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Names in `dir`, listed without a stat of any.
fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// (mode, size, link target or content) of every entry of `dir`.
fn attrs(dir: &Path) -> Vec<(String, u32, u64, Vec<u8>)> {
    list(dir)
        .into_iter()
        .map(|n| {
            let p = dir.join(&n);
            let md = std::fs::symlink_metadata(&p).unwrap();
            let data = if md.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                std::fs::read(&p).unwrap()
            };
            (n, md.mode(), md.size(), data)
        })
        .collect()
}

/// Three directories: `a` of 20 files, `b` and `c` of the same and a symlink and an
/// executable.
fn three_directories(dir: &Path) -> std::path::PathBuf {
    let mut files: Vec<(String, String)> = Vec::new();
    for d in ["a", "b", "c"] {
        for f in 0..20 {
            files.push((format!("{d}/f{f}"), format!("{d} {f}\n").repeat(f + 1)));
        }
    }
    let repo = hg_repo(dir, &files);
    for d in ["b", "c"] {
        std::os::unix::fs::symlink("f3", repo.join(d).join("link")).unwrap();
        let run = repo.join(d).join("run.sh");
        std::fs::write(&run, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let out = hg_cmd(&repo, &["commit", "-qAm", "r1", "-d", "1 0"]);
    assert!(out.status.success(), "{out:?}");
    repo
}

/// Listings of a tree of [`three_directories`] name entries only until `touch` (a read or
/// a stat of a file) shows a program at the files; then, for a second, they carry the
/// entries' attributes, the ones hg checks out.
fn listings_carry_attributes_after(touch: fn(&Path), what: &str) {
    let tmp = revfs_tests::scratch_dir();
    let repo = three_directories(tmp.path());
    let m = Mount::new(&repo, None);
    // Read-ahead's pushes open the files they push through the mount, which thaws them:
    // this is about what listings thaw.
    m.debug_no_push();
    let frozen = || m.stats().get("frozen");

    // Nobody at the files: listings name their entries only, and no file is thawed (a
    // listed directory's files are frozen until looked up).
    assert_eq!(list(&m.dir.join("a")).len(), 20);
    assert_eq!(frozen(), 20, "after a listing with nobody at the files");

    // A file read from its start, or stat'ed: the next listing gives every entry with its
    // attributes, which thaws them (the kernel counts each as a lookup).
    touch(&m.dir.join("a/f0"));
    assert_eq!(list(&m.dir.join("b")).len(), 22);
    assert_eq!(
        frozen(),
        19,
        "after a listing while a program {what} files (a/f0 and b's 22 entries thawed)"
    );
    // What the kernel took from the listing is what hg checks out.
    assert_eq!(attrs(&m.dir.join("b")), attrs(&repo.join("b")));

    // A second later, listings name entries only again; a directory looked up (as `find`
    // enters it) is no stat of a file.
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::symlink_metadata(m.dir.join("c")).unwrap();
    assert_eq!(list(&m.dir.join("c")).len(), 22);
    assert_eq!(
        frozen(),
        19 + 22,
        "after a listing with nobody at the files"
    );
    assert_eq!(attrs(&m.dir.join("c")), attrs(&repo.join("c")));
}

#[test]
fn listings_carry_attributes_only_while_a_program_reads_files() {
    listings_carry_attributes_after(
        |p| {
            std::fs::read(p).unwrap();
        },
        "reads",
    );
}

#[test]
fn listings_carry_attributes_while_a_program_stats_files() {
    // `ls -l`, `find -size`: a stat, no read.
    listings_carry_attributes_after(
        |p| {
            std::fs::symlink_metadata(p).unwrap();
        },
        "stats",
    );
}
