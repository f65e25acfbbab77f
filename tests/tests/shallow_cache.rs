//! The shared cache of remotefilelog blobs (store::shallow), against Mercurial's own
//! remotefilelog client and server: hg fetches a shallow working copy's files from a real
//! server into the cache, revfs reads and verifies every blob (the text equals the server's
//! `hg cat`), refuses a blob with one byte flipped, and a blob revfs writes is read by hg
//! with the server gone. The server is `hg serve --stdio` behind a fake ssh that runs it
//! locally (as Mercurial's own tests do): hg's client fills the shared cache over ssh only
//! (docs/research/remotefilelog-protocol.md, 1).

use revfs_store::shallow::{CacheError, ShallowError, SharedCache};
use revfs_store::Node;
use revfs_tests::{hg_cmd, hg_ok};
use std::path::Path;

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

#[test]
fn a_batch_of_x_rfl_getfile_from_hg_serve_decodes_to_blobs_that_verify() {
    use revfs_remote::wire;
    use revfs_store::shallow::Blob;
    let tmp = revfs_tests::scratch_dir();
    hg_ok(tmp.path(), &["init", "server"]);
    let srv = tmp.path().join("server");
    std::fs::write(
        srv.join(".hg/hgrc"),
        "[extensions]\nremotefilelog =\n[remotefilelog]\nserver = True\n",
    )
    .unwrap();
    // Names the batch escaping and the URL encoding must carry: `;`, `,`, `=`, `:`, a
    // space, non-ASCII.
    let names = ["a;b", "c,d=e", "f:g h", "dir/é"];
    for (i, n) in names.iter().enumerate() {
        let p = srv.join(n);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("{i}\n").repeat(100 + i)).unwrap();
    }
    hg_ok(&srv, &["commit", "-qA", "-m", "1", "-d", "0 0"]);
    hg_ok(&srv, &["mv", "a;b", "moved"]);
    hg_ok(&srv, &["commit", "-qA", "-m", "2", "-d", "1 0"]);
    let manifest = hg_ok(&srv, &["manifest", "--debug", "-r", "tip"]);
    let mut files: Vec<(String, Node)> = manifest
        .lines()
        .map(|l| {
            (
                l[47..].to_owned(),
                Node::from_hex(&l.as_bytes()[..40]).unwrap(),
            )
        })
        .collect();
    assert_eq!(files.len(), 4);
    // hg's server cannot take a non-ASCII argument in X-HgArg headers (Python's parse_qs of
    // bytes decodes them as ASCII: a 500, which a client must meet with an error naming the
    // file, not a hang): asked alone below.
    let i = files.iter().position(|(p, _)| p == "dir/é").unwrap();
    let non_ascii = files.remove(i);

    let served = revfs_tests::served::Served::start(&srv, tmp.path());
    let (status, caps) = served.get("capabilities", &[]);
    assert!(status.contains("200"), "{status}");
    let caps = String::from_utf8_lossy(&caps).into_owned();
    assert!(caps.split(' ').any(|c| c == "x_rfl_getfile"), "{caps}");
    let limit: usize = caps
        .split(' ')
        .find_map(|c| c.strip_prefix("httpheader="))
        .and_then(|v| v.split(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{caps}"));
    // The same files six times over: a batch long enough for several X-HgArg headers.
    let asked: Vec<&(String, Node)> = files.iter().cycle().take(files.len() * 6).collect();
    let hexes: Vec<String> = asked.iter().map(|(_, n)| n.to_hex()).collect();
    let cmds = wire::batch_cmds(asked.iter().zip(&hexes).map(|((p, _), h)| {
        (
            "x_rfl_getfile",
            vec![("file", p.as_bytes()), ("node", h.as_bytes())],
        )
    }));
    let headers = wire::arg_headers(&wire::urlencode(&[("cmds", &cmds)]), limit);
    assert!(headers.len() >= 2, "{} headers", headers.len());
    let (status, body) = served.get("batch", &headers);
    assert!(
        status.contains("200"),
        "{status}: {}",
        std::fs::read_to_string(tmp.path().join("error.log")).unwrap_or_default()
    );
    let answers = wire::split_batch_answer(&body).unwrap();
    assert_eq!(answers.len(), asked.len());
    for ((path, node), answer) in asked.iter().zip(&answers) {
        let bytes = wire::getfile_blob(path, answer, 1 << 20).unwrap();
        let blob = Blob::parse_verified(path.as_bytes(), node, &bytes).unwrap();
        assert_eq!(
            blob.text,
            hg_cmd(&srv, &["cat", "-r", "tip", path]).stdout,
            "{path}"
        );
    }
    let hex = non_ascii.1.to_hex();
    let args = wire::urlencode(&[("file", non_ascii.0.as_bytes()), ("node", hex.as_bytes())]);
    let (status, _) = served.get("x_rfl_getfile", &wire::arg_headers(&args, limit));
    assert!(status.contains("500"), "{status}");
    // The rename names its source.
    let i = files.iter().position(|(p, _)| p == "moved").unwrap();
    let blob = Blob::parse(
        b"moved",
        &files[i].1,
        &wire::getfile_blob("moved", &answers[i], 1 << 20).unwrap(),
    )
    .unwrap();
    assert_eq!(blob.ancestors[0].copy_from.as_deref(), Some(&b"a;b"[..]));
}
