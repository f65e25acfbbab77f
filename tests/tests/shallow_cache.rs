//! The shared cache of remotefilelog blobs (store::shallow), against Mercurial's own
//! remotefilelog client and server: hg fetches a shallow working copy's files from a real
//! server into the cache, revfs reads and verifies every blob (the text equals the server's
//! `hg cat`), refuses a blob with one byte flipped, and a blob revfs writes is read by hg
//! with the server gone. The server is `hg serve --stdio` behind a fake ssh that runs it
//! locally (as Mercurial's own tests do): hg's client fills the shared cache over ssh only
//! (docs/research/remotefilelog-protocol.md, 1).

use revfs_store::shallow::{CacheError, ShallowError, SharedCache};
use revfs_store::Node;
use revfs_tests::hg_cmd;
use std::path::Path;

fn hg_ok(dir: &Path, args: &[&str]) -> String {
    let out = hg_cmd(dir, args);
    assert!(out.status.success(), "hg {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn blobs_hg_fetched_from_a_server_verify_a_flipped_byte_is_refused_and_hg_reads_what_revfs_writes()
{
    let tmp = revfs_tests::scratch_dir();
    let t = tmp.path();
    // The server's history: edits, a rename, a text that starts like copy metadata, a binary
    // file, a tag.
    hg_ok(t, &["init", "server"]);
    let srv = t.join("server");
    std::fs::write(
        srv.join(".hg/hgrc"),
        "[extensions]\nremotefilelog =\n[remotefilelog]\nserver = True\n",
    )
    .unwrap();
    std::fs::create_dir_all(srv.join("dir")).unwrap();
    std::fs::write(srv.join("a"), "a1\n").unwrap();
    std::fs::write(srv.join("b"), "b1\n").unwrap();
    std::fs::write(srv.join("dir/c"), "c1\n").unwrap();
    hg_ok(&srv, &["commit", "-qA", "-m", "1", "-d", "0 0"]);
    std::fs::write(srv.join("a"), "a1\na2\n").unwrap();
    hg_ok(&srv, &["mv", "b", "dir/renamed"]);
    std::fs::write(srv.join("meta"), "\x01\nnot metadata\n\x01\nbody\n").unwrap();
    std::fs::write(srv.join("bin"), [0u8, 1, 2, 255, 0, 10]).unwrap();
    hg_ok(&srv, &["commit", "-qA", "-m", "2", "-d", "1 0"]);
    hg_ok(&srv, &["tag", "-d", "2 0", "v1"]);

    // hg's shallow clone over a fake ssh, then an update that fetches every file.
    let ssh = t.join("dummyssh");
    std::fs::write(&ssh, "#!/bin/sh\nshift\nexec sh -c \"$1\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cache_dir = t.join("cache");
    let config = format!(
        "[extensions]\nremotefilelog =\n[remotefilelog]\ncachepath = {}\nreponame = srv\n\
         excludepattern = .hgtags\n[ui]\nssh = {}\n",
        cache_dir.display(),
        ssh.display()
    );
    let rc = t.join("client.rc");
    std::fs::write(&rc, &config).unwrap();
    let url = format!("ssh://user@dummy/{}", srv.display());
    let hg_client = |dir: &Path, args: &[&str]| {
        let out = revfs_tests::hg_env(std::process::Command::new("hg").args(args).current_dir(dir))
            .env("HGRCPATH", &rc)
            .output()
            .unwrap();
        assert!(out.status.success(), "hg {args:?}: {out:?}");
        out.stdout
    };
    hg_client(t, &["clone", "-q", "--shallow", "-U", &url, "shallow"]);
    let shallow = t.join("shallow");
    let reqs = std::fs::read_to_string(shallow.join(".hg/requires")).unwrap()
        + &std::fs::read_to_string(shallow.join(".hg/store/requires")).unwrap_or_default();
    assert!(reqs.contains("remotefilelog"), "{reqs}");
    hg_client(&shallow, &["update", "-q", "tip"]);

    // Every file of every revision hg fetched: revfs reads and verifies it, and its text is
    // the server's.
    let cache = SharedCache::new(&cache_dir, "srv");
    let mut read = 0;
    for rev in ["0", "1"] {
        let manifest = hg_ok(&srv, &["manifest", "--debug", "-r", rev]);
        for line in manifest.lines() {
            // "<node> <mode> <flag> <path>": 40 hex digits, " 644", then " * ", " @ " or
            // three spaces.
            let (hexnode, rest) = line.split_at(40);
            let path = &rest[7..];
            if path == ".hgtags" {
                continue; // a filelog of its own in the shallow clone (excludepattern)
            }
            let node = Node::from_hex(hexnode.as_bytes()).unwrap();
            hg_client(&shallow, &["cat", "-r", rev, path]); // fetched if it was not yet
            let blob = cache
                .get(path.as_bytes(), &node)
                .unwrap()
                .unwrap_or_else(|| panic!("{path}@{hexnode}: not in the cache"));
            let text = hg_cmd(&srv, &["cat", "-r", rev, path]).stdout;
            assert_eq!(blob.text, text, "{path}@{rev}");
            read += 1;
        }
    }
    assert_eq!(read, 8, "blobs: 3 of r0, 5 of r1");
    let dirnode = |rev: &str, path: &str| -> Node {
        let m = hg_ok(&srv, &["manifest", "--debug", "-r", rev]);
        let line = m
            .lines()
            .find(|l| l.ends_with(&format!(" {path}")))
            .unwrap();
        Node::from_hex(&line.as_bytes()[..40]).unwrap()
    };
    // The rename's blob names its source.
    let renamed = dirnode("1", "dir/renamed");
    let blob = cache.get(b"dir/renamed", &renamed).unwrap().unwrap();
    assert_eq!(blob.ancestors[0].copy_from.as_deref(), Some(&b"b"[..]));

    // One byte flipped in a cached blob: refused, naming the file.
    let a = dirnode("1", "a");
    let file = cache.blob_path(b"a", &a);
    let good = std::fs::read(&file).unwrap();
    let mut bad = good.clone();
    bad[3] ^= 0x20;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&file, &bad).unwrap();
    match cache.get(b"a", &a) {
        Err(CacheError::Blob(ShallowError::HashMismatch { path, .. })) => assert_eq!(path, "a"),
        other => panic!("{other:?}"),
    }
    // And never written by revfs.
    std::fs::remove_file(&file).unwrap();
    assert!(cache.insert(b"a", &a, &bad).is_err());
    assert!(!file.exists());

    // What revfs writes, hg reads: the blob written back by revfs, the server gone.
    cache.insert(b"a", &a, &good).unwrap();
    std::fs::rename(&srv, t.join("gone")).unwrap();
    assert_eq!(hg_client(&shallow, &["cat", "-r", "1", "a"]), b"a1\na2\n");
}
