//! `revfs commit` and `revfs update` against real hg: random edit/commit/update cycles on
//! a mount, each commit read back by hg (`log -T json`, `cat` of every file, `status
//! --change`), each update compared with hg's view of the target revision, `hg verify`
//! at the end; commits from hg and revfs racing on one repository; a process reading a
//! file sees the new content as soon as `revfs update` returns.
//!
//! `REVFS_CYCLES` (default 250; tests/long.sh runs more) sets the number of cycles, `REVFS_SEED` the seed.

use revfs_tests::hg::HgServer;
use revfs_tests::mount::{snapshot, Mount, Snap};
use revfs_tests::Rng;
use revfs_tests::{hg_cmd, scratch_dir};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn text(rng: &mut Rng) -> Vec<u8> {
    let lines: [&[u8]; 5] = [
        b"alpha\n",
        b"beta\n",
        b"gamma gamma\n",
        b"\n",
        b"\x00bin\x01",
    ];
    let n = rng.below(12);
    rng.concat(&lines, n)
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A repository made by hg: files in nested directories, an executable, a symlink.
fn make_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    assert!(hg_cmd(dir, &["init", "repo"]).status.success());
    for i in 0..24 {
        let p = repo.join(format!("d{}/sub{}/f{i}.txt", i % 3, i % 2));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("file {i}\nline\n")).unwrap();
    }
    std::fs::write(repo.join("top.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(repo.join("top.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("d0/sub0/f0.txt", repo.join("link")).unwrap();
    let out = hg_cmd(&repo, &["commit", "-qAm", "base", "-d", "0 0"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    repo
}

/// Tracked paths and letters of `revfs status`.
fn status(m: &Mount, extra: &[&str]) -> Vec<(char, String)> {
    let mut args = vec!["-R", m.dir.to_str().unwrap(), "status"];
    args.extend_from_slice(extra);
    let out = m.revfs(&args);
    assert!(out.status.success(), "status: {}", s(&out.stderr));
    s(&out.stdout)
        .lines()
        .map(|l| (l.chars().next().unwrap(), l[2..].to_owned()))
        .collect()
}

fn rv(m: &Mount, args: &[&str]) -> std::process::Output {
    // From inside the mount: file arguments are relative to the current directory.
    m.revfs_in(&m.dir, args)
}

/// What a committed file should be: content and flag (`x`, `l` or empty).
type Expected = BTreeMap<String, (Vec<u8>, &'static str)>;

fn mount_files(root: &Path) -> Expected {
    snapshot(root)
        .into_iter()
        .filter_map(|(p, snap)| {
            let p = p.to_string_lossy().into_owned();
            match snap {
                Snap::Dir => None,
                Snap::File { data, exec, .. } => Some((p, (data, if exec { "x" } else { "" }))),
                Snap::Link(t) => Some((p, (t, "l"))),
            }
        })
        .collect()
}

/// Every file of revision `rev` as hg sees it.
fn hg_files(hg: &mut HgServer, rev: &str, scratch: &Path) -> Expected {
    let out_dir = scratch.join(format!("cat-{rev}"));
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir).unwrap();
    let manifest = hg.run(&["manifest", "--debug", "-r", rev]);
    assert_eq!(manifest.code, 0, "{}", s(&manifest.stderr));
    let pattern = format!("{}/%p", out_dir.display());
    let cat = hg.run(&["cat", "-r", rev, "-o", &pattern, "glob:**"]);
    assert!(
        cat.code == 0 || s(&manifest.stdout).is_empty(),
        "{}",
        s(&cat.stderr)
    );
    let mut out = Expected::new();
    for line in s(&manifest.stdout).lines() {
        // NODE PERM [*@] PATH
        let mut parts = line.splitn(3, ' ');
        let (_node, perm, rest) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let (flag, path) = if let Some(p) = rest.strip_prefix("@ ") {
            ("l", p)
        } else if let Some(p) = rest.strip_prefix("* ") {
            ("x", p)
        } else {
            (
                if perm == "755" { "x" } else { "" },
                rest.trim_start_matches(' '),
            )
        };
        let data = std::fs::read(out_dir.join(path)).unwrap();
        out.insert(path.to_owned(), (data, flag));
    }
    out
}

/// One random change to the mount, recorded with revfs commands where hg would need one.
fn random_edit(rng: &mut Rng, m: &Mount, log: &mut Vec<String>) {
    let files: Vec<String> = mount_files(&m.dir).into_keys().collect();
    let pick = |rng: &mut Rng| files[rng.below(files.len())].clone();
    let root = &m.dir;
    match rng.below(10) {
        0..=3 if !files.is_empty() => {
            let f = pick(rng);
            let p = root.join(&f);
            if std::fs::symlink_metadata(&p)
                .unwrap()
                .file_type()
                .is_symlink()
            {
                return;
            }
            let data = text(rng);
            if rng.below(2) == 0 {
                std::fs::write(&p, &data).unwrap();
            } else {
                use std::io::Write;
                let mut fh = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
                fh.write_all(&data).unwrap();
            }
            log.push(format!("write {f}"));
        }
        4 | 5 => {
            let f = format!("d{}/new{}.txt", rng.below(4), rng.below(30));
            let p = root.join(&f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text(rng)).unwrap();
            let out = rv(m, &["add", &format!("path:{f}")]);
            assert!(out.status.success(), "add: {}", s(&out.stderr));
            log.push(format!("create+add {f}"));
        }
        6 if !files.is_empty() => {
            let f = pick(rng);
            let out = rv(m, &["remove", "-f", &format!("path:{f}")]);
            // hg's exit 1 for an untracked file, silently for a dangling symlink.
            let untracked = s(&out.stderr).contains("file is untracked")
                || (s(&out.stderr).is_empty() && std::fs::metadata(root.join(&f)).is_err());
            assert!(
                out.status.success() || untracked,
                "remove: {}",
                s(&out.stderr)
            );
            log.push(format!("remove {f}"));
        }
        7 if !files.is_empty() => {
            let f = pick(rng);
            let p = root.join(&f);
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if !meta.file_type().is_symlink() {
                let mode = meta.permissions().mode() ^ 0o111;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
                log.push(format!("chmod {f}"));
            }
        }
        8 if !files.is_empty() => {
            let f = pick(rng);
            let to = format!("moved/{}", f.replace('/', "_"));
            std::fs::create_dir_all(root.join("moved")).unwrap();
            let how = rng.below(3);
            if how > 0 && std::fs::symlink_metadata(root.join(&to)).is_err() {
                let cmd = if how == 1 { "rename" } else { "copy" };
                let out = rv(m, &[cmd, &f, &to]);
                // An untracked source is refused, as by hg.
                let refused = s(&out.stderr).contains("not managed");
                assert!(out.status.success() || refused, "{cmd}: {}", s(&out.stderr));
                log.push(format!("{cmd} {f} {to}"));
            } else if std::fs::rename(root.join(&f), root.join(&to)).is_ok() {
                let out = rv(
                    m,
                    &["addremove", &format!("path:{f}"), &format!("path:{to}")],
                );
                // An untracked file moved away is gone for hg too: its warning, exit 1.
                let gone_untracked = s(&out.stderr) == format!("{f}: No such file or directory\n");
                assert!(
                    out.status.success() || gone_untracked,
                    "addremove: {}",
                    s(&out.stderr)
                );
                log.push(format!("mv {f} {to}"));
            }
        }
        _ => {
            let f = format!("l{}", rng.below(5));
            let p = root.join(&f);
            if std::fs::symlink_metadata(&p).is_err() {
                std::os::unix::fs::symlink(format!("target{}", rng.below(9)), &p).unwrap();
                let out = rv(m, &["add", &format!("path:{f}")]);
                assert!(out.status.success(), "add: {}", s(&out.stderr));
                log.push(format!("symlink {f}"));
            }
        }
    }
}

#[test]
fn edit_commit_update_cycles_are_read_back_identically_by_hg() {
    let cycles: usize = revfs_tests::env_or("REVFS_CYCLES", 250);
    let seed: u64 = revfs_tests::env_or("REVFS_SEED", 0x5eed_c0de);
    let tmp = scratch_dir();
    let repo = make_repo(tmp.path());
    let m = Mount::new(&repo, None);
    let mut hg = HgServer::start(&repo);
    let mut rng = Rng::new(seed);
    let mut log: Vec<String> = Vec::new();
    let mut commits = 0;
    let mut updates = 0;
    for cycle in 0..cycles {
        for _ in 0..1 + rng.below(3) {
            random_edit(&mut rng, &m, &mut log);
        }
        let ctx = |log: &[String]| {
            format!(
                "seed {seed} cycle {cycle}; last operations:\n{}",
                log[log.len().saturating_sub(12)..].join("\n")
            )
        };
        if rng.below(10) < 7 {
            // Commit everything, or only some of the changed files.
            let st: Vec<(char, String)> = status(&m, &[])
                .into_iter()
                .filter(|(l, _)| matches!(l, 'M' | 'A' | 'R'))
                .collect();
            let p1 = s(&rv(&m, &["log", "-r", ".", "-T", "{node}"]).stdout);
            // Copy sources as `status -C` shows them: dest -> source.
            let mut copies: BTreeMap<String, String> = BTreeMap::new();
            let mut last_dest = String::new();
            for line in s(&rv(&m, &["status", "-C"]).stdout).lines() {
                if let Some(src) = line.strip_prefix("  ") {
                    copies.insert(last_dest.clone(), src.to_owned());
                } else {
                    last_dest = line[2..].to_owned();
                }
            }
            let partial = st.len() > 1 && rng.below(4) == 0;
            let mut chosen: Vec<(char, String)> = if partial {
                st.iter().filter(|_| rng.below(2) == 0).cloned().collect()
            } else {
                st.clone()
            };
            let partial = partial && !chosen.is_empty();
            if !partial {
                chosen = st.clone();
            }
            let mut expected: Expected = if p1.starts_with("0000000") {
                Expected::new()
            } else {
                hg_files(&mut hg, &p1, tmp.path())
            };
            let mut want_copies: Vec<String> = chosen
                .iter()
                .filter(|(l, _)| *l != 'R')
                .filter_map(|(_, p)| {
                    let src = copies.get(p)?;
                    expected.contains_key(src).then(|| format!("{p} ({src})"))
                })
                .collect();
            want_copies.sort();
            let now = mount_files(&m.dir);
            for (l, p) in &chosen {
                if *l == 'R' {
                    expected.remove(p);
                } else {
                    expected.insert(p.clone(), now[p].clone());
                }
            }
            let user = format!("user{} <u@example.org>", rng.below(5));
            let date = format!(
                "{} {}",
                1_000_000 + cycle * 100,
                [0, -3600, 7200][rng.below(3)]
            );
            let msg = format!("cycle {cycle}\n\nbody {}", rng.below(100));
            let mut args = vec!["commit", "-m", &msg, "-u", &user, "-d", &date];
            let pats: Vec<String> = chosen.iter().map(|(_, p)| format!("path:{p}")).collect();
            if partial {
                args.extend(pats.iter().map(String::as_str));
            }
            let out = rv(&m, &args);
            if chosen.is_empty() {
                assert_eq!(out.status.code(), Some(1), "{}", ctx(&log));
                assert_eq!(s(&out.stdout), "nothing changed\n");
                continue;
            }
            assert!(
                out.status.success(),
                "commit: {}\n{}",
                s(&out.stderr),
                ctx(&log)
            );
            commits += 1;
            log.push(format!("commit {}", chosen.len()));
            let node = s(&rv(&m, &["log", "-r", ".", "-T", "{node}"]).stdout);
            assert_ne!(node, p1, "{}", ctx(&log));
            // hg reads back what revfs committed.
            let j = hg.run(&[
                "log",
                "-r",
                &node,
                "-T",
                "{p1node}|{author}|{date|hgdate}|{desc}|{join(files, ',')}",
            ]);
            let c = hg.run(&["log", "-r", &node, "-T", "{join(file_copies, '\\n')}"]);
            let mut got_copies: Vec<String> = s(&c.stdout).lines().map(str::to_owned).collect();
            got_copies.sort();
            assert_eq!(got_copies, want_copies, "copies\n{}", ctx(&log));
            assert_eq!(j.code, 0, "{}", s(&j.stderr));
            let mut files: Vec<&str> = chosen.iter().map(|(_, p)| p.as_str()).collect();
            files.sort();
            let (secs, tz) = date.split_once(' ').unwrap();
            assert_eq!(
                s(&j.stdout),
                format!("{p1}|{user}|{secs} {tz}|{msg}|{}", files.join(",")),
                "{}",
                ctx(&log)
            );
            let stc = hg.run(&["status", "--change", &node]);
            let mut want: Vec<String> = chosen.iter().map(|(l, p)| format!("{l} {p}")).collect();
            want.sort_by_key(|l| ("MAR".find(&l[..1]).unwrap(), l[2..].to_owned()));
            assert_eq!(
                s(&stc.stdout),
                want.iter().map(|l| format!("{l}\n")).collect::<String>(),
                "{}",
                ctx(&log)
            );
            let got = hg_files(&mut hg, &node, tmp.path());
            assert!(
                got == expected,
                "hg cat differs from what was committed\n{}\nonly in hg: {:?}\nonly expected: {:?}",
                ctx(&log),
                got.iter()
                    .filter(|(k, v)| expected.get(*k) != Some(v))
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>(),
                expected
                    .iter()
                    .filter(|(k, v)| got.get(*k) != Some(v))
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>()
            );
            // The committed paths are clean now; the others are still changes.
            let after = status(&m, &[]);
            for (l, p) in &st {
                let still = after.iter().any(|(_, q)| q == p);
                let committed = chosen.iter().any(|(_, q)| q == p);
                assert_eq!(still, !committed, "{l} {p} after commit\n{}", ctx(&log));
            }
        } else {
            let revs: usize = s(&hg.run(&["log", "-r", "tip", "-T", "{rev}"]).stdout)
                .parse()
                .unwrap();
            let target = rng.below(revs + 1).to_string();
            let clean = rng.below(2) == 0;
            let before = status(&m, &[]);
            let mut args = vec!["update", "-r", &target];
            if clean {
                args.push("-C");
            }
            let out = rv(&m, &args);
            log.push(format!("update {target} clean={clean}"));
            if !out.status.success() {
                assert!(
                    !clean,
                    "update -C failed: {}\n{}",
                    s(&out.stderr),
                    ctx(&log)
                );
                let err = s(&out.stderr);
                assert!(
                    err == "abort: uncommitted changes\n(commit or update --clean to discard changes)\n"
                        || err == "abort: uncommitted changes in files this update changes would need a merge, which revfs does not do (use hg instead)\n"
                        || err.ends_with("abort: untracked files in working directory differ from files in requested revision\n"),
                    "{err}"
                );
                assert_eq!(status(&m, &[]), before, "a refused update changed nothing");
                continue;
            }
            updates += 1;
            let node = s(&hg.run(&["log", "-r", &target, "-T", "{node}"]).stdout);
            assert_eq!(s(&rv(&m, &["log", "-r", ".", "-T", "{node}"]).stdout), node);
            let after = status(&m, &[]);
            let changed: Vec<&String> = after
                .iter()
                .filter(|(l, _)| *l != '?')
                .map(|(_, p)| p)
                .collect();
            if clean {
                assert!(
                    changed.is_empty(),
                    "changes left after update -C: {after:?}\n{}",
                    ctx(&log)
                );
            }
            // Every file hg has in the target that has no local change is identical.
            let want = hg_files(&mut hg, &node, tmp.path());
            if !clean {
                // Local changes are carried over (an untracked file that the target has,
                // with the same content, becomes tracked, as in hg).
                let kept: Vec<(char, String)> = before
                    .iter()
                    .filter(|(l, p)| !(*l == '?' && want.contains_key(p)))
                    // A file already removed here that the target removes too is no
                    // change any more (hg's working manifest does not have it).
                    .filter(|(l, p)| !matches!(l, 'R' | '!') || want.contains_key(p))
                    .cloned()
                    .collect();
                assert_eq!(after, kept, "{}", ctx(&log));
            }
            let have = mount_files(&m.dir);
            for (p, v) in &want {
                if changed.contains(&p) {
                    continue;
                }
                assert_eq!(
                    have.get(p),
                    Some(v),
                    "{p} after update to {target}\n{}",
                    ctx(&log)
                );
            }
            for p in have.keys() {
                let tracked_or_unknown = want.contains_key(p) || after.iter().any(|(_, q)| q == p);
                assert!(
                    tracked_or_unknown,
                    "{p} should not be there after update\n{}",
                    ctx(&log)
                );
            }
        }
        if cycle % 97 == 96 {
            // The working copy survives a remount at any point.
            let before = status(&m, &["-A"]);
            let files = mount_files(&m.dir);
            m.unmount();
            m.remount(&repo, None);
            assert_eq!(
                status(&m, &["-A"]),
                before,
                "status after remount\n{}",
                ctx(&log)
            );
            assert!(
                mount_files(&m.dir) == files,
                "files after remount\n{}",
                ctx(&log)
            );
        }
    }
    assert!(commits >= cycles / 3, "only {commits} commits");
    assert!(updates >= cycles / 10, "only {updates} updates");
    let v = hg_cmd(&repo, &["verify", "-q"]);
    assert!(
        v.status.success(),
        "hg verify: {}{}",
        s(&v.stdout),
        s(&v.stderr)
    );
}

#[test]
fn a_new_reader_sees_the_new_content_as_soon_as_update_returns_and_an_open_one_the_old() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let tmp = scratch_dir();
    let repo = tmp.path().join("repo");
    assert!(hg_cmd(tmp.path(), &["init", "repo"]).status.success());
    std::fs::create_dir_all(repo.join("dir")).unwrap();
    std::fs::write(repo.join("changed"), b"old content\n").unwrap();
    std::fs::write(repo.join("same"), b"same\n").unwrap();
    std::fs::write(repo.join("dir/gone"), b"gone\n").unwrap();
    assert!(hg_cmd(&repo, &["commit", "-qAm", "0", "-d", "0 0"])
        .status
        .success());
    std::fs::write(repo.join("changed"), b"new content, longer\n").unwrap();
    std::fs::write(repo.join("born"), b"born\n").unwrap();
    std::fs::create_dir_all(repo.join("newdir")).unwrap();
    std::fs::write(repo.join("newdir/f"), b"f\n").unwrap();
    assert!(hg_cmd(&repo, &["rm", "-q", "dir/gone"]).status.success());
    assert!(hg_cmd(&repo, &["commit", "-qAm", "1", "-d", "0 0"])
        .status
        .success());

    let m = Mount::new(&repo, Some("0"));
    let root = &m.dir;
    // Fill the kernel's caches: data, attributes, negative entries.
    let fh = std::fs::File::open(root.join("changed")).unwrap();
    let mut buf = vec![0u8; 64];
    let n = fh.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"old content\n");
    assert_eq!(
        std::fs::read(root.join("changed")).unwrap(),
        b"old content\n"
    );
    let same_ino = std::fs::metadata(root.join("same")).unwrap().ino();
    let same_mtime = std::fs::metadata(root.join("same")).unwrap().mtime();
    let changed_mtime = std::fs::metadata(root.join("changed")).unwrap().mtime();
    assert!(std::fs::metadata(root.join("born")).is_err());
    assert!(std::fs::metadata(root.join("newdir/f")).is_err());
    assert_eq!(std::fs::read(root.join("dir/gone")).unwrap(), b"gone\n");
    let listing: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(listing.len(), 3);
    std::thread::sleep(std::time::Duration::from_millis(1100));

    let out = rv(&m, &["update", "1"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(
        s(&out.stdout),
        "3 files updated, 0 files merged, 1 files removed, 0 files unresolved\n"
    );
    // The open descriptor goes on reading the revision it opened, whole (as after a
    // checkout that writes a new file and renames it into place); immediately: a new
    // open, stat, lookups and listings see the new one.
    let n = fh.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"old content\n");
    assert_eq!(
        std::fs::read(root.join("changed")).unwrap(),
        b"new content, longer\n"
    );
    assert_eq!(std::fs::metadata(root.join("changed")).unwrap().len(), 20);
    assert!(std::fs::metadata(root.join("changed")).unwrap().mtime() > changed_mtime);
    assert_eq!(std::fs::read(root.join("born")).unwrap(), b"born\n");
    assert_eq!(std::fs::read(root.join("newdir/f")).unwrap(), b"f\n");
    assert!(std::fs::metadata(root.join("dir/gone")).is_err());
    assert!(
        std::fs::metadata(root.join("dir")).is_err(),
        "the emptied directory goes"
    );
    let mut listing: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listing.sort();
    assert_eq!(listing, ["born", "changed", "newdir", "same"]);
    // The unchanged file kept its inode and its time.
    let meta = std::fs::metadata(root.join("same")).unwrap();
    assert_eq!((meta.ino(), meta.mtime()), (same_ino, same_mtime));
    // And back.
    let out = rv(&m, &["update", "0"]);
    assert!(out.status.success(), "{}", s(&out.stderr));
    assert_eq!(
        s(&out.stdout),
        "2 files updated, 0 files merged, 2 files removed, 0 files unresolved\n"
    );
    let n = fh.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"old content\n");
    assert!(std::fs::metadata(root.join("born")).is_err());
    assert!(std::fs::metadata(root.join("newdir")).is_err());
    assert_eq!(std::fs::read(root.join("dir/gone")).unwrap(), b"gone\n");
}

#[test]
fn revfs_and_hg_commit_to_one_repository_at_the_same_time() {
    let rounds: usize = revfs_tests::env_or("REVFS_CONCURRENT_ROUNDS", 50);
    let tmp = scratch_dir();
    let repo = make_repo(tmp.path());
    let m = Mount::new(&repo, None);
    let hg_side = {
        let repo = repo.clone();
        std::thread::spawn(move || {
            for i in 0..rounds {
                std::fs::write(repo.join("d0/sub0/f0.txt"), format!("hg {i}\n")).unwrap();
                let out = hg_cmd(&repo, &["commit", "-m", &format!("hg {i}"), "-d", "0 0"]);
                assert!(out.status.success(), "hg commit {i}: {}", s(&out.stderr));
            }
        })
    };
    for i in 0..rounds {
        std::fs::write(m.dir.join("d1/sub1/f1.txt"), format!("revfs {i}\n")).unwrap();
        let out = rv(&m, &["commit", "-m", &format!("revfs {i}"), "-d", "0 0"]);
        assert!(out.status.success(), "revfs commit {i}: {}", s(&out.stderr));
    }
    hg_side.join().unwrap();
    let log = hg_cmd(&repo, &["log", "-T", "{desc}\n"]);
    let descs: std::collections::BTreeSet<String> =
        s(&log.stdout).lines().map(str::to_owned).collect();
    for i in 0..rounds {
        assert!(descs.contains(&format!("hg {i}")), "hg {i} lost");
        assert!(descs.contains(&format!("revfs {i}")), "revfs {i} lost");
    }
    assert_eq!(descs.len(), 2 * rounds + 1);
    let v = hg_cmd(&repo, &["verify", "-q"]);
    assert!(
        v.status.success(),
        "hg verify: {}{}",
        s(&v.stdout),
        s(&v.stderr)
    );
    // Each side's working copy is where its last commit left it.
    assert_eq!(status(&m, &[]), vec![]);
    assert_eq!(s(&hg_cmd(&repo, &["status"]).stdout), "");
    assert_eq!(
        s(&rv(&m, &["log", "-r", ".", "-T", "{desc}"]).stdout),
        format!("revfs {}", rounds - 1)
    );
}

#[test]
fn a_write_racing_with_commits_is_committed_or_still_modified_never_lost() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = scratch_dir();
    let repo = make_repo(tmp.path());
    let m = Mount::new(&repo, None);
    let target = m.dir.join("d0/sub0/f0.txt");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let writer = {
        let (target, stop) = (target.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::io::{Seek, Write};
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                // Same length every time: an overwrite in place, never a truncation.
                f.seek(std::io::SeekFrom::Start(0)).unwrap();
                f.write_all(format!("version {i:012}\n").as_bytes())
                    .unwrap();
            }
            i
        })
    };
    let mut committed = 0;
    for round in 0..40 {
        let out = rv(&m, &["commit", "-m", &format!("race {round}")]);
        match out.status.code() {
            Some(0) => committed += 1,
            Some(1) => assert_eq!(s(&out.stdout), "nothing changed\n"),
            _ => panic!("commit: {}", s(&out.stderr)),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let last = writer.join().unwrap();
    assert!(committed > 0);
    let want = format!("version {last:012}\n");
    // The last write is in the file, whatever the commits took.
    assert_eq!(std::fs::read_to_string(&target).unwrap(), want);
    // Either the last commit has it, or status says the file is modified.
    let tip = hg_cmd(&repo, &["cat", "-r", "tip", "d0/sub0/f0.txt"]);
    let st = status(&m, &[]);
    if s(&tip.stdout) == want {
        assert_eq!(st, vec![]);
    } else {
        assert_eq!(st, vec![('M', "d0/sub0/f0.txt".to_owned())]);
        assert!(rv(&m, &["commit", "-m", "last"]).status.success());
        let tip = hg_cmd(&repo, &["cat", "-r", "tip", "d0/sub0/f0.txt"]);
        assert_eq!(s(&tip.stdout), want);
    }
    // Every committed version is one the writer wrote, whole.
    let log = hg_cmd(&repo, &["log", "-T", "{rev}\n", "-r", "1:"]);
    for rev in s(&log.stdout).lines() {
        let c = hg_cmd(&repo, &["cat", "-r", rev, "d0/sub0/f0.txt"]);
        let text = s(&c.stdout);
        assert!(
            text.starts_with("version ") && text.len() == want.len(),
            "rev {rev}: {text:?}"
        );
    }
    assert!(hg_cmd(&repo, &["verify", "-q"]).status.success());
}
